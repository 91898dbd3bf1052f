//! Kubernetes binaries (etcd, kube-apiserver, kube-controller-manager, kubelet) for one version, resolved like
//! envtest resolves its assets: an explicit directory, the cache, the official download (checksummed), or a
//! build from Go modules through the wrapper module in `fixtures/k8s-build/`.
use crate::error::{Error, Result};
use crate::progress::Steps;
use crate::settings::Settings;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

pub mod kubeadm;
pub mod kubelet;
pub mod releases;
mod stamp;
pub mod tools;

/// The default Kubernetes version: a recent stable release published as Go modules.
pub const DEFAULT_VERSION: &str = "v1.36.3";
/// The etcd release downloaded next to official Kubernetes binaries (the one v1.36 is tested with).
pub const ETCD_VERSION: &str = "v3.6.8";
/// A directory with the four binaries, used as-is (like envtest's KUBEBUILDER_ASSETS).
pub const ENV_DIR: &str = crate::settings::var::K8S_ASSETS;
pub const BINARIES: [&str; 4] = ["etcd", "kube-apiserver", "kube-controller-manager", "kubelet"];

/// Resolved binaries of one version.
#[derive(Debug, Clone)]
pub struct K8sAssets {
    pub version: String,
    pub dir: PathBuf,
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kubelet: PathBuf,
    /// Where they came from: `env`, `cache`, `download`, `go-build`.
    pub source: &'static str,
}

impl K8sAssets {
    fn from_dir(version: &str, dir: &Path, source: &'static str) -> Option<Self> {
        // The cache is trusted only as its build left it; a user's own directory (env) only needs the binaries.
        let ok = match source {
            "env" => BINARIES.iter().all(|b| is_executable(&dir.join(b))),
            _ => stamp::matches(dir, &BINARIES),
        };
        ok.then(|| Self {
            version: version.to_string(),
            dir: dir.to_path_buf(),
            etcd: dir.join("etcd"),
            kube_apiserver: dir.join("kube-apiserver"),
            kube_controller_manager: dir.join("kube-controller-manager"),
            kubelet: dir.join("kubelet"),
            source,
        })
    }
}

impl K8sAssets {
    /// Its kubelet, what a node image of this version is made with.
    pub fn kubelet_binary(&self) -> kubelet::Kubelet {
        kubelet::Kubelet {
            version: self.version.clone(),
            path: self.kubelet.clone(),
        }
    }
}

pub(crate) fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// `<cache>/k8s/<arch>/<version>/` (a build of the older layout, `<cache>/k8s/<version>/`, adopted first:
/// [`stamp::adopt`]).
pub fn cache_dir(settings: &Settings, version: &str) -> PathBuf {
    let cache = crate::paths::cache_dir(settings);
    let dir = stamp::arch_dir(&cache, "k8s").join(version);
    stamp::adopt(&cache.join("k8s").join(version), &dir, &BINARIES);
    dir
}

/// Validates a version string like `v1.36.3`.
pub fn check_version(version: &str) -> Result<()> {
    let ok = version
        .strip_prefix("v1.")
        .map(|rest| {
            rest.split('.').count() == 2
                && rest
                    .split('.')
                    .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        })
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(Error::AssetsUnavailable {
            version: version.into(),
            tried: "nothing: versions look like v1.36.3".into(),
        })
    }
}

/// Only the sources that need no work: the env directory and the cache.
pub fn find(settings: &Settings, version: &str) -> Option<K8sAssets> {
    if let Some(dir) = settings.k8s_assets.clone() {
        return K8sAssets::from_dir(version, Path::new(&dir), "env");
    }
    K8sAssets::from_dir(version, &cache_dir(settings, version), "cache")
}

