//! The scenario format. Every struct rejects unknown fields, and value types validate while deserializing, so
//! every mistake is reported with its file, line and column.
use ipnet::Ipv4Net;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

pub use super::expect::*;

pub use super::group_image::{AmazonEksAmi, GitPin, GroupImage, ENV_EKS_AMI};
pub use super::instance::{InstanceTypeInfo, Lifecycle};
pub use super::user_data::{FileEncoding, UserDataSpec};

/// One scenario file.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scenario {
    /// Defaults to the file name without `.yaml`.
    #[serde(default)]
    pub name: String,
    /// Free text for the scenario's readers: what it shows and why.
    #[serde(default)]
    pub description: String,
    /// Words a filter selects the scenario by (`nodejoin run -E 'tag(al2023)'`): letters, digits, `-`, `_`, `.`.
    #[serde(default, deserialize_with = "tags")]
    #[schemars(extend("items" = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"}))]
    pub tags: Vec<String>,
    /// The cluster the nodes join: its version, region, account, network and how nodes authenticate.
    #[serde(default)]
    pub cluster: Cluster,
    /// The node groups: each one or more identical nodes that bootstrap into the cluster, and what must
    /// happen to them.
    pub nodes: Vec<NodeGroup>,
    /// Where its paths may lead on the host (set when its file is loaded).
    #[serde(skip)]
    pub roots: super::confine::Roots,
}

/// Tags are names a filter matches exactly: short, and nothing a terminal or an annotation would read as markup.
fn tags<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<String>, D::Error> {
    let tags = Vec::<String>::deserialize(d)?;
    for t in &tags {
        let ok = t.len() <= 63
            && t.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && t.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
        if !ok {
            return Err(serde::de::Error::custom(format!(
                "tag '{}': a tag is 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit",
                t.escape_debug()
            )));
        }
    }
    Ok(tags)
}

