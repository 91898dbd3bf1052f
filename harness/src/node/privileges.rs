//! What a node container may do to the host: no more than a node needs. systemd, containerd, runc and the
//! kubelet need most capabilities (mounts, cgroups, namespaces, iptables), so the container is not unprivileged;
//! but nothing a node does needs to load kernel modules, reboot or set the host's clock, raw I/O on the host's
//! devices, write `/proc/sysrq-trigger`, read `/proc/kcore`, or write the host's kernel parameters. Those are
//! taken away here, from nodejoin's node containers and from kind's control-plane node (kind asks for
//! `--privileged`; the docker shim in `kind-config/docker-shim/` swaps it for the same set).
//!
//! The host sysctls the kubelet insists on are set by the run itself before its nodes start (`sysctl`):
//! a node's `/proc/sys` is read-only except `net/`, which belongs to the node's own network namespace.

/// Capabilities dropped from every node (on top of CAP_SYS_RESOURCE where the host's daemon lacks it).
pub const DROPPED_CAPABILITIES: &[&str] = &["SYS_MODULE", "SYS_BOOT", "SYS_RAWIO", "SYS_TIME"];

/// What a node drops from `ALL` on this host: [`DROPPED_CAPABILITIES`], and CAP_SYS_RESOURCE where the host's
/// bounding set lacks it (asking for a capability the host lacks fails the container's start).
pub fn dropped_capabilities() -> Vec<String> {
    let mut caps: Vec<String> = DROPPED_CAPABILITIES.iter().map(|c| c.to_string()).collect();
    if !crate::host::has_cap_sys_resource() {
        caps.push("SYS_RESOURCE".into());
    }
    caps
}

/// Paths masked as Docker masks them by default (`/proc/kcore`: the host's memory; `/proc/keys`: the host's
/// keyrings; the rest: host hardware and scheduler details).
pub const MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/interrupts",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Paths read-only as Docker makes them by default, but for `/proc/sys` (see [`readonly_paths`]).
const READONLY_PROC: &[&str] = &["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sysrq-trigger"];

/// The read-only paths of a node: Docker's defaults, with `/proc/sys` read-only entry by entry except `net`
/// (per network namespace: containerd, the CNI and kube-proxy set the node's own there). `proc_sys` is the
/// host's `/proc/sys`, listed to find its entries.
pub fn readonly_paths(proc_sys: &std::path::Path) -> Vec<String> {
    let mut paths: Vec<String> = READONLY_PROC.iter().map(|p| p.to_string()).collect();
    let mut entries: Vec<String> = std::fs::read_dir(proc_sys)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|name| name != "net")
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    paths.extend(entries.into_iter().map(|e| format!("/proc/sys/{e}")));
    paths
}

/// Host devices passed in (each allowed in the device cgroup, on top of Docker's default rules: null, zero, full,
/// random, urandom, tty, console, ptmx, pts, tun, and mknod of any): `/dev/kmsg` for the kubelet's OOM watcher,
/// `/dev/fuse` where the host has it.
pub fn devices() -> Vec<&'static str> {
    ["/dev/kmsg", "/dev/fuse"]
        .into_iter()
        .filter(|d| std::path::Path::new(d).exists())
        .collect()
}

/// Narrows a container's host config to a node's privileges: masks, read-only paths, devices (the caller adds
/// `ALL` capabilities and drops [`DROPPED_CAPABILITIES`]; testcontainers sets those apart from the host config).
pub fn restrict(hc: &mut testcontainers::bollard::models::HostConfig) {
    use testcontainers::bollard::models::DeviceMapping;
    hc.masked_paths = Some(MASKED_PATHS.iter().map(|p| p.to_string()).collect());
    hc.readonly_paths = Some(readonly_paths(std::path::Path::new("/proc/sys")));
    hc.device_cgroup_rules = None;
    hc.devices = Some(
        devices()
            .into_iter()
            .map(|d| DeviceMapping {
                path_on_host: Some(d.into()),
                path_in_container: Some(d.into()),
                cgroup_permissions: Some("rwm".into()),
            })
            .collect(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_sys_is_read_only_but_for_the_network_namespaces_own() {
        let dir = tempfile::tempdir().unwrap();
        for e in ["kernel", "net", "vm", "fs"] {
            std::fs::create_dir(dir.path().join(e)).unwrap();
        }
        let paths = readonly_paths(dir.path());
        for want in [
            "/proc/sys/kernel",
            "/proc/sys/vm",
            "/proc/sys/fs",
            "/proc/sysrq-trigger",
        ] {
            assert!(paths.iter().any(|p| p == want), "{want} missing from {paths:?}");
        }
        assert!(!paths.iter().any(|p| p.starts_with("/proc/sys/net")), "{paths:?}");
        assert!(!paths.iter().any(|p| p == "/proc/sys"), "{paths:?}");
    }

    #[test]
    fn a_restricted_host_config_masks_and_narrows_devices() {
        let mut hc = testcontainers::bollard::models::HostConfig {
            device_cgroup_rules: Some(vec!["a *:* rwm".into()]),
            ..Default::default()
        };
        restrict(&mut hc);
        assert_eq!(hc.device_cgroup_rules, None, "Docker's default device rules");
        assert!(hc.masked_paths.unwrap().iter().any(|p| p == "/proc/kcore"));
        assert!(hc.readonly_paths.unwrap().iter().any(|p| p == "/proc/sysrq-trigger"));
    }

    #[test]
    fn docker_s_masks_are_kept() {
        for want in ["/proc/kcore", "/proc/keys", "/sys/firmware"] {
            assert!(MASKED_PATHS.contains(&want), "{want}");
        }
        for want in ["SYS_MODULE", "SYS_BOOT", "SYS_RAWIO", "SYS_TIME"] {
            assert!(DROPPED_CAPABILITIES.contains(&want), "{want}");
        }
    }
}
