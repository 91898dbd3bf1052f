//! What a step leaves in the report's notes however it went: the node's calls to the fakes during it and the
//! node's CPU for it.
use crate::fakes::calls::Call;
use crate::run::node::RunningNode;
use std::time::{Duration, Instant};

/// The node's calls to the fakes since `t0`, and the note saying which.
pub(super) fn calls_since(
    env: &crate::run::Environment,
    n: &RunningNode,
    action: &str,
    t0: Instant,
) -> (Vec<Call>, String) {
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
