//! `do: upgrade`: the kubelet replaced in place by another version, as an in-place upgrade does it (eks-hybrid's
//! `nodeadm upgrade`: the new binary installed, then `nodeadm init` again). The binary nodejoin provisioned for
//! `to` is copied into the node where the image keeps its kubelet, its version recorded where the AMI's build
//! records it (`/etc/eks/kubelet-version.txt`, which nodeadm reads), and the image's own bootstrap runs again:
//! nodeadm's two units when they ran at boot (their config cache cleared, so nodeadm looks at the kubelet's version
//! again and writes its configuration for it; it restarts containerd and the kubelet), else the kubelet restarted.
//! The same Node (name and UID) must be Ready again reporting the new version, a pod from before still running
//! its container, and no certificate asked for again.
use super::csrs::csr_names;
use super::pod;
use super::reboot::epoch_seconds;
use crate::assert::registry::{self as def, CheckDef};
use crate::assert::Check;
use crate::node::seed::NodeFile;
use crate::run::env::SharedCluster;
use crate::run::node::RunningNode;
use crate::run::pipeline::observe::failfast;
use crate::scenario::after::Step;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use std::time::{Duration, Instant, SystemTime};

/// Where the new binary lands first: beside the one the image's `/usr/bin/kubelet` runs, on the node's own disk.
const STAGED: &str = "/usr/libexec/nodejoin/kubelet.upgrade";
/// How long the node's own work (the install, nodeadm's two phases) may take before it counts as hung.
const INSTALL_WITHIN: Duration = Duration::from_secs(90);
/// How often a node that is not back yet is asked whether its kubelet is failing for good.
const PROBE_EVERY: Duration = Duration::from_secs(3);

/// The install, run in the node by nodejoin (nothing of the scenario's in it). nodejoin's node image runs
/// `/usr/libexec/nodejoin/kubelet` through its `/usr/bin/kubelet` wrapper: an image whose `/usr/bin/kubelet` is
/// another is refused, not half upgraded. It prints the bootstrap it ran again. Whether nodeadm ran at boot is read
/// from the journal: systemd unloads a oneshot unit once it is over, so `systemctl show` no longer knows.
const INSTALL: &str = r#"set -eu
real=/usr/libexec/nodejoin/kubelet
new=/usr/libexec/nodejoin/kubelet.upgrade
if [ "$(readlink /usr/bin/kubelet)" != /usr/local/lib/nodejoin/kubelet-wrapper ]; then
  echo "/usr/bin/kubelet is not the one nodejoin installed ($(readlink -f /usr/bin/kubelet)): not replaced" >&2
  rm -f "$new"; exit 3
fi
"$new" --version >/dev/null
mv -f "$new" "$real"
if "$real" --help 2>&1 | grep -q -- --fail-cgroupv1; then touch "$real-has-fail-cgroupv1"; else rm -f "$real-has-fail-cgroupv1"; fi
if [ -e /etc/eks/kubelet-version.txt ]; then kubelet --version > /etc/eks/kubelet-version.txt; fi
if [ -n "$(journalctl -b -q -u nodeadm-run.service -n 1 -o cat 2>/dev/null)" ]; then
  rm -f /run/eks/nodeadm/config.json
  echo "nodeadm-config.service and nodeadm-run.service run again"
  systemctl restart nodeadm-config.service nodeadm-run.service
else
  echo "kubelet.service restarted"
  systemctl restart kubelet.service
