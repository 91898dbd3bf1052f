//! `nodejoin init --producer P`: a starter scenario for a user whose nodes' user data a producer writes, through
//! the producer's flavor (Karpenter, eksctl, Cluster API's NodeadmConfig, EKS managed node groups: the user data
//! each writes in 2026, `userdata::producers`), or, for a Terraform module, through `userData.command` running a
//! renderer script in the repository that the user points at their own module. The node runs the AL2023 AMI's
//! current nodeadm and runtime files (the amazon-eks-ami commit nodejoin's own AL2023 scenarios pin, or the tree
//! `--eks-ami` names), and the scenario passes as written.
use super::text::{preamble, quoted, IAM_EXPECT};

/// The amazon-eks-ami commit the scenarios pin when no tree is given (release v20260714, as the bundled AL2023
/// scenarios); a full id, so what is tested never moves.
pub const AMAZON_EKS_AMI: &str =
    "{ git: https://github.com/awslabs/amazon-eks-ami, rev: 81fec2e895854f599974fe4d3d72f61c0a9aaffa }";

/// Where `--producer terraform` writes the renderer its scenario runs, relative to the repository.
pub const RENDERER: &str = "nodejoin/render-user-data.sh";

/// A producer `init` scaffolds for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Producer {
    Karpenter,
    Eksctl,
    Capa,
    EksManaged,
    Terraform,
}

impl Producer {
    pub const ALL: [Producer; 5] = [
        Self::Karpenter,
        Self::Eksctl,
        Self::Capa,
        Self::EksManaged,
        Self::Terraform,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Karpenter => "karpenter",
            Self::Eksctl => "eksctl",
            Self::Capa => "capa",
            Self::EksManaged => "eks-managed",
            Self::Terraform => "terraform",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The node group's user data and what it must make the Node show (indented for the scenario).
    fn parts(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Self::Karpenter => (
                "Karpenter's user data for a NodePool and its EC2NodeClass (labels, taints, kubelet settings)",
                r#"      karpenter:
        nodePool: general
        labels: { team: platform }
        taints: ["dedicated=platform:NoSchedule"]
        kubelet:
          maxPods: 42
"#,
                r#"      capacityPods: 42
      taints:
        - { key: dedicated, value: platform, effect: NoSchedule }
        - { key: karpenter.sh/unregistered, effect: NoExecute }
      labels:
        karpenter.sh/nodepool: general
        team: platform
"#,
            ),
            Self::Eksctl => (
                "eksctl's user data for a managed or self-managed AL2023 node group",
                r#"      eksctl:
        labels: { role: workers }
        maxPodsPerNode: 17
"#,
                r#"      capacityPods: 17
      labels:
        role: workers
        alpha.eksctl.io/nodegroup-name: workers
"#,
            ),
            Self::Capa => (
                "Cluster API's NodeadmConfig (CAPA) user data for a MachineDeployment",
                r#"      capa:
        kubelet:
          config: { maxPods: 31 }
          flags: ["--node-labels=tier=workers"]
"#,
                r#"      capacityPods: 31
      labels:
        tier: workers
"#,
            ),
            Self::EksManaged => (
                "an EKS managed node group's user data, its launch template's part first",
                r#"      eksManaged:
        labels: { team: platform }
        launchTemplate:
          - nodeConfig:
              kubelet:
                flags: ["--node-labels=from-launch-template=yes"]
"#,
                r#"      labels:
        eks.amazonaws.com/nodegroup: workers
        team: platform
        from-launch-template: "yes"
"#,
            ),
            Self::Terraform => (
                "the user data a Terraform module renders, from this repository's renderer script",
                "      command: [../render-user-data.sh]   # prints the user data; point it at your module\n",
                r#"      labels:
        rendered-by: terraform
"#,
            ),
        }
    }
}

