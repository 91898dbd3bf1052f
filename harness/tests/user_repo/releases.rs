//! Release archives as the action installs them: this build packed by `ci/release.sh`, served over HTTPS from a
//! local directory laid out as GitHub's release downloads are (`<url>/v<version>/<archive>`), with the action
//! checked out at a commit whose `ci/releases.sha256` pins them. The install step's refusals (issue 66): an archive
//! that is not the pinned one (whatever `.sha256` the server offers), a release not pinned, a plain-HTTP URL, a
//! version that is not one.
use super::{action, sh};
use common::root;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use super::common;

/// The version this build will be released as: its own without the pre-release part (main says X.Y.Z-dev).
pub fn release_version() -> &'static str {
    env!("CARGO_PKG_VERSION").split('-').next().unwrap_or_default()
}

/// This build's x86-64 archive's name.
fn archive_name() -> String {
    format!("nodejoin-v{}-x86_64-unknown-linux-gnu.tar.gz", release_version())
}

pub struct Releases {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    pub dir: PathBuf,
    /// The server's CA certificate (PEM), for `CURL_CA_BUNDLE`.
    pub ca: PathBuf,
    /// The action's source with this build's archive pinned.
    pub action: PathBuf,
    served: Arc<Mutex<Vec<String>>>,
}

impl Releases {
    pub fn pack(tmp: &Path) -> Releases {
        let dir = tmp.join("releases");
        let out = dir.join(format!("v{}", release_version()));
        let status = Command::new("bash")
            .arg(root().join("ci/release.sh"))
            .args(["pack", common::BIN, "x86_64-unknown-linux-gnu"])
            .arg(&out)
            .env("NODEJOIN_RELEASE_VERSION", release_version())
            .status()
            .expect("ci/release.sh");
        assert!(status.success(), "ci/release.sh pack failed");
        let bytes = std::fs::read(out.join(archive_name())).unwrap();
        let action = action_pinning(tmp, &[(sha256_hex(&bytes), archive_name())]);
        let (ca, tls) = tls(tmp);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        let served = Arc::new(Mutex::new(Vec::new()));
        let (root_dir, log) = (dir.clone(), served.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let Ok(conn) = rustls::ServerConnection::new(tls.clone()) else {
                    continue;
                };
                serve_one(rustls::StreamOwned::new(conn, stream), &root_dir, &log);
            }
        });
        Releases {
            url,
            dir,
            ca,
            action,
            served,
        }
    }

    pub fn served(&self) -> Vec<String> {
        self.served.lock().unwrap().clone()
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The action's source as a commit that pins `pins` would have it: `ci/` copied with those lines added to
/// `ci/releases.sha256`, everything else linked to this checkout.
fn action_pinning(tmp: &Path, pins: &[(String, String)]) -> PathBuf {
    let action = tmp.join("action");
    std::fs::create_dir_all(&action).unwrap();
    for e in std::fs::read_dir(root()).unwrap().flatten() {
        let name = e.file_name();
        if name == "target" || name == ".git" || name == "ci" {
            continue;
        }
        std::os::unix::fs::symlink(e.path(), action.join(&name)).unwrap();
    }
    let status = Command::new("cp")
        .arg("-R")
        .arg(root().join("ci"))
        .arg(action.join("ci"))
        .status()
        .unwrap();
    assert!(status.success());
    let mut list = std::fs::read_to_string(action.join("ci/releases.sha256")).unwrap();
    for (hash, name) in pins {
        list.push_str(&format!("{hash}  {name}\n"));
    }
    std::fs::write(action.join("ci/releases.sha256"), list).unwrap();
    action
}

/// A CA (its PEM written under `tmp`) and a server configuration with a certificate it issued for 127.0.0.1.
fn tls(tmp: &Path) -> (PathBuf, Arc<rustls::ServerConfig>) {
    use nodejoin::pki::{pem_to_der, Ca, Usage};
    let ca = Ca::generate("nodejoin test releases").unwrap();
    let leaf = ca
        .issue(
            "127.0.0.1",
            &[],
            &[rcgen::SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into())],
            Usage::Server,
        )
        .unwrap();
    let path = tmp.join("releases-ca.pem");
    std::fs::write(&path, &ca.0.cert_pem).unwrap();
    let certs = vec![rustls::pki_types::CertificateDer::from(
        pem_to_der(&leaf.cert_pem).unwrap(),
    )];
    let key = rustls::pki_types::PrivateKeyDer::try_from(pem_to_der(&leaf.key_pem).unwrap()).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    (path, Arc::new(config))
}

/// One GET: the file under `dir` the path names (no `..`), else 404.
fn serve_one<S: std::io::Read + std::io::Write>(mut stream: S, dir: &Path, log: &Mutex<Vec<String>>) {
    use std::io::BufRead;
    let mut head = Vec::new();
    {
        let mut reader = std::io::BufReader::new(&mut stream);
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                break;
            }
            head.push(line);
        }
    }
    let Some(request) = head.first() else { return };
    let path = request.split_whitespace().nth(1).unwrap_or("/").to_string();
    log.lock().unwrap().push(path.clone());
    let body = (!path.contains("..")).then(|| std::fs::read(dir.join(path.trim_start_matches('/'))).ok());
    let response = match body.flatten() {
        Some(b) => [
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                b.len()
            )
            .into_bytes(),
            b,
        ]
        .concat(),
        None => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
    };
    let _ = stream.write_all(&response);
    let _ = stream.flush();
}

