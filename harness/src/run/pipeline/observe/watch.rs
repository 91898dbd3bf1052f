//! Watching the cluster while nodes join: CSRs, the Node, readiness, the serving certificate, evidence, and the
//! early end of the wait when a node's outcome is already decided (fail fast).
use crate::assert;
use crate::controllers::cache::{next_change, Snapshot};
use crate::run::env::{Environment, SharedCluster};
use crate::run::node::{bootstrap_failed, bootstrap_text, calls_text, imds_text, RunningNode};
use crate::scenario::model::{CsrExpectation, EvidenceSource};
use k8s_openapi::api::core::v1::Node;
use std::time::{Duration, Instant};

/// How long a negative scenario keeps watching after its last piece of evidence appeared, to see the node stays
/// out (a kubelet that retries could still register).
pub(crate) const NEGATIVE_HOLD: Duration = Duration::from_secs(5);

/// How long the watches may fail before the wait gives up on the API.
const API_AWAY: Duration = Duration::from_secs(10);

/// How long a watch may fail before the cache it feeds is no longer trusted.
const STALE_AFTER: Duration = Duration::from_secs(1);

/// The shortest pause between two looks, however fast changes come.
const MIN_GAP: Duration = Duration::from_millis(50);

/// Watches the cluster until every node has reached what its expectations need, or its deadline. Returns
/// `Some(component)` if a control-plane process died meanwhile (the scenario cannot be judged then).
pub(crate) async fn observe(env: &Environment, cluster: &SharedCluster, nodes: &mut [RunningNode]) -> Option<String> {
    let mut changes = cluster.cache.subscribe();
    let mut last_evidence_check = Instant::now() - Duration::from_secs(10);
    let mut unseen_since: Option<Instant> = None;
    loop {
        // Until both watches have listed once, an empty cache must not read as "no CSR / no Node"; nor is a cache
        // whose watch has been failing for a while trusted. Either way for `API_AWAY`, and the API is away.
        let failing = cluster.cache.failing();
        let trusted = failing.as_ref().is_none_or(|(for_, _)| *for_ < STALE_AFTER);
        let Some(Snapshot { csrs, nodes: all_nodes }) = cluster.cache.snapshot().filter(|_| trusted) else {
            let unseen = unseen_since.get_or_insert_with(Instant::now).elapsed();
            let away = failing.as_ref().map_or(unseen, |(for_, _)| unseen.max(*for_));
            if away > API_AWAY {
                return Some(match failing {
                    Some((_, why)) => format!("the Kubernetes API did not answer for {}s ({why})", away.as_secs()),
                    // A watch whose first list never completes (and never fails) must not hold the wait either.
                    None => format!(
                        "the Kubernetes API did not list CSRs and Nodes within {}s",
                        API_AWAY.as_secs()
                    ),
                });
            }
            next_change(&mut changes, Duration::from_millis(200)).await;
            continue;
        };
        unseen_since = None;
        let check_evidence = last_evidence_check.elapsed() > Duration::from_millis(900);
        if check_evidence {
            last_evidence_check = Instant::now();
        }
        let probe_every = failure_probe_every(nodes.iter().filter(|n| !n.done).count());
        for n in nodes.iter_mut().filter(|n| !n.done) {
            check_alive(n).await;
            let since = n.kubelet_start.elapsed();
            n.client_csr = assert::csr::client_csr(&csrs, &n.node_name);
            n.serving_csr = assert::csr::serving_csr(&csrs, &n.node_name);
            if n.client_csr.as_ref().is_some_and(|c| c.issued) {
                n.timeline.client_csr_issued.get_or_insert(since);
            }
            if n.serving_csr.as_ref().is_some_and(|c| c.issued) {
                n.timeline.serving_csr_issued.get_or_insert(since);
            }
            n.node = all_nodes
                .iter()
                .find(|x| x.metadata.name.as_deref() == Some(n.node_name.as_str()))
                .map(|x| Node::clone(x));
            if n.node.is_none() {
                // A Node with this instance's providerID under another name: the join "worked" under the wrong name.
                n.registered_as = all_nodes
                    .iter()
                    .find(|x| {
                        assert::node::provider_id(x)
                            .is_some_and(|p| p.ends_with(&format!("/{}", n.instance.instance_id)))
                    })
                    .and_then(|x| x.metadata.name.clone());
            }
            if n.node.is_some() {
                n.timeline.registered.get_or_insert(since);
            }
            let ready = n.node.as_ref().is_some_and(assert::node::is_ready);
            if ready {
                n.timeline.ready.get_or_insert(since);
            }
            let want_serving = n.expect().serving_cert;
            if want_serving && ready && n.serving.is_none() {
                match assert::serving::probe(std::net::IpAddr::V4(n.instance.private_ip), 10250, &cluster.ca_pem).await
                {
                    Ok(cert) => {
                        n.serving = Some(cert);
                        n.timeline.serving_cert_live.get_or_insert(n.kubelet_start.elapsed());
                    }
                    Err(e) => n.serving_error = e,
                }
            }
            if check_evidence && !n.expect().evidence.is_empty() {
                gather_evidence(env, cluster, n).await;
            }
            if check_evidence && !n.machine.sees_inside() && n.bootstrap_error.is_none() {
                // Seen from outside, a machine says it will not join only in its calls (a refused certificate)
                // and on its console (no boot loader, a panic, emergency mode, nodeadm failed).
                let refused = crate::run::pipeline::bootstrap::trust::refusal(env, &n.machine.name, &n.instance);
                n.bootstrap_error = refused.map(|e| e.to_string()).or_else(|| {
                    crate::node::vm::console::decided_failure(&n.machine.console_text())
                        .map(|why| format!("node {}: {why}", n.machine.name))
                });
            }
            // An emulated machine pays many times a container's CPU for each probe: looked at a quarter as often.
            let every = if n.machine.emulated() {
                probe_every * 4
            } else {
                probe_every
            };
            let probe_due = n.failure_probed_at.is_none_or(|t| t.elapsed() >= every);
            if probe_due
                && n.machine.sees_inside()
                && n.expect().joins
                && n.node.is_none()
                && n.stopped.is_none()
                && !bootstrap_failed(n)
            {
                n.failure_probed_at = Some(Instant::now());
                probe_failure(n).await;
            }
            // A Ready node whose calls are watched after Ready is watched for the whole window, even past `within`.
            let deadline = match (&n.expect().calls, n.timeline.ready) {
                (Some(c), Some(ready)) if !c.none_after_ready.is_empty() => {
                    n.expect().within.max(ready + c.after_ready_window)
                }
                _ => n.expect().within,
            };
            let deadline_passed = since > deadline;
            // Evidence judged from a machine's disk after its shutdown cannot be had while it runs: a node that
            // joins is settled without it; one that must not join is watched for its whole `within` (what it
            // logs in that time is then read).
            let evidence_complete = n.expect().evidence.iter().zip(&n.evidence).all(|(ev, found)| {
                found.is_some() || (n.expect().joins && super::disk::judged_after_shutdown(n, ev.source))
            });
            if evidence_complete {
                n.evidence_complete_at.get_or_insert_with(Instant::now);
            }
            n.done = if n.expect().joins {
                let settled = ready
                    && n.node.as_ref().is_some_and(|x| !assert::node::has_transient_taints(x))
                    && (!want_serving || n.serving.is_some())
                    && csr_settled(n.expect().serving_csr, &n.serving_csr)
                    && csr_settled(n.expect().client_csr, &n.client_csr)
                    // Evidence still missing on a node whose pod check comes next is looked for again after
                    // it: the pod (its sandbox, its image) can be what produces it, so waiting for it here
                    // would only wait out `within`.
                    && (evidence_complete || n.expect().pod_runs)
                    // A machine read from its disk afterwards is shut down only once cloud-init has finished.
                    && super::disk::bootstrap_over(n)
                    && after_ready_watched(n, since);
                settled || deadline_passed || bootstrap_failed(n) || n.registered_as.is_some() || n.stopped.is_some()
            } else {
                let held = n.evidence_complete_at.is_some_and(|t| t.elapsed() > NEGATIVE_HOLD);
                held || deadline_passed || n.node.is_some() || n.registered_as.is_some() || n.container_exit.is_some()
            };
        }
        if let Some(dead) = cluster.control_plane.lock().await.failed_component() {
            return Some(dead);
        }
        let waiting = nodes.iter().filter(|n| !n.done).count();
        if waiting == 0 {
            break;
        }
        // Wake on the next change the watches bring (after a short pause, so a burst of kubelet updates is one
        // look), or after the poll interval for what no watch shows (the serving port, evidence, failures).
        tokio::time::sleep(MIN_GAP).await;
        next_change(&mut changes, poll_interval(waiting)).await;
    }
    for n in nodes.iter_mut().filter(|n| !n.expect().evidence.is_empty()) {
        gather_evidence(env, cluster, n).await;
    }
    None
}

