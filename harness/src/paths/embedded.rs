//! The `fixtures/` and `kind-config/` packed into the binary (build.rs), unpacked once into the cache: the node
//! image recipe, the reference bootstrap and the Go build modules are files that scripts, Dockerfiles and `go
//! build` read from disk, so they are unpacked rather than read from memory.
use std::path::PathBuf;

static ARCHIVE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/share.tar"));
/// The archive's SHA-256 prefix: each build's files get their own directory.
const HASH: &str = env!("EMBEDDED_SHARE_HASH");
/// Written last: a directory without it is an unpacking that was interrupted.
const COMPLETE: &str = ".complete";

/// `<cache>/share/<hash>/`, unpacked if it is not there yet. Failing to unpack is logged, and the path returned
/// anyway: whatever needs a file there then fails naming the file.
///
/// Scripts there run as root, and a cache can be restored from elsewhere (a CI cache restored by prefix, another
/// user's planting): a copy already there is used only once it matches the archive in this binary, entry by entry
/// ([`differs`], once per process); one that does not is unpacked again.
pub fn unpacked(settings: &crate::settings::Settings) -> PathBuf {
    let dir = super::cache_dir(settings).join("share").join(HASH);
    let mut verified = VERIFIED.lock().unwrap_or_else(|p| p.into_inner());
    if verified.contains(&dir) {
        return dir;
    }
    let result = match dir.join(COMPLETE).is_file() {
        true => match differs(&dir) {
            None => Ok(()),
            Some(why) => {
                tracing::warn!(
                    "the unpacked copy of nodejoin's own files in {} is not this binary's ({why}): unpacked again",
                    dir.display()
                );
                replace(&dir)
            }
        },
        false => unpack(&dir),
    };
    match result {
        Ok(()) => verified.push(dir.clone()),
        Err(e) => tracing::error!("unpacking nodejoin's own files into {}: {e}", dir.display()),
    }
    dir
}

/// The unpacked copies this process has checked against the archive (or unpacked itself).
static VERIFIED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

/// Whether [`unpacked`] found `dir` to be the archive's (checked, or unpacked anew) in this process.
pub fn verified(dir: &std::path::Path) -> bool {
    VERIFIED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .any(|d| d == dir)
}

/// How `dir` differs from the archive, if it does: an entry missing, of another kind, mode, content or link target,
/// or one the archive does not have (`.complete` aside). Nothing is followed: a link is compared as a link.
fn differs(dir: &std::path::Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {}
        _ => return Some(format!("{} is not a directory", dir.display())),
    }
    let mut archive = tar::Archive::new(ARCHIVE);
    let mut expected = std::collections::BTreeSet::new();
    // The archive's links: any other link on disk (a directory swapped for one) differs.
    let mut links = std::collections::BTreeSet::new();
    let entries = match archive.entries() {
        Ok(e) => e,
        Err(e) => return Some(format!("the packed archive: {e}")),
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(e) => e,
            Err(e) => return Some(format!("the packed archive: {e}")),
        };
        let Ok(rel) = entry.path().map(|p| {
            p.components()
                .filter(|c| matches!(c, std::path::Component::Normal(_)))
                .collect::<PathBuf>()
        }) else {
            return Some("the packed archive has a path that is not one".into());
        };
        if rel.as_os_str().is_empty() {
            continue;
        }
        let on_disk = dir.join(&rel);
        let Ok(meta) = std::fs::symlink_metadata(&on_disk) else {
            return Some(format!("{} is missing", rel.display()));
        };
        let kind = entry.header().entry_type();
        let same = if kind.is_dir() {
            meta.is_dir()
        } else if kind.is_symlink() {
            let want = entry.link_name().ok().flatten().map(|l| l.into_owned());
            meta.file_type().is_symlink() && std::fs::read_link(&on_disk).ok() == want
        } else {
            let mode = entry.header().mode().unwrap_or(0) & 0o7777;
            let mut packed = Vec::new();
            meta.is_file()
                && meta.permissions().mode() & 0o7777 == mode
                && entry.read_to_end(&mut packed).is_ok()
                && std::fs::read(&on_disk).ok() == Some(packed)
        };
        if !same {
            return Some(format!("{} differs", rel.display()));
        }
        if kind.is_symlink() {
            links.insert(rel.clone());
        }
        // Its directories are the archive's too, whether or not it lists them.
        expected.extend(rel.ancestors().filter(|a| !a.as_os_str().is_empty()).map(PathBuf::from));
    }
    for e in walkdir::WalkDir::new(dir).min_depth(1).follow_links(false) {
        let Ok(e) = e else {
            return Some("a directory cannot be read".into());
        };
        let rel = e.path().strip_prefix(dir).unwrap_or(e.path()).to_path_buf();
        if rel.as_os_str() != COMPLETE && !expected.contains(&rel) {
            return Some(format!("{} is not nodejoin's", rel.display()));
        }
        if e.path_is_symlink() && !links.contains(&rel) {
            return Some(format!("{} is a link, not nodejoin's directory", rel.display()));
        }
    }
    None
}