fi
"#;

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
    let to = step.to.clone().unwrap_or_default();
    let uid = n.node.as_ref().and_then(|x| x.metadata.uid.clone()).unwrap_or_default();
    let from = n
        .node
        .as_ref()
        .and_then(|x| x.status.as_ref()?.node_info.as_ref())
        .map(|i| i.kubelet_version.clone())
        .unwrap_or_default();
    let expected_ready = format!(
        "the same Node (uid {uid}) Ready again within {}, reported by the kubelet the {action} installed",
        humantime::format_duration(within)
    );
    let expected_version = format!("kubelet {to} (was {from}), on the same Node");
    let before = csr_names(cluster, &node);
    let survivor = pod::place(client, &node).await;
    let t0 = Instant::now();
    let cpu_before = n.machine.cpu_time().await;
    let restarted_at = epoch_seconds(SystemTime::now());
    let installed = install(env, n, &to).await;
    let outcome = match &installed {
        Ok(how) => {
            notes.push(format!("{node}: {action} to {to}: {how}"));
            wait_upgraded(client, n, &uid, &to, restarted_at, t0, within).await
        }
        Err(why) => Err(why.clone()),
    };
    let ready_at = outcome.as_ref().ok().map(|_| Instant::now());
    checks.push(match &outcome {
        Ok(()) => Check::new(
            name(&def::READY_AFTER),
            true,
            expected_ready,
            format!(
                "Ready again {:.1}s after the {action} began",
                t0.elapsed().as_secs_f64()
            ),
        ),
        Err(why) => Check::new(name(&def::READY_AFTER), false, expected_ready, why.clone()),
    });
    let reported = n
        .node
        .as_ref()
        .filter(|_| outcome.is_ok())
        .and_then(|x| x.status.as_ref()?.node_info.as_ref())
        .map(|i| i.kubelet_version.clone());
    checks.push(match (&reported, &outcome) {
        (Some(v), _) => Check::new(
            name(&def::KUBELET_VERSION_AFTER),
            *v == to,
            expected_version,
            format!("kubelet {v}, Node {node} (uid {uid})"),
        ),
        (None, Err(why)) => Check::new(name(&def::KUBELET_VERSION_AFTER), false, expected_version, why.clone()),
        (None, Ok(())) => Check::new(
            name(&def::KUBELET_VERSION_AFTER),
            false,
            expected_version,
            "no nodeInfo on the Node".to_string(),
        ),
    });
    if outcome.is_ok() {
        checks.extend(super::csrs::after_step(cluster, &node, step, &before, restarted_at).await);
    }
    let expected_pod = format!("a pod placed before the {action} still Running after it, its container not restarted");
    let kept = match (&survivor, &outcome) {
        (Err(why), _) => Err(why.clone()),
        (Ok(_), Err(_)) => Err(format!(
            "not looked for: the node is not Ready again after the {action}"
        )),
        (Ok(p), Ok(())) => pod::kept(client, p, Duration::from_secs(30)).await,
    };
    if let Ok(p) = &survivor {
        pod::remove(client, p).await;
    }
    checks.push(match kept {
        Ok(seen) => Check::new(name(&def::POD_KEPT_AFTER), true, expected_pod, seen),
        Err(why) => Check::new(name(&def::POD_KEPT_AFTER), false, expected_pod, why),
    });
    let (found, said) = super::evidence::step_calls(env, n, step, t0, ready_at);
    checks.extend(found);
    notes.push(said);
    notes.extend(super::evidence::cpu_note(n, action, t0, cpu_before).await);
    (checks, notes)
}

/// Copies the kubelet of `to` into the node and runs [`INSTALL`]: which bootstrap ran again, or why the install
/// failed (its own words, and nodeadm's journal where nodeadm failed).
async fn install(env: &crate::run::Environment, n: &RunningNode, to: &str) -> Result<String, String> {
    let kubelet = crate::assets::kubelet::resolve(&env.settings, to)
        .await
        .map_err(|e| format!("the kubelet {to}: {e}"))?;
    let content = std::fs::read(&kubelet.path).map_err(|e| format!("reading {}: {e}", kubelet.path.display()))?;
    let file = NodeFile {
        path: STAGED.into(),
        content,
        mode: 0o755,
    };
    n.machine.install_file(&file).await.map_err(|e| e.to_string())?;
    let out = n
        .machine
        .exec_within(&["sh", "-c", INSTALL], &[], INSTALL_WITHIN)
        .await
        .map_err(|e| format!("installing the kubelet {to}: {e}"))?;
    let ran = out.stdout.trim().to_string();
    if out.exit_code == 0 {
        return Ok(ran);
    }
    let said = crate::process::last_lines(&out.stderr, 3, " | ");
    let journal = if ran.starts_with("nodeadm") {
        let j = n.machine.journal(Some("nodeadm-config")).await + &n.machine.journal(Some("nodeadm-run")).await;
        match crate::process::last_lines(&j, 3, " | ") {
            l if l.is_empty() => String::new(),
            l => format!("; nodeadm's journal: {l}"),
        }
    } else {
        String::new()
    };
    Err(format!(
        "installing the kubelet {to} exited {}{}: {said}{journal}",
        out.exit_code,
        if ran.is_empty() {
            String::new()
        } else {
            format!(" ({ran})")
        },
    ))
}

