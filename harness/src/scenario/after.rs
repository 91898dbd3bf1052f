//! A node's life after its join (`after:` in a node group): an ordered list of steps done to each of the group's
//! nodes once the join's checks are in, each with its own expectations, its own phase in the report and checks
//! named after it.
use super::expect::{CallExpectation, CsrExpectation, FileExpectation};
use serde::Deserialize;
use std::time::Duration;

/// One step after the join.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    /// What is done to each node of the group.
    #[serde(rename = "do")]
    pub action: Action,
    /// What a `drain` evicts: a workload placed on the node before the step (default 2 replicas under a budget of
    /// `minAvailable: 1`, and a DaemonSet's pod, which a drain leaves).
    #[serde(default)]
    pub workload: Option<Workload>,
    /// The kubelet version an `upgrade` installs (`v1.37.2`): newer than the one the node runs, not newer than the
    /// API server (Kubernetes' skew policy, checked when the scenario loads). Only for `upgrade`, which needs it.
    #[serde(default, deserialize_with = "super::versions::opt_version")]
    #[schemars(extend("pattern" = r"^v[0-9]+\.[0-9]+\.[0-9]+$"))]
    pub to: Option<String>,
    /// What must hold after the step (each key's default depends on the step).
    #[serde(default)]
    pub expect: StepExpect,
}

/// The workload a `drain` evicts: a ReplicaSet of pause pods placed on the node, a PodDisruptionBudget over them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Workload {
    /// How many pods (1 to 10).
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    /// The budget's `minAvailable` (at most `replicas`; equal to it, no eviction is ever allowed: a drain
    /// blocked for good, as a managed node group's update fails with `PodEvictionFailure`).
    #[serde(default = "default_min_available")]
    pub min_available: u32,
    /// Labels a node must carry for the ReplicaSet's pods (their `nodeSelector`, honoured as a scheduler does):
    /// the labels the user data gives its nodes, which workloads select. A replacement node without them leaves
    /// the evicted pods nowhere to go, and the budget blocks the drain (at most 8).
    #[serde(default)]
    pub node_selector: std::collections::BTreeMap<String, String>,
}

impl Default for Workload {
    fn default() -> Self {
        Self {
            replicas: default_replicas(),
            min_available: default_min_available(),
            node_selector: Default::default(),
        }
    }
}

fn default_replicas() -> u32 {
    2
}
fn default_min_available() -> u32 {
    1
}

/// The most pods a drain's workload may have.
pub const MAX_REPLICAS: u32 = 10;
/// The most labels a drain's workload may select nodes by.
pub const MAX_NODE_SELECTOR: usize = 8;

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// The machine restarts as an instance does: its disk kept, its memory and `/run` gone, systemd booting
    /// again (and with it whatever the image enables at boot: nodeadm's units, cloud-init, the kubelet).
    Reboot,
    /// Nothing is done: the kubelet renews its certificates by itself at 70-90 % of their lifetime (set short with
    /// `cluster.certificateLifetime`), through new CSRs the cluster's approvers must accept again.
    WaitForRotation,
    /// EC2 terminates the instance: it reports it `terminated`, the machine shuts down (its OS's shutdown, then
    /// off), and the cloud controller deletes its Node once the Node is not Ready, as the AWS cloud controller
    /// manager does. The last step of its group: nothing is left to do to the node.
    Terminate,
    /// The node is cordoned, as `kubectl cordon` does: marked unschedulable, tainted by the node lifecycle
    /// controller.
    Cordon,
    /// The node is cordoned, then drained through the eviction API as a managed node group's update drains it:
    /// every pod but a DaemonSet's evicted, a PodDisruptionBudget honoured (an eviction refused while the budget
    /// is spent is tried again until the replacement runs elsewhere).
    Drain,
    /// A graceful shutdown, as a Spot interruption or a stop gives one: the machine's OS powers off through
    /// systemd-logind, which tells the kubelet (`PrepareForShutdown`) and waits for its inhibitor lock, so the
    /// kubelet ends its pods within `shutdownGracePeriod` and reports the Node not ready. The last step of its
    /// group: the machine is off.
    Shutdown,
    /// The kubelet replaced in place by the version `to` names, as an in-place upgrade does it (eks-hybrid's
    /// `nodeadm upgrade`, a node's owner patching it): the new binary installed where the image keeps it and its
    /// version recorded as the AMI's build records it (`/etc/eks/kubelet-version.txt`), then the image's own
    /// bootstrap run again (nodeadm's units, their config cache cleared, so they configure the new version), else
    /// the kubelet restarted. The Node must come back as itself (name and UID) reporting the new version, and a
    /// pod from before must survive it. Usually between a `drain` and an `uncordon`.
    Upgrade,
    /// The node made schedulable again, as `kubectl uncordon` does: the node lifecycle controller removes its
    /// `node.kubernetes.io/unschedulable` taint.
    Uncordon,
}

