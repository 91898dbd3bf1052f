//! Where nodejoin keeps things outside the repository (caches) and inside it (run artifacts), and where it finds
//! its own files (`fixtures/`, `kind-config/`): in a checkout, or packed into the binary.
mod embedded;

use crate::settings::Settings;
use std::path::{Path, PathBuf};

/// The cache directory setting, else `$XDG_CACHE_HOME/nodejoin`, else `~/.cache/nodejoin` (home from `$HOME`, else the
/// user's passwd entry). Never a shared fallback such as `/tmp`, where another local user could create the
/// directory first and so plant the binaries a run executes; with no home at all, `/nonexistent`, which fails
/// with its path named.
pub fn cache_dir(settings: &Settings) -> PathBuf {
    cache_dir_from(
        settings.cache_dir.clone().map(Into::into),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
        passwd_home,
    )
}

fn cache_dir_from(
    explicit: Option<std::ffi::OsString>,
    xdg: Option<std::ffi::OsString>,
    home: Option<std::ffi::OsString>,
    passwd: fn() -> Option<PathBuf>,
) -> PathBuf {
    let set = |v: Option<std::ffi::OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(explicit) {
        return dir;
    }
    if let Some(dir) = set(xdg) {
        return dir.join("nodejoin");
    }
    set(home)
        .or_else(passwd)
        .unwrap_or_else(|| PathBuf::from("/nonexistent"))
        .join(".cache")
        .join("nodejoin")
}

