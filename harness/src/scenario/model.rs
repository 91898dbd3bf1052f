//! The scenario format. Every struct rejects unknown fields, and value types validate while deserializing, so
//! every mistake is reported with its file, line and column.
use ipnet::Ipv4Net;
use serde::{Deserialize, Deserializer};
use std::collections::BTreeMap;
use std::time::Duration;

pub use super::user_data::{
    CloudFormationSpec, EksManagedSpec, EksctlSpec, FileEncoding, NodeadmClusterField, NodeadmPart, NodeadmSpec,
    UserDataSpec,
};

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
    pub const ALL: [Provider; 3] = [Provider::Local, Provider::K3s, Provider::Kind];

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == name.trim())
    }

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
    /// The provider this run uses: set by whoever runs the scenario (the trial's name, `nodejoin run
    /// --provider`), not by the file.
    #[serde(skip)]
    pub provider: Provider,
    /// The providers this scenario may run on (default: every one).
    #[serde(default)]
    pub providers: Vec<Provider>,
    #[serde(default = "default_version", deserialize_with = "version")]
    pub kubernetes_version: String,
    /// The Kubernetes minor versions this scenario's bootstrap flavor works with (e.g. an AL2-style bootstrap that
    /// passes a kubelet flag removed in 1.35); a trial for another version is reported ignored with the reason.
    #[serde(default)]
    pub kubernetes_versions: Option<VersionSupport>,
    /// The EKS cluster name the bootstrap is given; defaults to the scenario name.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "default_region")]
    pub region: String,
    #[serde(default = "default_account")]
    pub account_id: String,
    /// Default: what EKS picks for the VPC (see [`Cluster::service_cidr`], which callers use).
    #[serde(default, deserialize_with = "super::network::service_cidr")]
    pub service_ipv4_cidr: Option<Ipv4Net>,
    /// The VPC and subnet IMDS, EC2 and EKS report (not the Docker network; see `scenario::network`).
    #[serde(default)]
    pub network: super::network::Network,
    #[serde(default)]
    pub auth: AuthMode,
    /// DescribeCluster answers CREATING this many times before ACTIVE.
    #[serde(default)]
    pub creating_for_calls: u32,
    /// DescribeCluster answers CREATING for this long after the scenario starts (e.g. `10s`).
    #[serde(default, deserialize_with = "opt_duration")]
    pub creating_for: Option<Duration>,
    /// EKS access configuration: which of aws-auth and access entries the token webhook consults.
    #[serde(default)]
    pub authentication_mode: AuthenticationMode,
    /// aws-auth content besides the node roles (which each node group's `roleMapping` adds).
    #[serde(default)]
    pub aws_auth: Option<AwsAuthSpec>,
    /// Access entries besides the node roles'.
    #[serde(default)]
    pub access_entries: Vec<AccessEntrySpec>,
}

/// A range of Kubernetes minor versions (`"1.35"`), both ends included, and why the others do not apply.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VersionSupport {
    #[serde(default, deserialize_with = "opt_minor")]
    pub min: Option<(u32, u32)>,
    #[serde(default, deserialize_with = "opt_minor")]
    pub max: Option<(u32, u32)>,
    pub reason: String,
}

impl VersionSupport {
    /// `None` when `version` (`v1.36.3`) is in range, else why the scenario does not apply to it.
    pub fn unsupported(&self, version: &str) -> Option<String> {
        let minor = parse_minor(version.trim_start_matches('v'))?;
        let below = self.min.is_some_and(|m| minor < m);
        let above = self.max.is_some_and(|m| minor > m);
        let range = |b: Option<(u32, u32)>| b.map(|(a, b)| format!("{a}.{b}")).unwrap_or_else(|| "any".into());
        (below || above).then(|| {
            format!(
                "Kubernetes {version} is outside this scenario's versions ({} to {}): {}",
                range(self.min),
                range(self.max),
                self.reason
            )
        })
    }
}

/// `1.35` or `v1.35.2` → (1, 35).
fn parse_minor(s: &str) -> Option<(u32, u32)> {
    let mut it = s.trim_start_matches('v').split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

fn opt_minor<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(u32, u32)>, D::Error> {
    let s = String::deserialize(d)?;
    parse_minor(&s)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("'{s}' is not a Kubernetes minor version like 1.35")))
}

/// EKS `accessConfig.authenticationMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
pub enum AuthenticationMode {
    #[serde(rename = "CONFIG_MAP")]
    ConfigMap,
    #[serde(rename = "API")]
    Api,
    #[default]
    #[serde(rename = "API_AND_CONFIG_MAP")]
    ApiAndConfigMap,
}

