//! The kernel a VM node boots: Debian's stock kernel, which the disk's own build fetches with apt inside a
//! container of the node image (`fixtures/vm-disk/.../vm-kernel.sh`: the package `linux-image-amd64` depends on
//! that day), so the host's distribution plays no part. The harness takes it out of the unpacked disk with a small
//! initramfs: the modules that reach the root disk, a static busybox, and `fixtures/vm-disk/init`, which hands
//! over to the disk's systemd; a node's own files are appended to it as a second archive.
use crate::error::{Error, Result};
use crate::settings::Settings;
use std::path::{Path, PathBuf};

/// The modules the initramfs loads (with their dependencies) to mount an ext4 root on a virtio or NVMe disk (an
/// exported disk booted on `disk.bus: nvme`, as an AMI's root is on Nitro), and, as a reader of a stopped
/// machine's disk (`super::reader`), an XFS root as AL2023's AMIs have.
pub(crate) const INITRAMFS_MODULES: &[&str] = &["virtio_pci", "virtio_blk", "nvme", "ext4", "xfs"];

/// A kernel ready to boot: its image and the base initramfs.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// `6.1.0-56-amd64`.
    pub version: String,
    pub vmlinuz: PathBuf,
    pub initramfs: PathBuf,
}

fn vm_err(m: impl Into<String>) -> Error {
    Error::Vm(m.into())
}

/// The directory of VM assets in the cache.
pub fn cache(settings: &Settings) -> PathBuf {
    crate::paths::cache_dir(settings).join("vm")
}

/// The first 12 hex digits of the SHA-256 of `parts`, each length-prefixed: a cache key.
pub(crate) fn short_hash(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())[..12].to_string()
}

/// Where the disk's build leaves what the harness needs of its kernel (`fixtures/vm-disk/.../vm-kernel.sh`).
const IN_DISK: &str = "usr/local/lib/nodejoin/vm-kernel";

/// What the harness reads of a disk at most: in all (a kernel image is about 8 MiB, busybox 2, the modules a few),
/// for one of the build's lists, and in modules (about 10): the disk comes from a node image a scenario may have
/// overlaid.
const MAX_READ: u64 = 128 << 20;
const MAX_LIST: u64 = 64 << 10;
const MAX_INITRAMFS_MODULES: usize = 64;

impl Kernel {
    /// The kernel kept in `boot` (a disk's `.boot` directory) by [`Kernel::from_root`], if complete.
    pub fn cached(boot: &Path) -> Option<Kernel> {
        if !boot.join(".complete").exists() {
            return None;
        }
        let version = std::fs::read_to_string(boot.join("version")).ok()?.trim().to_string();
        Some(Kernel {
            vmlinuz: boot.join("vmlinuz"),
            initramfs: boot.join("initramfs.cpio"),
            version,
        })
    }

    /// Takes the kernel out of an unpacked disk root (`root`) into `boot` ([`Kernel::cached`] reads it back): its image, and an initramfs of
    /// `fixtures/vm-disk/init`, the disk's static busybox and the modules the build listed, in load order.
    /// Everything is read as data from inside `root` (the paths the build wrote are resolved within it).
    pub fn from_root(settings: &Settings, root: &Path, boot: &Path) -> Result<()> {
        let mut budget = MAX_READ;
        let list = |name: &str| read_within(root, &format!("{IN_DISK}/{name}"), MAX_LIST);
        let version = String::from_utf8_lossy(&list("version")?).trim().to_string();
        if version.is_empty()
            || !version
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
        {
            return Err(vm_err(format!("the disk names its kernel {version:?}")));
        }
        let init_path = crate::paths::fixtures_dir(settings).join("vm-disk").join("init");
        let init = std::fs::read(&init_path).map_err(|e| Error::io(&init_path, e))?;
        let modules = insmod_order(&String::from_utf8_lossy(&list("modules")?), Path::new("/"));
        if modules.len() > MAX_INITRAMFS_MODULES {
            return Err(vm_err(format!(
                "the disk lists {} modules for its initramfs (at most {MAX_INITRAMFS_MODULES})",
                modules.len()
            )));
        }
        let mut files: Vec<(String, Vec<u8>, u32)> = vec![
            ("init".into(), init, 0o755),
            (
                "bin/busybox".into(),
                read_budgeted(root, &format!("{IN_DISK}/busybox"), &mut budget)?,
                0o755,
            ),
            // One a line, each ending in a newline (`read` drops a last line without one).
            (
                "modules.order".into(),
                modules
                    .iter()
                    .map(|m| format!("{m}\n"))
                    .collect::<String>()
                    .into_bytes(),
                0o644,
            ),
        ];
        for m in &modules {
            let rel = m.trim_start_matches('/');
            let bytes = read_budgeted(root, rel, &mut budget)?;
            files.push((rel.to_string(), bytes, 0o644));
        }
        let cpio = super::cpio::archive(&files, &["proc", "sys", "dev", "new"]).map_err(|e| Error::io(boot, e))?;
        std::fs::create_dir_all(boot).map_err(|e| Error::io(boot, e))?;
        let vmlinuz = read_budgeted(root, &format!("boot/vmlinuz-{version}"), &mut budget)?;
        for (name, bytes) in [
            ("vmlinuz", vmlinuz),
            ("initramfs.cpio", cpio),
            ("version", format!("{version}\n").into_bytes()),
            (".complete", Vec::new()),
        ] {
            std::fs::write(boot.join(name), bytes).map_err(|e| Error::io(boot.join(name), e))?;
        }
        Ok(())
    }
}

