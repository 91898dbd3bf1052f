//! Whether a run record can be acted on. The reaper kills what a record names, removes its host network
//! leftovers and rewrites its artifacts (redaction, 0600), all as root; the records live in the cache, which a CI
//! cache restore or a planting can fill. So a record is acted on only when it proves it is this host's, from this
//! boot: a real directory owned by this user that nobody else may write, named as run ids are, carrying this
//! boot's id (PIDs and start times mean nothing in another boot). Its artifacts are rewritten only where the
//! run's own marker is found (a file only that run's nodejoin wrote into its artifacts directory).
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The file in a run directory that holds the boot id it was written in.
pub(super) const BOOT_FILE: &str = "boot";

/// The file in a run's artifacts directory that names the run: without it, nothing there is rewritten.
pub const MARKER_FILE: &str = ".nodejoin-run";

/// This boot's id (the kernel's random `boot_id`).
pub(super) fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Whether `name` is shaped as [`super::new_run_id`] makes them: hex seconds, a dash, 6 hex digits.
pub(super) fn is_run_id(name: &str) -> bool {
    match name.split_once('-') {
        Some((secs, random)) => {
            !secs.is_empty()
                && secs.len() <= 16
                && random.len() == 6
                && secs.bytes().chain(random.bytes()).all(|b| b.is_ascii_hexdigit())
        }
        None => false,
    }
}

/// This process's effective user.
fn euid() -> u32 {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() }
}

/// Whether `dir` is a real directory (not a link) owned by this user that no one else may write.
pub(super) fn own_private_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == euid() && m.mode() & 0o022 == 0)
}

/// Why the record `dir` (named `name`) is not to be acted on, if it is not.
pub(super) fn distrust(dir: &Path, name: &str) -> Option<String> {
    if !is_run_id(name) {
        return Some(format!("{name:?} is not a run id"));
    }
    if !own_private_dir(dir) {
        return Some("not a directory of this user's that only it may write".into());
    }
    let boot = dir.join(BOOT_FILE);
    let written = match std::fs::symlink_metadata(&boot) {
        Ok(m) if m.is_file() && m.uid() == euid() => std::fs::read_to_string(&boot).unwrap_or_default(),
        _ => return Some("it names no boot".into()),
    };
    let now = boot_id();
    if written.trim() != now || now.is_empty() {
        return Some("it was written in another boot".into());
    }
    None
}

/// Whether `artifacts` is run `run`'s own artifacts directory: a real directory holding the run's marker, a
/// regular file (not a link) that names the run.
pub(super) fn marked(artifacts: &Path, run: &str) -> bool {
    let is_dir = std::fs::symlink_metadata(artifacts).is_ok_and(|m| m.is_dir());
    let marker = artifacts.join(MARKER_FILE);
    is_dir
        && std::fs::symlink_metadata(&marker).is_ok_and(|m| m.is_file())
        && std::fs::read_to_string(&marker).is_ok_and(|s| s.trim() == run)
}

/// Marks `artifacts` as run `run`'s ([`marked`]).
pub fn mark(artifacts: &Path, run: &str) -> std::io::Result<()> {
    std::fs::write(artifacts.join(MARKER_FILE), run)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn run_ids_are_what_new_run_id_makes() {
        assert!(is_run_id(&crate::reaper::new_run_id()));
        for bad in [
            "",
            "x",
            "../etc",
            "6748a1b2-",
            "6748a1b2-abc",
            "6748a1b2-abcdefg",
            "zz-abcdef",
            "a-b-c",
        ] {
            assert!(!is_run_id(bad), "{bad}");
        }
    }

    #[test]
    fn only_a_record_of_this_boot_that_only_this_user_may_write_is_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let name = crate::reaper::new_run_id();
        let dir = tmp.path().join(&name);
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(distrust(&dir, &name).as_deref(), Some("it names no boot"));
        std::fs::write(dir.join(BOOT_FILE), "00000000-0000-0000-0000-000000000000").unwrap();
        assert_eq!(distrust(&dir, &name).as_deref(), Some("it was written in another boot"));
        std::fs::write(dir.join(BOOT_FILE), boot_id()).unwrap();
        assert_eq!(distrust(&dir, &name), None);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(distrust(&dir, &name).unwrap().contains("only it may write"));
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(distrust(&dir, "planted").unwrap().contains("not a run id"));
        let link = tmp.path().join(crate::reaper::new_run_id());
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let link_name = link.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            distrust(&link, &link_name).is_some(),
            "a link to a good record is not one"
        );
    }

    #[test]
    fn artifacts_are_the_runs_only_with_its_marker() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(!marked(tmp.path(), "6748a1b2-abcdef"));
        mark(tmp.path(), "6748a1b2-abcdef").unwrap();
        assert!(marked(tmp.path(), "6748a1b2-abcdef"));
        assert!(!marked(tmp.path(), "6748a1b2-000000"), "another run's marker");
        std::fs::remove_file(tmp.path().join(MARKER_FILE)).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::write(&elsewhere, "6748a1b2-abcdef").unwrap();
        std::os::unix::fs::symlink(&elsewhere, tmp.path().join(MARKER_FILE)).unwrap();
        assert!(!marked(tmp.path(), "6748a1b2-abcdef"), "a linked marker");
    }
}
