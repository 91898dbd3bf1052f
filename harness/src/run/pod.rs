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
fn not_running(pod: &Pod) -> String {
    let Some(status) = &pod.status else {
        return "no status yet".into();
    };
    let mut parts = vec![status.phase.clone().unwrap_or_else(|| "no phase".into())];
    for cs in status.container_statuses.iter().flatten() {
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

/// Why the sandbox could not be created, from the pod's events (the kubelet reports
/// `FailedCreatePodSandBox` there, not in the status).
async fn events_of(client: &kube::Client, name: &str) -> String {
    let api: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    let lp = kube::api::ListParams::default().fields(&format!("involvedObject.name={name}"));
    api.list(&lp)
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|e| e.type_.as_deref() == Some("Warning"))
                .filter_map(|e| e.message.clone())
                .map(|m| m.chars().take(300).collect::<String>())
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}

/// Runs a pod on `node` and reports whether it ran with a pod IP; the pod is deleted afterwards.
pub async fn check(client: &kube::Client, node: &str) -> Check {
    let name = format!("{node}/pod runs");
    let expected = format!("a pod bound to the node ({IMAGE}) Running with a pod IP within {TIMEOUT:?}");
    let pod_name = format!("nodejoin-probe-{}", crate::fakes::random_hex(6));
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = match manifest(&pod_name, node) {
        Ok(p) => p,
        Err(e) => return Check::new(name, false, expected, format!("pod manifest: {e}")),
    };
    if let Err(e) = api.create(&PostParams::default(), &pod).await {
        return Check::new(name, false, expected, format!("creating the pod: {e}"));
    }
    let start = Instant::now();
    let mut last = String::from("not observed");
    let mut outcome = None;
    while start.elapsed() < TIMEOUT {
        match api.get(&pod_name).await {
            Ok(p) => {
                let status = p.status.clone().unwrap_or_default();
                let ip = status.pod_ip.clone().filter(|ip| !ip.is_empty());
                if status.phase.as_deref() == Some("Running") && ip.is_some() {
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
        // One small GET; a pod on a joined node runs in about 0.5 s, so a coarser poll shows mostly its own delay.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let actual = match &outcome {
        Some(ok) => ok.clone(),
        None => {
            let events = events_of(client, &pod_name).await;
            if events.is_empty() {
                format!("not running after {TIMEOUT:?}: {last}")
            } else {
                format!("not running after {TIMEOUT:?}: {last}; events: {events}")
            }
        }
    };
    let _ = api.delete(&pod_name, &DeleteParams::default().grace_period(0)).await;
    Check::new(name, outcome.is_some(), expected, actual)
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
}
