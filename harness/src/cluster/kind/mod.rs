//! The kind provider: a kubeadm-built control plane in a kind node container, created by the kind CLI from
//! `kind-config/cluster.yaml` on the run's Docker network (`KIND_EXPERIMENTAL_DOCKER_NETWORK`), so the
//! scenario's node containers reach its API server by the control-plane container's name. The kind CLI is taken
//! from PATH or built from its Go module into the cache. The node image is the kind image setting, else our own
//! kind node image (`nodejoin image build --kind`) when built, by the content tag of the current recipe and binaries
//! (`nodejoin-kind-node:<version>-<hash>`, rebuilt when they changed; `:<version>` only says one exists), else
//! `kindest/node:<version>`
//! (pulled, or our own built in its place when the provider is required). kind runs with the docker shim in
//! `kind-config/docker-shim/`: it labels kind's node with the run and gives it a node's privileges, not
//! `--privileged`.
pub mod host;
pub mod image;
use crate::cluster::common::container::ContainerControlPlane;
use crate::cluster::{ClusterProvider, ClusterSpec, ControlPlane, ProviderContext};
use crate::error::{Error, Result};
use crate::settings::Settings;
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The label kind puts on its node containers (value: the kind cluster's name). Cleaning up needs no query of
/// it: the docker shim gives each node the run's label too (`host.rs`), so the run's labelled objects include them.
pub const KIND_CLUSTER_LABEL: &str = "io.x-k8s.kind.cluster";

/// The kind release built from the Go module proxy when `kind` is not on PATH.
pub const KIND_VERSION: &str = "v0.33.0";
/// Use this node image instead of `kindest/node:<version>`.
pub const ENV_IMAGE: &str = crate::settings::var::KIND_IMAGE;

pub use crate::cluster::kind::host::ENV_RESTRICTED;

/// The image the kind image setting names, if set.
fn image_override(settings: &Settings) -> Option<String> {
    let value = settings.kind_image.as_deref();
    let chosen = crate::cluster::common::images::override_or(value, String::new);
    (!chosen.is_empty()).then_some(chosen)
}

/// The upstream node image for `version`.
pub fn upstream_image(version: &str) -> String {
    format!("kindest/node:{version}")
}

/// The node image for `version`: the override, ours when built, else upstream's.
pub async fn image_for(settings: &Settings, docker: Option<&crate::docker::Docker>, version: &str) -> String {
    if let Some(image) = image_override(settings) {
        return image;
    }
    let ours = crate::cluster::kind::image::local_tag(version);
    match docker {
        Some(d) if crate::node::image::exists(d, &ours).await => ours,
        _ => upstream_image(version),
    }
}

fn kind_err(message: impl Into<String>) -> Error {
    Error::ControlPlane {
        component: "kind".into(),
        message: message.into(),
    }
}

/// kubeadm's config API kind v0.33 writes for a Kubernetes version: v1beta4 from 1.36 (extraArgs as name/value
/// lists), v1beta3 before. Our patches must use the same apiVersion: kind applies a patch only to documents of
/// its apiVersion and drops it silently otherwise.
pub fn kubeadm_api(version: &str) -> &'static str {
    let minor = version
        .strip_prefix("v1.")
        .and_then(|r| r.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if minor >= 36 {
        "kubeadm.k8s.io/v1beta4"
    } else {
        "kubeadm.k8s.io/v1beta3"
    }
}

/// `extraArgs` lines at `indent`, in the shape `api` wants.
fn extra_args(api: &str, args: &[(&str, String)], indent: usize) -> String {
    let pad = " ".repeat(indent);
    args.iter()
        .map(|(k, v)| {
            if api.ends_with("v1beta4") {
                format!("{pad}- name: {k}\n{pad}  value: \"{v}\"")
            } else {
                format!("{pad}{k}: \"{v}\"")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The kind config for one control plane, from `template` (kind-config/cluster.yaml).
pub fn render_config(template: &str, name: &str, spec: &ClusterSpec, image: &str, dir: &Path, webhook: bool) -> String {
    let api = kubeadm_api(&spec.version);
    let mut apiserver = vec![
        ("enable-bootstrap-token-auth", "true".to_string()),
        ("audit-policy-file", "/nodejoin/audit-policy.yaml".to_string()),
        ("audit-log-path", "/nodejoin/audit.log".to_string()),
        // kubeadm gives the API server a kubelet client certificate but no CA to verify the kubelets' serving
        // certificates with; EKS's verifies them against the cluster CA, so exec, logs and port-forward fail on a
        // node serving a certificate the cluster did not issue.
        (
            "kubelet-certificate-authority",
            "/etc/kubernetes/pki/ca.crt".to_string(),
        ),
    ];
    if webhook {
        apiserver.push((
            "authentication-token-webhook-config-file",
            "/nodejoin/token-webhook.kubeconfig".to_string(),
        ));
        apiserver.push(("authentication-token-webhook-version", "v1".to_string()));
        apiserver.push(("authentication-token-webhook-cache-ttl", "10s".to_string()));
    }
    let mut kcm = vec![("controllers", "*,bootstrapsigner,tokencleaner".to_string())];
    if let Some(d) = spec.signing_duration_arg() {
        kcm.push(("cluster-signing-duration", d));
    }
    template
        .replace("{{name}}", name)
        .replace("{{serviceSubnet}}", &spec.service_cidr.to_string())
        .replace("{{image}}", image)
        .replace("{{dir}}", &dir.display().to_string())
        .replace("{{kubeadmApiVersion}}", api)
        .replace("{{apiServerExtraArgs}}", &extra_args(api, &apiserver, 12))
        .replace("{{controllerManagerExtraArgs}}", &extra_args(api, &kcm, 12))
}

/// `kind` on PATH, else the one built into the cache.
pub fn find_kind(settings: &Settings) -> Option<PathBuf> {
    crate::assets::which("kind").or_else(|| {
        let p = crate::paths::cache_dir(settings)
            .join("kind")
            .join(KIND_VERSION)
            .join("kind");
        p.is_file().then_some(p)
    })
}

/// The kind CLI, built from `sigs.k8s.io/kind@KIND_VERSION` with Go when it is not there yet.
pub async fn ensure_kind(settings: &Settings) -> Result<PathBuf> {
    if let Some(k) = find_kind(settings) {
        return Ok(k);
    }
    // Parallel trials (nextest) would each build it into the same directory otherwise.
    let _lock = crate::paths::CacheLock::acquire(settings, "kind")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
    if let Some(k) = find_kind(settings) {
        return Ok(k);
    }
    let dir = crate::paths::cache_dir(settings).join("kind").join(KIND_VERSION);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let steps = crate::progress::Steps::new(&format!("build kind {KIND_VERSION} from Go modules"), 1);
    let mut go = std::process::Command::new("go");
    go.args(["install", &format!("sigs.k8s.io/kind@{KIND_VERSION}")])
        .env("GOBIN", &dir)
        .env("CGO_ENABLED", "0")
        .current_dir(&dir);
    crate::assets::go_env(&mut go);
    let work = crate::assets::go_work_dir(settings).map_err(|e| Error::io(crate::paths::scratch_root(settings), e))?;
    go.env("TMPDIR", work.path());
    let out = crate::deadline::output(
        &mut tokio::process::Command::from(go),
        &format!("go install sigs.k8s.io/kind@{KIND_VERSION}"),
        crate::deadline::GO_BUILD,
    )
    .await
    .map_err(|e| kind_err(e.to_string()))?;
    if !out.status.success() {
        return Err(kind_err(format!(
            "go install sigs.k8s.io/kind@{KIND_VERSION}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    steps.finish("built");
    Ok(dir.join("kind"))
}

/// The kind CLI at list time: present, buildable from its Go module at run time, or neither.
fn cli_availability(present: bool, go: bool) -> crate::cluster::Availability {
    match (present, go) {
        (true, _) => crate::cluster::Availability::Ready,
        (false, true) => crate::cluster::Availability::Fetchable(format!(
            "the kind CLI is not on PATH nor built in the cache yet (built from sigs.k8s.io/kind@{KIND_VERSION} at run time)"
        )),
        (false, false) => crate::cluster::Availability::Unavailable(format!(
            "the kind CLI is not on PATH and Go is not there to build sigs.k8s.io/kind@{KIND_VERSION}"
        )),
    }
}

/// `kind delete cluster` (best effort, bounded): after a failed create and when the control plane stops.
async fn delete_cluster(kind: &Path, name: &str) {
    let _ = crate::deadline::output(
        tokio::process::Command::new(kind).args(["delete", "cluster", "--name", name]),
        &format!("kind delete cluster --name {name}"),
        crate::deadline::DOCKER_CALL,
    )
    .await;
}

pub struct KindProvider;

impl ClusterProvider for KindProvider {
    fn probe<'a>(
        &'a self,
        settings: &'a crate::settings::Settings,
        version: &'a str,
        docker: Option<&'a crate::docker::Docker>,
    ) -> BoxFuture<'a, crate::cluster::Availability> {
        Box::pin(async move {
            let image = image_for(settings, docker, version).await;
            let found = match crate::cluster::common::images::probe(settings, docker, &image).await {
                crate::cluster::Availability::Fetchable(what) if image_override(settings).is_none() => {
                    crate::cluster::Availability::Fetchable(format!(
                        "{what}; or build nodejoin's own with `nodejoin image build --kind --version {version}` (from Go modules, no registry)"
                    ))
                }
                other => other,
            };
            found.and(cli_availability(
                find_kind(settings).is_some(),
                crate::assets::which("go").is_some(),
            ))
        })
    }

    fn unavailable<'a>(
        &'a self,
        settings: &'a crate::settings::Settings,
        spec: &'a ClusterSpec,
        docker: &'a crate::docker::Docker,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            let image = image_for(settings, Some(docker), &spec.version).await;
            if let Err(pull) = crate::cluster::common::images::ensure(settings, docker, &image).await {
                if image_override(settings).is_some() {
                    return Some(pull);
                }
                // No upstream image to be had: build ours in its place (minutes from a cold cache).
                if let Err(e) = crate::cluster::kind::image::ensure(settings, docker, &spec.version).await {
                    return Some(format!(
                        "{pull}; building nodejoin's own kind node image failed too: {e}"
                    ));
                }
            }
            if find_kind(settings).is_none() && crate::assets::which("go").is_none() {
                return Some(format!(
                    "the kind CLI is not on PATH and Go is not there to build sigs.k8s.io/kind@{KIND_VERSION}"
                ));
            }
            None
        })
    }

    fn create<'a>(
        &'a self,
        spec: &'a ClusterSpec,
        ctx: ProviderContext<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn ControlPlane>>> {
        crate::cluster::common::container::boxed(start(spec, ctx))
    }
}

/// The kind cluster, deleted with the control plane; dropped without that (a panic, a cancelled start), it
/// deletes the cluster itself, as a testcontainers container removes itself.
struct KindCluster {
    name: String,
    kind: PathBuf,
    /// Whether dropping it still has to delete the cluster (cleared once `remove` has).
    armed: bool,
}

impl KindCluster {
    fn new(name: String, kind: PathBuf) -> Self {
        Self {
            name,
            kind,
            armed: true,
        }
    }
}

impl Drop for KindCluster {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        // Blocking and bounded: Drop cannot await, and the run's reaper would otherwise find it only next time.
        let _ = crate::deadline::output_blocking(
            std::process::Command::new(&self.kind).args(["delete", "cluster", "--name", &self.name]),
            &format!("kind delete cluster --name {}", self.name),
            crate::deadline::DOCKER_CALL,
        );
    }
}

impl crate::cluster::common::container::Containers for KindCluster {
    fn stopped(&self) -> Option<String> {
        crate::cluster::container_stopped(&format!("{}-control-plane", self.name))
            .map(|why| format!("kind control-plane container {why}"))
    }
    fn remove(mut self: Box<Self>, dir: PathBuf) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let container = format!("{}-control-plane", self.name);
            crate::cluster::save_container_log(&container, &dir.join("kind-control-plane.log")).await;
            save_pod_logs(&container, &dir.join("kind-pod-logs.log")).await;
            delete_cluster(&self.kind, &self.name).await;
            self.armed = false;
        })
    }
}