/// Resolves the binaries, provisioning them (download, else Go build) into the cache when needed.
pub async fn resolve(settings: &Settings, version: &str) -> Result<K8sAssets> {
    check_version(version)?;
    let mut tried = Vec::new();
    if let Some(dir) = settings.k8s_assets.clone() {
        let assets = K8sAssets::from_dir(version, &dir, "env").ok_or_else(|| Error::AssetsUnavailable {
            version: version.into(),
            tried: format!(
                "{ENV_DIR}={} (it must hold executable {})",
                dir.display(),
                BINARIES.join(", ")
            ),
        })?;
        // The directory is used as-is: make sure it holds the version the scenario asked for.
        let out = crate::deadline::output_blocking(
            std::process::Command::new(&assets.kubelet).arg("--version"),
            "kubelet --version",
            crate::deadline::TOOL_PROBE,
        );
        let reported = out
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if reported.split_whitespace().last() != Some(version) {
            return Err(Error::AssetsUnavailable {
                version: version.into(),
                tried: format!(
                    "{ENV_DIR}={}: its kubelet reports '{reported}', not {version}",
                    dir.display()
                ),
            });
        }
        return Ok(assets);
    }
    tried.push(format!("{ENV_DIR} (unset)"));
    let cache = cache_dir(settings, version);
    if let Some(a) = K8sAssets::from_dir(version, &cache, "cache") {
        return Ok(a);
    }
    let _lock = crate::paths::CacheLock::acquire(settings, "k8s")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
    // Another process may have provisioned this version while we waited for the lock.
    if let Some(a) = K8sAssets::from_dir(version, &cache, "cache") {
        return Ok(a);
    }
    tried.push(format!("cache {} (empty)", cache.display()));
    let staging = cache.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    let downloaded = download(&ReleaseUrls::from_settings(settings), version, &staging).await;
    let source = download_else_build(version, &staging, tried, downloaded, || {
        go_build(settings, version, &staging)
    })
    .await?;
    stamp::write(&staging, &BINARIES).map_err(|e| Error::io(&staging, e))?;
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::rename(&staging, &cache).map_err(|e| Error::io(&cache, e))?;
    let mut assets = K8sAssets::from_dir(version, &cache, "cache").ok_or_else(|| Error::AssetsUnavailable {
        version: version.into(),
        tried: format!("{source} finished but {} lacks a binary", cache.display()),
    })?;
    assets.source = source;
    Ok(assets)
}

/// The official download's outcome, else a Go build into `staging`: where the binaries came from, or an error
/// listing everything tried (the staging directory is removed then).
pub(crate) async fn download_else_build<F>(
    version: &str,
    staging: &Path,
    mut tried: Vec<String>,
    downloaded: std::result::Result<(), String>,
    build: impl FnOnce() -> F,
) -> Result<&'static str>
where
    F: std::future::Future<Output = std::result::Result<(), String>>,
{
    let Err(e) = downloaded else {
        return Ok("download");
    };
    eprintln!("[nodejoin] official download unavailable ({e}); building from Go modules instead");
    tried.push(format!("official download ({e})"));
    match build().await {
        Ok(()) => Ok("go-build"),
        Err(e) => {
            tried.push(format!("Go module build ({e})"));
            let _ = std::fs::remove_dir_all(staging);
            Err(Error::AssetsUnavailable {
                version: version.into(),
                tried: tried.join("; "),
            })
        }
    }
}

async fn fetch(client: &reqwest::Client, url: &str) -> std::result::Result<Vec<u8>, String> {
    let r = client.get(url).send().await.map_err(|e| format!("{url}: {e}"))?;
    if !r.status().is_success() {
        return Err(format!("{url}: HTTP {}", r.status()));
    }
    r.bytes().await.map(|b| b.to_vec()).map_err(|e| format!("{url}: {e}"))
}

fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// Where official releases are downloaded from; overridable for mirrors (and tests).
pub struct ReleaseUrls {
    /// The Kubernetes release mirror setting, default `https://dl.k8s.io/release`.
    pub kubernetes: String,
    /// The etcd release mirror setting, default `https://github.com/etcd-io/etcd/releases/download`.
    pub etcd: String,
}

impl ReleaseUrls {
    pub fn from_settings(s: &Settings) -> Self {
        Self {
            kubernetes: s
                .k8s_release_url
                .clone()
                .unwrap_or_else(|| "https://dl.k8s.io/release".into()),
            etcd: s
                .etcd_release_url
                .clone()
                .unwrap_or_else(|| "https://github.com/etcd-io/etcd/releases/download".into()),
        }
    }
}

