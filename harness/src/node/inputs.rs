//! An image's inputs on disk: their hash (what image tags are derived from, so an image is rebuilt exactly when
//! an input changes) and their copy into a build context.
use crate::error::{Error, Result};
use crate::settings::Settings;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

fn image_err(e: impl std::fmt::Display) -> Error {
    Error::Image(e.to_string())
}

/// Hashes a file or a directory tree: the relative path, mode and content of every file, in sorted order.
/// Directories count only through their files, so an empty directory (which git cannot carry) does not
/// change the hash between a work tree and a fresh clone.
pub(crate) fn hash_path(settings: &Settings, h: &mut Sha256, path: &Path) -> Result<()> {
    hash_path_skipping(settings, h, path, &|_| false)
}

/// [`hash_path`] leaving out the entries whose path relative to `path` `skip` says (build output, VCS data).
pub(crate) fn hash_path_skipping(
    settings: &Settings,
    h: &mut Sha256,
    path: &Path,
    skip: &dyn Fn(&Path) -> bool,
) -> Result<()> {
    Walk::new(settings, path).hash(h, path, Path::new(""), skip)
}

/// Bounds on a walk through a tree a scenario names: a tree that links back into itself, a huge or endless one,
/// or one on a file system that hangs, ends with an error naming the path instead of running the root process
/// out of memory or time.
pub(crate) const MAX_ENTRIES: u64 = 200_000;
pub(crate) const MAX_BYTES: u64 = 8 << 30;
pub(crate) const WALK_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// One walk through a tree: its link boundary, what it has seen so far, and the directories above the current
/// one (device and inode), by which a loop through a followed link is found.
struct Walk {
    within: PathBuf,
    deadline: std::time::Instant,
    entries: u64,
    bytes: u64,
    above: Vec<(u64, u64)>,
}

impl Walk {
    fn new(settings: &Settings, path: &Path) -> Self {
        Self {
            within: boundary_of(settings, path),
            deadline: std::time::Instant::now() + WALK_DEADLINE,
            entries: 0,
            bytes: 0,
            above: Vec::new(),
        }
    }

    /// Counts one entry of `len` bytes at `path`, failing past a bound.
    fn count(&mut self, path: &Path, len: u64) -> Result<()> {
        self.entries += 1;
        self.bytes += len;
        let past = if self.entries > MAX_ENTRIES {
            Some(format!("more than {MAX_ENTRIES} entries"))
        } else if self.bytes > MAX_BYTES {
            Some(format!("more than {} GiB", MAX_BYTES >> 30))
        } else if std::time::Instant::now() > self.deadline {
            Some(format!("still being read after {} s", WALK_DEADLINE.as_secs()))
        } else {
            None
        };
        match past {
            Some(why) => Err(image_err(format!(
                "{}: the tree is {why}; nodejoin reads no more of a tree a scenario names",
                path.display()
            ))),
            None => Ok(()),
        }
    }

    /// Enters the directory `path` (its metadata `meta`), unless it is one of those above: a link loop.
    fn enter(&mut self, path: &Path, meta: &std::fs::Metadata) -> Result<()> {
        use std::os::unix::fs::MetadataExt;
        let id = (meta.dev(), meta.ino());
        if self.above.contains(&id) {
            return Err(image_err(format!(
                "{}: a symlink loop (this directory is also one above it)",
                path.display()
            )));
        }
        self.above.push(id);
        Ok(())
    }

    /// The entries of the directory `path`, sorted, without VCS data (`.git` never goes into an image).
    fn entries(path: &Path) -> Result<Vec<std::ffi::OsString>> {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| Error::io(path, e))?
            .flatten()
            .map(|e| e.file_name())
            .filter(|name| name != ".git")
            .collect();
        entries.sort();
        Ok(entries)
    }

    fn hash(&mut self, h: &mut Sha256, path: &Path, rel: &Path, skip: &dyn Fn(&Path) -> bool) -> Result<()> {
        use std::os::unix::fs::PermissionsExt;
        if let Some(link) = kept_link(path, rel, &self.within)? {
            // The link itself, as the image carries it (its target may not exist on this host).
            self.count(path, 0)?;
            h.update(rel.to_string_lossy().as_bytes());
            h.update(b" -> ");
            h.update(link.to_string_lossy().as_bytes());
            return Ok(());
        }
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if meta.is_dir() {
            self.count(path, 0)?;
            self.enter(path, &meta)?;
            for name in Self::entries(path)? {
                let child = rel.join(&name);
                if !skip(&child) {
                    self.hash(h, &path.join(&name), &child, skip)?;
                }
            }
            self.above.pop();
        } else if meta.is_file() {
            self.count(path, meta.len())?;
            h.update(rel.to_string_lossy().as_bytes());
            h.update(meta.permissions().mode().to_le_bytes());
            let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
            std::io::copy(&mut f, h).map_err(|e| Error::io(path, e))?;
        } else {
            return Err(not_carried(path));
        }
        Ok(())
    }

    fn copy(&mut self, from: &Path, to: &Path, rel: &Path) -> Result<()> {
        let meta = std::fs::metadata(from).map_err(|e| Error::io(from, e))?;
        self.enter(from, &meta)?;
        std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
        for name in Self::entries(from)? {
            let (source, target, child) = (from.join(&name), to.join(&name), rel.join(&name));
            if let Some(link) = kept_link(&source, &child, &self.within)? {
                self.count(&source, 0)?;
                std::os::unix::fs::symlink(&link, &target).map_err(|e| Error::io(&target, e))?;
                continue;
            }
            let meta = std::fs::metadata(&source).map_err(|e| Error::io(&source, e))?;
            if meta.is_dir() {
                self.count(&source, 0)?;
                self.copy(&source, &target, &child)?;
            } else if meta.is_file() {
                self.count(&source, meta.len())?;
                std::fs::copy(&source, &target).map_err(|e| Error::io(&source, e))?;
            } else {
                return Err(not_carried(&source));
            }
        }
        self.above.pop();
        Ok(())
    }
}

