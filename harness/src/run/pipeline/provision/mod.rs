//! `provision`: what the scenario needs before anything starts (Kubernetes binaries, node images, the sandbox
//! image the fake ECR serves), and `lease`: exclusive use of a control plane for an IAM scenario.
pub(crate) mod machine;

use super::{Action, Context, Timed};
use crate::cluster::ClusterSpec;
use crate::error::{Error, Result};
use crate::scenario::model::AuthMode;
use futures::future::BoxFuture;

pub(crate) const ACTION: Action = Action {
    name: "provision",
    applies: super::always,
    timed: Timed::Whole,
    run,
};

pub(crate) const LEASE: Action = Action {
    name: "waited for a control plane to itself (IAM: one scenario at a time on each)",
    applies: needs_lease,
    timed: Timed::IfWaited,
    run: lease,
};

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let (env, sc) = (cx.env, cx.sc);
        let provider = cx.trial.provider;
        // Checked before provisioning anything (this may pull its image): a provider that cannot run here makes
        // the outcome Unavailable, with why; the caller decides whether that is a skip or a failure.
        let probe = ClusterSpec {
            provider,
            version: sc.cluster.kubernetes_version.clone(),
            service_cidr: sc.cluster.service_cidr(),
            iam_lane: None,
            certificate_lifetime: sc.cluster.certificate_lifetime,
        };
        if let Some(reason) = provider.get().unavailable(&env.settings, &probe, &env.docker).await {
            return Err(Error::ProviderUnavailable {
                provider: provider.as_str().into(),
                reason,
            });
        }
        let nodes: u64 = sc.nodes.iter().map(|g| u64::from(g.count)).sum();
        crate::node::capacity::check(&sc.name, nodes)?;
        crate::host::ensure_inotify(&env.settings, nodes as usize);
        // The time blocked on builds other scenarios had started (binaries, images, the sandbox image), shown
        // apart from the scenario's own work (`ScenarioReport::waited_for_builds`).
        let assets = env
            .assets_timed(&sc.cluster.kubernetes_version, &mut cx.report.waited_for_builds)
            .await?;
        let mut sandbox_served = false;
        for g in &sc.nodes {
            if g.disk.is_some() {
                // A disk of the user's brings its node software: no node image is built for it.
                cx.report
                    .notes
                    .push(format!("node group {}: boots its own disk, no node image", g.name));
                cx.provisioned.group_images.push(None);
                continue;
            }
            let kubelet = env
                .group_kubelet_timed(&assets, g, &mut cx.report.waited_for_builds)
                .await?;
            // The kubelets its `upgrade` steps install, provisioned now rather than in the step's time.
            for to in g.after.iter().filter_map(|s| s.to.as_deref()) {
                env.kubelet_timed(&assets, Some(to), &mut cx.report.waited_for_builds)
                    .await?;
            }
            let base = env
                .image_timed(&kubelet, g.containerd_line(), &mut cx.report.waited_for_builds)
                .await?;
            if !sandbox_served {
                sandbox_served = true;
                // The EKS pause image under its ECR name, for AMI units and older nodeadm alike (a user's image
                // may not carry it).
                if let Err(e) = env.serve_sandbox_image(&base, &mut cx.report.waited_for_builds).await {
                    cx.report
                        .notes
                        .push(format!("the fake ECR registry serves no sandbox image: {e}"));
                }
            }
            let img = env
                .group_image_timed(&base, g.image.as_ref(), &mut cx.report.waited_for_builds)
                .await?;
            if g.image.is_some() {
                cx.report
                    .notes
                    .push(format!("node group {}: image {} (over {})", g.name, img.tag, img.base));
            }
            if let Some(parts) = crate::node::image::describe(&env.docker, &img.tag).await {
                cx.report.notes.push(format!("node group {}: {parts}", g.name));
            }
            cx.provisioned.group_images.push(Some(img));
        }
        // A VM group's disk (built from its node image, or the user's, checked) and accelerator.
        for (g, img) in sc.nodes.iter().zip(&cx.provisioned.group_images) {
            // A machine with a kernel of its own boots a disk, made (or checked) here.
            let machine = match g.capabilities().kind.own_kernel {
                true => Some(machine::prepare(env, sc, g, img.as_ref()).await?),
                false => None,
            };
            cx.provisioned.machines.push(machine);
        }
        // An IAM scenario's control plane (an IAM lane, or the shared one) is settled by `LEASE`.
        cx.provisioned.spec = Some(ClusterSpec {
            provider,
            version: assets.version.clone(),
            service_cidr: sc.cluster.service_cidr(),
            iam_lane: None,
            certificate_lifetime: sc.cluster.certificate_lifetime,
        });
        cx.provisioned.assets = Some(assets);
        Ok(())
    })
}

pub(crate) const SLOTS: Action = Action {
    name: "waited for room for its nodes (other scenarios' nodes running)",
    applies: super::always,
    timed: Timed::IfWaited,
    run: slots,
};

fn slots<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        if cx.sc.has_vm_nodes() {
            cx.held.machine = Some(cx.env.machine().await?);
        }
        cx.held.slots = Some(cx.env.node_slots(cx.node_count()).await?);
        Ok(())
    })
}

/// An IAM scenario: aws-auth is cluster-wide, so it takes a control plane to itself while it runs (an IAM lane
/// where control planes are cheap, else the shared one), before its instances launch, so the evidence filtered by
/// launch time is its own.
fn needs_lease(cx: &Context<'_>) -> bool {
    cx.sc.cluster.auth == AuthMode::Iam
}

fn lease<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        if let Some(spec) = cx.provisioned.spec.as_mut() {
            cx.held.lease = Some(cx.env.iam_lease(spec).await?);
        }
        Ok(())
    })
}
