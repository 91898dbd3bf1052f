//! An image's inputs on disk: their hash (what image tags are derived from, so an image is rebuilt exactly when
//! an input changes) and their copy into a build context.
use crate::error::{Error, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn image_err(e: impl std::fmt::Display) -> Error {
    Error::Image(e.to_string())
}

/// Hashes a file or a directory tree: the relative path, mode and content of every file, in sorted order.
/// Directories count only through their files, so an empty directory (which git cannot carry) does not
/// change the hash between a work tree and a fresh clone.
pub(crate) fn hash_path(h: &mut Sha256, path: &Path) -> Result<()> {
    hash_path_skipping(h, path, &|_| false)
}

/// [`hash_path`] leaving out the entries whose path relative to `path` `skip` says (build output, VCS data).
pub(crate) fn hash_path_skipping(h: &mut Sha256, path: &Path, skip: &dyn Fn(&Path) -> bool) -> Result<()> {
    hash_tree(h, path, Path::new(""), skip, &boundary_of(path))
}

fn hash_tree(h: &mut Sha256, path: &Path, rel: &Path, skip: &dyn Fn(&Path) -> bool, within: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(link) = kept_link(path, within)? {
        // The link itself, as the image carries it (its target may not exist on this host).
        h.update(rel.to_string_lossy().as_bytes());
        h.update(b" -> ");
        h.update(link.to_string_lossy().as_bytes());
        return Ok(());
    }
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| Error::io(path, e))?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        entries.sort();
        for name in entries {
            let child = rel.join(&name);
            if !skip(&child) {
                hash_tree(h, &path.join(&name), &child, skip, within)?;
            }
        }
    } else if meta.is_file() {
        h.update(rel.to_string_lossy().as_bytes());
        h.update(meta.permissions().mode().to_le_bytes());
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        std::io::copy(&mut f, h).map_err(|e| Error::io(path, e))?;
    } else {
        // Reading a FIFO would block for ever, a device is not content: neither belongs in an image's inputs.
        return Err(image_err(format!(
            "{}: neither a directory, a regular file nor a symlink (an image layer cannot carry it)",
            path.display()
        )));
    }
    Ok(())
}

/// SHA-256 of a large file, remembered in `<file>.sha256` next to it (with the size and mtime it was computed
/// for), so the 80+ MB kubelet is not re-read on every run.
pub(crate) fn file_digest(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let stamp = format!("{} {mtime}", meta.len());
    let sidecar = path.with_extension("sha256");
    if let Ok(text) = std::fs::read_to_string(&sidecar) {
        if let Some((digest, recorded)) = text.trim().split_once(' ') {
            if recorded == stamp && digest.len() == 64 {
                return Ok(digest.to_string());
            }
        }
    }
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    std::io::copy(&mut f, &mut h).map_err(|e| Error::io(path, e))?;
    let digest = hex::encode(h.finalize());
    // Best effort: a read-only assets directory just means hashing again next time.
    let _ = std::fs::write(&sidecar, format!("{digest} {stamp}\n"));
    Ok(digest)
}

/// The tree a copied or hashed directory may draw files from through relative symlinks: the git repository
/// holding it (a repository shares a file between its trees: `../../bootstrap/eni-limits.txt`), else our
/// fixtures (when it is one of them), else the directory itself.
fn boundary_of(path: &Path) -> PathBuf {
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let start = if path.is_dir() {
        path.clone()
    } else {
        path.parent().map(Path::to_path_buf).unwrap_or_else(|| path.clone())
    };
    if let Some(repo) = start.ancestors().find(|d| d.join(".git").exists()) {
        return repo.to_path_buf();
    }
    // Our own fixtures, unpacked from an installed binary (no repository), share files the same way.
    let fixtures = crate::paths::fixtures_dir();
    let fixtures = std::fs::canonicalize(&fixtures).unwrap_or(fixtures);
    if start.starts_with(&fixtures) {
        return fixtures;
    }
    start
}

/// A symlink kept as a link in the image, never resolved on the host: an absolute one names a path in the image
/// (`/dev/null` masks a unit; `/usr/lib/...` is the image's file), and a relative one leading out of `within`
/// (or nowhere) would otherwise bake a host file into the image. A relative link inside `within` is followed.
fn kept_link(path: &Path, within: &Path) -> Result<Option<PathBuf>> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_symlink() {
        return Ok(None);
    }
    let link = std::fs::read_link(path).map_err(|e| Error::io(path, e))?;
    if link.is_absolute() {
        return Ok(Some(link));
    }
    let inside = std::fs::canonicalize(path).is_ok_and(|target| target.starts_with(within));
    Ok((!inside).then_some(link))
}

