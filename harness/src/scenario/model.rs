//! The scenario format. Every struct rejects unknown fields, and value types validate while deserializing, so
//! every mistake is reported with its file, line and column.
use ipnet::Ipv4Net;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::time::Duration;

/// One scenario file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// Defaults to the file name without `.yaml`.
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub cluster: Cluster,
    pub nodes: Vec<NodeGroup>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    #[default]
    Local,
    Kind,
    K3s,
}

impl Provider {
    pub fn as_str(&self) -> &'static str {
        match self {
            Provider::Local => "local",
            Provider::Kind => "kind",
            Provider::K3s => "k3s",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMode {
    /// Client-certificate TLS bootstrapping with a bootstrap token (kubeadm / Outposts style).
    #[default]
    BootstrapToken,
    /// The EKS default: an IAM token mapped through aws-auth or access entries.
    Iam,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Cluster {
    #[serde(default)]
    pub provider: Provider,
    #[serde(default = "default_version", deserialize_with = "version")]
    pub kubernetes_version: String,
    /// The EKS cluster name the bootstrap is given; defaults to the scenario name.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "default_region")]
    pub region: String,
    #[serde(default = "default_account")]
    pub account_id: String,
    #[serde(default = "default_service_cidr")]
    pub service_ipv4_cidr: Ipv4Net,
    #[serde(default)]
    pub auth: AuthMode,
    /// DescribeCluster answers CREATING this many times before ACTIVE.
    #[serde(default)]
    pub creating_for_calls: u32,
}

impl Default for Cluster {
    fn default() -> Self {
        Self {
            provider: Provider::default(),
            kubernetes_version: default_version(),
            name: None,
            region: default_region(),
            account_id: default_account(),
            service_ipv4_cidr: default_service_cidr(),
            auth: AuthMode::default(),
            creating_for_calls: 0,
        }
    }
}

/// `$NODEJOIN_K8S_VERSION` (how the CI matrix picks a version), else the built-in default.
pub(crate) fn default_version() -> String {
    std::env::var("NODEJOIN_K8S_VERSION")
        .ok()
        .filter(|v| crate::assets::check_version(v).is_ok())
        .unwrap_or_else(|| crate::assets::DEFAULT_VERSION.to_string())
}
fn default_region() -> String {
    "us-west-2".to_string()
}
fn default_account() -> String {
    "111122223333".to_string()
}
fn default_service_cidr() -> Ipv4Net {
    Ipv4Net::new(std::net::Ipv4Addr::new(10, 100, 0, 0), 16).unwrap_or_default()
}

fn version<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v = String::deserialize(d)?;
    crate::assets::check_version(&v)
        .map_err(|_| serde::de::Error::custom(format!("kubernetesVersion '{v}' must look like v1.36.3")))?;
    Ok(v)
}

/// Durations written like `60s`, `2m`, `1500ms`.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s)
        .map_err(|e| serde::de::Error::custom(format!("'{s}' is not a duration like 60s: {e}")))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Lifecycle {
    #[default]
    OnDemand,
    Spot,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ImdsTokens {
    /// IMDSv2 only (`http-tokens=required`), the EKS default for new launch templates.
    #[default]
    Required,
    /// IMDSv1 and v2.
    Optional,
}

/// One or more identical nodes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeGroup {
    pub name: String,
    #[serde(default = "one")]
    pub count: u32,
    #[serde(default = "default_instance_type")]
    pub instance_type: String,
    #[serde(default)]
    pub lifecycle: Lifecycle,
    /// Defaults to `<region>a`.
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// IAM role of the instance profile.
    #[serde(default = "default_role")]
    pub role: String,
    #[serde(default)]
    pub imds: Imds,
    pub bootstrap: Bootstrap,
    #[serde(default)]
    pub expect: Expect,
}

fn one() -> u32 {
    1
}
fn default_instance_type() -> String {
    "m5.large".to_string()
}
fn default_role() -> String {
    "NodeInstanceRole".to_string()
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Imds {
    #[serde(default)]
    pub tokens: ImdsTokens,
}

/// How the node bootstraps: a script run as `/etc/eks/bootstrap.sh ARGS...` (as user data would call it).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bootstrap {
    /// The script, relative to the workspace; defaults to our reference `fixtures/bootstrap/bootstrap.sh`.
    #[serde(default)]
    pub script: Option<String>,
    /// Arguments; `{{...}}` placeholders are filled in (see README).
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment for the script.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CsrExpectation {
    /// A CSR exists and a certificate was issued.
    Issued,
    /// A CSR exists but no certificate was issued (for example the approver refused it).
    Pending,
    /// No such CSR exists.
    None,
    /// Not checked.
    #[default]
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ExitExpectation {
    Success,
    Failure,
    #[default]
    Any,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EvidenceSource {
    Kubelet,
    Bootstrap,
    Imds,
    Approver,
}

/// A text that must show up in a log: how a negative scenario proves *why* the node failed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Evidence {
    pub source: EvidenceSource,
    pub contains: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Taint {
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    pub effect: String,
}

/// What the cluster must see for each node of the group.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// `false` for negative scenarios: the node must not register, and `evidence` must be found.
    #[serde(default = "yes")]
    pub joins: bool,
    /// Deadline for the whole join (or the observation window of a negative scenario).
    #[serde(default = "default_within", deserialize_with = "duration")]
    pub within: Duration,
    /// Defaults to the instance's PrivateDnsName.
    #[serde(default)]
    pub node_name: Option<String>,
    /// Labels the Node must carry (others may be present too).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The Node's exact taints once Ready (`None`: not checked).
    #[serde(default)]
    pub taints: Option<Vec<Taint>>,
    #[serde(default)]
    pub capacity_pods: Option<u32>,
    /// The kubelet's `clusterDNS` as reported by `/configz`.
    #[serde(default, rename = "clusterDNS")]
    pub cluster_dns: Option<Vec<String>>,
    /// Defaults to `aws:///{{instance.az}}/{{instance.id}}`.
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
    #[serde(default)]
    pub client_csr: CsrExpectation,
    #[serde(default)]
    pub serving_csr: CsrExpectation,
    /// The kubelet serves :10250 with a certificate chained to the cluster CA whose SANs are the node's.
    #[serde(default)]
    pub serving_cert: bool,
    #[serde(default)]
    pub bootstrap_exit: ExitExpectation,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
}

fn yes() -> bool {
    true
}
fn default_within() -> Duration {
    Duration::from_secs(90)
}

impl Default for Expect {
    fn default() -> Self {
        Self {
            joins: true,
            within: default_within(),
            node_name: None,
            labels: BTreeMap::new(),
            taints: None,
            capacity_pods: None,
            cluster_dns: None,
            provider_id: None,
            client_csr: CsrExpectation::Any,
            serving_csr: CsrExpectation::Any,
            serving_cert: false,
            bootstrap_exit: ExitExpectation::Any,
            evidence: Vec::new(),
        }
    }
}

impl Scenario {
    pub fn cluster_name(&self) -> String {
        self.cluster.name.clone().unwrap_or_else(|| self.name.clone())
    }
}
