//! QEMU for a VM node: the accelerator (KVM where `/dev/kvm` boots a stock kernel, else TCG) and the command line
//! that makes the machine an EC2 instance as its software sees it: SMBIOS tables (what cloud-init's ds-identify and
//! the kubelet read), its NIC with the instance's MAC on the run's network, and the agent's port.
use super::kernel::Kernel;
use crate::error::{Error, Result};
use crate::settings::Settings;
use std::path::Path;
use std::time::Duration;

/// How a VM runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    /// QEMU's software emulation (no KVM, or a KVM that does not boot a stock kernel, such as a nested PVM one).
    Tcg,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// How long a stock kernel may take to start its init under KVM before KVM is taken not to work here.
const KVM_PROBE: Duration = Duration::from_secs(15);

/// The accelerator when no probe is needed: the setting's (`kvm`, `tcg`), or TCG where `/dev/kvm` cannot be opened.
fn decided_without_probe(settings: &Settings) -> Option<Accel> {
    match settings.vm_accel.as_deref() {
        Some("kvm") => return Some(Accel::Kvm),
        Some("tcg") => return Some(Accel::Tcg),
        _ => {}
    }
    let kvm = std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm");
    kvm.is_err().then_some(Accel::Tcg)
}

/// The accelerator to use: the setting's (`kvm`, `tcg`), or for `auto` KVM when `/dev/kvm` is there and boots
/// `kernel` (probed once per kernel, the verdict kept in the cache).
pub async fn accel(settings: &Settings, kernel: &Kernel) -> Result<Accel> {
    if let Some(decided) = decided_without_probe(settings) {
        return Ok(decided);
    }
    let verdict = super::kernel::cache(settings).join(format!("kvm-{}", kernel.version));
    match std::fs::read_to_string(&verdict).as_deref().map(str::trim) {
        Ok("boots") => return Ok(Accel::Kvm),
        Ok(_) => return Ok(Accel::Tcg),
        Err(_) => {}
    }
    let boots = probe_kvm(settings, kernel).await;
    let _ = std::fs::write(&verdict, if boots { "boots\n" } else { "fails\n" });
    Ok(if boots { Accel::Kvm } else { Accel::Tcg })
}

/// The accelerator for a machine that boots a disk of its own under UEFI firmware (`code`, `vars`): the setting's;
/// TCG without a usable `/dev/kvm` or where a probe of nodejoin's kernels saw KVM fail; else whether the firmware
/// itself runs under KVM, probed once and kept in the cache (`kvm-firmware`).
pub async fn accel_firmware(settings: &Settings, code: &Path, vars: &Path) -> Accel {
    accel_probed(settings, "kvm-firmware", probe_kvm_firmware(settings, code, vars)).await
}

/// The accelerator for a machine that boots a disk of its own under a PC BIOS: as [`accel_firmware`], with
/// SeaBIOS probed (`kvm-bios`).
pub async fn accel_bios(settings: &Settings) -> Result<Accel> {
    let sercon = super::firmware::sercon_file(settings)?;
    let boot = [
        "-fw_cfg".into(),
        format!("name=etc/sercon-port,file={}", opt_path(&sercon)?),
    ];
    Ok(accel_probed(
        settings,
        "kvm-bios",
        probe_kvm_with(settings, &boot, &["SeaBIOS"], None),
    )
    .await)
}

/// The setting's accelerator, or TCG where `/dev/kvm` cannot be used or a kept verdict says KVM failed, else the
/// verdict of `probe` (run only then, once: kept in the cache as `verdict`).
async fn accel_probed(settings: &Settings, verdict: &str, probe: impl std::future::Future<Output = bool>) -> Accel {
    if let Some(decided) = decided_without_probe(settings) {
        return decided;
    }
    let cache = super::kernel::cache(settings);
    if by_verdicts(&cache) == Accel::Tcg {
        return Accel::Tcg;
    }
    let verdict = cache.join(verdict);
    if std::fs::read_to_string(&verdict).is_err() {
        let boots = probe.await;
        let _ = std::fs::create_dir_all(&cache);
        let _ = std::fs::write(&verdict, if boots { "boots\n" } else { "fails\n" });
    }
    by_verdicts(&cache)
}

