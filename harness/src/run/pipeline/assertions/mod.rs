//! `assertions`: for each node, the evidence gathered while it joined (and what is read now: Node object, files,
//! calls, cloud-init's and nodeadm's reports) turned into checks by `assert`, then each group's own checks.
mod containerd;
pub(crate) mod files;
pub(crate) mod iam;
pub(crate) mod node;
pub mod registry;
pub(crate) mod userdata;
use super::{Action, Context, Timed};
use crate::assert;
use crate::error::Result;
use crate::run::node::{calls_text, RunningNode};
use crate::run::pipeline::observe::disk;
use crate::run::report::ScenarioReport;
use crate::scenario::model::AuthMode;
use futures::future::BoxFuture;

pub(crate) const ACTION: Action = Action {
    name: "assertions",
    applies: super::always,
    timed: Timed::Whole,
    run,
};

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let (env, sc) = (cx.env, cx.sc);
        let cluster = cx.cluster("assertions")?;
        let report = &mut cx.report;
        // Read once for every node: on a shared control plane the audit log holds all scenarios' requests
        // (megabytes), and parsing it per node made the assertions of 50 nodes take over a minute.
        let audit = assert::audit::read(&cluster.logs_dir.join("audit.log"));
        for n in cx.nodes.iter_mut() {
            // A node that died after its wait ended (Ready, then killed) is named as dead, not as failed checks.
            n.liveness_checked_at = None;
            crate::run::pipeline::observe::watch::check_alive(n).await;
            host_adaptations(n, report).await;
            if n.expect().host_kernel_untouched {
                report.checks.push(assert::host_kernel::check(
                    assert::registry::HOST_KERNEL_UNTOUCHED.on(&n.node_name),
                    &n.host_kernel_before,
                    &assert::host_kernel::snapshot(),
                ));
            }
            if let Some(want) = n.expect().local_storage {
                let out = match n
                    .machine
                    .exec(&["sh", "-c", &assert::local_storage::probe()], &[])
                    .await
                {
                    Ok(o) if o.exit_code == 0 => Ok(o.stdout),
                    Ok(o) => Err(format!("exit {}: {}", o.exit_code, o.stderr.trim())),
                    Err(e) => Err(e.to_string()),
                };
                let disks = crate::eks::instance_store::count(&n.group.instance_type);
                report.checks.push(assert::local_storage::check(
                    assert::registry::LOCAL_STORAGE.on(&n.node_name),
                    want,
                    disks,
                    out.as_deref().map_err(Clone::clone),
                ));
            }
            // The pod check runs before the evidence is judged: what it sets off (a sandbox, an image pull) can be
            // the very evidence a scenario expects, such as the runtime's error when no sandbox can be created.
            let pod = match (n.expect().pod_runs, n.node.is_some() && n.container_exit.is_none()) {
                (true, true) => Some(crate::run::pipeline::observe::pod::check(&cluster.client, &n.node_name).await),
                _ => None,
            };
            if pod.is_some() && n.evidence.iter().any(Option::is_none) {
                crate::run::pipeline::observe::watch::gather_evidence(env, &cluster, n).await;
            }
            let node_checks = registry::node_checks();
            let running = pod.as_ref().and_then(|p| p.running.clone());
            let pod_check = pod.map(|p| p.check);
            crate::run::pipeline::assertions::node::check_node(
                &cluster,
                n,
                report,
                &audit,
                pod_check,
                running.as_deref(),
                node_checks,
            )
            .await;
            // The checks through the API server used the running pod; it goes now, whatever they found.
            if let Some(pod) = &running {
                crate::run::pipeline::observe::pod::delete(&cluster.client, pod).await;
            }
            calls(env, n, report);
            user_data(env, n, report).await;
            if sc.cluster.auth == AuthMode::Iam {
                if n.expect().joins {
                    let (mut checks, notes) = crate::run::pipeline::assertions::iam::checks(
                        env,
                        &audit,
                        sc,
                        &n.group,
                        &n.instance,
                        &n.node_name,
                        n.expect(),
                    );
                    userdata::name_failed_part(n, &mut checks);
                    report.checks.extend(checks);
                    report.notes.extend(notes);
                } else if let Some(d) = env.authenticator.decisions_for(&n.instance.instance_id).last() {
                    report
                        .notes
                        .push(format!("{}: last token webhook decision: {}", n.node_name, d.line()));
                }
            }
            files(sc, n, report).await;
            // A node that died while its checks ran (an exec refused: the container is gone) is named as dead
            // too, with its journal's last lines, beside the checks its death failed. A machine observed from
            // outside was shut down by these checks to read its disk: that is no death.
            if n.stopped.is_none() && !crate::run::pipeline::observe::disk::read_from_disk(n) {
                n.liveness_checked_at = None;
                crate::run::pipeline::observe::watch::check_alive(n).await;
                if let Some((stop, _)) = &n.stopped {
                    report.checks.push(assert::Check::new(
                        stop.check.on(&n.node_name),
                        false,
                        stop.expected.clone(),
                        stop.cause.clone(),
                    ));
                }
            }
            n.timeline.anchor(cx.started, n.booted, n.kubelet_start);
            report.nodes.push(n.timeline.clone());
        }
        for g in &sc.nodes {
            let members: Vec<&RunningNode> = cx.nodes.iter().filter(|n| n.group.name == g.name).collect();
            if g.expect.deterministic {
                let mut outputs = Vec::new();
                for n in &members {
                    outputs.push((
                        n.node_name.clone(),
                        crate::run::pipeline::assertions::files::normalised_outputs(&n.machine, &n.instance).await,
                    ));
                }
                report.checks.push(assert::files::determinism(&g.name, &outputs));
            }
            let mut owners: Vec<String> = members.iter().map(|n| n.node_name.clone()).collect();
            owners.push(g.name.clone());
            if g.after.is_empty() {
                assert::expect_failures(&mut report.checks, &owners, &g.expect.failing_checks);
            } else {
                // Patterns may name the checks of its steps after the join: judged once those have run.
                assert::turn_around(&mut report.checks, &owners, &g.expect.failing_checks);
            }
        }
        for c in &report.checks {
            cx.events.emit(crate::run::events::Event::CheckDone {
                scenario: report.name.clone(),
                check: c.clone(),
            });
        }
        Ok(())
    })
}

