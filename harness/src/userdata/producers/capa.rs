//! Cluster API Provider AWS's `NodeadmConfig` user data, following kubernetes-sigs/cluster-api-provider-aws at
//! 2cf09d78 (2026-07-01): `bootstrap/eks/internal/userdata/nodeadm.go` (a text/template) and `utils.go` (its
//! `Indent` and `toYaml`). Its quirks are kept because nodeadm and cloud-init meet them on real nodes: LF only, no
//! newline after the closing `--//--`, an empty header-less part after the `preNodeadmCommands` part, a line of
//! six spaces after `kubelet.config`, and flags wrapped in double quotes without escaping.
use super::sorted_yaml;
use std::collections::BTreeMap;

/// A `NodeadmConfig`'s fields that reach the user data.
#[derive(Debug, Clone, Default)]
pub struct Capa {
    /// `preNodeadmCommands`: one shell part run by cloud-init.
    pub pre_nodeadm_commands: Vec<String>,
    /// `featureGates` (nodeadm's, e.g. `InstanceIdNodeName`).
    pub feature_gates: BTreeMap<String, bool>,
    /// `kubelet.config`, a KubeletConfiguration fragment.
    pub kubelet_config: Option<serde_json::Value>,
    /// `kubelet.flags`.
    pub kubelet_flags: Vec<String>,
}

/// The EKS cluster name CAPA gives a cluster whose `eksClusterName` is unset: `<namespace>_<name>`, dots in the
/// name becoming underscores (`pkg/eks/eks.go`, `GenerateEKSName`, for names under 100 characters).
pub fn default_cluster_name(namespace: &str, name: &str) -> String {
    format!("{namespace}_{}", name.replace('.', "_"))
}

/// Every line of `text` indented by `n` spaces, the empty last line too (what the template's `Indent` does).
fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.split('\n')
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Capa {
    pub fn user_data(&self, c: &crate::userdata::generate::ClusterFacts) -> Vec<u8> {
        let mut out = String::from("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n");
        if !self.pre_nodeadm_commands.is_empty() {
            out.push_str(
                "\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\nMIME-Version: 1.0\n\
Content-Transfer-Encoding: 7bit\nContent-Disposition: attachment; filename=\"commands.sh\"\n\n\
#!/bin/bash\nset -o errexit\nset -o pipefail\nset -o nounset\n",
            );
            for cmd in &self.pre_nodeadm_commands {
                out.push_str(cmd);
                out.push('\n');
            }
            out.push_str("--//\n");
        }
        out.push_str(&format!(
            "\n--//\nContent-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n\
spec:\n  cluster:\n    name: {}\n    apiServerEndpoint: {}\n    certificateAuthority: {}\n    cidr: {}\n",
            c.name, c.endpoint, c.ca_base64, c.service_cidr
        ));
        if !self.feature_gates.is_empty() {
            out.push_str("  featureGates:\n");
            for (k, v) in &self.feature_gates {
                out.push_str(&format!("    {k}: {v}\n"));
            }
        }
        if self.kubelet_config.is_some() || !self.kubelet_flags.is_empty() {
            out.push_str("  kubelet:\n");
            if let Some(config) = &self.kubelet_config {
                out.push_str(&format!("    config:\n{}\n", indent(&sorted_yaml(config), 6)));
            }
            if !self.kubelet_flags.is_empty() {
                out.push_str("    flags:\n");
                for f in &self.kubelet_flags {
                    out.push_str(&format!("       - \"{f}\"\n"));
                }
            }
        }
        out.push_str("\n--//--");
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userdata::format::{detect, Kind};

    fn facts() -> crate::userdata::generate::ClusterFacts {
        crate::userdata::generate::ClusterFacts {
            name: default_cluster_name("default", "my-cluster"),
            endpoint: "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com".into(),
            ca_base64: "LS0tLS1CRUdJTi4uLg==".into(),
            dns_ip: "10.96.0.10".into(),
            region: "us-west-2".into(),
            service_cidr: "10.96.0.0/12".into(),
        }
    }

    /// CAPA's output for a NodeadmConfig with nothing set, every byte (no newline at the end).
    #[test]
    fn basic_matches_capas_template() {
        let got = String::from_utf8(Capa::default().user_data(&facts())).unwrap();
        assert_eq!(
            got,
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n\n--//\n\
Content-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    \
name: default_my-cluster\n    apiServerEndpoint: https://ABCDEF.gr7.us-west-2.eks.amazonaws.com\n    \
certificateAuthority: LS0tLS1CRUdJTi4uLg==\n    cidr: 10.96.0.0/12\n\n--//--"
        );
    }

    #[test]
    fn commands_gates_config_and_flags_keep_the_templates_quirks() {
        let capa = Capa {
            pre_nodeadm_commands: vec!["echo 'pre-bootstrap'".into()],
            feature_gates: BTreeMap::from([
                ("InstanceIdNodeName".to_string(), true),
                ("FastImagePull".to_string(), false),
            ]),
            kubelet_config: Some(serde_json::json!({"maxPods": 58, "evictionHard": {"memory.available": "2000Mi"}})),
            kubelet_flags: vec!["--node-labels=tier=workers".into()],
        };
        let ud = capa.user_data(&facts());
        let text = String::from_utf8(ud.clone()).unwrap();
        assert!(text
            .contains("set -o nounset\necho 'pre-bootstrap'\n--//\n\n--//\nContent-Type: application/node.eks.aws\n"));
        assert!(text.contains("  featureGates:\n    FastImagePull: false\n    InstanceIdNodeName: true\n"));
        assert!(text.contains(
            "    config:\n      evictionHard:\n        memory.available: 2000Mi\n      maxPods: 58\n      \n    flags:\n       - \"--node-labels=tier=workers\"\n\n--//--"
        ), "{text}");
        let kinds: Vec<Kind> = detect(&ud)
            .unwrap()
            .leaves()
            .into_iter()
            .map(|l| l.kind.clone())
            .collect();
        assert!(
            kinds.contains(&Kind::ShellScript) && kinds.contains(&Kind::NodeConfig),
            "{kinds:?}"
        );
    }

    #[test]
    fn cluster_names_are_namespace_underscore_name() {
        assert_eq!(default_cluster_name("team-a", "prod.eu"), "team-a_prod_eu");
    }
}
