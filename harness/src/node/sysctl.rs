//! Host sysctls the kubelet changes. A kubelet in a container with a writable /proc/sys sets a few kernel
//! parameters for the whole host (kind nodes do the same). The values from before any nodejoin run are kept in
//! `<cache>/sysctl-baseline`; the last run to finish (or the reaper, after a killed run) puts them back, so
//! tests leave the machine as they found it even when several runs overlap.
use crate::paths::CacheLock;
use std::collections::BTreeMap;

const KEYS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    // Set by the EKS AL2023 AMI's own sysctl.d files (99-amazon.conf), which a node's systemd-sysctl applies at boot.
    "vm/max_map_count",
    "kernel/pid_max",
];

fn baseline_file() -> std::path::PathBuf {
    crate::paths::cache_dir().join("sysctl-baseline")
}

fn read_current() -> BTreeMap<String, String> {
    KEYS.iter()
        .filter_map(|k| {
            std::fs::read_to_string(format!("/proc/sys/{k}"))
                .ok()
                .map(|v| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Writes back every baseline value that differs now; returns what was restored.
fn restore(baseline: &BTreeMap<String, String>) -> Vec<String> {
    let mut restored = Vec::new();
    for (k, v) in baseline {
        let path = format!("/proc/sys/{k}");
        let now = std::fs::read_to_string(&path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        if &now != v && std::fs::write(&path, v).is_ok() {
            restored.push(format!("{} {now} -> {v}", k.replace('/', ".")));
        }
    }
    restored
}

/// The values a live run recorded before any kubelet changed them, if one did (leak checks compare them with
/// `current()` after the last run ends).
pub fn baseline() -> Option<BTreeMap<String, String>> {
    std::fs::read_to_string(baseline_file()).ok().map(|t| parse(&t))
}

/// The host's values now, of the sysctls the kubelet changes.
pub fn current() -> BTreeMap<String, String> {
    read_current()
}

/// Counts the other live runs (the reaper's registry knows them; passed in so this module needs nothing above it).
pub type LiveRuns = fn() -> usize;

/// Restores and forgets the baseline when no other run is alive (called by runs at shutdown and by the
/// reaper).
pub fn restore_if_last(other_live_runs: LiveRuns) {
    let Ok(_lock) = CacheLock::acquire_blocking("sysctl") else {
        return;
    };
    let Ok(text) = std::fs::read_to_string(baseline_file()) else {
        return;
    };
    if other_live_runs() > 0 {
        return;
    }
    let restored = restore(&parse(&text));
    let _ = std::fs::remove_file(baseline_file());
    if !restored.is_empty() {
        tracing::info!(?restored, "restored host sysctls the kubelet changed");
    }
}

/// Held by a run: records the baseline if no run holds one yet, and restores it on drop if this was the last
/// live run.
pub struct SysctlGuard {
    other_live_runs: LiveRuns,
}

impl SysctlGuard {
    pub fn record(other_live_runs: LiveRuns) -> Self {
        if let Ok(_lock) = CacheLock::acquire_blocking("sysctl") {
            // A baseline left by runs that are all gone is stale only if something else changed the host since;
            // with no live run, the current values are the truth.
            let keep = baseline_file().exists() && other_live_runs() > 0;
            if !keep {
                let text: String = read_current().iter().map(|(k, v)| format!("{k}={v}\n")).collect();
                let _ = std::fs::write(baseline_file(), text);
            }
        }
        SysctlGuard { other_live_runs }
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        restore_if_last(self.other_live_runs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_format_round_trips() {
        let m = BTreeMap::from([
            ("kernel/panic".to_string(), "1".to_string()),
            ("vm/overcommit_memory".to_string(), "0".to_string()),
        ]);
        let text: String = m.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
        assert_eq!(parse(&text), m);
    }
}
