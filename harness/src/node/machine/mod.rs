//! Node machines, registered as cluster providers are (kind's `ProviderInfo` is the model): what runs a node — a
//! container on the host's kernel, a VM booting nodejoin's disk, a VM booting the user's own disk — each says what
//! it can do as data ([`Capabilities`]), and the pipeline asks for a capability, never for a runtime's name. A
//! running node is a [`NodeMachine`]: its addresses, and its [`Machine`] behind one trait.
//!
//! Adding a runtime: its module implementing [`Machine`], one line in [`KINDS`], and its value in the scenario
//! format (`scenario::runtime::NodeRuntime`, which names its kind).
pub mod container;
pub mod vm;

use crate::docker::{Docker, ExecOutput};
use crate::error::Result;
use futures::future::BoxFuture;
use std::net::Ipv4Addr;
use std::time::Duration;

/// Whether the harness reads inside a kind's nodes (files, the journal, cloud-init's and nodeadm's reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeesInside {
    Always,
    /// Only where the guest runs QEMU's guest agent (a disk of the user's says so).
    WithGuestAgent,
}

/// How much of the host one node takes among the scenarios running beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// One node slot.
    One,
    /// Half the host's node slots: an emulated machine keeps about one core busy.
    HalfTheHost,
}

/// A kind of node machine: its name and what it can do, as data.
#[derive(Debug, PartialEq, Eq)]
pub struct MachineKind {
    /// What reports and refusals call it.
    pub name: &'static str,
    pub sees_inside: SeesInside,
    /// It boots a disk of its own with a kernel of its own: made before it starts (`provision`), powered on by the
    /// pipeline, its user data run by its own boot; it cannot reach the host's kernel.
    pub own_kernel: bool,
    /// Its serial console is kept (evidence from `console`).
    pub console: bool,
    /// It has instance-store disks as EC2 gives them (`localStorage`).
    pub instance_store: bool,
    /// It can be shut down and read from its disk afterwards (a machine seen from outside).
    pub read_after_shutdown: bool,
    /// It restarts as an instance does (`after: reboot`): its disk kept, its memory and `/run` gone, systemd
    /// booting again (a container restarted, nodejoin's VM rebooted by Ctrl-Alt-Delete).
    pub reboots: bool,
    /// Its OS can be asked to power off through systemd-logind (`after: shutdown`), which tells the kubelet first
    /// (`PrepareForShutdown`) and waits for its inhibitor lock: a container's systemd powers off and the container
    /// ends; nodejoin's VM by its ACPI power button, which the guest's logind takes the same way. A disk of the
    /// user's may handle the button otherwise (acpid, or nothing), so it is not offered there.
    pub graceful_shutdown: bool,
    /// Its kubelet can be replaced while it runs (`after: upgrade`): nodejoin puts the new binary in (a
    /// container's engine copies it into its filesystem). A VM's agent could write it; not built yet. A disk of the
    /// user's keeps its own kubelet where nodejoin does not know.
    pub replaces_kubelet: bool,
    pub weight: Weight,
    /// Its units' CPU is read from the host while it runs, for nothing in it ([`crate::node::cpu`]): often
    /// enough to catch a unit's CPU before its cgroup goes (a VM's is read through its agent, at phase ends).
    pub cpu_from_host: bool,
    /// Its [`Machine::read_bytes`] reads a file as a process inside would see it, with no process started there
    /// (a VM's agent's file calls): text files are read that way too. A container's engine reads its image's
    /// layers only, not the mounts made inside (`/run`), so `cat` runs there.
    pub reads_without_exec: bool,
    /// Only one scenario with such nodes runs at a time.
    pub one_scenario_at_a_time: bool,
}

/// A container of the node image on the host's kernel, systemd as PID 1.
pub const CONTAINER: MachineKind = MachineKind {
    name: "container",
    sees_inside: SeesInside::Always,
    own_kernel: false,
    console: false,
    instance_store: false,
    read_after_shutdown: false,
    reboots: true,
    graceful_shutdown: true,
    replaces_kubelet: true,
    weight: Weight::One,
    cpu_from_host: true,
    reads_without_exec: false,
    one_scenario_at_a_time: false,
};

