//! Preparing the host, so README's two commands work on a fresh Debian/Ubuntu machine: the Debian packages the
//! node image build needs, a running Docker engine, and inotify limits large enough for many kubelets. Each is
//! done only when missing; what cannot be done (not root, no apt-get, no dockerd) is an error saying exactly what
//! to run. The host setup setting (`never`) turns the changes off (then a missing piece is only reported).
use crate::error::{Error, Result};
use crate::settings::Settings;
use std::path::Path;
use std::time::{Duration, Instant};

/// `never`: report what is missing instead of installing or starting it.
pub const ENV_HOST_SETUP: &str = crate::settings::var::HOST_SETUP;

/// Where a dockerd started by nodejoin logs.
pub const DOCKERD_LOG: &str = "/var/log/nodejoin-dockerd.log";

/// A Debian package and how to tell it is installed.
struct Package {
    name: &'static str,
    present: fn() -> bool,
    why: &'static str,
}

/// `DOCKER_HOST` names an engine other than the local socket's: nodejoin neither installs nor starts it.
fn custom_docker_host() -> bool {
    std::env::var("DOCKER_HOST")
        .is_ok_and(|h| !h.is_empty() && h != "unix:///var/run/docker.sock" && h != "unix:///run/docker.sock")
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
        .unwrap_or(false)
}

/// Whether something accepts connections on the Unix socket `at`.
fn serving(at: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(at).is_ok()
}

const PACKAGES: &[Package] = &[
    Package {
        name: "docker.io",
        // The engine, not the CLI: a machine can have the `docker` client alone (found on a fresh CI machine,
        // where a first run then could not start any engine). An engine nodejoin does not start (DOCKER_HOST, or
        // one already serving the socket) needs no package. A socket file no engine listens on (left by a dockerd
        // that was killed, or by a removed package) is not an engine.
        present: || on_path("dockerd") || custom_docker_host() || serving(Path::new("/var/run/docker.sock")),
        why: "node containers",
    },
    Package {
        name: "debootstrap",
        present: || on_path("debootstrap"),
        why: "the node image's root filesystem (no registry needed)",
    },
    Package {
        name: "gcc",
        present: || on_path("gcc"),
        why: "the static pause binary",
    },
    Package {
        name: "libc6-dev",
        present: || {
            Path::new("/usr/lib/x86_64-linux-gnu/libc.a").exists()
                || Path::new("/usr/lib/aarch64-linux-gnu/libc.a").exists()
        },
        why: "the static pause binary",
    },
    Package {
        name: "libseccomp-dev",
        present: || Path::new("/usr/include/seccomp.h").exists(),
        why: "runc's seccomp support, linked statically into the node's runc",
    },
    Package {
        name: "iptables",
        present: || on_path("iptables"),
        why: "the Docker engine's networks",
    },
    Package {
        name: "curl",
        present: || on_path("curl"),
        why: "downloads of official Kubernetes binaries",
    },
    Package {
        name: "python3-pip",
        present: || {
            // Isolated (`-I`: neither the working directory nor PYTHON* variables on its path) and run from `/`:
            // a `pip.py` in the repository nodejoin was handed would otherwise run as root here.
            let mut probe = std::process::Command::new("python3");
            probe.args(["-I", "-m", "pip", "--version"]).current_dir("/");
            crate::deadline::output_blocking(&mut probe, "python3 -I -m pip --version", crate::deadline::TOOL_PROBE)
                .is_ok_and(|o| o.status.success())
        },
        why: "the AWS CLI in the node image",
    },
];

/// What VM nodes (`runtime: vm`) need beside the rest, installed only when a scenario has one.
const VM_PACKAGES: &[Package] = &[
    Package {
        name: "qemu-system-x86",
        present: || on_path("qemu-system-x86_64"),
        why: "VM nodes (QEMU)",
    },
    Package {
        name: "qemu-utils",
        present: || on_path("qemu-img"),
        why: "VM nodes' copy-on-write disks (qemu-img)",
    },
    Package {
        name: "e2fsprogs",
        present: || on_path("mkfs.ext4"),
        why: "VM nodes' disks (mkfs.ext4 -d)",
    },
];