/// Official release binaries (each checked against its published .sha256) and the etcd release tarball
/// (checked against the release's SHA256SUMS).
async fn download(urls: &ReleaseUrls, version: &str, out: &Path) -> std::result::Result<(), String> {
    let client = release_client()?;
    let steps = Steps::new(&format!("download Kubernetes {version}"), 4);
    let binaries = ["kube-apiserver", "kube-controller-manager", "kubelet"];
    download_kubernetes(&client, urls, version, &binaries, out, &steps).await?;
    steps.step(3, "etcd");
    let name = format!("etcd-{ETCD_VERSION}-linux-amd64");
    let base = format!("{}/{ETCD_VERSION}", urls.etcd);
    let sums = String::from_utf8_lossy(&fetch(&client, &format!("{base}/SHA256SUMS")).await?).to_string();
    let tarball = fetch(&client, &format!("{base}/{name}.tar.gz")).await?;
    let expected = sums
        .lines()
        .find(|l| l.ends_with(&format!("{name}.tar.gz")))
        .and_then(|l| l.split_whitespace().next())
        .ok_or("etcd SHA256SUMS lacks the tarball")?;
    if sha256_hex(&tarball) != expected {
        return Err("etcd tarball checksum mismatch".into());
    }
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tarball.as_slice()));
    let entries = archive.entries().map_err(|e| e.to_string())?;
    for entry in entries {
        let mut entry = entry.map_err(|e| e.to_string())?;
        if entry.path().map(|p| p.ends_with("etcd")).unwrap_or(false) {
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut data).map_err(|e| e.to_string())?;
            write_executable(&out.join("etcd"), &data)?;
        }
    }
    steps.finish("downloaded");
    Ok(())
}

fn release_client() -> std::result::Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(10))
        .timeout(std::time::Duration::from_secs(600))
        .build()
        .map_err(|e| e.to_string())
}

/// Official Kubernetes release binaries into `out`, each checked against its published .sha256.
async fn download_kubernetes(
    client: &reqwest::Client,
    urls: &ReleaseUrls,
    version: &str,
    binaries: &[&str],
    out: &Path,
    steps: &Steps,
) -> std::result::Result<(), String> {
    for (i, bin) in binaries.iter().enumerate() {
        steps.step(i as u64, bin);
        let url = format!("{}/{version}/bin/linux/amd64/{bin}", urls.kubernetes);
        let expected = String::from_utf8_lossy(&fetch(client, &format!("{url}.sha256")).await?)
            .trim()
            .to_string();
        let data = fetch(client, &url).await?;
        let actual = sha256_hex(&data);
        if actual != expected {
            return Err(format!("{bin}: checksum mismatch (expected {expected}, got {actual})"));
        }
        write_executable(&out.join(bin), &data)?;
    }
    Ok(())
}

fn write_executable(path: &Path, data: &[u8]) -> std::result::Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, data).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Builds the binaries with Go through `fixtures/k8s-build/build.sh` (about 4–8 minutes cold on 2 cores).
async fn go_build(settings: &Settings, version: &str, out: &Path) -> std::result::Result<(), String> {
    run_go_build_script(
        settings,
        "k8s-build",
        &format!("build Kubernetes {version} from Go modules"),
        4,
        (&[], &[]),
        version,
        out,
    )
    .await
}

/// Runs `fixtures/<dir>/build.sh [BEFORE...] VERSION OUT [AFTER...]` with Go on PATH, its `step N/M` lines shown
/// as progress and its output kept in `<out>.build.log`.
pub(crate) async fn run_go_build_script(
    settings: &Settings,
    dir: &str,
    title: &str,
    steps: u64,
    (before, after): (&[&str], &[&str]),
    version: &str,
    out: &Path,
) -> std::result::Result<(), String> {
    let script = crate::paths::fixtures_dir(settings).join(dir).join("build.sh");
    if !script.is_file() {
        return Err(format!("{} is missing", script.display()));
    }
    if which("go").is_none() {
        return Err("`go` is not on PATH".into());
    }
    let steps = Steps::new(title, steps);
    let log = out.with_extension("build.log");
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg(&script).args(before).arg(version).arg(out).args(after);
    go_env(cmd.as_std_mut());
    let work = go_work_dir(settings).map_err(|e| format!("a work directory for the build: {e}"))?;
    cmd.env("TMPDIR", work.path());
    crate::progress::run_with_steps(&mut cmd, &steps, &log, crate::deadline::GO_BUILD)
        .await
        .map_err(|e| format!("{e} (full log: {})", log.display()))?;
    steps.finish("built");
    Ok(())
}

/// What every Go build of ours runs with: module mode, never a workspace (a `go.work` someone planted in a
/// directory above the build, `/tmp` included, would switch every build to workspace mode and could compile
/// foreign code in), and no `GOFLAGS` from the caller (the build scripts say their own).
/// The toolchain is the caller's `GOTOOLCHAIN` if set, else [`toolchain_setting`].
pub(crate) fn go_env(cmd: &mut std::process::Command) {
    cmd.env("GOWORK", "off").env_remove("GOFLAGS");
    if std::env::var_os("GOTOOLCHAIN").is_none() {
        cmd.env("GOTOOLCHAIN", toolchain_setting(local_go_version().as_deref()));
    }
}

