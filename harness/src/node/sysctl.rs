//! Host sysctls the kubelet changes. A kubelet in a container with a writable /proc/sys sets a few kernel
//! parameters for the whole host (kind nodes do the same); this guard records them before the first node starts
//! and puts back the ones that changed when the run ends, so tests do not alter the machine they run on.
use std::collections::BTreeMap;

const KEYS: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];

pub struct SysctlGuard {
    saved: BTreeMap<&'static str, String>,
}

impl SysctlGuard {
    pub fn record() -> Self {
        let saved = KEYS
            .iter()
            .filter_map(|k| {
                std::fs::read_to_string(format!("/proc/sys/{k}"))
                    .ok()
                    .map(|v| (*k, v.trim().to_string()))
            })
            .collect();
        Self { saved }
    }

    /// Puts back every recorded value that differs now; returns what was restored.
    pub fn restore(&self) -> Vec<String> {
        let mut restored = Vec::new();
        for (k, v) in &self.saved {
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
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        let restored = self.restore();
        if !restored.is_empty() {
            tracing::info!(?restored, "restored host sysctls the kubelet changed");
        }
    }
}