impl AuthenticationMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ConfigMap => "CONFIG_MAP",
            Self::Api => "API",
            Self::ApiAndConfigMap => "API_AND_CONFIG_MAP",
        }
    }
}

/// Entries written into `kube-system/aws-auth` as they are (templates included).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AwsAuthSpec {
    #[serde(default)]
    pub map_roles: Vec<crate::eks::aws_auth::RoleMapping>,
    #[serde(default)]
    pub map_users: Vec<crate::eks::aws_auth::UserMapping>,
}

/// An EKS access entry (CreateAccessEntry's fields).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AccessEntrySpec {
    pub principal_arn: String,
    #[serde(default, rename = "type")]
    pub entry_type: crate::eks::identity::AccessEntryType,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub kubernetes_groups: Vec<String>,
}

impl Default for Cluster {
    fn default() -> Self {
        Self {
            provider: Provider::default(),
            providers: Vec::new(),
            kubernetes_version: default_version(),
            name: None,
            region: default_region(),
            account_id: default_account(),
            service_ipv4_cidr: None,
            network: Default::default(),
            auth: AuthMode::default(),
            creating_for_calls: 0,
            kubernetes_versions: None,
            creating_for: None,
            authentication_mode: AuthenticationMode::default(),
            aws_auth: None,
            access_entries: Vec::new(),
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
    /// ENI limits EC2 DescribeInstanceTypes reports for `instanceType`, for types outside the bundled table.
    #[serde(default)]
    pub instance_type_info: Option<InstanceTypeInfo>,
    #[serde(default)]
    pub lifecycle: Lifecycle,
    /// Defaults to `<region>a`.
    #[serde(default)]
    pub availability_zone: Option<String>,
    /// IAM role of the instance profile.
    #[serde(default = "default_role")]
    pub role: String,
    /// Who maps the node role before the nodes boot: EKS (`managed`, the harness acting as `eks:node-manager`)
    /// or the cluster's user (`self-managed`).
    #[serde(default)]
    pub nodegroup: NodegroupKind,
    /// How the node role is mapped to a Kubernetes identity (used with `auth: iam`).
    #[serde(default)]
    pub role_mapping: RoleMappingSpec,
    #[serde(default)]
    pub imds: Imds,
    /// The bootstrap script installed as `/etc/eks/bootstrap.sh`; without `userData` the harness runs it.
    #[serde(default)]
    pub bootstrap: Bootstrap,
    /// EC2 user data, served by the fake IMDS and run by the node's own cloud-init.
    #[serde(default)]
    pub user_data: Option<UserDataSpec>,
    /// This group's node image instead of the run's: a bootstrap author's files over ours, or their own image.
    #[serde(default)]
    pub image: Option<GroupImage>,
    /// Faults the fakes inject into this group's calls.
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    #[serde(default)]
    pub expect: Expect,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstanceTypeInfo {
    pub maximum_network_interfaces: u32,
    pub ipv4_addresses_per_interface: u32,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NodegroupKind {
    #[default]
    Managed,
    SelfManaged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MappingVia {
    /// A `mapRoles` entry in `kube-system/aws-auth`.
    AwsAuth,
    /// An EKS access entry of type EC2_LINUX.
    AccessEntry,
    /// Not mapped at all (the role is unknown to the cluster).
    None,
}

/// The node role's mapping; defaults are what EKS writes for a Linux node group.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RoleMappingSpec {
    /// Defaults to `access-entry` in `API` mode, `aws-auth` otherwise.
    #[serde(default)]
    pub via: Option<MappingVia>,
    #[serde(default = "default_node_username")]
    pub username: String,
    #[serde(default = "default_node_groups")]
    pub groups: Vec<String>,
}

impl Default for RoleMappingSpec {
    fn default() -> Self {
        Self {
            via: None,
            username: default_node_username(),
            groups: default_node_groups(),
        }
    }
}

fn default_node_username() -> String {
    "system:node:{{EC2PrivateDNSName}}".to_string()
}
fn default_node_groups() -> Vec<String> {
    vec!["system:bootstrappers".to_string(), "system:nodes".to_string()]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CredentialsMode {
    #[default]
    Valid,
    /// IMDS serves credentials that have already expired.
    Expired,
    /// IMDS serves a secret key AWS does not know for the key id (every signature fails).
    WrongSecret,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Imds {
    #[serde(default)]
    pub tokens: ImdsTokens,
    /// The instance profile's credentials as IMDS serves them.
    #[serde(default)]
    pub credentials: CredentialsMode,
    /// Lifetime of each set of credentials (they rotate before expiry); default 6h.
    #[serde(default, deserialize_with = "opt_duration")]
    pub credential_lifetime: Option<Duration>,
}

fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}

/// How the node bootstraps: a script run as `/etc/eks/bootstrap.sh ARGS...` (as user data would call it).
#[derive(Debug, Clone, Deserialize, Default)]
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

/// The programs (by file name, e.g. `aws`, `jq`, `apt-get`) a bootstrap may, may not or must run.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExecutableExpectation {
    /// None of these may run.
    #[serde(default)]
    pub forbid: Vec<String>,
    /// Nothing else may run.
    #[serde(default)]
    pub only: Vec<String>,
    /// Each of these must run.
    #[serde(default)]
    pub require: Vec<String>,
}

/// What one file the bootstrap wrote must hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileExpectation {
    /// The file in the node.
    pub path: String,
    /// `dotted.path: value` pairs that must hold in the file (JSON or YAML); `clusterDNS.0` indexes a list.
    #[serde(default)]
    pub values: BTreeMap<String, serde_yaml_ng::Value>,
    /// A golden file (relative to the workspace, placeholders filled in) the file must equal.
    #[serde(default)]
    pub golden: Option<String>,
    /// Substrings the file must contain.
    #[serde(default)]
    pub contains: Vec<String>,
}

/// A fake a node calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FakeService {
    Imds,
    Eks,
    Ec2,
    Sts,
    Cloudformation,
    Ecr,
    Registry,
}

impl FakeService {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Imds => "imds",
            Self::Eks => "eks",
            Self::Ec2 => "ec2",
            Self::Sts => "sts",
            Self::Cloudformation => "cloudformation",
            Self::Ecr => "ecr",
            Self::Registry => "registry",
        }
    }
}

