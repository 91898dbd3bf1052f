//! `after`: a node's life after its join. Each group's `after:` steps run in order once the join's checks are in,
//! the n-th step of every group together as one phase of the report (`after: reboot`); each step's checks are
//! named after it (`<node>/ready after reboot`).
mod csrs;
mod drain;
mod evidence;
mod pod;
mod reboot;
mod rotation;
mod shutdown;
mod terminate;
mod upgrade;
mod workload;

use super::{Action, Context, Timed};
use crate::assert::Check;
use crate::error::Result;
use crate::scenario::after::Step;
use futures::future::BoxFuture;
use std::time::Instant;

pub(crate) const ACTION: Action = Action {
    name: "after",
    applies: |cx| cx.sc.nodes.iter().any(|g| !g.after.is_empty()),
    timed: Timed::ByItself,
    run,
};

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let cluster = cx.cluster("after")?;
        let steps = cx.sc.nodes.iter().map(|g| g.after.len()).max().unwrap_or(0);
        for i in 0..steps {
            let t = Instant::now();
            let mut actions: Vec<&str> = cx
                .sc
                .nodes
                .iter()
                .filter_map(|g| g.after.get(i).map(|s| s.action.name()))
                .collect();
            actions.dedup();
            let phase = if steps == 1 {
                format!("after: {}", actions.join(", "))
            } else {
                format!("after {}: {}", i + 1, actions.join(", "))
            };
            cx.events.emit(crate::run::events::Event::PhaseStarted {
                scenario: cx.report.name.clone(),
                phase: phase.clone(),
            });
            let mut checks = Vec::new();
            // The nodes up at the phase's start, where a drained node's pods may go.
            let up: Vec<String> = cx
                .nodes
                .iter()
                .filter(|n| n.node.is_some() && n.container_exit.is_none())
                .map(|n| n.node_name.clone())
                .collect();
            for n in cx.nodes.iter_mut() {
                let Some(step) = n.group.after.get(i).cloned() else {
                    continue;
                };
                if n.node.is_none() || n.container_exit.is_some() {
                    // A node that never joined (or died) has no life after its join: its own checks said why.
                    cx.report.notes.push(format!(
                        "{}: step {} ({}) not run: the node did not join",
                        n.node_name,
                        i + 1,
                        step.action.name()
                    ));
                    continue;
                }
                let others: Vec<String> = up.iter().filter(|u| **u != n.node_name).cloned().collect();
                let (found, notes) = run_step(cx.env, cx.sc, &cluster, n, &step, &others).await;
                checks.extend(found);
                cx.report.notes.extend(notes);
            }
            for g in &cx.sc.nodes {
                let owners = owners(cx, g);
                crate::assert::turn_around(&mut checks, &owners, &g.expect.failing_checks);
            }
            for c in &checks {
                cx.events.emit(crate::run::events::Event::CheckDone {
                    scenario: cx.report.name.clone(),
                    check: c.clone(),
                });
            }
            cx.report.checks.extend(checks);
            cx.phase(&phase, t.elapsed());
        }
        // `failingChecks` patterns that matched no check of the join nor of a step (the join's were turned
        // around then, a step's as it ran).
        let before = cx.report.checks.len();
        for g in cx.sc.nodes.iter().filter(|g| !g.after.is_empty()) {
            let owners = owners(cx, g);
            crate::assert::no_such_checks(&mut cx.report.checks, &owners, &g.expect.failing_checks);
        }
        for c in &cx.report.checks[before..] {
            cx.events.emit(crate::run::events::Event::CheckDone {
                scenario: cx.report.name.clone(),
                check: c.clone(),
            });
        }
        Ok(())
    })
}

/// Who owns a group's checks: its nodes and the group itself (`<owner>/<what>`).
fn owners(cx: &Context<'_>, g: &crate::scenario::model::NodeGroup) -> Vec<String> {
    let mut owners: Vec<String> = cx
        .nodes
        .iter()
        .filter(|n| n.group.name == g.name)
        .map(|n| n.node_name.clone())
        .collect();
    owners.push(g.name.clone());
    owners
}

/// One step on one node: its checks and notes.
async fn run_step(
    env: &crate::run::Environment,
    sc: &crate::scenario::Scenario,
    cluster: &crate::run::env::SharedCluster,
    n: &mut crate::run::node::RunningNode,
    step: &Step,
    others: &[String],
) -> (Vec<Check>, Vec<String>) {
    use crate::scenario::after::Action as Do;
    match step.action {
        Do::Reboot => reboot::run(env, cluster, n, step).await,
        Do::WaitForRotation => rotation::run(sc, cluster, n, step).await,
        Do::Terminate => terminate::run(env, cluster, n, step).await,
        Do::Cordon | Do::Drain | Do::Uncordon => drain::run(cluster, n, step, others).await,
        Do::Upgrade => upgrade::run(env, cluster, n, step).await,
        Do::Shutdown => shutdown::run(env, cluster, n, step).await,
    }
}