/// KVM unless a probe's verdict kept in `dir` (`kvm-<kernel>`) says it failed.
fn by_verdicts(dir: &Path) -> Accel {
    let verdicts = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("kvm-"))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok());
    let mut accel = Accel::Kvm;
    for v in verdicts {
        if v.trim() != "boots" {
            accel = Accel::Tcg;
        }
    }
    accel
}

/// Boots `kernel` with its initramfs and no disk under KVM and waits for it to start its init.
async fn probe_kvm(settings: &Settings, kernel: &Kernel) -> bool {
    let boot = [
        "-kernel".into(),
        kernel.vmlinuz.display().to_string(),
        "-initrd".into(),
        kernel.initramfs.display().to_string(),
        "-append".into(),
        "console=ttyS0 panic=-1".into(),
    ];
    probe_kvm_with(settings, &boot, &["Run /init as init process", "nodejoin-vm:"], None).await
}

/// Starts UEFI firmware (`code`, a copy of `vars`) with no disk under KVM and waits for its boot manager to print.
async fn probe_kvm_firmware(settings: &Settings, code: &Path, vars: &Path) -> bool {
    probe_kvm_with(settings, &[], &["BdsDxe", "UEFI"], Some((code, vars))).await
}

/// Starts QEMU under KVM with `boot` (and firmware, if given) and no disk: true once its serial console shows
/// one of `markers` within [`KVM_PROBE`]; false if it exits first (a KVM that cannot run a vCPU aborts QEMU).
async fn probe_kvm_with(
    settings: &Settings,
    boot: &[String],
    markers: &[&str],
    firmware: Option<(&Path, &Path)>,
) -> bool {
    let Ok(dir) = tempfile::Builder::new()
        .prefix(&crate::paths::owned_prefix("kvm-probe"))
        .tempdir_in(crate::paths::scratch_root(settings))
    else {
        return false;
    };
    let console = dir.path().join("console.log");
    let mut cmd = tokio::process::Command::new("qemu-system-x86_64");
    cmd.args([
        "-accel",
        "kvm",
        "-cpu",
        "host",
        "-m",
        "256",
        "-nodefaults",
        "-display",
        "none",
        "-no-reboot",
    ])
    .arg("-serial")
    .arg(format!("file:{}", console.display()))
    .args(boot);
    if let Some((code, vars)) = firmware {
        let copy = dir.path().join("vars.fd");
        if std::fs::copy(vars, &copy).is_err() {
            return false;
        }
        cmd.arg("-drive")
            .arg(format!(
                "if=pflash,format=raw,unit=0,readonly=on,file={}",
                code.display()
            ))
            .arg("-drive")
            .arg(format!("if=pflash,format=raw,unit=1,file={}", copy.display()));
    }
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    crate::process::mark(&mut cmd);
    let Ok(mut child) = cmd.spawn() else { return false };
    let t0 = std::time::Instant::now();
    let mut booted = false;
    while t0.elapsed() < KVM_PROBE {
        let text = std::fs::read_to_string(&console).unwrap_or_default();
        if markers.iter().any(|m| text.contains(m)) {
            booted = true;
            break;
        }
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let _ = child.kill().await;
    booted
}

/// An instance-store disk: an empty qcow2 in the node's work directory, attached with EC2's model and serial.
#[derive(Debug, Clone)]
pub struct StoreDisk {
    pub path: std::path::PathBuf,
    pub serial: String,
}

/// Ports of the one AHCI controller the instance-store disks sit on.
pub const MAX_STORE_DISKS: usize = 6;

/// How a machine starts.
#[derive(Clone, Copy)]
pub enum Start<'a> {
    /// nodejoin's kernel and initramfs (with the harness's files), the root the whole disk.
    Kernel { kernel: &'a Kernel, initrd: &'a Path },
    /// UEFI firmware (OVMF), which runs the disk's own bootloader, as an instance's firmware does; `vars` is this
    /// machine's copy of the firmware's variable store.
    Firmware { code: &'a Path, vars: &'a Path },
    /// A PC BIOS (SeaBIOS, QEMU's own), which runs the boot code in the disk's MBR, as a `legacy-bios` instance's
    /// does; `sercon` tells it to print on the serial console ([`super::firmware::sercon_file`]).
    Bios { sercon: &'a Path },
}

/// The bus a disk of the user's is attached on: as the hardware it was made for presents its root volume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RootBus {
    /// virtio-blk: what a Packer qemu build and a KVM image are made for.
    #[default]
    Virtio,
    /// NVMe, as an EBS root volume on a Nitro instance (what an AMI is made for: its initramfs may hold no virtio
    /// driver). The serial is an EBS volume's; QEMU's controller reports its own model, not EBS's.
    Nvme,
}

