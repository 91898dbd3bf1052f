//! What `nodejoin init` writes: the scenario for each kind of user, the README and the workflow.
use super::REMOVED_IN_1_35;
use crate::error::{Error, Result};
use crate::userdata::rendered::{self, ClusterFacts};
use std::path::Path;

/// The ref of nodejoin's action and release this binary belongs to: `vX.Y.Z` for a release, else `main`.
pub fn release_ref() -> String {
    let v = env!("CARGO_PKG_VERSION");
    if v.contains('-') {
        "main".into()
    } else {
        format!("v{v}")
    }
}

/// A value as YAML: plain when it is only path characters, else a JSON string (which YAML reads as is), so no name
/// from a file can change the scenario's structure.
pub(super) fn quoted(v: &str) -> String {
    let plain = v.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '.' || c == '/')
        && v.chars().all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c))
        && !matches!(v, "true" | "false" | "null" | "yes" | "no" | "on" | "off");
    if plain {
        v.to_string()
    } else {
        serde_json::to_string(v).unwrap_or_default()
    }
}

/// The first lines every scenario shares: the editor's schema and how to run it.
pub(super) fn preamble(comment: &str) -> String {
    format!(
        "{}\n{comment}# Paths are relative to this file. Run it: nodejoin run nodejoin/scenarios\n",
        crate::scenario::schema::modeline(crate::scenario::schema::FILE_NAME)
    )
}

/// What every join checks with IAM: no client CSR (the kubelet logs in with its token), a served certificate,
/// the providerID.
pub(super) const IAM_EXPECT: &str = r#"      clientCsr: none           # IAM: the kubelet logs in with a token, not a bootstrap certificate
      servingCsr: issued
      servingCert: true
      providerID: "aws:///{{instance.az}}/{{instance.id}}"
"#;

/// A bootstrap script, an overlay with one, or (neither given) nodejoin's reference bootstrap, called as the EKS
/// AMI's `/etc/eks/bootstrap.sh CLUSTER --apiserver-endpoint ...`.
pub fn bootstrap_scenario(script: Option<String>, overlay: Option<String>, version: Option<&str>) -> String {
    let version = match version {
        Some(v) => format!(
            "  kubernetesVersion: {v}   # the newest this bootstrap joins: kubelet 1.35 removed {REMOVED_IN_1_35}\n"
        ),
        None => String::new(),
    };
    let source = match (&script, &overlay) {
        (Some(s), _) => format!("      script: {}   # installed as /etc/eks/bootstrap.sh\n", quoted(s)),
        (None, Some(_)) => String::new(),
        (None, None) => "      # script: ../../path/to/your/bootstrap.sh   # yours, installed as /etc/eks/bootstrap.sh;\n      #                                           # left out, nodejoin's reference bootstrap runs\n".into(),
    };
    let image = match &overlay {
        Some(o) => format!(
            "    image: {{ overlay: {} }}   # laid over the node image; its etc/eks/bootstrap.sh is the bootstrap\n",
            quoted(o)
        ),
        None => String::new(),
    };
    format!(
        r#"{preamble}description: a node bootstrapped by this repository's bootstrap joins the cluster
cluster:
  auth: iam                     # as EKS nodes join: an IAM token through the cluster's authenticator
{version}nodes:
  - name: worker
    instanceType: m5.large
    availabilityZone: us-west-2a
{image}    bootstrap:
{source}      args:
        - "{{{{cluster.name}}}}"
        - --apiserver-endpoint
        - "{{{{cluster.endpoint}}}}"
        - --b64-cluster-ca
        - "{{{{cluster.caBase64}}}}"
        - --kubelet-extra-args
        - --node-labels=nodejoin.io/scenario=join
    expect:
      within: 120s
      labels:
        nodejoin.io/scenario: join
        kubernetes.io/hostname: "{{{{instance.privateDnsName}}}}"
      capacityPods: 29          # m5.large: 3 ENIs x (10 - 1) + 2
{IAM_EXPECT}"#,
        preamble = preamble(
            "# A node bootstrapped the way an EKS AMI does it (`/etc/eks/bootstrap.sh CLUSTER --apiserver-endpoint ...`)\n\
             # joins a real control plane: registration under its PrivateDnsName, labels, max-pods and providerID.\n"
        ),
    )
}

