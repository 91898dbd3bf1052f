//! The Kubernetes binaries a kubeadm node needs beyond the ones the local provider and the node image use
//! (kubeadm, kubectl, kube-scheduler, kube-proxy): what the kind node image is built from. Resolved like the
//! others: the assets directory setting when it holds them, the cache (`<cache>/k8s/<version>-kubeadm/`), the official
//! download (checksummed), or a build from Go modules through `fixtures/k8s-build/build.sh`.
use super::{check_version, is_executable, ReleaseUrls, ENV_DIR};
use crate::error::{Error, Result};
use crate::progress::Steps;
use crate::settings::Settings;
use std::path::{Path, PathBuf};

pub const BINARIES: [&str; 4] = ["kubeadm", "kubectl", "kube-scheduler", "kube-proxy"];

/// The resolved binaries of one version, all in `dir`.
#[derive(Debug, Clone)]
pub struct KubeadmBinaries {
    pub version: String,
    pub dir: PathBuf,
}

impl KubeadmBinaries {
    fn from_dir(settings: &Settings, version: &str, dir: &Path) -> Option<Self> {
        let ok = match dir == cache_dir(settings, version) {
            // The cache is trusted only as its build left it (assets::stamp).
            true => super::stamp::matches(dir, &BINARIES),
            false => BINARIES.iter().all(|b| is_executable(&dir.join(b))),
        };
        ok.then(|| Self {
            version: version.to_string(),
            dir: dir.to_path_buf(),
        })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// `<cache>/k8s/<arch>/<version>-kubeadm/` (the older layout's adopted first: `stamp::adopt`).
pub fn cache_dir(settings: &Settings, version: &str) -> PathBuf {
    let cache = crate::paths::cache_dir(settings);
    let name = format!("{version}-kubeadm");
    let dir = super::stamp::arch_dir(&cache, "k8s").join(&name);
    super::stamp::adopt(&cache.join("k8s").join(&name), &dir, &BINARIES);
    dir
}

/// Only what needs no work: the env directory (when it holds them) and the cache.
pub fn find(settings: &Settings, version: &str) -> Option<KubeadmBinaries> {
    if let Some(dir) = settings.k8s_assets.clone() {
        if let Some(b) = KubeadmBinaries::from_dir(settings, version, Path::new(&dir)) {
            return Some(b);
        }
    }
    KubeadmBinaries::from_dir(settings, version, &cache_dir(settings, version))
}

/// Resolves the binaries, downloading or building them into the cache when needed.
pub async fn resolve(settings: &Settings, version: &str) -> Result<KubeadmBinaries> {
    check_version(version)?;
    if let Some(b) = find(settings, version) {
        return Ok(b);
    }
    let cache = cache_dir(settings, version);
    let _lock = crate::paths::CacheLock::acquire(settings, "k8s")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
    if let Some(b) = find(settings, version) {
        return Ok(b);
    }
    let tried = vec![
        format!("{ENV_DIR} (unset or without {})", BINARIES.join(", ")),
        format!("cache {} (empty)", cache.display()),
    ];
    let staging = cache.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    let downloaded = download(&ReleaseUrls::from_settings(settings), version, &staging).await;
    super::download_else_build(version, &staging, tried, downloaded, || {
        go_build(settings, version, &staging)
    })
    .await?;
    super::stamp::write(&staging, &BINARIES).map_err(|e| Error::io(&staging, e))?;
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::rename(&staging, &cache).map_err(|e| Error::io(&cache, e))?;
    KubeadmBinaries::from_dir(settings, version, &cache).ok_or_else(|| Error::AssetsUnavailable {
        version: version.into(),
        tried: format!("provisioning finished but {} lacks a binary", cache.display()),
    })
}

async fn download(urls: &ReleaseUrls, version: &str, out: &Path) -> std::result::Result<(), String> {
    let client = super::release_client()?;
    let steps = Steps::new(&format!("download kubeadm binaries {version}"), BINARIES.len() as u64);
    super::download_kubernetes(&client, urls, version, &BINARIES, out, &steps).await?;
    steps.finish("downloaded");
    Ok(())
}

/// `fixtures/k8s-build/build.sh VERSION OUT kubeadm kubectl kube-scheduler kube-proxy`.
async fn go_build(settings: &Settings, version: &str, out: &Path) -> std::result::Result<(), String> {
    super::run_go_build_script(
        settings,
        "k8s-build",
        &format!("build kubeadm binaries {version} from Go modules"),
        BINARIES.len() as u64,
        (&[], &BINARIES),
        version,
        out,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_counts_only_with_every_binary() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        for b in &BINARIES[..3] {
            let p = dir.path().join(b);
            std::fs::write(&p, b"#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        assert!(KubeadmBinaries::from_dir(&crate::settings::for_tests(), "v1.36.3", dir.path()).is_none());
        let p = dir.path().join(BINARIES[3]);
        std::fs::write(&p, b"#!/bin/sh\n").unwrap();
        assert!(
            KubeadmBinaries::from_dir(&crate::settings::for_tests(), "v1.36.3", dir.path()).is_none(),
            "not executable yet"
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let b = KubeadmBinaries::from_dir(&crate::settings::for_tests(), "v1.36.3", dir.path()).unwrap();
        assert_eq!(b.path("kubeadm"), dir.path().join("kubeadm"));
    }
}
