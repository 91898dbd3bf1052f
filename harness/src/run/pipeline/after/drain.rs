//! `do: cordon`, `do: drain` and `do: uncordon`, as a managed node group's update and an in-place upgrade do them: the node marked unschedulable (the
//! node lifecycle controller then taints it), and for a drain every pod but a DaemonSet's evicted through the
//! eviction API. An eviction the PodDisruptionBudget refuses (429) is tried again until the budget allows it,
//! which it does once the evicted pod's replacement runs on another node; the pods must then be gone, ended by
//! the node's kubelet. A budget that never allows it blocks the drain past the step's `within`, quoted, as a
//! managed node group's update fails with `PodEvictionFailure`.
use super::workload::{bind_pending, Workload, NAMESPACE};
use crate::assert::registry::{self as def, CheckDef};
use crate::assert::Check;
use crate::run::env::SharedCluster;
use crate::run::node::RunningNode;
use crate::run::pipeline::observe::through_apiserver::said;
use crate::scenario::after::{Action, Step};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use std::time::{Duration, Instant};

/// How often evictions are tried again and the Node looked at.
const EVERY: Duration = Duration::from_millis(500);
/// The taint the node lifecycle controller puts on an unschedulable Node.
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// `others`: the scenario's other nodes that joined, where a drained node's pods may go.
pub(super) async fn run(
    cluster: &SharedCluster,
    n: &mut RunningNode,
    step: &Step,
    others: &[String],
) -> (Vec<Check>, Vec<String>) {
    let action = step.action.name();
    let node = n.node_name.clone();
    let name = |d: &CheckDef| d.on_with(&node, action);
    let within = step.within(None);
    let client = &cluster.client;
    let mut checks = Vec::new();
    let mut notes = Vec::new();
    if step.action == Action::Uncordon {
        let t0 = Instant::now();
        checks.push(mark(client, &node, false, within, name(&def::SCHEDULABLE_AFTER)).await);
        notes.push(format!("{node}: {action} took {:.1}s", t0.elapsed().as_secs_f64()));
        return (checks, notes);
    }
    let workload = (step.action == Action::Drain)
        .then(|| Workload::new(&n.instance.instance_id, step.workload.clone().unwrap_or_default()));
    let drained_expected = workload.as_ref().map(|w| {
        format!(
            "every pod but the DaemonSet's evicted through the eviction API and ended by the kubelet within {}{}, \
             the DaemonSet's pod left running",
            humantime::format_duration(within),
            if w.min_available > 0 {
                format!(
                    ", the PodDisruptionBudget (minAvailable {}) honoured: an eviction refused while the budget \
                     is spent, allowed once the replacement runs on another node",
                    w.min_available
                )
            } else {
                String::new()
            }
        )
    });
    if let (Some(w), Some(expected)) = (&workload, &drained_expected) {
        let mut nodes: Vec<&str> = vec![node.as_str()];
        nodes.extend(others.iter().map(String::as_str));
        let placed = match w.create(client, &node, &nodes).await {
            Ok(()) => w.placed(client, &node).await,
            Err(e) => Err(e),
        };
        match placed {
            Ok(said) => notes.push(format!("{node}: before the drain: {said}")),
            Err(why) => {
                w.remove(client).await;
                checks.push(Check::new(name(&def::DRAINED_AFTER), false, expected.clone(), why));
                return (checks, notes);
            }
        }
    }
    let t0 = Instant::now();
    checks.push(mark(client, &node, true, within, name(&def::CORDONED_AFTER)).await);
    if let (Some(w), Some(expected)) = (&workload, drained_expected) {
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        // Evictions through a client that retries nothing itself: a refusal is an answer to see.
        let kubeconfig = cluster.control_plane.lock().await.kubeconfig().to_path_buf();
        let found = match crate::cluster::kubeconfig::answering_client(&kubeconfig).await {
            Ok(evicting) => drain(client, &evicting, &node, w, &others, t0, within).await,
            Err(e) => Err(format!("a client for the evictions: {e}")),
        };
        let found = match found {
            Ok(said) => w.daemon_pod(client, &node).await.map(|d| format!("{said}; {d}")),
            Err(e) => Err(e),
        };
        checks.push(Check::new(
            name(&def::DRAINED_AFTER),
            found.is_ok(),
            expected,
            found.unwrap_or_else(|e| e),
        ));
        w.remove(client).await;
    }
    // The node is left cordoned, as an update leaves the node it replaces; a later step's pods tolerate it.
    notes.push(format!("{node}: {action} took {:.1}s", t0.elapsed().as_secs_f64()));
    (checks, notes)
}