/// The oldest Go our builds compile with (Kubernetes 1.36 and containerd 2.2's modules need it).
pub const MIN_GO: &str = "go1.26.0";

/// `GOTOOLCHAIN` for a build: the installed Go where it is new enough, switching up when a module asks for a newer
/// one (`local+auto`); else [`MIN_GO`], which the go command fetches through the module proxy once and caches
/// (`go1.26.0+auto`). Either way never `local`, which some distributions' Go sets and which would fail the build.
pub fn toolchain_setting(local: Option<&str>) -> String {
    match local {
        Some(v) if go_at_least(v, MIN_GO) => "local+auto".into(),
        _ => format!("{MIN_GO}+auto"),
    }
}

/// The installed Go's version (`go1.24.5`), from `go env GOVERSION` with the installed toolchain itself.
pub fn local_go_version() -> Option<String> {
    let go = which("go")?;
    let out = std::process::Command::new(go)
        .args(["env", "GOVERSION"])
        .env("GOTOOLCHAIN", "local")
        .env_remove("GOFLAGS")
        .output()
        .ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && v.starts_with("go")).then_some(v)
}

/// `a >= b` for Go versions (`go1.26.0`, `go1.26`, `go1.27rc1` counts as its release).
fn go_at_least(a: &str, b: &str) -> bool {
    let parts = |v: &str| -> Vec<u32> {
        v.trim_start_matches("go")
            .split('.')
            .map(|p| {
                p.chars()
                    .take_while(char::is_ascii_digit)
                    .collect::<String>()
                    .parse()
                    .unwrap_or(0)
            })
            .collect()
    };
    let (mut x, mut y) = (parts(a), parts(b));
    x.resize(3, 0);
    y.resize(3, 0);
    x >= y
}

/// A Go build's temporary directory (its `TMPDIR`: the build script's work tree and Go's own): in
/// `<cache>/tmp`, named after this process, so a build killed with its owner is removed by the next reaper
/// instead of staying in `/tmp`. Removed when dropped.
pub(crate) fn go_work_dir(settings: &Settings) -> std::io::Result<tempfile::TempDir> {
    let root = crate::paths::scratch_root(settings);
    std::fs::create_dir_all(&root)?;
    tempfile::Builder::new()
        .prefix(&crate::paths::owned_prefix("go-build"))
        .tempdir_in(root)
}

/// The path of an executable on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| is_executable(p))
    })
}

