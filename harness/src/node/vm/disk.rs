//! The disk a VM node boots: nodejoin's node image for the group (the one its containers would run) as an ext4
//! root, with Debian's kernel and the VM layer (`fixtures/vm-disk/`), built once per image and kept in the cache
//! with the kernel taken out of it (`disk-<key>.boot/`); each node boots a copy-on-write overlay of it, so the
//! base is never written.
//!
//! The VM layer is a Docker build (it runs inside containers, never on the host: apt fetches the kernel in a stage
//! over nodejoin's Debian base image, which Docker's cache keeps for every node image's disk); the result is exported and unpacked by the `tar` crate, which keeps every entry inside the
//! directory it unpacks to, then `mkfs.ext4 -d` copies that directory into the disk without following its links.
use super::kernel::{short_hash, Kernel, INITRAMFS_MODULES};
use crate::docker::Docker;
use crate::error::{Error, Result};
use crate::node::image::NodeImage;
use crate::settings::Settings;
use std::path::{Path, PathBuf};

/// The version of what is kept per disk (the disk, its `.boot` directory and how the initramfs is made): a change
/// to how they are made changes it, so no cached pair from before is used.
const LAYOUT: &[u8] = b"disk+boot 3";

/// The disk's size; the file is sparse, so this is only what a node may fill.
const DISK_SIZE: &str = "8G";

fn vm_err(m: impl Into<String>) -> Error {
    Error::Vm(m.into())
}