/// What a VM booting a disk of its own needs beside [`VM_PACKAGES`].
const OWN_DISK_PACKAGES: &[Package] = &[Package {
    name: "ovmf",
    present: || std::path::Path::new("/usr/share/OVMF").is_dir(),
    why: "VM nodes booting a disk of their own (UEFI firmware)",
}];

/// What `nodejoin image export-disk` needs beside [`VM_PACKAGES`].
const EXPORT_PACKAGES: &[Package] = &[
    Package {
        name: "dosfstools",
        present: || on_path("mkfs.vfat"),
        why: "export-disk's EFI system partition (mkfs.vfat)",
    },
    Package {
        name: "mtools",
        present: || on_path("mcopy"),
        why: "export-disk's files on the EFI system partition (mcopy)",
    },
    Package {
        name: "syslinux",
        present: || on_path("syslinux") && std::path::Path::new("/usr/lib/SYSLINUX/gptmbr.bin").is_file(),
        why: "export-disk's BIOS boot code and loader (syslinux)",
    },
    Package {
        name: "fdisk",
        present: || on_path("sfdisk"),
        why: "export-disk's partition table (sfdisk)",
    },
    Package {
        name: "systemd-boot-efi",
        present: || std::path::Path::new("/usr/lib/systemd/boot/efi/systemd-bootx64.efi").is_file(),
        why: "export-disk's bootloader (systemd-boot)",
    },
];

/// The packages missing here, with why each is needed.
pub fn missing_packages() -> Vec<(&'static str, &'static str)> {
    missing_of(PACKAGES)
}

/// The packages VM nodes need that are missing here.
pub fn missing_vm_packages() -> Vec<(&'static str, &'static str)> {
    missing_of(VM_PACKAGES)
}

/// The packages a disk of your own and `nodejoin image export-disk` need that are missing here.
pub fn missing_own_disk_packages() -> Vec<(&'static str, &'static str)> {
    let mut missing = missing_of(OWN_DISK_PACKAGES);
    missing.extend(missing_of(EXPORT_PACKAGES));
    missing
}

fn missing_of(list: &[Package]) -> Vec<(&'static str, &'static str)> {
    list.iter()
        .filter(|p| !(p.present)())
        .map(|p| (p.name, p.why))
        .collect()
}

fn may_change_host(settings: &Settings) -> bool {
    !settings.no_host_setup
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Installs missing packages with apt-get when it may (root, apt-get present, not turned off); otherwise an
/// error naming the command to run.
pub async fn ensure_packages(settings: &Settings) -> Result<()> {
    ensure_of(settings, PACKAGES).await
}

/// [`ensure_packages`] for what VM nodes need.
pub async fn ensure_vm_packages(settings: &Settings) -> Result<()> {
    ensure_of(settings, VM_PACKAGES).await
}

/// [`ensure_packages`] for a VM that boots a disk of its own.
pub async fn ensure_own_disk_packages(settings: &Settings) -> Result<()> {
    ensure_of(settings, OWN_DISK_PACKAGES).await
}

/// [`ensure_packages`] for `nodejoin image export-disk`.
pub async fn ensure_export_packages(settings: &Settings) -> Result<()> {
    ensure_of(settings, EXPORT_PACKAGES).await
}

async fn ensure_of(settings: &Settings, list: &[Package]) -> Result<()> {
    let missing = missing_of(list);
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|(n, _)| *n).collect();
    let command = format!("apt-get install -y --no-install-recommends {}", names.join(" "));
    if !(may_change_host(settings) && is_root() && on_path("apt-get")) {
        let why: Vec<String> = missing.iter().map(|(n, w)| format!("{n} ({w})")).collect();
        return Err(Error::Host {
            what: format!("missing packages: {}", why.join(", ")),
            fix: format!("run as root: {command}"),
        });
    }
    let _lock = crate::paths::CacheLock::acquire(settings, "host-setup")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
    let missing: Vec<&str> = missing_of(list).iter().map(|(n, _)| *n).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let steps = crate::progress::Steps::new("host: installing Debian packages", 2);
    steps.step(1, "apt-get update");
    apt(&["update", "-qq"]).await?;
    steps.step(2, &format!("apt-get install {}", missing.join(" ")));
    let mut args = vec!["install", "-y", "-qq", "--no-install-recommends"];
    args.extend(missing.iter().copied());
    apt(&args).await?;
    steps.finish(&format!("installed {}", missing.join(" ")));
    Ok(())
}