/// Marks the Node unschedulable (or schedulable again) and waits for the node lifecycle controller's taint (or
/// for it to be gone).
async fn mark(client: &kube::Client, node: &str, unschedulable: bool, within: Duration, name: String) -> Check {
    let expected = match unschedulable {
        true => format!(
            "the Node unschedulable and tainted {UNSCHEDULABLE_TAINT}:NoSchedule within {}",
            humantime::format_duration(within)
        ),
        false => format!(
            "the Node schedulable, its {UNSCHEDULABLE_TAINT} taint gone within {}",
            humantime::format_duration(within)
        ),
    };
    let (verb, done) = match unschedulable {
        true => ("cordon", "unschedulable, tainted"),
        false => ("uncordon", "schedulable, the taint gone"),
    };
    let api: Api<Node> = Api::all(client.clone());
    let t0 = Instant::now();
    let patch = serde_json::json!({ "spec": { "unschedulable": unschedulable } });
    if let Err(e) = api.patch(node, &PatchParams::default(), &Patch::Merge(&patch)).await {
        return Check::new(
            name,
            false,
            expected,
            format!("marking the Node unschedulable: {unschedulable}: {}", said(&e)),
        );
    }
    loop {
        let last = match api.get(node).await {
            Ok(n) => {
                let spec = n.spec.unwrap_or_default();
                let tainted = spec
                    .taints
                    .iter()
                    .flatten()
                    .any(|t| t.key == UNSCHEDULABLE_TAINT && t.effect == "NoSchedule");
                if spec.unschedulable.unwrap_or(false) == unschedulable && tainted == unschedulable {
                    return Check::new(
                        name,
                        true,
                        expected,
                        format!("{done} {:.1}s after the {verb}", t0.elapsed().as_secs_f64()),
                    );
                }
                format!(
                    "unschedulable: {}, taints: [{}]",
                    spec.unschedulable.unwrap_or(false),
                    spec.taints
                        .iter()
                        .flatten()
                        .map(|t| format!("{}:{}", t.key, t.effect))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
            Err(e) => format!("reading the Node: {}", said(&e)),
        };
        if t0.elapsed() >= within {
            return Check::new(name, false, expected, format!("after {}s: {last}", within.as_secs()));
        }
        tokio::time::sleep(EVERY).await;
    }
}

/// What the evictions met.
#[derive(Default)]
struct Evictions {
    allowed: usize,
    refused: usize,
    /// The first refusal: the API server's words and when.
    first_refusal: Option<(String, Duration)>,
    /// A pod refused before, evicted later: how long after the first refusal.
    allowed_after_refusal: Option<Duration>,
    refused_pods: Vec<String>,
    last_error: Option<String>,
}

/// Evicts the workload's replicas from `node` (through `evicting`) until none is left on it (evicted pods ended by
/// the kubelet), the replacements bound to `others`: what happened, or why the node is not drained by
/// `t0 + within`.
async fn drain(
    client: &kube::Client,
    evicting: &kube::Client,
    node: &str,
    w: &Workload,
    others: &[&str],
    t0: Instant,
    within: Duration,
) -> Result<String, String> {
    let pods: Api<Pod> = Api::namespaced(evicting.clone(), NAMESPACE);
    let on_node = ListParams::default()
        .labels(&w.replica_selector())
        .fields(&format!("spec.nodeName={node}"));
    let mut seen = Evictions::default();
    loop {
        let left = match pods.list(&on_node).await {
            Ok(l) => l.items,
            Err(e) => {
                seen.last_error = Some(format!("listing the node's pods: {}", said(&e)));
                Vec::new()
            }
        };
        if left.is_empty() && seen.last_error.is_none() {
            return judged(&seen, w, t0);
        }
        for p in left.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
            let Some(pod) = p.metadata.name.as_deref() else {
                continue;
            };
            match pods.evict(pod, &EvictParams::default()).await {
                Ok(_) => {
                    seen.allowed += 1;
                    if seen.refused_pods.iter().any(|r| r == pod) {
                        if let Some((_, at)) = &seen.first_refusal {
                            seen.allowed_after_refusal
                                .get_or_insert(t0.elapsed().saturating_sub(*at));
                        }
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 429 => {
                    seen.refused += 1;
                    seen.first_refusal.get_or_insert((s.message.clone(), t0.elapsed()));
                    if !seen.refused_pods.iter().any(|r| r == pod) {
                        seen.refused_pods.push(pod.to_string());
                    }
                }
                Err(e) => seen.last_error = Some(format!("evicting {pod}: {}", said(&e))),
            }
        }
        if let Some(e) = bind_pending(client, &w.replica_selector(), others, false).await {
            seen.last_error = Some(e);
        }
        if t0.elapsed() >= within {
            return Err(blocked(&seen, &left, w, within, others).await);
        }
        seen.last_error = None;
        tokio::time::sleep(EVERY).await;
    }
}

/// A drain that ended: passed if the budget was honoured as it had to be.
fn judged(seen: &Evictions, w: &Workload, t0: Instant) -> Result<String, String> {
    let took = t0.elapsed().as_secs_f64();
    let budget = match (&seen.first_refusal, seen.allowed_after_refusal) {
        (Some((msg, _)), Some(later)) => format!(
            "; {} eviction(s) refused while the budget was spent (\"{msg}\"), allowed {:.1}s after the first \
             refusal, once the replacement ran elsewhere",
            seen.refused,
            later.as_secs_f64()
        ),
        (Some((msg, _)), None) => {
            return Err(format!(
                "drained in {took:.1}s, but a pod refused eviction (\"{msg}\") left without one being allowed"
            ))
        }
        (None, _) if w.min_available > 0 && w.replicas > 1 => {
            return Err(format!(
                "drained in {took:.1}s with no eviction refused: the budget (minAvailable {}) was never enforced",
                w.min_available
            ))
        }
        (None, _) => String::new(),
    };
    Ok(format!(
        "{} pod(s) evicted and ended by the kubelet in {took:.1}s{budget}",
        seen.allowed
    ))
}

/// Why the node still holds pods when the step's time is up: the refusals in the API server's words, the
/// budget's status, and where the replacements are.
async fn blocked(seen: &Evictions, left: &[Pod], w: &Workload, within: Duration, others: &[&str]) -> String {
    let mut why = format!("{} pod(s) still on the node after {}s", left.len(), within.as_secs());
    let terminating = left.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).count();
    if terminating > 0 {
        why.push_str(&format!(
            " ({terminating} evicted but not ended: the kubelet did not end them)"
        ));
    }
    if let Some((msg, _)) = &seen.first_refusal {
        why.push_str(&format!(
            "; the eviction was refused {} time(s): \"{msg}\" (minAvailable {} of {} replicas)",
            seen.refused, w.min_available, w.replicas
        ));
        if others.is_empty() {
            why.push_str("; no other node of the scenario for the replacements to run on");
        } else {
            why.push_str(&format!(
                "; the replacements could go to {} (only one Ready, not cordoned and with the labels the pods select)",
                others.join(", ")
            ));
        }
    }
    if let Some(e) = &seen.last_error {
        why.push_str(&format!("; {e}"));
    }
    why
}