/// A fault injected into the matching calls of each node of the group.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultSpec {
    pub service: FakeService,
    /// A `*` glob on the call's action (`DescribeCluster`, `GET /latest/meta-data/*`); default every call.
    #[serde(default = "any_action")]
    pub action: String,
    /// Only the first N matching calls (default: all of them).
    #[serde(default)]
    pub first: Option<u32>,
    /// Answer with this HTTP status instead (e.g. 503, 429, 403 for IMDS token refusals).
    #[serde(default)]
    pub status: Option<u16>,
    /// Wait this long before answering (or failing).
    #[serde(default, deserialize_with = "opt_duration")]
    pub latency: Option<Duration>,
    /// Never answer (the client's own timeout decides).
    #[serde(default)]
    pub hang: bool,
    /// `service: ec2` only: DescribeInstances answers with an empty PrivateDnsName for this instance (for the
    /// first N calls), as EC2 may right after launch.
    #[serde(default)]
    pub empty_private_dns_name: bool,
}

fn any_action() -> String {
    "*".into()
}

/// What a node's calls to the fakes must look like. Patterns are `service action` globs
/// (`imds GET /latest/meta-data/*`, `ec2 DescribeInstances`, `eks *`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CallExpectation {
    /// Every call must match one of these.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The exact multiset: every call matches one of these patterns, and each pattern matches exactly this
    /// many calls.
    #[serde(default)]
    pub exactly: BTreeMap<String, u32>,
    /// Exactly this many calls match (other calls are not constrained).
    #[serde(default)]
    pub count: BTreeMap<String, u32>,
    /// At most this many calls match.
    #[serde(default)]
    pub max: BTreeMap<String, u32>,
    /// No call matching these once the Node is Ready.
    #[serde(default)]
    pub none_after_ready: Vec<String>,
}

/// A node group's own image: exactly one of `overlay` or `tag`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupImage {
    /// A directory (relative to the workspace) laid out like the root filesystem, copied over our node image as
    /// one more layer (what `nodejoin image build --overlay DIR` builds). When it holds `etc/eks/bootstrap.sh`,
    /// that script is the node's bootstrap.
    #[serde(default)]
    pub overlay: Option<String>,
    /// A local image of the user's (it must follow the node image contract, README); it brings its own
    /// `/etc/eks/bootstrap.sh` unless `bootstrap.script` names one.
    #[serde(default)]
    pub tag: Option<String>,
}