#[cfg(test)]
mod go_env_tests {
    #[test]
    fn go_builds_never_use_a_workspace_or_the_callers_flags() {
        let mut cmd = std::process::Command::new("go");
        cmd.env("GOFLAGS", "-modfile=/tmp/planted.mod");
        super::go_env(&mut cmd);
        let envs: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| (k.to_string_lossy().into(), v.map(|v| v.to_string_lossy().into())))
            .collect();
        assert!(envs.contains(&("GOWORK".into(), Some("off".into()))), "{envs:?}");
        assert!(envs.contains(&("GOFLAGS".into(), None)), "GOFLAGS removed: {envs:?}");
    }

    #[test]
    fn an_older_go_fetches_the_toolchain_the_builds_need() {
        assert_eq!(super::toolchain_setting(Some("go1.26.8")), "local+auto");
        assert_eq!(super::toolchain_setting(Some("go1.27")), "local+auto");
        assert_eq!(super::toolchain_setting(Some("go1.25.7")), "go1.26.0+auto");
        assert_eq!(super::toolchain_setting(Some("go1.9")), "go1.26.0+auto");
        assert_eq!(super::toolchain_setting(None), "go1.26.0+auto");
    }

    /// A build's temporary files are where the reaper looks, named after their owner (a killed build's go).
    #[test]
    fn a_builds_temporary_directory_is_the_reapers_to_find() {
        let settings = crate::settings::for_tests();
        let dir = super::go_work_dir(&settings).unwrap();
        assert_eq!(
            dir.path().parent(),
            Some(crate::paths::scratch_root(&settings).as_path())
        );
        let name = dir.path().file_name().unwrap().to_string_lossy().to_string();
        assert_eq!(
            crate::paths::owner_of_scratch(&name),
            Some(crate::process::Identity::own())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_validated() {
        assert!(check_version("v1.36.3").is_ok());
        for bad in ["1.36.3", "v1.36", "v2.0.0", "v1.36.x", "latest", ""] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    /// A release mirror on loopback serving the three Kubernetes binaries, their .sha256 files, an etcd
    /// tarball and its SHA256SUMS; `corrupt` serves a kubelet whose checksum does not match.
    async fn mirror(corrupt: bool) -> (crate::fakes::FakeServer, ReleaseUrls) {
        use axum::routing::get;
        let mut router = axum::Router::new();
        for bin in ["kube-apiserver", "kube-controller-manager", "kubelet"] {
            let body = format!("#!/bin/sh\necho {bin}\n").into_bytes();
            let sum = sha256_hex(&body);
            let served = if corrupt && bin == "kubelet" {
                b"tampered".to_vec()
            } else {
                body
            };
            let path = format!("/k8s/v1.36.3/bin/linux/amd64/{bin}");
            router = router.route(&path, get(move || async move { served }));
            router = router.route(&format!("{path}.sha256"), get(move || async move { sum }));
        }
        let name = format!("etcd-{ETCD_VERSION}-linux-amd64");
        let mut tarball = Vec::new();
        {
            let gz = flate2::write::GzEncoder::new(&mut tarball, flate2::Compression::fast());
            let mut tar = tar::Builder::new(gz);
            let data = b"#!/bin/sh\necho etcd\n";
            let mut header = tar::Header::new_gnu();
            header.set_size(data.len() as u64);
            header.set_mode(0o755);
            header.set_cksum();
            tar.append_data(&mut header, format!("{name}/etcd"), &data[..]).unwrap();
            tar.into_inner().unwrap().finish().unwrap();
        }
        let sums = format!("{}  {name}.tar.gz\n", sha256_hex(&tarball));
        router = router
            .route(
                &format!("/etcd/{ETCD_VERSION}/{name}.tar.gz"),
                get(move || async move { tarball }),
            )
            .route(
                &format!("/etcd/{ETCD_VERSION}/SHA256SUMS"),
                get(move || async move { sums }),
            );
        let server = crate::fakes::FakeServer::start("mirror", "127.0.0.1".parse().unwrap(), router)
            .await
            .unwrap();
        let urls = ReleaseUrls {
            kubernetes: format!("{}/k8s", server.url()),
            etcd: format!("{}/etcd", server.url()),
        };
        (server, urls)
    }

    #[tokio::test]
    async fn download_verifies_checksums() {
        let (_server, urls) = mirror(false).await;
        let dir = tempfile::tempdir().unwrap();
        download(&urls, "v1.36.3", dir.path()).await.unwrap();
        // As `resolve` does: the build's record, then the directory as the cache reads it.
        stamp::write(dir.path(), &BINARIES).unwrap();
        let assets = K8sAssets::from_dir("v1.36.3", dir.path(), "cache").unwrap();
        assert_eq!(std::fs::read_to_string(&assets.etcd).unwrap(), "#!/bin/sh\necho etcd\n");

        let (_server, urls) = mirror(true).await;
        let dir = tempfile::tempdir().unwrap();
        let err = download(&urls, "v1.36.3", dir.path()).await.unwrap_err();
        assert!(err.contains("kubelet: checksum mismatch"), "{err}");
        assert!(
            !dir.path().join("kubelet").exists(),
            "a binary that fails its checksum must not be written"
        );
    }

    #[tokio::test]
    async fn unreachable_release_server_is_a_clear_error() {
        let urls = ReleaseUrls {
            kubernetes: "http://127.0.0.1:9/k8s".into(),
            etcd: "http://127.0.0.1:9/etcd".into(),
        };
        let dir = tempfile::tempdir().unwrap();
        let err = download(&urls, "v1.36.3", dir.path()).await.unwrap_err();
        assert!(
            err.contains("127.0.0.1:9/k8s/v1.36.3/bin/linux/amd64/kube-apiserver.sha256"),
            "{err}"
        );
    }

    #[test]
    fn env_dir_must_hold_all_binaries() {
        let dir = tempfile::tempdir().unwrap();
        assert!(K8sAssets::from_dir("v1.36.3", dir.path(), "env").is_none());
        for b in BINARIES {
            write_executable(&dir.path().join(b), b"#!/bin/sh\n").unwrap();
        }
        let a = K8sAssets::from_dir("v1.36.3", dir.path(), "env").unwrap();
        assert_eq!(a.kubelet, dir.path().join("kubelet"));
    }
}
