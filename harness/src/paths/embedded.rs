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
pub fn unpacked(settings: &crate::settings::Settings) -> PathBuf {
    let dir = super::cache_dir(settings).join("share").join(HASH);
    if dir.join(COMPLETE).is_file() {
        return dir;
    }
    if let Err(e) = unpack(&dir) {
        tracing::error!("unpacking nodejoin's own files into {}: {e}", dir.display());
    }
    dir
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
        // The packed reference bootstrap is the checkout's.
        let checkout = crate::paths::checkout_root().unwrap();
        assert_eq!(
            std::fs::read(&script).unwrap(),
            std::fs::read(checkout.join("fixtures/bootstrap/bootstrap.sh")).unwrap()
        );
    }
}
