//! What a scenario expects of each node: the `expect` section of a node group. Like the rest of the format, every
//! struct rejects unknown fields so mistakes are reported with file, line and column.
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// The programs (by file name, e.g. `aws`, `jq`, `apt-get`) a bootstrap may, may not or must run.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileExpectation {
    /// The file in the node.
    pub path: String,
    /// `dotted.path: value` pairs that must hold in the file (JSON or YAML); `clusterDNS.0` indexes a list.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub values: BTreeMap<String, serde_yaml_ng::Value>,
    /// A golden file (relative to the scenario file, placeholders filled in) the file must equal.
    #[serde(default)]
    pub golden: Option<String>,
    /// Substrings the file must contain.
    #[serde(default, deserialize_with = "super::nonempty::texts")]
    pub contains: Vec<String>,
}

impl CallExpectation {
    /// Whether it sets no rule at all (it would check nothing).
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty()
            && self.exactly.is_empty()
            && self.count.is_empty()
            && self.max.is_empty()
            && self.none_after_ready.is_empty()
    }
}

/// What a node's calls to the fakes must look like. Patterns are `service action` globs
/// (`imds GET /latest/meta-data/*`, `ec2 DescribeInstances`, `eks *`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
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
    /// No call matching these once the Node is Ready (watched for `afterReadyWindow` after Ready).
    #[serde(default)]
    pub none_after_ready: Vec<String>,
    /// How long the harness keeps watching a Ready node's calls for `noneAfterReady` (default 10s).
    #[serde(default = "default_after_ready_window", deserialize_with = "super::durations::wait")]
    #[schemars(with = "String", extend("default" = "10s"))]
    pub after_ready_window: Duration,
}

impl Default for CallExpectation {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            exactly: BTreeMap::new(),
            count: BTreeMap::new(),
            max: BTreeMap::new(),
            none_after_ready: Vec::new(),
            after_ready_window: default_after_ready_window(),
        }
    }
}

fn default_after_ready_window() -> Duration {
    Duration::from_secs(10)
}

/// Labels real EKS has the AWS cloud controller manager set (a bootstrap may set them too): checks on them
/// accept either setter unless the scenario says otherwise.
pub const CLOUD_LABELS: &[&str] = &[
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

/// Who must have set a Node field a check asserts, from the Node's managedFields (and the kubelet's
/// registration in the audit log for taints).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SetBy {
    /// The kubelet, from the bootstrap's flags and config (the default: the bootstrap is responsible).
    Kubelet,
    /// The cloud controller (the harness's cloud-node controller, as EKS's AWS cloud controller manager).
    CloudController,
    /// Either; the report still says who.
    Any,
}

/// Per-field overrides of who must have set what (`labels` by key).
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SetByExpectation {
    /// Who must have set `providerID` (default: the kubelet).
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<SetBy>,
    /// Who must have set the Node's taints (default: the kubelet).
    #[serde(default)]
    pub taints: Option<SetBy>,
    /// Who must have set the Node's pod capacity, `capacityPods` (default: the kubelet).
    #[serde(default)]
    pub capacity_pods: Option<SetBy>,
    /// Who must have set each label, by key (default: the kubelet; `any` for the cloud labels EKS's cloud
    /// controller sets: instance type, zone, region).
    #[serde(default)]
    pub labels: BTreeMap<String, SetBy>,
}

impl SetByExpectation {
    /// Label `key`: as the scenario says, else either setter for the labels EKS's cloud controller sets
    /// (instance type, zone, region), else the kubelet.
    pub fn label(&self, key: &str) -> SetBy {
        self.labels.get(key).copied().unwrap_or_else(|| {
            if CLOUD_LABELS.contains(&key) {
                SetBy::Any
            } else {
                SetBy::Kubelet
            }
        })
    }
}