/// Waits until the Node `uid` reports kubelet `to` and is Ready with a heartbeat after second `since` (sent by the
/// kubelet started then), at most `within` from `t0`; ends early, with the kubelet's words, when its kubelet fails
/// for good. A Node registered anew (another UID, or another name since `since`) is said.
async fn wait_upgraded(
    client: &kube::Client,
    n: &mut RunningNode,
    uid: &str,
    to: &str,
    since: i64,
    t0: Instant,
    within: Duration,
) -> Result<(), String> {
    let api: Api<Node> = Api::all(client.clone());
    let mut last;
    let mut probed = Instant::now();
    loop {
        match api.get_opt(&n.node_name).await {
            Ok(Some(node)) if node.metadata.uid.as_deref() != Some(uid) => {
                return Err(format!(
                    "the Node was registered anew (uid {}, was {uid})",
                    node.metadata.uid.as_deref().unwrap_or("none")
                ));
            }
            Ok(Some(node)) => {
                let version = node
                    .status
                    .as_ref()
                    .and_then(|s| s.node_info.as_ref())
                    .map(|i| i.kubelet_version.clone())
                    .unwrap_or_default();
                let ready = crate::assert::node::ready_condition(&node).map(|c| {
                    (
                        c.status.clone(),
                        c.last_heartbeat_time.as_ref().map(|t| t.0.as_second()).unwrap_or(0),
                        c.message.clone().unwrap_or_default(),
                    )
                });
                let fresh = ready.as_ref().is_some_and(|(_, heartbeat, _)| *heartbeat >= since);
                if version == to && fresh && ready.as_ref().is_some_and(|(status, _, _)| status == "True") {
                    n.node = Some(node);
                    return Ok(());
                }
                last = match ready {
                    Some((status, _, message)) if version == to => {
                        format!("kubelet {version}, Ready={status}: {message}")
                    }
                    _ => format!("the Node still reports kubelet {version}"),
                };
            }
            Ok(None) => last = "the Node is gone".into(),
            Err(e) => last = format!("reading the Node: {e}"),
        }
        if probed.elapsed() >= PROBE_EVERY {
            probed = Instant::now();
            let origin = ("the upgrade's bootstrap ended", t0.elapsed());
            if let Some(stop) = failfast::probe(&n.machine, origin, None, || "the kubelet was restarted".into()).await {
                return Err(format!("after the upgrade: {}", stop.cause));
            }
        }
        if t0.elapsed() >= within {
            let anew = registered_since(client, since).await;
            return Err(format!(
                "not Ready on kubelet {to} within {}: {last}{anew}",
                humantime::format_duration(within)
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Nodes registered since second `since`, said when there are any: a kubelet that came back under another name.
async fn registered_since(client: &kube::Client, since: i64) -> String {
    let api: Api<Node> = Api::all(client.clone());
    let Ok(list) = api.list(&ListParams::default()).await else {
        return String::new();
    };
    let names: Vec<String> = list
        .items
        .into_iter()
        .filter(|x| {
            x.metadata
                .creation_timestamp
                .as_ref()
                .is_some_and(|t| t.0.as_second() >= since)
        })
        .filter_map(|x| x.metadata.name)
        .collect();
    match names.is_empty() {
        true => String::new(),
        false => format!("; Nodes registered since the upgrade began: {}", names.join(", ")),
    }
}
