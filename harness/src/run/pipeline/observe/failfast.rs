//! Deciding early that a node will not join, and why. Waiting out `within` (minutes) for a node whose kubelet
//! crash-loops, or whose user data failed while cloud-init still reported done, tells a bootstrap author nothing;
//! these probes end the wait as soon as the outcome is decided and quote the cause.
use crate::node::machine::NodeMachine;
use std::time::Duration;

/// The kubelet unit restarted this many times: it will not come up by itself.
pub const KUBELET_RESTARTS: u32 = 3;
/// How long after cloud-init finished a kubelet that never started counts as never starting.
pub const NEVER_STARTED_GRACE: Duration = Duration::from_secs(5);

pub use crate::run::node::Stop;

/// The kubelet unit's state, from `systemctl show`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnitState {
    pub active_state: String,
    pub result: String,
    pub restarts: u32,
    /// Whether the unit was ever active (its ActiveEnterTimestampMonotonic is set).
    pub ever_started: bool,
}

/// Parses `systemctl show -p NRestarts -p ActiveState -p Result -p ActiveEnterTimestampMonotonic`.
pub fn parse_unit_state(text: &str) -> UnitState {
    let mut s = UnitState::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once('=') else { continue };
        match k {
            "ActiveState" => s.active_state = v.to_string(),
            "Result" => s.result = v.to_string(),
            "NRestarts" => s.restarts = v.trim().parse().unwrap_or(0),
            "ActiveEnterTimestampMonotonic" => s.ever_started = v.trim().parse::<u64>().is_ok_and(|t| t > 0),
            _ => {}
        }
    }
    s
}

pub async fn kubelet_state(container: &NodeMachine) -> Option<UnitState> {
    let out = container
        .exec(
            &[
                "systemctl",
                "show",
                "kubelet.service",
                "-p",
                "NRestarts",
                "-p",
                "ActiveState",
                "-p",
                "Result",
                "-p",
                "ActiveEnterTimestampMonotonic",
            ],
            &[],
        )
        .await
        .ok()?;
    (out.exit_code == 0).then(|| parse_unit_state(&out.stdout))
}

/// The kubelet's own error line in its journal: the last line that says why it exited (`Error: unknown flag`,
/// `failed to run Kubelet`, a klog `E` line), without the journal's prefix.
pub fn kubelet_error_line(journal: &str) -> Option<String> {
    let messages: Vec<String> = journal
        .lines()
        .map(crate::run::pipeline::observe::journal::message)
        .collect();
    let strong = [
        "Error:",
        "panic:",
        "unknown flag",
        "failed to run Kubelet",
        "command failed",
        "failed to load",
    ];
    messages
        .iter()
        .rev()
        .find(|m| strong.iter().any(|s| m.contains(s)))
        .or_else(|| {
            messages
                .iter()
                .rev()
                .find(|m| crate::run::pipeline::observe::journal::is_klog_error(m))
        })
        .cloned()
}

/// The lines of a failed program's output that say why: the last lines mentioning an error (a usage text printed
/// after it is not the cause), else its last lines.
pub fn quote_cause(output: &str) -> String {
    let lines: Vec<&str> = output.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let error_like = |l: &&&str| {
        let l = l.to_ascii_lowercase();
        [
            "error", "unknown", "fail", "fatal", "refused", "denied", "cannot", "invalid",
        ]
        .iter()
        .any(|w| l.contains(w))
    };
    let errors: Vec<&str> = lines.iter().filter(error_like).copied().collect();
    let picked: Vec<&str> = if errors.is_empty() {
        lines.iter().rev().take(3).rev().copied().collect()
    } else {
        errors.iter().rev().take(2).rev().copied().collect()
    };
    picked.join(" / ").chars().take(600).collect()
}

/// Whether the kubelet unit has given up or keeps failing: restarted [`KUBELET_RESTARTS`] times, or failed for
/// good (systemd's start limit).
pub fn kubelet_crash_looping(state: &UnitState) -> bool {
    state.restarts >= KUBELET_RESTARTS || (state.active_state == "failed" && state.result != "success")
}

/// Errors the kubelet reports before it does anything, from its command line or config files: they repeat
/// identically on every restart (nothing rewrites the kubelet's flags once the bootstrap has finished), so the
/// first exit with one decides, without waiting for [`KUBELET_RESTARTS`] restarts.
pub fn is_startup_config_error(line: &str) -> bool {
    [
        "unknown flag",
        "failed to parse kubelet flag",
        // A feature gate the kubelet no longer knows (removed after it went GA): it exits at once, every time.
        "unrecognized feature gate",
        "failed to load kubelet config file",
        "failed to validate kubelet",
        "invalid configuration",
    ]
    .iter()
    .any(|s| line.contains(s))
}

