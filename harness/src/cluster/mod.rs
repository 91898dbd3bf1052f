//! Cluster providers behind one trait, in the manner of kind's provider interface: a provider creates a control
//! plane from a spec; the rest of the harness only talks to the `ControlPlane` it returns.
pub mod common;
pub mod k3s;
pub mod kind;
pub mod local;

pub use common::{images, kubeconfig, objects};

use crate::assets::K8sAssets;
use crate::docker::RunNetwork;
use crate::error::Result;
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a scenario asks of the control plane; scenarios with equal specs share one control plane.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterSpec {
    pub provider: Provider,
    pub version: String,
    pub service_cidr: ipnet::Ipv4Net,
    /// An IAM lane: a control plane apart from the shared one, used by one IAM scenario at a time (aws-auth and
    /// the authentication mode are cluster-wide) and reused by the next (see `Provider::iam_lanes`).
    pub iam_lane: Option<u32>,
    /// How long the certificates the cluster signs for CSRs live (`--cluster-signing-duration`, `cluster.
    /// certificateLifetime`): short, so a kubelet rotates its certificates while a scenario watches. Default:
    /// the controller manager's (a year).
    pub certificate_lifetime: Option<std::time::Duration>,
}

impl ClusterSpec {
    /// `--cluster-signing-duration`'s value, when the scenario sets one.
    pub fn signing_duration_arg(&self) -> Option<String> {
        self.certificate_lifetime.map(|d| format!("{}s", d.as_secs()))
    }
}

/// Where the API server sends TokenReviews for bearer tokens it does not know (EKS's IAM authenticator).
#[derive(Debug, Clone)]
pub struct TokenWebhook {
    /// `https://<gateway>:<port>/authenticate/<control plane>`.
    pub url: String,
    pub ca_pem: String,
}

/// What a provider gets to work with.
pub struct ProviderContext<'a> {
    pub settings: &'a crate::settings::Settings,
    pub docker: &'a crate::docker::Docker,
    pub assets: Option<&'a K8sAssets>,
    pub network: &'a RunNetwork,
    /// Where logs and generated files go (`target/nodejoin/<run>/control-plane-<n>/`).
    pub dir: PathBuf,
    /// Where child PIDs are recorded for reaping.
    pub pids_dir: PathBuf,
    /// The run id: scratch files outside the run directory carry it so the reaper can find them.
    pub run_id: String,
    pub token_webhook: Option<TokenWebhook>,
}

/// What a provider's cheap probe found, without pulling or building anything: how its trials are listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// Everything it needs is on this machine.
    Ready,
    /// Something it needs is missing but could be fetched or built at run time; the text says what and how.
    Fetchable(String),
    /// It cannot run here; the text says why and what to do.
    Unavailable(String),
}

impl Availability {
    /// Both needed: the worse of the two, with both reasons when both are missing something.
    pub fn and(self, other: Availability) -> Availability {
        use Availability::*;
        match (self, other) {
            (Unavailable(a), Unavailable(b)) => Unavailable(format!("{a}; {b}")),
            (Unavailable(a), _) | (_, Unavailable(a)) => Unavailable(a),
            (Fetchable(a), Fetchable(b)) => Fetchable(format!("{a}; {b}")),
            (Fetchable(a), Ready) | (Ready, Fetchable(a)) => Fetchable(a),
            (Ready, Ready) => Ready,
        }
    }
}