/// The tail of each control-plane pod's log inside kind's node (kube-apiserver, etcd, the controller manager, each
/// restart's file included): a kind API server that stops answering mid-run is explained there, not in the
/// node's console log. A fixed script in kind's own container; nothing from a scenario reaches it.
async fn save_pod_logs(container: &str, path: &std::path::Path) {
    let Ok(docker) = crate::docker::connect().await else {
        return;
    };
    let script = "for f in /var/log/pods/kube-system_*/*/*.log; do echo \"==> $f\"; tail -n 200 \"$f\"; done";
    let cmd = ["sh", "-c", script];
    let out = crate::docker::exec(
        &docker,
        container,
        container,
        &cmd,
        &[],
        None,
        crate::deadline::DOCKER_CALL,
    )
    .await;
    if let Ok(out) = out {
        let _ = std::fs::write(path, out.stdout);
    }
}

async fn start(spec: &ClusterSpec, ctx: ProviderContext<'_>) -> Result<ContainerControlPlane> {
    let kind = ensure_kind(ctx.settings).await?;
    let dir = crate::cluster::common::container::prepare_dir(&ctx)?;
    let template_path = crate::paths::kind_config_dir(ctx.settings).join("cluster.yaml");
    let template = std::fs::read_to_string(&template_path).map_err(|e| Error::io(&template_path, e))?;
    let name = format!("nj-{}-{}", ctx.run_id, crate::process::random_hex(3));
    let config = dir.join("kind.yaml");
    let image = match image_for(ctx.settings, Some(ctx.docker), &spec.version).await {
        // Ours: the build of the current recipe and binaries by its content tag (built if they changed), never
        // the `<version>` alias another process may have re-pointed since.
        ours if ours == crate::cluster::kind::image::local_tag(&spec.version) => {
            crate::cluster::kind::image::ensure(ctx.settings, ctx.docker, &spec.version)
                .await?
                .tag
        }
        other => other,
    };
    let rendered = render_config(&template, &name, spec, &image, &dir, ctx.token_webhook.is_some());
    std::fs::write(&config, rendered).map_err(|e| Error::io(&config, e))?;
    let kubeconfig = dir.join("admin.kubeconfig");
    let shim = crate::cluster::kind::host::for_kind(ctx.settings, &crate::docker::run_labels(&ctx.run_id))
        .await
        .map_err(kind_err)?;
    let mut create = tokio::process::Command::new(&kind);
    create
        .args(["create", "cluster", "--name", &name, "--wait", "120s", "--config"])
        .arg(&config)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .env("KIND_EXPERIMENTAL_DOCKER_NETWORK", &ctx.network.name);
    shim.apply(&mut create);
    // Owned from here: whatever ends this start early (an error below, a cancelled run) deletes the cluster.
    let mut cluster = KindCluster::new(name.clone(), kind.clone());
    let t0 = Instant::now();
    // Recorded while it runs: if the run is killed, the reaper ends kind (and its `docker run`) before removing
    // the containers it made.
    let created = crate::deadline::output_recorded(
        &mut create,
        &format!("kind create cluster --name {name}"),
        crate::deadline::KIND_CREATE,
        Some((&ctx.pids_dir, "kind-create", &kind)),
    )
    .await;
    let log = dir.join("kind-create.log");
    let out = match created {
        Ok(out) if out.status.success() => out,
        failed => {
            if let Ok(out) = &failed {
                let _ = std::fs::write(&log, [out.stdout.as_slice(), out.stderr.as_slice()].concat());
            }
            delete_cluster(&kind, &name).await;
            cluster.armed = false;
            return Err(match failed {
                Err(e) => kind_err(e.to_string()),
                Ok(_) => kind_err(format!("kind create cluster failed (log: {})", log.display())),
            });
        }
    };
    let _ = std::fs::write(&log, [out.stdout.as_slice(), out.stderr.as_slice()].concat());
    let step = match shim.swaps_privileged {
        true => format!("kind create cluster ({image}, a node's privileges instead of --privileged)"),
        false => format!("kind create cluster ({image})"),
    };
    let timings = vec![(step, t0.elapsed())];
    let raw = std::fs::read_to_string(&kubeconfig).map_err(|e| Error::io(&kubeconfig, e))?;
    let admin_server = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&raw)
        .ok()
        .and_then(|d| d["clusters"][0]["cluster"]["server"].as_str().map(str::to_string))
        .ok_or_else(|| kind_err("kind's kubeconfig names no server"))?;
    let (_, ca_pem) = crate::cluster::kubeconfig::point_at(&raw, &admin_server).map_err(kind_err)?;
    let cp = format!("{name}-control-plane");
    let read = |path: &'static str| {
        let cp = cp.clone();
        async move {
            let out = crate::docker::exec(
                ctx.docker,
                &cp,
                &cp,
                &["cat", path],
                &[],
                None,
                crate::deadline::DOCKER_CALL,
            )
            .await
            .map_err(|e| kind_err(e.to_string()))?;
            match out.exit_code {
                0 => Ok(out.stdout),
                _ => Err(kind_err(format!("{cp}:{path}: {}", out.stderr.trim()))),
            }
        }
    };
    let client_ca = crate::pki::Ca(crate::pki::CertKey {
        cert_pem: read("/etc/kubernetes/pki/ca.crt").await?,
        key_pem: read("/etc/kubernetes/pki/ca.key").await?,
    });
    let mut cp = crate::cluster::common::container::Started {
        component: "kind",
        endpoint: format!("https://{cp}:6443"),
        admin_server,
        ca_pem,
        client_ca,
        kubeconfig,
        dir,
        timings,
        containers: Box::new(cluster),
    }
    .connect()
    .await?;
    if let Err(e) = pin_kube_proxy(&cp.client).await {
        let dir = cp.dir.clone();
        if let Some(c) = cp.containers.take() {
            c.remove(dir).await;
        }
        return Err(kind_err(e));
    }
    Ok(cp)
}

