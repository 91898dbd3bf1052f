//! Whether the machine can hold a scenario's nodes: each node container runs systemd, containerd and a kubelet.
//! Checked before any container starts, so a group too large for this machine is a clear error rather than
//! kubelets killed by the OOM killer half-way.
use crate::error::{Error, Result};

/// What one joined node takes, measured (RSS of its container's cgroup after joining: about 110-140 MiB), with
/// head-room for the bootstrap's own processes (the AWS CLI, cloud-init).
pub const NODE_MEMORY_MIB: u64 = 160;

/// Memory to leave to everything else (the control plane, Docker, the harness).
const RESERVE_MIB: u64 = 1024;

/// An error when `nodes` nodes need more memory than is available now.
pub fn check(scenario: &str, nodes: u64) -> Result<()> {
    match crate::host::available_memory_mib() {
        Some(available) => fits(scenario, nodes, available),
        None => Ok(()),
    }
}

fn fits(scenario: &str, nodes: u64, available_mib: u64) -> Result<()> {
    let need = nodes * NODE_MEMORY_MIB;
    let room = available_mib.saturating_sub(RESERVE_MIB);
    if need <= room {
        return Ok(());
    }
    Err(Error::ScenarioInvalid {
        file: scenario.into(),
        message: format!(
            "{nodes} nodes need about {need} MiB ({NODE_MEMORY_MIB} MiB each) but this machine has {available_mib} MiB available (keeping {RESERVE_MIB} MiB for the control plane and Docker): at most {} nodes fit now; use smaller node groups or run fewer scenarios at once (-j)",
            room / NODE_MEMORY_MIB
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifty_nodes_fit_in_sixteen_gib_but_not_in_four() {
        assert!(fits("scale", 50, 16 * 1024).is_ok());
        let e = fits("scale", 50, 4 * 1024).unwrap_err().to_string();
        assert!(e.contains("50 nodes need about 8000 MiB"), "{e}");
        assert!(e.contains("at most 19 nodes fit now"), "{e}");
    }
}
