//! `do: shutdown`: a graceful shutdown, as a Spot interruption or a stop gives one. The machine's OS is asked to
//! power off through systemd-logind, which first tells the kubelet (`PrepareForShutdown`) and waits for the delay
//! inhibitor lock the kubelet took at start (`shutdownGracePeriod`, which AL2023's nodeadm sets on 1.34+). The
//! kubelet ends its pods (reason `Terminated`) and reports the Node not ready before it lets go. Each is read from
//! what the node left behind: logind's locks before, the pod's status and the Node's condition after.
use super::pod;
use crate::assert::registry::{self as def, CheckDef};
use crate::assert::Check;
use crate::run::env::SharedCluster;
use crate::run::node::RunningNode;
use crate::scenario::after::Step;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::Api;
use std::time::{Duration, Instant};

/// How long the Node's and the pod's last statuses are read for after the machine is off (API errors retried).
const READ_FOR: Duration = Duration::from_secs(5);

pub(super) async fn run(
    env: &crate::run::Environment,
    cluster: &SharedCluster,
    n: &mut RunningNode,
    step: &Step,
) -> (Vec<Check>, Vec<String>) {
    let action = step.action.name();
    let node = n.node_name.clone();
    let name = |d: &CheckDef| d.on_with(&node, action);
    let within = step.within(None);
    let client = &cluster.client;
    let mut checks = Vec::new();
    let mut notes = Vec::new();

    checks.push(inhibitor(n, name(&def::INHIBITOR_LOCK_BEFORE)).await);
    let survivor = pod::place(client, &node).await;
    let t0 = Instant::now();
    let off = n.machine.power_off(within).await;
    // Off (or not answering): later phases see a node that stopped, its journal read from where it outlives it.
    n.container_exit = Some("shut down by the scenario (`do: shutdown`)".into());
    let ip = std::net::IpAddr::V4(n.instance.private_ip);
    env.imds.forget(ip);
    env.instances.forget_requests(ip);
    match &off {
        Ok(how) => notes.push(format!("{node}: {how}")),
        Err(e) => notes.push(format!("{node}: {e}")),
    }
    let pods_expected = format!(
        "the pod placed before ended by the kubelet's shutdown manager (reason Terminated) before the machine was off, \
         within {}",
        humantime::format_duration(within)
    );
    checks.push(match (&survivor, &off) {
        (Err(why), _) => Check::new(name(&def::PODS_TERMINATED_AFTER), false, pods_expected, why.clone()),
        (Ok(_), Err(e)) => Check::new(name(&def::PODS_TERMINATED_AFTER), false, pods_expected, e.to_string()),
        (Ok(s), Ok(_)) => {
            let found = match ended(client, s).await {
                Ok(said) => Ok(said),
                Err(api_says) => match killed_in_journal(n, &s.name).await {
                    Ok(journal) => Ok(format!(
                        "{journal}; its last status did not reach the API server before the machine was off ({})",
                        api_says.split(':').next().unwrap_or_default()
                    )),
                    Err(()) => Err(api_says),
                },
            };
            Check::new(
                name(&def::PODS_TERMINATED_AFTER),
                found.is_ok(),
                pods_expected,
                found.unwrap_or_else(|e| e),
            )
        }
    });
    let ready_expected =
        "the Node's Ready condition False, as the kubelet reported it while shutting down (not the node lifecycle \
         controller's Unknown once its lease expires)"
            .to_string();
    checks.push(match &off {
        Err(e) => Check::new(name(&def::NOT_READY_AFTER), false, ready_expected, e.to_string()),
        Ok(_) => {
            let found = not_ready(client, &node).await;
            Check::new(
                name(&def::NOT_READY_AFTER),
                found.is_ok(),
                ready_expected,
                found.unwrap_or_else(|e| e),
            )
        }
    });
    if let Ok(s) = &survivor {
        pod::remove(client, s).await;
    }
    notes.push(format!("{node}: {action} took {:.1}s", t0.elapsed().as_secs_f64()));
    (checks, notes)
}