/// What the node image changed for this host rather than for the bootstrap (recorded by the node itself in
/// `/run/nodejoin/host-adaptations`, e.g. the kubelet's `--fail-cgroupv1=false` on a cgroup v1 host), so a
/// report never passes off the harness's doing as the bootstrap's.
async fn host_adaptations(n: &RunningNode, report: &mut ScenarioReport) {
    if !n.machine.sees_inside() {
        // Its kernel's own first line on the console (`Linux version …`) is all it says of itself.
        let console = n.machine.console_text();
        let kernel = console
            .lines()
            .find_map(|l| {
                l.split_once("Linux version ")
                    .map(|(_, v)| v.split(' ').next().unwrap_or("?"))
            })
            .unwrap_or("not on its console");
        report.notes.push(format!(
            "{}: runtime {}: a disk of your own without a guest agent, observed from outside (the cluster, its \
             calls, its console): {}; guest kernel {kernel}; nothing read inside it while it runs",
            n.node_name,
            n.machine.runtime(),
            n.machine.image
        ));
        return;
    }
    let text = n
        .machine
        .read_file(crate::node::HOST_ADAPTATIONS)
        .await
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let runtime = n.machine.runtime();
    if n.machine.capabilities.kind.own_kernel {
        // A machine says what it runs on: its own kernel and cgroup hierarchy, whatever the host's.
        // One line each: the kernel, the cgroup file system, and what cloud-init's ds-identify decided at boot.
        let script = "uname -r; stat -fc %T /sys/fs/cgroup; \
                      grep -E '^(Found |No ds found|single entry in datasource_list)' /run/cloud-init/ds-identify.log 2>/dev/null | tail -n 1";
        let probe = n
            .machine
            .exec(&["sh", "-c", script], &[])
            .await
            .map(|o| o.stdout)
            .unwrap_or_else(|e| format!("(unreadable: {e})"));
        let mut said = probe.lines().map(str::trim);
        let (kernel, cgroup) = (said.next().unwrap_or("?"), said.next().unwrap_or("?"));
        let ds = said.next().filter(|l| !l.is_empty()).unwrap_or("no verdict recorded");
        let adapted = if lines.is_empty() {
            "no host adaptation"
        } else {
            "host adaptations below"
        };
        report.notes.push(format!(
            "{}: runtime {runtime}: guest kernel {kernel}, /sys/fs/cgroup is {cgroup}, cloud-init's ds-identify at \
             boot: {ds}, {adapted}",
            n.node_name
        ));
    }
    if !lines.is_empty() {
        report.notes.push(format!(
            "{}: host adaptation by nodejoin: {}",
            n.node_name,
            lines.join("; ")
        ));
    }
}