/// Reading a FIFO would block for ever, a device is not content: neither belongs in an image's inputs.
fn not_carried(path: &Path) -> Error {
    image_err(format!(
        "{}: neither a directory, a regular file nor a symlink (an image layer cannot carry it)",
        path.display()
    ))
}

/// Runs `work` (a walk through a tree, a copy) on a blocking thread: it may read gigabytes, and the async
/// runtime's threads serve the fakes the nodes are talking to meanwhile.
pub(crate) async fn off_runtime<T: Send + 'static>(work: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| image_err(format!("a walk through an image's inputs stopped: {e}")))?
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
fn boundary_of(settings: &Settings, path: &Path) -> PathBuf {
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
    let fixtures = crate::paths::fixtures_dir(settings);
    let fixtures = std::fs::canonicalize(&fixtures).unwrap_or(fixtures);
    if start.starts_with(&fixtures) {
        return fixtures;
    }
    start
}

/// A symlink kept as a link in the image, never resolved on the host: an absolute one names a path in the image
/// (`/dev/null` masks a unit; `/usr/lib/...` is the image's file); a relative one that stays inside the tree as
/// written (`rel` is where it sits in the tree) leads to the same file in the image, and systemd needs it to be a
/// link (`multi-user.target.wants/x.service -> ../x.service` enables a unit; a copy there is ignored); and a
/// relative one leading out of `within`, into its `.git/`, or nowhere would otherwise bake a host file (or the
/// repository's credentials) into the image. A relative link out of the tree but inside `within` (a file the
/// repository shares between trees) is followed.
fn kept_link(path: &Path, rel: &Path, within: &Path) -> Result<Option<PathBuf>> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_symlink() {
        return Ok(None);
    }
    let link = std::fs::read_link(path).map_err(|e| Error::io(path, e))?;
    if link.is_absolute() || inside_tree(rel, &link) {
        return Ok(Some(link));
    }
    let inside = std::fs::canonicalize(path).is_ok_and(|target| {
        target
            .strip_prefix(within)
            .is_ok_and(|rel| !rel.components().any(|c| c.as_os_str() == ".git"))
    });
    Ok((!inside).then_some(link))
}

