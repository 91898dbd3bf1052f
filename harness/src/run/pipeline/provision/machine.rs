//! A `runtime: vm` group's machine: made by `provision` (the disk with its kernel, or the group's own disk,
//! checked, and the accelerator, cached), started by `boot` on the run's network with its instance's address and MAC.
use crate::error::{Error, Result};
use crate::node::image::NodeImage;
use crate::node::machine::container::NodeFile;
use crate::node::machine::NodeMachine;
use crate::node::vm::{self, kernel::Kernel, qemu::Accel, Boot, VmNode, VmSpec};
use crate::run::env::Environment;
use crate::scenario::model::{NodeGroup, Scenario};
use std::path::PathBuf;

/// Memory a VM node gets at most (MiB): an instance type's full memory is more than a CI runner has to give, and
/// a node that joins needs far less.
const MAX_MEMORY_MIB: u32 = 3072;

/// Size of each instance-store disk at most: EC2's are hundreds of GB; a node's bootstrap needs a few hundred MB
/// of them, and a disk takes host space as the machine writes it, up to this.
const MAX_STORE_DISK_BYTES: u64 = 2 << 30;

/// What every VM of a group boots.
pub(crate) struct Machine {
    accel: Accel,
    disk: PathBuf,
    /// A disk of the user's, held open: `disk` names this open file, so the checked file is the one booted.
    _held: Option<vm::own_disk::HeldDisk>,
    /// nodejoin's kernel of the disk; none for a disk of the user's, which brings its own.
    kernel: Option<Kernel>,
    format: &'static str,
    /// The firmware a disk of the user's boots under, and the bus it is on.
    firmware: vm::firmware::Firmware,
    bus: vm::qemu::RootBus,
    /// Whether its guest runs QEMU's guest agent.
    agent: bool,
    /// What the report calls what it boots.
    pub(crate) shown: String,
}

/// The disk of `image`, or the group's own disk (`image` is none then): confined to the scenario's roots again,
/// opened once and held ([`vm::own_disk::HeldDisk`]), and checked through that open file
/// ([`vm::own_disk::check_own`]) before any machine boots it. Called by `provision`.
pub(crate) async fn prepare(
    env: &Environment,
    sc: &Scenario,
    group: &NodeGroup,
    image: Option<&NodeImage>,
) -> Result<Machine> {
    crate::host::ensure_vm_packages(&env.settings).await?;
    if let Some(image) = image {
        let (disk, kernel) = vm::disk::ensure(&env.settings, &env.docker, image).await?;
        let accel = vm::qemu::accel(&env.settings, &kernel).await?;
        return Ok(Machine {
            accel,
            disk,
            _held: None,
            kernel: Some(kernel),
            format: "raw",
            firmware: vm::firmware::Firmware::Uefi,
            bus: vm::qemu::RootBus::Virtio,
            agent: true,
            shown: image.tag.clone(),
        });
    }
    crate::host::ensure_own_disk_packages(&env.settings).await?;
    let own = group
        .disk
        .as_ref()
        .ok_or_else(|| Error::Pipeline(format!("node group {} has neither a node image nor a disk", group.name)))?;
    let disk = sc
        .roots
        .check(std::path::Path::new(&own.path), "disk")
        .map_err(|m| Error::node(&group.name, m))?;
    let held = vm::own_disk::HeldDisk::open(&disk, |real| sc.roots.check(real, "disk").map(|_| ()))?;
    let info = vm::own_disk::check_own(&held.path(), own.format.name()).await?;
    Ok(Machine {
        accel: match own.firmware {
            vm::firmware::Firmware::Uefi => {
                let (code, vars) = vm::firmware::ovmf()?;
                vm::qemu::accel_firmware(&env.settings, &code, &vars).await
            }
            vm::firmware::Firmware::Bios => vm::qemu::accel_bios(&env.settings).await?,
        },
        shown: format!(
            "disk {} ({}, {}, {}, {})",
            disk.display(),
            own.format.name(),
            match info.virtual_size {
                s if s >= 1 << 30 => format!("{} GiB", s.div_ceil(1 << 30)),
                s => format!("{} MiB", s.div_ceil(1 << 20)),
            },
            own.firmware.name(),
            own.bus.name()
        ),
        disk: held.path(),
        _held: Some(held),
        kernel: None,
        format: own.format.name(),
        firmware: own.firmware,
        bus: own.bus,
        agent: own.guest_agent,
    })
}

/// The vCPUs and memory of `instance_type` within the host's means (its cores; [`MAX_MEMORY_MIB`]).
fn size(instance_type: &str) -> (u32, u32) {
    let (vcpus, mib) = crate::eks::instance_sizes::size(instance_type).unwrap_or((2, 8192));
    let cores = u32::try_from(crate::host::cpus()).unwrap_or(1).max(1);
    (vcpus.clamp(1, cores), mib.min(MAX_MEMORY_MIB))
}

/// The instance-store disks of `instance_type` (EC2's count; each EC2's size within [`MAX_STORE_DISK_BYTES`]),
/// with serials derived from the instance id.
fn instance_store(instance_type: &str, instance_id: &str) -> Vec<(String, u64)> {
    let Some((disks, gb)) = crate::eks::instance_store::disks(instance_type) else {
        return Vec::new();
    };
    let bytes = (u64::from(gb) * 1_000_000_000).min(MAX_STORE_DISK_BYTES);
    (0..disks)
        .map(|i| (crate::eks::instance_store::serial(instance_id, i), bytes))
        .collect()
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn start(
    env: &Environment,
    machine: &Machine,
    group: &NodeGroup,
    name: &str,
    instance_id: &str,
    mac: &str,
    region: &str,
    files: Vec<NodeFile>,
) -> Result<NodeMachine> {
    let link = env.vm_link().await?;
    let ip = link.next_address()?;
    let (vcpus, memory_mib) = size(&group.instance_type);
    let pids = env.pids_dir();
    let node = VmNode::create(VmSpec {
        name: name.to_string(),
        run_id: &env.run_id,
        boot: match &machine.kernel {
            Some(kernel) => Boot::Image {
                kernel,
                disk: &machine.disk,
                files,
            },
            None => Boot::Own {
                disk: &machine.disk,
                format: machine.format,
                firmware: machine.firmware,
                bus: machine.bus,
            },
        },
        agent: machine.agent,
        accel: machine.accel,
        link,
        services: env.link_services(),
        domain: crate::fakes::instances::dns_domain(region),
        ip,
        mac: mac.to_string(),
        instance_id,
        instance_type: &group.instance_type,
        vcpus,
        memory_mib,
        instance_store: instance_store(&group.instance_type, instance_id),
        pids_dir: &pids,
        settings: env.settings.clone(),
    })
    .await?;
    Ok(crate::node::machine::vm::node(
        &env.docker,
        node,
        machine.shown.clone(),
        group.capabilities(),
    ))
}