/// Keeps kubeadm's kube-proxy DaemonSet on the kind node: the scenario's nodes have no kube-proxy image and no
/// registry to pull one from (and the local provider runs none either). On the kind node it makes Service IPs
/// work, so CoreDNS there reaches the API server.
async fn pin_kube_proxy(client: &kube::Client) -> std::result::Result<(), String> {
    use k8s_openapi::api::apps::v1::DaemonSet;
    use kube::api::{Api, Patch, PatchParams};
    let api: Api<DaemonSet> = Api::namespaced(client.clone(), "kube-system");
    let patch = serde_json::json!({
        "spec": { "template": { "spec": { "nodeSelector": { "node-role.kubernetes.io/control-plane": "" } } } }
    });
    match api
        .patch("kube-proxy", &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        // A cluster without kube-proxy (kubeProxyMode: none) has nothing to pin.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(format!("pinning kube-proxy to the kind node: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template() -> String {
        std::fs::read_to_string(crate::paths::kind_config_dir(&crate::settings::for_tests()).join("cluster.yaml"))
            .unwrap()
    }

    fn spec(version: &str) -> ClusterSpec {
        ClusterSpec {
            provider: crate::cluster::Provider::KIND,
            version: version.into(),
            service_cidr: "10.100.0.0/16".parse().unwrap(),
            iam_lane: None,
            certificate_lifetime: None,
        }
    }

    #[test]
    fn the_cli_is_fetchable_only_with_go() {
        use super::super::Availability;
        assert_eq!(cli_availability(true, false), Availability::Ready);
        assert!(matches!(cli_availability(false, true), Availability::Fetchable(r) if r.contains("built from")));
        assert!(
            matches!(cli_availability(false, false), Availability::Unavailable(r) if r.contains("Go is not there"))
        );
    }

    #[test]
    fn kubeadm_api_follows_the_version() {
        assert_eq!(kubeadm_api("v1.30.4"), "kubeadm.k8s.io/v1beta3");
        assert_eq!(kubeadm_api("v1.34.4"), "kubeadm.k8s.io/v1beta3");
        assert_eq!(kubeadm_api("v1.35.4"), "kubeadm.k8s.io/v1beta3");
        assert_eq!(kubeadm_api("v1.36.3"), "kubeadm.k8s.io/v1beta4");
    }

    /// The rendered config is valid YAML, and its kubeadm patch is valid YAML in the right extraArgs shape.
    #[test]
    fn config_renders_for_both_kubeadm_apis() {
        for (version, list_shape) in [("v1.36.3", true), ("v1.30.4", false)] {
            let text = render_config(
                &template(),
                "nj-run-abc",
                &spec(version),
                "kindest/node:x",
                Path::new("/tmp/cp-0"),
                true,
            );
            assert!(!text.contains("{{"), "{text}");
            let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
            assert_eq!(doc["kind"].as_str(), Some("Cluster"));
            assert_eq!(doc["name"].as_str(), Some("nj-run-abc"));
            assert_eq!(doc["networking"]["serviceSubnet"].as_str(), Some("10.100.0.0/16"));
            let node = &doc["nodes"][0];
            assert_eq!(node["image"].as_str(), Some("kindest/node:x"));
            assert_eq!(node["extraMounts"][0]["hostPath"].as_str(), Some("/tmp/cp-0"));
            let patch: serde_yaml_ng::Value =
                serde_yaml_ng::from_str(node["kubeadmConfigPatches"][0].as_str().unwrap()).unwrap();
            assert_eq!(patch["apiVersion"].as_str(), Some(kubeadm_api(version)));
            let args = &patch["apiServer"]["extraArgs"];
            let arg = |name: &str| {
                let value = if list_shape {
                    args.as_sequence()
                        .unwrap()
                        .iter()
                        .find(|a| a["name"].as_str() == Some(name))
                        .map(|a| a["value"].clone())
                } else {
                    Some(args[name].clone())
                };
                value.and_then(|v| v.as_str().map(str::to_string))
            };
            assert_eq!(
                arg("authentication-token-webhook-config-file").as_deref(),
                Some("/nodejoin/token-webhook.kubeconfig"),
                "{version}"
            );
            // The API server verifies the kubelets' serving certificates against the cluster CA, as EKS's does.
            assert_eq!(
                arg("kubelet-certificate-authority").as_deref(),
                Some("/etc/kubernetes/pki/ca.crt"),
                "{version}"
            );
            let sans = patch["apiServer"]["certSANs"].as_sequence().unwrap();
            assert!(sans.iter().any(|s| s.as_str() == Some("nj-run-abc-control-plane")));
        }
    }
}
