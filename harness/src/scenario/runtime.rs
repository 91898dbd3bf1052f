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

impl NodeRuntime {
    /// The machine kind that runs a group of this runtime (`own_disk`: the group boots a disk of its own).
    pub fn kind(self, own_disk: bool) -> &'static crate::node::machine::MachineKind {
        use crate::node::machine::{CONTAINER, OWN_DISK, VM};
        match (self, own_disk) {
            (Self::Container, _) => &CONTAINER,
            (Self::Vm, false) => &VM,
            (Self::Vm, true) => &OWN_DISK,
        }
    }
}

/// `disk`: a machine's own disk (an AMI exported with `aws ec2 export-image`, a Packer qemu build) instead of the
/// disk nodejoin makes from the group's node image. It boots under its firmware (UEFI unless `firmware: bios`)
/// through its own bootloader, and nothing of nodejoin's is put in it: it must trust the run's endpoints CA itself
/// (`NODEJOIN_ENDPOINTS_CA`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OwnDisk {
    /// The disk image file (relative to the scenario file). Each node boots a copy-on-write overlay of it: the
    /// file is only read.
    pub path: String,
    /// Its format as named (never guessed from its content: a raw disk could pose as another format).
    pub format: DiskFormat,
    /// Whether the image runs QEMU's guest agent (`qemu-guest-agent`): then the harness reads inside the machine
    /// as on nodejoin's disks (files, the journal, cloud-init's and nodeadm's reports). Without it (the default:
    /// an AMI has none) the node is observed from outside only: the cluster, its calls to the fakes, its serial
    /// console; expectations that read inside are refused at load.
    #[serde(default)]
    pub guest_agent: bool,
    /// The firmware it boots under: `uefi` (OVMF; the default, and AL2023's `uefi-preferred`) or `bios` (SeaBIOS;
    /// a `legacy-bios` AMI, a Packer qemu build made without `efi_boot`).
    #[serde(default)]
    pub firmware: crate::node::vm::firmware::Firmware,
    /// The bus its root disk is on: `virtio` (the default; a Packer qemu build, a KVM image) or `nvme` (an AMI: on
    /// Nitro, EBS volumes are NVMe, and an AMI's initramfs may hold no virtio driver).
    #[serde(default)]
    pub bus: crate::node::vm::qemu::RootBus,
}

/// A disk image's format, as `qemu-img` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DiskFormat {
    /// A plain image of the disk (`export-image --disk-image-format RAW`).
    Raw,
    /// QEMU's copy-on-write format (Packer's qemu builder's default).
    Qcow2,
}

impl DiskFormat {
    pub fn name(self) -> &'static str {
        match self {
            DiskFormat::Raw => "raw",
            DiskFormat::Qcow2 => "qcow2",
        }
    }
}

impl OwnDisk {
    /// Why a group with this disk cannot run here: the file is absent (a disk is built or fetched by the caller,
    /// not committed). Such a scenario is ignored with the reason, never passed.
    pub fn absent(&self, group: &str) -> Option<String> {
        (!std::path::Path::new(&self.path).exists()).then(|| {
            format!(
                "node group {group}: its disk {} is absent (build or fetch it there first; `nodejoin image \
                 export-disk` makes one from a node image)",
                self.path
            )
        })
    }
}