pub use super::provider::Provider;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMode {
    /// Client-certificate TLS bootstrapping with a bootstrap token (kubeadm / Outposts style).
    #[default]
    BootstrapToken,
    /// The EKS default: an IAM token mapped through aws-auth or access entries.
    Iam,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Cluster {
    /// The providers this scenario may run on (default: every one).
    #[serde(default)]
    pub providers: Vec<Provider>,
    /// The control plane's Kubernetes version (`v1.36.3`); default: the run's (`run --kubernetes-version`),
    /// else nodejoin's own.
    #[serde(default = "default_version", deserialize_with = "version")]
    #[schemars(extend("pattern" = r"^v[0-9]+\.[0-9]+\.[0-9]+$"))]
    pub kubernetes_version: String,
    /// The Kubernetes minor versions this scenario's bootstrap flavor works with (e.g. an AL2-style bootstrap that
    /// passes a kubelet flag removed in 1.35); a trial for another version is reported ignored with the reason.
    #[serde(default)]
    pub kubernetes_versions: Option<VersionSupport>,
    /// The EKS cluster name the bootstrap is given; defaults to the scenario name.
    #[serde(default)]
    pub name: Option<String>,
    /// The AWS region IMDS, EC2 and EKS report (default `us-west-2`).
    #[serde(default = "default_region")]
    pub region: String,
    /// The AWS account id in the ARNs the fakes report, the node role's among them (default `111122223333`).
    #[serde(default = "default_account")]
    pub account_id: String,
    /// Default: what EKS picks for the VPC (see [`Cluster::service_cidr`], which callers use).
    #[serde(default, deserialize_with = "crate::eks::network::service_cidr")]
    #[schemars(with = "Option<String>")]
    pub service_ipv4_cidr: Option<Ipv4Net>,
    /// The VPC and subnet IMDS, EC2 and EKS report (not the Docker network; see `eks::network`).
    #[serde(default)]
    pub network: crate::eks::network::Network,
    /// How a kubelet authenticates to join: `bootstrap-token` (the default) or `iam`, the EKS way.
    #[serde(default)]
    pub auth: AuthMode,
    /// DescribeCluster answers CREATING this many times before ACTIVE.
    #[serde(default)]
    pub creating_for_calls: u32,
    /// DescribeCluster answers CREATING for this long from the first DescribeCluster call (e.g. `10s`).
    #[serde(default, deserialize_with = "super::durations::opt_delay")]
    #[schemars(with = "Option<String>")]
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
    /// How long the certificates the cluster signs for CSRs live (1m to 24h, e.g. `3m`), so a kubelet rotates its
    /// client and serving certificates while the scenario runs (`after: - do: wait-for-rotation`). Default: a
    /// year, as EKS signs them.
    #[serde(default, deserialize_with = "super::durations::opt_certificate_lifetime")]
    #[schemars(with = "Option<String>")]
    pub certificate_lifetime: Option<Duration>,
}

/// A range of Kubernetes minor versions (`"1.35"`), both ends included, and why the others do not apply.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VersionSupport {
    /// The oldest minor version the scenario applies to (`"1.35"`); default: no lower bound.
    #[serde(default, deserialize_with = "opt_minor")]
    #[schemars(with = "Option<String>")]
    pub min: Option<(u32, u32)>,
    /// The newest minor version the scenario applies to (`"1.34"`); default: no upper bound.
    #[serde(default, deserialize_with = "opt_minor")]
    #[schemars(with = "Option<String>")]
    pub max: Option<(u32, u32)>,
    /// Why the other versions do not apply: quoted when a trial for one is reported ignored.
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

pub use super::durations::duration;
pub(crate) use super::versions::parse_minor;
use super::versions::{opt_minor, opt_version, version};
pub use crate::eks::identity::AuthenticationMode;

impl Cluster {
    /// The service CIDR: the scenario's `serviceIpv4Cidr`, else the block EKS picks when CreateCluster is given
    /// none (172.20.0.0/16 for a VPC in 10.0.0.0/8, 10.100.0.0/16 otherwise), so a kubelet's fallback DNS IP
    /// lies in the cluster's real service range.
    pub fn service_cidr(&self) -> ipnet::Ipv4Net {
        self.service_ipv4_cidr
            .unwrap_or_else(|| crate::eks::dns::eks_default_service_cidr(&self.network.all_cidrs()))
    }
}

/// Entries written into `kube-system/aws-auth` as they are (templates included).
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AwsAuthSpec {
    /// `mapRoles` entries: an IAM role ARN, the username (aws-auth templates allowed) and groups it maps to.
    #[serde(default)]
    pub map_roles: Vec<crate::eks::aws_auth::RoleMapping>,
    /// `mapUsers` entries: an IAM user ARN, the username and groups it maps to.
    #[serde(default)]
    pub map_users: Vec<crate::eks::aws_auth::UserMapping>,
}

/// An EKS access entry (CreateAccessEntry's fields).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AccessEntrySpec {
    /// The IAM role or user ARN the entry is for.
    pub principal_arn: String,
    /// `STANDARD` (the default), `EC2_LINUX` or `EC2_WINDOWS`; the EC2 types take no username or groups.
    #[serde(default, rename = "type")]
    pub entry_type: crate::eks::identity::AccessEntryType,
    /// The Kubernetes username it grants (STANDARD only; default: EKS's, from the principal's ARN).
    #[serde(default)]
    pub username: Option<String>,
    /// The Kubernetes groups it grants (STANDARD only).
    #[serde(default)]
    pub kubernetes_groups: Vec<String>,
}

impl Default for Cluster {
    fn default() -> Self {
        Self {
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
            certificate_lifetime: None,
        }
    }
}

