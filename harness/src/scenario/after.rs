//! A node's life after its join (`after:` in a node group): an ordered list of steps done to each of the group's
//! nodes once the join's checks are in, each with its own expectations, its own phase in the report and checks
//! named after it. Built for more actions to come (an upgrade, a drain, a termination, a shutdown).
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
    #[serde(default)]
    pub expect: StepExpect,
}

/// What a step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// The machine restarts as an instance does: its disk kept, its memory and `/run` gone, systemd booting
    /// again (and with it whatever the image enables at boot: nodeadm's units, cloud-init, the kubelet).
    Reboot,
}

impl Action {
    /// What reports call it.
    pub fn name(self) -> &'static str {
        match self {
            Action::Reboot => "reboot",
        }
    }
}

/// What must hold after a step.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StepExpect {
    /// How long the node may take to be Ready again, counted from the step's start (default 120s).
    #[serde(default = "default_within", deserialize_with = "super::durations::wait")]
    #[schemars(with = "String")]
    pub within: Duration,
    /// Client CSRs made during the step (default `none`: the kubelet's client certificate is still valid, and a
    /// kubelet that asks again lost it).
    #[serde(default = "none")]
    pub client_csr: CsrExpectation,
    /// Serving CSRs made during the step (default `none`: the kubelet keeps its serving certificate on disk).
    #[serde(default = "none")]
    pub serving_csr: CsrExpectation,
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

fn default_within() -> Duration {
    Duration::from_secs(120)
}

fn none() -> CsrExpectation {
    CsrExpectation::None
}

impl Default for StepExpect {
    fn default() -> Self {
        Self {
            within: default_within(),
            client_csr: none(),
            serving_csr: none(),
            pod_runs_again: false,
            calls: None,
            files: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reboot_expects_the_node_back_without_new_certificates_by_default() {
        let step: Step = serde_yaml_ng::from_str("do: reboot\n").unwrap();
        assert_eq!(step.action, Action::Reboot);
        assert_eq!(step.expect.within, Duration::from_secs(120));
        assert_eq!(step.expect.client_csr, CsrExpectation::None);
        assert_eq!(step.expect.serving_csr, CsrExpectation::None);
        let step: Step = serde_yaml_ng::from_str(
            "do: reboot\nexpect:\n  within: 90s\n  podRunsAgain: true\n  calls:\n    count: {\"imds GET /latest/user-data\": 1}\n",
        )
        .unwrap();
        assert!(step.expect.pod_runs_again);
        assert_eq!(step.expect.within, Duration::from_secs(90));
        assert!(step.expect.calls.is_some());
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