/// [`read_within`] with what is left of `budget`, which it then lowers by what it read.
fn read_budgeted(root: &Path, rel: &str, budget: &mut u64) -> Result<Vec<u8>> {
    let bytes = read_within(root, rel, *budget)?;
    *budget = budget.saturating_sub(bytes.len() as u64);
    Ok(bytes)
}

/// Reads `rel` inside the unpacked disk `root`, following its links as the machine would (an absolute link
/// target is taken from `root`, never from the host), and refusing any that lead out of it, anything but a
/// regular file, and a file over `max` bytes.
fn read_within(root: &Path, rel: &str, max: u64) -> Result<Vec<u8>> {
    let mut at = root.to_path_buf();
    let mut todo: Vec<std::ffi::OsString> = Path::new(rel)
        .components()
        .rev()
        .map(|c| c.as_os_str().to_os_string())
        .collect();
    let mut hops = 0;
    while let Some(part) = todo.pop() {
        if part == "/" || part == "." {
            continue;
        }
        if part == ".." {
            if at != root {
                at.pop();
            }
            continue;
        }
        let next = at.join(&part);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() => {
                hops += 1;
                let target = std::fs::read_link(&next).map_err(|e| Error::io(&next, e))?;
                if hops > 40 {
                    return Err(vm_err(format!("{rel}: too many links in the disk")));
                }
                if target.is_absolute() {
                    at = root.to_path_buf();
                }
                todo.extend(target.components().rev().map(|c| c.as_os_str().to_os_string()));
            }
            Ok(_) => at = next,
            Err(e) => return Err(Error::io(&next, e)),
        }
    }
    if !at.starts_with(root) {
        return Err(vm_err(format!("{rel} leads out of the disk")));
    }
    // A regular file only (a FIFO or device node made by the image would block or reach the host's devices), and
    // no more than `max`: the project's reader of files an untrusted repository names.
    let file = crate::untrusted::open_regular(&at).map_err(|e| vm_err(format!("{rel} in the disk: {e}")))?;
    crate::untrusted::read_capped(file, max).map_err(|e| vm_err(format!("{rel} in the disk: {e}")))
}

