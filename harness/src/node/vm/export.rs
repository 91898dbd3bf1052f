//! `nodejoin image export-disk`: a disk shaped as an exported image is (what `aws ec2 export-image` writes of an
//! AMI, what a Packer qemu build leaves): a GPT disk with an EFI system partition holding the kernel, its initramfs
//! and two bootloaders, and the root file system, made from nodejoin's disk of a node image. It boots under UEFI
//! (systemd-boot, Debian's `systemd-boot-efi`) and under a PC BIOS (syslinux: its GPT boot code in the MBR, its
//! loader on the same partition, marked legacy-BIOS bootable), as AL2023's `uefi-preferred` AMIs do. It is what the own-disk path (`disk:` of a VM group) is tested with here, and
//! a start for a user who wants one. A CA certificate given is added to the root's trust anchors, as a user's
//! image build adds the CA it will be tested under (`NODEJOIN_ENDPOINTS_CA`).
//!
//! Every step works on files (no loop device, no mount): `debugfs` writes into the ext4 image, `mkfs.vfat` and
//! mtools make the ESP, `sfdisk` the partition table; the partitions are placed by their data extents.
use super::kernel::Kernel;
use crate::error::{Error, Result};
use std::path::Path;

/// Where a machine finds the CA of AWS's endpoints as the run serves them: the seed puts it there on nodejoin's
/// disks, export-disk into an exported one (Go's TLS reads every file of /etc/ssl/certs).
pub const TRUST_ANCHOR: &str = "/etc/ssl/certs/nodejoin-aws-endpoints.pem";

/// The EFI system partition's size (the kernel and initramfs take about 13 MiB).
const ESP_MIB: u64 = 64;

/// systemd-boot's EFI program, from Debian's `systemd-boot-efi`.
pub const SYSTEMD_BOOT: &str = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi";

/// syslinux's boot code for a GPT disk's MBR (it starts the partition marked legacy-BIOS bootable), from Debian's
/// `syslinux`, with its installer (mtools-based: it writes into a FAT image file).
pub const GPT_MBR: &str = "/usr/lib/SYSLINUX/gptmbr.bin";

/// The kernel's command line, the same under both loaders: the root is found by its file system's label (as the
/// node image's fstab names it), on whichever bus the disk is attached (virtio, NVMe).
const CMDLINE: &str = "console=ttyS0 root=LABEL=nodejoin-root rw net.ifnames=0 panic=-1";

/// GPT partition types: the EFI system partition, a Linux file system.
const ESP_TYPE: &str = "C12A7328-F81F-11D2-BA4B-00A0C93EC93B";
const LINUX_TYPE: &str = "0FC63DAF-8483-4772-8E79-3D69D8477DE4";

fn export_err(m: impl Into<String>) -> Error {
    Error::Vm(format!("export-disk: {}", m.into()))
}