/// What cloud-init must have reported (`/run/cloud-init/status.json`, its log).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudInitExpectation {
    #[serde(default)]
    pub status: CloudInitStatus,
    /// Substrings each of which some cloud-init error must contain.
    #[serde(default)]
    pub errors: Vec<String>,
    /// Substrings each of which some WARNING line of cloud-init's log must contain.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Modules that must have run (e.g. `write-files`, `runcmd`, `scripts-user`).
    #[serde(default)]
    pub modules: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CloudInitStatus {
    #[default]
    Done,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeadmExpectation {
    /// Both phases (config, run) exited 0.
    Succeeded,
    /// A phase failed (the error is in the report and in `nodeadm` evidence).
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SignalExpectation {
    /// `SUCCESS` was signalled for the instance.
    Success,
    /// `FAILURE` was signalled for the instance.
    Failure,
    /// No signal at all.
    None,
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
    /// The token webhook's decisions about this node's tokens (accepted, or rejected with the reason).
    Authenticator,
    /// cloud-init's log and its output log (`userData` nodes).
    CloudInit,
    /// nodeadm's log (the journal of its two units), for user data carrying a NodeConfig.
    Nodeadm,
    /// The node's calls to the fakes (`service action -> status`, faults marked).
    Calls,
}

/// The identity the API server saw the kubelet as (from its audit log).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IdentityExpectation {
    #[serde(default)]
    pub username: Option<String>,
    /// Groups that must all be present (the API server adds `system:authenticated`).
    #[serde(default)]
    pub groups: Vec<String>,
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
    /// Who the kubelet was to the API server.
    #[serde(default)]
    pub identity: Option<IdentityExpectation>,
    /// The user that must have written the node role into aws-auth (audit log), before the Node registered.
    #[serde(default)]
    pub aws_auth_changed_by: Option<String>,
    /// `userData` nodes: what cloud-init reported (default: status done, for nodes that join).
    #[serde(default)]
    pub cloud_init: Option<CloudInitExpectation>,
    /// The CloudFormation signal the instance sent.
    #[serde(default)]
    pub cfn_signal: Option<SignalExpectation>,
    /// Nodes whose user data carries a NodeConfig: how nodeadm's phases ended (default: succeeded, for nodes
    /// that join).
    #[serde(default)]
    pub nodeadm: Option<NodeadmExpectation>,
    /// The node's calls to the fakes.
    #[serde(default)]
    pub calls: Option<CallExpectation>,
    /// The group's nodes must write identical files (kubelet config, kubeconfig, drop-ins, containerd config, env
    /// files) once instance id, addresses and names are normalised. Needs `count: 2` or more.
    #[serde(default)]
    pub deterministic: bool,
    /// Running the bootstrap a second time on a joined node must exit 0 and change none of those files.
    #[serde(default)]
    pub idempotent: bool,
    /// Checks on files the bootstrap wrote.
    #[serde(default)]
    pub files: Vec<FileExpectation>,
    /// The programs the bootstrap ran (traced with strace; harness-run bootstraps).
    #[serde(default)]
    pub executables: Option<ExecutableExpectation>,
    /// The sandbox (pause) image the node's containerd is configured with is in containerd's store, pulled with an
    /// ECR token of this instance when it is an ECR image. Always checked for nodes whose nodeadm succeeded.
    #[serde(default)]
    pub sandbox_image: bool,
    /// A pod bound to the node runs (our pause image, no pull) and gets an address from the CNI: a Ready node that
    /// cannot run pods is not a joined node.
    #[serde(default)]
    pub pod_runs: bool,
    /// Checks that must fail (globs on the check's name after `node/`, e.g. `calls imds * at most 30`): how a
    /// scenario proves an assertion catches a bad bootstrap. They are reported with what they found.
    #[serde(default)]
    pub failing_checks: Vec<String>,
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
            identity: None,
            aws_auth_changed_by: None,
            cloud_init: None,
            cfn_signal: None,
            nodeadm: None,
            calls: None,
            deterministic: false,
            idempotent: false,
            files: Vec::new(),
            executables: None,
            sandbox_image: false,
            pod_runs: false,
            failing_checks: Vec::new(),
        }
    }
}

impl Scenario {
    pub fn cluster_name(&self) -> String {
        self.cluster.name.clone().unwrap_or_else(|| self.name.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ranges() {
        let v: VersionSupport =
            serde_yaml_ng::from_str("{ min: \"1.35\", reason: the flag was removed in 1.35 }").unwrap();
        assert_eq!(v.unsupported("v1.36.3"), None);
        assert_eq!(v.unsupported("v1.35.0"), None);
        let why = v.unsupported("v1.34.4").unwrap();
        assert!(why.contains("1.35 to any") && why.contains("removed in 1.35"), "{why}");
        let max: VersionSupport = serde_yaml_ng::from_str("{ max: v1.34.9, reason: r }").unwrap();
        assert!(max.unsupported("v1.35.1").is_some() && max.unsupported("v1.34.4").is_none());
        assert!(serde_yaml_ng::from_str::<VersionSupport>("{ min: latest, reason: r }").is_err());
        assert!(serde_yaml_ng::from_str::<VersionSupport>("{ min: \"1.35\" }").is_err());
    }
}