/// The cached disk of `image` and the kernel it carries, built when missing.
pub async fn ensure(settings: &Settings, docker: &Docker, image: &NodeImage) -> Result<(PathBuf, Kernel)> {
    let id = docker
        .inspect_image(&image.tag)
        .await
        .map_err(|e| vm_err(format!("{}: {e}", image.tag)))?
        .id
        .unwrap_or_default();
    let Recipe {
        hash: recipe,
        modules,
        kernel_from,
    } = Recipe::read(settings).await?;
    let key = short_hash(&[
        id.as_bytes(),
        recipe.as_bytes(),
        modules.as_bytes(),
        kernel_from.as_bytes(),
        LAYOUT,
    ]);
    let disk = super::kernel::cache(settings).join(format!("disk-{key}.img"));
    let boot = super::kernel::cache(settings).join(format!("disk-{key}.boot"));
    let ready = || disk.exists().then(|| Kernel::cached(&boot)).flatten();
    if let Some(kernel) = ready() {
        touch(&disk);
        return Ok((disk, kernel));
    }
    let _lock = crate::paths::CacheLock::acquire(settings, "vm-disk")
        .await
        .map_err(|e| vm_err(format!("the VM disk cache lock: {e}")))?;
    if let Some(kernel) = ready() {
        return Ok((disk, kernel));
    }
    prune(&super::kernel::cache(settings));
    let steps = crate::progress::Steps::new(&format!("VM disk of {}", image.tag), 4);
    let work = crate::node::image::work_dir(settings, "vm-disk")?;
    steps.step(1, "docker build (Debian's kernel by apt, the VM layer)");
    let context = build_context(settings, docker, &kernel_from, work.path()).await?;
    let tag = format!("nodejoin-vm:{key}");
    crate::docker::images::build(
        settings,
        docker,
        &context,
        &tag,
        &[("io.nodejoin.vm-disk", key.clone())],
        &[
            ("BASE", image.tag.clone()),
            ("KERNEL_FROM", kernel_from),
            ("INITRAMFS_MODULES", modules),
        ],
    )
    .await?;
    steps.step(2, "export and unpack the root");
    let root = work.path().join("root");
    let exported = export(docker, &tag, &work.path().join("root.tar")).await;
    crate::docker::images::remove(docker, &[&tag]).await;
    let archive = exported?;
    let unpack_to = root.clone();
    crate::node::inputs::off_runtime(move || unpack(&archive, &unpack_to)).await?;
    steps.step(3, "the kernel and its initramfs");
    // Made aside and moved into place after the disk, so a disk and a kernel of two builds are never paired.
    let boot_partial = boot.with_extension("boot-partial");
    let _ = std::fs::remove_dir_all(&boot_partial);
    let (from_root, to_boot, owned) = (root.clone(), boot_partial.clone(), settings.clone());
    crate::node::inputs::off_runtime(move || Kernel::from_root(&owned, &from_root, &to_boot)).await?;
    steps.step(4, "mkfs.ext4 -d");
    let partial = disk.with_extension("partial");
    let mut mkfs = tokio::process::Command::new("mkfs.ext4");
    mkfs.args([
        "-q",
        "-F",
        "-L",
        "nodejoin-root",
        "-E",
        "lazy_itable_init=1,lazy_journal_init=1",
        "-d",
    ])
    .arg(&root)
    .arg(&partial)
    .arg(DISK_SIZE);
    crate::process::mark(&mut mkfs);
    let out = crate::deadline::output(&mut mkfs, "mkfs.ext4 -d", crate::deadline::IMAGE_BUILD).await?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&partial);
        return Err(vm_err(format!(
            "mkfs.ext4 -d failed ({}): {} (e2fsprogs is a Debian package: `apt-get install e2fsprogs`)",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    std::fs::rename(&partial, &disk).map_err(|e| Error::io(&disk, e))?;
    let _ = std::fs::remove_dir_all(&boot);
    std::fs::rename(&boot_partial, &boot).map_err(|e| Error::io(&boot, e))?;
    let kernel = Kernel::cached(&boot).ok_or_else(|| vm_err(format!("{}: incomplete", boot.display())))?;
    steps.finish(&format!("{} (kernel {})", disk.display(), kernel.version));
    Ok((disk, kernel))
}

/// What a disk's build is made from: `fixtures/vm-disk/` (its hash), the modules its initramfs loads, and the
/// image its kernel's stage is built over (nodejoin's Debian base image, shared by every node image).
pub(super) struct Recipe {
    pub hash: String,
    pub modules: String,
    pub kernel_from: String,
}

impl Recipe {
    pub async fn read(settings: &Settings) -> Result<Self> {
        let layer = crate::paths::fixtures_dir(settings).join("vm-disk");
        let owned = settings.clone();
        let hash = crate::node::inputs::off_runtime(move || {
            use sha2::Digest;
            let mut h = sha2::Sha256::new();
            crate::node::inputs::hash_path(&owned, &mut h, &layer)?;
            Ok(hex::encode(h.finalize()))
        })
        .await?;
        Ok(Self {
            hash,
            modules: INITRAMFS_MODULES.join(" "),
            kernel_from: crate::node::image::base_tag(settings)?,
        })
    }
}

/// `fixtures/vm-disk/` (its Dockerfile and files) as a build context under `work`, with the base image its
/// kernel's stage is built over in place (a user's node image need not have been built over it).
pub(super) async fn build_context(
    settings: &Settings,
    docker: &Docker,
    kernel_from: &str,
    work: &Path,
) -> Result<PathBuf> {
    let layer = crate::paths::fixtures_dir(settings).join("vm-disk");
    let context = work.join("context");
    let (to, owned) = (context.clone(), settings.clone());
    crate::node::inputs::off_runtime(move || {
        std::fs::create_dir_all(&to).map_err(|e| Error::io(&to, e))?;
        std::fs::copy(layer.join("Dockerfile"), to.join("Dockerfile")).map_err(|e| Error::io(&layer, e))?;
        crate::node::inputs::copy_tree(&owned, &layer.join("files"), &to.join("files"))
    })
    .await?;
    if !crate::node::image::exists(docker, kernel_from).await {
        let _lock = crate::node::image::image_lock(settings).await?;
        crate::node::image::ensure_base(settings, docker, kernel_from, work).await?;
    }
    Ok(context)
}

/// How long a disk no run has booted stays in the cache (each is the size of its image's files).
const KEEP_UNUSED: std::time::Duration = std::time::Duration::from_secs(3 * 24 * 3600);

/// Marks a disk as just used (its modification time: base disks are never written).
fn touch(disk: &Path) {
    if let Ok(f) = std::fs::File::options().write(true).open(disk) {
        let _ = f.set_modified(std::time::SystemTime::now());
    }
}

/// Removes the disks no run has booted for [`KEEP_UNUSED`] with their kernels, kernels whose disk is gone, the
/// partial files of builds that died, and the kernels of nodejoin before disks carried their own
/// (`kernel-<version>-<key>/`) once unused as long.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let unused = |p: &Path| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > KEEP_UNUSED)
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if name.starts_with("kernel-") {
            if unused(&path) {
                let _ = std::fs::remove_dir_all(&path);
            }
            continue;
        }
        if !name.starts_with("disk-") {
            continue;
        }
        // Partial files are pruned only here, under the build lock, so never one being written.
        if name.ends_with(".partial") || name.ends_with(".boot-partial") {
            let _ = std::fs::remove_file(&path);
            let _ = std::fs::remove_dir_all(&path);
        } else if let Some(stem) = name.strip_suffix(".img") {
            if unused(&path) {
                let _ = std::fs::remove_file(&path);
                let _ = std::fs::remove_dir_all(dir.join(format!("{stem}.boot")));
            }
        } else if let Some(stem) = name.strip_suffix(".boot") {
            if !dir.join(format!("{stem}.img")).exists() {
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }
}

/// Writes the root file system of image `tag` (a created, never started container's export) to `to`.
pub(super) async fn export(docker: &Docker, tag: &str, to: &Path) -> Result<PathBuf> {
    use futures::StreamExt;
    use testcontainers::bollard::models::ContainerCreateBody;
    use testcontainers::bollard::query_parameters::RemoveContainerOptionsBuilder;
    use tokio::io::AsyncWriteExt;
    let created = docker
        .create_container(
            None::<testcontainers::bollard::query_parameters::CreateContainerOptions>,
            ContainerCreateBody {
                image: Some(tag.to_string()),
                // Never started; an image without an entrypoint (a kernel's stage) still needs a command to exist.
                cmd: Some(vec!["/bin/true".to_string()]),
                labels: Some([("io.nodejoin.vm-disk".to_string(), "export".to_string())].into()),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| vm_err(format!("create a container of {tag}: {e}")))?;
    let written: Result<()> = async {
        let mut file = tokio::fs::File::create(to).await.map_err(|e| Error::io(to, e))?;
        let mut stream = docker.export_container(&created.id);
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| vm_err(format!("export of {tag}: {e}")))?;
            file.write_all(&chunk).await.map_err(|e| Error::io(to, e))?;
        }
        file.flush().await.map_err(|e| Error::io(to, e))
    }
    .await;
    let _ = docker
        .remove_container(
            &created.id,
            Some(RemoveContainerOptionsBuilder::new().force(true).build()),
        )
        .await;
    written.map(|()| to.to_path_buf())
}

/// Unpacks an exported root into `to`, owners, modes and extended attributes (file capabilities) kept; every
/// entry lands inside `to` (the `tar` crate refuses `..` and links that lead out). Docker's marker file stays
/// out: systemd would take the machine for a container.
pub(super) fn unpack(archive: &Path, to: &Path) -> Result<()> {
    let file = std::fs::File::open(archive).map_err(|e| Error::io(archive, e))?;
    let mut tar = tar::Archive::new(std::io::BufReader::new(file));
    tar.set_preserve_permissions(true);
    tar.set_preserve_ownerships(true);
    tar.set_unpack_xattrs(true);
    tar.set_overwrite(true);
    std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for entry in tar.entries().map_err(|e| Error::io(archive, e))? {
        let mut entry = entry.map_err(|e| Error::io(archive, e))?;
        let path = entry.path().map_err(|e| Error::io(archive, e))?.into_owned();
        if path == Path::new(".dockerenv") || path == Path::new("./.dockerenv") {
            continue;
        }
        // Docker's mount point, an empty file: the machine's is systemd-resolved's stub, made below.
        if path == Path::new("etc/resolv.conf") || path == Path::new("./etc/resolv.conf") {
            continue;
        }
        entry.unpack_in(to).map_err(|e| Error::io(to.join(&path), e))?;
    }
    resolv_conf_link(to).map_err(|e| Error::io(to.join(RESOLV_CONF), e))?;
    let _ = std::fs::remove_file(archive);
    Ok(())
}

const RESOLV_CONF: &str = "etc/resolv.conf";

/// The root's `/etc/resolv.conf` as on AL2023: a link to systemd-resolved's stub, which asks the DNS server DHCP
/// gives (the VPC resolver). A build step cannot make it (Docker mounts the file over it), so it is made here, by
/// the same `unpack_in` as the root's entries, which keeps it inside the root whatever the root's links are.
fn resolv_conf_link(to: &Path) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Symlink);
    header.set_size(0);
    header.set_mode(0o777);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    let mut builder = tar::Builder::new(Vec::new());
    builder.append_link(&mut header, RESOLV_CONF, "../run/systemd/resolve/stub-resolv.conf")?;
    let bytes = builder.into_inner()?;
    let mut archive = tar::Archive::new(&bytes[..]);
    for entry in archive.entries()? {
        entry?.unpack_in(to)?;
    }
    Ok(())
}

