//! The kernel a VM node boots: Debian's stock kernel, which the disk's own build fetches with apt inside a
//! container of the node image (`fixtures/vm-disk/.../vm-kernel.sh`: the package `linux-image-amd64` depends on
//! that day), so the host's distribution plays no part. The harness takes it out of the unpacked disk with a small
//! initramfs: the modules that reach the root disk, a static busybox, and `fixtures/vm-disk/init`, which hands
//! over to the disk's systemd; a node's own files are appended to it as a second archive.
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The modules the initramfs loads (with their dependencies) to mount an ext4 root on a virtio disk.
pub(crate) const INITRAMFS_MODULES: &[&str] = &["virtio_pci", "virtio_blk", "ext4"];

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
pub fn cache() -> PathBuf {
    crate::paths::cache_dir().join("vm")
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

    /// Takes the kernel out of an unpacked disk root (`root`) into `boot`: its image, and an initramfs of
    /// `fixtures/vm-disk/init`, the disk's static busybox and the modules the build listed, in load order.
    /// Everything is read as data from inside `root` (the paths the build wrote are resolved within it).
    pub fn from_root(root: &Path, boot: &Path) -> Result<Kernel> {
        let read = |name: &str| read_within(root, &format!("{IN_DISK}/{name}"));
        let version = String::from_utf8_lossy(&read("version")?).trim().to_string();
        if version.is_empty()
            || !version
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
        {
            return Err(vm_err(format!("the disk names its kernel {version:?}")));
        }
        let init_path = crate::paths::fixtures_dir().join("vm-disk").join("init");
        let init = std::fs::read(&init_path).map_err(|e| Error::io(&init_path, e))?;
        let modules = insmod_order(&String::from_utf8_lossy(&read("modules")?), Path::new("/"));
        let mut files: Vec<(String, Vec<u8>, u32)> = vec![
            ("init".into(), init, 0o755),
            ("bin/busybox".into(), read("busybox")?, 0o755),
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
            let bytes = read_within(root, rel)?;
            files.push((rel.to_string(), bytes, 0o644));
        }
        let cpio = super::cpio::archive(&files, &["proc", "sys", "dev", "new"]).map_err(|e| Error::io(boot, e))?;
        std::fs::create_dir_all(boot).map_err(|e| Error::io(boot, e))?;
        let vmlinuz = read_within(root, &format!("boot/vmlinuz-{version}"))?;
        for (name, bytes) in [
            ("vmlinuz", vmlinuz),
            ("initramfs.cpio", cpio),
            ("version", format!("{version}\n").into_bytes()),
            (".complete", Vec::new()),
        ] {
            std::fs::write(boot.join(name), bytes).map_err(|e| Error::io(boot.join(name), e))?;
        }
        Kernel::cached(boot).ok_or_else(|| vm_err(format!("{}: incomplete", boot.display())))
    }
}

/// Reads `rel` inside the unpacked disk `root`, following its links as the machine would (an absolute link
/// target is taken from `root`, never from the host), and refusing any that lead out of it.
fn read_within(root: &Path, rel: &str) -> Result<Vec<u8>> {
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
    std::fs::read(&at).map_err(|e| Error::io(&at, e))
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
        assert_eq!(read_within(&root, "lib/modules/6.1/ext4.ko").unwrap(), b"module");
        assert_eq!(read_within(&root, "/boot/vmlinuz-6.1").unwrap(), b"module");
        // Outside the root: a host file by an absolute link, or by climbing above the top.
        std::fs::write(dir.path().join("host-secret"), b"secret").unwrap();
        let host = dir.path().join("host-secret");
        std::os::unix::fs::symlink(&host, root.join("boot/abs")).unwrap();
        std::os::unix::fs::symlink("../../host-secret", root.join("boot/up")).unwrap();
        assert!(read_within(&root, "boot/abs").is_err());
        assert!(read_within(&root, "boot/up").is_err());
        assert!(read_within(&root, "../host-secret").is_err());
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
}
