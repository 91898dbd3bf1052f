//! `boot`: the control plane and the node containers start in parallel (a container needs no cluster until its
//! bootstrap runs).
pub(crate) mod nodes;

use super::{Action, Context, Timed};
use crate::error::{Error, Result};
use futures::future::BoxFuture;

pub(crate) const ACTION: Action = Action {
    name: "control plane + nodes booted (in parallel)",
    applies: super::always,
    timed: Timed::Whole,
    run,
};

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let (env, sc) = (cx.env, cx.sc);
        let (Some(spec), Some(assets)) = (cx.provisioned.spec.clone(), cx.provisioned.assets.as_ref()) else {
            return Err(Error::Pipeline("boot ran before provision".into()));
        };
        let boots = futures::future::join_all(
            sc.nodes
                .iter()
                .zip(cx.provisioned.group_images.iter().zip(&cx.provisioned.machines))
                .flat_map(|(g, made)| (0..g.count).map(move |i| (g, made, i)))
                .map(|(g, (img, machine), i)| nodes::boot_node(env, sc, (img.as_ref(), machine.as_ref()), g, i)),
        );
        let (cluster, booted) = tokio::join!(env.cluster(&spec, Some(assets)), boots);
        let mut first_error = None;
        for b in booted {
            match b {
                Ok(n) => cx.nodes.push(n),
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        let (cluster, created) = cluster?;
        cx.cluster = Some(cluster.clone());
        if let Some(e) = first_error {
            return Err(e);
        }
        if created {
            cx.phase(crate::run::timeline::PHASE_CONTROL_PLANE_READY, cluster.created_in);
            let steps: Vec<String> = cluster
                .step_timings
                .iter()
                .map(|(n, d)| format!("{n} {}", crate::run::report::secs(*d)))
                .collect();
            cx.report
                .notes
                .push(format!("control plane created: {}", steps.join(", ")));
        }
        Ok(())
    })
}