async fn apt(args: &[&str]) -> Result<()> {
    let mut cmd = tokio::process::Command::new("apt-get");
    cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
    let out = crate::deadline::output(&mut cmd, "apt-get", crate::deadline::APT).await?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    Err(Error::Host {
        what: format!(
            "apt-get {} failed: {}",
            args.join(" "),
            crate::process::last_lines(&err, 5, " / ")
        ),
        fix: format!("run `apt-get {}` and see why", args.join(" ")),
    })
}

/// A Docker engine that answers: the running one, else a `dockerd` started now (detached, logging to
/// [`DOCKERD_LOG`]; it keeps running after nodejoin exits, like one started by systemd).
pub async fn ensure_docker(settings: &Settings) -> Result<crate::docker::Docker> {
    let refused = match crate::docker::connect().await {
        Ok(d) => return Ok(d),
        Err(e) => e,
    };
    // An engine elsewhere (DOCKER_HOST) or one that runs but does not answer is not ours to start.
    if custom_docker_host() || dockerd_running() {
        return Err(refused);
    }
    let fix = "install docker.io and start it: `dockerd &` or `systemctl start docker`".to_string();
    if !on_path("dockerd") {
        return Err(Error::Host {
            what: "no Docker engine answers and dockerd is not installed".into(),
            fix,
        });
    }
    if !(may_change_host(settings) && is_root()) {
        return Err(Error::Host {
            what: format!(
                "no Docker engine answers (nodejoin starts dockerd only as root, unless {ENV_HOST_SETUP}=never)"
            ),
            fix,
        });
    }
    let _lock = crate::paths::CacheLock::acquire(settings, "host-setup")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
    if let Ok(d) = crate::docker::connect().await {
        return Ok(d);
    }
    let steps = crate::progress::Steps::new("host: starting the Docker engine", 1);
    steps.step(1, &format!("dockerd (log: {DOCKERD_LOG})"));
    start_dockerd()?;
    let start = Instant::now();
    loop {
        if let Ok(d) = crate::docker::connect().await {
            steps.finish("the Docker engine answers");
            return Ok(d);
        }
        if start.elapsed() > crate::deadline::DOCKERD_START {
            let log = std::fs::read_to_string(DOCKERD_LOG).unwrap_or_default();
            return Err(Error::Host {
                what: format!(
                    "dockerd did not answer within {}; its log ends: {}",
                    humantime::format_duration(crate::deadline::DOCKERD_START),
                    crate::process::last_lines(&log, 5, " / ")
                ),
                fix: format!("see {DOCKERD_LOG}; `dockerd` run by hand shows why it stops"),
            });
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Whether a dockerd process exists already (per its pid file), answering or not.
fn dockerd_running() -> bool {
    std::fs::read_to_string("/var/run/docker.pid")
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists())
}

fn start_dockerd() -> Result<()> {
    use std::os::unix::process::CommandExt;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(DOCKERD_LOG)
        .map_err(|e| Error::io(DOCKERD_LOG, e))?;
    let err = log.try_clone().map_err(|e| Error::io(DOCKERD_LOG, e))?;
    let mut cmd = std::process::Command::new("dockerd");
    cmd.stdin(std::process::Stdio::null()).stdout(log).stderr(err);
    // SAFETY: setsid in the child before exec: the engine gets its own session, so a signal to this run's process
    // group (Ctrl-C) does not reach it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    cmd.spawn().map(|_| ()).map_err(|e| Error::Process {
        what: "dockerd".into(),
        message: e.to_string(),
    })
}

/// inotify limits for many kubelets (each node's systemd, containerd and kubelet hold inotify instances; the
/// default 128 per user holds about a dozen nodes, then cAdvisor fails with "too many open files"). Raised, never
/// lowered; a limit that cannot be raised is a warning naming the command.
pub fn ensure_inotify(settings: &Settings, nodes: usize) {
    let want_instances = (nodes as u64 * 16).max(8192);
    for (key, want) in [
        ("fs/inotify/max_user_instances", want_instances),
        ("fs/inotify/max_user_watches", 524288),
    ] {
        let path = format!("/proc/sys/{key}");
        let have: u64 = std::fs::read_to_string(&path)
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        if have >= want {
            continue;
        }
        let raised = may_change_host(settings) && std::fs::write(&path, want.to_string()).is_ok();
        if raised {
            eprintln!("[nodejoin] host: {} {have} -> {want}", key.replace('/', "."));
        } else {
            eprintln!(
                "[nodejoin] host: warning: {} is {have}; large node groups may run out (as root: sysctl -w {}={want})",
                key.replace('/', "."),
                key.replace('/', ".")
            );
        }
    }
}

