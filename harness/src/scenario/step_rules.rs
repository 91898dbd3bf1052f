//! The rules of a node group's steps after the join (`after:`) that need more than one field: their number, their
//! order (nothing after a step that ends the machine), what each step's keys are for, what the group's machine can
//! do, and an upgrade's version against the kubelet the node runs then and the API server.
use super::after::{Action, MAX_NODE_SELECTOR, MAX_REPLICAS};
use super::model::{NodeGroup, Scenario};

/// A bound on a group's steps after the join, so a scenario cannot hold a run for days.
pub const MAX_STEPS: usize = 16;

/// Why `n`'s steps are refused, and the key the refusal is about; `None` when they keep to the rules.
pub(super) fn check(
    s: &Scenario,
    n: &NodeGroup,
    machine: &crate::node::machine::MachineKind,
) -> Option<(&'static str, String)> {
    let after = |why: String| Some(("after", why));
    if n.after.len() > MAX_STEPS {
        return after(format!(
            "{} steps after the join; at most {MAX_STEPS} (each may last up to an hour)",
            n.after.len()
        ));
    }
    if !n.after.is_empty() && !n.expect.joins {
        return after("steps after the join need a node that joins".into());
    }
    if let Some(i) = n.after.iter().position(|s| s.action.ends_the_machine()) {
        if let Some(next) = n.after.get(i + 1) {
            let last = n.after[i].action.name();
            return after(format!(
                "step {} (`do: {}`) comes after `do: {last}`; the machine is off then, with nothing left to do: \
                 {last} last",
                i + 2,
                next.action.name(),
            ));
        }
    }
    for (i, step) in n.after.iter().enumerate() {
        if let Some(w) = &step.workload {
            let why = if step.action != Action::Drain {
                format!(
                    "`workload` is what a drain evicts; step {} is `do: {}`",
                    i + 1,
                    step.action.name()
                )
            } else if w.replicas == 0 || w.replicas > MAX_REPLICAS {
                format!("`workload.replicas` is {}; 1 to {MAX_REPLICAS}", w.replicas)
            } else if w.min_available > w.replicas {
                format!(
                    "`workload.minAvailable` ({}) is more than its replicas ({}): no budget could be met",
                    w.min_available, w.replicas
                )
            } else if w.node_selector.len() > MAX_NODE_SELECTOR {
                format!(
                    "`workload.nodeSelector` has {} labels; at most {MAX_NODE_SELECTOR}",
                    w.node_selector.len()
                )
            } else if let Some(why) = w
                .node_selector
                .iter()
                .find_map(|(k, v)| super::names::label(k, v).err())
            {
                format!("`workload.nodeSelector`: {why}")
            } else {
                continue;
            };
            return Some(("workload", why));
        }
    }
    if let Some(why) = upgrades(s, n, machine) {
        return Some(("to", why));
    }
    let needs = |action: Action, can: bool, what: &str| {
        (n.after.iter().any(|s| s.action == action) && !can).then(|| {
            format!(
                "`do: {}` needs a machine {what}; runtime {} cannot",
                action.name(),
                machine.name
            )
        })
    };
    if let Some(why) = needs(
        Action::Shutdown,
        machine.graceful_shutdown,
        "whose OS can be asked to power off through systemd-logind",
    )
    .or_else(|| needs(Action::Reboot, machine.reboots, "that reboots"))
    {
        return after(why);
    }
    if n.after.iter().flat_map(|s| &s.expect.files).any(|f| f.golden.is_some()) {
        return Some((
            "golden",
            "a step's files take `values` and `contains`; `golden` is for the join's files".into(),
        ));
    }
    None
}

/// An upgrade's `to`: given for an upgrade and only there, newer than the kubelet the node runs at that step (the
/// group's `kubeletVersion`, the control plane's, or an earlier upgrade's), within the skew policy against the API
/// server (never newer), on a machine whose kubelet nodejoin can replace.
fn upgrades(s: &Scenario, n: &NodeGroup, machine: &crate::node::machine::MachineKind) -> Option<String> {
    let api = &s.cluster.kubernetes_version;
    let mut running = n.kubelet_version.clone().unwrap_or_else(|| api.clone());
    for (i, step) in n.after.iter().enumerate() {
        let to = match (step.action, &step.to) {
            (Action::Upgrade, Some(to)) => to,
            (Action::Upgrade, None) => {
                return Some(format!(
                    "step {} (`do: upgrade`) needs `to`: the kubelet version it installs",
                    i + 1
                ))
            }
            (other, Some(_)) => {
                return Some(format!(
                    "`to` is the version an upgrade installs; step {} is `do: {}`",
                    i + 1,
                    other.name()
                ))
            }
            (_, None) => continue,
        };
        if !machine.replaces_kubelet {
            return Some(format!(
                "`do: upgrade` needs a machine whose kubelet nodejoin can replace while it runs; runtime {} cannot",
                machine.name
            ));
        }
        if super::versions::older(&running, to) != Some(true) {
            return Some(format!(
                "step {} upgrades to {to}, but the node runs kubelet {running} then: an upgrade goes to a newer \
                 version",
                i + 1
            ));
        }
        let ignored = s.cluster.kubernetes_versions.as_ref().and_then(|v| v.unsupported(api));
        if ignored.is_none() {
            if let Some(why) = super::versions::skew(&format!("step {}'s `to`", i + 1), to, api) {
                return Some(why);
            }
        }
        running = to.clone();
    }
    None
}

