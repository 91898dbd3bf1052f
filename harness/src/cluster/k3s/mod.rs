//! The k3s provider: k3s's own control plane (its apiserver, controllers and sqlite datastore) in one container of
//! the `rancher/k3s` image, started through testcontainers on the run network. Only the server runs
//! (`--disable-agent`): the nodes are ours, bootstrapped by the scenario against its endpoint, which they reach
//! by the container's name through Docker's DNS. The token webhook, audit policy and bootstrap-token auth are
//! passed with `--kube-apiserver-arg`; the CA and admin kubeconfig are read back and the kubeconfig is rewritten
//! to the port Docker mapped on the host.
use crate::cluster::common::container::ContainerControlPlane;
use crate::cluster::{ClusterProvider, ClusterSpec, ControlPlane, ProviderContext};
use crate::error::{Error, Result};
use futures::future::BoxFuture;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use testcontainers::core::{CgroupnsMode, IntoContainerPort, Mount, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

/// Use this image instead of `rancher/k3s:<version>-k3s1`.
pub const ENV_IMAGE: &str = crate::settings::var::K3S_IMAGE;
/// Where the control plane's directory is mounted in the container (webhook config, audit policy and log).
const MOUNT: &str = "/nodejoin";
const API_PORT: u16 = 6443;
/// The CA k3s signs its serving certificates and the kubelets' serving CSRs with: the one its kubeconfig names.
const SERVER_CA: &str = "/var/lib/rancher/k3s/server/tls/server-ca.crt";

/// The k3s image for a Kubernetes version.
pub fn image_for(settings: &crate::settings::Settings, version: &str) -> String {
    crate::cluster::common::images::override_or(settings.k3s_image.as_deref(), || format!("rancher/k3s:{version}-k3s1"))
}

fn k3s_err(message: impl Into<String>) -> Error {
    Error::ControlPlane {
        component: "k3s".into(),
        message: message.into(),
    }
}

/// `k3s server` arguments: only the control plane, nothing a bootstrap test does not need, and the API server
/// flags the harness relies on.
pub fn server_args(spec: &ClusterSpec, san: &str, webhook: bool) -> Vec<String> {
    let mut args: Vec<String> = [
        "server",
        "--disable-agent",
        "--disable=traefik,servicelb,metrics-server,local-storage,coredns",
        "--disable-cloud-controller",
        "--disable-network-policy",
        "--disable-helm-controller",
        "--write-kubeconfig-mode=0644",
        "--cluster-cidr=10.42.0.0/16",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("--service-cidr={}", spec.service_cidr));
    args.push(format!("--tls-san={san}"));
    let api = |k: &str, v: &str| format!("--kube-apiserver-arg={k}={v}");
    args.push(api("enable-bootstrap-token-auth", "true"));
    args.push(api("audit-policy-file", &format!("{MOUNT}/audit-policy.yaml")));
    args.push(api("audit-log-path", &format!("{MOUNT}/audit.log")));
    // k3s's own default, stated so it stays: the API server verifies the kubelets' serving certificates against
    // the server CA (the cluster CA the nodes are given, which signs their serving CSRs), as EKS's does.
    args.push(api("kubelet-certificate-authority", SERVER_CA));
    if webhook {
        args.push(api(
            "authentication-token-webhook-config-file",
            &format!("{MOUNT}/token-webhook.kubeconfig"),
        ));
        args.push(api("authentication-token-webhook-version", "v1"));
        args.push(api("authentication-token-webhook-cache-ttl", "10s"));
    }
    args.push("--kube-controller-manager-arg=controllers=*,bootstrapsigner,tokencleaner".into());
    if let Some(d) = spec.signing_duration_arg() {
        args.push(format!("--kube-controller-manager-arg=cluster-signing-duration={d}"));
    }
    args
}

pub struct K3sProvider;

impl ClusterProvider for K3sProvider {
    fn probe<'a>(
        &'a self,
        settings: &'a crate::settings::Settings,
        version: &'a str,
        docker: Option<&'a crate::docker::Docker>,
    ) -> BoxFuture<'a, crate::cluster::Availability> {
        Box::pin(
            async move { crate::cluster::common::images::probe(settings, docker, &image_for(settings, version)).await },
        )
    }

    fn unavailable<'a>(
        &'a self,
        settings: &'a crate::settings::Settings,
        spec: &'a ClusterSpec,
        docker: &'a crate::docker::Docker,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async move {
            crate::cluster::common::images::ensure(settings, docker, &image_for(settings, &spec.version))
                .await
                .err()
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

