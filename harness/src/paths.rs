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
