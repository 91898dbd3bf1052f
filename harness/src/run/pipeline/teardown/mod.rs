//! Teardown, run by the pipeline whatever happened: the scenario's containers, instances, Node and CSR objects
//! and bootstrap token go, so a shared control plane is clean for the next scenario; then its cluster name and
//! its lease.
use super::Context;
use crate::assert;
use crate::cluster::objects;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

/// How long the API clean-up of a scenario may take as a whole (an API server that stopped answering makes each
/// call wait its read timeout; fifty nodes' calls one after another took minutes).
const API_CLEANUP_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

pub(crate) async fn run(cx: &mut Context<'_>) {
    use futures::StreamExt;
    let env = cx.env;
    let nodes = std::mem::take(&mut cx.nodes);
    let apis = cx.cluster.as_ref().map(|c| {
        (
            Api::<Node>::all(c.client.clone()),
            Api::<CertificateSigningRequest>::all(c.client.clone()),
        )
    });
    let mut removals = Vec::new();
    let mut node_names = Vec::new();
    for n in nodes {
        // A terminated node's address was given up then (and may be another scenario's node's by now).
        if !env.instances.is_terminated(&n.instance.instance_id) {
            env.imds.forget(std::net::IpAddr::V4(n.instance.private_ip));
            env.instances
                .forget_requests(std::net::IpAddr::V4(n.instance.private_ip));
        }
        env.instances.remove(&n.instance);
        env.calls.forget(&n.instance.instance_id);
        env.authenticator.forget(&n.instance.instance_id);
        node_names.push(n.node_name.clone());
        removals.push(n.machine.remove());
    }
    // Containers go in parallel with the API clean-up, which is itself parallel and bounded as a whole.
    let api_cleanup = async {
        let Some((node_api, csr_api)) = &apis else {
            return;
        };
        let csrs = csr_api
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default();
        let mut deletes: Vec<futures::future::BoxFuture<'_, ()>> = Vec::new();
        for name in &node_names {
            deletes.push(Box::pin(async move {
                let _ = node_api.delete(name, &Default::default()).await;
            }));
            for csr in csrs.iter().filter(|c| assert::csr::belongs_to(c, name)) {
                if let Some(csr_name) = csr.metadata.name.clone() {
                    deletes.push(Box::pin(async move {
                        let _ = csr_api.delete(&csr_name, &Default::default()).await;
                    }));
                }
            }
        }
        futures::stream::iter(deletes)
            .buffer_unordered(8)
            .collect::<Vec<()>>()
            .await;
    };
    let (_, api_done) = futures::future::join(
        futures::future::join_all(removals),
        tokio::time::timeout(API_CLEANUP_WITHIN, api_cleanup),
    )
    .await;
    if api_done.is_err() {
        cx.report.notes.push(format!(
            "teardown: the API server did not finish the clean-up within {}s (its Node and CSR objects may remain)",
            API_CLEANUP_WITHIN.as_secs()
        ));
    }
    if let (Some(cluster), Some(token)) = (&cx.cluster, cx.announced.token.take()) {
        let _ = tokio::time::timeout(
            API_CLEANUP_WITHIN,
            objects::delete_bootstrap_token(&cluster.client, &token),
        )
        .await;
    }
    cx.held.served = None;
    cx.held.lease = None;
    cx.held.slots = None;
    cx.held.machine = None;
    cx.cluster = None;
}

/// For a context dropped before the pipeline's teardown ran (its run was cancelled): the containers and instances
/// go in the background.
pub(crate) fn in_background(cx: &mut Context<'_>) {
    let nodes = std::mem::take(&mut cx.nodes);
    if nodes.is_empty() {
        return;
    }
    let Ok(handle) = tokio::runtime::Handle::try_current() else {
        return;
    };
    for n in nodes {
        cx.env.instances.remove(&n.instance);
        handle.spawn(async move { n.machine.remove().await });
    }
}