/// The kubelet's delay lock on shutdown in logind's list, and how long logind waits for it.
async fn inhibitor(n: &RunningNode, name: String) -> Check {
    let expected = "the kubelet holds a delay inhibitor lock on shutdown in systemd-logind, which waits for it \
                    (InhibitDelayMaxSec)"
        .to_string();
    let listed = n
        .machine
        .exec(
            &["systemd-inhibit", "--list", "--no-pager", "--no-legend", "--mode=delay"],
            &[],
        )
        .await;
    let out = match listed {
        Ok(o) if o.exit_code == 0 => o.stdout,
        Ok(o) => {
            return Check::new(
                name,
                false,
                expected,
                format!(
                    "systemd-inhibit exited {}: {}{}",
                    o.exit_code,
                    crate::process::last_lines(&o.stderr, 2, " | "),
                    kubelet_says(n).await
                ),
            )
        }
        Err(e) => return Check::new(name, false, expected, format!("listing logind's locks: {e}")),
    };
    match kubelet_lock(&out) {
        Some(line) => {
            let delay = n
                .machine
                .exec(
                    &[
                        "busctl",
                        "get-property",
                        "org.freedesktop.login1",
                        "/org/freedesktop/login1",
                        "org.freedesktop.login1.Manager",
                        "InhibitDelayMaxUSec",
                    ],
                    &[],
                )
                .await
                .ok()
                .and_then(|o| delay_seconds(&o.stdout));
            Check::new(
                name,
                true,
                expected,
                format!(
                    "{line}; logind waits up to {}",
                    delay
                        .map(|s| format!("{s}s"))
                        .unwrap_or_else(|| "an unknown time".into())
                ),
            )
        }
        None => Check::new(
            name,
            false,
            expected,
            format!(
                "no lock of the kubelet's among logind's delay locks ({}){}",
                if out.trim().is_empty() { "none" } else { out.trim() },
                kubelet_says(n).await
            ),
        ),
    }
}

/// The kubelet's line in `systemd-inhibit --list --no-legend` (`WHO UID USER PID COMM WHAT WHY MODE`).
fn kubelet_lock(list: &str) -> Option<String> {
    list.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .find(|l| l.contains("kubelet") && l.contains("shutdown") && l.ends_with("delay"))
}

/// `t 150000000` (busctl's answer for a usec property) in seconds.
fn delay_seconds(busctl: &str) -> Option<u64> {
    let usec: u64 = busctl.trim().strip_prefix("t ")?.trim().parse().ok()?;
    Some(usec / 1_000_000)
}

/// What the kubelet logged of its shutdown manager, quoted after a missing lock.
async fn kubelet_says(n: &RunningNode) -> String {
    let journal = n.machine.journal(Some("kubelet")).await;
    let said: Vec<&str> = journal
        .lines()
        .filter(|l| l.contains("shutdown") || l.contains("inhibit"))
        .collect();
    match said.last() {
        Some(l) => format!("; the kubelet: {}", l.trim()),
        None => "; the kubelet said nothing of a node shutdown (no `shutdownGracePeriod` in its configuration?)".into(),
    }
}

/// The pod's last status: ended by the kubelet for the shutdown, or what it says instead. The kubelet's shutdown
/// manager gives the pods it ends reason `Terminated` and a `DisruptionTarget` condition (`TerminationByKubelet`),
/// and phase Failed unless the pod had already Succeeded (its container exited 0 first): either phase counts.
async fn ended(client: &kube::Client, s: &pod::Survivor) -> Result<String, String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    read_for(|| async {
        match api.get(&s.name).await {
            Ok(p) => shutdown_ended(&p),
            Err(e) => Err(format!("reading the pod: {e}")),
        }
    })
    .await
}

