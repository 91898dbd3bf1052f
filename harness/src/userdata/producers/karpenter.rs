//! Karpenter's AL2023 user data, following aws/karpenter-provider-aws at 1d927085 (2026-08-21):
//! `pkg/providers/amifamily/bootstrap/nodeadm.go` (the generated NodeConfig, how the EC2NodeClass's own
//! `userData` is read), `bootstrap/mime/mime.go` (the framing: boundary `//`, one `Content-Type` header per part,
//! every `\r` removed), `amifamily/resolver.go` (taint order, clusterDNS) and `launchtemplate/launchtemplate.go`
//! (the capacity-type and do-not-sync-taints labels); goldens `launchtemplate/testdata/al2023_*`.
use super::{label_list, sorted_yaml, Taint, UserPart};
use std::collections::BTreeMap;

/// The taint Karpenter adds to every node it launches and removes once the node has registered.
pub const UNREGISTERED: &str = "karpenter.sh/unregistered";

/// What Karpenter writes user data from: a NodePool, an EC2NodeClass and the instance type it picked.
#[derive(Debug, Clone, Default)]
pub struct Karpenter {
    pub nodepool: String,
    pub nodeclass: String,
    /// `on-demand`, `spot` or `reserved`.
    pub capacity_type: String,
    /// The NodePool template's labels (and single-value requirements).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    /// The EC2NodeClass's `spec.kubelet`, as given.
    pub kubelet: serde_json::Map<String, serde_json::Value>,
    /// maxPods for the instance type (used when `kubelet` has none).
    pub max_pods: u32,
    pub cluster_dns: String,
    /// `instanceStorePolicy: RAID0`.
    pub raid0: bool,
    /// The EC2NodeClass's `spec.userData`.
    pub user_data: Option<String>,
}

/// Labels a kubelet may not set on itself; Karpenter drops them from `--node-labels` (`RejectForbiddenLabels`).
fn forbidden(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|d| domain == *d || domain.ends_with(&format!(".{d}")))
}

impl Karpenter {
    /// Every `--node-labels` entry, sorted.
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> = self.labels.clone();
        l.insert("karpenter.sh/nodepool".into(), self.nodepool.clone());
        l.insert("karpenter.k8s.aws/ec2nodeclass".into(), self.nodeclass.clone());
        l.insert("karpenter.sh/capacity-type".into(), self.capacity_type.clone());
        l.insert("karpenter.sh/do-not-sync-taints".into(), "true".into());
        l.retain(|k, _| !forbidden(k));
        l
    }

    /// The taints it registers with: the NodePool's, its startup taints, then `karpenter.sh/unregistered`.
    pub fn register_with_taints(&self) -> Vec<Taint> {
        let mut t: Vec<Taint> = self.taints.iter().chain(&self.startup_taints).cloned().collect();
        if !t.iter().any(|t| t.key == UNREGISTERED) {
            t.push(Taint {
                key: UNREGISTERED.into(),
                value: String::new(),
                effect: "NoExecute".into(),
            });
        }
        t
    }

    /// Karpenter's own NodeConfig, with its comment line.
    pub fn node_config(&self, c: &crate::userdata::generate::ClusterFacts) -> String {
        let mut config = self.kubelet.clone();
        config.entry("maxPods").or_insert_with(|| self.max_pods.into());
        config
            .entry("clusterDNS")
            .or_insert_with(|| serde_json::json!([self.cluster_dns]));
        config.insert(
            "registerWithTaints".into(),
            self.register_with_taints().iter().map(Taint::to_json).collect(),
        );
        let local_storage = if self.raid0 {
            serde_json::json!({ "strategy": "RAID0" })
        } else {
            serde_json::json!({})
        };
        let doc = serde_json::json!({
            "apiVersion": "node.eks.aws/v1alpha1",
            "kind": "NodeConfig",
            "metadata": {},
            "spec": {
                "cluster": {
                    "apiServerEndpoint": c.endpoint,
                    "certificateAuthority": c.ca_base64,
                    "cidr": c.service_cidr,
                    "name": c.name,
                },
                "containerd": {},
                "instance": { "localStorage": local_storage },
                "kubelet": {
                    "config": config,
                    "flags": [format!("--node-labels=\"{}\"", label_list(&self.node_labels()))],
                },
            },
        });
        format!("# Karpenter Generated NodeConfig\n{}", sorted_yaml(&doc))
    }

    /// The whole user data: the EC2NodeClass's parts in their order, then Karpenter's NodeConfig last.
    pub fn user_data(&self, c: &crate::userdata::generate::ClusterFacts) -> Result<Vec<u8>, String> {
        let mut parts: Vec<(String, String)> = match &self.user_data {
            Some(ud) => custom_parts(ud)?,
            None => Vec::new(),
        };
        parts.push((
            UserPart::NodeConfig(String::new()).content_type().into(),
            self.node_config(c),
        ));
        Ok(super::lf_multipart(parts.iter().map(|(t, c)| (t.as_str(), c.as_str()))))
    }
}