/// Unpacks `dir` again beside it and swaps the two: the old copy is moved aside, then removed.
fn replace(dir: &std::path::Path) -> std::io::Result<()> {
    let parent = dir.parent().unwrap_or(dir);
    let aside = tempfile::Builder::new().prefix(".stale-").tempdir_in(parent)?.keep();
    std::fs::rename(dir, aside.join("copy"))?;
    let unpacked = unpack(dir);
    let _ = std::fs::remove_dir_all(&aside);
    unpacked
}

/// Unpacks into a private sibling and renames it into place, so concurrent runs never see half a copy.
fn unpack(dir: &std::path::Path) -> std::io::Result<()> {
    let parent = dir.parent().unwrap_or(dir);
    std::fs::create_dir_all(parent)?;
    let staging = tempfile::Builder::new().prefix(".unpacking-").tempdir_in(parent)?;
    let mut archive = tar::Archive::new(ARCHIVE);
    archive.set_preserve_permissions(true);
    archive.unpack(staging.path())?;
    std::fs::write(staging.path().join(COMPLETE), HASH)?;
    let staged = staging.keep();
    match std::fs::rename(&staged, dir) {
        Ok(()) => Ok(()),
        // Another process got there first: its copy is the same archive.
        Err(_) if dir.join(COMPLETE).is_file() => {
            let _ = std::fs::remove_dir_all(&staged);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staged);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_packed_files_unpack_with_their_modes_and_links() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("share");
        super::unpack(&dir).unwrap();
        let script = dir.join("fixtures/bootstrap/bootstrap.sh");
        assert!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o111 != 0);
        assert!(dir.join("fixtures/node-image/Dockerfile").is_file());
        assert!(dir.join("kind-config/cluster.yaml").is_file());
        let link = dir.join("fixtures/overlay-example/etc/eks/eni-limits.txt");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert!(link.is_file(), "the link resolves inside the unpacked copy");
        // Unpacking again over a complete copy is harmless.
        super::unpack(&dir).unwrap();
        assert_eq!(super::differs(&dir), None, "a fresh copy is the archive's");
        // The packed reference bootstrap is the checkout's.
        let checkout = crate::paths::checkout_root().unwrap();
        assert_eq!(
            std::fs::read(&script).unwrap(),
            std::fs::read(checkout.join("fixtures/bootstrap/bootstrap.sh")).unwrap()
        );
    }

    #[test]
    fn a_copy_that_is_not_the_archives_is_told_and_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("share");
        super::unpack(&dir).unwrap();
        let script = dir.join("fixtures/bootstrap/bootstrap.sh");
        let original = std::fs::read(&script).unwrap();
        // A poisoned cache: a script changed, a file added, a mode widened, a link turned elsewhere.
        for (poison, says) in [
            (
                Box::new(|d: &std::path::Path| {
                    std::fs::write(
                        d.join("fixtures/bootstrap/bootstrap.sh"),
                        "#!/bin/sh\nid > /tmp/owned\n",
                    )
                    .unwrap()
                }) as Box<dyn Fn(&std::path::Path)>,
                "fixtures/bootstrap/bootstrap.sh differs",
            ),
            (
                Box::new(|d: &std::path::Path| std::fs::write(d.join("fixtures/extra.sh"), "x").unwrap()),
                "fixtures/extra.sh is not nodejoin's",
            ),
            (
                Box::new(|d: &std::path::Path| {
                    let p = d.join("kind-config/cluster.yaml");
                    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap()
                }),
                "kind-config/cluster.yaml differs",
            ),
            (
                Box::new(|d: &std::path::Path| {
                    let l = d.join("fixtures/overlay-example/etc/eks/eni-limits.txt");
                    std::fs::remove_file(&l).unwrap();
                    std::os::unix::fs::symlink("/etc/shadow", &l).unwrap();
                }),
                "eni-limits.txt differs",
            ),
            (
                // The same files, through a directory swapped for a link (to a place its planter can change).
                Box::new(|d: &std::path::Path| {
                    let elsewhere = d.parent().unwrap().join("elsewhere");
                    std::fs::rename(d.join("kind-config"), &elsewhere).unwrap();
                    std::os::unix::fs::symlink(&elsewhere, d.join("kind-config")).unwrap();
                }),
                "kind-config is a link",
            ),
        ] {
            poison(&dir);
            let why = super::differs(&dir).expect("the poisoned copy passed");
            assert!(why.contains(says), "{why}");
            super::replace(&dir).unwrap();
            assert_eq!(super::differs(&dir), None);
            assert_eq!(std::fs::read(&script).unwrap(), original);
        }
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "elsewhere")
            .collect();
        assert_eq!(left, ["share"], "the stale copy is left behind");
    }
}
