//! Fake ECR image registry: the read-only part of the OCI distribution API (`/v2/`, manifests, blobs) behind
//! ECR's Basic authentication, serving the EKS sandbox image (`eks/pause:3.5`) that nodeadm pulls through
//! containerd. The image is our own pause image, taken from the node image in use (`docker save` archive at
//! `/opt/nodejoin/pause.tar`) and re-served as an OCI image; nodes reach this server through a containerd
//! `hosts.toml` for the ECR host, as a pull-through mirror would be configured. Only passwords the fake ECR API
//! issued are accepted, so a pull proves the whole chain: IMDS credentials, a signed GetAuthorizationToken, and
//! the token handed to containerd.
use super::ecr::Ecr;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar";
const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// The repository and tag nodeadm's containerd config names as the sandbox image.
pub const SANDBOX_REPOSITORY: &str = "eks/pause";
pub const SANDBOX_TAG: &str = "3.5";

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// One image as the registry serves it.
#[derive(Debug, Clone)]
pub struct OciImage {
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
    pub blobs: HashMap<String, Vec<u8>>,
}

impl OciImage {
    /// Converts the first image of a `docker save` archive (legacy or OCI-layout flavour: both carry
    /// `manifest.json` with `Config` and `Layers` paths) into an OCI image with the same config and layers.
    pub fn from_docker_archive(archive: &[u8]) -> Result<Self, String> {
        let mut files: HashMap<String, Vec<u8>> = HashMap::new();
        let mut tar = tar::Archive::new(archive);
        for entry in tar.entries().map_err(|e| format!("docker archive: {e}"))? {
            let mut entry = entry.map_err(|e| format!("docker archive: {e}"))?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let path = entry
                .path()
                .map_err(|e| format!("docker archive: {e}"))?
                .to_string_lossy()
                .trim_start_matches("./")
                .to_string();
            let mut data = Vec::new();
            entry
                .read_to_end(&mut data)
                .map_err(|e| format!("docker archive {path}: {e}"))?;
            files.insert(path, data);
        }
        let manifest: serde_json::Value = serde_json::from_slice(
            files
                .get("manifest.json")
                .ok_or("docker archive has no manifest.json")?,
        )
        .map_err(|e| format!("docker archive manifest.json: {e}"))?;
        let first = &manifest[0];
        let config_path = first["Config"].as_str().ok_or("manifest.json names no Config")?;
        let config = files
            .get(config_path)
            .ok_or_else(|| format!("docker archive lacks {config_path}"))?
            .clone();
        let mut blobs = HashMap::new();
        let mut layers = Vec::new();
        for l in first["Layers"].as_array().ok_or("manifest.json names no Layers")? {
            let p = l.as_str().unwrap_or_default();
            let data = files
                .get(p)
                .ok_or_else(|| format!("docker archive lacks layer {p}"))?
                .clone();
            let media_type = if data.starts_with(&[0x1f, 0x8b]) {
                OCI_LAYER_GZIP
            } else {
                OCI_LAYER
            };
            let d = digest(&data);
            layers.push(serde_json::json!({ "mediaType": media_type, "digest": d, "size": data.len() }));
            blobs.insert(d, data);
        }
        let config_digest = digest(&config);
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": { "mediaType": OCI_CONFIG, "digest": config_digest, "size": config.len() },
            "layers": layers,
        })
        .to_string()
        .into_bytes();
        blobs.insert(config_digest, config);
        Ok(OciImage {
            manifest_digest: digest(&manifest),
            manifest,
            blobs,
        })
    }
}

/// One manifest fetch that was let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pull {
    pub repository: String,
    pub reference: String,
    /// The instance whose ECR token authorised it.
    pub instance_id: String,
}

pub struct Registry {
    ecr: Arc<Ecr>,
    images: Mutex<HashMap<(String, String), Arc<OciImage>>>,
    pulls: Mutex<Vec<Pull>>,
}

impl Registry {
    pub fn new(ecr: Arc<Ecr>) -> Arc<Self> {
        Arc::new(Self {
            ecr,
            images: Mutex::new(HashMap::new()),
            pulls: Mutex::new(Vec::new()),
        })
    }

    pub fn router(self: &Arc<Self>) -> axum::Router {
        let me = self.clone();
        axum::Router::new().fallback(move |method: Method, uri: Uri, headers: HeaderMap| {
            let me = me.clone();
            async move { me.handle(&method, &uri, &headers) }
        })
    }

    pub fn has(&self, repository: &str, tag: &str) -> bool {
        self.images
            .lock()
            .map(|m| m.contains_key(&(repository.to_string(), tag.to_string())))
            .unwrap_or(false)
    }