/// The node's calls to the fakes: the log, a summary note, and the scenario's call expectations.
fn calls(env: &crate::run::Environment, n: &RunningNode, report: &mut ScenarioReport) {
    let calls = env.calls.of(&n.instance.instance_id);
    report.call_count += calls.len();
    report.call_log.push_str(&format!(
        "calls from {} ({}):\n{}\n",
        n.node_name,
        n.instance.instance_id,
        calls_text(env, n)
    ));
    report.notes.push(format!(
        "{}: {} calls to the fakes: {}",
        n.node_name,
        calls.len(),
        assert::calls::summary(&calls)
    ));
    let dropped = env.calls.dropped(&n.instance.instance_id);
    if let Some(cut) = crate::fakes::capped::cut_note(dropped, "calls") {
        report.notes.push(format!("{}: {cut}", n.node_name));
    }
    if let Some(want) = &n.expect().calls {
        let ready_at = n.timeline.ready.map(|d| n.kubelet_start + d);
        report
            .checks
            .extend(assert::calls::checks(&n.node_name, &calls, want, n.booted, ready_at));
        // Checks on a log that was cut would count only its start: the cut itself fails them.
        if dropped > 0 {
            report.checks.push(assert::Check::new(
                crate::assert::registry::CALLS.on_with(&n.node_name, "kept whole"),
                false,
                format!(
                    "at most {} calls (what nodejoin keeps of a node)",
                    crate::fakes::capped::CAP
                ),
                format!("{} calls", calls.len() as u64 + dropped),
            ));
        }
    }
}

/// What cloud-init and nodeadm reported for a user-data node, and the sandbox image its containerd pulled.
async fn user_data(env: &crate::run::Environment, n: &RunningNode, report: &mut ScenarioReport) {
    if n.group.user_data.is_some() {
        if let Some(note) = &n.user_data_note {
            report.notes.push(format!("{}: user data {note}", n.node_name));
        }
        if let Some(ci) = &n.cloud_init {
            report.notes.push(format!("{}: {}", n.node_name, ci.summary()));
        }
        if let Some(na) = &n.nodeadm {
            report.notes.push(format!("{}: {}", n.node_name, na.summary()));
        }
        if disk::reports_from_disk(n) {
            reports_from_disk(env, n, report).await;
            return;
        }
        if !n.machine.sees_inside() {
            report.notes.push(format!(
                "{}: cloud-init's and nodeadm's reports not read: no guest agent (their lines on the console are \
                 evidence: `source: console`)",
                n.node_name
            ));
            let signal = userdata::cfn_check(env, &n.group, &n.node_name, &n.instance.instance_id);
            report.checks.extend(signal);
            return;
        }
        report.checks.extend(userdata::checks(
            env,
            &n.group,
            &n.node_name,
            &n.instance.instance_id,
            n.cloud_init.as_ref(),
            n.nodeadm.as_ref(),
            n.bootstrap_error.as_deref(),
        ));
    }
    // Derived from what the tool did, so it holds for any nodeadm version; other nodes ask for it.
    let nodeadm_ok = n.nodeadm.as_ref().is_some_and(|r| r.succeeded()) && n.expect().joins;
    if nodeadm_ok || n.expect().sandbox_image {
        report
            .checks
            .push(userdata::sandbox_check(env, &n.machine, &n.node_name, &n.instance.instance_id).await);
    }
    if n.expect().joins && n.machine.sees_inside() {
        match containerd::containerd_warnings(n).await {
            Some(containerd::Verdict::Check(c, note)) => {
                report.checks.push(c);
                report.notes.extend(note);
            }
            Some(containerd::Verdict::Notes(notes)) => report.notes.extend(notes),
            None => {}
        }
    }
}