/// How many of a dead node's last journal lines its verdict quotes.
const DEAD_JOURNAL_LINES: usize = 10;

/// How often a waited-for node's container is asked whether it still runs (one inspect: no exec, no CPU in it).
const LIVENESS_EVERY: Duration = Duration::from_secs(1);

/// A node container that exited (killed, OOM-killed, the engine restarted) cannot join: the wait ends with the
/// exit code, the OOM kill and its last output, instead of every later probe reading "no failure".
pub(crate) async fn check_alive(n: &mut RunningNode) {
    if n.container_exit.is_some() || n.liveness_checked_at.is_some_and(|t| t.elapsed() < LIVENESS_EVERY) {
        return;
    }
    n.liveness_checked_at = Some(Instant::now());
    if let Some(why) = n.machine.exited().await {
        n.container_exit = Some(why.clone());
        // What the node was doing when it died: its journal's last lines, from its disk.
        let why = match n.machine.journal_on_host(None, Some(DEAD_JOURNAL_LINES)).await {
            Some(Ok(tail)) if tail.lines().any(|l| !l.starts_with("-- ")) => {
                format!("{why}; the last lines of its journal:\n{}", tail.trim_end())
            }
            _ => why,
        };
        n.stopped.get_or_insert((
            crate::run::pipeline::observe::failfast::Stop {
                check: &crate::assert::registry::NODE_CONTAINER,
                expected: "the node container running until its join is judged".into(),
                cause: why,
            },
            n.kubelet_start.elapsed(),
        ));
    }
}

