//! The cloud-node initialisation the AWS cloud controller manager does for kubelets started with
//! `--cloud-provider=external`: set addresses, instance-type/zone/region labels and providerID from the EC2
//! world, then remove the `node.cloudprovider.kubernetes.io/uninitialized` taint.
use crate::fakes::instances::Instances;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::sync::Arc;

pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Runs until the task is aborted.
pub async fn run(client: kube::Client, instances: Arc<Instances>) {
    let api: Api<Node> = Api::all(client);
    loop {
        if let Ok(nodes) = api.list(&ListParams::default()).await {
            for node in nodes.items {
                if let Err(e) = initialise(&api, &node, &instances).await {
                    tracing::debug!("cloud-node: {e}");
                }
            }
        }
        tokio::time::sleep(super::POLL).await;
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
        field_manager: Some(crate::assert::provenance::CLOUD_NODE.into()),
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
