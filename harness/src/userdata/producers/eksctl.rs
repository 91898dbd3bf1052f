//! eksctl's AL2023 user data, following eksctl-io/eksctl `pkg/nodebootstrap/al2023.go`, `managed_al2.go`
//! (`createMimeMessage`) and the goldens in `al2023_test.go` (74ade5a7): Go's `mime/multipart` framing (CRLF, a
//! random boundary written unquoted), every node group's `/run/xtables.lock` script part (whose headers carry
//! `Content-Type` twice, the second being `charset="us-ascii"`), then for a self-managed group or a managed one
//! with a custom AMI the NodeConfig (nodeadm's own type through `sigs.k8s.io/yaml`: keys sorted,
//! `metadata.creationTimestamp: null`) with clusterDNS, maxPods, the kubeletExtraConfig, `--node-labels` and
//! `--register-with-taints`. A managed group on the EKS AMI gets only the script: EKS adds the NodeConfig.
use super::{sorted_yaml, Taint};
use std::collections::BTreeMap;

/// eksctl's `assets/scripts/al2023-xtables.lock.sh`, as eksctl embeds it.
pub const XTABLES_LOCK: &str =
    "#!/bin/bash\n\nset -o errexit\nset -o pipefail\nset -o nounset\n\ntouch /run/xtables.lock\n";

/// What eksctl writes user data from: a node group of its config file.
#[derive(Debug, Clone, Default)]
pub struct Eksctl {
    /// The node group's labels (eksctl adds `alpha.eksctl.io/cluster-name` and `alpha.eksctl.io/nodegroup-name`).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `maxPodsPerNode`.
    pub max_pods: Option<u32>,
    /// `kubeletExtraConfig`.
    pub kubelet_extra: serde_json::Map<String, serde_json::Value>,
    /// A managed node group (`managedNodeGroups`) on the EKS AMI: EKS writes the NodeConfig.
    pub managed_on_eks_ami: bool,
    /// The MIME boundary (eksctl's is Go's random one; fixed in tests).
    pub boundary: String,
}

/// A random boundary as Go's `multipart.Writer` makes one: 30 random bytes in hex.
pub fn random_boundary() -> String {
    crate::process::random_hex(60)
}

impl Eksctl {
    /// The NodeConfig eksctl writes.
    pub fn node_config(&self, c: &crate::userdata::generate::ClusterFacts) -> String {
        let mut config = self.kubelet_extra.clone();
        config.insert("clusterDNS".into(), serde_json::json!([c.dns_ip]));
        if let Some(m) = self.max_pods {
            config.insert("maxPods".into(), m.into());
        }
        let labels: Vec<String> = self.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut flags = vec![format!("--node-labels={}", labels.join(","))];
        if !self.taints.is_empty() {
            let taints: Vec<String> = self.taints.iter().map(Taint::flag_form).collect();
            flags.push(format!("--register-with-taints={}", taints.join(",")));
        }
        sorted_yaml(&serde_json::json!({
            "apiVersion": "node.eks.aws/v1alpha1",
            "kind": "NodeConfig",
            "metadata": { "creationTimestamp": null },
            "spec": {
                "cluster": {
                    "apiServerEndpoint": c.endpoint,
                    "certificateAuthority": c.ca_base64,
                    "cidr": c.service_cidr,
                    "name": c.name,
                },
                "containerd": {},
                "instance": { "localStorage": {} },
                "kubelet": { "config": config, "flags": flags },
            },
        }))
    }

    /// The user data (as EC2 serves it; eksctl hands EC2 its base64).
    pub fn user_data(&self, c: &crate::userdata::generate::ClusterFacts) -> Vec<u8> {
        let b = &self.boundary;
        let mut parts: Vec<(&str, String)> = vec![(
            "Content-Type: text/x-shellscript\r\nContent-Type: charset=\"us-ascii\"\r\n",
            XTABLES_LOCK.to_string(),
        )];
        if !self.managed_on_eks_ami {
            parts.push(("Content-Type: application/node.eks.aws\r\n", self.node_config(c)));
        }
        let mut out = format!("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary={b}\r\n\r\n");
        for (i, (headers, body)) in parts.iter().enumerate() {
            if i > 0 {
                out.push_str("\r\n");
            }
            out.push_str(&format!("--{b}\r\n{headers}\r\n{body}"));
        }
        out.push_str(&format!("\r\n--{b}--\r\n"));
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userdata::format::{detect, Kind};

    fn facts() -> crate::userdata::generate::ClusterFacts {
        crate::userdata::generate::ClusterFacts {
            name: "al2023-test".into(),
            endpoint: "https://test.xxx.us-west-2.eks.amazonaws.com".into(),
            ca_base64: "dGVzdCBDQQ==".into(),
            dns_ip: "10.100.0.10".into(),
            region: "us-west-2".into(),
            service_cidr: "10.100.0.0/16".into(),
        }
    }

    fn group() -> Eksctl {
        Eksctl {
            labels: BTreeMap::from([(
                "alpha.eksctl.io/nodegroup-name".to_string(),
                "al2023-mng-test".to_string(),
            )]),
            boundary: "//".into(),
            ..Default::default()
        }
    }

    /// eksctl's golden for an unmanaged AL2023 node group ("default"), compared as eksctl's test compares it
    /// (CRLF read as LF).
    #[test]
    fn self_managed_matches_eksctls_golden() {
        let got = String::from_utf8(group().user_data(&facts()))
            .unwrap()
            .replace("\r\n", "\n");
        let want = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=//\n\n--//\n\
Content-Type: text/x-shellscript\nContent-Type: charset=\"us-ascii\"\n\n#!/bin/bash\n\nset -o errexit\nset -o pipefail\n\
set -o nounset\n\ntouch /run/xtables.lock\n\n--//\nContent-Type: application/node.eks.aws\n\n\
apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata:\n  creationTimestamp: null\nspec:\n  cluster:\n    \
apiServerEndpoint: https://test.xxx.us-west-2.eks.amazonaws.com\n    certificateAuthority: dGVzdCBDQQ==\n    \
cidr: 10.100.0.0/16\n    name: al2023-test\n  containerd: {}\n  instance:\n    localStorage: {}\n  kubelet:\n    \
config:\n      clusterDNS:\n      - 10.100.0.10\n    flags:\n    - --node-labels=alpha.eksctl.io/nodegroup-name=al2023-mng-test\n\n--//--\n";
        assert_eq!(got, want);
    }

    #[test]
    fn a_managed_group_on_the_eks_ami_gets_only_the_script_and_taints_are_a_flag() {
        let mut g = group();
        g.managed_on_eks_ami = true;
        let leaves: Vec<Kind> = detect(&g.user_data(&facts()))
            .unwrap()
            .leaves()
            .into_iter()
            .map(|l| l.kind.clone())
            .collect();
        assert_eq!(leaves, vec![Kind::ShellScript]);
        let mut g = group();
        g.taints = vec![
            Taint::parse("special=true:NoSchedule").unwrap(),
            Taint::parse("gpu:NoExecute").unwrap(),
        ];
        g.max_pods = Some(11);
        let doc = g.node_config(&facts());
        assert!(
            doc.contains("    - --register-with-taints=special=true:NoSchedule,gpu:NoExecute\n"),
            "{doc}"
        );
        assert!(doc.contains("      maxPods: 11\n"), "{doc}");
        assert_eq!(random_boundary().len(), 60);
    }
}