/// The built-in default; a run's own default (`run --kubernetes-version`, the CI matrix) is applied by the loader
/// to a scenario that names none (`load::Defaults`).
pub(crate) fn default_version() -> String {
    crate::assets::DEFAULT_VERSION.to_string()
}
fn default_region() -> String {
    "us-west-2".to_string()
}
fn default_account() -> String {
    "111122223333".to_string()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ImdsTokens {
    /// IMDSv2 only (`http-tokens=required`), the EKS default for new launch templates.
    #[default]
    Required,
    /// IMDSv1 and v2.
    Optional,
}

/// One or more identical nodes.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeGroup {
    /// The group's name, in reports and check names; the user-data flavors' default node group name.
    pub name: String,
    /// How many identical nodes the group starts, all at once (default 1).
    #[serde(default = "one")]
    pub count: u32,
    /// The EC2 instance type IMDS and EC2 report (default `m5.large`); the ENI formula's max pods use its limits.
    #[serde(default = "default_instance_type")]
    pub instance_type: String,
    /// ENI limits EC2 DescribeInstanceTypes reports for `instanceType`, for types outside the bundled table.
    #[serde(default)]
    pub instance_type_info: Option<InstanceTypeInfo>,
    /// `on-demand` (the default) or `spot`: the instance's life cycle as IMDS and EC2 report it.
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
    /// How the fake IMDS serves the group's instances: tokens, credentials, their lifetime, the hop limit.
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
    /// What runs each node: a container (the default), or a machine (`vm`) booting the group's node image as its
    /// disk under QEMU, with a kernel of its own.
    #[serde(default)]
    pub runtime: NodeRuntime,
    /// A machine's own disk (`runtime: vm`) instead of the one nodejoin makes from the group's node image.
    #[serde(default)]
    pub disk: Option<super::runtime::OwnDisk>,
    /// The group's kubelet version when not the control plane's (`v1.34.4`): skew, up to three minors older than
    /// the API server, never newer (checked at load). Only that kubelet is built.
    #[serde(default, deserialize_with = "opt_version")]
    #[schemars(extend("pattern" = r"^v[0-9]+\.[0-9]+\.[0-9]+$"))]
    pub kubelet_version: Option<String>,
    /// The containerd line the group's nodes run (`"2.2"`, what the EKS AMI ships, `"1.7"`, or `"2.3"`/`"2.4"`,
    /// ahead of the AMI); default
    /// the run's (`nodejoin run --containerd`, applied by the loader), else 2.2.
    #[serde(default)]
    pub containerd: Option<crate::assets::tools::ContainerdLine>,
    /// Faults the fakes inject into this group's calls.
    #[serde(default)]
    pub faults: Vec<FaultSpec>,
    /// What the cluster must see of each node: that it joins, and how (or, with `joins: false`, why not).
    #[serde(default)]
    pub expect: Expect,
    /// Steps done to each node after its join, in order (`- do: reboot`), each with its own expectations.
    #[serde(default)]
    pub after: Vec<super::after::Step>,
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

pub use super::runtime::NodeRuntime;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NodegroupKind {
    #[default]
    Managed,
    SelfManaged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RoleMappingSpec {
    /// Defaults to `access-entry` in `API` mode, `aws-auth` otherwise.
    #[serde(default)]
    pub via: Option<MappingVia>,
    /// The Kubernetes username the role maps to (aws-auth templates allowed); default
    /// `system:node:{{EC2PrivateDNSName}}`.
    #[serde(default = "default_node_username")]
    pub username: String,
    /// The Kubernetes groups it grants; default `system:bootstrappers` and `system:nodes`.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CredentialsMode {
    #[default]
    Valid,
    /// IMDS serves credentials that have already expired.
    Expired,
    /// IMDS serves a secret key AWS does not know for the key id (every signature fails).
    WrongSecret,
}

#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Imds {
    /// `required` (IMDSv2 only, the default) or `optional` (IMDSv1 answered too).
    #[serde(default)]
    pub tokens: ImdsTokens,
    /// The instance profile's credentials as IMDS serves them.
    #[serde(default)]
    pub credentials: CredentialsMode,
    /// Lifetime of each set of credentials (they rotate before expiry); default 6h.
    #[serde(default, deserialize_with = "super::durations::opt_credential_lifetime")]
    #[schemars(with = "Option<String>")]
    pub credential_lifetime: Option<Duration>,
    /// EC2's `HttpPutResponseHopLimit` (1 to 64, default 2): how many network hops a token response travels, so
    /// whether a pod behind the node (one hop more) gets an IMDSv2 token.
    #[serde(default, deserialize_with = "opt_hop_limit")]
    #[schemars(range(min = 1, max = 64))]
    pub hop_limit: Option<u8>,
}

/// `imds.hopLimit`: EC2 takes 1 to 64.
fn opt_hop_limit<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u8>, D::Error> {
    let n = u64::deserialize(d)?;
    match u8::try_from(n) {
        Ok(n @ 1..=64) => Ok(Some(n)),
        _ => Err(serde::de::Error::custom(format!(
            "hopLimit {n} is out of range: EC2 takes 1 to 64"
        ))),
    }
}

/// How the node bootstraps: a script run as `/etc/eks/bootstrap.sh ARGS...` (as user data would call it).
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Bootstrap {
    /// The script, relative to the scenario file; defaults to our reference `fixtures/bootstrap/bootstrap.sh`.
    #[serde(default)]
    pub script: Option<String>,
    /// Arguments; `{{...}}` placeholders are filled in (see docs/src/reference/scenario-format.md).
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment for the script.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A fake a node calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FaultSpec {
    /// The fake whose calls are faulted: `imds`, `eks`, `ec2`, `sts`, `cloudformation`, `ecr` or `registry`.
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
    #[serde(default, deserialize_with = "super::durations::opt_delay")]
    #[schemars(with = "Option<String>")]
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

impl NodeGroup {
    /// Whether a step after the join reboots the group's nodes (a container node then keeps `/var` on a volume).
    pub fn reboots(&self) -> bool {
        self.after.iter().any(|s| s.action == super::after::Action::Reboot)
    }

    /// What the group's machines can do: its runtime's kind, with a disk of its own's guest agent.
    pub fn capabilities(&self) -> crate::node::machine::Capabilities {
        let kind = self.runtime.kind(self.disk.is_some());
        crate::node::machine::Capabilities::of(kind, self.disk.as_ref().is_some_and(|d| d.guest_agent))
    }

    /// The containerd line this group's nodes run: the group's (or the run's), else the one of the nodeadm the
    /// node gets. Without an amazon-eks-ami checkout an AL2023 node runs the 2024 nodeadm, which cannot configure
    /// containerd 2 ("sandbox image could not be found in containerd config"); no AMI ever shipped that pair, so
    /// such a node gets the containerd 1.7 of its era. Otherwise today's AMI's line.
    pub fn containerd_line(&self) -> crate::assets::tools::ContainerdLine {
        use crate::assets::tools::ContainerdLine;
        self.containerd.unwrap_or_else(|| {
            let current_nodeadm = self.image.as_ref().is_some_and(|i| i.amazon_eks_ami.is_some());
            let runs_nodeadm = self.user_data.as_ref().is_some_and(|u| u.runs_nodeadm());
            if runs_nodeadm && !current_nodeadm {
                ContainerdLine::V1_7
            } else {
                ContainerdLine::default()
            }
        })
    }
}

impl Scenario {
    /// Whether a node group's machines are of a kind only one scenario at a time may run (emulated machines).
    pub fn has_vm_nodes(&self) -> bool {
        self.nodes.iter().any(|g| g.capabilities().kind.one_scenario_at_a_time)
    }

    pub fn cluster_name(&self) -> String {
        self.cluster.name.clone().unwrap_or_else(|| self.name.clone())
    }

    /// Why this scenario does not apply here, if it does not: a Kubernetes version outside its range, an
    /// amazon-eks-ami checkout it names that is absent (a user's clone without `../shared`), or a VM's own disk
    /// not built yet. Such a scenario is
    /// reported ignored with the reason: never run, never passed.
    pub fn not_applicable(&self) -> Option<String> {
        if let Some(why) = self
            .cluster
            .kubernetes_versions
            .as_ref()
            .and_then(|v| v.unsupported(&self.cluster.kubernetes_version))
        {
            return Some(why);
        }
        self.nodes.iter().find_map(|g| {
            let image = g.image.as_ref().and_then(|i| i.amazon_eks_ami.as_ref());
            image
                .and_then(|a| a.absent(&g.name))
                .or_else(|| g.disk.as_ref()?.absent(&g.name))
        })
    }

    /// Fetches the pinned amazon-eks-ami commits its groups name that are not cached yet, before the run decides
    /// what applies (one that cannot be fetched makes the scenario not applicable, with git's reason).
    pub fn fetch_pinned(&mut self) {
        for g in &mut self.nodes {
            if let Some(source) = g.image.as_mut().and_then(|i| i.amazon_eks_ami.as_mut()) {
                source.fetch();
            }
        }
    }

    /// The scenario with its pinned commits fetched ([`Scenario::fetch_pinned`]): the step after loading.
    pub fn fetched(mut self) -> Self {
        self.fetch_pinned();
        self
    }
}

#[cfg(test)]
#[path = "model/tests.rs"]
mod tests;