impl RootBus {
    pub fn name(self) -> &'static str {
        match self {
            RootBus::Virtio => "virtio",
            RootBus::Nvme => "NVMe",
        }
    }
}

/// What a VM is started with.
pub struct Machine<'a> {
    pub start: Start<'a>,
    pub accel: Accel,
    pub vcpus: u32,
    pub memory_mib: u32,
    pub disk: &'a Path,
    /// The bus the disk is on (`Nvme` with the EBS serial given).
    pub root_bus: RootBus,
    pub tap: &'a str,
    pub mac: &'a str,
    pub agent_socket: &'a Path,
    /// QEMU's machine protocol, for the power button (`super::qmp`).
    pub qmp_socket: &'a Path,
    pub console: &'a Path,
    pub instance_id: &'a str,
    pub instance_type: &'a str,
    pub instance_store: &'a [StoreDisk],
}

/// `p` as a value inside a QEMU option string (`file=…,…`), where a comma would start another option: refused.
pub(super) fn opt_path(p: &Path) -> Result<String> {
    let s = p.display().to_string();
    if s.contains(',') {
        return Err(Error::Vm(format!(
            "{s}: a path with a comma cannot be given to QEMU (NODEJOIN_CACHE_DIR, which holds the VM disks and scratch folders, must have none)"
        )));
    }
    Ok(s)
}