/// The k3s server container, removed with the control plane.
struct K3sServer {
    name: String,
    container: ContainerAsync<GenericImage>,
}

impl crate::cluster::common::container::Containers for K3sServer {
    fn stopped(&self) -> Option<String> {
        crate::cluster::container_stopped(&self.name).map(|why| format!("k3s server container {why}"))
    }
    fn remove(self: Box<Self>, dir: PathBuf) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            crate::cluster::save_container_log(&self.name, &dir.join("k3s.log")).await;
            let _ = self.container.rm().await;
        })
    }
}

/// The k3s server's host config: its API published on the host's loopback only (nodes reach it on the run
/// network), and a node's privileges (it runs a kubelet and containerd like one).
fn server_host_config(hc: &mut testcontainers::bollard::models::HostConfig) {
    use testcontainers::bollard::models::PortBinding;
    hc.publish_all_ports = Some(false);
    hc.port_bindings = Some(
        [(
            format!("{API_PORT}/tcp"),
            Some(vec![PortBinding {
                host_ip: Some("127.0.0.1".into()),
                host_port: Some(String::new()),
            }]),
        )]
        .into(),
    );
    crate::node::privileges::restrict(hc);
}

async fn start(spec: &ClusterSpec, ctx: ProviderContext<'_>) -> Result<ContainerControlPlane> {
    let dir = crate::cluster::common::container::prepare_dir(&ctx)?;
    let image = image_for(ctx.settings, &spec.version);
    let (repo, tag) = image.rsplit_once(':').unwrap_or((image.as_str(), "latest"));
    let name = format!("nodejoin-{}-k3s-{}", ctx.run_id, crate::process::random_hex(4));
    let t0 = Instant::now();
    let container = GenericImage::new(repo, tag)
        .with_wait_for(WaitFor::message_on_stderr("k3s is up and running"))
        .with_exposed_port(API_PORT.tcp())
        .with_container_name(&name)
        .with_network(&ctx.network.name)
        .with_labels(crate::docker::run_labels(&ctx.run_id))
        .with_cmd(server_args(spec, &name, ctx.token_webhook.is_some()))
        .with_mount(Mount::bind_mount(dir.display().to_string(), MOUNT))
        .with_mount(Mount::tmpfs_mount("/run"))
        .with_cap_add("ALL")
        .with_cap_drop("SYS_RESOURCE")
        .with_security_opt("seccomp=unconfined")
        .with_security_opt("apparmor=unconfined")
        .with_cgroupns_mode(CgroupnsMode::Private)
        .with_startup_timeout(Duration::from_secs(120))
        .with_host_config_modifier(server_host_config);
    let container = crate::node::privileges::DROPPED_CAPABILITIES
        .iter()
        .fold(container, |c, cap| c.with_cap_drop(*cap))
        .start()
        .await
        .map_err(|e| k3s_err(format!("starting {image}: {e}")))?;
    let timings = vec![("k3s server up".to_string(), t0.elapsed())];
    let port = container
        .get_host_port_ipv4(API_PORT)
        .await
        .map_err(|e| k3s_err(format!("mapped API port: {e}")))?;
    let read = |path: &'static str| {
        let c = &container;
        let what = format!("reading {path} from the k3s container {name}");
        crate::deadline::within(what, crate::deadline::DOCKER_CALL, async move {
            let mut out = c
                .exec(testcontainers::core::ExecCommand::new(["cat", path]))
                .await
                .map_err(|e| k3s_err(format!("reading {path}: {e}")))?;
            let bytes = out
                .stdout_to_vec()
                .await
                .map_err(|e| k3s_err(format!("reading {path}: {e}")))?;
            String::from_utf8(bytes).map_err(|e| k3s_err(format!("{path}: {e}")))
        })
    };
    let raw = read("/etc/rancher/k3s/k3s.yaml").await?;
    let admin_server = format!("https://127.0.0.1:{port}");
    let (kubeconfig_text, ca_pem) = crate::cluster::kubeconfig::point_at(&raw, &admin_server).map_err(k3s_err)?;
    let kubeconfig = dir.join("admin.kubeconfig");
    crate::paths::write_private(&kubeconfig, kubeconfig_text.as_bytes()).map_err(|e| Error::io(&kubeconfig, e))?;
    // Client certificates for harness identities (eks:node-manager ...) come from k3s's client CA, so the
    // audit log names them as they are, not as an impersonating admin.
    let client_ca = crate::pki::Ca(crate::pki::CertKey {
        cert_pem: read("/var/lib/rancher/k3s/server/tls/client-ca.crt").await?,
        key_pem: read("/var/lib/rancher/k3s/server/tls/client-ca.key").await?,
    });
    crate::cluster::common::container::Started {
        component: "k3s",
        endpoint: format!("https://{name}:{API_PORT}"),
        admin_server,
        ca_pem,
        client_ca,
        kubeconfig,
        dir,
        timings,
        containers: Box::new(K3sServer { name, container }),
    }
    .connect()
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_is_published_on_loopback_only_and_the_server_is_masked_as_a_node() {
        let mut hc = testcontainers::bollard::models::HostConfig {
            publish_all_ports: Some(true),
            ..Default::default()
        };
        server_host_config(&mut hc);
        assert_eq!(hc.publish_all_ports, Some(false));
        let bindings = hc.port_bindings.unwrap();
        let api = bindings["6443/tcp"].as_ref().unwrap();
        assert_eq!(api.len(), 1);
        assert_eq!(api[0].host_ip.as_deref(), Some("127.0.0.1"));
        assert!(hc.masked_paths.unwrap().iter().any(|p| p == "/proc/kcore"));
    }

    fn spec() -> ClusterSpec {
        ClusterSpec {
            provider: crate::cluster::Provider::K3S,
            version: "v1.36.3".into(),
            service_cidr: "10.100.0.0/16".parse().unwrap(),
            iam_lane: None,
            certificate_lifetime: None,
        }
    }

    #[test]
    fn server_args_run_only_what_a_bootstrap_test_needs() {
        let args = server_args(&spec(), "nodejoin-r-k3s-1", true);
        assert_eq!(args[0], "server");
        for want in [
            "--disable-agent",
            "--disable=traefik,servicelb,metrics-server,local-storage,coredns",
            "--disable-cloud-controller",
            "--service-cidr=10.100.0.0/16",
            "--tls-san=nodejoin-r-k3s-1",
            "--kube-apiserver-arg=enable-bootstrap-token-auth=true",
            "--kube-apiserver-arg=authentication-token-webhook-config-file=/nodejoin/token-webhook.kubeconfig",
            "--kube-apiserver-arg=audit-log-path=/nodejoin/audit.log",
            "--kube-apiserver-arg=kubelet-certificate-authority=/var/lib/rancher/k3s/server/tls/server-ca.crt",
            "--kube-controller-manager-arg=controllers=*,bootstrapsigner,tokencleaner",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} missing from {args:?}");
        }
        let without = server_args(&spec(), "x", false);
        assert!(!without.iter().any(|a| a.contains("token-webhook")));
    }
}