/// Looks at one node that was expected to join and is not there yet. `finished` says what started the kubelet
/// ("cloud-init finished", "the bootstrap exited 0") and how long ago; `never_started` explains, from that
/// origin's output, a kubelet that was never started; `nodeadm_failure` is nodeadm's failure if it failed.
pub async fn probe(
    container: &NodeMachine,
    finished: (&str, Duration),
    nodeadm_failure: Option<String>,
    never_started: impl FnOnce() -> String,
) -> Option<Stop> {
    if let Some(cause) = nodeadm_failure {
        return Some(Stop {
            check: &crate::assert::registry::NODEADM,
            expected: "nodeadm's config and run phases succeed".into(),
            cause,
        });
    }
    let state = kubelet_state(container).await?;
    let exited = state.restarts > 0 || state.result == "exit-code" || state.active_state == "failed";
    let journal = if exited {
        container.journal(Some("kubelet")).await
    } else {
        String::new()
    };
    let error_line = kubelet_error_line(&journal);
    let deterministic = exited && error_line.as_deref().is_some_and(is_startup_config_error);
    if kubelet_crash_looping(&state) || deterministic {
        let line = error_line.unwrap_or_else(|| "no error line in the kubelet's journal".into());
        return Some(Stop {
            check: &crate::assert::registry::KUBELET_RUNNING,
            expected: format!(
                "kubelet.service running (fewer than {KUBELET_RESTARTS} restarts, no startup config error)"
            ),
            cause: format!(
                "kubelet.service {} ({}{}): {line}",
                if state.restarts > 0 {
                    format!("restarted {} times", state.restarts)
                } else {
                    "exited".to_string()
                },
                state.active_state,
                if state.result.is_empty() || state.result == "success" {
                    String::new()
                } else {
                    format!(", {}", state.result)
                }
            ),
        });
    }
    let (origin, done_for) = finished;
    if !state.ever_started && done_for >= NEVER_STARTED_GRACE {
        return Some(Stop {
            check: &crate::assert::registry::KUBELET_STARTED,
            expected: "the bootstrap starts kubelet.service".into(),
            cause: format!(
                "{origin} {:.1}s ago and kubelet.service never started: {}",
                done_for.as_secs_f64(),
                never_started()
            ),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_the_error_lines_not_the_usage_text() {
        let stderr = "bootstrap: unknown flag --kubelet-extra-argz\nusage: bootstrap.sh CLUSTER [options]\n  --apiserver-endpoint URL\n";
        assert_eq!(quote_cause(stderr), "bootstrap: unknown flag --kubelet-extra-argz");
        assert_eq!(quote_cause("one\ntwo\nthree\nfour\n"), "two / three / four");
        assert_eq!(quote_cause(""), "");
    }

    #[test]
    fn unit_states() {
        let s = parse_unit_state(
            "NRestarts=4\nActiveState=activating\nResult=exit-code\nActiveEnterTimestampMonotonic=0\n",
        );
        assert_eq!(s.restarts, 4);
        assert!(!s.ever_started);
        assert!(kubelet_crash_looping(&s));
        let ok =
            parse_unit_state("NRestarts=0\nActiveState=active\nResult=success\nActiveEnterTimestampMonotonic=123\n");
        assert!(ok.ever_started && !kubelet_crash_looping(&ok));
        let limit = parse_unit_state("NRestarts=1\nActiveState=failed\nResult=start-limit-hit\n");
        assert!(kubelet_crash_looping(&limit));
        let never =
            parse_unit_state("NRestarts=0\nActiveState=inactive\nResult=success\nActiveEnterTimestampMonotonic=0\n");
        assert!(!kubelet_crash_looping(&never) && !never.ever_started);
    }

    #[test]
    fn the_kubelets_own_error_line() {
        let journal = "Nov 23 09:30:01 n kubelet[80]: Flag --foo has been deprecated\n\
                       Nov 23 09:30:01 n kubelet[80]: E1123 09:30:01.1 80 run.go:72] \"command failed\" err=\"unknown flag: --pod-infra-container-image\"\n\
                       Nov 23 09:30:01 n systemd[1]: kubelet.service: Main process exited, code=exited, status=1/FAILURE\n";
        let line = kubelet_error_line(journal).unwrap();
        assert!(
            line.starts_with("E1123") && line.contains("unknown flag: --pod-infra-container-image"),
            "{line}"
        );
        let cobra =
            "Nov 23 09:30:01 n kubelet[80]: Error: unknown flag: --bogus\nNov 23 09:30:01 n kubelet[80]: Usage:\n";
        assert_eq!(
            kubelet_error_line(cobra).as_deref(),
            Some("Error: unknown flag: --bogus")
        );
        let klog = "Nov 23 n kubelet[1]: I1123 fine\nNov 23 n kubelet[1]: E1123 09:30:01 1 x.go:1] boom\n";
        assert_eq!(
            kubelet_error_line(klog).as_deref(),
            Some("E1123 09:30:01 1 x.go:1] boom")
        );
        assert_eq!(kubelet_error_line("Nov 23 n kubelet[1]: I1123 all good\n"), None);
        assert!(is_startup_config_error(&line));
        // Kubelet 1.37 given a feature gate removed since (SidecarContainers) panics; its last klog error is an
        // older kubelet's, not the cause.
        let removed =
            "Nov 29 n kubelet[199]: E1129 15:06:59.4 199 kubelet.go:3516] \"Unable to register mirror pod\"\n\
                       Nov 29 n kubelet[633]: panic: failed to merge global and in-flight KubeletConfiguration while \
                       setting defaults, error: unrecognized feature gate: SidecarContainers\n\
                       Nov 29 n kubelet[633]: goroutine 1 [running]:\n";
        let line = kubelet_error_line(removed).unwrap();
        assert!(
            line.starts_with("panic: failed to merge") && is_startup_config_error(&line),
            "{line}"
        );
        assert!(!is_startup_config_error(
            "E1123 x.go:1] \"Unable to register node\" err=\"connection refused\""
        ));
    }
}
