//! The cloud-node initialisation the AWS cloud controller manager does for kubelets started with
//! `--cloud-provider=external`: set addresses, instance-type/zone/region labels and providerID from the EC2
//! world, then remove the `node.cloudprovider.kubernetes.io/uninitialized` taint. And its node lifecycle: a Node
//! that is not Ready and whose instance EC2 reports terminated is deleted (its pods then go with it).
use super::cache::{next_change, ClusterCache};
use crate::fakes::instances::Instances;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use std::collections::HashMap;
use std::sync::Arc;

pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// The field manager this controller writes Nodes as (what the provenance checks tell apart from the kubelet).
pub const FIELD_MANAGER: &str = "nodejoin-cloud-node";

/// Runs until the task is aborted: initialises each Node the cache shows with the uninitialized taint.
pub async fn run(client: kube::Client, cache: Arc<ClusterCache>, instances: Arc<Instances>) {
    let api: Api<Node> = Api::all(client);
    // The resourceVersion each Node had when it was initialised: the cache shows the old version (taint still
    // on) until the watch brings the patched one, and patching it again would only repeat the work.
    let mut done: HashMap<String, String> = HashMap::new();
    let mut changes = cache.subscribe();
    loop {
        let nodes = cache.snapshot().map(|s| s.nodes).unwrap_or_default();
        done.retain(|name, _| nodes.iter().any(|n| n.metadata.name.as_ref() == Some(name)));
        for node in nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let version = node.metadata.resource_version.clone().unwrap_or_default();
            if let Some(why) = gone(&node, &instances) {
                // As the cloud node lifecycle controller does, every pass: a Node not Ready whose instance EC2
                // reports terminated is deleted.
                match api.delete(&name, &Default::default()).await {
                    Ok(_) => tracing::info!(node = %name, "cloud-node: deleted ({why})"),
                    Err(e) => tracing::debug!("cloud-node: deleting {name}: {e}"),
                }
                continue;
            }
            if done.get(&name) == Some(&version) {
                continue;
            }
            match initialise(&api, &node, &instances).await {
                Ok(()) => {
                    done.insert(name, version);
                }
                Err(e) => tracing::debug!("cloud-node: {e}"),
            }
        }
        next_change(&mut changes, super::RETRY).await;
    }
}

/// Why `node` is to be deleted: not Ready (its kubelet has stopped posting) and its instance, by providerID or
/// else by private DNS name, terminated. A Ready Node is never deleted, as the AWS cloud controller manager
/// looks only at Nodes that are not.
fn gone(node: &Node, instances: &Instances) -> Option<String> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True");
    if ready {
        return None;
    }
    let name = node.metadata.name.clone().unwrap_or_default();
    let by_provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .and_then(|p| p.rsplit('/').next())
        .and_then(|id| instances.by_id(id));
    let instance = by_provider_id.or_else(|| instances.by_private_dns_name(&name))?;
    instances
        .is_terminated(&instance.instance_id)
        .then(|| format!("instance {} terminated, the Node not Ready", instance.instance_id))
}

async fn initialise(api: &Api<Node>, node: &Node, instances: &Instances) -> Result<(), String> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    if !taints.iter().any(|t| t.key == UNINITIALIZED_TAINT) {
        return Ok(());
    }
    let instance = instances
        .by_private_dns_name(&name)
        .or_else(|| {
            let pid = node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.clone())
                .unwrap_or_default();
            pid.rsplit('/').next().and_then(|id| instances.by_id(id))
        })
        .ok_or_else(|| format!("node {name} matches no EC2 instance; leaving it uninitialized"))?;
    let addresses = serde_json::json!([
        { "type": "InternalIP", "address": instance.private_ip.to_string() },
        { "type": "InternalDNS", "address": instance.private_dns_name() },
        { "type": "Hostname", "address": instance.private_dns_name() },
    ]);
    // Its own field manager, so managedFields tell what it set from what the kubelet registered.
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch_status(
        &name,
        &pp,
        &Patch::Merge(serde_json::json!({ "status": { "addresses": addresses } })),
    )
    .await
    .map_err(|e| format!("{name}: status: {e}"))?;
    let remaining: Vec<_> = taints.into_iter().filter(|t| t.key != UNINITIALIZED_TAINT).collect();
    let mut spec = serde_json::json!({ "taints": remaining });
    if node.spec.as_ref().and_then(|s| s.provider_id.as_ref()).is_none() {
        spec["providerID"] = instance.provider_id().into();
    }
    let patch = serde_json::json!({
        "metadata": { "labels": {
            "node.kubernetes.io/instance-type": instance.instance_type,
            "topology.kubernetes.io/region": instance.region,
            "topology.kubernetes.io/zone": instance.availability_zone,
        }},
        "spec": spec,
    });
    api.patch(&name, &pp, &Patch::Merge(patch))
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    tracing::info!(node = %name, instance = %instance.instance_id, "cloud-node: initialised");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};

    fn node(name: &str, provider_id: Option<&str>, ready: &str) -> Node {
        Node {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(NodeSpec {
                provider_id: provider_id.map(str::to_string),
                ..Default::default()
            }),
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn only_a_not_ready_node_of_a_terminated_instance_goes() {
        let instances = Instances::new();
        let i = instances.register(crate::fakes::instances::tests::instance());
        let pid = i.provider_id();
        let dns = i.private_dns_name();
        assert_eq!(
            gone(&node(&dns, Some(&pid), "Unknown"), &instances),
            None,
            "running: kept"
        );
        instances.terminate(&i.instance_id);
        assert_eq!(gone(&node(&dns, Some(&pid), "True"), &instances), None, "Ready: kept");
        assert!(gone(&node(&dns, Some(&pid), "Unknown"), &instances).is_some());
        assert!(
            gone(&node(&dns, None, "False"), &instances).is_some(),
            "matched by name"
        );
        assert_eq!(
            gone(&node("other", None, "Unknown"), &instances),
            None,
            "no instance: not ours to judge"
        );
    }
}
