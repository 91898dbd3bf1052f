//! What a node container may do to the host: no more than a node needs. systemd, containerd, runc and the
//! kubelet need most capabilities (mounts, cgroups, namespaces, iptables), so the container is not unprivileged;
//! but nothing a node does needs to load kernel modules, reboot or set the host's clock, raw I/O on the host's
//! devices, write `/proc/sysrq-trigger`, read `/proc/kcore`, or write the host's kernel parameters. Those are
//! taken away here, from nodejoin's node containers and from kind's control-plane node (kind asks for
//! `--privileged`; the docker shim in `kind-config/docker-shim/` swaps it for the same set).
//!
//! The host sysctls the kubelet insists on are set by the run itself before its nodes start (`sysctl`):
//! a node's `/proc/sys` is read-only except `net/`, which belongs to the node's own network namespace. That
//! holds for the `/proc` the node starts with only: runc must mount fresh procfs instances for the node's pods,
//! so the node's root can mount one too and reach the host's kernel parameters through it. No container node
//! can be kept from that (docs/src/design/node-privileges.md says so, and the node-privileges scenario records it).

/// Capabilities dropped from every node (on top of CAP_SYS_RESOURCE where the host's daemon lacks it): what no
/// part of a node uses (immutable files, process accounting, wake alarms, blocking suspend) besides what would
/// reach the host's kernel, hardware and clock.
pub const DROPPED_CAPABILITIES: &[&str] = &[
    "SYS_MODULE",
    "SYS_BOOT",
    "SYS_RAWIO",
    "SYS_TIME",
    "SYS_PACCT",
    "LINUX_IMMUTABLE",
    "WAKE_ALARM",
    "BLOCK_SUSPEND",
];

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

/// System calls no node makes and a node must not make, refused with EPERM by the node's seccomp profile
/// ([`seccomp_profile`]): another kernel (kexec), kernel modules, file handles that reach outside the node's mount
/// namespace (`open_by_handle_at`, the "shocker" escape), the host's swap, process accounting, port I/O, the
/// clock, and obsolete calls. Everything else systemd, containerd, runc and the kubelet need stays allowed
/// (mount, namespaces, keyrings, bpf for cgroup v2 devices), so the profile lists what it refuses.
pub const REFUSED_SYSCALLS: &[&str] = &[
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "swapon",
    "swapoff",
    "acct",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "stime",
    "lookup_dcookie",
    "nfsservctl",
    "uselib",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "userfaultfd",
];

/// The node's seccomp profile, in Docker's format: allow by default, [`REFUSED_SYSCALLS`] fail with EPERM on
/// every ABI of this architecture (a 32-bit call must not slip past a 64-bit rule).
pub fn seccomp_profile() -> String {
    let architectures: &[&str] = match std::env::consts::ARCH {
        "x86_64" => &["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
        "aarch64" => &["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
        _ => &[],
    };
    serde_json::json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": architectures,
        "syscalls": [{ "names": REFUSED_SYSCALLS, "action": "SCMP_ACT_ERRNO", "errnoRet": 1 }],
    })
    .to_string()
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
    fn the_seccomp_profile_refuses_the_escapes_and_allows_the_rest() {
        let p: serde_json::Value = serde_json::from_str(&seccomp_profile()).unwrap();
        assert_eq!(p["defaultAction"], "SCMP_ACT_ALLOW");
        let rule = &p["syscalls"][0];
        assert_eq!(rule["action"], "SCMP_ACT_ERRNO");
        assert_eq!(rule["errnoRet"], 1);
        let names: Vec<&str> = rule["names"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|n| n.as_str())
            .collect();
        for refused in ["open_by_handle_at", "kexec_load", "finit_module", "swapon"] {
            assert!(names.contains(&refused), "{refused}");
        }
        // What a node needs is never refused.
        for needed in [
            "mount",
            "unshare",
            "setns",
            "keyctl",
            "bpf",
            "name_to_handle_at",
            "ptrace",
            "reboot",
        ] {
            assert!(!names.contains(&needed), "{needed} is refused");
        }
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
