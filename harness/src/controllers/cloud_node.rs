//! The cloud-node initialisation the AWS cloud controller manager does for kubelets started with
//! `--cloud-provider=external`: set addresses, instance-type/zone/region labels and providerID from the EC2
//! world, then remove the `node.cloudprovider.kubernetes.io/uninitialized` taint.
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
