//! A node of a scenario while it runs: its machine, instance, what the bootstrap did and what the cluster saw,
//! with the texts (bootstrap output, calls, IMDS requests) that evidence and artifacts quote.
use super::env::Environment;
use super::report::NodeTimeline;
use crate::assert;
use crate::docker::ExecOutput;
use crate::fakes::instances::Instance;
use crate::node::machine::NodeMachine;
use crate::scenario::model::{Expect, NodeGroup};
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A node of the scenario, from its machine's start to teardown.
pub(crate) struct RunningNode {
    pub(crate) group: NodeGroup,
    /// The group's expectation, its placeholders filled in with this node's values once they are all known
    /// (before its bootstrap runs); until then, as the scenario wrote it.
    pub(crate) expect: Expect,
    pub(crate) machine: NodeMachine,
    pub(crate) instance: Arc<Instance>,
    pub(crate) node_name: String,
    pub(crate) vars: BTreeMap<String, String>,
    pub(crate) bootstrap: Option<ExecOutput>,
    pub(crate) bootstrap_error: Option<String>,
    /// When the bootstrap finished (≈ when it started the kubelet).
    pub(crate) kubelet_start: Instant,
    pub(crate) timeline: NodeTimeline,
    pub(crate) node: Option<Node>,
    pub(crate) serving: Option<assert::serving::ServingCert>,
    pub(crate) serving_error: String,
    pub(crate) client_csr: Option<assert::csr::CsrState>,
    pub(crate) serving_csr: Option<assert::csr::CsrState>,
    pub(crate) evidence: Vec<Option<String>>,
    /// When the last expected piece of evidence was found: a negative scenario keeps watching from then on.
    pub(crate) evidence_complete_at: Option<Instant>,
    /// When the node was last probed for a decided failure (see `observe::failure_probe_every`).
    pub(crate) failure_probed_at: Option<Instant>,
    /// When the container was last asked whether it still runs, and why it does not (exit code, OOM kill): a
    /// dead node ends its wait at once, and nothing that needs it running is asked of it afterwards.
    pub(crate) liveness_checked_at: Option<Instant>,
    pub(crate) container_exit: Option<String>,
    /// The name a Node carrying this instance's providerID registered under, when it is not the expected one.
    pub(crate) registered_as: Option<String>,
    pub(crate) done: bool,
    /// `userData` nodes: what the user data was, and what cloud-init reported.
    pub(crate) user_data_note: Option<String>,
    pub(crate) cloud_init: Option<crate::assert::cloud_init::CloudInitReport>,
    pub(crate) nodeadm: Option<crate::assert::nodeadm::NodeadmReport>,
    /// When the container was started: the origin of the call log's times.
    pub(crate) booted: Instant,
    /// The harness-run bootstrap's command and environment, for the idempotency re-run.
    pub(crate) invocation: Option<(Vec<String>, Vec<String>)>,
    /// The bootstrap's exec trace, or why there is none (`None`: it did not run under the harness).
    pub(crate) executables: Option<assert::executables::Trace>,
    /// Why the harness stopped waiting for this node before `within` ran out, and when (after the kubelet was
    /// started, or the bootstrap or cloud-init finished).
    pub(crate) stopped: Option<(Stop, Duration)>,
    /// The host's kernel parameters a fresh procfs or sysfs reaches, read before the node started
    /// (`expect.hostKernelUntouched`).
    pub(crate) host_kernel_before: Vec<(String, String)>,
    /// Readings of its cgroup tree's CPU at the end of each phase so far (`boot`, `bootstrap`, `join`).
    pub(crate) cpu_readings: Vec<(&'static str, crate::node::cpu::Reading)>,
    /// The units seen in its cgroup tree so far, for those that end between readings.
    pub(crate) cpu_units: crate::node::cpu::Tracker,
}

/// How often a machine whose CPU is read from the host is read while its bootstrap runs: the units that end in
/// it (cloud-init's stages, nodeadm's) run for longer than this.
const CPU_WATCH_EVERY: Duration = Duration::from_millis(100);

/// Reads `machine`'s cgroup tree into `units` every [`CPU_WATCH_EVERY`], until dropped; nothing for a machine
/// whose tree is not read from the host.
pub(crate) async fn watch_cpu(machine: &NodeMachine, units: &mut crate::node::cpu::Tracker) {
    if !machine.capabilities.kind.cpu_from_host {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(CPU_WATCH_EVERY).await;
        if let Some(r) = machine.cpu_reading().await {
            units.observe(&r);
        }
    }
}

impl RunningNode {
    pub(crate) fn expect(&self) -> &Expect {
        &self.expect
    }

    /// Reads its cgroup tree's CPU as `phase` ends (a machine whose tree cannot be read keeps none).
    pub(crate) async fn note_cpu(&mut self, phase: &'static str) {
        if let Some(r) = self.machine.cpu_reading().await {
            let r = self.cpu_units.complete(r);
            self.cpu_readings.push((phase, r));
        }
    }

    /// Each phase's CPU by part, from the readings: what was used between the end of the one before and its own.
    pub(crate) fn cpu_profile(&self) -> Vec<(String, crate::node::cpu::Profile)> {
        let mut before = crate::node::cpu::Profile::default();
        let mut out = Vec::new();
        for (phase, r) in &self.cpu_readings {
            let now = r.profile();
            out.push((phase.to_string(), now.since(&before)));
            before = now;
        }
        out
    }
}

pub(crate) fn bootstrap_failed(n: &RunningNode) -> bool {
    n.bootstrap_error.is_some() || n.bootstrap.as_ref().is_some_and(|b| b.exit_code != 0)
}

pub(crate) fn bootstrap_text(n: &RunningNode) -> String {
    match (&n.bootstrap, &n.bootstrap_error) {
        (Some(b), _) => format!(
            "exit code: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            b.exit_code, b.stdout, b.stderr
        ),
        (None, Some(e)) => format!("bootstrap did not run to completion: {e}"),
        (None, None) => "bootstrap not run".into(),
    }
}

/// The node's calls to the fakes, one line each, timed from its container's start.
pub(crate) fn calls_text(env: &Environment, n: &RunningNode) -> String {
    env.calls
        .of(&n.instance.instance_id)
        .iter()
        .map(|c| c.line(n.booted))
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn imds_text(env: &Environment, n: &RunningNode) -> String {
    let ip = std::net::IpAddr::V4(n.instance.private_ip);
    let cut = crate::fakes::capped::cut_note(env.instances.requests_dropped(ip), "requests");
    env.instances
        .requests_from(ip)
        .iter()
        // Addresses are reused by later containers: only this instance's lifetime counts.
        .filter(|r| r.at >= n.instance.launch_time)
        .map(|r| {
            format!(
                "{} {} {} -> {}{}{}",
                crate::fakes::rfc3339(r.at),
                r.method,
                r.path,
                r.status,
                if r.with_token { " (token)" } else { " (no token)" },
                if r.note.is_empty() {
                    String::new()
                } else {
                    format!(": {}", r.note)
                }
            )
        })
        .chain(cut)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Why a node was given up on, as the first failing check of that node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stop {
    /// The check that failed.
    pub check: &'static crate::assert::registry::CheckDef,
    pub expected: String,
    /// The cause, quoted from the node (journal, cloud-init, nodeadm).
    pub cause: String,
}