/// What `--user-data` found in the file.
pub struct UserDataScenario {
    pub file: String,
    pub eks_ami: Option<String>,
    pub facts: ClusterFacts,
    pub labels: Vec<(String, String)>,
}

/// What a rendered user-data file says: its cluster, its node labels, and a note for the user.
pub struct Found {
    pub facts: ClusterFacts,
    pub labels: Vec<(String, String)>,
    pub note: Option<String>,
}

/// Reads a rendered user-data file (inside its gzip/base64 layers) for its cluster and labels; refuses one no
/// node here could join with.
pub fn read_user_data(file: &Path) -> Result<Found> {
    let opened = crate::untrusted::open_regular(file).map_err(|e| Error::io(file, e))?;
    let bytes = crate::untrusted::read_capped(opened, 1 << 20).map_err(|e| Error::io(file, e))?;
    let seen = std::cell::RefCell::new(String::new());
    crate::userdata::file::prepare(&bytes, &[], |t| {
        seen.replace(t.to_string());
        Ok(t.to_string())
    })
    .map_err(|e| Error::Init(format!("--user-data {}: {e}", file.display())))?;
    let text = seen.into_inner();
    rendered::to_placeholders(&text).map_err(|e| Error::Init(format!("--user-data {}: {e}", file.display())))?;
    let mut facts = rendered::facts(&text);
    let mut note = None;
    if let Some(name) = &facts.name {
        if let Err(e) = crate::scenario::names::eks_cluster(name) {
            note = Some(format!("the cluster name {name:?} in the user data is not one EKS takes ({e}): the scenario's cluster gets nodejoin's"));
            facts.name = None;
        }
    }
    if let Some(cidr) = &facts.service_cidr {
        if cidr.parse::<ipnet::IpNet>().is_err() {
            facts.service_cidr = None;
        }
    }
    Ok(Found {
        facts,
        labels: rendered::node_labels(&text),
        note,
    })
}

/// A producer's rendered user data on an AL2023 node: nodeadm from the given amazon-eks-ami tree, else the one
/// nodejoin builds (February 2024, which configures containerd 1.7).
pub fn user_data_scenario(u: &UserDataScenario) -> String {
    let mut cluster = String::from("  auth: iam                     # as EKS nodes join: an IAM token\n");
    if let Some(name) = &u.facts.name {
        cluster += &format!(
            "  name: {}   # the cluster the user data was rendered for\n",
            quoted(name)
        );
    }
    if let Some(cidr) = &u.facts.service_cidr {
        cluster += &format!("  serviceIpv4Cidr: {cidr}\n");
    }
    let node = match &u.eks_ami {
        Some(ami) => format!(
            "    image:\n      amazonEksAmi: {}   # its nodeadm and AL2023 runtime files\n",
            quoted(ami)
        ),
        None => "    containerd: \"1.7\"   # what the nodeadm nodejoin builds (February 2024) configures; with\n    \
             #                     # image.amazonEksAmi (or nodejoin run --eks-ami) your AMI's nodeadm runs on 2.2\n"
            .into(),
    };
    let mut labels = String::new();
    if !u.labels.is_empty() {
        labels += "      labels:\n";
        for (k, v) in &u.labels {
            labels += &format!("        {}: {}\n", quoted(k), quoted(v));
        }
    }
    format!(
        r#"{preamble}description: a node booted with this repository's rendered user data joins the cluster
cluster:
{cluster}nodes:
  - name: worker
    instanceType: m5.large
{node}    userData:
      file: {file}
      rendered: true            # its API server endpoint and CA become this run's; the rest is served as it is
    expect:
      within: 150s
      nodeadm: succeeded
{labels}{IAM_EXPECT}"#,
        preamble = preamble(
            "# The user data a producer rendered (Karpenter, Terraform, eksctl, Cluster API), as EC2 would serve it:\n\
             # the node's cloud-init and nodeadm run it and the node joins a real control plane.\n"
        ),
        file = quoted(&u.file),
    )
}