/// `MemAvailable` from /proc/meminfo, in MiB.
pub fn available_memory_mib() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo_field(&meminfo, "MemAvailable:").map(|kib| kib / 1024)
}

fn meminfo_field(meminfo: &str, field: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// The machine's cores (what this process may use), at least 1.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map(usize::from).unwrap_or(1)
}

/// The CPU time every core of the host has spent busy since boot (user, nice, system, irq, softirq, steal from
/// `/proc/stat`): two readings give what a run cost the whole host, its nodes, control planes and engine included.
pub fn busy_cpu_time() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    busy_from_stat(&stat, clock_ticks())
}

fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as u64
    } else {
        100
    }
}

fn busy_from_stat(stat: &str, hz: u64) -> Option<std::time::Duration> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is already in user and nice)
    let busy = [0, 1, 2, 5, 6, 7].iter().filter_map(|i| f.get(*i)).sum::<u64>();
    Some(std::time::Duration::from_millis(busy * 1000 / hz.max(1)))
}

/// This process's peak RSS in MiB (`VmHWM`): the harness itself, without the control-plane processes it started.
pub fn own_peak_rss_mib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    meminfo_field(&status, "VmHWM:").map(|kib| kib / 1024)
}

/// The CPU time this process has used (user + system), without the control-plane processes it started.
pub fn own_cpu_time() -> Option<std::time::Duration> {
    // SAFETY: getrusage(2) fills the zeroed struct we pass; nothing else is touched.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return None;
        }
        usage
    };
    let micros = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    Some(std::time::Duration::from_micros(
        micros(usage.ru_utime) + micros(usage.ru_stime),
    ))
}

/// All of it, before a run: packages, the Docker engine, inotify limits.
pub async fn prepare(settings: &Settings) -> Result<crate::docker::Docker> {
    ensure_packages(settings).await?;
    let docker = ensure_docker(settings).await?;
    ensure_inotify(settings, 0);
    Ok(docker)
}

/// Whether this process's capability bounding set has CAP_SYS_RESOURCE (bit 24). Some hosts (this project's CI
/// machines among them) lack it, and a container asking for it then fails to start; elsewhere a node gets it, as
/// an EC2 instance's root has it (the kubelet and runc lower oom_score_adj with it).
pub fn has_cap_sys_resource() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapBnd:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|bits| bits & (1 << 24) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_time_leaves_idle_and_iowait_out() {
        let stat = "cpu  100 5 50 1000 40 3 2 0 0 0\ncpu0 50 2 25 500 20 1 1 0 0 0\n";
        assert_eq!(busy_from_stat(stat, 100), Some(std::time::Duration::from_millis(1600)));
        assert_eq!(busy_from_stat("nothing", 100), None);
    }

    #[test]
    fn finds_commands_on_path() {
        assert!(on_path("sh"));
        assert!(!on_path("no-such-command-nodejoin"));
    }

    #[test]
    fn a_socket_file_nothing_listens_on_is_not_an_engine() {
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("docker.sock");
        assert!(!serving(&at));
        let listener = std::os::unix::net::UnixListener::bind(&at).unwrap();
        assert!(serving(&at));
        drop(listener);
        // The file stays, as a killed dockerd leaves it.
        assert!(at.exists());
        assert!(!serving(&at));
    }

    #[test]
    fn reads_meminfo() {
        let m = "MemTotal:       24576000 kB\nMemFree:  100 kB\nMemAvailable:   20480000 kB\n";
        assert_eq!(meminfo_field(m, "MemAvailable:"), Some(20480000));
        assert_eq!(meminfo_field(m, "SwapTotal:"), None);
    }

    #[test]
    fn every_package_says_why() {
        assert!(PACKAGES.iter().all(|p| !p.why.is_empty() && !p.name.is_empty()));
    }
}
