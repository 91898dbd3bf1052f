//! nodeadm, the AL2023 EKS node bootstrap, built unmodified from its own Go module and cached like the
//! Kubernetes binaries: an explicit binary (`NODEJOIN_NODEADM`), the cache, or a Go build through
//! `fixtures/nodeadm-build/build.sh`. It goes into the node image at `/usr/bin/nodeadm`, as on an AL2023 AMI.
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The nodeadm module version built by default. nodeadm has no semver tags, only pseudo-versions, and this is
/// the newest one the Go module proxy serves as `@latest` (a branch query such as `@main` is refused by the
/// proxy this project's CI uses). Override with `NODEJOIN_NODEADM_VERSION`.
pub const DEFAULT_VERSION: &str = "v0.0.0-20240229193347-cfab22a10647";
/// A nodeadm binary to use as-is.
pub const ENV_BIN: &str = "NODEJOIN_NODEADM";
/// The module version to build instead of [`DEFAULT_VERSION`].
pub const ENV_VERSION: &str = "NODEJOIN_NODEADM_VERSION";
pub const MODULE: &str = "github.com/awslabs/amazon-eks-ami/nodeadm";

/// The version asked for (environment, else the default).
pub fn version() -> String {
    std::env::var(ENV_VERSION)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_VERSION.to_string())
}

/// `<cache>/nodeadm/<version>/`.
pub fn cache_dir(version: &str) -> PathBuf {
    crate::paths::cache_dir().join("nodeadm").join(version)
}

/// A Go module version: `vMAJOR.MINOR.PATCH` with an optional pre-release such as a pseudo-version's
/// `-20240229193347-cfab22a10647`; nothing that could escape the cache directory or the shell.
pub fn check_version(version: &str) -> std::result::Result<(), String> {
    let ok = version.starts_with('v')
        && version.len() < 80
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
        && !version.contains("..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{version}' is not a Go module version (like {DEFAULT_VERSION})"
        ))
    }
}

fn unavailable(version: &str, tried: impl Into<String>) -> Error {
    Error::NodeadmUnavailable {
        version: version.to_string(),
        tried: tried.into(),
    }
}

/// Only the sources that need no work: the environment and the cache.
pub fn find() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(ENV_BIN) {
        let p = PathBuf::from(p);
        return super::is_executable(&p).then_some(p);
    }
    let bin = cache_dir(&version()).join("nodeadm");
    super::is_executable(&bin).then_some(bin)
}

/// Resolves the nodeadm binary, building it into the cache when needed.
pub async fn resolve() -> Result<PathBuf> {
    let version = version();
    if let Some(p) = std::env::var_os(ENV_BIN) {
        let p = PathBuf::from(p);
        return if super::is_executable(&p) {
            Ok(p)
        } else {
            Err(unavailable(
                &version,
                format!("{ENV_BIN}={} (not an executable file)", p.display()),
            ))
        };
    }
    check_version(&version).map_err(|e| unavailable(&version, e))?;
    let cache = cache_dir(&version);
    let bin = cache.join("nodeadm");
    if super::is_executable(&bin) {
        return Ok(bin);
    }
    let _lock = crate::paths::CacheLock::acquire("nodeadm")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(), e))?;
    if super::is_executable(&bin) {
        return Ok(bin);
    }
    let staging = cache.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    if let Err(e) = go_build(&version, &staging).await {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(unavailable(
            &version,
            format!(
                "{ENV_BIN} (unset); cache {} (empty); Go module build ({e})",
                cache.display()
            ),
        ));
    }
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::rename(&staging, &cache).map_err(|e| Error::io(&cache, e))?;
    Ok(bin)
}

/// `go install` of nodeadm's command at `version` (about a minute cold on 2 cores).
async fn go_build(version: &str, out: &Path) -> std::result::Result<(), String> {
    super::run_go_build_script(
        "nodeadm-build",
        &format!("build nodeadm {version} from Go modules"),
        2,
        version,
        out,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_checked() {
        assert!(check_version(DEFAULT_VERSION).is_ok());
        assert!(check_version("v1.2.3").is_ok());
        for bad in ["main", "v1/../../x", "v1;rm -rf", "", "1.2.3"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }
}
