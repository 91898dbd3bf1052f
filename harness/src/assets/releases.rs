//! The official release binaries of the node image's tools, tried before a Go build as Kubernetes' and etcd's are,
//! each checked against the SHA-256 its release publishes (facts from each project's release tooling at the
//! version built):
//! - containerd: `containerd-static-<v>-linux-<arch>.tar.gz` (fully static, every 1.7 and 2.x release) and its
//!   `.sha256sum` (`<hex>  <name>`); `bin/containerd`, `bin/containerd-shim-runc-v2` and `bin/ctr` inside;
//! - runc: the static `runc.<arch>` and `runc.sha256sum` (every asset's line, GPG clear-signed around them);
//! - aws-iam-authenticator: `aws-iam-authenticator_<v>_linux_<arch>` and goreleaser's
//!   `authenticator_<v>_checksums.txt` (v0.6.12 and later were published without binaries: that download fails
//!   and the Go build runs).
//!
//! nodeadm has no releases (pseudo-versions), our crictl is our own CRI client and CoreDNS ships in its image, so
//! those are always built. `NODEJOIN_GITHUB_RELEASE_URL` names a mirror laid out as github.com's release downloads.
use std::path::Path;

/// The default host of release downloads.
pub const GITHUB: &str = "https://github.com";

/// How one tool's release publishes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asset {
    ContainerdStatic,
    Runc,
    Goreleaser,
}

/// The release form of a tool (by its name), if it publishes binaries at all.
pub fn asset(tool: &str) -> Option<Asset> {
    match tool {
        "containerd" => Some(Asset::ContainerdStatic),
        "runc" => Some(Asset::Runc),
        "aws-iam-authenticator" => Some(Asset::Goreleaser),
        _ => None,
    }
}

/// Release downloads' host: the mirror setting, else github.com.
pub fn base_url(settings: &crate::settings::Settings) -> String {
    settings
        .github_release_url
        .clone()
        .unwrap_or_else(|| GITHUB.into())
        .trim_end_matches('/')
        .to_string()
}

/// This machine's architecture as release assets name it.
pub fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "arm64",
        _ => "amd64",
    }
}

/// The URLs of a release binary (or tarball) and of the checksum file that names it, and the name it has there.
pub fn urls(asset: Asset, base: &str, version: &str, arch: &str) -> (String, String, String) {
    let v = version.trim_start_matches('v');
    let (repo, name, sums) = match asset {
        Asset::ContainerdStatic => {
            let name = format!("containerd-static-{v}-linux-{arch}.tar.gz");
            ("containerd/containerd", name.clone(), format!("{name}.sha256sum"))
        }
        Asset::Runc => (
            "opencontainers/runc",
            format!("runc.{arch}"),
            "runc.sha256sum".to_string(),
        ),
        Asset::Goreleaser => (
            "kubernetes-sigs/aws-iam-authenticator",
            format!("aws-iam-authenticator_{v}_linux_{arch}"),
            format!("authenticator_{v}_checksums.txt"),
        ),
    };
    let dir = format!("{base}/{repo}/releases/download/{version}");
    (format!("{dir}/{name}"), format!("{dir}/{sums}"), name)
}

/// The SHA-256 a checksum file gives `name` (`<hex>  <name>` or `<hex> *<name>` lines; other lines, such as a
/// clear signature's armor, are skipped).
pub fn expected_sum(sums: &str, name: &str) -> Option<String> {
    sums.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (hex, file) = (f.next()?, f.next()?);
        (f.next().is_none()
            && file.trim_start_matches('*') == name
            && hex.len() == 64
            && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| hex.to_ascii_lowercase())
    })
}

/// Downloads `tool` at `version` into `out` (its binaries under their own names; from a tarball, the `bin/` ones
/// `wanted` names), checksum checked; the error says which URL failed or which sum did not match.
pub(crate) async fn download(
    settings: &crate::settings::Settings,
    tool: &str,
    version: &str,
    out: &Path,
    wanted: &[&str],
) -> Result<(), String> {
    download_from(&base_url(settings), tool, version, out, wanted).await
}

async fn download_from(base: &str, tool: &str, version: &str, out: &Path, wanted: &[&str]) -> Result<(), String> {
    let asset = asset(tool).ok_or_else(|| format!("{tool} publishes no release binaries"))?;
    let (url, sums_url, name) = urls(asset, base, version, arch());
    let client = super::release_client()?;
    let sums = String::from_utf8_lossy(&super::fetch(&client, &sums_url).await?).to_string();
    let expected = expected_sum(&sums, &name).ok_or_else(|| format!("{sums_url} names no {name}"))?;
    let data = super::fetch(&client, &url).await?;
    let actual = super::sha256_hex(&data);
    if actual != expected {
        return Err(format!("{url}: SHA-256 {actual}, but {sums_url} says {expected}"));
    }
    match asset {
        Asset::ContainerdStatic => unpack_bin(&data, out, wanted),
        Asset::Runc | Asset::Goreleaser => super::write_executable(&out.join(tool), &data),
    }
}

