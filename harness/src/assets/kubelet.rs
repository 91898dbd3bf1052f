//! A kubelet alone, for a node group that runs another version than its control plane (`kubeletVersion`: version
//! skew): only what a version is used for is provisioned. Resolved like the others: from the version's whole set
//! when the cache (or the assets directory) holds it, else the cache (`<cache>/k8s/<version>-kubelet/`), the
//! official download (checksummed), or a build from Go modules through `fixtures/k8s-build/build.sh`.
use super::{check_version, ReleaseUrls, ENV_DIR};
use crate::error::{Error, Result};
use crate::progress::Steps;
use crate::settings::Settings;
use std::path::{Path, PathBuf};

const BINARIES: [&str; 1] = ["kubelet"];

/// A kubelet binary and the version it was built as: what a node image is made with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kubelet {
    pub version: String,
    pub path: PathBuf,
}

/// `<cache>/k8s/<arch>/<version>-kubelet/` (the older layout's adopted first: `stamp::adopt`).
pub fn cache_dir(settings: &Settings, version: &str) -> PathBuf {
    let cache = crate::paths::cache_dir(settings);
    let name = format!("{version}-kubelet");
    let dir = super::stamp::arch_dir(&cache, "k8s").join(&name);
    super::stamp::adopt(&cache.join("k8s").join(&name), &dir, &BINARIES);
    dir
}

/// Only what needs no work: the version's whole set, else its kubelet alone in the cache.
pub fn find(settings: &Settings, version: &str) -> Option<Kubelet> {
    if let Some(all) = super::find(settings, version) {
        return Some(all.kubelet_binary());
    }
    let dir = cache_dir(settings, version);
    super::stamp::matches(&dir, &BINARIES).then(|| Kubelet {
        version: version.to_string(),
        path: dir.join("kubelet"),
    })
}

/// The kubelet a node group runs: the control plane's own (`all`), or `wanted`'s alone (`kubeletVersion`).
pub async fn for_group(settings: &Settings, all: &super::K8sAssets, wanted: Option<&str>) -> Result<Kubelet> {
    match wanted {
        Some(v) if v != all.version => resolve(settings, v).await,
        _ => Ok(all.kubelet_binary()),
    }
}

/// Resolves the kubelet of `version`, downloading or building it alone into the cache when needed.
pub async fn resolve(settings: &Settings, version: &str) -> Result<Kubelet> {
    check_version(version)?;
    if let Some(k) = find(settings, version) {
        return Ok(k);
    }
    let cache = cache_dir(settings, version);
    let _lock = crate::paths::CacheLock::acquire(settings, "k8s")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
    if let Some(k) = find(settings, version) {
        return Ok(k);
    }
    let tried = vec![
        format!("{ENV_DIR} (unset or not {version})"),
        format!("cache {} (empty)", cache.display()),
    ];
    let staging = cache.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    let downloaded = download(&ReleaseUrls::from_settings(settings), version, &staging).await;
    let title = format!("build the kubelet {version} from Go modules");
    super::download_else_build(version, &staging, tried, downloaded, || {
        super::run_go_build_script(settings, "k8s-build", &title, 1, (&[], &BINARIES), version, &staging)
    })
    .await?;
    super::stamp::write(&staging, &BINARIES).map_err(|e| Error::io(&staging, e))?;
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::rename(&staging, &cache).map_err(|e| Error::io(&cache, e))?;
    find(settings, version).ok_or_else(|| Error::AssetsUnavailable {
        version: version.into(),
        tried: format!("provisioning finished but {} lacks the kubelet", cache.display()),
    })
}

async fn download(urls: &ReleaseUrls, version: &str, out: &Path) -> std::result::Result<(), String> {
    let client = super::release_client()?;
    let steps = Steps::new(&format!("download the kubelet {version}"), 1);
    super::download_kubernetes(&client, urls, version, &BINARIES, out, &steps).await?;
    steps.finish("downloaded");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubelet_alone_is_found_only_as_its_build_left_it() {
        let cache = tempfile::tempdir().unwrap();
        let mut settings = crate::settings::for_tests();
        settings.cache_dir = Some(cache.path().to_path_buf());
        assert_eq!(find(&settings, "v1.34.4"), None);
        let dir = cache_dir(&settings, "v1.34.4");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("kubelet"), b"#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join("kubelet"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find(&settings, "v1.34.4"), None, "no stamp: not trusted");
        super::super::stamp::write(&dir, &BINARIES).unwrap();
        let k = find(&settings, "v1.34.4").unwrap();
        assert_eq!(k.path, dir.join("kubelet"));
        assert_eq!(k.version, "v1.34.4");
    }
}