/// QEMU's arguments for `m`. Values from the scenario (the instance type) reach QEMU only as SMBIOS strings,
/// refused when they hold a comma (QEMU's option separator).
pub fn args(m: &Machine<'_>) -> Result<Vec<String>> {
    if m.instance_type.contains(',') || m.instance_id.contains(',') {
        return Err(Error::Vm(format!(
            "instance type {:?} cannot be an SMBIOS string",
            m.instance_type
        )));
    }
    let dmi = crate::node::dmi::ec2_identity(m.instance_id, m.instance_type);
    let get = |k: &str| {
        dmi.iter()
            .find(|(f, _)| *f == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let uuid = get("product_uuid");
    let mut a: Vec<String> = vec![
        "-name".into(),
        format!("{},process=nodejoin-vm", m.instance_id),
        "-accel".into(),
        m.accel.name().into(),
        "-cpu".into(),
        if m.accel == Accel::Kvm { "host" } else { "max" }.into(),
        "-smp".into(),
        m.vcpus.to_string(),
        "-m".into(),
        m.memory_mib.to_string(),
        "-nodefaults".into(),
        "-no-user-config".into(),
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        // Appended to, so the harness may cut the file while QEMU writes it (`super::console`).
        "-chardev".into(),
        format!("file,id=con0,path={},append=on", opt_path(m.console)?),
        "-serial".into(),
        "chardev:con0".into(),
    ];
    match m.start {
        Start::Kernel { kernel, initrd } => a.extend([
            "-kernel".into(),
            kernel.vmlinuz.display().to_string(),
            "-initrd".into(),
            initrd.display().to_string(),
            "-append".into(),
            "console=ttyS0 root=/dev/vda rw net.ifnames=0 panic=-1".into(),
        ]),
        // The firmware boots the disk and nothing else, as an instance's does: no network boot (OVMF tries PXE
        // and HTTP boot for minutes when the disk has no loader). With nothing to boot it starts its shell,
        // which the console shows (`super::console::decided_failure`).
        Start::Firmware { code, vars } => a.extend([
            "-drive".into(),
            format!("if=pflash,format=raw,unit=0,readonly=on,file={}", opt_path(code)?),
            "-drive".into(),
            format!("if=pflash,format=raw,unit=1,file={}", opt_path(vars)?),
            "-boot".into(),
            "strict=on".into(),
        ]),
        Start::Bios { sercon } => a.extend([
            "-fw_cfg".into(),
            format!("name=etc/sercon-port,file={}", opt_path(sercon)?),
            "-boot".into(),
            "strict=on".into(),
        ]),
    }
    a.extend([
        "-drive".into(),
        format!("file={},if=none,id=root,format=qcow2,cache=unsafe", opt_path(m.disk)?),
        "-device".into(),
        match (m.start, m.root_bus) {
            // A kernel QEMU starts itself holds boot index 0 (QEMU refuses a second).
            (Start::Kernel { .. }, RootBus::Virtio) => "virtio-blk-pci,drive=root".into(),
            (_, RootBus::Virtio) => "virtio-blk-pci,drive=root,bootindex=0".into(),
            // Its serial is an EBS volume's: `vol` and 17 hex digits, the volume id without its dash.
            (_, RootBus::Nvme) => format!(
                "nvme,drive=root,serial={},bootindex=0",
                crate::eks::instance_store::ebs_serial(m.instance_id)
            ),
        },
        "-netdev".into(),
        format!("tap,id=n0,ifname={},script=no,downscript=no", m.tap),
        "-device".into(),
        format!("virtio-net-pci,netdev=n0,mac={},romfile=", m.mac),
        "-device".into(),
        "virtio-serial-pci".into(),
        "-chardev".into(),
        format!("socket,id=qga0,path={},server=on,wait=off", opt_path(m.agent_socket)?),
        "-device".into(),
        "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0".into(),
        "-qmp".into(),
        format!("unix:{},server=on,wait=off", opt_path(m.qmp_socket)?),
        "-object".into(),
        "rng-random,filename=/dev/urandom,id=rng0".into(),
        "-device".into(),
        "virtio-rng-pci,rng=rng0".into(),
    ]);
    // Instance store. QEMU's NVMe controller reports the model "QEMU NVMe Ctrl" whatever it is given, and the
    // AMI finds instance store by EC2's model (udev's /dev/disk/by-id/*NVMe_Instance_Storage_*). An ATA disk carries
    // any model of up to 40 characters, which udev names `ata-<model>_<serial>`: EC2's model and serial, on
    // another bus.
    if m.instance_store.len() > MAX_STORE_DISKS {
        return Err(Error::Vm(format!(
            "{} has {} instance-store disks; a VM node carries at most {MAX_STORE_DISKS}",
            m.instance_type,
            m.instance_store.len()
        )));
    }
    if !m.instance_store.is_empty() {
        a.extend(["-device".into(), "ahci,id=store".into()]);
    }
    for (i, d) in m.instance_store.iter().enumerate() {
        if d.serial.contains(',') || d.serial.len() > 20 {
            return Err(Error::Vm(format!(
                "instance-store serial {:?} is not an ATA serial",
                d.serial
            )));
        }
        a.extend([
            "-drive".into(),
            format!(
                "if=none,id=store{i},file={},format=qcow2,cache=unsafe",
                opt_path(&d.path)?
            ),
            "-device".into(),
            format!(
                "ide-hd,drive=store{i},bus=store.{i},model={},serial={}",
                crate::eks::instance_store::MODEL,
                d.serial
            ),
        ]);
    }
    // EC2's SMBIOS: vendor "Amazon EC2" everywhere, the instance type as product, the "ec2..." UUID (also the
    // serial), the instance id as the board's asset tag.
    for table in [
        format!("type=0,vendor={}", get("bios_vendor")),
        format!(
            "type=1,manufacturer={},product={},serial={uuid},uuid={uuid}",
            get("sys_vendor"),
            get("product_name")
        ),
        format!(
            "type=2,manufacturer={},asset={}",
            get("board_vendor"),
            get("board_asset_tag")
        ),
        format!(
            "type=3,manufacturer={},asset={}",
            get("chassis_vendor"),
            get("chassis_asset_tag")
        ),
    ] {
        a.push("-smbios".into());
        a.push(table);
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn a_disk_of_your_own_runs_under_tcg_once_a_probe_saw_kvm_fail_here() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(by_verdicts(dir.path()), Accel::Kvm, "no probe yet");
        std::fs::write(dir.path().join("kvm-6.1.0-1-amd64"), "boots\n").unwrap();
        std::fs::write(dir.path().join("disk-x.img"), "fails\n").unwrap();
        assert_eq!(by_verdicts(dir.path()), Accel::Kvm);
        std::fs::write(dir.path().join("kvm-6.1.0-2-amd64"), "fails\n").unwrap();
        assert_eq!(by_verdicts(dir.path()), Accel::Tcg);
    }

    #[test]
    fn every_known_instance_store_fits_the_controller() {
        assert!(crate::eks::instance_store::most_disks() as usize <= MAX_STORE_DISKS);
    }

    #[test]
    fn the_machine_is_an_ec2_instance_by_smbios_and_mac() {
        let kernel = Kernel {
            version: "6.1.0-56-amd64".into(),
            vmlinuz: PathBuf::from("/k/vmlinuz"),
            initramfs: PathBuf::from("/k/initramfs.cpio"),
        };
        let p = PathBuf::from("/w/x");
        let m = Machine {
            start: Start::Kernel {
                kernel: &kernel,
                initrd: &p,
            },
            accel: Accel::Tcg,
            vcpus: 2,
            memory_mib: 2048,
            disk: &p,
            root_bus: RootBus::Virtio,
            tap: "nj0",
            mac: "02:00:00:00:00:01",
            agent_socket: &p,
            qmp_socket: &p,
            console: &p,
            instance_id: "i-0123456789abcdef0",
            instance_type: "m5.large",
            instance_store: &[],
        };
        let a = args(&m).unwrap().join(" ");
        assert!(
            a.contains("-smbios type=1,manufacturer=Amazon EC2,product=m5.large,serial=EC2"),
            "{a}"
        );
        assert!(
            a.contains("-smbios type=2,manufacturer=Amazon EC2,asset=i-0123456789abcdef0"),
            "{a}"
        );
        assert!(a.contains("virtio-net-pci,netdev=n0,mac=02:00:00:00:00:01"), "{a}");
        assert!(a.contains("-accel tcg -cpu max"), "{a}");
        assert!(
            a.contains("-kernel /k/vmlinuz -initrd /w/x") && !a.contains("pflash"),
            "{a}"
        );
        let (code, vars) = (PathBuf::from("/f/code.fd"), PathBuf::from("/w/vars.fd"));
        let firmware = args(&Machine {
            start: Start::Firmware {
                code: &code,
                vars: &vars,
            },
            ..m
        })
        .unwrap()
        .join(" ");
        assert!(
            firmware.contains("if=pflash,format=raw,unit=0,readonly=on,file=/f/code.fd")
                && firmware.contains("if=pflash,format=raw,unit=1,file=/w/vars.fd")
                && !firmware.contains("-kernel")
                && !firmware.contains("-append"),
            "the firmware boots the disk's own loader: {firmware}"
        );
        let sercon = PathBuf::from("/c/sercon");
        let bios = args(&Machine {
            start: Start::Bios { sercon: &sercon },
            ..m
        })
        .unwrap()
        .join(" ");
        assert!(
            bios.contains("-fw_cfg name=etc/sercon-port,file=/c/sercon -boot strict=on")
                && bios.contains("virtio-blk-pci,drive=root,bootindex=0")
                && !bios.contains("pflash")
                && !bios.contains("-kernel"),
            "SeaBIOS boots the disk's MBR and prints on the serial console: {bios}"
        );
        let nvme = args(&Machine {
            start: Start::Bios { sercon: &sercon },
            root_bus: RootBus::Nvme,
            ..m
        })
        .unwrap()
        .join(" ");
        assert!(
            nvme.contains(&format!(
                "-device nvme,drive=root,serial={},bootindex=0",
                crate::eks::instance_store::ebs_serial("i-0123456789abcdef0")
            )) && !nvme.contains("virtio-blk"),
            "an AMI's root is an EBS volume on NVMe: {nvme}"
        );
        assert!(!a.contains("ahci"), "no instance store, no controller: {a}");
        let store = [StoreDisk {
            path: PathBuf::from("/w/store-0.qcow2"),
            serial: "AWS0123456789ABCDEF0".into(),
        }];
        let with_store = args(&Machine {
            instance_store: &store,
            ..m
        })
        .unwrap()
        .join(" ");
        assert!(
            with_store.contains(
                "ide-hd,drive=store0,bus=store.0,model=Amazon EC2 NVMe Instance Storage,serial=AWS0123456789ABCDEF0"
            ),
            "{with_store}"
        );
        let bad = Machine {
            instance_type: "m5.large,x=y",
            ..m
        };
        assert!(args(&bad).is_err());
        let comma = PathBuf::from("/w/a,b/disk.qcow2");
        assert!(
            args(&Machine { disk: &comma, ..m }).is_err(),
            "a comma would start another QEMU option"
        );
    }
}
