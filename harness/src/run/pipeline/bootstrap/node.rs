//! One node's bootstrap: the harness's call of `/etc/eks/bootstrap.sh` (traced with strace), or the node's user data
//! served by IMDS and run by its own cloud-init (a machine's boot runs it), with the cluster's placeholders filled
//! in.
use crate::assert::executables::Trace;
use crate::cluster::objects::BootstrapToken;
use crate::error::{Error, Result};
use crate::run::env::Environment;
use crate::run::node::RunningNode;
use crate::scenario::model::AuthMode;
use crate::scenario::template::render;
use std::collections::BTreeMap;
use std::time::Instant;

/// Runs the bootstrap in a booted node, with the cluster's placeholders filled in.
pub(crate) async fn run_bootstrap(
    env: &Environment,
    trial: &crate::run::trial::Trial,
    node: &mut RunningNode,
    cluster_vars: &BTreeMap<String, String>,
    token: &BootstrapToken,
) -> Result<()> {
    let sc = &trial.scenario;
    let label = node.machine.name.clone();
    let group = node.group.clone();
    node.vars.extend(cluster_vars.clone());
    node.expect = group.expect.resolved(&node.vars).map_err(|e| Error::node(&label, e))?;
    // The expected name first, so a node whose systemd never came up is still reported under it.
    if let Some(name) = &node.expect.node_name {
        // Checked again with the run's values in: the name becomes an artifacts directory.
        crate::scenario::names::dns_subdomain(name)
            .map_err(|e| Error::node(&label, format!("expect.nodeName, filled in: {e}")))?;
        node.timeline.node_name = name.clone();
        node.node_name = name.clone();
    }
    if node.bootstrap_error.is_some() {
        // systemd never came up; the failure is reported as a check.
        return Ok(());
    }
    let args: Vec<String> = group
        .bootstrap
        .args
        .iter()
        .map(|a| render(a, &node.vars))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::node(&label, e))?;
    let mut exec_env = env.aws_endpoint_env();
    exec_env.push(env.sts_endpoint_env());
    if sc.cluster.auth == AuthMode::BootstrapToken {
        exec_env.push(format!("BOOTSTRAP_TOKEN={}", token.token()));
    }
    for (k, v) in &group.bootstrap.env {
        exec_env.push(format!(
            "{k}={}",
            render(v, &node.vars).map_err(|e| Error::node(&label, e))?
        ));
    }
    if let Some(spec) = &group.user_data {
        if let Some((stack, resource)) = spec.signalled_stack() {
            // The stack that launched this node group, in the cluster's region: what its cfn-signal must name.
            env.cloudformation.create_stack(&stack, &resource, &sc.cluster.region);
        }
        let printed = match &spec.command {
            Some(command) => Some(
                super::command::generate(&env.docker, &env.run_id, &sc.roots, command, &node.machine, &node.vars)
                    .await
                    .map_err(|e| Error::node(&label, e))?,
            ),
            None => None,
        };
        let (served, description) = super::userdata::build(
            &env.settings,
            (sc, &group),
            spec,
            &node.instance,
            &node.vars,
            printed,
            trial.user_data_patch_of(&group.name),
        )
        .map_err(|e| Error::node(&label, e))?;
        let nodeadm = crate::userdata::carries_node_config(&served);
        let mut with_data = (*node.instance).clone();
        with_data.user_data = Some(served);
        node.instance = env.instances.register(with_data);
        node.user_data_note = Some(description);
        if !node.machine.powered() && !node.machine.sees_inside() {
            // A machine seen from outside only boots, and the cluster, its calls and its console tell the rest:
            // the wait for its join starts at power-on.
            node.booted = Instant::now();
            if let Err(e) = node.machine.power_on() {
                node.bootstrap_error = Some(e.to_string());
            }
            node.kubelet_start = Instant::now();
            return Ok(());
        }
        if !node.machine.powered() {
            // A machine boots now, its user data in place: cloud-init and nodeadm run at its boot.
            let t = Instant::now();
            node.booted = t;
            let booted = match node.machine.power_on() {
                Ok(()) => node.machine.wait_systemd(crate::deadline::SYSTEMD_BOOT).await,
                Err(e) => Err(e),
            };
            if let Err(e) = booted {
                node.bootstrap_error = Some(e.to_string());
                return Ok(());
            }
            node.timeline.container_up = Some(t.elapsed());
            node.note_cpu("boot").await;
        }
        let t1 = Instant::now();
        let own_kernel = node.machine.capabilities.kind.own_kernel;
        let wait = bootstrap_wait(own_kernel, &group.expect);
        let finished = {
            let cloud_init = super::userdata::run_cloud_init(&node.machine, wait, nodeadm, group.reboots());
            // A machine reaches AWS by its names, over TLS it must trust: a refusal ends the wait at once.
            let refused = super::trust::refused_certificate(env, &node.machine.name, &node.instance);
            // The units that end in it are read as they run, so their CPU is theirs in the node's profile.
            let watch = crate::run::node::watch_cpu(&node.machine, &mut node.cpu_units);
            if own_kernel {
                tokio::select! {
                    r = cloud_init => r,
                    e = refused => Err(e),
                }
            } else {
                tokio::select! {
                    r = cloud_init => r,
                    () = watch => Err(Error::node(&label, "the CPU watch ended".to_string())),
                }
            }
        };
        match finished {
            Ok(run) => {
                node.bootstrap = Some(run.output);
                node.cloud_init = Some(run.report);
                node.nodeadm = run.nodeadm;
            }
            Err(e) => node.bootstrap_error = Some(e.to_string()),
        }
        node.timeline.bootstrap = Some(t1.elapsed());
        node.kubelet_start = Instant::now();
        node.note_cpu("bootstrap").await;
        return Ok(());
    }
    let mut cmd = vec!["/etc/eks/bootstrap.sh"];
    cmd.extend(args.iter().map(String::as_str));
    node.invocation = Some((cmd.iter().map(|s| s.to_string()).collect(), exec_env.clone()));
    // Traced with strace when the image has it: which programs the bootstrap ran (`expect.executables`). With
    // --seccomp-bpf only execve stops the tracee; without it every syscall of every process does, and a Python
    // AWS CLI under ptrace is several times slower (the difference between 8 scenarios at once and 3).
    let traced = node
        .machine
        .exec(&["sh", "-c", "command -v strace"], &[])
        .await
        .is_ok_and(|o| o.exit_code == 0);
    let mut run: Vec<&str> = Vec::new();
    if traced {
        run.extend([
            "strace",
            "-f",
            "--seccomp-bpf",
            "-qq",
            "-e",
            "trace=execve",
            "-e",
            "signal=none",
            "-o",
            EXEC_TRACE,
        ]);
    }
    run.extend(cmd.iter().copied());
    // In a cgroup of its own: the bootstrap's CPU is the node's real work, not the harness's.
    let run = crate::node::cpu::exec_wrapper(crate::node::cpu::BOOTSTRAP_CGROUP, &run);
    let t1 = Instant::now();
    match node.machine.exec_within(&run, &exec_env, group.expect.within).await {
        Ok(out) => node.bootstrap = Some(out),
        Err(Error::Timeout { after, .. }) => {
            node.bootstrap_error = Some(format!(
                "bootstrap did not finish within {}",
                humantime::format_duration(after)
            ))
        }
        Err(e) => node.bootstrap_error = Some(e.to_string()),
    }
    node.executables = Some(if traced {
        read_trace(&node.machine).await
    } else {
        Trace::Missing("the node image has no strace".into())
    });
    node.timeline.bootstrap = Some(t1.elapsed());
    node.kubelet_start = Instant::now();
    node.note_cpu("bootstrap").await;
    Ok(())
}

