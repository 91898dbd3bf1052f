//! `join observed`: watches the cluster and the nodes until every node's expectations are settled (or its
//! `within` runs out, or the harness can tell it never will), then notes each node's CPU time and the control
//! plane's memory.
pub(crate) mod disk;
pub(crate) mod failfast;
pub(crate) mod journal;
pub(crate) mod pod;
pub(crate) mod through_apiserver;
pub(crate) mod watch;
use super::{Action, Context, Timed};
use crate::error::{Error, Result};
use futures::future::BoxFuture;

pub(crate) const ACTION: Action = Action {
    name: crate::run::timeline::PHASE_JOIN_OBSERVED,
    applies: super::always,
    timed: Timed::Whole,
    run,
};

/// How many of a node's cgroups its report names, the most costly first.
const TOP_CGROUPS: usize = 10;

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let cluster = cx.cluster("observe")?;
        if let Some(component) = crate::run::pipeline::observe::watch::observe(cx.env, &cluster, &mut cx.nodes).await {
            if crate::reaper::interrupted() {
                return Err(Error::Interrupted);
            }
            return Err(Error::ControlPlane {
                component: "control plane".into(),
                message: format!("{component}; logs in {}", cluster.logs_dir.display()),
            });
        }
        // What each node's start, bootstrap and join cost in CPU (one stats sample per container, in parallel),
        // and where it went, phase by phase and part by part (its cgroup tree, read again now).
        let cpu = futures::future::join_all(cx.nodes.iter().map(|n| n.machine.cpu_time())).await;
        let readings = futures::future::join_all(cx.nodes.iter().map(|n| n.machine.cpu_reading())).await;
        for ((n, cpu), reading) in cx.nodes.iter_mut().zip(cpu).zip(readings) {
            n.timeline.cpu = cpu;
            if let Some(r) = reading {
                let r = n.cpu_units.complete(r);
                n.timeline.cpu_top = r.top(TOP_CGROUPS);
                n.cpu_readings.push(("join", r));
            }
            n.timeline.cpu_profile = n.cpu_profile();
        }
        let memory = cluster.control_plane.lock().await.memory();
        if !memory.is_empty() {
            let rss: Vec<String> = memory
                .iter()
                .map(|(name, kib)| format!("{name} {} MiB", kib / 1024))
                .collect();
            cx.report.notes.push(format!("control-plane RSS: {}", rss.join(", ")));
            cx.report.control_plane_rss = memory;
        }
        Ok(())
    })
}