async fn run(program: &str, args: &[&str], what: &str) -> Result<()> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args);
    crate::process::mark(&mut cmd);
    let out = crate::deadline::output(&mut cmd, what, crate::deadline::IMAGE_BUILD).await?;
    if !out.status.success() {
        return Err(export_err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

fn p(path: &Path) -> Result<&str> {
    path.to_str()
        .ok_or_else(|| export_err(format!("{}: not a UTF-8 path", path.display())))
}

/// Writes `part` into `disk` at byte `at`, only its data: its holes stay holes, and are never read (an 8 GiB
/// root holds about 1 GiB of data; `dd conv=sparse` reads all of it as zeros, 22 s here).
fn place(part: &Path, disk: &Path, at: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;
    let src = std::fs::File::open(part).map_err(|e| Error::io(part, e))?;
    let dst = std::fs::OpenOptions::new()
        .write(true)
        .open(disk)
        .map_err(|e| Error::io(disk, e))?;
    let len = src.metadata().map_err(|e| Error::io(part, e))?.len();
    let seek = |from: u64, whence| {
        let off = libc::off_t::try_from(from).unwrap_or(libc::off_t::MAX);
        // SAFETY: lseek on a file descriptor this function owns; it only moves that descriptor's offset.
        let r = unsafe { libc::lseek(src.as_raw_fd(), off, whence) };
        u64::try_from(r).ok()
    };
    let mut buf = vec![0u8; 1 << 20];
    let mut pos = 0;
    // Each data extent: from SEEK_DATA to the SEEK_HOLE after it (the file's end past its last extent).
    while pos < len {
        let Some(start) = seek(pos, libc::SEEK_DATA) else { break };
        let end = seek(start, libc::SEEK_HOLE).unwrap_or(len).min(len);
        let mut off = start;
        while off < end {
            let n = usize::try_from((end - off).min(buf.len() as u64)).unwrap_or(buf.len());
            src.read_exact_at(&mut buf[..n], off).map_err(|e| Error::io(part, e))?;
            dst.write_all_at(&buf[..n], at + off).map_err(|e| Error::io(disk, e))?;
            off += n as u64;
        }
        pos = end;
    }
    Ok(())
}

/// Writes the disk to `to` in `format` (`raw` or `qcow2`) from nodejoin's `disk` (an ext4 root) and its
/// `kernel`, with `trust` (a CA certificate, PEM) among the root's trust anchors.
pub async fn write(disk: &Path, kernel: &Kernel, trust: Option<&str>, to: &Path, format: &str) -> Result<()> {
    for (file, package) in [(SYSTEMD_BOOT, "systemd-boot-efi"), (GPT_MBR, "syslinux")] {
        if !Path::new(file).is_file() {
            return Err(export_err(format!("{file} is missing (the Debian package {package})")));
        }
    }
    let parent = to
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    let work = tempfile::Builder::new()
        .prefix(&crate::paths::owned_prefix("export"))
        .tempdir_in(parent)
        .map_err(|e| Error::io(parent, e))?;
    let w = work.path();
    let steps = crate::progress::Steps::new(&format!("export-disk {}", to.display()), 4);
    steps.step(1, "the root file system (a sparse copy, the trust anchor by debugfs)");
    let root = w.join("root.img");
    run("cp", &["--sparse=always", p(disk)?, p(&root)?], "cp --sparse=always").await?;
    if let Some(pem) = trust {
        let ca = w.join("ca.pem");
        std::fs::write(&ca, pem).map_err(|e| Error::io(&ca, e))?;
        let (dir, name) = TRUST_ANCHOR.rsplit_once('/').unwrap_or(("/", TRUST_ANCHOR));
        let script = format!(
            "cd {dir}\nrm {name}\nwrite {} {name}\nsif {name} mode 0100644\nsif {name} uid 0\nsif {name} gid 0\n",
            p(&ca)?
        );
        let cmds = w.join("debugfs.cmds");
        std::fs::write(&cmds, script).map_err(|e| Error::io(&cmds, e))?;
        run("debugfs", &["-w", "-f", p(&cmds)?, p(&root)?], "debugfs -w").await?;
        // debugfs goes on past a command that failed: the file is read back.
        let mut cat = tokio::process::Command::new("debugfs");
        cat.args(["-R", &format!("cat {TRUST_ANCHOR}"), p(&root)?]);
        crate::process::mark(&mut cat);
        let out = crate::deadline::output(&mut cat, "debugfs cat", crate::deadline::TOOL_PROBE).await?;
        if out.stdout != pem.as_bytes() {
            return Err(export_err(format!(
                "the root did not take {TRUST_ANCHOR} (does the image have /etc/ssl/certs?): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    steps.step(
        2,
        "the EFI system partition (systemd-boot, syslinux, the kernel, its initramfs)",
    );
    let esp = w.join("esp.img");
    // Its hidden sectors are where it starts (1 MiB): syslinux's boot sector reads its loader from there.
    run(
        "mkfs.vfat",
        &[
            "-C",
            "-F",
            "32",
            "-h",
            &ESP_START_SECTOR.to_string(),
            "-n",
            "ESP",
            p(&esp)?,
            &(ESP_MIB * 1024).to_string(),
        ],
        "mkfs.vfat",
    )
    .await?;
    run("syslinux", &["--install", p(&esp)?], "syslinux --install").await?;
    let syslinux_cfg = w.join("syslinux.cfg");
    std::fs::write(
        &syslinux_cfg,
        format!(
            "SERIAL 0 115200\nDEFAULT nodejoin\nPROMPT 0\nTIMEOUT 0\nLABEL nodejoin\n  LINUX /vmlinuz\n  INITRD \
             /initramfs.cpio\n  APPEND {CMDLINE}\n"
        ),
    )
    .map_err(|e| Error::io(&syslinux_cfg, e))?;
    let loader = w.join("loader.conf");
    std::fs::write(&loader, "default nodejoin.conf\ntimeout 0\nconsole-mode keep\n")
        .map_err(|e| Error::io(&loader, e))?;
    let entry = w.join("nodejoin.conf");
    std::fs::write(
        &entry,
        format!(
            "title nodejoin node image (kernel {})\nlinux /vmlinuz\ninitrd /initramfs.cpio\noptions {CMDLINE}\n",
            kernel.version
        ),
    )
    .map_err(|e| Error::io(&entry, e))?;
    let esp_s = p(&esp)?;
    run(
        "mmd",
        &["-i", esp_s, "::/EFI", "::/EFI/BOOT", "::/loader", "::/loader/entries"],
        "mmd",
    )
    .await?;
    for (from, into) in [
        (Path::new(SYSTEMD_BOOT), "::/EFI/BOOT/BOOTX64.EFI"),
        (kernel.vmlinuz.as_path(), "::/vmlinuz"),
        (kernel.initramfs.as_path(), "::/initramfs.cpio"),
        (loader.as_path(), "::/loader/loader.conf"),
        (entry.as_path(), "::/loader/entries/nodejoin.conf"),
        (syslinux_cfg.as_path(), "::/syslinux.cfg"),
    ] {
        run("mcopy", &["-i", esp_s, p(from)?, into], "mcopy").await?;
    }
    steps.step(3, "the partition table and the partitions");
    let root_len = std::fs::metadata(&root).map_err(|e| Error::io(&root, e))?.len();
    let mib = 1u64 << 20;
    let root_mib = root_len.div_ceil(mib);
    // 1 MiB for the table, the ESP, the root, 1 MiB for the backup table.
    let total = (1 + ESP_MIB + root_mib + 1) * mib;
    let raw = w.join("disk.raw");
    let f = std::fs::File::create(&raw).map_err(|e| Error::io(&raw, e))?;
    f.set_len(total).map_err(|e| Error::io(&raw, e))?;
    drop(f);
    let sectors = |m: u64| m * mib / 512;
    let table = w.join("table.sfdisk");
    std::fs::write(
        &table,
        format!(
            "label: gpt\nstart={}, size={}, type={ESP_TYPE}, name=\"EFI System Partition\", \
             attrs=\"LegacyBIOSBootable\"\nstart={}, size={}, type={LINUX_TYPE}, name=\"root\"\n",
            ESP_START_SECTOR,
            sectors(ESP_MIB),
            sectors(1 + ESP_MIB),
            sectors(root_mib)
        ),
    )
    .map_err(|e| Error::io(&table, e))?;
    let mut sfdisk = tokio::process::Command::new("sfdisk");
    sfdisk.args(["--quiet", "--no-reread", "--no-tell-kernel"]).arg(&raw);
    sfdisk.stdin(std::fs::File::open(&table).map_err(|e| Error::io(&table, e))?);
    crate::process::mark(&mut sfdisk);
    let out = crate::deadline::output(&mut sfdisk, "sfdisk", crate::deadline::TOOL_PROBE).await?;
    if !out.status.success() {
        return Err(export_err(format!(
            "sfdisk failed: {} (the Debian package fdisk)",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    for (part, at_mib) in [(esp.clone(), 1), (root.clone(), 1 + ESP_MIB)] {
        let to = raw.clone();
        crate::node::inputs::off_runtime(move || place(&part, &to, at_mib * mib)).await?;
    }
    let code = std::fs::read(GPT_MBR).map_err(|e| Error::io(GPT_MBR, e))?;
    write_boot_code(&raw, &code)?;
    steps.step(4, &format!("written as {format}"));
    let partial = to.with_extension("partial");
    match format {
        "raw" => std::fs::rename(&raw, &partial).map_err(|e| Error::io(&partial, e))?,
        _ => {
            run(
                "qemu-img",
                &["convert", "-q", "-f", "raw", "-O", format, p(&raw)?, p(&partial)?],
                "qemu-img convert",
            )
            .await?
        }
    }
    std::fs::rename(&partial, to).map_err(|e| Error::io(to, e))?;
    steps.finish(&format!("{} ({format}, {} MiB)", to.display(), total / mib));
    Ok(())
}

/// Where the EFI system partition starts (1 MiB, in 512-byte sectors).
const ESP_START_SECTOR: u64 = 2048;

/// Writes `code` (syslinux's [`GPT_MBR`]) as the MBR's boot code: its first 440 bytes, which the disk signature
/// and the protective MBR's partition entry that sfdisk wrote follow.
fn write_boot_code(disk: &Path, code: &[u8]) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let code = code.get(..BOOT_CODE).ok_or_else(|| {
        export_err(format!(
            "{GPT_MBR}: shorter than an MBR's {BOOT_CODE} bytes of boot code"
        ))
    })?;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(disk)
        .map_err(|e| Error::io(disk, e))?;
    f.write_all_at(code, 0).map_err(|e| Error::io(disk, e))
}

/// The boot code's share of an MBR.
const BOOT_CODE: usize = 440;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    #[test]
    fn the_boot_code_leaves_the_protective_mbr_as_sfdisk_wrote_it() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("disk.raw");
        let mut mbr = vec![0u8; 1024];
        mbr[446] = 0xee; // the protective partition's entry
        mbr[510..512].copy_from_slice(&[0x55, 0xaa]);
        std::fs::write(&disk, &mbr).unwrap();
        assert!(
            write_boot_code(&disk, &[0xfa; 100]).is_err(),
            "too short for an MBR's boot code"
        );
        write_boot_code(&disk, &[0xfa; 440]).unwrap();
        let after = std::fs::read(&disk).unwrap();
        assert!(after[..440].iter().all(|b| *b == 0xfa));
        assert_eq!(after[446], 0xee);
        assert_eq!(&after[510..512], &[0x55, 0xaa]);
        assert_eq!(after.len(), 1024);
    }

    #[test]
    fn a_partition_lands_at_its_offset_with_its_data_and_holes() {
        let dir = tempfile::tempdir().unwrap();
        let part = dir.path().join("part.img");
        let f = std::fs::File::create(&part).unwrap();
        f.set_len(64 << 20).unwrap();
        f.write_all_at(b"superblock", 1024).unwrap();
        f.write_all_at(b"inode table", 40 << 20).unwrap();
        f.write_all_at(b"end", (64 << 20) - 3).unwrap();
        drop(f);
        let disk = dir.path().join("disk.raw");
        let d = std::fs::File::create(&disk).unwrap();
        d.set_len(70 << 20).unwrap();
        d.write_all_at(b"GPT", 512).unwrap();
        drop(d);
        place(&part, &disk, 1 << 20).unwrap();
        let whole = std::fs::read(&disk).unwrap();
        let at = |off: usize, len: usize| &whole[off..off + len];
        assert_eq!(at(512, 3), b"GPT", "what was before the partition stays");
        assert_eq!(at((1 << 20) + 1024, 10), b"superblock");
        assert_eq!(at((1 << 20) + (40 << 20), 11), b"inode table");
        assert_eq!(at((1 << 20) + (64 << 20) - 3, 3), b"end");
        assert!(at((1 << 20) + (20 << 20), 4096).iter().all(|b| *b == 0));
        assert_eq!(whole.len(), 70 << 20);
    }
}