    pub fn add(&self, repository: &str, tag: &str, image: OciImage) {
        if let Ok(mut m) = self.images.lock() {
            m.insert((repository.to_string(), tag.to_string()), Arc::new(image));
        }
    }

    /// Manifest pulls authorised by `instance_id`'s tokens.
    pub fn pulls_by(&self, instance_id: &str) -> Vec<Pull> {
        self.pulls
            .lock()
            .map(|p| p.iter().filter(|x| x.instance_id == instance_id).cloned().collect())
            .unwrap_or_default()
    }

    /// The instance behind a valid `Authorization: Basic AWS:<password>`, if any.
    fn authorised(&self, headers: &HeaderMap) -> Option<String> {
        let value = headers.get("authorization")?.to_str().ok()?;
        let encoded = value.strip_prefix("Basic ")?;
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded.trim()).ok()?;
        let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
        (user == "AWS").then(|| self.ecr.holder(password))?
    }

    fn handle(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Response {
        let Some(instance) = self.authorised(headers) else {
            tracing::info!(path = %uri.path(), "registry: unauthenticated request refused");
            return (
                StatusCode::UNAUTHORIZED,
                [
                    (
                        "www-authenticate",
                        "Basic realm=\"nodejoin fake ECR\",service=\"ecr.amazonaws.com\"",
                    ),
                    ("content-type", "application/json"),
                ],
                r#"{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}"#,
            )
                .into_response();
        };
        let path = uri.path();
        if path == "/v2/" || path == "/v2" {
            return (
                StatusCode::OK,
                [("docker-distribution-api-version", "registry/2.0")],
                "{}",
            )
                .into_response();
        }
        let Some(rest) = path.strip_prefix("/v2/") else {
            return not_found("NAME_UNKNOWN", path);
        };
        let (repository, kind, reference) = match (rest.rsplit_once("/manifests/"), rest.rsplit_once("/blobs/")) {
            (Some((r, t)), _) => (r, "manifests", t),
            (_, Some((r, d))) => (r, "blobs", d),
            _ => return not_found("NAME_UNKNOWN", path),
        };
        let image = self.images.lock().ok().and_then(|m| {
            m.iter()
                .find(|((repo, tag), img)| {
                    repo == repository && (kind == "blobs" || tag == reference || img.manifest_digest == reference)
                })
                .map(|(_, img)| img.clone())
        });
        let Some(image) = image else {
            return not_found("NAME_UNKNOWN", path);
        };
        let (body, content_type, d) = if kind == "manifests" {
            if let Ok(mut p) = self.pulls.lock() {
                p.push(Pull {
                    repository: repository.to_string(),
                    reference: reference.to_string(),
                    instance_id: instance.clone(),
                });
            }
            tracing::info!(%instance, "registry: manifest {repository}:{reference}");
            (image.manifest.clone(), OCI_MANIFEST, image.manifest_digest.clone())
        } else {
            match image.blobs.get(reference) {
                Some(b) => (b.clone(), "application/octet-stream", reference.to_string()),
                None => return not_found("BLOB_UNKNOWN", path),
            }
        };
        let len = body.len().to_string();
        let head = [
            ("content-type", content_type.to_string()),
            ("docker-content-digest", d),
            ("content-length", len),
        ];
        if method == Method::HEAD {
            (StatusCode::OK, head).into_response()
        } else {
            (StatusCode::OK, head, body).into_response()
        }
    }
}

fn not_found(code: &str, path: &str) -> Response {
    (
        StatusCode::NOT_FOUND,
        [("content-type", "application/json")],
        serde_json::json!({ "errors": [{ "code": code, "message": format!("{path} is not here") }] }).to_string(),
    )
        .into_response()
}

