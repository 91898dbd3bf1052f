//! A node that works: a Ready node that cannot run a pod is not a joined node (no sandbox image, a broken CNI,
//! a runtime that cannot start containers). `expect.podRuns` binds a pod to the node and waits for it to run with
//! an address from the CNI.
use crate::assert::Check;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, PostParams};
use std::time::{Duration, Instant};

/// The pod's container: the sandbox image the node image caches in containerd (as the EKS AMI does), so nothing
/// is pulled.
const IMAGE: &str = "localhost/kubernetes/pause:latest";
/// How long a pod may take to run.
const TIMEOUT: Duration = Duration::from_secs(45);

fn manifest(name: &str, node: &str) -> Result<Pod, serde_json::Error> {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": name, "namespace": "default", "labels": { "app.kubernetes.io/managed-by": "nodejoin" } },
        "spec": {
            "nodeName": node,
            "tolerations": [{ "operator": "Exists" }],
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": false,
            "containers": [{ "name": "pause", "image": IMAGE, "imagePullPolicy": "Never" }]
        }
    }))
}

/// What the pod's status says about why it is not running (waiting reasons and messages, conditions).
pub(crate) fn not_running(pod: &Pod) -> String {
    let Some(status) = &pod.status else {
        return "no status yet".into();
    };
    let mut parts = vec![status.phase.clone().unwrap_or_else(|| "no phase".into())];
    if let Some(reason) = &status.reason {
        parts.push(format!("{reason}: {}", status.message.as_deref().unwrap_or("")));
    }
    for cs in status.container_statuses.iter().flatten() {
        if let Some(t) = cs.state.as_ref().and_then(|s| s.terminated.as_ref()) {
            parts.push(format!(
                "{} terminated: {} (exit {})",
                cs.name,
                t.reason.as_deref().unwrap_or("no reason"),
                t.exit_code
            ));
        }
        if let Some(w) = cs.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            parts.push(format!(
                "{}: {}",
                w.reason.as_deref().unwrap_or("waiting"),
                w.message.as_deref().unwrap_or("")
            ));
        }
    }
    for c in status.conditions.iter().flatten().filter(|c| c.status != "True") {
        if let Some(m) = &c.message {
            parts.push(format!("{}: {m}", c.type_));
        }
    }
    parts.join("; ")
}

/// The kubelet retries a sandbox the runtime refused. Refused this often, the pod will not run (a cgroup driver
/// mismatch, a runtime that cannot create the sandbox): the verdict is decided, and waiting out the rest of
/// `TIMEOUT` would only delay it.
const SANDBOX_REFUSALS: i32 = 3;
/// How often the pod's events are read while it is not running.
const EVENTS_EVERY: Duration = Duration::from_secs(2);

type Event = k8s_openapi::api::core::v1::Event;

/// The pod's warning events (the kubelet reports `FailedCreatePodSandBox` there, not in the status).
async fn warnings_of(client: &kube::Client, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let lp = kube::api::ListParams::default().fields(&format!("involvedObject.name={name}"));
    api.list(&lp)
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter(|e| e.type_.as_deref() == Some("Warning"))
                .collect()
        })
        .unwrap_or_default()
}

/// The warnings' messages, each cut to 300 characters.
fn messages(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| e.message.as_deref())
        .map(|m| m.chars().take(300).collect::<String>())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// How many times the kubelet could not create the pod's sandbox (an event counts as often as it was seen), and
/// the last message.
fn sandbox_refusals(events: &[Event]) -> (i32, Option<String>) {
    let mut refusals = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedCreatePodSandBox"));
    let count = refusals.clone().map(|e| e.count.unwrap_or(1).max(1)).sum();
    (count, refusals.next_back().and_then(|e| e.message.clone()))
}

/// The pod check's verdict, and the pod while it runs: the checks through the API server (`throughApiServer`)
/// act on it before [`delete`] removes it.
pub struct Probe {
    pub check: Check,
    /// The running pod's name (`None`: it did not run, and is deleted already).
    pub running: Option<String>,
}

/// Deletes the probe pod, without waiting for it to go.
pub async fn delete(client: &kube::Client, name: &str) {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let _ = api.delete(name, &DeleteParams::default().grace_period(0)).await;
}

