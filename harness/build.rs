//! Packs `fixtures/` and `kind-config/` (the reference bootstrap, the node-image recipe, the Go build modules,
//! the kind config) into the binary as one tar archive. They are read through `share/`, whose two links lead to the
//! workspace's top-level folders: `cargo package` follows them, so the published crate carries the files itself
//! and builds the same binary without a checkout around it. So a `cargo install`ed nodejoin works without a
//! checkout (`paths::share_root` unpacks the archive into the cache on first use). The archive is deterministic (sorted entries,
//! no timestamps) and its SHA-256 names the unpacked copy, so a new build never reuses a stale one.
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

const DIRS: &[&str] = &["fixtures", "kind-config"];
/// Left out: producers' renderers (Go sources the binary never reads, where a developer may build a binary).
const SKIP: &[&str] = &["fixtures/producers"];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest.join("share");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default()).join("share.tar");
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    for dir in DIRS {
        let top = root.join(dir);
        println!("cargo:rerun-if-changed={}", top.display());
        let mut entries = Vec::new();
        walk(&top, &mut entries);
        entries.sort();
        for path in entries {
            let Ok(rel) = path.strip_prefix(&root) else { continue };
            if let Err(e) = append(&mut builder, &path, rel) {
                panic!("packing {}: {e}", path.display());
            }
        }
    }
    let bytes = match builder.into_inner() {
        Ok(b) => b,
        Err(e) => panic!("packing the share archive: {e}"),
    };
    let hash = hex(&Sha256::digest(&bytes)[..8]);
    if let Err(e) = std::fs::write(&out, &bytes) {
        panic!("writing {}: {e}", out.display());
    }
    println!("cargo:rustc-env=EMBEDDED_SHARE_HASH={hash}");
    // The commit a release is built from (ci/release.sh passes GitHub's), so `nodejoin init` pins the action its
    // workflow uses by commit; empty for any other build (init then says to pin it).
    println!("cargo:rerun-if-env-changed=NODEJOIN_RELEASE_COMMIT");
    let commit = std::env::var("NODEJOIN_RELEASE_COMMIT").unwrap_or_default();
    let commit = match commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        true => commit,
        false => String::new(),
    };
    println!("cargo:rustc-env=NODEJOIN_ACTION_COMMIT={commit}");
}

/// Every file and symlink below `dir` (a missing directory packs nothing: a crate packaged without them).
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if SKIP.iter().any(|s| p.ends_with(s)) {
            continue;
        }
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => walk(&p, out),
            Ok(_) => out.push(p),
            Err(_) => {}
        }
    }
}

fn append(b: &mut tar::Builder<Vec<u8>>, path: &Path, rel: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    let mut header = tar::Header::new_gnu();
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    if meta.file_type().is_symlink() {
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        header.set_mode(0o777);
        let target = std::fs::read_link(path)?;
        b.append_link(&mut header, rel, target)
    } else {
        let data = std::fs::read(path)?;
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(data.len() as u64);
        header.set_mode(if meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        });
        b.append_data(&mut header, rel, data.as_slice())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