/// The `hosts.toml` that sends a node's containerd to this registry for `host` (an ECR registry name).
pub fn containerd_hosts_toml(host: &str, registry_url: &str) -> String {
    format!(
        "# Written by nodejoin: pulls from {host} go to the harness's fake ECR registry.\n\
         server = \"https://{host}\"\n\n[host.\"{registry_url}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `docker save`-style archive with one layer holding `pause`.
    pub(crate) fn docker_archive() -> Vec<u8> {
        let mut layer = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(5);
        h.set_mode(0o755);
        h.set_cksum();
        layer.append_data(&mut h, "pause", &b"PAUSE"[..]).unwrap();
        let layer = layer.into_inner().unwrap();
        let config = format!(
            r#"{{"architecture":"amd64","os":"linux","config":{{"Entrypoint":["/pause"]}},"rootfs":{{"type":"layers","diff_ids":["{}"]}}}}"#,
            digest(&layer)
        );
        let manifest = r#"[{"Config":"abc.json","RepoTags":["nodejoin.local/pause:3.10"],"Layers":["def/layer.tar"]}]"#;
        let mut out = tar::Builder::new(Vec::new());
        for (name, data) in [
            ("abc.json", config.as_bytes()),
            ("def/layer.tar", &layer[..]),
            ("manifest.json", manifest.as_bytes()),
        ] {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_cksum();
            out.append_data(&mut h, name, data).unwrap();
        }
        out.into_inner().unwrap()
    }

    #[test]
    fn docker_archive_becomes_an_oci_image() {
        let img = OciImage::from_docker_archive(&docker_archive()).unwrap();
        let m: serde_json::Value = serde_json::from_slice(&img.manifest).unwrap();
        assert_eq!(m["mediaType"], OCI_MANIFEST);
        assert_eq!(m["layers"][0]["mediaType"], OCI_LAYER);
        for d in [&m["config"]["digest"], &m["layers"][0]["digest"]] {
            let blob = &img.blobs[d.as_str().unwrap()];
            assert_eq!(&digest(blob), d.as_str().unwrap());
        }
        assert_eq!(img.manifest_digest, digest(&img.manifest));
        assert!(OciImage::from_docker_archive(b"not a tar").is_err());
    }

    #[tokio::test]
    async fn pulls_need_a_token_the_fake_ecr_issued() {
        use crate::fakes::instances::Instances;
        let instances = Instances::new();
        let ecr = Ecr::new(instances);
        let registry = Registry::new(ecr.clone());
        registry.add(
            SANDBOX_REPOSITORY,
            SANDBOX_TAG,
            OciImage::from_docker_archive(&docker_archive()).unwrap(),
        );
        let s = crate::fakes::FakeServer::start("registry", "127.0.0.1".parse().unwrap(), registry.router())
            .await
            .unwrap();
        let client = reqwest::Client::new();
        let url = format!("{}/v2/eks/pause/manifests/3.5", s.url());
        let r = client.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 401);
        assert!(r.headers()["www-authenticate"].to_str().unwrap().starts_with("Basic "));
        let forged = client.get(&url).basic_auth("AWS", Some("forged")).send().await.unwrap();
        assert_eq!(forged.status(), 401);
        assert!(registry.pulls_by("i-any").is_empty());
        assert!(!registry.has("eks/other", "1"));
        assert!(registry.has(SANDBOX_REPOSITORY, SANDBOX_TAG));

        ecr.remember("issued", "i-0abc");
        let ok = client.get(&url).basic_auth("AWS", Some("issued")).send().await.unwrap();
        assert_eq!(ok.status(), 200);
        assert_eq!(ok.headers()["content-type"], OCI_MANIFEST);
        let d = ok.headers()["docker-content-digest"].to_str().unwrap().to_string();
        let manifest: serde_json::Value = ok.json().await.unwrap();
        let head = client
            .head(&url)
            .basic_auth("AWS", Some("issued"))
            .send()
            .await
            .unwrap();
        assert_eq!(head.status(), 200);
        assert_eq!(head.headers()["docker-content-digest"].to_str().unwrap(), d);
        let layer = manifest["layers"][0]["digest"].as_str().unwrap();
        let blob = client
            .get(format!("{}/v2/eks/pause/blobs/{layer}", s.url()))
            .basic_auth("AWS", Some("issued"))
            .send()
            .await
            .unwrap();
        assert_eq!(blob.status(), 200);
        assert_eq!(digest(&blob.bytes().await.unwrap()), layer);
        let by_digest = client
            .get(format!("{}/v2/eks/pause/manifests/{d}", s.url()))
            .basic_auth("AWS", Some("issued"))
            .send()
            .await
            .unwrap();
        assert_eq!(by_digest.status(), 200);
        let missing = client
            .get(format!("{}/v2/eks/pause/manifests/9.9", s.url()))
            .basic_auth("AWS", Some("issued"))
            .send()
            .await
            .unwrap();
        assert_eq!(missing.status(), 404);
        let pulls = registry.pulls_by("i-0abc");
        assert_eq!(pulls.len(), 3, "{pulls:?}");
        assert_eq!(pulls[0].reference, "3.5");

        let toml = containerd_hosts_toml("602401143452.dkr.ecr.eu-west-1.amazonaws.com", &s.url());
        assert!(toml.contains("server = \"https://602401143452.dkr.ecr.eu-west-1.amazonaws.com\""));
        assert!(toml.contains(&format!("[host.\"{}\"]", s.url())));
    }
}
