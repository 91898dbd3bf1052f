//! A build's record of what it left: each file's size and modification time, written into the staging directory
//! before it is renamed into place. A cached directory is reused only while its files still match the record: a
//! binary truncated, replaced or merely made executable by someone else is built again, not executed.
use std::path::Path;

/// The record's file name inside a cached directory.
const STAMP: &str = ".nodejoin-stamp";

fn line(dir: &Path, name: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(dir.join(name)).ok()?;
    m.is_file()
        .then(|| format!("{name} {} {}.{}", m.size(), m.mtime(), m.mtime_nsec()))
}

/// Every entry of `dir` but the record itself and the digest sidecars later readers add (`<file>.sha256`,
/// `node::inputs::file_digest`), sorted; `None` if one is not a regular file.
fn record(dir: &Path) -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != STAMP && !n.ends_with(".sha256"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| line(dir, n))
        .collect::<Option<Vec<_>>>()
        .map(|l| l.join("\n") + "\n")
}

/// Writes the record of every file in `dir`, which must hold `required`.
pub fn write(dir: &Path, required: &[&str]) -> std::io::Result<()> {
    let missing = required.iter().find(|n| !super::is_executable(&dir.join(n)));
    let text = match (missing, record(dir)) {
        (None, Some(text)) => text,
        (Some(n), _) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} lacks the executable {n}", dir.display()),
            ))
        }
        (None, None) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} holds something other than files", dir.display()),
            ))
        }
    };
    std::fs::write(dir.join(STAMP), text)
}

/// Whether `dir` holds `required` executable and every file exactly as its build recorded it.
pub fn matches(dir: &Path, required: &[&str]) -> bool {
    let Ok(recorded) = std::fs::read_to_string(dir.join(STAMP)) else {
        return false;
    };
    required.iter().all(|n| super::is_executable(&dir.join(n))) && record(dir).is_some_and(|now| now == recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_build_is_trusted_only_as_its_build_left_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("kubelet");
        std::fs::write(&bin, b"#!/bin/sh\necho real\n").unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!matches(dir.path(), &["kubelet"]), "no record: not a finished build");
        write(dir.path(), &["kubelet"]).unwrap();
        assert!(matches(dir.path(), &["kubelet"]));
        // A reader's digest sidecar is not a change to the build.
        std::fs::write(dir.path().join("kubelet.sha256"), b"0 0\n").unwrap();
        assert!(matches(dir.path(), &["kubelet"]), "a digest sidecar broke the record");
        std::fs::write(dir.path().join("extra"), b"x").unwrap();
        assert!(!matches(dir.path(), &["kubelet"]), "a file added after the build");
        std::fs::remove_file(dir.path().join("extra")).unwrap();
        std::fs::write(&bin, b"#!/bin/sh\necho planted\n").unwrap();
        assert!(!matches(dir.path(), &["kubelet"]), "replaced after the build");
        assert!(write(dir.path(), &["kubelet", "missing"]).is_err());
    }
}
