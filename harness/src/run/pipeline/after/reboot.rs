//! `do: reboot`: the machine restarts as an instance does, and the node must come back as itself: the same Node
//! Ready again (reported by a kubelet started after the reboot), no certificate asked for again that was still
//! valid, a pod from before running again, and the calls this boot made.
use super::csrs::csr_names;
use super::evidence::named_after;
use super::pod;
use crate::assert::registry::{self as def, CheckDef};
use crate::assert::Check;
use crate::run::env::SharedCluster;
use crate::run::node::RunningNode;
use crate::run::pipeline::observe::failfast;
use crate::scenario::after::Step;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use std::time::{Duration, Instant, SystemTime};

/// How often a node that is not back yet is asked whether its kubelet is failing for good.
const PROBE_EVERY: Duration = Duration::from_secs(3);
/// How long a pod from before may take to run again once the node is Ready.
const POD_AGAIN_WITHIN: Duration = Duration::from_secs(60);

pub(super) async fn run(
    env: &crate::run::Environment,
    cluster: &SharedCluster,
    n: &mut RunningNode,
    step: &Step,
) -> (Vec<Check>, Vec<String>) {
    let action = step.action.name();
    let within = step.within(None);
    let node = n.node_name.clone();
    let name = |d: &CheckDef| d.on_with(&node, action);
    let mut checks = Vec::new();
    let mut notes = Vec::new();
    let client = &cluster.client;
    let uid = n.node.as_ref().and_then(|x| x.metadata.uid.clone()).unwrap_or_default();
    let boot_before = n.node.as_ref().map(boot_id).unwrap_or_default();
    let before = csr_names(cluster, &node);
    let survivor = if step.expect.pod_runs_again {
        Some(pod::place(client, &node).await)
    } else {
        None
    };
    let expected_ready = format!(
        "the same Node (uid {uid}) Ready again within {}, reported by a kubelet started after the {action}",
        humantime::format_duration(within)
    );
    let t0 = Instant::now();
    let cpu_before = n.machine.cpu_time().await;
    let booted = match n.machine.reboot(crate::deadline::SYSTEMD_BOOT.min(within)).await {
        Ok(took) => took,
        Err(e) => {
            checks.push(Check::new(
                name(&def::READY_AFTER),
                false,
                expected_ready,
                e.to_string(),
            ));
            return (checks, notes);
        }
    };
    // The restarted machine is up: no kubelet of before can speak after this second.
    let up = epoch_seconds(SystemTime::now()) - booted.as_secs() as i64;
    let machine_up = t0.elapsed().saturating_sub(booted);
    let came_back = wait_ready(client, n, (&uid, &boot_before), (up, t0.elapsed()), t0, within).await;
    let ready_at = came_back.as_ref().ok().map(|_| Instant::now());
    checks.push(match &came_back {
        Ok(()) => Check::new(
            name(&def::READY_AFTER),
            true,
            expected_ready,
            format!(
                "Ready again {:.1}s after the {action} began (machine up in {:.1}s, systemd booted in {:.1}s)",
                t0.elapsed().as_secs_f64(),
                machine_up.as_secs_f64(),
                booted.as_secs_f64()
            ),
        ),
        Err(why) => Check::new(name(&def::READY_AFTER), false, expected_ready, why.clone()),
    });
    if came_back.is_ok() {
        checks.extend(super::csrs::after_step(cluster, &node, step, &before, up).await);
    }
    if let Some(id) = n.node.as_ref().map(boot_id).filter(|_| came_back.is_ok()) {
        n.vars.insert("node.bootId".into(), id);
    }
    if came_back.is_ok() && !step.expect.files.is_empty() {
        // Placeholders filled in with the node's values, as the join's expectations are.
        let fill = |t: &String| crate::scenario::template::render(t, &n.vars).unwrap_or_else(|_| t.clone());
        let files: Vec<_> = step
            .expect
            .files
            .iter()
            .map(|f| {
                let mut f = f.clone();
                f.path = fill(&f.path);
                f.contains = f.contains.iter().map(fill).collect();
                f
            })
            .collect();
        let mut contents = Vec::new();
        for f in &files {
            contents.push(n.machine.read_file(&f.path).await);
        }
        let roots = crate::scenario::confine::Roots::default();
        let found = crate::run::pipeline::assertions::files::expectations(&roots, &node, &files, &contents, &n.vars);
        checks.extend(named_after(found, action));
    }
    if let Some(placed) = survivor {
        let expected = format!(
            "a pod placed before the {action} Running again within {}s of Ready, its container started after it",
            POD_AGAIN_WITHIN.as_secs()
        );
        let found = match (&placed, &came_back) {
            (Err(why), _) => Err(why.clone()),
            (Ok(_), Err(_)) => Err(format!(
                "not looked for: the node is not Ready again after the {action}"
            )),
            (Ok(p), Ok(())) => pod::again(client, p, up, POD_AGAIN_WITHIN).await,
        };
        if let Ok(p) = &placed {
            pod::remove(client, p).await;
        }
        checks.push(match found {
            Ok(seen) => Check::new(name(&def::POD_RUNS_AGAIN), true, expected, seen),
            Err(why) => Check::new(name(&def::POD_RUNS_AGAIN), false, expected, why),
        });
    }
    let (found, said) = super::evidence::step_calls(env, n, step, t0, ready_at);
    checks.extend(found);
    notes.push(said);
    notes.extend(super::evidence::cpu_note(n, action, t0, cpu_before).await);
    (checks, notes)
}

