//! What runs a node (`runtime` of a node group): a container on the host's kernel or a machine of its own.
use serde::Deserialize;

/// What runs a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NodeRuntime {
    /// A container of the node image on the host's kernel (systemd as PID 1).
    #[default]
    Container,
    /// A QEMU machine (KVM where it works, else TCG) booting the node image as a disk with Debian's stock kernel,
    /// seen by its software as an EC2 instance (SMBIOS, DHCP, IMDS on its link).
    Vm,
}