/// A provider of control planes (local processes, kind, k3s).
pub trait ClusterProvider: Send + Sync {
    /// The list-time probe: only looks (is the image present locally, is a failed pull remembered, is the CLI
    /// there), so listing trials stays fast and never touches a registry. `docker` is `None` when the engine
    /// cannot be reached.
    fn probe<'a>(
        &'a self,
        settings: &'a crate::settings::Settings,
        version: &'a str,
        docker: Option<&'a crate::docker::Docker>,
    ) -> BoxFuture<'a, Availability>;
    /// Why this provider cannot run `spec` on this machine, if it cannot (the trial is then reported ignored,
    /// with this reason): a missing image that cannot be pulled, a missing tool.
    fn unavailable<'a>(
        &'a self,
        settings: &'a crate::settings::Settings,
        spec: &'a ClusterSpec,
        docker: &'a crate::docker::Docker,
    ) -> BoxFuture<'a, Option<String>>;
    fn create<'a>(
        &'a self,
        spec: &'a ClusterSpec,
        ctx: ProviderContext<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn ControlPlane>>>;
    /// Whether IAM scenarios run on control planes apart from the shared one, IAM lanes, each used by one IAM
    /// scenario at a time and reused by the next (cheap control planes: processes started in seconds). By
    /// default IAM scenarios share the provider's control plane one at a time (container providers, whose
    /// control planes take tens of seconds to create). Either way each starts from a cluster without aws-auth.
    fn iam_lanes(&self) -> bool {
        false
    }
    /// How long a shared control plane may sit unused before it is stopped (a later scenario that needs it gets
    /// a new one). Cheap control planes cost more idle over a long run than starting them again; by default
    /// (`None`) it is kept to the end of the run, as container providers want.
    fn idle_stop_after(&self) -> Option<std::time::Duration> {
        None
    }
}

/// A running control plane.
pub trait ControlPlane: Send + Sync {
    /// `https://<addr>:<port>`, reachable from node containers and from the harness.
    fn endpoint(&self) -> &str;
    fn ca_pem(&self) -> &str;
    fn client(&self) -> kube::Client;
    /// A client authenticated as `user` in `groups` by a client certificate (how EKS's own components, like
    /// `eks:node-manager`, appear in the audit log).
    fn client_as<'a>(&'a self, user: &'a str, groups: &'a [&'a str]) -> BoxFuture<'a, Result<kube::Client>>;
    /// An admin kubeconfig on disk (handy for `kubectl` while debugging a run).
    fn kubeconfig(&self) -> &Path;
    fn logs_dir(&self) -> &Path;
    /// How long creation took, per named step.
    fn timings(&self) -> &[(String, Duration)];
    /// `Some(description)` when a component has died.
    fn failed_component(&mut self) -> Option<String>;
    /// Resident memory of each component in KiB, for the report.
    fn memory(&self) -> Vec<(String, u64)>;
    fn stop(self: Box<Self>) -> BoxFuture<'static, ()>;
}

/// One registered provider: its name (in scenario files, trial names, `--provider`, doctor) and what it does.
pub struct Registration {
    pub name: &'static str,
    pub provider: &'static dyn ClusterProvider,
}

/// Every provider, in the order trials are listed: a new provider is its module plus one line here.
pub const REGISTRY: &[Registration] = &[
    Registration {
        name: "local",
        provider: &local::LocalProvider,
    },
    Registration {
        name: "k3s",
        provider: &k3s::K3sProvider,
    },
    Registration {
        name: "kind",
        provider: &kind::KindProvider,
    },
];

/// A registered provider, looked up once by its name (a scenario file, `--provider`, a trial's name) and carried
/// from there: nothing after that looks it up again or meets an unknown one.
#[derive(Clone, Copy)]
pub struct Provider(&'static Registration);

impl Provider {
    /// The providers code names directly (defaults, tests); any registered name parses.
    pub const LOCAL: Provider = Provider(&REGISTRY[0]);
    pub const K3S: Provider = Provider(&REGISTRY[1]);
    pub const KIND: Provider = Provider(&REGISTRY[2]);

    /// Every registered provider, in the order trials are listed.
    pub fn all() -> Vec<Provider> {
        REGISTRY.iter().map(Provider).collect()
    }

    pub fn parse(name: &str) -> Option<Self> {
        REGISTRY.iter().find(|r| r.name == name.trim()).map(Provider)
    }

    pub fn as_str(&self) -> &'static str {
        self.0.name
    }

    /// What it does.
    pub fn get(&self) -> &'static dyn ClusterProvider {
        self.0.provider
    }
}

impl Default for Provider {
    fn default() -> Self {
        Self::LOCAL
    }
}

