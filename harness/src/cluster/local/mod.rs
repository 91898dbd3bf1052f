//! The embedded default provider: etcd, kube-apiserver and kube-controller-manager as supervised child
//! processes on ephemeral ports. The API server binds the run network's gateway address, which both the harness
//! and the node containers reach.
mod readiness;
use crate::cluster::local::readiness::{cp_err, etcd_client, probe_client, wait_http_ok, KcmCheck, KCM_READY_WITHIN};
use crate::cluster::{ClusterProvider, ClusterSpec, ControlPlane, ProviderContext};
use crate::error::{Error, Result};
use crate::pki::{ClusterPki, PkiPaths};
use crate::process::{HeldPort, Supervised};
use futures::future::BoxFuture;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct LocalProvider;

impl ClusterProvider for LocalProvider {
    fn probe<'a>(
        &'a self,
        _settings: &'a crate::settings::Settings,
        _version: &'a str,
        _docker: Option<&'a crate::docker::Docker>,
    ) -> BoxFuture<'a, crate::cluster::Availability> {
        // Its binaries are downloaded or built at run time, which never makes it unable to run.
        Box::pin(async { crate::cluster::Availability::Ready })
    }

    fn unavailable<'a>(
        &'a self,
        _settings: &'a crate::settings::Settings,
        _spec: &'a ClusterSpec,
        _docker: &'a crate::docker::Docker,
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }

    fn create<'a>(
        &'a self,
        spec: &'a ClusterSpec,
        ctx: ProviderContext<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn ControlPlane>>> {
        Box::pin(async move { Ok(Box::new(LocalControlPlane::start(spec, ctx).await?) as Box<dyn ControlPlane>) })
    }

    /// Its control planes are processes started in seconds: IAM scenarios get lanes of their own.
    fn iam_lanes(&self) -> bool {
        true
    }

    /// Idle, it costs more over a long run than starting it again.
    fn idle_stop_after(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_secs(15))
    }
}

/// A running local control plane; its processes stop when it is dropped.
pub struct LocalControlPlane {
    kcm_check: KcmCheck,
    endpoint: String,
    ca_pem: String,
    ca: crate::pki::Ca,
    client: kube::Client,
    kubeconfig: PathBuf,
    dir: PathBuf,
    timings: Vec<(String, Duration)>,
    // Field order is drop order: controller-manager, apiserver, then etcd.
    processes: Vec<Supervised>,
    _ports: Vec<HeldPort>,
    _etcd_data: tempfile::TempDir,
}

/// The first address of a service CIDR (the `kubernetes` Service's ClusterIP).
pub fn first_service_ip(cidr: &ipnet::Ipv4Net) -> Ipv4Addr {
    let n = u32::from(cidr.network());
    Ipv4Addr::from(n + 1)
}

