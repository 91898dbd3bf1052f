//! Cluster providers behind one trait, in the manner of kind's provider interface: a provider creates a control
//! plane from a spec; the rest of the harness only talks to the `ControlPlane` it returns.
pub mod local;
pub mod objects;

use crate::assets::K8sAssets;
use crate::docker::RunNetwork;
use crate::error::Result;
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What a scenario asks of the control plane; scenarios with equal specs share one control plane.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClusterSpec {
    pub provider: String,
    pub version: String,
    pub service_cidr: ipnet::Ipv4Net,
    /// A scenario that needs the control plane to itself (IAM scenarios: aws-auth and the authentication
    /// mode are cluster-wide); it is stopped when that scenario ends.
    pub owner: Option<String>,
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

/// A provider of control planes (local processes, kind, k3s).
pub trait ClusterProvider: Send + Sync {
    fn name(&self) -> &'static str;
    /// Why this provider cannot run on this machine, if it cannot (the trial is then reported ignored).
    fn unavailable(&self) -> Option<String>;
    fn create<'a>(
        &'a self,
        spec: &'a ClusterSpec,
        ctx: ProviderContext<'a>,
    ) -> BoxFuture<'a, Result<Box<dyn ControlPlane>>>;
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

/// The provider called `name`.
pub fn provider(name: &str) -> Option<Box<dyn ClusterProvider>> {
    match name {
        "local" => Some(Box::new(local::LocalProvider)),
        _ => None,
    }
}
