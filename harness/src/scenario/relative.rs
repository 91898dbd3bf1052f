//! Paths in a scenario (bootstrap script, image overlay, user-data file, golden files) are relative to the
//! scenario file's directory, so scenarios can live next to the bootstrap code they test, in any repository, and
//! still mean the same thing from any working directory. Absolute paths are taken as they are.
//!
//! The user-data file is read while the YAML is deserialised (its errors carry the line), before the scenario
//! exists; the directory is therefore set for the parsing thread by [`enter`] and read by [`resolve`].
use std::cell::RefCell;
use std::path::{Path, PathBuf};

thread_local! {
    static BASE: RefCell<Option<(PathBuf, Vec<PathBuf>)>> = const { RefCell::new(None) };
}

/// While the guard lives, [`resolve`] on this thread resolves against `dir`.
pub struct BaseGuard {
    previous: Option<(PathBuf, Vec<PathBuf>)>,
}

impl Drop for BaseGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        BASE.with(|b| *b.borrow_mut() = previous);
    }
}

/// Makes `dir` the base of relative paths on this thread until the guard is dropped; `allow` are the caller's
/// directories its paths may lead into too ([`roots`]).
pub fn enter(dir: &Path, allow: &[PathBuf]) -> BaseGuard {
    let previous = BASE.with(|b| b.borrow_mut().replace((dir.to_path_buf(), allow.to_vec())));
    BaseGuard { previous }
}

/// The directory a scenario file's relative paths are resolved against: its own, made absolute.
pub fn dir_of(file: &Path) -> PathBuf {
    let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.is_absolute() {
        return dir;
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(dir),
        Err(_) => dir,
    }
}

/// `path` resolved against the current base (see [`enter`]); absolute paths, and any path when no base is set,
/// are returned as they are.
pub fn resolve(path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        return p.to_path_buf();
    }
    BASE.with(|b| match b.borrow().as_ref() {
        Some((base, _)) => normalise(&base.join(p)),
        None => p.to_path_buf(),
    })
}

/// Where the paths of the scenario being parsed on this thread may lead (see [`enter`]); nothing is confined
/// when no scenario is being parsed.
pub fn roots() -> super::confine::Roots {
    BASE.with(|b| {
        b.borrow()
            .as_ref()
            .map(|(dir, allow)| super::confine::Roots::of_dir(dir, allow))
            .unwrap_or_default()
    })
}

/// Removes `.` and `..` components lexically (no file system access: the path may not exist yet, and an error
/// should name the path the user meant, `/repo/fixtures/x`, not `/repo/nodejoin/../fixtures/x`).
fn normalise(p: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The note errors about a missing file add, so the user sees why a path resolved where it did.
pub const HINT: &str = "relative paths are resolved against the scenario file's directory";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_resolve_against_the_entered_directory() {
        assert_eq!(resolve("a/b.sh"), PathBuf::from("a/b.sh"));
        {
            let _g = enter(Path::new("/repo/nodejoin/scenarios"), &[]);
            assert_eq!(
                resolve("../../scripts/bootstrap.sh"),
                PathBuf::from("/repo/scripts/bootstrap.sh")
            );
            assert_eq!(
                resolve("./golden/x.conf"),
                PathBuf::from("/repo/nodejoin/scenarios/golden/x.conf")
            );
            assert_eq!(resolve("/abs/x"), PathBuf::from("/abs/x"));
            {
                let _inner = enter(Path::new("/other"), &[]);
                assert_eq!(resolve("x"), PathBuf::from("/other/x"));
            }
            assert_eq!(resolve("x"), PathBuf::from("/repo/nodejoin/scenarios/x"));
        }
        assert_eq!(resolve("x"), PathBuf::from("x"));
    }

    #[test]
    fn a_scenario_files_directory_is_absolute() {
        assert_eq!(dir_of(Path::new("/repo/s/a.yaml")), PathBuf::from("/repo/s"));
        assert!(dir_of(Path::new("a.yaml")).is_absolute());
        assert!(dir_of(Path::new("s/a.yaml")).ends_with("s"));
    }
}
