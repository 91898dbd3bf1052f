//! The node runtime `vm`: a node that is a machine. QEMU boots nodejoin's node image for the group as a disk
//! (`disk`), with Debian's stock kernel (`kernel`), or a disk of the user's under its firmware (`own_disk`,
//! `firmware`; `export` writes one shaped as an export). Its software sees an EC2 instance (`qemu`'s SMBIOS, the run
//! network's DHCP and the metadata address on its link, `net`); the harness reaches inside through QEMU's guest
//! agent (`agent`) where the guest runs one. The guard owns QEMU, the tap, the host rules and the node's work directory (its disk
//! overlay, its console): dropping it removes them all; the reaper removes what a killed run left.
pub mod agent;
pub mod console;
pub mod cpio;
pub mod dhcp;
pub mod disk;
pub mod export;
pub mod firmware;
pub mod kernel;
pub mod net;
pub mod own_disk;
pub mod qemu;
pub mod qmp;
pub mod reader;
pub mod sandbox;

use crate::docker::ExecOutput;
use crate::error::{Error, Result};
use crate::node::seed::{seed_archive, NodeFile};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a machine boots.
pub enum Boot<'a> {
    /// nodejoin's disk of a node image ([`disk::ensure`], raw, never written) with its kernel; `files` (the
    /// harness's, for this node) reach the root through a second initramfs archive.
    Image {
        kernel: &'a kernel::Kernel,
        disk: &'a Path,
        files: Vec<NodeFile>,
    },
    /// A disk of the user's ([`own_disk::check_own`]: in `format`, never written), started by its `firmware` and
    /// its own bootloader; nothing of the harness's goes into it.
    Own {
        disk: &'a Path,
        format: &'a str,
        firmware: firmware::Firmware,
        /// The bus it is attached on.
        bus: qemu::RootBus,
    },
}

/// What to start.
pub struct VmSpec<'a> {
    pub name: String,
    pub run_id: &'a str,
    pub boot: Boot<'a>,
    /// Whether the guest runs QEMU's guest agent (nodejoin's disks do; a disk of the user's says).
    pub agent: bool,
    pub accel: qemu::Accel,
    pub link: &'a net::RunLink,
    /// What its link carries to the harness (IMDS, the VPC resolver, AWS's endpoints).
    pub services: net::LinkServices,
    /// Its private DNS domain, as EC2's DHCP gives it (`us-west-2.compute.internal`).
    pub domain: String,
    pub ip: Ipv4Addr,
    pub mac: String,
    pub instance_id: &'a str,
    pub instance_type: &'a str,
    pub vcpus: u32,
    pub memory_mib: u32,
    /// Its instance-store disks: `(serial, size in bytes)` each.
    pub instance_store: Vec<(String, u64)>,
    /// Where the run records its children's PIDs (the reaper kills QEMU from there).
    pub pids_dir: &'a Path,
    /// The run's settings (its work directory, and reading its disk after shutdown).
    pub settings: std::sync::Arc<crate::settings::Settings>,
}

pub struct VmNode {
    pub name: String,
    pub ip: Ipv4Addr,
    pub mac: String,
    pub accel: qemu::Accel,
    pub agent: agent::Agent,
    /// Whether anything answers on the agent's port: without, the machine is observed from outside only.
    has_agent: bool,
    console: PathBuf,
    launch: Launch,
    /// Keeps the console file within its bound while QEMU runs.
    console_cap: std::sync::Mutex<Option<console::Cap>>,
    /// Field order is drop order: QEMU first, then its network, then its files.
    qemu: std::sync::Mutex<Option<crate::process::Supervised>>,
    _forwards: net::LinkForwards,
    _tap: net::Tap,
    mac_bytes: [u8; 6],
    leases: dhcp::Leases,
    /// Its logs as read from its disk after its shutdown, once read.
    disk_logs: tokio::sync::OnceCell<std::result::Result<(String, reader::DiskLogs), String>>,
    settings: std::sync::Arc<crate::settings::Settings>,
    _work: tempfile::TempDir,
}

/// Why nothing inside a machine without a guest agent can be read.
pub const NO_WAY_IN: &str =
    "no way into this machine: its disk runs no guest agent (disk.guestAgent), so it is observed from outside only";