/// This user's home directory from the passwd database.
fn passwd_home() -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: zeroed passwd is a valid out-parameter for getpwuid_r.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r with a buffer we own and its length; result is null or points at pwd.
    let rc = unsafe { libc::getpwuid_r(libc::geteuid(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir points into buf, NUL-terminated by getpwuid_r.
    let dir = unsafe { std::ffi::CStr::from_ptr(pwd.pw_dir) };
    let dir = std::ffi::OsStr::from_bytes(dir.to_bytes());
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

/// A nodejoin checkout containing the current directory (or, for this crate's own tests, the crate): the nearest
/// ancestor with `harness/Cargo.toml` naming the `nodejoin` package and our `fixtures/`. It only says where
/// `scenarios/` and `target/` are; nothing is run from it ([`share_root`]), since any repository can look like one.
pub fn checkout_root() -> Option<PathBuf> {
    let starts = [
        std::env::current_dir().ok(),
        // `cargo test` runs in harness/; this is the same checkout, never an installed binary's old one.
        cfg!(test).then(|| PathBuf::from(env!("CARGO_MANIFEST_DIR"))),
    ];
    starts
        .into_iter()
        .flatten()
        .find_map(|start| start.ancestors().find(|d| is_checkout(d)).map(Path::to_path_buf))
}

fn is_checkout(dir: &Path) -> bool {
    dir.join("fixtures/bootstrap/bootstrap.sh").is_file()
        && std::fs::read_to_string(dir.join("harness/Cargo.toml")).is_ok_and(|t| t.contains("name = \"nodejoin\""))
}

/// The workspace root when running from a nodejoin checkout (so `scenarios/` and `target/` resolve the same from
/// `cargo test`, cwd = harness/, and from the CLI, cwd = the root); else the current directory.
pub fn workspace_root() -> PathBuf {
    checkout_root().unwrap_or_else(|| PathBuf::from("."))
}

/// Where `fixtures/` and `kind-config/` are read from: the copy packed into this binary at build time (build.rs),
/// unpacked into `<cache>/share/<hash>/` on first use; or the checkout whose `fixtures/` the fixtures setting
/// names (a nodejoin developer's edits, at once). Never a checkout found from the working directory: their build
/// scripts and the kind docker shim run as root, and a repository handed to nodejoin could merely look like one.
pub fn share_root(settings: &Settings) -> PathBuf {
    match &settings.fixtures {
        Some(fixtures) => fixtures.parent().map_or_else(|| fixtures.clone(), Path::to_path_buf),
        None => embedded::unpacked(settings),
    }
}

/// Where [`share_root`] comes from, for `nodejoin doctor`, and whether it is sound (an unpacked copy matches the
/// binary's archive).
pub fn share_source(settings: &Settings) -> (String, bool) {
    match &settings.fixtures {
        Some(fixtures) => (
            format!(
                "the checkout named by --dev-checkout or {} ({})",
                crate::settings::var::FIXTURES,
                fixtures.display()
            ),
            true,
        ),
        None => {
            let dir = embedded::unpacked(settings);
            // Checked by `unpacked` itself, once per process (unpacked again where it differed): not twice.
            match embedded::verified(&dir) {
                true => (
                    format!(
                        "the copy built into this binary, unpacked at {} (checked against it, entry by entry)",
                        dir.display()
                    ),
                    true,
                ),
                false => (
                    format!(
                        "the copy at {} could not be checked or unpacked again (see the log)",
                        dir.display()
                    ),
                    false,
                ),
            }
        }
    }
}

/// `fixtures/` (or the fixtures setting).
pub fn fixtures_dir(settings: &Settings) -> PathBuf {
    settings
        .fixtures
        .clone()
        .unwrap_or_else(|| share_root(settings).join("fixtures"))
}

/// `kind-config/` (the kind cluster template and the restricted-host docker shim).
pub fn kind_config_dir(settings: &Settings) -> PathBuf {
    share_root(settings).join("kind-config")
}

/// `target/nodejoin/` (honours the artifacts setting, else `CARGO_TARGET_DIR`).
pub fn artifacts_root(settings: &Settings) -> PathBuf {
    if let Some(dir) = &settings.artifacts_dir {
        return dir.clone();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("nodejoin")
}

/// [`artifacts_root`], refused when a repository could have steered it: where it comes from the repository (the
/// default `target/`, or a profile's `artifacts-dir`), no part of it below the working directory may be a link
/// (a committed `target -> /etc` would have root write its artifacts there). A directory named by the caller's
/// variable or flag (or `CARGO_TARGET_DIR`) is the caller's choice, taken as given.
pub fn artifacts_root_checked(settings: &Settings) -> std::result::Result<PathBuf, String> {
    let root = artifacts_root(settings);
    let from_repository = match settings.source("artifacts-dir") {
        Some(crate::settings::Source::Profile) => true,
        Some(_) => false,
        None => std::env::var_os("CARGO_TARGET_DIR").is_none(),
    };
    if !from_repository {
        return Ok(root);
    }
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    let absolute = cwd.join(&root);
    if let Some(link) = linked_below(&cwd, &absolute) {
        return Err(format!(
            "{} is a link (to {}): a repository's link would send this run's artifacts, written as root, elsewhere",
            link.display(),
            std::fs::read_link(&link)
                .map(|t| t.display().to_string())
                .unwrap_or_default(),
        ));
    }
    Ok(root)
}

/// The first part of `path` below `base` that exists and is a link, if any.
fn linked_below(base: &Path, path: &Path) -> Option<PathBuf> {
    let rest = path.strip_prefix(base).ok()?;
    let mut at = base.to_path_buf();
    for part in rest.components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => return Some(at),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
    None
}

/// `file` relative to the working directory when it is under it, as a repository's paths are written (JUnit's
/// `file`, annotations, `nodejoin list`); else as given.
pub fn relative_to_cwd(file: &Path) -> String {
    let cwd = std::env::current_dir().ok();
    cwd.as_deref()
        .and_then(|d| file.strip_prefix(d).ok())
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

/// `file` (absolute, or relative to the working directory) named from `root` when inside it (GitHub resolves
/// annotations' and test reports' files from the checkout's root, whatever directory a run started in), else as
/// [`relative_to_cwd`] names it.
pub fn relative_to(file: &Path, root: Option<&Path>) -> String {
    let Some(root) = root else {
        return relative_to_cwd(file);
    };
    let absolute = match file.is_absolute() {
        true => file.to_path_buf(),
        false => std::env::current_dir()
            .map(|d| d.join(file))
            .unwrap_or_else(|_| file.to_path_buf()),
    };
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    match canonical(&absolute).strip_prefix(canonical(root)) {
        Ok(inside) => inside.to_string_lossy().into_owned(),
        Err(_) => relative_to_cwd(file),
    }
}

/// Resolves `path` against the workspace root when it is relative and does not exist from the cwd.
pub fn resolve(path: &Path) -> PathBuf {
    if path.is_absolute() || path.exists() {
        return path.to_path_buf();
    }
    workspace_root().join(path)
}

/// Our reference bootstrap (`fixtures/bootstrap/bootstrap.sh`): what a node runs when its scenario names no
/// script and its image brings none.
pub fn reference_bootstrap(settings: &Settings) -> PathBuf {
    fixtures_dir(settings).join("bootstrap").join("bootstrap.sh")
}

/// An exclusive lock on `<cache>/<name>.lock`, held until dropped: provisioning (downloads, builds, image
/// creation) is serialised across processes, so parallel runs (nextest, CI jobs) never clobber each other's
/// staging directories or image tags; the second one finds the first one's result.
/// `<cache>/tmp`: builds' work directories, each named by [`owned_prefix`].
pub fn scratch_root(settings: &Settings) -> PathBuf {
    cache_dir(settings).join("tmp")
}

/// `<pid>_<start>-<what>-`: a work directory's name starts with its owner's identity.
pub fn owned_prefix(what: &str) -> String {
    format!("{}-{what}-", crate::process::Identity::own().label().replace(':', "_"))
}

/// The owner a work directory's name gives ([`owned_prefix`]), if it gives one.
pub fn owner_of_scratch(name: &str) -> Option<crate::process::Identity> {
    let (owner, _) = name.split_once('-')?;
    crate::process::Identity::parse(&owner.replace('_', ":"))
}

/// Writes a file whole or not at all, with `mode` from its first byte: a temporary file beside it (created with
/// that mode, never widened afterwards), renamed over it. A full disk or a kill mid-way leaves the old file or
/// none, never a truncated one.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(),
        std::process::id()
    ));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(bytes)?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Writes a file readable by its owner only (keys, kubeconfigs, records): [`write_atomically`] with 0600.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically(path, bytes, 0o600)
}

pub struct CacheLock {
    _file: std::fs::File,
}

impl CacheLock {
    /// Waits for the lock without blocking a runtime thread, up to `deadline::CACHE_LOCK` (its holder may be
    /// building what it guards, itself bounded by `deadline::GO_BUILD`); then a `TimedOut` error naming it.
    pub async fn acquire(settings: &Settings, name: &str) -> std::io::Result<Self> {
        use std::os::unix::io::AsRawFd;
        let dir = cache_dir(settings);
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

#[cfg(test)]
mod tests {

    /// A repository's committed `target -> elsewhere` (or a link deeper down) is found; real folders and parts
    /// not made yet are not links.
    #[test]
    fn a_link_below_the_working_directory_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("out/deeper")).unwrap();
        assert_eq!(super::linked_below(&repo, &repo.join("out/deeper/nodejoin")), None);
        assert_eq!(
            super::linked_below(&repo, &repo.join("target/nodejoin")),
            None,
            "not made yet"
        );
        std::os::unix::fs::symlink("/etc", repo.join("target")).unwrap();
        assert_eq!(
            super::linked_below(&repo, &repo.join("target/nodejoin")),
            Some(repo.join("target"))
        );
        std::os::unix::fs::symlink(tmp.path(), repo.join("out/deeper/link")).unwrap();
        assert_eq!(
            super::linked_below(&repo, &repo.join("out/deeper/link/x")),
            Some(repo.join("out/deeper/link"))
        );
        assert_eq!(
            super::linked_below(&repo, std::path::Path::new("/elsewhere")),
            None,
            "not below it"
        );
    }
    use super::*;

    #[test]
    fn without_home_the_cache_is_the_users_home_from_passwd_never_tmp() {
        let os = |s: &str| Some(std::ffi::OsString::from(s));
        let passwd = || Some(PathBuf::from("/home/u"));
        let none = || None;
        assert_eq!(
            cache_dir_from(os("/c"), os("/x"), os("/h"), passwd),
            PathBuf::from("/c")
        );
        assert_eq!(
            cache_dir_from(None, os("/x"), os("/h"), passwd),
            PathBuf::from("/x/nodejoin")
        );
        assert_eq!(
            cache_dir_from(None, None, os("/h"), passwd),
            PathBuf::from("/h/.cache/nodejoin")
        );
        for home in [None, os("")] {
            assert_eq!(
                cache_dir_from(None, os(""), home.clone(), passwd),
                PathBuf::from("/home/u/.cache/nodejoin")
            );
            let nowhere = cache_dir_from(None, None, home, none);
            assert!(!nowhere.starts_with("/tmp"), "{nowhere:?}");
        }
        assert!(passwd_home().is_some(), "this user has a passwd entry");
    }

    #[test]
    fn private_files_are_private_and_replaced_whole() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("key.pem");
        write_private(&f, b"one").unwrap();
        write_private(&f, b"two").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"two");
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left");
    }
}