/// A fork of amazon-eks-ami: its own nodeadm and AL2023 runtime files and units, with a NodeConfig as a node
/// group gives it.
pub fn eks_ami_scenario(ami: &str) -> String {
    format!(
        r#"{preamble}description: this amazon-eks-ami tree's nodeadm and AL2023 runtime files join a node
cluster:
  auth: iam
nodes:
  - name: workers
    instanceType: m5.large
    image:
      amazonEksAmi: {ami}   # nodeadm built from its nodeadm/, its runtime files and units
    userData:
      nodeadm:
        parts:
          - spec:
              kubelet:
                flags:
                  - --node-labels=nodejoin.io/scenario=join
    expect:
      within: 150s
      nodeadm: succeeded
      capacityPods: 29          # m5.large, from nodeadm's own instance table
      labels:
        nodejoin.io/scenario: join
      podRuns: true
{IAM_EXPECT}"#,
        preamble = preamble(
            "# This amazon-eks-ami tree as an AL2023 node runs it: nodeadm built from its nodeadm/, the AMI's runtime\n\
             # files and units, containerd and a real kubelet, joining a real control plane with an IAM token.\n"
        ),
        ami = quoted(ami),
    )
}

pub fn readme(action: &str) -> String {
    let repo = env!("CARGO_PKG_REPOSITORY");
    let install = match release_ref().as_str() {
        "main" => format!("cargo install --locked --git {repo} nodejoin"),
        tag => format!(
            "cargo binstall nodejoin@{}   # or: cargo install --locked nodejoin",
            &tag[1..]
        ),
    };
    format!(
        r#"# nodejoin scenarios

These scenarios boot node containers that run this repository's bootstrap for real against a real Kubernetes
control plane with fake EC2/EKS/IMDS APIs, and check what the cluster sees (CSRs, the Node's name, labels,
taints, max-pods, providerID, the IAM identity). nodejoin: {repo}

Run them (Linux, root, Docker; nodejoin prepares the rest on first use):

```sh
{install}
nodejoin run nodejoin/scenarios
```

See what a change does to a node, compared with main:

```sh
nodejoin compare --base git:main --head git:HEAD nodejoin/scenarios
```

Paths in a scenario (`bootstrap.script`, `image.overlay`, `userData.file`, golden files) are relative to the
scenario file. CI: `.github/workflows/nodejoin.yml` runs them on every push and pull request with `{action}`.
"#
    )
}

/// The workflow: nodejoin's action on every push and pull request, in a matrix of containerd lines and two
/// shards (nextest's `count:K/N`), a pull request also compared with its base; a push and its pull request share
/// one concurrency group (the branch), the older run cancelled. `action` as given (pinned by commit by default).
pub fn workflow(action: &str) -> String {
    format!(
        r#"# Runs nodejoin's scenarios (nodejoin/scenarios) on every push and pull request: the bootstrap in this repository
# joins a real control plane in node containers. Written by `nodejoin init`.
name: nodejoin
on:
  push:
  pull_request:
permissions:
  contents: read
concurrency:
  # A push and the pull request of its branch are one group: a newer run of either replaces the older.
  group: nodejoin-${{{{ github.head_ref || github.ref_name }}}}
  cancel-in-progress: true
jobs:
  nodejoin:
    runs-on: ubuntu-24.04
    timeout-minutes: 60
    strategy:
      fail-fast: false
      matrix:
        containerd: ["2.2"]   # the line the AL2023 AMI ships; add "2.3", "2.4" for the lines ahead of it
        shard: [1, 2]         # each job runs its share of the trials (nodejoin run --partition count:K/2)
    steps:
      - uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0
        with:
          persist-credentials: false
          fetch-depth: 0      # compare-base reads the pull request's base commit
      - uses: {action}
        with:
          scenarios: nodejoin/scenarios
          provider: local
          containerd: ${{{{ matrix.containerd }}}}
          partition: count:${{{{ matrix.shard }}}}/2
          # A pull request: also what the change does to a node, against its base.
          compare-base: ${{{{ github.event_name == 'pull_request' && format('git:{{0}}', github.event.pull_request.base.sha) || '' }}}}
"#
    )
}