/// The modules `modprobe --show-depends` would insert, in order, once each, as paths inside the root it was
/// given (`/lib/modules/...`).
fn insmod_order(show_depends: &str, root: &Path) -> Vec<String> {
    let mut order: Vec<String> = Vec::new();
    for line in show_depends.lines() {
        let mut words = line.split_whitespace();
        if words.next() != Some("insmod") {
            continue;
        }
        let Some(path) = words.next() else { continue };
        let rel = Path::new(path)
            .strip_prefix(root)
            .map(|p| format!("/{}", p.display()))
            .unwrap_or_else(|_| path.to_string());
        if !order.contains(&rel) {
            order.push(rel);
            // More than the initramfs takes: the caller refuses the list, so the rest need not be read.
            if order.len() > MAX_INITRAMFS_MODULES {
                break;
            }
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_the_disk_is_read_inside_it_whatever_its_links_say() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("usr/lib/modules/6.1")).unwrap();
        std::fs::write(root.join("usr/lib/modules/6.1/ext4.ko"), b"module").unwrap();
        std::os::unix::fs::symlink("usr/lib", root.join("lib")).unwrap();
        // An absolute link is the disk's own path, as the machine reads it.
        std::fs::create_dir_all(root.join("boot")).unwrap();
        std::os::unix::fs::symlink("/usr/lib/modules/6.1/ext4.ko", root.join("boot/vmlinuz-6.1")).unwrap();
        assert_eq!(read_within(&root, "lib/modules/6.1/ext4.ko", 1024).unwrap(), b"module");
        assert_eq!(read_within(&root, "/boot/vmlinuz-6.1", 1024).unwrap(), b"module");
        // Outside the root: a host file by an absolute link, or by climbing above the top.
        std::fs::write(dir.path().join("host-secret"), b"secret").unwrap();
        let host = dir.path().join("host-secret");
        std::os::unix::fs::symlink(&host, root.join("boot/abs")).unwrap();
        std::os::unix::fs::symlink("../../host-secret", root.join("boot/up")).unwrap();
        assert!(read_within(&root, "boot/abs", 1024).is_err());
        assert!(read_within(&root, "boot/up", 1024).is_err());
        assert!(read_within(&root, "../host-secret", 1024).is_err());
        // Not a regular file: a FIFO would block the read.
        let fifo = std::ffi::CString::new(root.join("boot/fifo").into_os_string().into_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
        assert!(read_within(&root, "boot/fifo", 1024).is_err());
        assert!(read_within(&root, "usr/lib", 1024).is_err());
        // Over what is left to read.
        assert!(read_within(&root, "lib/modules/6.1/ext4.ko", 3).is_err());
    }

    #[test]
    fn modules_are_listed_once_in_load_order_relative_to_the_root() {
        let root = Path::new("/c/root");
        let shows = "insmod /c/root/lib/modules/6.1/kernel/lib/crc16.ko \n\
                     insmod /c/root/lib/modules/6.1/kernel/fs/ext4/ext4.ko \n\
                     builtin virtio_pci\n\
                     insmod /c/root/lib/modules/6.1/kernel/lib/crc16.ko \n";
        assert_eq!(
            insmod_order(shows, root),
            vec![
                "/lib/modules/6.1/kernel/lib/crc16.ko",
                "/lib/modules/6.1/kernel/fs/ext4/ext4.ko"
            ]
        );
    }

    /// The reader's `resolve` (`fixtures/vm-disk/init`), run by `sh` on a tree of links: a path of a stopped
    /// machine's disk is found inside the disk's tree, never the reader's own.
    #[test]
    fn the_readers_resolve_follows_links_inside_the_disks_tree() {
        let init =
            std::fs::read_to_string(crate::paths::fixtures_dir(&crate::settings::for_tests()).join("vm-disk/init"))
                .unwrap();
        let start = init.find("\ntop=/root\n").unwrap();
        let end = start + init[start..].find("\n}\n").unwrap() + 3;
        let function = &init[start..end];
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        for d in ["etc", "usr/lib", "var"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("usr/lib/os-release"), "ID=amzn\n").unwrap();
        let link = |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at)).unwrap();
        link("../usr/lib/os-release", "etc/os-release");
        link("/usr/lib/os-release", "etc/absolute");
        link("../../../../../etc/passwd", "etc/escape");
        link("usr/lib", "lib");
        link("/etc", "var/etc");
        link("loop-b", "etc/loop-a");
        link("loop-a", "etc/loop-b");
        let resolve = |path: &str| {
            let script = format!("{function}\ntop=\"$1\"\nresolve \"$2\"");
            let out = std::process::Command::new("sh")
                .args(["-c", &script, "sh"])
                .arg(&root)
                .arg(path)
                .output()
                .unwrap();
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        };
        let inside = |p: &str| Some(root.join(p).display().to_string());
        assert_eq!(resolve("/etc/os-release"), inside("usr/lib/os-release"));
        assert_eq!(
            resolve("/etc/absolute"),
            inside("usr/lib/os-release"),
            "the disk's /, not the reader's"
        );
        assert_eq!(resolve("/lib/os-release"), inside("usr/lib/os-release"));
        assert_eq!(resolve("/var/etc/os-release"), inside("usr/lib/os-release"));
        assert_eq!(
            resolve("/etc/escape"),
            inside("etc/passwd"),
            "`..` stops at the disk's root"
        );
        assert_eq!(resolve("/../../etc/./os-release"), inside("usr/lib/os-release"));
        assert_eq!(resolve("/etc/loop-a"), None, "a loop of links fails");
    }
}
