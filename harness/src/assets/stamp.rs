//! A build's record of what it left: the architecture it was built for, and each file's size and SHA-256,
//! written into the staging directory before it is renamed into place. A cached directory is reused only while its
//! files still hash to the record and the record names this host's architecture: a binary truncated, replaced,
//! restored from another machine's cache (an arm64 runner given x86-64 binaries keeps their sizes and times) or
//! merely made executable by someone else is built again, not executed. A file's hash is taken once per process
//! while the file stays as it was (inode, size, mtime, ctime).
//!
//! Caches are kept under `<cache>/<name>/<arch>/`; a directory of the older layout (`<cache>/<name>/<version>`,
//! stamped by size and mtime) is adopted once, when its record still holds and its executables are this host's
//! architecture, so a warm cache is not rebuilt.
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The record's file name inside a cached directory.
const STAMP: &str = ".nodejoin-stamp";
/// The record's first line: its format and the architecture the files are for.
fn header() -> String {
    format!("nodejoin-stamp 2 arch={}", std::env::consts::ARCH)
}

/// `<cache>/<name>/<arch>`: where the builds of `name` for this host's architecture are kept.
pub fn arch_dir(cache: &Path, name: &str) -> PathBuf {
    cache.join(name).join(std::env::consts::ARCH)
}

/// What a file was when its hash was taken: a hash is reused only while all of it holds.
type Identity = (u64, u64, u64, i64, i64, i64, i64);

static DIGESTS: Mutex<Option<HashMap<PathBuf, (Identity, String)>>> = Mutex::new(None);

fn identity(m: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    (
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    )
}

/// `path`'s SHA-256 (hex), taken once per process while the file stays as it was; `None` if it is not a
/// regular file or cannot be read.
fn digest(path: &Path) -> Option<String> {
    let m = std::fs::symlink_metadata(path).ok()?;
    if !m.is_file() {
        return None;
    }
    let id = identity(&m);
    let mut memo = DIGESTS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((seen, d)) = memo.get_or_insert_with(HashMap::new).get(path) {
        if *seen == id {
            return Some(d.clone());
        }
    }
    drop(memo);
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(path).ok()?;
    std::io::copy(&mut f, &mut h).ok()?;
    let d = hex::encode(h.finalize());
    let after = std::fs::symlink_metadata(path).ok().map(|m| identity(&m));
    if after == Some(id) {
        let mut memo = DIGESTS.lock().unwrap_or_else(|p| p.into_inner());
        memo.get_or_insert_with(HashMap::new)
            .insert(path.to_path_buf(), (id, d.clone()));
    }
    Some(d)
}

/// Every entry of `dir` but the record itself and the digest sidecars later readers add (`<file>.sha256`,
/// `node::inputs::file_digest`), sorted; `None` if one is not a regular file.
fn names(dir: &Path) -> Option<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != STAMP && !n.ends_with(".sha256"))
        .collect();
    names.sort();
    names
        .iter()
        .all(|n| std::fs::symlink_metadata(dir.join(n)).is_ok_and(|m| m.is_file()))
        .then_some(names)
}

/// The record of `dir` as it is now: the header, then `name size sha256` per file.
fn record(dir: &Path) -> Option<String> {
    let mut text = header() + "\n";
    for n in names(dir)? {
        let path = dir.join(&n);
        let size = std::fs::symlink_metadata(&path).ok()?.len();
        text.push_str(&format!("{n} {size} {}\n", digest(&path)?));
    }
    Some(text)
}

/// The record of the older format (size and mtime per file), as such a build wrote it.
fn legacy_record(dir: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let mut text = String::new();
    for n in names(dir)? {
        let m = std::fs::symlink_metadata(dir.join(&n)).ok()?;
        text.push_str(&format!("{n} {} {}.{}\n", m.size(), m.mtime(), m.mtime_nsec()));
    }
    Some(text)
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

/// Whether `dir` holds `required` executable and every file exactly as its build recorded it, for this host's
/// architecture.
pub fn matches(dir: &Path, required: &[&str]) -> bool {
    let Ok(recorded) = std::fs::read_to_string(dir.join(STAMP)) else {
        return false;
    };
    recorded.starts_with(&(header() + "\n"))
        && required.iter().all(|n| super::is_executable(&dir.join(n)))
        && record(dir).is_some_and(|now| now == recorded)
}

/// The ELF machine of this host's architecture, if known.
fn host_machine() -> Option<u16> {
    match std::env::consts::ARCH {
        "x86_64" => Some(62),
        "aarch64" => Some(183),
        _ => None,
    }
}

/// Whether `path` is an ELF executable for this host (a script, for no architecture, counts as one).
fn for_this_host(path: &Path) -> bool {
    use std::io::Read;
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(20).read_to_end(&mut head));
    match (read, head.starts_with(b"\x7fELF")) {
        (Err(_), _) => false,
        (Ok(_), false) => true,
        (Ok(_), true) => head.len() == 20 && host_machine() == Some(u16::from_le_bytes([head[18], head[19]])),
    }
}