/// How long a machine may take to power off once its power button is pressed (its units stopped under TCG).
const POWER_OFF_WITHIN: Duration = Duration::from_secs(60);
/// How long a machine may take to go down once it is told to reboot: its units stopped (the kubelet, containerd
/// and its pods) under TCG. EC2 gives an instance a few minutes before it resets it.
const REBOOT_DOWN_WITHIN: Duration = Duration::from_secs(180);
/// How long after its reset a rebooted machine's kernel may take to print its first line (the firmware, then the
/// kernel loaded again; seconds under TCG).
const KERNEL_AGAIN_WITHIN: Duration = Duration::from_secs(60);

/// How QEMU is started.
struct Launch {
    program: PathBuf,
    args: Vec<String>,
    pids_dir: PathBuf,
}

fn parse_mac(mac: &str) -> Option<[u8; 6]> {
    let bytes: Vec<u8> = mac.split(':').filter_map(|b| u8::from_str_radix(b, 16).ok()).collect();
    bytes.try_into().ok()
}

impl VmNode {
    /// Makes the machine (its disk overlay, initramfs, tap, IMDS rule, DHCP lease) without starting it:
    /// [`VmNode::power_on`] does, once what the machine reads at boot (its user data) is in place.
    pub async fn create(spec: VmSpec<'_>) -> Result<Self> {
        let name = spec.name.clone();
        let node_err = |m: String| Error::node(&name, m);
        let scratch = crate::paths::scratch_root(&spec.settings);
        std::fs::create_dir_all(&scratch).map_err(|e| Error::io(&scratch, e))?;
        let work = tempfile::Builder::new()
            .prefix(&crate::paths::owned_prefix("vm"))
            .tempdir_in(&scratch)
            .map_err(|e| Error::io(&scratch, e))?;
        let dir = work.path();
        let overlay = dir.join("disk.qcow2");
        let (base, format) = match &spec.boot {
            Boot::Image { disk, .. } => (*disk, "raw"),
            Boot::Own { disk, format, .. } => (*disk, *format),
        };
        disk::overlay(base, format, &overlay).await?;
        let mut store = Vec::new();
        for (i, (serial, bytes)) in spec.instance_store.iter().enumerate() {
            let path = dir.join(format!("store-{i}.qcow2"));
            disk::blank(&path, *bytes).await?;
            store.push(qemu::StoreDisk {
                path,
                serial: serial.clone(),
            });
        }
        let initrd_path = dir.join("initrd.cpio");
        let vars_path = dir.join("efi-vars.fd");
        let (ovmf, sercon);
        let start = match &spec.boot {
            Boot::Image { kernel, files, .. } => {
                // The base initramfs, then this node's files as a second archive the kernel unpacks over it.
                let seed = seed_archive(files).map_err(|e| node_err(format!("seed archive: {e}")))?;
                let mut initrd = std::fs::read(&kernel.initramfs).map_err(|e| Error::io(&kernel.initramfs, e))?;
                initrd.extend(cpio::archive(&[("seed.tar".into(), seed, 0o600)], &[]).map_err(|e| Error::io(dir, e))?);
                std::fs::write(&initrd_path, initrd).map_err(|e| Error::io(&initrd_path, e))?;
                qemu::Start::Kernel {
                    kernel,
                    initrd: &initrd_path,
                }
            }
            Boot::Own {
                firmware: firmware::Firmware::Bios,
                ..
            } => {
                sercon = firmware::sercon_file(&spec.settings)?;
                qemu::Start::Bios { sercon: &sercon }
            }
            Boot::Own { .. } => {
                ovmf = firmware::ovmf()?;
                std::fs::copy(&ovmf.1, &vars_path).map_err(|e| Error::io(&ovmf.1, e))?;
                qemu::Start::Firmware {
                    code: &ovmf.0,
                    vars: &vars_path,
                }
            }
        };
        let mac_bytes = parse_mac(&spec.mac).ok_or_else(|| node_err(format!("MAC {} unreadable", spec.mac)))?;
        // Linux allows 15 characters; the name is unique per host while the run lives.
        let tap_name = format!(
            "nj{}",
            &kernel::short_hash(&[spec.run_id.as_bytes(), name.as_bytes()])[..10]
        );
        let tap = net::Tap::create(&tap_name, &spec.link.bridge, spec.run_id)?;
        let forwards = net::LinkForwards::add(
            &spec.link.bridge,
            spec.ip,
            &spec.services.forwards(spec.link.leases.server),
            spec.run_id,
        )?;
        spec.link.leases.reserve(mac_bytes, spec.ip, &spec.domain);
        let agent_socket = dir.join("qga.sock");
        let console = dir.join("console.log");
        let mut args = qemu::args(&qemu::Machine {
            start,
            accel: spec.accel,
            vcpus: spec.vcpus,
            memory_mib: spec.memory_mib,
            disk: &overlay,
            root_bus: match spec.boot {
                Boot::Own { bus, .. } => bus,
                Boot::Image { .. } => qemu::RootBus::Virtio,
            },
            tap: &tap.name,
            mac: &spec.mac,
            agent_socket: &agent_socket,
            qmp_socket: &dir.join("qmp.sock"),
            console: &console,
            instance_id: spec.instance_id,
            instance_type: spec.instance_type,
            instance_store: &store,
        })?;
        args.extend(sandbox::confinement().args.iter().cloned());
        // By its full path: the reaper kills a recorded child only while /proc/<pid>/exe is that program.
        let program = crate::assets::which("qemu-system-x86_64")
            .ok_or_else(|| node_err("qemu-system-x86_64 is not on PATH (Debian package qemu-system-x86)".into()))?;
        Ok(Self {
            agent: agent::Agent::new(&name, agent_socket),
            has_agent: spec.agent,
            name,
            ip: spec.ip,
            mac: spec.mac,
            accel: spec.accel,
            console,
            launch: Launch {
                program,
                args,
                pids_dir: spec.pids_dir.to_path_buf(),
            },
            console_cap: std::sync::Mutex::new(None),
            qemu: std::sync::Mutex::new(None),
            _forwards: forwards,
            _tap: tap,
            mac_bytes,
            leases: spec.link.leases.clone(),
            disk_logs: tokio::sync::OnceCell::new(),
            settings: spec.settings,
            _work: work,
        })
    }