impl Action {
    /// What reports call it.
    pub fn name(self) -> &'static str {
        match self {
            Action::Reboot => "reboot",
            Action::WaitForRotation => "rotation",
            Action::Terminate => "terminate",
            Action::Cordon => "cordon",
            Action::Drain => "drain",
            Action::Shutdown => "shutdown",
            Action::Upgrade => "upgrade",
            Action::Uncordon => "uncordon",
        }
    }

    /// The machine is off after it: nothing can follow it in a group's steps.
    pub fn ends_the_machine(self) -> bool {
        matches!(self, Action::Terminate | Action::Shutdown)
    }
}

/// What must hold after a step.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepExpect {
    /// How long the step may take: a reboot or an upgrade until the node is Ready again, a rotation until the renewed
    /// certificates are issued and served (default 120s; a rotation's, the certificate lifetime and 15s: the certificates were issued before the step).
    #[serde(default, deserialize_with = "super::durations::opt_wait")]
    #[schemars(with = "Option<String>")]
    pub within: Option<Duration>,
    /// Client CSRs made during the step. Default: `none` for a reboot (the client certificate is still valid: a
    /// kubelet that asks again lost it); `issued` for a rotation of a bootstrap-token node (an IAM node has no
    /// client certificate: `none`).
    #[serde(default)]
    pub client_csr: Option<CsrExpectation>,
    /// Serving CSRs made during the step. Default: `none` for a reboot (the kubelet keeps its serving certificate
    /// on its disk), `issued` for a rotation.
    #[serde(default)]
    pub serving_csr: Option<CsrExpectation>,
    /// A pod bound to the node before the step runs again after it: the same pod, a sandbox started after the
    /// step.
    #[serde(default)]
    pub pod_runs_again: bool,
    /// The node's calls to the fakes made during the step (from its start until the node is Ready again and the
    /// window after it), judged as `expect.calls` are.
    #[serde(default)]
    pub calls: Option<CallExpectation>,
    /// Files read once the node is Ready again (what this boot wrote), judged as `expect.files` are (`golden` is
    /// for the join's files only).
    #[serde(default)]
    pub files: Vec<FileExpectation>,
}

impl Step {
    /// How long the step may take (`certificate_lifetime`: the cluster's, for a rotation's default).
    pub fn within(&self, certificate_lifetime: Option<Duration>) -> Duration {
        self.expect.within.unwrap_or(match self.action {
            Action::Reboot => Duration::from_secs(120),
            // The kubelet's lease expires (the node lifecycle controller's grace period, 50 s), then the cloud
            // controller deletes the Node.
            Action::Terminate => Duration::from_secs(120),
            Action::Cordon | Action::Drain | Action::Uncordon => Duration::from_secs(60),
            // The new kubelet installed, nodeadm's two phases run again (they restart containerd and the kubelet),
            // the Node Ready again as reported by the new kubelet.
            Action::Upgrade => Duration::from_secs(120),
            // AL2023's kubelet has 150 s (`shutdownGracePeriod`) to end its pods; pods that end at once take
            // seconds.
            Action::Shutdown => Duration::from_secs(90),
            // The certificates were issued before the step began: renewed before they expire, or never.
            Action::WaitForRotation => {
                certificate_lifetime.unwrap_or(Duration::from_secs(120)) + Duration::from_secs(15)
            }
        })
    }

    /// The client CSRs expected of the step (`bootstrap_token`: the node holds a client certificate).
    pub fn client_csr(&self, bootstrap_token: bool) -> CsrExpectation {
        self.expect.client_csr.unwrap_or(match self.action {
            Action::WaitForRotation if bootstrap_token => CsrExpectation::Issued,
            _ => CsrExpectation::None,
        })
    }