/// How long the wait for a bootstrap its boot started may last. A joining node's `within` bounds its whole join;
/// a negative one's is the window watched after the bootstrap, which a machine's boot runs at emulation's pace.
fn bootstrap_wait(vm: bool, expect: &crate::scenario::expect::Expect) -> std::time::Duration {
    if vm && !expect.joins {
        expect.within.max(crate::deadline::MACHINE_BOOTSTRAP)
    } else {
        expect.within
    }
}

/// The exec trace strace wrote, parsed, or why it could not be read.
async fn read_trace(container: &crate::node::machine::NodeMachine) -> Trace {
    match container.exec(&["cat", EXEC_TRACE], &[]).await {
        Ok(out) if out.exit_code == 0 => Trace::Read(crate::assert::executables::parse_strace(&out.stdout)),
        Ok(out) => Trace::Missing(format!(
            "{EXEC_TRACE} unreadable (cat exit {}: {})",
            out.exit_code,
            out.stderr.trim()
        )),
        Err(e) => Trace::Missing(format!("{EXEC_TRACE} unreadable: {e}")),
    }
}

/// Where the bootstrap's exec trace is written in the node.
const EXEC_TRACE: &str = "/run/nodejoin-exec.trace";

#[cfg(test)]
mod tests {
    use super::bootstrap_wait;
    use crate::scenario::expect::Expect;
    use std::time::Duration;

    fn expect(yaml: &str) -> Expect {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn a_negative_machine_has_its_own_bootstrap_deadline() {
        let negative = expect("joins: false\nwithin: 90s\n");
        assert_eq!(bootstrap_wait(true, &negative), crate::deadline::MACHINE_BOOTSTRAP);
        assert_eq!(bootstrap_wait(false, &negative), Duration::from_secs(90));
        let long = expect("joins: false\nwithin: 20m\n");
        assert_eq!(bootstrap_wait(true, &long), Duration::from_secs(20 * 60));
        let joins = expect("within: 300s\n");
        assert_eq!(bootstrap_wait(true, &joins), Duration::from_secs(300));
    }
}