/// A QEMU machine booting nodejoin's node image as a disk with Debian's stock kernel, seen as an EC2 instance.
pub const VM: MachineKind = MachineKind {
    name: "vm",
    sees_inside: SeesInside::Always,
    own_kernel: true,
    console: true,
    instance_store: true,
    read_after_shutdown: false,
    reboots: true,
    graceful_shutdown: true,
    replaces_kubelet: false,
    weight: Weight::HalfTheHost,
    cpu_from_host: false,
    reads_without_exec: true,
    one_scenario_at_a_time: true,
};

/// A QEMU machine booting the user's own disk (an exported AMI) under its firmware, nothing of nodejoin's in it.
pub const OWN_DISK: MachineKind = MachineKind {
    name: "vm with its own disk",
    sees_inside: SeesInside::WithGuestAgent,
    own_kernel: true,
    console: true,
    instance_store: true,
    read_after_shutdown: true,
    reboots: false,
    graceful_shutdown: false,
    replaces_kubelet: false,
    weight: Weight::HalfTheHost,
    cpu_from_host: false,
    reads_without_exec: true,
    one_scenario_at_a_time: true,
};

/// Every kind, in the order the book lists them.
pub const KINDS: &[&MachineKind] = &[&CONTAINER, &VM, &OWN_DISK];

/// What one group's machines can do: its kind's data with the group's own facts applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub kind: &'static MachineKind,
    pub sees_inside: bool,
}

impl Capabilities {
    /// `kind`'s, for a guest that runs (or not) QEMU's guest agent.
    pub fn of(kind: &'static MachineKind, guest_agent: bool) -> Self {
        Self {
            kind,
            sees_inside: match kind.sees_inside {
                SeesInside::Always => true,
                SeesInside::WithGuestAgent => guest_agent,
            },
        }
    }

    /// Whether what ran in it is read from its disk after its shutdown: a machine that can be, and that the
    /// harness cannot see inside while it runs.
    pub fn read_after_shutdown(&self) -> bool {
        self.kind.read_after_shutdown && !self.sees_inside
    }
}

