//! What a step leaves in the report's notes however it went: the node's calls to the fakes during it and the
//! node's CPU for it.
use crate::fakes::calls::Call;
use crate::run::node::RunningNode;
use std::time::{Duration, Instant};

/// The node's calls to the fakes since `t0`, and the note saying which.
fn calls_since(env: &crate::run::Environment, n: &RunningNode, action: &str, t0: Instant) -> (Vec<Call>, String) {
    let calls: Vec<_> = env
        .calls
        .of(&n.instance.instance_id)
        .into_iter()
        .filter(|c| c.started >= t0)
        .collect();
    let note = match calls.len() {
        0 => format!("{}: {action}: no call to the fakes during it", n.node_name),
        k => format!(
            "{}: {action}: {k} calls to the fakes during it: {}",
            n.node_name,
            crate::assert::calls::summary(&calls)
        ),
    };
    (calls, note)
}

/// The note on the node's calls during `step` (since `t0`), and the checks of its `expect.calls` where it has them
/// (named `calls … after <step>`; `ready_at`: when the node was back, for the window after it).
pub(super) fn step_calls(
    env: &crate::run::Environment,
    n: &RunningNode,
    step: &crate::scenario::after::Step,
    t0: Instant,
    ready_at: Option<Instant>,
) -> (Vec<crate::assert::Check>, String) {
    let action = step.action.name();
    let (calls, note) = calls_since(env, n, action, t0);
    let checks = match &step.expect.calls {
        Some(want) => named_after(
            crate::assert::calls::checks(&n.node_name, &calls, want, t0, ready_at),
            action,
        ),
        None => Vec::new(),
    };
    (checks, note)
}

/// The join's checks (calls, files) run again for a step, named after it (`<node>/calls … after reboot`).
pub(super) fn named_after(checks: Vec<crate::assert::Check>, action: &str) -> Vec<crate::assert::Check> {
    checks
        .into_iter()
        .map(|mut c| {
            c.name = format!("{} after {action}", c.name);
            c
        })
        .collect()
}

/// The note on the step's length and the node's CPU for it (`before`: the machine's CPU time at its start).
pub(super) async fn cpu_note(n: &RunningNode, action: &str, t0: Instant, before: Option<Duration>) -> Option<String> {
    let (a, b) = (before?, n.machine.cpu_time().await?);
    // A container's count starts again with it; a VM's process keeps counting.
    let used = if b >= a { b - a } else { b };
    Some(format!(
        "{}: {action}: {:.1}s in all, node CPU {:.2}s",
        n.node_name,
        t0.elapsed().as_secs_f64(),
        used.as_secs_f64()
    ))
}
