//! `do: terminate`: EC2 terminates the instance. The fake EC2 reports it `terminated`, the machine shuts down as
//! an instance does (its OS's shutdown, then off), and the Node must go: NotReady once its lease expires (the
//! node lifecycle controller), then deleted by the cloud controller, as the AWS cloud controller manager deletes
//! the Node of a terminated instance. A Node left behind keeps pods bound to a machine that is gone.
use crate::assert::registry as def;
use crate::assert::Check;
use crate::run::env::SharedCluster;
use crate::run::node::RunningNode;
use crate::scenario::after::Step;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use std::time::{Duration, Instant};

/// How often the Node is looked at while it is expected to go.
const LOOK_EVERY: Duration = Duration::from_millis(500);

pub(super) async fn run(
    env: &crate::run::Environment,
    cluster: &SharedCluster,
    n: &mut RunningNode,
    step: &Step,
) -> (Vec<Check>, Vec<String>) {
    let name = def::NODE_DELETED_AFTER.on_with(&n.node_name, step.action.name());
    let within = step.within(None);
    let expected = format!(
        "the Node NotReady, then deleted by the cloud controller within {} of the instance's termination",
        humantime::format_duration(within)
    );
    let mut notes = Vec::new();
    let t0 = Instant::now();
    env.instances.terminate(&n.instance.instance_id);
    match n.machine.shut_down().await {
        Ok(how) => notes.push(format!("{}: terminated: {how}", n.node_name)),
        Err(e) => {
            return (
                vec![Check::new(
                    name,
                    false,
                    expected,
                    format!("the machine did not shut down: {e}"),
                )],
                notes,
            );
        }
    }
    // Gone for good: later phases see it as a node that stopped (its journal read from where it outlives it).
    n.container_exit = Some("terminated by the scenario (`do: terminate`)".into());
    // Its address is free: the engine may give it to another scenario's node, whose IMDS tokens and requests
    // must not be mixed with this one's.
    let ip = std::net::IpAddr::V4(n.instance.private_ip);
    env.imds.forget(ip);
    env.instances.forget_requests(ip);
    let api: Api<Node> = Api::all(cluster.client.clone());
    let mut not_ready_at: Option<Duration> = None;
    let found = loop {
        match api.get_opt(&n.node_name).await {
            Ok(None) => {
                break Ok(format!(
                    "deleted {:.1}s after the termination{}",
                    t0.elapsed().as_secs_f64(),
                    not_ready_at
                        .map(|t| format!(" (NotReady at {:.1}s)", t.as_secs_f64()))
                        .unwrap_or_default()
                ))
            }
            Ok(Some(node)) => {
                let ready = crate::assert::node::ready_status(&node).map(str::to_string);
                if not_ready_at.is_none() && ready.as_deref() != Some("True") {
                    not_ready_at = Some(t0.elapsed());
                }
                if t0.elapsed() >= within {
                    break Err(format!(
                        "still there {}s after the termination (Ready={}{})",
                        within.as_secs(),
                        ready.as_deref().unwrap_or("none"),
                        if ready.as_deref() == Some("True") {
                            ": its kubelet still posts, or nothing marked it NotReady"
                        } else {
                            ": the cloud controller did not match it to the terminated instance (its providerID, \
                             its name)"
                        }
                    ));
                }
            }
            Err(e) if t0.elapsed() >= within => break Err(format!("reading the Node: {e}")),
            Err(_) => {}
        }
        tokio::time::sleep(LOOK_EVERY).await;
    };
    let passed = found.is_ok();
    let actual = found.unwrap_or_else(|e| e);
    (vec![Check::new(name, passed, expected, actual)], notes)
}