/// `dir` of the layout in use, adopting `legacy` (the older layout's directory of the same build) into it first
/// when `dir` does not exist, `legacy`'s record of the older format still holds and its executables are for this
/// host: it is renamed into place and recorded anew (hashes taken now, as a build takes them).
pub fn adopt(legacy: &Path, dir: &Path, required: &[&str]) {
    if dir.exists() || !legacy.is_dir() {
        return;
    }
    let Ok(recorded) = std::fs::read_to_string(legacy.join(STAMP)) else {
        return;
    };
    let holds = legacy_record(legacy).is_some_and(|now| now == recorded)
        && required.iter().all(|n| {
            let p = legacy.join(n);
            super::is_executable(&p) && for_this_host(&p)
        });
    if !holds {
        return;
    }
    let Some(parent) = dir.parent() else { return };
    if std::fs::create_dir_all(parent).is_ok() && std::fs::rename(legacy, dir).is_ok() && write(dir, required).is_err()
    {
        let _ = std::fs::remove_file(dir.join(STAMP));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn executable(path: &Path, bytes: &[u8]) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, bytes).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_cached_build_is_trusted_only_as_its_build_left_it() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("kubelet");
        executable(&bin, b"#!/bin/sh\necho real\n");
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

    /// Same size, same modification time, other bytes (as a cache restored from elsewhere keeps them): the
    /// content decides. A record for another architecture is not this host's.
    #[test]
    fn the_content_and_the_architecture_decide_not_the_size_and_time() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("kubelet");
        executable(&bin, b"#!/bin/sh\necho real\n");
        write(dir.path(), &["kubelet"]).unwrap();
        let when = std::fs::metadata(&bin).unwrap().modified().unwrap();
        std::fs::write(&bin, b"#!/bin/sh\necho fake\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&bin)
            .unwrap()
            .set_modified(when)
            .unwrap();
        assert!(
            !matches(dir.path(), &["kubelet"]),
            "other bytes of the same size and time"
        );
        executable(&bin, b"#!/bin/sh\necho real\n");
        write(dir.path(), &["kubelet"]).unwrap();
        let text = std::fs::read_to_string(dir.path().join(STAMP)).unwrap();
        let other = text.replace(&format!("arch={}", std::env::consts::ARCH), "arch=riscv64");
        std::fs::write(dir.path().join(STAMP), other).unwrap();
        assert!(!matches(dir.path(), &["kubelet"]), "a build for another architecture");
    }

    /// A directory of the older layout and record is adopted when its record holds and its executables are for
    /// this host; an ELF binary for another machine is not.
    #[test]
    fn an_older_cache_is_adopted_only_when_it_holds_and_is_for_this_host() {
        let cache = tempfile::tempdir().unwrap();
        let legacy_stamp = |dir: &Path| std::fs::write(dir.join(STAMP), legacy_record(dir).unwrap()).unwrap();
        let legacy = cache.path().join("k8s/v1.36.3");
        std::fs::create_dir_all(&legacy).unwrap();
        executable(&legacy.join("kubelet"), b"#!/bin/sh\n");
        legacy_stamp(&legacy);
        let dir = arch_dir(cache.path(), "k8s").join("v1.36.3");
        adopt(&legacy, &dir, &["kubelet"]);
        assert!(
            !legacy.exists() && matches(&dir, &["kubelet"]),
            "adopted and recorded anew"
        );
        // An ELF binary of another machine (e_machine 0x2a, SuperH) stays where it is, untrusted.
        let foreign = cache.path().join("k8s/v1.35.4");
        std::fs::create_dir_all(&foreign).unwrap();
        let mut elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x02\0\x2a\0".to_vec();
        elf.extend_from_slice(&[0; 64]);
        executable(&foreign.join("kubelet"), &elf);
        legacy_stamp(&foreign);
        let dir = arch_dir(cache.path(), "k8s").join("v1.35.4");
        adopt(&foreign, &dir, &["kubelet"]);
        assert!(foreign.exists() && !dir.exists(), "a foreign binary was adopted");
        // One whose record no longer holds is not adopted either.
        let changed = cache.path().join("k8s/v1.34.4");
        std::fs::create_dir_all(&changed).unwrap();
        executable(&changed.join("kubelet"), b"#!/bin/sh\n");
        legacy_stamp(&changed);
        executable(&changed.join("kubelet"), b"#!/bin/sh\necho planted\n");
        let dir = arch_dir(cache.path(), "k8s").join("v1.34.4");
        adopt(&changed, &dir, &["kubelet"]);
        assert!(!dir.exists());
    }
}