/// Asks `read` again every 500 ms until it says yes, at most [`READ_FOR`]: its answer, or its last no (API errors
/// included).
async fn read_for<F, Fut>(mut read: F) -> Result<String, String>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let t0 = Instant::now();
    loop {
        match read().await {
            Ok(said) => return Ok(said),
            Err(last) if t0.elapsed() >= READ_FOR => return Err(last),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// The kubelet's own account, from the journal the node left on the host: its shutdown manager logs each pod it
/// has ended (`Shutdown manager finished killing pod`, at AL2023's verbosity 2). A machine that powers off as soon
/// as the kubelet lets go may take the pod's last status with it, unsent: the API server then still says Running,
/// as it does of a real node's pods after a shutdown.
async fn killed_in_journal(n: &RunningNode, pod: &str) -> Result<String, ()> {
    let journal = match n.machine.journal_on_host(Some("kubelet.service"), None).await {
        Some(Ok(j)) => j,
        _ => return Err(()),
    };
    let quoted = format!("pod=\"{}/{pod}\"", super::workload::NAMESPACE);
    journal
        .lines()
        .find(|l| l.contains("Shutdown manager finished killing pod") && l.contains(&quoted))
        .map(|_| {
            format!(
                "ended by the kubelet's shutdown manager (its journal: \"Shutdown manager finished killing pod\" \
                 {quoted})"
            )
        })
        .ok_or(())
}

/// Whether the pod's status is the shutdown manager's: what it says either way.
fn shutdown_ended(p: &Pod) -> Result<String, String> {
    let status = p.status.clone().unwrap_or_default();
    let (phase, reason) = (status.phase.unwrap_or_default(), status.reason.unwrap_or_default());
    let disruption = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget" && c.status == "True")
        .map(|c| c.reason.clone().unwrap_or_default());
    let terminal = phase == "Failed" || phase == "Succeeded";
    if terminal && (reason == "Terminated" || disruption.as_deref() == Some("TerminationByKubelet")) {
        return Ok(format!(
            "phase {phase}, reason {}{}: \"{}\"",
            if reason.is_empty() { "none" } else { &reason },
            disruption
                .map(|d| format!(", DisruptionTarget {d}"))
                .unwrap_or_default(),
            status.message.unwrap_or_default()
        ));
    }
    Err(format!(
        "phase {}{}{}: the kubelet did not end it for the shutdown before the machine was off",
        if phase.is_empty() { "none" } else { &phase },
        if reason.is_empty() {
            String::new()
        } else {
            format!(", reason {reason}")
        },
        disruption
            .map(|d| format!(", DisruptionTarget {d}"))
            .unwrap_or_default()
    ))
}

/// The Node's Ready condition as the kubelet left it.
async fn not_ready(client: &kube::Client, node: &str) -> Result<String, String> {
    let api: Api<Node> = Api::all(client.clone());
    read_for(|| async {
        let found = api.get(node).await.map_err(|e| format!("reading the Node: {e}"))?;
        match crate::assert::node::ready_condition(&found).cloned() {
            Some(c) if c.status == "False" => Ok(format!(
                "Ready False, {}: \"{}\"",
                c.reason.unwrap_or_default(),
                c.message.unwrap_or_default()
            )),
            Some(c) => Err(format!(
                "Ready {}{}: the kubelet did not report its shutdown",
                c.status,
                c.message.map(|m| format!(" (\"{m}\")")).unwrap_or_default()
            )),
            None => Err("no Ready condition".into()),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_lock_is_found_in_loginds_list() {
        let list = "kubelet 0 root 1234 kubelet shutdown Kubelet needs time to handle node shutdown delay\n\
                    ModemManager 0 root 99 ModemManager sleep ModemManager needs to reset devices delay\n";
        assert_eq!(
            kubelet_lock(list).as_deref(),
            Some("kubelet 0 root 1234 kubelet shutdown Kubelet needs time to handle node shutdown delay")
        );
        assert_eq!(
            kubelet_lock("ModemManager 0 root 99 ModemManager sleep x delay\n"),
            None
        );
        assert_eq!(kubelet_lock(""), None);
        assert_eq!(delay_seconds("t 150000000\n"), Some(150));
        assert_eq!(delay_seconds("garbage"), None);
    }

    #[test]
    fn a_pod_ended_by_the_shutdown_manager_is_told_apart() {
        let pod = |status: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({ "metadata": { "name": "p" }, "status": status })).unwrap()
        };
        let by_kubelet = pod(serde_json::json!({ "phase": "Failed", "reason": "Terminated",
            "message": "Pod was terminated in response to imminent node shutdown.",
            "conditions": [{ "type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet" }] }));
        let said = shutdown_ended(&by_kubelet).unwrap();
        assert!(
            said.starts_with("phase Failed, reason Terminated, DisruptionTarget TerminationByKubelet"),
            "{said}"
        );
        // Its container exited 0 before the status was set: Succeeded, still the kubelet's doing.
        assert!(shutdown_ended(&pod(
            serde_json::json!({ "phase": "Succeeded", "reason": "Terminated" })
        ))
        .is_ok());
        let gone_under = pod(serde_json::json!({ "phase": "Running" }));
        assert!(shutdown_ended(&gone_under)
            .unwrap_err()
            .contains("phase Running: the kubelet did not end it"));
        assert!(shutdown_ended(&pod(serde_json::json!({ "phase": "Succeeded" }))).is_err());
    }
}
