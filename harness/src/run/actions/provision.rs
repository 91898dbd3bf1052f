//! `provision`: what the scenario needs before anything starts (Kubernetes binaries, node images, the sandbox
//! image the fake ECR serves), and `lease`: exclusive use of a shared control plane for an IAM scenario.
use super::{Action, Context};
use crate::cluster::ClusterSpec;
use crate::error::{Error, Result};
use crate::scenario::model::AuthMode;
use futures::future::BoxFuture;

pub(super) const ACTION: Action = Action {
    name: "provision",
    applies: super::always,
    wait: false,
    run,
};

pub(super) const LEASE: Action = Action {
    name: "waited for the shared control plane (one IAM scenario at a time)",
    applies: needs_lease,
    wait: false,
    run: lease,
};

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let (env, sc) = (cx.env, cx.sc);
        let provider = sc.cluster.provider.as_str();
        // Checked before provisioning anything (this may pull its image): a provider that cannot run here makes
        // the outcome Unavailable, with why; the caller decides whether that is a skip or a failure.
        let Some(p) = crate::cluster::provider(provider) else {
            return Err(Error::ProviderUnavailable {
                provider: provider.into(),
                reason: "unknown provider".into(),
            });
        };
        let probe = ClusterSpec {
            provider: provider.into(),
            version: sc.cluster.kubernetes_version.clone(),
            service_cidr: sc.cluster.service_cidr(),
            owner: None,
        };
        if let Some(reason) = p.unavailable(&probe, &env.docker).await {
            return Err(Error::ProviderUnavailable {
                provider: provider.into(),
                reason,
            });
        }
        let nodes: u64 = sc.nodes.iter().map(|g| u64::from(g.count)).sum();
        crate::node::capacity::check(&sc.name, nodes)?;
        crate::host::ensure_inotify(nodes as usize);
        let assets = env.assets(&sc.cluster.kubernetes_version).await?;
        let image = env.image(&assets).await?;
        // The EKS pause image under its ECR name, for AMI units and nodeadm alike (a user's image may not carry it).
        if let Err(e) = env.serve_sandbox_image(&image).await {
            cx.report
                .notes
                .push(format!("the fake ECR registry serves no sandbox image: {e}"));
        }
        for g in &sc.nodes {
            let img = env.group_image(&image, g.image.as_ref()).await?;
            if g.image.is_some() {
                cx.report
                    .notes
                    .push(format!("node group {}: image {} (over {})", g.name, img.tag, img.base));
            }
            cx.group_images.push(img);
        }
        // aws-auth is cluster-wide: an IAM scenario gets a control plane of its own where that is cheap (local),
        // else the shared one to itself while it runs (see `LEASE`), starting without aws-auth.
        let own = sc.cluster.auth == AuthMode::Iam && p.control_plane_per_iam_scenario();
        cx.spec = Some(ClusterSpec {
            provider: provider.into(),
            version: assets.version.clone(),
            service_cidr: sc.cluster.service_cidr(),
            owner: own.then(|| sc.name.clone()),
        });
        cx.assets = Some(assets);
        Ok(())
    })
}

pub(super) const SLOTS: Action = Action {
    name: "waited for room for its nodes (other scenarios' nodes running)",
    applies: super::always,
    wait: true,
    run: slots,
};

fn slots<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        cx.slots = Some(cx.env.node_slots(cx.node_count()).await?);
        Ok(())
    })
}

/// An IAM scenario on a control plane it shares: taken before its instances launch, so the evidence filtered by
/// launch time is its own.
fn needs_lease(cx: &Context<'_>) -> bool {
    cx.sc.cluster.auth == AuthMode::Iam && cx.spec.as_ref().is_some_and(|s| s.owner.is_none())
}

fn lease<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        if let Some(spec) = &cx.spec {
            cx.lease = Some(cx.env.iam_lease(spec).await);
        }
        Ok(())
    })
}
