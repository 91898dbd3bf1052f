//! The kernel a VM node boots and the initramfs that reaches its disk: Debian's stock `linux-image-amd64` (the
//! package apt names today) and `busybox-static`, downloaded with apt into the cache once per kernel version and
//! unpacked there; nothing is built. The initramfs loads the few modules that reach the root disk and hands over
//! to the disk's systemd (`fixtures/vm-disk/init`); a node's own files are appended to it as a second archive.
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The modules the initramfs loads (with their dependencies) to mount an ext4 root on a virtio disk.
const INITRAMFS_MODULES: &[&str] = &["virtio_pci", "virtio_blk", "ext4"];

/// A kernel ready to boot: its image, its modules and the base initramfs.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// `6.1.0-56-amd64`.
    pub version: String,
    pub vmlinuz: PathBuf,
    /// `.../lib/modules/<version>`.
    pub modules: PathBuf,
    pub initramfs: PathBuf,
}

fn vm_err(m: impl Into<String>) -> Error {
    Error::Vm(m.into())
}

/// The directory of VM assets in the cache.
pub fn cache() -> PathBuf {
    crate::paths::cache_dir().join("vm")
}

async fn run(cmd: &mut tokio::process::Command, what: &str, after: Duration) -> Result<String> {
    crate::process::mark(cmd);
    let out = crate::deadline::output(cmd, what, after).await?;
    if !out.status.success() {
        return Err(vm_err(format!(
            "{what} failed ({}): {}",
            out.status,
            crate::process::last_lines(&String::from_utf8_lossy(&out.stderr), 4, " | ")
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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

/// The package `linux-image-amd64` depends on today (`linux-image-6.1.0-56-amd64`).
async fn kernel_package() -> Result<String> {
    let text = run(
        tokio::process::Command::new("apt-cache").args(["depends", "linux-image-amd64"]),
        "apt-cache depends linux-image-amd64",
        crate::deadline::TOOL_PROBE,
    )
    .await?;
    parse_kernel_package(&text).ok_or_else(|| {
        vm_err("apt knows no linux-image-amd64 (run `apt-get update`; a VM node boots Debian's stock kernel)")
    })
}

fn parse_kernel_package(apt_cache_depends: &str) -> Option<String> {
    apt_cache_depends.lines().find_map(|l| {
        let dep = l.trim().strip_prefix("Depends: ")?;
        (dep.starts_with("linux-image-") && dep.as_bytes().get(12).is_some_and(u8::is_ascii_digit))
            .then(|| dep.to_string())
    })
}

/// Makes sure the current Debian kernel, its modules and the base initramfs are in the cache.
pub async fn ensure() -> Result<Kernel> {
    let package = kernel_package().await?;
    let version = package.trim_start_matches("linux-image-").to_string();
    let init = std::fs::read(crate::paths::fixtures_dir().join("vm-disk").join("init"))
        .map_err(|e| Error::io(crate::paths::fixtures_dir().join("vm-disk/init"), e))?;
    let key = short_hash(&[version.as_bytes(), &init, INITRAMFS_MODULES.join(" ").as_bytes(), b"2"]);
    let dir = cache().join(format!("kernel-{version}-{key}"));
    let kernel = Kernel {
        vmlinuz: dir.join("root/boot").join(format!("vmlinuz-{version}")),
        modules: dir.join("root/lib/modules").join(&version),
        initramfs: dir.join("initramfs.cpio"),
        version: version.clone(),
    };
    if dir.join(".complete").exists() {
        return Ok(kernel);
    }
    let _lock = crate::paths::CacheLock::acquire("vm-kernel")
        .await
        .map_err(|e| vm_err(format!("the VM kernel cache lock: {e}")))?;
    if dir.join(".complete").exists() {
        return Ok(kernel);
    }
    let steps = crate::progress::Steps::new(&format!("VM kernel {version}"), 3);
    steps.step(1, &format!("apt-get download {package} busybox-static"));
    let partial = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(partial.join("debs")).map_err(|e| Error::io(&partial, e))?;
    run(
        tokio::process::Command::new("apt-get")
            .args(["download", "-q", &package, "busybox-static"])
            .current_dir(partial.join("debs")),
        &format!("apt-get download {package} busybox-static"),
        crate::deadline::APT,
    )
    .await?;
    let debs = std::fs::read_dir(partial.join("debs")).map_err(|e| Error::io(&partial, e))?;
    for deb in debs.flatten() {
        run(
            tokio::process::Command::new("dpkg-deb")
                .arg("-x")
                .arg(deb.path())
                .arg(partial.join("root")),
            "dpkg-deb -x",
            crate::deadline::APT,
        )
        .await?;
    }
    run(
        tokio::process::Command::new("depmod")
            .arg("-b")
            .arg(partial.join("root"))
            .arg(&version),
        "depmod",
        crate::deadline::TOOL_PROBE,
    )
    .await?;
    let shows = run(
        tokio::process::Command::new("modprobe")
            .args(["-S", &version, "-d"])
            .arg(partial.join("root"))
            .args(["--show-depends", "-a"])
            .args(INITRAMFS_MODULES),
        "modprobe --show-depends",
        crate::deadline::TOOL_PROBE,
    )
    .await?;
    steps.step(2, "depmod, the initramfs");
    let root = partial.join("root");
    let modules = insmod_order(&shows, &root);
    let busybox = std::fs::read(root.join("bin/busybox")).map_err(|e| Error::io(root.join("bin/busybox"), e))?;
    let mut files: Vec<(String, Vec<u8>, u32)> = vec![
        ("init".into(), init, 0o755),
        ("bin/busybox".into(), busybox, 0o755),
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
        let bytes = std::fs::read(root.join(rel)).map_err(|e| Error::io(root.join(rel), e))?;
        files.push((rel.to_string(), bytes, 0o644));
    }
    let cpio = super::cpio::archive(&files, &["proc", "sys", "dev", "new"]).map_err(|e| Error::io(&partial, e))?;
    std::fs::write(partial.join("initramfs.cpio"), cpio).map_err(|e| Error::io(&partial, e))?;
    let _ = std::fs::remove_dir_all(partial.join("debs"));
    std::fs::write(partial.join(".complete"), b"").map_err(|e| Error::io(&partial, e))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).map_err(|e| Error::io(&dir, e))?;
    steps.finish("ready");
    Ok(kernel)
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
    fn the_kernel_package_is_the_versioned_dependency() {
        let text = "linux-image-amd64\n  Depends: linux-image-6.1.0-56-amd64\n";
        assert_eq!(
            parse_kernel_package(text).as_deref(),
            Some("linux-image-6.1.0-56-amd64")
        );
        assert_eq!(
            parse_kernel_package("linux-image-amd64\n  Depends: linux-image-amd64-signed\n"),
            None
        );
        assert_eq!(parse_kernel_package(""), None);
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
