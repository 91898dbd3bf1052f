//! Teardown, run by the pipeline whatever happened: the scenario's containers, instances, Node and CSR objects
//! and bootstrap token go, so a shared control plane is clean for the next scenario; then its cluster name and
//! its lease.
use super::Context;
use crate::assert;
use crate::cluster::objects;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

pub(super) async fn run(cx: &mut Context<'_>) {
    let env = cx.env;
    let nodes = std::mem::take(&mut cx.nodes);
    let mut removals = Vec::new();
    let apis = cx.cluster.as_ref().map(|c| {
        (
            Api::<Node>::all(c.client.clone()),
            Api::<CertificateSigningRequest>::all(c.client.clone()),
        )
    });
    let csrs = match &apis {
        Some((_, csr_api)) => csr_api
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default(),
        None => Vec::new(),
    };
    for n in nodes {
        env.instances.remove(std::net::IpAddr::V4(n.instance.private_ip));
        if let Some((node_api, csr_api)) = &apis {
            let _ = node_api.delete(&n.node_name, &Default::default()).await;
            for csr in &csrs {
                let mine = assert::csr::belongs_to(csr, &n.node_name);
                if let (true, Some(name)) = (mine, &csr.metadata.name) {
                    let _ = csr_api.delete(name, &Default::default()).await;
                }
            }
        }
        removals.push(n.container.remove());
    }
    futures::future::join_all(removals).await;
    if let (Some(cluster), Some(token)) = (&cx.cluster, cx.token.take()) {
        objects::delete_bootstrap_token(&cluster.client, &token).await;
    }
    cx.served = None;
    cx.lease = None;
    cx.slots = None;
    cx.cluster = None;
}

/// For a context dropped before the pipeline's teardown ran (its run was cancelled): the containers and instances
/// go in the background.
pub(super) fn in_background(cx: &mut Context<'_>) {
    let nodes = std::mem::take(&mut cx.nodes);
    if nodes.is_empty() {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    for n in nodes {
        cx.env.instances.remove(std::net::IpAddr::V4(n.instance.private_ip));
        handle.spawn(async move { n.container.remove().await });
    }
}