pub(super) fn epoch_seconds(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The boot id the Node's kubelet reported.
fn boot_id(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.node_info.as_ref())
        .map(|i| i.boot_id.clone())
        .unwrap_or_default()
}

/// Waits until the Node `uid` is Ready as reported by a kubelet of the new boot: another boot id than `before`'s
/// (the node image gives each boot its own), or a heartbeat after second `up` (only a kubelet started after the
/// reboot can send one, for an image that keeps the host's boot id). At most `within` from `t0`; ends early, with
/// the kubelet's words, when its kubelet is failing for good; else says what the Node showed last.
async fn wait_ready(
    client: &kube::Client,
    n: &mut RunningNode,
    (uid, before): (&str, &str),
    (up, booted_by): (i64, Duration),
    t0: Instant,
    within: Duration,
) -> Result<(), String> {
    let api: Api<Node> = Api::all(client.clone());
    let mut last;
    let mut probed = Instant::now();
    // When the boot's systemd transaction was seen over. A container's is when it counts as booted; a machine
    // counts as booted once its guest agent answers, while cloud-init and nodeadm (which starts the kubelet) still
    // run in its boot, as on an instance.
    let mut boot_over = None;
    if !n.machine.capabilities.kind.own_kernel {
        boot_over = Some((t0 + booted_by, kubelet_enabled(n).await));
    }
    loop {
        match api.get_opt(&n.node_name).await {
            Ok(Some(node)) if node.metadata.uid.as_deref() != Some(uid) => {
                return Err(format!(
                    "the Node was registered anew (uid {}, was {uid}): the node came back as another",
                    node.metadata.uid.as_deref().unwrap_or("none")
                ));
            }
            Ok(Some(node)) => {
                let ready = ready_condition(&node);
                let fresh = boot_id(&node) != before || ready.as_ref().is_some_and(|(_, heartbeat, _)| *heartbeat > up);
                if fresh && ready.as_ref().is_some_and(|(status, _, _)| status == "True") {
                    n.node = Some(node);
                    return Ok(());
                }
                last = match ready {
                    Some((status, _, message)) if fresh => format!("Ready={status}: {message}"),
                    Some(_) => "no status from a kubelet started after the reboot yet".into(),
                    None => "no Ready condition".into(),
                };
            }
            Ok(None) => last = "the Node is gone".into(),
            Err(e) => last = format!("reading the Node: {e}"),
        }
        if probed.elapsed() >= PROBE_EVERY {
            probed = Instant::now();
            if let Some(why) = decided(n, &mut boot_over).await {
                return Err(why);
            }
        }
        if t0.elapsed() >= within {
            return Err(format!(
                "not Ready again within {}: {last}",
                humantime::format_duration(within)
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Whether the node will not come back by itself, and why in the kubelet's words (failfast's verdicts: a kubelet
/// that crash-loops, exits on a config error, or never started once the boot was over). `boot_over` is when the
/// boot's transaction was seen over and what `systemctl is-enabled kubelet.service` said then.
async fn decided(n: &RunningNode, boot_over: &mut Option<(Instant, String)>) -> Option<String> {
    if boot_over.is_none() && transaction_over(&n.machine).await {
        *boot_over = Some((Instant::now(), kubelet_enabled(n).await));
    }
    let (over_for, enabled) = match boot_over {
        Some((at, enabled)) => (at.elapsed(), enabled.clone()),
        None => (Duration::ZERO, String::new()),
    };
    let origin = ("the boot after the reboot was over", over_for);
    let stop = failfast::probe(&n.machine, origin, None, || {
        format!("systemctl is-enabled kubelet.service: {enabled}")
    })
    .await?;
    Some(format!("after the reboot: {}", stop.cause))
}

/// What `systemctl is-enabled kubelet.service` says.
async fn kubelet_enabled(n: &RunningNode) -> String {
    n.machine
        .exec(&["systemctl", "is-enabled", "kubelet.service"], &[])
        .await
        .map(|o| o.stdout.trim().to_string())
        .unwrap_or_else(|e| format!("unknown: {e}"))
}

/// Whether the node's boot transaction is over: systemd neither initializing nor starting (`is-system-running`
/// says `running` or `degraded` then), so every unit the boot was to start has been started.
async fn transaction_over(machine: &crate::node::machine::NodeMachine) -> bool {
    match machine.exec(&["systemctl", "is-system-running"], &[]).await {
        Ok(out) => !matches!(out.stdout.trim(), "initializing" | "starting" | ""),
        Err(_) => false,
    }
}

/// The Node's Ready condition: its status, last heartbeat (seconds since the epoch) and message.
fn ready_condition(node: &Node) -> Option<(String, i64, String)> {
    let c = crate::assert::node::ready_condition(node)?;
    Some((
        c.status.clone(),
        c.last_heartbeat_time.as_ref().map(|t| t.0.as_second()).unwrap_or(0),
        c.message.clone().unwrap_or_default(),
    ))
}