impl LocalControlPlane {
    async fn start(spec: &ClusterSpec, ctx: ProviderContext<'_>) -> Result<Self> {
        let assets = ctx
            .assets
            .ok_or_else(|| cp_err("assets", "the local provider needs Kubernetes binaries"))?;
        let dir = ctx.dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let mut timings = Vec::new();
        let mut step = Instant::now();
        let mut mark = |name: &str, timings: &mut Vec<(String, Duration)>| {
            timings.push((name.to_string(), step.elapsed()));
            step = Instant::now();
        };

        let bind = IpAddr::V4(ctx.network.gateway);
        let service_ip = IpAddr::V4(first_service_ip(&spec.service_cidr));
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let pki = ClusterPki::generate(&[loopback, bind, service_ip])?;
        let paths = pki.write(&dir.join("pki"))?;
        let audit_policy = dir.join("audit-policy.yaml");
        std::fs::write(&audit_policy, crate::cluster::common::apiserver::AUDIT_POLICY)
            .map_err(|e| Error::io(&audit_policy, e))?;
        let webhook_config = match &ctx.token_webhook {
            Some(w) => Some(crate::cluster::common::apiserver::write_webhook_config(&dir, w)?),
            None => None,
        };
        mark("pki", &mut timings);

        let etcd_data = tempfile::Builder::new()
            .prefix(&crate::reaper::scratch_prefix(&ctx.run_id))
            .tempdir_in(crate::reaper::scratch_dir())
            .map_err(|e| cp_err("etcd", format!("data dir: {e}")))?;
        // Every port is held by this process until the components are gone (see HeldPort): each component
        // binds it with port sharing, and no other process can take it in between.
        let mut ports = Vec::new();
        let etcd_port = hold(&mut ports, loopback)?;
        let peer_port = hold(&mut ports, loopback)?;
        // etcd over TLS with client certificates of its own CA (as kubeadm runs it): an etcd that answers the probe
        // is ours, never another run's that took the port, and no other local process can read or write it.
        let etcd_url = format!("https://127.0.0.1:{etcd_port}");
        let d = |p: &Path| p.display().to_string();
        let etcd_args = vec![
            format!("--name=nodejoin"),
            format!("--data-dir={}", etcd_data.path().display()),
            format!("--listen-client-urls={etcd_url}"),
            format!("--advertise-client-urls={etcd_url}"),
            format!("--cert-file={}", d(&paths.etcd_server.0)),
            format!("--key-file={}", d(&paths.etcd_server.1)),
            format!("--trusted-ca-file={}", d(&paths.etcd_ca.0)),
            "--client-cert-auth=true".to_string(),
            // A single member never dials a peer, but etcd listens for them: over TLS, and only for a client
            // certificate of the run's etcd CA, so no other local process talks raft to it.
            format!("--listen-peer-urls=https://127.0.0.1:{peer_port}"),
            format!("--initial-advertise-peer-urls=https://127.0.0.1:{peer_port}"),
            format!("--initial-cluster=nodejoin=https://127.0.0.1:{peer_port}"),
            format!("--peer-cert-file={}", d(&paths.etcd_server.0)),
            format!("--peer-key-file={}", d(&paths.etcd_server.1)),
            format!("--peer-trusted-ca-file={}", d(&paths.etcd_ca.0)),
            "--peer-client-cert-auth=true".to_string(),
            format!(
                "--initial-cluster-token=nodejoin-{}-{}",
                ctx.run_id,
                crate::process::random_hex(8)
            ),
            "--socket-reuse-port=true".to_string(),
            "--unsafe-no-fsync=true".to_string(),
            "--log-level=warn".to_string(),
        ];
        let mut processes = vec![Supervised::spawn(
            "etcd",
            &assets.etcd,
            &etcd_args,
            &dir,
            &ctx.pids_dir,
        )?];
        let api_port = hold(&mut ports, bind)?;
        let endpoint = format!("https://{bind}:{api_port}");
        let mut apiserver_args = apiserver_args(spec, &paths, bind, api_port, &etcd_url, &audit_policy, &dir);
        if let Some(config) = &webhook_config {
            apiserver_args.extend([
                format!("--authentication-token-webhook-config-file={}", config.display()),
                "--authentication-token-webhook-version=v1".to_string(),
                // Short, so a scenario that changes aws-auth is not answered from a stale cache for long.
                "--authentication-token-webhook-cache-ttl=10s".to_string(),
            ]);
        }
        processes.insert(
            0,
            Supervised::spawn(
                "kube-apiserver",
                &assets.kube_apiserver,
                &apiserver_args,
                &dir,
                &ctx.pids_dir,
            )?,
        );
        // The API server starts while etcd does (it retries its storage until etcd answers): its own start-up
        // work overlaps etcd's instead of following it. etcd is still checked first, so a broken etcd is named
        // as such rather than as an API server that never got ready.
        let etcd_probe = etcd_client(&pki)?;
        wait_http_ok(
            "etcd",
            &mut processes,
            crate::deadline::CONTROL_PLANE_START,
            &etcd_probe,
            &format!("{etcd_url}/health"),
        )
        .await?;
        mark("etcd ready", &mut timings);
        let https = probe_client("kube-apiserver", Some(&pki.ca.0.cert_pem))?;
        let readyz = format!("{endpoint}/readyz");
        wait_http_ok(
            "kube-apiserver",
            &mut processes,
            crate::deadline::CONTROL_PLANE_START,
            &https,
            &readyz,
        )
        .await?;
        mark("kube-apiserver ready", &mut timings);

        let kubeconfig = dir.join("admin.kubeconfig");
        crate::cluster::kubeconfig::write_kubeconfig(
            &kubeconfig,
            &endpoint,
            &pki.ca.0.cert_pem,
            &pki.admin.cert_pem,
            &pki.admin.key_pem,
            "kubernetes-admin",
        )?;
        let kcm_kubeconfig = dir.join("controller-manager.kubeconfig");
        crate::cluster::kubeconfig::write_kubeconfig(
            &kcm_kubeconfig,
            &endpoint,
            &pki.ca.0.cert_pem,
            &pki.controller_manager.cert_pem,
            &pki.controller_manager.key_pem,
            "system:kube-controller-manager",
        )?;
        let kcm_port = hold(&mut ports, loopback)?;
        let kcm_args = kcm_args(spec, &paths, &kcm_kubeconfig, kcm_port);
        processes.insert(
            0,
            Supervised::spawn(
                "kube-controller-manager",
                &assets.kube_controller_manager,
                &kcm_args,
                &dir,
                &ctx.pids_dir,
            )?,
        );
        mark("kube-controller-manager started", &mut timings);
        let client = crate::cluster::kubeconfig::client_from_kubeconfig(&kubeconfig).await?;
        // kcm serves its health port with a self-signed certificate: any certificate will do for /healthz.
        let insecure = probe_client("kube-controller-manager", None)?;
        let healthz = format!("https://127.0.0.1:{kcm_port}/healthz");
        let kcm_check = KcmCheck::start(insecure, healthz, client.clone(), KCM_READY_WITHIN);
        crate::cluster::objects::apply_node_bootstrap_rbac(&client).await?;
        mark("rbac", &mut timings);

        Ok(Self {
            kcm_check,
            endpoint,
            ca_pem: pki.ca.0.cert_pem.clone(),
            ca: pki.ca.clone(),
            client,
            kubeconfig,
            dir,
            timings,
            processes,
            _ports: ports,
            _etcd_data: etcd_data,
        })
    }
}