/// Whether a Ready node whose scenario forbids calls after Ready (`calls.noneAfterReady`) has been watched for
/// `calls.afterReadyWindow` since it became Ready (a bootstrap's leftover poller shows up only then).
fn after_ready_watched(n: &RunningNode, since: Duration) -> bool {
    match (&n.expect().calls, n.timeline.ready) {
        (Some(c), Some(ready)) if !c.none_after_ready.is_empty() => since >= ready + c.after_ready_window,
        _ => true,
    }
}

/// The longest wait between two looks at the nodes when the watches bring no change: 200 ms for a few nodes,
/// longer for many (each look matches every CSR and Node against each waiting node and probes it; for 50 nodes
/// every 200 ms that was the busiest process on the machine), at most 1 s.
fn poll_interval(waiting: usize) -> Duration {
    Duration::from_millis((200 + 20 * waiting.saturating_sub(5) as u64).min(1000))
}

/// How often each node that has not registered yet is probed for a decided failure: about every second for a few
/// nodes, spread out for many. A probe is a `docker exec` (about 0.1 s of CPU), and fifty nodes probed every
/// second took more CPU than a 2-core machine has, slowing the very joins being watched; at most about five probes
/// a second keeps fail-fast within seconds at any scale.
fn failure_probe_every(waiting: usize) -> Duration {
    Duration::from_millis(900).max(Duration::from_millis(200) * waiting as u32)
}

/// Ends the wait for a node whose outcome is already decided (kubelet crash-looping, user data that never
/// started it, nodeadm failed), keeping the cause.
pub(crate) async fn probe_failure(n: &mut RunningNode) {
    let user_data = n.group.user_data.is_some();
    let nodeadm_failure = n.nodeadm.as_ref().filter(|r| !r.succeeded()).map(|r| r.summary());
    let cloud_init = n.cloud_init.clone();
    let output = if user_data {
        n.machine
            .read_file("/var/log/cloud-init-output.log")
            .await
            .unwrap_or_default()
    } else {
        n.bootstrap
            .as_ref()
            .map(|b| format!("{}\n{}", b.stdout, b.stderr))
            .unwrap_or_default()
    };
    let cause = move || {
        if let Some(part) = cloud_init.as_ref().and_then(|c| c.failed_parts_cause()) {
            return part;
        }
        let errors = cloud_init.map(|c| c.errors).unwrap_or_default();
        let tail = match user_data {
            true => crate::assert::cloud_init::user_data_output_tail(&output, 3),
            false => crate::process::last_lines(&output, 3, " / "),
        };
        match (user_data, errors.first(), tail.is_empty()) {
            (true, Some(e), _) => format!("cloud-init: {e}; output: {tail}"),
            (true, None, false) => format!("cloud-init reported no error; its output ends: {tail}"),
            (true, None, true) => "cloud-init reported no error and printed nothing".into(),
            (false, _, false) => format!("its output ends: {tail}"),
            (false, _, true) => "it printed nothing".into(),
        }
    };
    let origin = if user_data {
        "cloud-init finished"
    } else {
        "the bootstrap exited 0"
    };
    let finished = (origin, n.kubelet_start.elapsed());
    if let Some(stop) =
        crate::run::pipeline::observe::failfast::probe(&n.machine, finished, nodeadm_failure, cause).await
    {
        n.stopped = Some((stop, n.kubelet_start.elapsed()));
    }
}