// By name: a registration is one per name.
impl PartialEq for Provider {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}
impl Eq for Provider {}
impl std::hash::Hash for Provider {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}
impl PartialOrd for Provider {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Provider {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}
impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The registered providers' names.
pub fn names() -> Vec<&'static str> {
    REGISTRY.iter().map(|r| r.name).collect()
}

/// A client that authenticates as `user` in `groups` with a certificate from `ca` (a CA the API server trusts
/// for clients), so the audit log names that identity itself.
pub async fn client_with_cert(
    ca: &crate::pki::Ca,
    server: &str,
    ca_pem: &str,
    dir: &Path,
    user: &str,
    groups: &[&str],
) -> Result<kube::Client> {
    let cert = ca.issue(user, groups, &[], crate::pki::Usage::Client)?;
    let file = user.replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    let path = dir.join(format!("{file}.kubeconfig"));
    kubeconfig::write_kubeconfig(&path, server, ca_pem, &cert.cert_pem, &cert.key_pem, user)?;
    kubeconfig::client_from_kubeconfig(&path).await
}

/// Why a container is no longer running (`exited`, `dead`, gone), or `None` while it runs (or while it is not
/// known yet). Never blocks: the answer is the last one the engine gave, asked again in the background at most
/// once a second, so a slow engine cannot stall the runtime's threads (which also serve IMDS and the signal
/// handler) under the control-plane lock.
pub fn container_stopped(name: &str) -> Option<String> {
    use std::time::{Duration, Instant};
    type Known = std::collections::HashMap<String, (Option<Instant>, Option<String>, bool)>;
    static KNOWN: std::sync::LazyLock<std::sync::Mutex<Known>> = std::sync::LazyLock::new(Default::default);
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    let entry = known.entry(name.to_string()).or_insert((None, None, false));
    let stale = entry.0.is_none_or(|at| at.elapsed() > Duration::from_secs(1));
    if stale && !entry.2 {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            entry.2 = true;
            let name = name.to_string();
            runtime.spawn(async move {
                let status = inspect_status(&name).await;
                let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
                let entry = known.entry(name).or_insert((None, None, false));
                if let Some(status) = status {
                    entry.1 = status;
                }
                entry.0 = Some(Instant::now());
                entry.2 = false;
            });
        }
    }
    entry.1.clone()
}

/// `Some(None)` running, `Some(Some(why))` not running or gone, `None` the engine did not say.
async fn inspect_status(name: &str) -> Option<Option<String>> {
    let docker = crate::docker::connect().await.ok()?;
    let inspect = tokio::time::timeout(crate::deadline::DOCKER_CALL, docker.inspect_container(name, None))
        .await
        .ok()?;
    match inspect {
        Ok(c) => {
            let status = c
                .state
                .and_then(|s| s.status)
                .map(|s| s.to_string())
                .unwrap_or_default();
            Some((status != "running").then(|| format!("is {status}")))
        }
        Err(testcontainers::bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {
            Some(Some("is gone".into()))
        }
        Err(_) => None,
    }
}

/// Keeps a container's own log next to the control plane's other logs (best effort, bounded, off the runtime's
/// threads).
pub async fn save_container_log(name: &str, path: &Path) {
    let Ok(docker) = crate::docker::connect().await else {
        return;
    };
    let text = crate::docker::logs(&docker, name, 100_000).await;
    let _ = std::fs::write(path, text);
}

#[cfg(test)]
mod tests {
    use super::Availability::*;

    #[test]
    fn availability_combines_to_the_worse() {
        assert_eq!(Ready.and(Ready), Ready);
        assert_eq!(Ready.and(Fetchable("a".into())), Fetchable("a".into()));
        assert_eq!(
            Fetchable("a".into()).and(Fetchable("b".into())),
            Fetchable("a; b".into())
        );
        assert_eq!(
            Fetchable("a".into()).and(Unavailable("b".into())),
            Unavailable("b".into())
        );
        assert_eq!(
            Unavailable("a".into()).and(Unavailable("b".into())),
            Unavailable("a; b".into())
        );
    }
}