#[cfg(test)]
mod tests {
    fn parse(text: &str) -> crate::error::Result<crate::scenario::model::Scenario> {
        super::super::load::parse(text, &crate::paths::workspace_root().join("test.yaml"))
    }

    fn refusal(text: &str) -> String {
        match parse(text) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e.to_string(),
        }
    }

    const GROUP: &str = "nodes:\n  - name: a\n    bootstrap:\n      args: [\"x\"]\n";

    #[test]
    fn terminate_is_the_last_step() {
        let base = format!("{GROUP}    after:\n      - do: terminate\n");
        assert!(parse(&base).is_ok());
        let msg = refusal(&format!("{base}      - do: reboot\n"));
        assert!(
            msg.contains("step 2 (`do: reboot`) comes after `do: terminate`; the machine is off then"),
            "{msg}"
        );
    }

    #[test]
    fn a_drains_workload_is_bounded_and_only_for_a_drain() {
        let base = format!("{GROUP}    after:\n");
        for (steps, says) in [
            (
                "do: reboot\n        workload: {}",
                "`workload` is what a drain evicts; step 1 is `do: reboot`",
            ),
            (
                "do: drain\n        workload: {replicas: 11}",
                "`workload.replicas` is 11; 1 to 10",
            ),
            (
                "do: drain\n        workload: {nodeSelector: {\"a/b/c\": x}}",
                "`workload.nodeSelector`: label key 'a/b/c'",
            ),
            ("do: drain\n        workload: {replicas: 0}", "`workload.replicas` is 0"),
            (
                "do: drain\n        workload: {replicas: 2, minAvailable: 3}",
                "`workload.minAvailable` (3) is more than its replicas (2)",
            ),
            ("do: shutdown\n      - do: cordon", "comes after `do: shutdown`"),
        ] {
            let msg = refusal(&format!("{base}      - {steps}\n"));
            assert!(msg.contains(says), "{steps}: {msg}");
        }
        assert!(parse(&format!(
            "{base}      - do: drain\n        workload: {{replicas: 3, minAvailable: 3}}\n"
        ))
        .is_ok());
    }

    #[test]
    fn an_upgrade_goes_to_a_newer_kubelet_within_the_skew_policy() {
        let cluster = "cluster:\n  kubernetesVersion: v1.37.2\n";
        let steps = |kubelet: &str, steps: &str| format!("{cluster}{GROUP}{kubelet}    after:\n{steps}");
        let ok = steps(
            "    kubeletVersion: v1.36.3\n",
            "      - do: drain\n      - do: upgrade\n        to: v1.37.2\n      - do: uncordon\n",
        );
        assert!(parse(&ok).is_ok(), "{:?}", parse(&ok).err());
        for (kubelet, step, says) in [
            ("", "      - do: upgrade\n", "step 1 (`do: upgrade`) needs `to`"),
            (
                "",
                "      - do: reboot\n        to: v1.37.2\n",
                "`to` is the version an upgrade installs",
            ),
            (
                "",
                "      - do: upgrade\n        to: v1.37.2\n",
                "step 1 upgrades to v1.37.2, but the node runs kubelet v1.37.2 then",
            ),
            (
                "    kubeletVersion: v1.36.3\n",
                "      - do: upgrade\n        to: v1.35.4\n",
                "an upgrade goes to a newer version",
            ),
            (
                "    kubeletVersion: v1.36.3\n",
                "      - do: upgrade\n        to: v1.38.0\n",
                "step 1's `to` v1.38.0 is newer than the API server's v1.37.2 (Kubernetes' version skew policy",
            ),
            (
                "    kubeletVersion: v1.34.4\n",
                "      - do: upgrade\n        to: v1.36.3\n      - do: upgrade\n        to: v1.36.1\n",
                "step 2 upgrades to v1.36.1, but the node runs kubelet v1.36.3 then",
            ),
        ] {
            let msg = refusal(&steps(kubelet, step));
            assert!(msg.contains(says), "{step}: {msg}");
        }
        let vm = steps(
            "    runtime: vm\n    kubeletVersion: v1.36.3\n",
            "      - do: upgrade\n        to: v1.37.2\n",
        );
        let msg = refusal(&vm);
        assert!(
            msg.contains("whose kubelet nodejoin can replace while it runs; runtime vm cannot"),
            "{msg}"
        );
    }
}