/// Copies a tree into a build context: symlinks out of the tree's repository stay symlinks (see [`kept_link`]),
/// those within it are followed, and anything that is neither a directory nor a regular file (a FIFO, a device,
/// a socket) is refused with its path.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    copy_within(from, to, &boundary_of(from))
}

fn copy_within(from: &Path, to: &Path, within: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| Error::io(from, e))?.flatten() {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if let Some(link) = kept_link(&source, within)? {
            std::os::unix::fs::symlink(&link, &target).map_err(|e| Error::io(&target, e))?;
            continue;
        }
        let kind = std::fs::metadata(&source)
            .map_err(|e| Error::io(&source, e))?
            .file_type();
        if kind.is_dir() {
            copy_within(&source, &target, within)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target).map_err(|e| Error::io(&source, e))?;
        } else {
            return Err(image_err(format!(
                "{}: neither a directory, a regular file nor a symlink (an image layer cannot carry it)",
                source.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_hash_ignores_empty_directories_but_not_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        let hash = |p: &Path| {
            let mut h = Sha256::new();
            hash_path(&mut h, p).unwrap();
            hex::encode(h.finalize())
        };
        let before = hash(dir.path());
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        assert_eq!(hash(dir.path()), before);
        std::fs::write(dir.path().join("empty").join("b"), b"").unwrap();
        assert_ne!(hash(dir.path()), before);
    }

    #[test]
    fn absolute_links_stay_links_relative_ones_are_followed_special_files_refused() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("overlay");
        std::fs::create_dir_all(src.join("etc/systemd/system")).unwrap();
        // A masked unit, and an absolute link that must not pick up the host's file.
        std::os::unix::fs::symlink("/dev/null", src.join("etc/systemd/system/update-motd.service")).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", src.join("etc/secret")).unwrap();
        let out = dir.path().join("ctx");
        copy_tree(&src, &out).unwrap();
        let masked = out.join("etc/systemd/system/update-motd.service");
        assert!(std::fs::symlink_metadata(&masked).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_link(&masked).unwrap(), Path::new("/dev/null"));
        assert_eq!(
            std::fs::read_link(out.join("etc/secret")).unwrap(),
            Path::new("/etc/shadow")
        );
        // A relative link to a file elsewhere in the overlay's repository is followed.
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("shared.txt"), b"shared").unwrap();
        std::os::unix::fs::symlink("../../shared.txt", src.join("etc/shared.txt")).unwrap();
        let out2 = dir.path().join("ctx-relative");
        copy_tree(&src, &out2).unwrap();
        assert_eq!(std::fs::read(out2.join("etc/shared.txt")).unwrap(), b"shared");
        assert!(!std::fs::symlink_metadata(out2.join("etc/shared.txt"))
            .unwrap()
            .file_type()
            .is_symlink());
        // A relative link out of the repository reads no host file.
        std::os::unix::fs::symlink("../../../../../../../../etc/hostname", src.join("etc/host-file")).unwrap();
        let out3 = dir.path().join("ctx-escape");
        copy_tree(&src, &out3).unwrap();
        assert_eq!(
            std::fs::read_link(out3.join("etc/host-file")).unwrap(),
            Path::new("../../../../../../../../etc/hostname"),
            "a relative link out of the tree was followed on the host"
        );
        std::fs::remove_file(src.join("etc/host-file")).unwrap();
        let hash = |p: &Path| {
            let mut h = Sha256::new();
            hash_path(&mut h, p).map(|_| hex::encode(h.finalize()))
        };
        let before = hash(&src).unwrap();
        std::fs::remove_file(src.join("etc/secret")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("etc/secret")).unwrap();
        assert_ne!(hash(&src).unwrap(), before, "a link's target is part of the hash");
        let fifo = src.join("pipe");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = hash(&src).unwrap_err().to_string();
        assert!(err.contains("pipe") && err.contains("neither"), "{err}");
        let err = copy_tree(&src, &dir.path().join("ctx2")).unwrap_err().to_string();
        assert!(err.contains("pipe"), "{err}");
    }

    #[test]
    fn digest_is_cached_and_invalidated_by_changes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("kubelet");
        std::fs::write(&f, b"one").unwrap();
        let a = file_digest(&f).unwrap();
        assert_eq!(a, hex::encode(Sha256::digest(b"one")));
        assert!(dir.path().join("kubelet.sha256").exists());
        assert_eq!(file_digest(&f).unwrap(), a);
        std::fs::write(&f, b"two!").unwrap();
        assert_eq!(file_digest(&f).unwrap(), hex::encode(Sha256::digest(b"two!")));
    }
}
