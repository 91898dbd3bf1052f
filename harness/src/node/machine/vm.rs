//! The VM kinds as machines: nodejoin's disk or the user's own, both run by [`crate::node::vm::VmNode`] (QEMU, its
//! tap and rules, its guest agent where there is one).
use super::{Capabilities, Identity, Machine, NodeMachine};
use crate::docker::{Docker, ExecOutput};
use crate::error::Result;
use crate::node::vm::VmNode;
use futures::future::BoxFuture;
use std::time::Duration;

struct VmMachine(Box<VmNode>);

/// A VM node (made; [`NodeMachine::power_on`] starts it); `image` names what it boots (the node image its disk
/// was made from, or the user's disk), `capabilities` its kind's.
pub fn node(docker: &Docker, vm: VmNode, image: String, capabilities: Capabilities) -> NodeMachine {
    let identity = Identity {
        name: vm.name.clone(),
        id: vm.name.clone(),
        ip: vm.ip,
        mac: Some(vm.mac.clone()),
        image,
    };
    NodeMachine::new(identity, capabilities, docker, Box::new(VmMachine(Box::new(vm))), None)
}

impl Machine for VmMachine {
    fn label(&self) -> String {
        format!("vm ({})", self.0.accel.name())
    }

    fn power_on(&self) -> Result<()> {
        self.0.power_on()
    }

    fn powered(&self) -> bool {
        self.0.powered()
    }

    /// A machine is up once its systemd has started the agent. Its boot transaction goes on, as on an instance:
    /// cloud-init and nodeadm are in it, so "running" would mean the bootstrap is over.
    fn wait_booted(&self, timeout: Duration) -> BoxFuture<'_, std::result::Result<Duration, String>> {
        Box::pin(async move {
            self.0.wait_agent(timeout).await.map_err(|why| {
                format!(
                    "the machine did not boot within {} ({why})",
                    humantime::format_duration(timeout)
                )
            })
        })
    }

    fn exec_within<'a>(
        &'a self,
        cmd: &'a [&'a str],
        env: &'a [String],
        deadline: Duration,
    ) -> BoxFuture<'a, Result<ExecOutput>> {
        Box::pin(self.0.exec_within(cmd, env, deadline))
    }

    fn read_bytes<'a>(&'a self, path: &'a str) -> BoxFuture<'a, std::result::Result<Vec<u8>, String>> {
        Box::pin(self.0.read_bytes(path))
    }

    fn console_text(&self) -> String {
        self.0.console_text()
    }

    fn console(&self, lines: usize) -> BoxFuture<'_, String> {
        Box::pin(std::future::ready(self.0.console(lines)))
    }

    fn cpu_time(&self) -> BoxFuture<'_, Option<Duration>> {
        Box::pin(std::future::ready(self.0.cpu_time()))
    }

    fn emulated(&self) -> bool {
        self.0.accel == crate::node::vm::qemu::Accel::Tcg
    }

    /// The guest's own cgroup tree, through its agent: the guest's CPU, which emulation multiplies in QEMU's.
    fn cpu_reading(&self) -> BoxFuture<'_, Option<crate::node::cpu::Reading>> {
        Box::pin(async move {
            let script = crate::node::cpu::guest_listing_script();
            let script = script.as_str();
            let out = self
                .0
                .exec_within(&["sh", "-c", script], &[], crate::deadline::NODE_EXEC)
                .await
                .ok()?;
            (out.exit_code == 0).then(|| crate::node::cpu::Reading::parse_listing(&out.stdout))
        })
    }

    fn exited(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(std::future::ready(self.0.exited()))
    }

    fn logs_after_shutdown<'a>(
        &'a self,
        docker: &'a Docker,
        files: &'a [String],
    ) -> BoxFuture<'a, Option<std::result::Result<(String, crate::node::vm::reader::DiskLogs), String>>> {
        Box::pin(async move { Some(self.0.logs_after_shutdown(docker, files).await) })
    }

    fn reboot(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.0.reboot())
    }

    /// Its power button, as EC2 signals a guest it terminates; QEMU stopped if the guest does not power off.
    fn shut_down(&self) -> BoxFuture<'_, Result<String>> {
        Box::pin(async move { Ok(self.0.shut_down().await) })
    }

    /// Its power button, which the guest's systemd-logind takes as a request to power off gracefully.
    fn power_off(&self, within: Duration) -> BoxFuture<'_, Result<String>> {
        Box::pin(self.0.power_off(within))
    }

    /// Not offered ([`crate::node::machine::VM`]`.replaces_kubelet`): the agent's file calls could write it, 90 MB
    /// in base64 pieces under emulation; not built yet.
    fn install_file<'a>(&'a self, _file: &'a crate::node::seed::NodeFile) -> BoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(Err(crate::error::Error::node(
            "vm",
            "a VM machine cannot be given a file while it runs yet",
        ))))
    }

    fn remove(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move { self.0.remove().await })
    }
}