/// The action's step named `name`.
fn step(name: &str) -> serde_yaml_ng::Value {
    action()["runs"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some(name))
        .cloned()
        .unwrap_or_else(|| panic!("no step {name:?}"))
}

/// Runs the install step in release mode for `version` from `url` with the action at `action`: its exit code and
/// output, and whether a nodejoin was installed or PATH changed.
fn install(tmp: &Path, releases: &Releases, url: &str, version: &str) -> (i32, String, bool) {
    let runner_temp = tmp.join("runner-temp");
    std::fs::create_dir_all(&runner_temp).unwrap();
    let github_path = tmp.join("github_path");
    std::fs::write(&github_path, "").unwrap();
    let env = BTreeMap::from([
        ("RUNNER_TEMP".to_string(), runner_temp.display().to_string()),
        ("GITHUB_PATH".to_string(), github_path.display().to_string()),
        (
            "NODEJOIN_ACTION_PATH".to_string(),
            releases.action.display().to_string(),
        ),
        ("NODEJOIN_ACTION_MODE".to_string(), "release".to_string()),
        ("NODEJOIN_ACTION_VERSION".to_string(), version.to_string()),
        ("NODEJOIN_ACTION_RELEASE_URL".to_string(), url.to_string()),
        ("CURL_CA_BUNDLE".to_string(), releases.ca.display().to_string()),
    ]);
    let (code, out) = sh(tmp, step("Install nodejoin")["run"].as_str().unwrap(), &env);
    let installed = runner_temp.join("nodejoin-install/bin/nodejoin").exists()
        || !std::fs::read_to_string(&github_path).unwrap().is_empty();
    (code, out, installed)
}

#[test]
fn an_archive_that_is_not_the_pinned_one_is_not_installed_whatever_checksum_the_server_offers() {
    let tmp = tempfile::tempdir().unwrap();
    let releases = Releases::pack(tmp.path());
    let v = release_version();
    let out_dir = releases.dir.join(format!("v{v}"));
    let archive = out_dir.join(archive_name());
    let mut bytes = std::fs::read(&archive).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&archive, &bytes).unwrap();
    // What a replaced release could offer beside it: a checksum of the new archive, and one naming /dev/null
    // (`sha256sum --check` once accepted that: `/dev/null: OK`).
    std::fs::write(
        out_dir.join(format!("{}.sha256", archive_name())),
        format!(
            "{}  /dev/null\n{}  {}\n",
            sha256_hex(b""),
            sha256_hex(&bytes),
            archive_name()
        ),
    )
    .unwrap();
    let (code, out, installed) = install(tmp.path(), &releases, &releases.url, v);
    assert_ne!(code, 0, "a replaced archive was installed:\n{out}");
    assert!(out.contains("FAILED its pinned checksum"), "{out}");
    assert!(!installed, "installed or PATH changed:\n{out}");
    assert_eq!(
        releases.served(),
        vec![format!("/v{v}/{}", archive_name())],
        "the server's checksum file was consulted"
    );
}

#[test]
fn a_release_the_action_does_not_pin_or_one_over_plain_http_is_refused_before_any_download() {
    let tmp = tempfile::tempdir().unwrap();
    let releases = Releases::pack(tmp.path());
    let (code, out, installed) = install(tmp.path(), &releases, &releases.url, "0.0.1");
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("no SHA-256 for nodejoin-v0.0.1-"), "{out}");
    assert!(!installed);
    let plain = releases.url.replace("https://", "http://");
    let (code, out, installed) = install(tmp.path(), &releases, &plain, release_version());
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("is not an https:// URL"), "{out}");
    assert!(!installed);
    assert_eq!(releases.served(), Vec::<String>::new(), "something was downloaded");
}

#[test]
fn a_version_that_is_not_one_never_reaches_the_steps_outputs() {
    let tmp = tempfile::tempdir().unwrap();
    let output = tmp.path().join("output");
    for bad in ["1.2.3\nmode=source", "1.2.3/../../x", "v1.2.3", "1.2", "source\n"] {
        std::fs::write(&output, "").unwrap();
        let env = BTreeMap::from([
            ("GITHUB_OUTPUT".to_string(), output.display().to_string()),
            ("NODEJOIN_ACTION_PATH".to_string(), root().display().to_string()),
            ("NODEJOIN_ACTION_WANT".to_string(), bad.to_string()),
        ]);
        let (code, out) = sh(tmp.path(), step("Which nodejoin")["run"].as_str().unwrap(), &env);
        assert_ne!(code, 0, "{bad:?} was taken:\n{out}");
        assert!(out.contains("not X.Y.Z"), "{out}");
        assert_eq!(
            std::fs::read_to_string(&output).unwrap(),
            "",
            "{bad:?} reached GITHUB_OUTPUT"
        );
    }
    // This checkout's own version (X.Y.Z-dev) is built from source; a release it does not pin is too.
    std::fs::write(&output, "").unwrap();
    let env = BTreeMap::from([
        ("GITHUB_OUTPUT".to_string(), output.display().to_string()),
        ("NODEJOIN_ACTION_PATH".to_string(), root().display().to_string()),
        ("NODEJOIN_ACTION_WANT".to_string(), String::new()),
    ]);
    let (code, out) = sh(tmp.path(), step("Which nodejoin")["run"].as_str().unwrap(), &env);
    assert_eq!(code, 0, "{out}");
    assert!(std::fs::read_to_string(&output).unwrap().contains("mode=source"));
}