/// The EC2NodeClass's `userData` as Karpenter reads it: MIME (its parts' content types and bodies, every other
/// header dropped), else one NodeConfig part when it is a YAML mapping, else one shell part.
fn custom_parts(ud: &str) -> Result<Vec<(String, String)>, String> {
    let trimmed = ud.trim();
    if trimmed.starts_with("MIME-Version:") || trimmed.starts_with("Content-Type:") {
        return mime_parts(ud);
    }
    let part = match serde_yaml_ng::from_str::<serde_yaml_ng::Value>(ud) {
        Ok(v) if v.is_mapping() => UserPart::NodeConfig(ud.to_string()),
        _ => UserPart::Shell(ud.to_string()),
    };
    Ok(vec![(part.content_type().into(), part.text().into())])
}

/// A MIME document's parts as (content type, body), the line ending before each boundary removed, as Go's
/// multipart reader returns them.
fn mime_parts(ud: &str) -> Result<Vec<(String, String)>, String> {
    let text = ud.replace("\r\n", "\n");
    let (head, body) = text
        .split_once("\n\n")
        .ok_or("EC2NodeClass userData: MIME without a blank line after its headers")?;
    let boundary = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim().eq_ignore_ascii_case("content-type").then_some(value)?;
            let b = value.split(';').find_map(|p| p.trim().strip_prefix("boundary="))?;
            Some(b.trim_matches('"').to_string())
        })
        .ok_or("EC2NodeClass userData: MIME without a multipart boundary")?;
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    // The first delimiter may open the body without a line before it.
    let body = format!("\n{body}");
    for chunk in body.split(&format!("\n{delimiter}")).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let chunk = chunk.strip_prefix('\n').unwrap_or(chunk);
        let (headers, content) = chunk.split_once("\n\n").unwrap_or((chunk, ""));
        let content_type = headers
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.trim()
                    .eq_ignore_ascii_case("content-type")
                    .then(|| value.trim().to_string())
            })
            .unwrap_or_else(|| "text/plain".into());
        parts.push((content_type, content.to_string()));
    }
    if parts.is_empty() {
        return Err(format!("EC2NodeClass userData: no part delimited by {delimiter}"));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userdata::format::{detect, Kind};

    fn facts() -> crate::userdata::generate::ClusterFacts {
        crate::userdata::generate::ClusterFacts {
            name: "test-cluster".into(),
            endpoint: "https://test-cluster".into(),
            ca_base64: "Y2EtYnVuZGxlCg==".into(),
            dns_ip: "10.0.100.10".into(),
            region: "us-west-2".into(),
            service_cidr: "10.100.0.0/16".into(),
        }
    }

    fn karpenter() -> Karpenter {
        Karpenter {
            nodepool: "default".into(),
            nodeclass: "default".into(),
            capacity_type: "on-demand".into(),
            labels: BTreeMap::from([("testing/cluster".to_string(), "unspecified".to_string())]),
            max_pods: 110,
            cluster_dns: "10.0.100.10".into(),
            ..Default::default()
        }
    }

    /// The shape of Karpenter's golden `al2023_userdata_unmerged.golden`, every byte.
    #[test]
    fn unmerged_matches_karpenters_golden() {
        let got = String::from_utf8(karpenter().user_data(&facts()).unwrap()).unwrap();
        let want = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n\
Content-Type: application/node.eks.aws\n\n# Karpenter Generated NodeConfig\napiVersion: node.eks.aws/v1alpha1\n\
kind: NodeConfig\nmetadata: {}\nspec:\n  cluster:\n    apiServerEndpoint: https://test-cluster\n    \
certificateAuthority: Y2EtYnVuZGxlCg==\n    cidr: 10.100.0.0/16\n    name: test-cluster\n  containerd: {}\n  \
instance:\n    localStorage: {}\n  kubelet:\n    config:\n      clusterDNS:\n      - 10.0.100.10\n      maxPods: 110\n      \
registerWithTaints:\n      - effect: NoExecute\n        key: karpenter.sh/unregistered\n    flags:\n    - \
--node-labels=\"karpenter.k8s.aws/ec2nodeclass=default,karpenter.sh/capacity-type=on-demand,\
karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=default,testing/cluster=unspecified\"\n\n--//--\n";
        assert_eq!(got, want);
    }

    #[test]
    fn the_nodeclass_parts_come_first_in_their_order() {
        let mut k = karpenter();
        k.user_data = Some(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: application/node.eks.aws\n\n\
apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n--//\n\
Content-Type: text/x-shellscript; charset=\"us-ascii\"\nContent-Transfer-Encoding: 7bit\n\n#!/bin/bash\necho hi\n--//--\n"
                .into(),
        );
        let ud = k.user_data(&facts()).unwrap();
        let text = String::from_utf8(ud.clone()).unwrap();
        assert!(!text.contains("Content-Transfer-Encoding"), "{text}");
        let leaves = detect(&ud)
            .unwrap()
            .leaves()
            .into_iter()
            .map(|l| l.kind.clone())
            .collect::<Vec<_>>();
        assert_eq!(leaves, vec![Kind::NodeConfig, Kind::ShellScript, Kind::NodeConfig]);
        assert!(text.ends_with("karpenter.sh/nodepool=default,testing/cluster=unspecified\"\n\n--//--\n"));
    }

    #[test]
    fn plain_nodeclass_user_data_is_a_shell_or_nodeconfig_part() {
        let mut k = karpenter();
        k.user_data = Some("#!/bin/bash\necho \"Hello, AL2023!\"\n".into());
        let text = String::from_utf8(k.user_data(&facts()).unwrap()).unwrap();
        assert!(text.starts_with(
            "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\n\
Content-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho \"Hello, AL2023!\"\n\n--//\n"
        ));
        k.user_data = Some("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n".into());
        let ud = k.user_data(&facts()).unwrap();
        assert_eq!(detect(&ud).unwrap().leaves().len(), 2);
    }

    #[test]
    fn taints_keep_their_order_and_labels_lose_the_kubelet_forbidden_ones() {
        let mut k = karpenter();
        k.taints = vec![Taint::parse("dedicated=gpu:NoSchedule").unwrap()];
        k.startup_taints = vec![Taint::parse("example.com/startup:NoExecute").unwrap()];
        k.labels.insert("node.kubernetes.io/lifecycle".into(), "x".into());
        k.labels.insert("team".into(), "ml".into());
        let keys: Vec<String> = k.register_with_taints().into_iter().map(|t| t.key).collect();
        assert_eq!(keys, ["dedicated", "example.com/startup", UNREGISTERED]);
        let labels = k.node_labels();
        assert!(!labels.contains_key("node.kubernetes.io/lifecycle"));
        assert_eq!(labels["team"], "ml");
        let doc = k.node_config(&facts());
        assert!(
            doc.contains("      - effect: NoSchedule\n        key: dedicated\n        value: gpu\n"),
            "{doc}"
        );
    }
}