/// What runs one node, whatever it is.
pub trait Machine: Send + Sync {
    /// How reports name it (`container`, `vm (tcg)`).
    fn label(&self) -> String;
    /// Starts a machine made but not started; nothing for one started when made.
    fn power_on(&self) -> Result<()>;
    fn powered(&self) -> bool;
    /// Waits until it has booted far enough to be worked with, at most `timeout`; how long it took, or why not.
    fn wait_booted(&self, timeout: Duration) -> BoxFuture<'_, std::result::Result<Duration, String>>;
    fn exec_within<'a>(
        &'a self,
        cmd: &'a [&'a str],
        env: &'a [String],
        deadline: Duration,
    ) -> BoxFuture<'a, Result<ExecOutput>>;
    /// A file's bytes, binary-safe.
    fn read_bytes<'a>(&'a self, path: &'a str) -> BoxFuture<'a, std::result::Result<Vec<u8>, String>>;
    /// Its serial console as far as it is kept; nothing where there is none.
    fn console_text(&self) -> String;
    /// The last `lines` lines of what it printed (systemd's console).
    fn console(&self, lines: usize) -> BoxFuture<'_, String>;
    /// The CPU time it has used since it started.
    fn cpu_time(&self) -> BoxFuture<'_, Option<Duration>>;
    /// Its cgroup tree's CPU, unit by unit ([`crate::node::cpu`]); `None` where it cannot be read.
    fn cpu_reading(&self) -> BoxFuture<'_, Option<crate::node::cpu::Reading>>;
    /// Its instructions are emulated (a VM under TCG): every command the harness runs in it costs many times
    /// what it costs on an instance, so it is looked at less often.
    fn emulated(&self) -> bool {
        false
    }
    /// Why it no longer runs, if it does not.
    fn exited(&self) -> BoxFuture<'_, Option<String>>;
    /// Shut down and read from its disk (with `files`); `None` where the machine cannot be.
    fn logs_after_shutdown<'a>(
        &'a self,
        docker: &'a Docker,
        files: &'a [String],
    ) -> BoxFuture<'a, Option<std::result::Result<(String, crate::node::vm::reader::DiskLogs), String>>>;
    /// Restarts it as an instance reboots (its kind `reboots`); returns once it is powered again, not booted.
    fn reboot(&self) -> BoxFuture<'_, Result<()>>;
    /// Shuts it down as EC2 does an instance it terminates (its OS's own shutdown, then off) and says how that
    /// went; it stays made, its logs readable, until removed.
    fn shut_down(&self) -> BoxFuture<'_, Result<String>>;
    /// Asks its OS to power off gracefully (its kind's `graceful_shutdown`) and waits until it is off, at most
    /// `within`: how it went.
    fn power_off(&self, within: Duration) -> BoxFuture<'_, Result<String>>;
    /// Writes `file` into its filesystem while it runs (its kind's `replaces_kubelet`), as root with the file's
    /// mode; a file there by that name is replaced.
    fn install_file<'a>(&'a self, file: &'a crate::node::seed::NodeFile) -> BoxFuture<'a, Result<()>>;
    /// Removes it now.
    fn remove(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// A running node, whatever runs it; the pipeline asks the same of each.
pub struct NodeMachine {
    pub name: String,
    pub id: String,
    pub ip: Ipv4Addr,
    /// The MAC address of its interface on the run network (IMDS reports it, as EC2 reports the ENI's).
    pub mac: Option<String>,
    /// The image it runs (`repository:tag`), or the disk it boots.
    pub image: String,
    pub capabilities: Capabilities,
    docker: Docker,
    machine: Box<dyn Machine>,
    /// Dropped after the machine (field order).
    journal: Option<super::journal::HostJournal>,
}

/// Its addresses and what it runs, for [`NodeMachine::new`].
pub struct Identity {
    pub name: String,
    pub id: String,
    pub ip: Ipv4Addr,
    pub mac: Option<String>,
    pub image: String,
}

impl NodeMachine {
    pub fn new(
        identity: Identity,
        capabilities: Capabilities,
        docker: &Docker,
        machine: Box<dyn Machine>,
        journal: Option<super::journal::HostJournal>,
    ) -> Self {
        Self {
            name: identity.name,
            id: identity.id,
            ip: identity.ip,
            mac: identity.mac,
            image: identity.image,
            capabilities,
            docker: docker.clone(),
            machine,
            journal,
        }
    }

    /// A machine's serial console as far as it is kept; nothing for a container.
    pub fn console_text(&self) -> String {
        self.machine.console_text()
    }

    /// Whether the harness can see inside the node: its files, its journal, the reports of what ran in it.
    pub fn sees_inside(&self) -> bool {
        self.capabilities.sees_inside
    }

    pub fn power_on(&self) -> Result<()> {
        self.machine.power_on()
    }

    /// Whether the node runs (a machine not yet started does not).
    pub fn powered(&self) -> bool {
        self.machine.powered()
    }

    /// What runs the node: `container`, or `vm (kvm)` / `vm (tcg)` with the accelerator.
    pub fn runtime(&self) -> String {
        self.machine.label()
    }

    /// Waits until the node has booted far enough to be worked with.
    pub async fn wait_systemd(&self, timeout: Duration) -> Result<Duration> {
        self.machine
            .wait_booted(timeout)
            .await
            .map_err(|why| crate::error::Error::node(&self.name, why))
    }

    /// A short command (bounded by `deadline::NODE_EXEC`): probes, file reads, journals.
    pub async fn exec(&self, cmd: &[&str], env: &[String]) -> Result<ExecOutput> {
        self.exec_within(cmd, env, crate::deadline::NODE_EXEC).await
    }

    /// A command that may run as long as `deadline` (a bootstrap, cloud-init), then an `Error::Timeout`.
    pub async fn exec_within(&self, cmd: &[&str], env: &[String], deadline: Duration) -> Result<ExecOutput> {
        self.machine.exec_within(cmd, env, deadline).await
    }

    /// A file's content, or `None` when it cannot be read.
    pub async fn read_file(&self, path: &str) -> Option<String> {
        if self.capabilities.kind.reads_without_exec {
            let bytes = self.read_bytes(path).await.ok()?;
            return Some(String::from_utf8_lossy(&bytes).into_owned());
        }
        let out = self.exec(&["cat", path], &[]).await.ok()?;
        (out.exit_code == 0).then_some(out.stdout)
    }

    /// A file's bytes (binary-safe, unlike `cat` through exec).
    pub async fn read_bytes(&self, path: &str) -> std::result::Result<Vec<u8>, String> {
        self.machine.read_bytes(path).await
    }

    /// The journal kept on the host, which outlives the container ([`super::journal`]): `unit`'s (all of it for
    /// `None`), its last `lines` if given; `None` for a machine that keeps none there.
    pub async fn journal_on_host(
        &self,
        unit: Option<&str>,
        lines: Option<usize>,
    ) -> Option<std::result::Result<String, String>> {
        Some(self.journal.as_ref()?.read(&self.docker, unit, lines).await)
    }

    /// A machine observed from outside only: shut down, its logs read from its disk, with the `files` asked for;
    /// `None` for a node the harness reads inside.
    pub async fn logs_after_shutdown(
        &self,
        files: &[String],
    ) -> Option<std::result::Result<(String, crate::node::vm::reader::DiskLogs), String>> {
        if !self.capabilities.read_after_shutdown() {
            return None;
        }
        self.machine.logs_after_shutdown(&self.docker, files).await
    }

    /// The journal of a unit (or the whole journal for `None`).
    pub async fn journal(&self, unit: Option<&str>) -> String {
        let mut cmd = vec!["journalctl", "--no-pager", "-o", "short-precise"];
        if let Some(u) = unit {
            cmd.extend(["-u", u]);
        }
        self.exec(&cmd, &[])
            .await
            .map(|o| o.stdout)
            .unwrap_or_else(|e| format!("(journal unavailable: {e})"))
    }

    /// The last `lines` lines of the node's console; it outlives the container, unlike the journal.
    pub async fn console(&self, lines: usize) -> String {
        self.machine.console(lines).await
    }

    /// The CPU time the node has used since it started (systemd, containerd, the kubelet, the bootstrap, pods).
    pub async fn cpu_time(&self) -> Option<Duration> {
        self.machine.cpu_time().await
    }

    /// Its instructions are emulated ([`Machine::emulated`]).
    pub fn emulated(&self) -> bool {
        self.machine.emulated()
    }

    /// Its cgroup tree's CPU, unit by unit, now.
    pub async fn cpu_reading(&self) -> Option<crate::node::cpu::Reading> {
        self.machine.cpu_reading().await
    }

    /// Why the node is no longer running, if it is not; `None` while it runs, or when that cannot be said.
    pub async fn exited(&self) -> Option<String> {
        self.machine.exited().await
    }

    /// Reboots the node ([`MachineKind::reboots`]) and waits until it has booted again, at most `boot`: the same
    /// machine at the same address, or an error saying what changed.
    pub async fn reboot(&self, boot: Duration) -> Result<Duration> {
        if !self.capabilities.kind.reboots {
            return Err(crate::error::Error::node(
                &self.name,
                format!("runtime {} cannot reboot a node", self.capabilities.kind.name),
            ));
        }
        self.machine.reboot().await?;
        self.wait_systemd(boot).await
    }

    /// Shuts the node down as an instance terminated ([`Machine::shut_down`]): how it went.
    pub async fn shut_down(&self) -> Result<String> {
        self.machine.shut_down().await
    }

    /// Asks the node's OS to power off through systemd-logind ([`MachineKind::graceful_shutdown`]) and waits until
    /// it is off, at most `within`: how it went.
    pub async fn power_off(&self, within: Duration) -> Result<String> {
        if !self.capabilities.kind.graceful_shutdown {
            return Err(crate::error::Error::node(
                &self.name,
                format!("runtime {} cannot be asked to power off", self.capabilities.kind.name),
            ));
        }
        self.machine.power_off(within).await
    }

    /// Writes `file` into the node while it runs ([`MachineKind::replaces_kubelet`]).
    pub async fn install_file(&self, file: &crate::node::seed::NodeFile) -> Result<()> {
        if !self.capabilities.kind.replaces_kubelet {
            return Err(crate::error::Error::node(
                &self.name,
                format!(
                    "runtime {} cannot be given a file while it runs",
                    self.capabilities.kind.name
                ),
            ));
        }
        self.machine.install_file(file).await
    }

    /// Removes the node now.
    pub async fn remove(self) {
        self.machine.remove().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_named_once_and_say_what_they_can_do() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), KINDS.len());
        assert!(Capabilities::of(&CONTAINER, false).sees_inside);
        assert!(!Capabilities::of(&OWN_DISK, false).sees_inside);
        assert!(Capabilities::of(&OWN_DISK, true).sees_inside);
        assert!(Capabilities::of(&OWN_DISK, false).read_after_shutdown());
        assert!(!Capabilities::of(&OWN_DISK, true).read_after_shutdown());
        assert!(!Capabilities::of(&VM, false).read_after_shutdown());
        // nodejoin's VM reboots; a disk of the user's is waited for through its agent, not yet after a reboot.
        let reboot: Vec<&str> = KINDS.iter().filter(|k| k.reboots).map(|k| k.name).collect();
        assert_eq!(reboot, ["container", "vm"]);
    }
}