    /// The serving CSRs expected of the step.
    pub fn serving_csr(&self) -> CsrExpectation {
        self.expect.serving_csr.unwrap_or(match self.action {
            Action::WaitForRotation => CsrExpectation::Issued,
            _ => CsrExpectation::None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reboot_expects_the_node_back_without_new_certificates_by_default() {
        let step: Step = serde_yaml_ng::from_str("do: reboot\n").unwrap();
        assert_eq!(step.action, Action::Reboot);
        assert_eq!(step.within(None), Duration::from_secs(120));
        assert_eq!(step.client_csr(true), CsrExpectation::None);
        assert_eq!(step.serving_csr(), CsrExpectation::None);
        let step: Step = serde_yaml_ng::from_str(
            "do: reboot\nexpect:\n  within: 90s\n  podRunsAgain: true\n  calls:\n    count: {\"imds GET /latest/user-data\": 1}\n",
        )
        .unwrap();
        assert!(step.expect.pod_runs_again);
        assert_eq!(step.within(None), Duration::from_secs(90));
        assert!(step.expect.calls.is_some());
    }

    #[test]
    fn a_rotation_expects_new_certificates_within_the_lifetime_and_a_minute() {
        let step: Step = serde_yaml_ng::from_str("do: wait-for-rotation\n").unwrap();
        assert_eq!(step.within(Some(Duration::from_secs(180))), Duration::from_secs(195));
        assert_eq!(step.client_csr(true), CsrExpectation::Issued);
        assert_eq!(step.client_csr(false), CsrExpectation::None);
        assert_eq!(step.serving_csr(), CsrExpectation::Issued);
    }

    #[test]
    fn a_termination_waits_for_the_node_to_go() {
        let step: Step = serde_yaml_ng::from_str("do: terminate\n").unwrap();
        assert_eq!(step.action, Action::Terminate);
        assert_eq!(step.action.name(), "terminate");
        assert_eq!(step.within(None), Duration::from_secs(120));
    }

    #[test]
    fn a_drain_places_two_pods_under_a_budget_of_one_by_default() {
        let step: Step = serde_yaml_ng::from_str("do: drain\n").unwrap();
        assert_eq!(step.action, Action::Drain);
        assert_eq!(
            step.workload.clone().unwrap_or_default(),
            Workload {
                replicas: 2,
                min_available: 1,
                node_selector: Default::default()
            }
        );
        assert_eq!(step.within(None), Duration::from_secs(60));
        let step: Step = serde_yaml_ng::from_str("do: drain\nworkload: {replicas: 3, minAvailable: 3}\n").unwrap();
        assert_eq!(
            step.workload,
            Some(Workload {
                replicas: 3,
                min_available: 3,
                node_selector: Default::default()
            })
        );
        let step: Step = serde_yaml_ng::from_str("do: shutdown\n").unwrap();
        assert!(step.action.ends_the_machine() && !Action::Drain.ends_the_machine());
        assert_eq!(step.serving_csr(), CsrExpectation::None);
    }

    #[test]
    fn an_upgrade_names_the_kubelet_it_installs() {
        let step: Step = serde_yaml_ng::from_str("do: upgrade\nto: v1.37.2\n").unwrap();
        assert_eq!(step.action, Action::Upgrade);
        assert_eq!(step.to.as_deref(), Some("v1.37.2"));
        assert_eq!(step.within(None), Duration::from_secs(120));
        assert_eq!(step.client_csr(false), CsrExpectation::None);
        assert_eq!(step.serving_csr(), CsrExpectation::None);
        assert!(!step.action.ends_the_machine());
        let e = serde_yaml_ng::from_str::<Step>("do: upgrade\nto: \"1.37\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'1.37' must look like v1.34.4"), "{e}");
        let step: Step = serde_yaml_ng::from_str("do: uncordon\n").unwrap();
        assert_eq!(
            (step.action.name(), step.within(None)),
            ("uncordon", Duration::from_secs(60))
        );
    }

    #[test]
    fn unknown_actions_and_keys_are_refused() {
        let e = serde_yaml_ng::from_str::<Step>("do: explode\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `explode`"), "{e}");
        let e = serde_yaml_ng::from_str::<Step>("do: reboot\nexpect: {sameNod: true}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `sameNod`"), "{e}");
    }
}