/// Whether the relative link `link` at `rel` in a tree, read as written (never on the host), names a path inside
/// the tree: it does not climb above the tree's top. The tree's top itself (`rel` empty) is no link within it.
fn inside_tree(rel: &Path, link: &Path) -> bool {
    use std::path::Component;
    let Some(parent) = rel.parent() else {
        return false;
    };
    let mut depth = parent.components().count();
    for c in link.components() {
        match c {
            Component::ParentDir if depth == 0 => return false,
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// Copies a tree into a build context: absolute symlinks, those within the tree and those out of the tree's
/// repository (or into its `.git/`) stay symlinks (see [`kept_link`]), those to the rest of the repository are
/// followed, `.git` entries are left out, and anything that is neither a directory nor a regular file (a FIFO, a
/// device, a socket) is refused with its path.
pub(crate) fn copy_tree(settings: &Settings, from: &Path, to: &Path) -> Result<()> {
    Walk::new(settings, from).copy(from, to, Path::new(""))
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
            hash_path(&crate::settings::for_tests(), &mut h, p).unwrap();
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
        copy_tree(&crate::settings::for_tests(), &src, &out).unwrap();
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
        copy_tree(&crate::settings::for_tests(), &src, &out2).unwrap();
        assert_eq!(std::fs::read(out2.join("etc/shared.txt")).unwrap(), b"shared");
        assert!(!std::fs::symlink_metadata(out2.join("etc/shared.txt"))
            .unwrap()
            .file_type()
            .is_symlink());
        // A relative link out of the repository reads no host file.
        std::os::unix::fs::symlink("../../../../../../../../etc/hostname", src.join("etc/host-file")).unwrap();
        let out3 = dir.path().join("ctx-escape");
        copy_tree(&crate::settings::for_tests(), &src, &out3).unwrap();
        assert_eq!(
            std::fs::read_link(out3.join("etc/host-file")).unwrap(),
            Path::new("../../../../../../../../etc/hostname"),
            "a relative link out of the tree was followed on the host"
        );
        std::fs::remove_file(src.join("etc/host-file")).unwrap();
        let hash = |p: &Path| {
            let mut h = Sha256::new();
            hash_path(&crate::settings::for_tests(), &mut h, p).map(|_| hex::encode(h.finalize()))
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
        let err = copy_tree(&crate::settings::for_tests(), &src, &dir.path().join("ctx2"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("pipe"), "{err}");
    }

    #[test]
    fn git_is_never_carried_and_a_link_loop_is_found() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), b"[remote] token").unwrap();
        let src = dir.path().join("overlay");
        std::fs::create_dir_all(src.join("etc/.git")).unwrap();
        std::fs::write(src.join("etc/.git/HEAD"), b"ref").unwrap();
        std::fs::write(src.join("etc/motd"), b"hi").unwrap();
        // A relative link into the repository's .git/ stays a link: its credentials never reach the image.
        std::os::unix::fs::symlink("../../.git/config", src.join("etc/git-config")).unwrap();
        let out = dir.path().join("ctx");
        copy_tree(&crate::settings::for_tests(), &src, &out).unwrap();
        assert!(!out.join("etc/.git").exists(), "a .git directory was copied");
        assert!(std::fs::symlink_metadata(out.join("etc/git-config"))
            .unwrap()
            .file_type()
            .is_symlink());
        let hash = |p: &Path| {
            let mut h = Sha256::new();
            hash_path(&crate::settings::for_tests(), &mut h, p).map(|_| hex::encode(h.finalize()))
        };
        let before = hash(&src).unwrap();
        std::fs::write(src.join("etc/.git/HEAD"), b"another").unwrap();
        assert_eq!(hash(&src).unwrap(), before, ".git is not an input");
        // etc/loop/up -> ../../../overlay: out of the tree and back into it, each level would hold the whole tree
        // again. (`..` alone stays inside the tree: kept as a link, never walked.)
        std::fs::create_dir_all(src.join("etc/loop")).unwrap();
        std::os::unix::fs::symlink("../../../overlay", src.join("etc/loop/up")).unwrap();
        let err = hash(&src).unwrap_err().to_string();
        assert!(err.contains("symlink loop"), "{err}");
        let err = copy_tree(&crate::settings::for_tests(), &src, &dir.path().join("ctx-loop"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("symlink loop"), "{err}");
    }

    /// What `systemctl enable` leaves (`multi-user.target.wants/x.service -> ../x.service`) reaches the image as a
    /// link: systemd ignores a copy there. A link climbing out of the tree is not kept for being relative.
    #[test]
    fn links_within_the_tree_stay_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let src = dir.path().join("overlay");
        let units = src.join("etc/systemd/system");
        std::fs::create_dir_all(units.join("multi-user.target.wants")).unwrap();
        std::fs::write(units.join("agent.service"), b"[Install]\nWantedBy=multi-user.target\n").unwrap();
        std::os::unix::fs::symlink("../agent.service", units.join("multi-user.target.wants/agent.service")).unwrap();
        std::os::unix::fs::symlink("../../usr", src.join("etc/up")).unwrap();
        std::fs::write(dir.path().join("shared.txt"), b"shared").unwrap();
        std::os::unix::fs::symlink("../../shared.txt", src.join("etc/shared.txt")).unwrap();
        let out = dir.path().join("ctx");
        copy_tree(&crate::settings::for_tests(), &src, &out).unwrap();
        let wants = out.join("etc/systemd/system/multi-user.target.wants/agent.service");
        assert!(std::fs::symlink_metadata(&wants).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_link(&wants).unwrap(), Path::new("../agent.service"));
        assert_eq!(std::fs::read_link(out.join("etc/up")).unwrap(), Path::new("../../usr"));
        assert!(!std::fs::symlink_metadata(out.join("etc/shared.txt"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(inside_tree(Path::new("a/b/l"), Path::new("../../x")));
        assert!(!inside_tree(Path::new("a/b/l"), Path::new("../../../x")));
        assert!(!inside_tree(Path::new("a/l"), Path::new("./../../x/..")));
        assert!(!inside_tree(Path::new(""), Path::new("x")));
        // The link is hashed as a link: retargeting it rebuilds the image.
        let hash = |p: &Path| {
            let mut h = Sha256::new();
            hash_path(&crate::settings::for_tests(), &mut h, p).unwrap();
            hex::encode(h.finalize())
        };
        let before = hash(&src);
        std::fs::remove_file(units.join("multi-user.target.wants/agent.service")).unwrap();
        std::os::unix::fs::symlink("/dev/null", units.join("multi-user.target.wants/agent.service")).unwrap();
        assert_ne!(hash(&src), before);
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