/// Runs a pod on `node` and reports whether it ran with a pod IP; a pod that did not run is deleted, a running one
/// is the caller's to [`delete`].
pub async fn check(client: &kube::Client, node: &str) -> Probe {
    let name = crate::assert::registry::POD_RUNS.on(node);
    let expected =
        format!("a pod bound to the node ({IMAGE}) Running, its container too, with a pod IP within {TIMEOUT:?}");
    let pod_name = format!("nodejoin-probe-{}", crate::process::random_hex(6));
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = match manifest(&pod_name, node) {
        Ok(p) => p,
        Err(e) => {
            return Probe {
                check: Check::new(name, false, expected, format!("pod manifest: {e}")),
                running: None,
            }
        }
    };
    if let Err(e) = api.create(&PostParams::default(), &pod).await {
        return Probe {
            check: Check::new(name, false, expected, format!("creating the pod: {e}")),
            running: None,
        };
    }
    let start = Instant::now();
    let mut last = String::from("not observed");
    let mut outcome = None;
    let mut refused = None;
    let mut events_read = Instant::now();
    while start.elapsed() < TIMEOUT {
        match api.get(&pod_name).await {
            Ok(p) => {
                let status = p.status.clone().unwrap_or_default();
                let ip = status.pod_ip.clone().filter(|ip| !ip.is_empty());
                // The phase says Running once the sandbox runs, even while its container fails to start: the
                // container must run too.
                let container_runs = status
                    .container_statuses
                    .iter()
                    .flatten()
                    .any(|cs| cs.state.as_ref().is_some_and(|s| s.running.is_some()));
                if status.phase.as_deref() == Some("Running") && ip.is_some() && container_runs {
                    outcome = Some(format!(
                        "Running with pod IP {} after {:.1}s",
                        ip.unwrap_or_default(),
                        start.elapsed().as_secs_f64()
                    ));
                    break;
                }
                last = not_running(&p);
            }
            Err(e) => last = format!("reading the pod: {e}"),
        }
        if events_read.elapsed() >= EVENTS_EVERY {
            events_read = Instant::now();
            if let (n, Some(message)) = sandbox_refusals(&warnings_of(client, &pod_name).await) {
                if n >= SANDBOX_REFUSALS {
                    refused = Some(format!(
                        "not running: the kubelet could not create its sandbox {n} times in {:.1}s: {message}",
                        start.elapsed().as_secs_f64()
                    ));
                    break;
                }
            }
        }
        // One small GET; a pod on a joined node runs in about 0.5 s, so a coarser poll shows mostly its own delay.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let actual = match (&outcome, refused) {
        (Some(ok), _) => ok.clone(),
        (None, Some(refused)) => refused,
        (None, None) => {
            let events = messages(&warnings_of(client, &pod_name).await);
            if events.is_empty() {
                format!("not running after {TIMEOUT:?}: {last}")
            } else {
                format!("not running after {TIMEOUT:?}: {last}; events: {events}")
            }
        }
    };
    let running = match outcome {
        Some(_) => Some(pod_name),
        None => {
            delete(client, &pod_name).await;
            None
        }
    };
    Probe {
        check: Check::new(name, running.is_some(), expected, actual),
        running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_pod_is_bound_and_pulls_nothing() {
        let p = manifest("probe", "ip-10-0-0-1.ec2.internal").unwrap();
        let spec = p.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("ip-10-0-0-1.ec2.internal"));
        assert_eq!(spec.containers[0].image_pull_policy.as_deref(), Some("Never"));
        assert_eq!(spec.tolerations.unwrap()[0].operator.as_deref(), Some("Exists"));
    }

    #[test]
    fn why_a_pod_is_not_running() {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "status": { "phase": "Pending", "containerStatuses": [{ "name": "pause", "image": IMAGE, "imageID": "",
              "ready": false, "restartCount": 0,
              "state": { "waiting": { "reason": "ContainerCreating", "message": "" } } }] }
        }))
        .unwrap();
        assert_eq!(not_running(&p), "Pending; ContainerCreating: ");
    }

    fn event(reason: &str, count: Option<i32>, message: &str) -> Event {
        serde_json::from_value(serde_json::json!({
            "metadata": { "name": "e" }, "involvedObject": {}, "type": "Warning", "reason": reason,
            "count": count, "message": message
        }))
        .unwrap()
    }

    #[test]
    fn sandbox_refusals_count_every_sighting() {
        let events = vec![
            event("FailedCreatePodSandBox", Some(2), "runc create failed: first"),
            event("FailedScheduling", Some(5), "not this one"),
            event("FailedCreatePodSandBox", None, "runc create failed: last"),
        ];
        assert_eq!(
            sandbox_refusals(&events),
            (3, Some("runc create failed: last".to_string()))
        );
        assert_eq!(sandbox_refusals(&events[1..2]), (0, None));
        assert_eq!(messages(&events[..1]), "runc create failed: first");
    }
}