/// A port on `ip` held in `ports` (for as long as the control plane lives).
fn hold(ports: &mut Vec<HeldPort>, ip: std::net::IpAddr) -> Result<u16> {
    let held = HeldPort::bind(ip)?;
    let port = held.port;
    ports.push(held);
    Ok(port)
}

fn apiserver_args(
    spec: &ClusterSpec,
    p: &PkiPaths,
    bind: IpAddr,
    port: u16,
    etcd_url: &str,
    audit_policy: &Path,
    dir: &Path,
) -> Vec<String> {
    let d = |p: &Path| p.display().to_string();
    vec![
        format!("--etcd-servers={etcd_url}"),
        format!("--etcd-cafile={}", d(&p.etcd_ca.0)),
        format!("--etcd-certfile={}", d(&p.apiserver_etcd_client.0)),
        format!("--etcd-keyfile={}", d(&p.apiserver_etcd_client.1)),
        format!("--bind-address={bind}"),
        format!("--advertise-address={bind}"),
        format!("--secure-port={port}"),
        "--permit-port-sharing=true".to_string(),
        format!("--service-cluster-ip-range={}", spec.service_cidr),
        format!("--client-ca-file={}", d(&p.ca.0)),
        format!("--tls-cert-file={}", d(&p.apiserver.0)),
        format!("--tls-private-key-file={}", d(&p.apiserver.1)),
        format!("--kubelet-client-certificate={}", d(&p.apiserver_kubelet_client.0)),
        format!("--kubelet-client-key={}", d(&p.apiserver_kubelet_client.1)),
        format!("--kubelet-certificate-authority={}", d(&p.ca.0)),
        "--kubelet-preferred-address-types=InternalIP,Hostname,InternalDNS,ExternalIP,ExternalDNS".to_string(),
        format!("--service-account-key-file={}", d(&p.sa_pub)),
        format!("--service-account-signing-key-file={}", d(&p.sa_key)),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
        "--enable-bootstrap-token-auth=true".to_string(),
        "--authorization-mode=Node,RBAC".to_string(),
        "--enable-admission-plugins=NodeRestriction".to_string(),
        "--allow-privileged=true".to_string(),
        format!("--requestheader-client-ca-file={}", d(&p.front_proxy_ca.0)),
        "--requestheader-allowed-names=front-proxy-client".to_string(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_string(),
        "--requestheader-group-headers=X-Remote-Group".to_string(),
        "--requestheader-username-headers=X-Remote-User".to_string(),
        format!("--proxy-client-cert-file={}", d(&p.front_proxy_client.0)),
        format!("--proxy-client-key-file={}", d(&p.front_proxy_client.1)),
        format!("--audit-policy-file={}", d(audit_policy)),
        format!("--audit-log-path={}", d(&dir.join("audit.log"))),
        "--profiling=false".to_string(),
        // API Priority and Fairness guards a shared production API server from noisy tenants; here its config
        // bootstrap and housekeeping were a third of the API server's CPU (start 5.6 -> 3.7 CPU-s, idle 7.2 ->
        // 4.9 % of a core, measured), and the plain in-flight limits are far above what 50 kubelets send.
        "--enable-priority-and-fairness=false".to_string(),
    ]
}

/// The controllers a node join involves. kube-controller-manager initialises its controllers one after another
/// before it syncs any of them; starting only these cuts its start-up from about 5 s to about 1 s here.
/// A drain (`after: drain`) needs the workload's: its ReplicaSet's, its DaemonSet's, and the disruption
/// controller that keeps a PodDisruptionBudget's status, which the eviction API reads.
pub const KCM_CONTROLLERS: &[&str] = &[
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-signing-controller",
    "certificatesigningrequest-cleaner-controller",
    "bootstrap-signer-controller",
    "token-cleaner-controller",
    "node-lifecycle-controller",
    "ttl-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "replicaset-controller",
    "daemonset-controller",
    "disruption-controller",
];

fn kcm_args(spec: &ClusterSpec, p: &PkiPaths, kubeconfig: &Path, port: u16) -> Vec<String> {
    let d = |p: &Path| p.display().to_string();
    let mut args = vec![
        format!("--kubeconfig={}", d(kubeconfig)),
        format!("--authentication-kubeconfig={}", d(kubeconfig)),
        format!("--authorization-kubeconfig={}", d(kubeconfig)),
        "--bind-address=127.0.0.1".to_string(),
        format!("--secure-port={port}"),
        "--permit-port-sharing=true".to_string(),
        format!("--cluster-signing-cert-file={}", d(&p.ca.0)),
        format!("--cluster-signing-key-file={}", d(&p.ca.1)),
        format!("--client-ca-file={}", d(&p.ca.0)),
        format!("--requestheader-client-ca-file={}", d(&p.front_proxy_ca.0)),
        format!("--root-ca-file={}", d(&p.ca.0)),
        format!("--service-account-private-key-file={}", d(&p.sa_key)),
        format!("--service-cluster-ip-range={}", spec.service_cidr),
        format!("--controllers={}", KCM_CONTROLLERS.join(",")),
        "--use-service-account-credentials=true".to_string(),
        "--leader-elect=false".to_string(),
        "--profiling=false".to_string(),
    ];
    if let Some(d) = spec.signing_duration_arg() {
        args.push(format!("--cluster-signing-duration={d}"));
    }
    args
}

impl ControlPlane for LocalControlPlane {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }
    fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
    fn client(&self) -> kube::Client {
        self.client.clone()
    }
    fn client_as<'a>(&'a self, user: &'a str, groups: &'a [&'a str]) -> BoxFuture<'a, Result<kube::Client>> {
        Box::pin(async move {
            crate::cluster::client_with_cert(&self.ca, &self.endpoint, &self.ca_pem, &self.dir, user, groups).await
        })
    }
    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
    fn logs_dir(&self) -> &Path {
        &self.dir
    }
    fn timings(&self) -> &[(String, Duration)] {
        &self.timings
    }
    fn failed_component(&mut self) -> Option<String> {
        let exited = self.processes.iter_mut().find_map(|p| {
            p.exited()
                .map(|s| format!("{} exited ({s}); last log lines:\n{}", p.name, p.log_tail(5)))
        });
        exited.or_else(|| self.kcm_check.failure())
    }
    fn memory(&self) -> Vec<(String, u64)> {
        self.processes
            .iter()
            .filter_map(|p| p.rss_kib().map(|r| (p.name.clone(), r)))
            .collect()
    }
    fn stop(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            for p in self.processes.iter_mut() {
                p.stop(Duration::from_secs(5)).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_service_ip_is_network_plus_one() {
        assert_eq!(
            first_service_ip(&"10.100.0.0/16".parse().unwrap()).to_string(),
            "10.100.0.1"
        );
        assert_eq!(
            first_service_ip(&"172.20.0.0/16".parse().unwrap()).to_string(),
            "172.20.0.1"
        );
    }
}