/// cloud-init's and nodeadm's reports of a machine observed from outside, as its disk kept them (read after its
/// shutdown), checked as a node's read inside are.
async fn reports_from_disk(env: &crate::run::Environment, n: &RunningNode, report: &mut ScenarioReport) {
    let name = &n.node_name;
    match disk::logs(n).await {
        Some(Ok(logs)) => {
            let ci = disk::cloud_init_report(&logs);
            // nodeadm where it ran (its units are in the journal) or is asked for.
            let na = (!logs.nodeadm_entries.trim().is_empty() || n.expect().nodeadm.is_some())
                .then(|| disk::nodeadm_report(&logs));
            report.notes.push(format!(
                "{name}: read from its disk after its shutdown: {}",
                ci.summary()
            ));
            if let Some(na) = &na {
                report.notes.push(format!(
                    "{name}: read from its disk after its shutdown: {}",
                    na.summary()
                ));
            }
            report.checks.extend(userdata::checks(
                env,
                &n.group,
                name,
                &n.instance.instance_id,
                Some(&ci),
                na.as_ref(),
                n.bootstrap_error.as_deref(),
            ));
        }
        Some(Err(why)) => {
            if let Some(want) = &n.expect().cloud_init {
                report.checks.push(assert::Check::new(
                    crate::assert::registry::CLOUD_INIT_STATUS.on(name),
                    false,
                    format!("{:?}", want.status).to_lowercase(),
                    why.clone(),
                ));
            }
            if let Some(want) = n.expect().nodeadm {
                report.checks.push(assert::Check::new(
                    crate::assert::registry::NODEADM.on(name),
                    false,
                    format!("{want:?}").to_lowercase(),
                    why,
                ));
            }
            report
                .checks
                .extend(userdata::cfn_check(env, &n.group, name, &n.instance.instance_id));
        }
        None => {}
    }
}

/// Idempotency, the programs the bootstrap ran, and the files it wrote.
async fn files(sc: &crate::scenario::Scenario, n: &RunningNode, report: &mut ScenarioReport) {
    if n.expect().idempotent {
        match &n.invocation {
            Some((cmd, exec_env)) => report.checks.push(
                crate::run::pipeline::assertions::files::idempotency(
                    &n.node_name,
                    &n.machine,
                    cmd,
                    exec_env,
                    n.expect().within,
                )
                .await,
            ),
            None => report.checks.push(assert::Check::new(
                crate::assert::registry::IDEMPOTENT.on(&n.node_name),
                false,
                "a second run",
                "the bootstrap never ran",
            )),
        }
    }
    if let Some(assert::executables::Trace::Read(t)) = &n.executables {
        report.notes.push(format!(
            "{}: the bootstrap ran {}",
            n.node_name,
            assert::executables::summary(&t.ran)
        ));
    }
    if let Some(want) = &n.expect().executables {
        report
            .checks
            .extend(assert::executables::checks(&n.node_name, n.executables.as_ref(), want));
    }
    let files = n.expect().files.clone();
    let mut contents = Vec::new();
    if disk::read_from_disk(n) && !files.is_empty() {
        // A machine observed from outside: the files as its disk kept them, read after its shutdown.
        let read = match disk::logs(n).await {
            Some(Ok(logs)) => Some(logs),
            Some(Err(why)) => {
                report.notes.push(format!("{}: files not read: {why}", n.node_name));
                None
            }
            None => None,
        };
        contents.extend(files.iter().map(|f| read.as_ref().and_then(|l| l.file(&f.path))));
    } else {
        for f in &files {
            contents.push(n.machine.read_file(&f.path).await);
        }
    }
    report
        .checks
        .extend(crate::run::pipeline::assertions::files::expectations(
            &sc.roots,
            &n.node_name,
            &files,
            &contents,
            &n.vars,
        ));
}