    /// Starts QEMU (once; later calls do nothing).
    pub fn power_on(&self) -> Result<()> {
        let mut qemu = self.qemu.lock().unwrap_or_else(|p| p.into_inner());
        if qemu.is_some() {
            return Ok(());
        }
        let l = &self.launch;
        let started = crate::process::Supervised::spawn("qemu", &l.program, &l.args, self._work.path(), &l.pids_dir)
            .map_err(|e| Error::node(&self.name, format!("QEMU: {e}")))?;
        *qemu = Some(started);
        *self.console_cap.lock().unwrap_or_else(|p| p.into_inner()) = Some(console::Cap::start(self.console.clone()));
        Ok(())
    }

    /// Whether QEMU has been started.
    pub fn powered(&self) -> bool {
        self.qemu.lock().map(|q| q.is_some()).unwrap_or(false)
    }

    /// Waits until the guest agent answers (the machine has booted far enough), at most `timeout`.
    pub async fn wait_agent(&self, timeout: Duration) -> std::result::Result<Duration, String> {
        if !self.powered() {
            return Err("the machine was never started".into());
        }
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            if let Some(why) = self.exited() {
                return Err(why);
            }
            // A machine that cannot boot says so on its console long before the wait is over.
            if let Some(why) = console::decided_failure(&self.console_text()) {
                return Err(why);
            }
            if self.agent.ping().await {
                return Ok(t0.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Err(format!(
            "its guest agent did not answer within {}; the console ends: {}",
            humantime::format_duration(timeout),
            crate::process::last_lines(&self.console(5), 5, " | ")
        ))
    }

    /// Whether the harness can see inside the machine (its guest agent).
    pub fn sees_inside(&self) -> bool {
        self.has_agent
    }

    pub async fn exec_within(&self, cmd: &[&str], env: &[String], deadline: Duration) -> Result<ExecOutput> {
        if !self.has_agent {
            return Err(Error::node(&self.name, NO_WAY_IN.to_string()));
        }
        if !self.powered() {
            return Err(Error::node(&self.name, "the machine was never started".to_string()));
        }
        if let Some(why) = self.exited() {
            return Err(Error::node(&self.name, why));
        }
        self.agent.exec(cmd, env, deadline).await
    }

    pub async fn read_bytes(&self, path: &str) -> std::result::Result<Vec<u8>, String> {
        if !self.has_agent {
            return Err(NO_WAY_IN.into());
        }
        // The agent's file calls start no process in the guest; an agent that has them disabled (a disk of the
        // user's own may) is asked to run `cat` instead.
        match self.agent.read_file(path).await.map_err(|e| e.to_string())? {
            Ok(bytes) => return Ok(bytes),
            Err(refused) if refused.contains("failed to open file") => return Err(format!("{path}: {refused}")),
            Err(_) => {}
        }
        let (code, out, err) = self
            .agent
            .exec_bytes(&["cat", "--", path], &[], crate::deadline::NODE_EXEC)
            .await
            .map_err(|e| e.to_string())?;
        if code == 0 {
            Ok(out)
        } else {
            Err(format!("{path}: {}", err.trim()))
        }
    }

    /// The last `lines` lines of the serial console (the kernel's and systemd's messages).
    pub fn console(&self, lines: usize) -> String {
        crate::process::tail(&self.console, lines)
    }

    /// The serial console as kept (cut to its last MiB past [`console::MAX`]), as a person reads it: without the
    /// control sequences the firmware and systemd colour and place their text with.
    pub fn console_text(&self) -> String {
        std::fs::read(&self.console)
            .map(|b| console::readable(&String::from_utf8_lossy(&b)))
            .unwrap_or_default()
    }

    /// QEMU's CPU time: everything the machine did (its kernel, systemd, the bootstrap, pods), emulation included.
    pub fn cpu_time(&self) -> Option<Duration> {
        let pid = self.qemu.lock().ok()?.as_ref()?.pid()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = after.split_whitespace().collect();
        let (utime, stime): (u64, u64) = (fields.get(11)?.parse().ok()?, fields.get(12)?.parse().ok()?);
        // SAFETY: sysconf has no preconditions.
        let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
        Some(Duration::from_millis((utime + stime) * 1000 / tick))
    }

    /// Why QEMU is no longer running, with the console's last lines; `None` while it runs.
    pub fn exited(&self) -> Option<String> {
        let mut guard = self.qemu.lock().ok()?;
        let q = guard.as_mut()?;
        let status = q.exited()?;
        Some(format!(
            "the VM stopped (QEMU {status}: {}); the console ends: {}",
            crate::process::last_lines(&q.log_tail(3), 3, " | "),
            crate::process::last_lines(&self.console(5), 5, " | ")
        ))
    }

    /// Shuts the machine down as EC2 stops an instance (the power button: its systemd stops its units and writes
    /// its journal out), QEMU stopped after [`POWER_OFF_WITHIN`] if it is still running, then reads its logs from
    /// its disk ([`reader`]), with the `files` asked for. How it went down comes first. Done once: later calls
    /// (the evidence, the reports, then the artifacts) get the same reading, so every caller asks for the same files.
    pub async fn logs_after_shutdown(
        &self,
        docker: &crate::docker::Docker,
        files: &[String],
    ) -> std::result::Result<(String, reader::DiskLogs), String> {
        self.disk_logs
            .get_or_init(|| async { self.read_after_shutdown(docker, files).await.map_err(|e| e.to_string()) })
            .await
            .clone()
    }

    async fn read_after_shutdown(
        &self,
        docker: &crate::docker::Docker,
        files: &[String],
    ) -> Result<(String, reader::DiskLogs)> {
        let how = self.shut_down().await;
        let settings = self.settings.as_ref();
        let kernel = reader::kernel(settings, docker).await?;
        let accel = qemu::accel(settings, &kernel).await?;
        let work = self._work.path();
        let logs = reader::read(
            settings,
            docker,
            reader::Read {
                kernel: &kernel,
                accel,
                disk: &work.join("disk.qcow2"),
                work,
                pids_dir: &self.launch.pids_dir,
                files,
            },
        )
        .await?;
        Ok((how, logs))
    }

    /// Presses the power button and waits for QEMU to end; stops it past [`POWER_OFF_WITHIN`]. Says how it went.
    pub async fn shut_down(&self) -> String {
        if !self.powered() {
            return "never started".into();
        }
        if self.exited().is_some() {
            return "it had stopped by itself".into();
        }
        let why = match self.press_power_button(POWER_OFF_WITHIN).await {
            Ok(how) => return how,
            Err(why) => why,
        };
        let q = self.qemu.lock().ok().and_then(|mut g| g.take());
        if let Some(mut q) = q {
            q.stop(Duration::from_secs(5)).await;
        }
        format!("{why}: QEMU stopped (what it had not written out may be missing)")
    }

    /// A graceful shutdown (`after: shutdown`): the power button, which the guest's systemd-logind takes as a
    /// request to power off (`HandlePowerKey`), telling the kubelet first and waiting for its delay lock, as
    /// `systemctl poweroff` does in a container. QEMU is left to the machine's removal if the guest stays up.
    pub async fn power_off(&self, within: Duration) -> Result<String> {
        if !self.powered() {
            return Err(Error::node(
                &self.name,
                "the machine was never started: nothing to power off",
            ));
        }
        if let Some(why) = self.exited() {
            return Err(Error::node(&self.name, why));
        }
        self.press_power_button(within)
            .await
            .map_err(|why| Error::node(&self.name, why))
    }

    /// Presses the power button and waits, at most `within`, for QEMU to end: how it went, or why not.
    async fn press_power_button(&self, within: Duration) -> std::result::Result<String, String> {
        // No kernel, no one to answer the button (a firmware that found nothing to boot waits for ever).
        if !self.console_text().contains("Linux version") {
            return Err("its power button was not pressed (its firmware had started no kernel)".into());
        }
        qmp::press_power_button(&self._work.path().join("qmp.sock"))
            .await
            .map_err(|e| format!("its power button was not pressed ({e})"))?;
        let t0 = Instant::now();
        while self.exited().is_none() && t0.elapsed() < within {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        match self.exited() {
            Some(_) => Ok(format!(
                "powered off by its OS {:.1}s after its power button was pressed",
                t0.elapsed().as_secs_f64()
            )),
            None => Err(format!(
                "not powered off {}s after its power button was pressed",
                within.as_secs()
            )),
        }
    }

    /// Reboots the machine as EC2 reboots an instance ([`qmp::reboot`]) and returns once QEMU has reset it: the
    /// same QEMU with its disk, its tap and MAC (the run's DHCP still holds its lease, so it gets its address
    /// again), its console file (the new boot's lines follow a line saying when it rebooted). Its guest agent
    /// answers again once the new boot's systemd started it ([`VmNode::wait_agent`]).
    pub async fn reboot(&self) -> Result<()> {
        let err = |m: String| Error::node(&self.name, m);
        if !self.powered() {
            return Err(err("the machine was never started: nothing to reboot".into()));
        }
        if let Some(why) = self.exited() {
            return Err(err(why));
        }
        let started_again = |down: Duration| async move {
            // The new boot's lines follow this one; its kernel prints its version first (nodejoin's kernel runs
            // with `console=ttyS0`; a disk of the user's may print nothing there, and does not reboot yet).
            let mark = format!(
                "[nodejoin: rebooted with Ctrl-Alt-Delete, down after {:.1}s; the next boot follows]\n",
                down.as_secs_f64()
            );
            let _ = std::fs::OpenOptions::new()
                .append(true)
                .open(&self.console)
                .and_then(|mut f| std::io::Write::write_all(&mut f, mark.as_bytes()));
            let from = std::fs::metadata(&self.console).map(|m| m.len()).unwrap_or(0);
            let t0 = Instant::now();
            while t0.elapsed() < KERNEL_AGAIN_WITHIN {
                if console::since(&self.console, from).contains("Linux version") {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(format!(
                "the machine was reset, but no kernel started within {}s",
                KERNEL_AGAIN_WITHIN.as_secs()
            ))
        };
        qmp::reboot(&self._work.path().join("qmp.sock"), REBOOT_DOWN_WITHIN, started_again)
            .await
            .map_err(|why| {
                err(format!(
                    "reboot: {why}; the console ends: {}",
                    crate::process::last_lines(&self.console(5), 5, " | ")
                ))
            })?;
        // The connection of the boot before speaks to no agent now; the next request makes a new one.
        self.agent.disconnect().await;
        Ok(())
    }

    /// Stops the machine (QEMU killed, its network and files removed).
    pub async fn remove(self) {
        let q = self.qemu.lock().ok().and_then(|mut g| g.take());
        if let Some(mut q) = q {
            q.stop(Duration::from_secs(5)).await;
        }
        self.leases.release(&self.mac_bytes);
    }
}