/// A copy-on-write overlay of `base` (of `format`, named, never probed) at `at` (qcow2), which the node writes
/// instead of the base.
pub async fn overlay(base: &Path, format: &str, at: &Path) -> Result<()> {
    let mut cmd = tokio::process::Command::new("qemu-img");
    cmd.args(["create", "-q", "-f", "qcow2", "-F", format, "-b"])
        .arg(base)
        .arg(at);
    qemu_img_create(cmd).await
}

/// An empty qcow2 disk of `bytes` at `at` (an instance-store disk): it takes host space only as the machine
/// writes it, about `bytes` at most (qcow2's metadata aside).
pub async fn blank(at: &Path, bytes: u64) -> Result<()> {
    let mut cmd = tokio::process::Command::new("qemu-img");
    cmd.args(["create", "-q", "-f", "qcow2"]).arg(at).arg(bytes.to_string());
    qemu_img_create(cmd).await
}

async fn qemu_img_create(mut cmd: tokio::process::Command) -> Result<()> {
    crate::process::mark(&mut cmd);
    let out = crate::deadline::output(&mut cmd, "qemu-img create", crate::deadline::TOOL_PROBE).await?;
    if !out.status.success() {
        return Err(vm_err(format!(
            "qemu-img create failed ({}): {} (qemu-img is in the Debian package qemu-utils)",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_keeps_a_disk_in_use_with_its_kernel_and_drops_leftovers() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for f in ["disk-a.img", "disk-b.partial"] {
            std::fs::write(d.join(f), b"x").unwrap();
        }
        for sub in [
            "disk-a.boot",
            "disk-gone.boot",
            "disk-c.boot-partial",
            "kernel-6.1.0-1-amd64-abc",
        ] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        prune(d);
        let mut left: Vec<String> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        // The old kernel stays until it has been unused for the same three days.
        assert_eq!(left, ["disk-a.boot", "disk-a.img", "kernel-6.1.0-1-amd64-abc"]);
    }

    #[test]
    fn an_archive_entry_cannot_land_outside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_size(0);
        b.append_link(&mut h, "etc", "/").unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.set_mode(0o644);
        b.append_data(&mut h, "etc/escaped", &b"x"[..]).unwrap();
        let mut h = tar::Header::new_gnu();
        h.set_size(0);
        b.append_data(&mut h, ".dockerenv", &b""[..]).unwrap();
        let archive = dir.path().join("a.tar");
        std::fs::write(&archive, b.into_inner().unwrap()).unwrap();
        let root = dir.path().join("root");
        let r = unpack(&archive, &root);
        assert!(r.is_err(), "a write through a link out of the root must fail");
        assert!(!Path::new("/escaped").exists());
    }

    #[test]
    fn the_roots_resolv_conf_is_resolved_s_stub_and_stays_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let archive = |entries: &[(&str, Option<&str>)]| {
            let mut b = tar::Builder::new(Vec::new());
            for (path, link) in entries {
                let mut h = tar::Header::new_gnu();
                h.set_size(0);
                h.set_mode(0o755);
                h.set_uid(0);
                h.set_gid(0);
                h.set_mtime(0);
                match link {
                    Some(to) => {
                        h.set_entry_type(tar::EntryType::Symlink);
                        b.append_link(&mut h, path, to).unwrap();
                    }
                    None if path.ends_with('/') => {
                        h.set_entry_type(tar::EntryType::Directory);
                        b.append_data(&mut h, path, &b""[..]).unwrap();
                    }
                    None => b.append_data(&mut h, path, &b""[..]).unwrap(),
                }
            }
            let at = dir.path().join(format!("{}.tar", entries.len()));
            std::fs::write(&at, b.into_inner().unwrap()).unwrap();
            at
        };
        // Docker's export: an empty file where the engine mounted its own.
        let root = dir.path().join("root");
        unpack(&archive(&[("etc/", None), ("etc/resolv.conf", None)]), &root).unwrap();
        let link = std::fs::read_link(root.join("etc/resolv.conf")).unwrap();
        assert_eq!(link, Path::new("../run/systemd/resolve/stub-resolv.conf"));
        // A root whose etc leads out of it: the link is refused, nothing is made outside.
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let other = dir.path().join("other");
        let escape = outside.to_str().unwrap();
        assert!(unpack(&archive(&[("etc", Some(escape))]), &other).is_err());
        assert!(!outside.join("resolv.conf").exists());
    }
}