/// Whether a CSR has reached the state its expectation waits for (`Pending`: it exists; the approver decides
/// once, so a refused CSR stays pending).
pub(crate) fn csr_settled(expect: CsrExpectation, state: &Option<assert::csr::CsrState>) -> bool {
    match expect {
        CsrExpectation::Issued => state.as_ref().is_some_and(|c| c.issued),
        CsrExpectation::Pending => state.is_some(),
        CsrExpectation::None | CsrExpectation::Any => true,
    }
}

/// Looks for each expected piece of evidence in its source; keeps the first matching line.
pub(crate) async fn gather_evidence(env: &Environment, cluster: &SharedCluster, n: &mut RunningNode) {
    let evidence = n.expect().evidence.clone();
    let mut kubelet_log: Option<String> = None;
    for (i, e) in evidence.iter().enumerate() {
        if n.evidence[i].is_some() {
            continue;
        }
        let text = match e.source {
            EvidenceSource::Kubelet => {
                if kubelet_log.is_none() {
                    kubelet_log = Some(n.machine.journal(Some("kubelet")).await);
                }
                kubelet_log.clone().unwrap_or_default()
            }
            EvidenceSource::Bootstrap => bootstrap_text(n),
            EvidenceSource::Imds => imds_text(env, n),
            EvidenceSource::Calls => calls_text(env, n),
            EvidenceSource::Console => n.machine.console_text(),
            EvidenceSource::Authenticator => env.authenticator.decision_lines(&n.instance.instance_id),
            EvidenceSource::CloudInit => {
                let log = n.machine.read_file("/var/log/cloud-init.log").await.unwrap_or_default();
                let output = n
                    .machine
                    .read_file("/var/log/cloud-init-output.log")
                    .await
                    .unwrap_or_default();
                format!("{log}\n{output}")
            }
            EvidenceSource::Nodeadm => crate::run::pipeline::bootstrap::userdata::nodeadm_journal(&n.machine).await,
            EvidenceSource::Approver => {
                let requester = format!("system:node:{}", n.node_name);
                let decisions = cluster.approver.decisions();
                // Decisions from before this instance launched are another scenario's (a node name can recur).
                let launched = n.instance.launch_time;
                // The node's own CSRs too, whoever requested them (a node whose role maps to another user).
                let own: Vec<&str> = [&n.client_csr, &n.serving_csr]
                    .into_iter()
                    .filter_map(|c| c.as_ref().and_then(|c| c.name.as_deref()))
                    .collect();
                let mine = decisions
                    .iter()
                    .filter(|d| (d.requester == requester || own.contains(&d.csr.as_str())) && d.at >= launched);
                mine.map(|d| format!("{} {} {}", d.csr, d.requester, d.reason))
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        };
        // Resolved with the node's values before its bootstrap ran.
        n.evidence[i] = super::journal::first_line(&text, &e.contains);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_waiting_nodes_are_looked_at_less_often() {
        assert_eq!(poll_interval(1), Duration::from_millis(200));
        assert_eq!(poll_interval(5), Duration::from_millis(200));
        assert_eq!(poll_interval(30), Duration::from_millis(700));
        assert_eq!(poll_interval(50), Duration::from_millis(1000));
        assert_eq!(failure_probe_every(1), Duration::from_millis(900));
        assert_eq!(failure_probe_every(50), Duration::from_secs(10));
    }
}