/// The `wanted` binaries from a release tarball's `bin/` (containerd's).
fn unpack_bin(tarball: &[u8], out: &Path, wanted: &[&str]) -> Result<(), String> {
    let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(tarball));
    let mut found = Vec::new();
    for entry in archive.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| e.to_string())?;
        let path = entry.path().map_err(|e| e.to_string())?.into_owned();
        let Some(bin) = wanted.iter().find(|b| path == Path::new("bin").join(b)) else {
            continue;
        };
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut data).map_err(|e| e.to_string())?;
        super::write_executable(&out.join(bin), &data)?;
        found.push(*bin);
    }
    match wanted.iter().find(|b| !found.contains(b)) {
        Some(missing) => Err(format!("the release tarball has no bin/{missing}")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_the_releases_own() {
        let (url, sums, _) = urls(Asset::ContainerdStatic, GITHUB, "v2.2.4", "amd64");
        assert_eq!(
            url,
            "https://github.com/containerd/containerd/releases/download/v2.2.4/containerd-static-2.2.4-linux-amd64.tar.gz"
        );
        assert_eq!(sums, format!("{url}.sha256sum"));
        let (url, sums, _) = urls(Asset::Runc, GITHUB, "v1.3.5", "arm64");
        assert_eq!(
            url,
            "https://github.com/opencontainers/runc/releases/download/v1.3.5/runc.arm64"
        );
        assert!(sums.ends_with("/v1.3.5/runc.sha256sum"));
        let (url, sums, _) = urls(Asset::Goreleaser, GITHUB, "v0.6.14", "amd64");
        assert!(
            url.ends_with("/v0.6.14/aws-iam-authenticator_0.6.14_linux_amd64"),
            "{url}"
        );
        assert!(sums.ends_with("/v0.6.14/authenticator_0.6.14_checksums.txt"), "{sums}");
    }

    /// A mirror on loopback laid out as github.com's release downloads: containerd's static tarball and runc's
    /// binary with their checksum files; `corrupt` serves a runc that does not match its sum.
    async fn mirror(corrupt: bool) -> crate::fakes::FakeServer {
        use axum::routing::get;
        let mut tarball = Vec::new();
        {
            let gz = flate2::write::GzEncoder::new(&mut tarball, flate2::Compression::fast());
            let mut tar = tar::Builder::new(gz);
            for bin in ["containerd", "containerd-shim-runc-v2", "ctr", "containerd-stress"] {
                let data = format!("#!/bin/sh\necho {bin}\n");
                let mut header = tar::Header::new_gnu();
                header.set_size(data.len() as u64);
                header.set_mode(0o755);
                header.set_cksum();
                tar.append_data(&mut header, format!("bin/{bin}"), data.as_bytes())
                    .unwrap();
            }
            tar.into_inner().unwrap().finish().unwrap();
        }
        let (url, sums, name) = urls(Asset::ContainerdStatic, "", "v2.2.4", arch());
        let line = format!("{}  {name}\n", crate::assets::sha256_hex(&tarball));
        let runc = b"#!/bin/sh\necho runc\n".to_vec();
        let (rurl, rsums, rname) = urls(Asset::Runc, "", "v1.3.5", arch());
        let signed = format!(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA256\n\n{}  {rname}\n-----BEGIN PGP SIGNATURE-----\n",
            crate::assets::sha256_hex(&runc)
        );
        let served = if corrupt { b"tampered".to_vec() } else { runc };
        let router = axum::Router::new()
            .route(&url, get(move || async move { tarball }))
            .route(&sums, get(move || async move { line }))
            .route(&rurl, get(move || async move { served }))
            .route(&rsums, get(move || async move { signed }));
        crate::fakes::FakeServer::start("mirror", "127.0.0.1".parse().unwrap(), router)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn release_binaries_are_downloaded_and_checked() {
        let server = mirror(false).await;
        let base = format!("http://{}", server.addr);
        let out = tempfile::tempdir().unwrap();
        let three = ["containerd", "containerd-shim-runc-v2", "ctr"];
        download_from(&base, "containerd", "v2.2.4", out.path(), &three)
            .await
            .unwrap();
        for bin in three {
            let text = std::fs::read_to_string(out.path().join(bin)).unwrap();
            assert!(text.contains(&format!("echo {bin}")), "{bin}: {text}");
        }
        assert!(
            !out.path().join("containerd-stress").exists(),
            "only the three the node runs"
        );
        download_from(&base, "runc", "v1.3.5", out.path(), &[]).await.unwrap();
        assert!(crate::assets::is_executable(&out.path().join("runc")));
        // A version the mirror does not have: the URL that failed is named.
        let err = download_from(&base, "runc", "v9.9.9", out.path(), &[])
            .await
            .unwrap_err();
        assert!(err.contains("/v9.9.9/runc.sha256sum") && err.contains("404"), "{err}");
        let corrupt = mirror(true).await;
        let err = download_from(
            &format!("http://{}", corrupt.addr),
            "runc",
            "v1.3.5",
            tempfile::tempdir().unwrap().path(),
            &[],
        )
        .await
        .unwrap_err();
        assert!(err.contains("SHA-256") && err.contains("says"), "{err}");
        assert!(download_from(&base, "nodeadm", "v0.0.0", out.path(), &[])
            .await
            .is_err());
    }

    #[test]
    fn sums_are_read_from_each_format() {
        let h = "a".repeat(64);
        assert_eq!(expected_sum(&format!("{h}  x.tar.gz\n"), "x.tar.gz"), Some(h.clone()));
        let signed = format!(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\n{}  runc.amd64\n{h}  runc.arm64\n-----BEGIN PGP SIGNATURE-----\n",
            "b".repeat(64)
        );
        assert_eq!(expected_sum(&signed, "runc.arm64"), Some(h.clone()));
        assert_eq!(
            expected_sum(&format!("{h} *runc.amd64\n"), "runc.amd64"),
            Some(h.clone())
        );
        assert_eq!(expected_sum(&signed, "runc.ppc64le"), None);
        assert_eq!(expected_sum("Hash: SHA256\n", "SHA256"), None);
    }
}
