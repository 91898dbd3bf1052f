//! Where nodejoin keeps things outside the repository (caches) and inside it (run artifacts).
use std::path::{Path, PathBuf};

/// `$NODEJOIN_CACHE_DIR`, else `$XDG_CACHE_HOME/nodejoin`, else `~/.cache/nodejoin`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("NODEJOIN_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("nodejoin");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    home.join(".cache").join("nodejoin")
}

/// The workspace root: the nearest ancestor of the current directory (or of this crate, for tests) whose
/// Cargo.toml declares a `[workspace]`, so paths like `fixtures/` and `scenarios/` resolve the same from
/// `cargo test` (cwd = harness/) and from the CLI (cwd = repo root).
pub fn workspace_root() -> PathBuf {
    let starts = [
        std::env::current_dir().ok(),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
    ];
    for start in starts.into_iter().flatten() {
        for dir in start.ancestors() {
            let manifest = dir.join("Cargo.toml");
            if let Ok(text) = std::fs::read_to_string(&manifest) {
                if text.contains("[workspace]") && dir.join("fixtures").is_dir() {
                    return dir.to_path_buf();
                }
            }
        }
    }
    PathBuf::from(".")
}

/// `fixtures/` of the workspace (or `$NODEJOIN_FIXTURES`).
pub fn fixtures_dir() -> PathBuf {
    std::env::var_os("NODEJOIN_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("fixtures"))
}

/// `target/nodejoin/` (honours `CARGO_TARGET_DIR`).
pub fn artifacts_root() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("nodejoin")
}

/// Resolves `path` against the workspace root when it is relative and does not exist from the cwd.
pub fn resolve(path: &Path) -> PathBuf {
    if path.is_absolute() || path.exists() {
        return path.to_path_buf();
    }
    workspace_root().join(path)
}

/// An exclusive lock on `<cache>/<name>.lock`, held until dropped: provisioning (downloads, builds, image
/// creation) is serialised across processes, so parallel runs (nextest, CI jobs) never clobber each other's
/// staging directories or image tags; the second one finds the first one's result.
pub struct CacheLock {
    _file: std::fs::File,
}

impl CacheLock {
    /// Blocking variant, for destructors and other sync code.
    pub fn acquire_blocking(name: &str) -> std::io::Result<Self> {
        use std::os::unix::io::AsRawFd;
        let dir = cache_dir();
        std::fs::create_dir_all(&dir)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join(format!("{name}.lock")))?;
        // SAFETY: flock on a descriptor we own; blocks until the lock is free.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Self { _file: file })
    }

    /// Waits for the lock without blocking a runtime thread, up to `deadline::CACHE_LOCK` (its holder may be
    /// building what it guards, itself bounded by `deadline::GO_BUILD`); then a `TimedOut` error naming it.
    pub async fn acquire(name: &str) -> std::io::Result<Self> {
        use std::os::unix::io::AsRawFd;
        let dir = cache_dir();
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.lock"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        let start = std::time::Instant::now();
        loop {
            // SAFETY: flock on a descriptor we own; LOCK_NB returns at once.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Self { _file: file });
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(e);
            }
            if start.elapsed() >= crate::deadline::CACHE_LOCK {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the cache lock {} was held by another process for {} (a build that hangs?)",
                        path.display(),
                        humantime::format_duration(crate::deadline::CACHE_LOCK)
                    ),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
    }
}