/// The scenario of `p`'s user data on an AL2023 node of `eks_ami` (a tree's path relative to the scenario), else
/// of the pinned commit.
pub fn scenario(p: Producer, eks_ami: Option<&str>) -> String {
    let (what, user_data, expect) = p.parts();
    let ami = eks_ami.map(quoted).unwrap_or_else(|| AMAZON_EKS_AMI.to_string());
    format!(
        r#"{preamble}description: {what} joins through the AL2023 AMI's nodeadm
cluster:
  auth: iam
nodes:
  - name: workers
    instanceType: m5.large
    image:
      amazonEksAmi: {ami}
    userData:
{user_data}    expect:
      within: 150s
      nodeadm: succeeded
{expect}{IAM_EXPECT}"#,
        preamble = preamble(&format!(
            "# {what}, as the producer writes it in 2026 (nodejoin's `{}` flavor: docs/src/reference/user-data.md),\n\
             # on an AL2023 node running the AMI's nodeadm and runtime files. Change the settings to yours.\n",
            p.name()
        )),
    )
}

/// The renderer `--producer terraform` writes: AL2023 user data shaped as terraform-aws-eks's self-managed node
/// group renders it (MIME, a NodeConfig with the cluster's details from nodejoin's NODEJOIN_* variables), to be
/// replaced by a call of the user's own module (its comment says how).
pub fn renderer() -> String {
    r#"#!/bin/sh
# Prints the user data a node boots with. nodejoin runs it (`userData.command`) in a container of the node's image
# and hands it the cluster and the instance as NODEJOIN_* variables (NODEJOIN_CLUSTER_NAME,
# NODEJOIN_CLUSTER_ENDPOINT, NODEJOIN_CLUSTER_CA_BASE64, NODEJOIN_CLUSTER_SERVICE_IPV4_CIDR, NODEJOIN_INSTANCE_TYPE,
# ...: docs/src/reference/user-data.md). Point it at your module, e.g. render its template with those values, or
# print `terraform output -raw user_data` of a workspace whose variables are set from them.
set -eu
printf 'Content-Type: multipart/mixed; boundary="MIMEBOUNDARY"\nMIME-Version: 1.0\r\n\r\n'
printf -- '--MIMEBOUNDARY\r\nContent-Transfer-Encoding: 7bit\r\nContent-Type: application/node.eks.aws\r\nMime-Version: 1.0\r\n\r\n'
cat <<DOC
---
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: ${NODEJOIN_CLUSTER_NAME}
    apiServerEndpoint: ${NODEJOIN_CLUSTER_ENDPOINT}
    certificateAuthority: ${NODEJOIN_CLUSTER_CA_BASE64}
    cidr: ${NODEJOIN_CLUSTER_SERVICE_IPV4_CIDR}
  kubelet:
    flags:
      - --node-labels=rendered-by=terraform
DOC
printf '\r\n--MIMEBOUNDARY--\r\n'
"#
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each producer's scenario is a valid scenario with its flavor's user data and the AL2023 image.
    #[test]
    fn every_producers_scenario_loads() {
        for p in Producer::ALL {
            assert_eq!(Producer::parse(p.name()), Some(p));
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join(".git")).unwrap();
            let scenarios = dir.path().join("nodejoin/scenarios");
            std::fs::create_dir_all(&scenarios).unwrap();
            std::fs::write(dir.path().join(RENDERER), renderer()).unwrap();
            let file = scenarios.join("join.yaml");
            std::fs::write(&file, scenario(p, None)).unwrap();
            let sc = crate::scenario::load_file(&file, &Default::default())
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", p.name(), scenario(p, None)));
            let group = &sc.nodes[0];
            assert!(
                group.image.as_ref().is_some_and(|i| i.amazon_eks_ami.is_some()),
                "{}",
                p.name()
            );
            assert!(group.user_data.is_some(), "{}", p.name());
        }
        assert_eq!(Producer::parse("chef"), None);
    }
}
