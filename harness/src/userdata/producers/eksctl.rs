//! eksctl's AL2023 user data, following eksctl-io/eksctl at 99984adb (2026-08-21): `pkg/nodebootstrap/al2023.go`,
//! `managed_al2.go` (`createMimeMessage`) and the goldens in `al2023_test.go`. Go's `mime/multipart` framing: CRLF
//! between the writer's lines (the bodies keep their LF), a random boundary written unquoted, each
//! `preBootstrapCommands` entry a shell part (`#!/bin/bash` and the command) whose headers carry `Content-Type`
//! twice (the second `charset="us-ascii"`), then the NodeConfig (nodeadm's own type through `sigs.k8s.io/yaml`:
//! keys sorted, `metadata: {}`, `containerd: {}`, `instance: {localStorage: {}, network: {}}`) with the
//! kubeletExtraConfig and clusterDNS, `--node-labels` and `--register-with-taints` (`key=value:Effect`, an empty
//! value written `key=:Effect`), and for `maxPodsPerNode` a second NodeConfig holding only maxPods. eksctl's
//! labels come from a Go map, so their order changes from run to run; here they are sorted, one of those orders.
use super::{sorted_yaml, Taint};
use std::collections::BTreeMap;

/// What eksctl writes user data from: a self-managed node group of its config file (`nodeGroups:`).
#[derive(Debug, Clone, Default)]
pub struct Eksctl {
    /// The node group's labels (eksctl adds `alpha.eksctl.io/cluster-name` and `alpha.eksctl.io/nodegroup-name`).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    /// `maxPodsPerNode`.
    pub max_pods: Option<u32>,
    /// `kubeletExtraConfig`.
    pub kubelet_extra: serde_json::Map<String, serde_json::Value>,
    /// `preBootstrapCommands`.
    pub pre_bootstrap_commands: Vec<String>,
    /// The MIME boundary (eksctl's is Go's random one; fixed in tests).
    pub boundary: String,
}

/// A random boundary as Go's `multipart.Writer` makes one: 30 random bytes in hex.
pub fn random_boundary() -> String {
    crate::process::random_hex(60)
}

/// A NodeConfig as eksctl marshals nodeadm's type: the empty structs are written too.
fn node_config(cluster: serde_json::Value, kubelet: serde_json::Value) -> String {
    sorted_yaml(&serde_json::json!({
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "metadata": {},
        "spec": {
            "cluster": cluster,
            "containerd": {},
            "instance": { "localStorage": {}, "network": {} },
            "kubelet": kubelet,
        },
    }))
}

impl Eksctl {
    /// The NodeConfig with the cluster, the kubelet config and the label and taint flags.
    pub fn node_config(&self, c: &crate::userdata::generate::ClusterFacts) -> String {
        let mut config = self.kubelet_extra.clone();
        config.insert("clusterDNS".into(), serde_json::json!([c.dns_ip]));
        let labels: Vec<String> = self.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut flags = vec![format!("--node-labels={}", labels.join(","))];
        if !self.taints.is_empty() {
            let taints: Vec<String> = self
                .taints
                .iter()
                .map(|t| format!("{}={}:{}", t.key, t.value, t.effect))
                .collect();
            flags.push(format!("--register-with-taints={}", taints.join(",")));
        }
        node_config(
            serde_json::json!({
                "apiServerEndpoint": c.endpoint,
                "certificateAuthority": c.ca_base64,
                "cidr": c.service_cidr,
                "name": c.name,
            }),
            serde_json::json!({ "config": config, "flags": flags }),
        )
    }

    /// The user data (as EC2 serves it; eksctl hands EC2 its base64).
    pub fn user_data(&self, c: &crate::userdata::generate::ClusterFacts) -> Vec<u8> {
        const SHELL: &str = "Content-Type: text/x-shellscript\r\nContent-Type: charset=\"us-ascii\"\r\n";
        const NODE_CONFIG: &str = "Content-Type: application/node.eks.aws\r\n";
        let b = &self.boundary;
        let mut parts: Vec<(&str, String)> = self
            .pre_bootstrap_commands
            .iter()
            .map(|cmd| (SHELL, format!("#!/bin/bash\n{cmd}")))
            .collect();
        parts.push((NODE_CONFIG, self.node_config(c)));
        if let Some(m) = self.max_pods {
            parts.push((
                NODE_CONFIG,
                node_config(serde_json::json!({}), serde_json::json!({ "config": { "maxPods": m } })),
            ));
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
Content-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata: {}\nspec:\n  \
cluster:\n    apiServerEndpoint: https://test.xxx.us-west-2.eks.amazonaws.com\n    certificateAuthority: dGVzdCBDQQ==\n    \
cidr: 10.100.0.0/16\n    name: al2023-test\n  containerd: {}\n  instance:\n    localStorage: {}\n    network: {}\n  \
kubelet:\n    config:\n      clusterDNS:\n      - 10.100.0.10\n    flags:\n    \
- --node-labels=alpha.eksctl.io/nodegroup-name=al2023-mng-test\n\n--//--\n";
        assert_eq!(got, want);
    }

    /// The framing of a group with commands, taints and maxPodsPerNode, CRLF where Go's writer puts it.
    #[test]
    fn commands_taints_and_max_pods_are_parts_and_flags_where_eksctl_puts_them() {
        let mut g = group();
        g.pre_bootstrap_commands = vec!["echo hi".into()];
        g.taints = vec![
            Taint::parse("special=true:NoSchedule").unwrap(),
            Taint::parse("dedicated:NoExecute").unwrap(),
        ];
        g.max_pods = Some(11);
        let ud = g.user_data(&facts());
        let text = String::from_utf8(ud.clone()).unwrap();
        assert!(
            text.starts_with(
                "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=//\r\n\r\n--//\r\n\
Content-Type: text/x-shellscript\r\nContent-Type: charset=\"us-ascii\"\r\n\r\n#!/bin/bash\necho hi\r\n--//\r\n"
            ),
            "{text:?}"
        );
        assert!(
            text.contains("    - --register-with-taints=special=true:NoSchedule,dedicated=:NoExecute\n\r\n--//\r\n"),
            "{text:?}"
        );
        assert!(
            text.ends_with(
                "spec:\n  cluster: {}\n  containerd: {}\n  instance:\n    localStorage: {}\n    network: {}\n  \
kubelet:\n    config:\n      maxPods: 11\n\r\n--//--\r\n"
            ),
            "{text:?}"
        );
        let kinds: Vec<Kind> = detect(&ud)
            .unwrap()
            .leaves()
            .into_iter()
            .map(|l| l.kind.clone())
            .collect();
        assert_eq!(kinds, vec![Kind::ShellScript, Kind::NodeConfig, Kind::NodeConfig]);
        assert_eq!(random_boundary().len(), 60);
    }
}