/// What cloud-init must have reported (`/run/cloud-init/status.json`, its log).
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CloudInitExpectation {
    /// cloud-init's final status: `done` (the default) or `error`.
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum CloudInitStatus {
    #[default]
    Done,
    Error,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NodeadmExpectation {
    /// Both phases (config, run) exited 0.
    Succeeded,
    /// A phase failed (the error is in the report and in `nodeadm` evidence).
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SignalExpectation {
    /// `SUCCESS` was signalled for the instance.
    Success,
    /// `FAILURE` was signalled for the instance.
    Failure,
    /// No signal at all.
    None,
}

/// The array the AMI's local-disk setup (nodeadm's `spec.instance.localStorage`, Karpenter's
/// `instanceStorePolicy`) makes of the instance's instance-store disks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub enum LocalStorageExpectation {
    /// One RAID0 md array of every instance-store disk holds the kubelet's and containerd's directories and
    /// `/var/log/pods`.
    #[serde(rename = "RAID0")]
    Raid0,
    /// The same as a RAID10 array (at least 4 disks).
    #[serde(rename = "RAID10")]
    Raid10,
}

impl LocalStorageExpectation {
    /// The md level the kernel reports for it (`/sys/block/md*/md/level`).
    pub fn md_level(self) -> &'static str {
        match self {
            LocalStorageExpectation::Raid0 => "raid0",
            LocalStorageExpectation::Raid10 => "raid10",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ExitExpectation {
    Success,
    Failure,
    #[default]
    Any,
}

/// One request the API server serves by calling the node's kubelet on :10250 (`expect.throughApiServer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ApiServerAction {
    /// `kubectl exec`: a process started in the pod's container, its exit status returned.
    Exec,
    /// `kubectl logs`: the container's log, read from the kubelet.
    Logs,
    /// `kubectl port-forward`: a connection into the pod's network namespace.
    PortForward,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
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
    /// A VM node's serial console: its firmware, bootloader, kernel and systemd, read from outside the machine.
    Console,
}

/// The identity the API server saw the kubelet as (from its audit log).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct IdentityExpectation {
    /// The username the API server saw, exactly (placeholders allowed, e.g.
    /// `system:node:{{instance.privateDnsName}}`).
    #[serde(default)]
    pub username: Option<String>,
    /// Groups that must all be present (the API server adds `system:authenticated`).
    #[serde(default)]
    pub groups: Vec<String>,
}

/// A text that must show up in a log: how a negative scenario proves *why* the node failed.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Evidence {
    /// The log to search: `kubelet`, `bootstrap`, `imds`, `approver`, `authenticator`, `cloud-init`,
    /// `nodeadm`, `calls` or `console`.
    pub source: EvidenceSource,
    /// The text some line of that log must contain (placeholders filled in; never empty).
    #[serde(deserialize_with = "super::nonempty::text")]
    #[schemars(length(min = 1))]
    pub contains: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq, Eq, PartialOrd, Ord, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Taint {
    /// The taint's key.
    pub key: String,
    /// The taint's value (left out for a taint without one, or with an empty one).
    #[serde(default)]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// What the cluster must see for each node of the group.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expect {
    /// `false` for negative scenarios: the node must not register, and `evidence` must be found.
    #[serde(default = "yes")]
    pub joins: bool,
    /// Deadline for the whole join, or the observation window of a negative scenario (after its bootstrap, which
    /// on a VM node has at least 10 minutes).
    #[serde(default = "default_within", deserialize_with = "super::durations::wait")]
    #[schemars(with = "String", extend("default" = "90s"))]
    pub within: Duration,
    /// Defaults to the instance's PrivateDnsName.
    #[serde(default)]
    pub node_name: Option<String>,
    /// Labels the Node must carry (others may be present too).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The Node's exact label set: every label it carries, and no other.
    #[serde(default)]
    pub labels_exactly: Option<BTreeMap<String, String>>,
    /// Who must have set the asserted Node fields (default: the kubelet, except the cloud labels).
    #[serde(default)]
    pub set_by: SetByExpectation,
    /// The Node's exact taints once Ready (`None`: not checked).
    #[serde(default)]
    pub taints: Option<Vec<Taint>>,
    /// The Node's pod capacity (`status.capacity.pods`: the kubelet's maxPods), exactly.
    #[serde(default)]
    pub capacity_pods: Option<u32>,
    /// The kubelet's `clusterDNS` as reported by `/configz`.
    #[serde(default, rename = "clusterDNS")]
    pub cluster_dns: Option<Vec<String>>,
    /// Defaults to `aws:///{{instance.az}}/{{instance.id}}`.
    #[serde(default, rename = "providerID")]
    pub provider_id: Option<String>,
    /// The kubelet's client-certificate CSR: `issued`, `pending`, `none` or `any` (the default: not checked).
    #[serde(default)]
    pub client_csr: CsrExpectation,
    /// The kubelet's serving-certificate CSR: `issued`, `pending`, `none` or `any` (the default: not checked).
    #[serde(default)]
    pub serving_csr: CsrExpectation,
    /// The kubelet serves :10250 with a certificate chained to the cluster CA whose SANs are the node's.
    #[serde(default)]
    pub serving_cert: bool,
    /// How the bootstrap must exit: `success`, `failure` or `any` (the default: success for a node that
    /// joins).
    #[serde(default)]
    pub bootstrap_exit: ExitExpectation,
    /// Texts that must show up in the node's logs: required for a negative scenario (`joins: false`).
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
    /// What the API server must do with the `podRuns` pod through the node's kubelet, as `kubectl` does: EKS's API
    /// server reaches :10250 verifying the kubelet's serving certificate against the cluster CA, so a certificate
    /// it refuses breaks these and nothing else. Needs `podRuns: true`.
    #[serde(default)]
    pub through_api_server: Vec<ApiServerAction>,
    /// The host's kernel parameters a fresh procfs or sysfs mount in the node reaches are as before the node ran
    /// (what a VM node's own kernel guarantees; a node container is as strong as kind's privileged node).
    #[serde(default)]
    pub host_kernel_untouched: bool,
    /// The instance-store disks (a `runtime: vm` node of a type that has them) are one md array of this level,
    /// holding the kubelet's and containerd's directories and `/var/log/pods`: what nodeadm's
    /// `localStorage.strategy` asks the AMI's `setup-local-disks` for.
    #[serde(default)]
    pub local_storage: Option<LocalStorageExpectation>,
    /// What containerd may say is wrong with how the node set it up (keys of its configuration it ignored,
    /// deprecated features in use): `none` makes it a check, `any` a note. Unset: a check on a containerd line no
    /// AMI ships yet (2.3, 2.4: the canary), a note on the others.
    #[serde(default)]
    pub containerd_warnings: Option<ContainerdWarnings>,
    /// Checks that must fail (globs on the check's name after `node/`, e.g. `calls imds * at most 30`): how a
    /// scenario proves an assertion catches a bad bootstrap. They are reported with what they found.
    #[serde(default)]
    pub failing_checks: Vec<String>,
}

/// `expect.containerdWarnings`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ContainerdWarnings {
    /// containerd ignored no key of its configuration and reports no deprecation: a check.
    None,
    /// Whatever it says is a note.
    Any,
}

/// The providerID a node must have when the scenario names none: what EC2's kubelet and cloud provider set.
pub const DEFAULT_PROVIDER_ID: &str = "aws:///{{instance.az}}/{{instance.id}}";

impl Expect {
    /// This expectation with every `{{placeholder}}` filled in from one node's values: what that node's checks
    /// compare, resolved once, when the values are all known (the run's and the instance's). The placeholders were
    /// checked when the scenario loaded, so an error names a value the run did not provide. The providerID is
    /// always set (the default when the scenario names none).
    pub fn resolved(&self, vars: &BTreeMap<String, String>) -> Result<Expect, String> {
        let r = |t: &String| super::template::render(t, vars);
        let map = |m: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, String> {
            m.iter().map(|(k, v)| Ok((k.clone(), r(v)?))).collect()
        };
        let list = |l: &[String]| -> Result<Vec<String>, String> { l.iter().map(r).collect() };
        let mut e = self.clone();
        e.node_name = self.node_name.as_ref().map(r).transpose()?;
        e.labels = map(&self.labels)?;
        e.labels_exactly = self.labels_exactly.as_ref().map(map).transpose()?;
        let provider_id = self.provider_id.clone().unwrap_or_else(|| DEFAULT_PROVIDER_ID.into());
        e.provider_id = Some(r(&provider_id)?);
        e.cluster_dns = self.cluster_dns.as_deref().map(list).transpose()?;
        for ev in &mut e.evidence {
            let written = ev.contains.clone();
            ev.contains = r(&ev.contains)?;
            // Every line contains the empty string: evidence that rendered to nothing would prove anything.
            if ev.contains.trim().is_empty() {
                return Err(format!(
                    "evidence `contains: {written}` is empty once its placeholders are filled in"
                ));
            }
        }
        if let Some(i) = &mut e.identity {
            i.username = i.username.as_ref().map(r).transpose()?;
            i.groups = list(&i.groups)?;
        }
        e.aws_auth_changed_by = self.aws_auth_changed_by.as_ref().map(r).transpose()?;
        for f in &mut e.files {
            for v in f.values.values_mut() {
                if let serde_yaml_ng::Value::String(s) = v {
                    *s = r(s)?;
                }
            }
            f.contains = list(&f.contains)?;
        }
        Ok(e)
    }
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
            labels_exactly: None,
            set_by: SetByExpectation::default(),
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
            through_api_server: Vec::new(),
            host_kernel_untouched: false,
            local_storage: None,
            containerd_warnings: None,
            failing_checks: Vec::new(),
        }
    }
}

#[cfg(test)]
#[path = "expect/tests.rs"]
mod tests;
