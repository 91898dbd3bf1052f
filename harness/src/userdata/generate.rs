//! User data written the way each kind of EKS node is launched, from the documented formats (our own code):
//! EKS managed node groups (MIME with a shell part calling bootstrap.sh with the managed labels), CloudFormation
//! self-managed groups (a script ending in `cfn-signal`), eksctl (base64(gzip(`#cloud-config`)) with
//! `write_files` and `runcmd`) and AL2023 nodeadm (MIME `application/node.eks.aws` NodeConfig parts).
use base64::Engine;
use mail_builder::headers::content_type::ContentType;
use mail_builder::mime::{BodyPart, MimePart};
use std::collections::BTreeMap;
use std::io::Write;

/// What every generator needs to know about the cluster (what EKS or the template fills in).
#[derive(Debug, Clone)]
pub struct ClusterFacts {
    pub name: String,
    pub endpoint: String,
    pub ca_base64: String,
    pub dns_ip: String,
    pub region: String,
    /// The service CIDR (nodeadm's `spec.cluster.cidr`).
    pub service_cidr: String,
}

/// Labels EKS adds to every node of a managed node group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EksManaged {
    pub nodegroup: String,
    pub ami_id: String,
    /// `ON_DEMAND` or `SPOT`.
    pub capacity_type: String,
    pub launch_template_id: String,
    pub launch_template_version: String,
    pub max_pods: u32,
    /// Labels the node group declares (`labels:` in the CreateNodegroup call).
    pub labels: BTreeMap<String, String>,
    /// Taints the node group declares, as `key=value:Effect`.
    pub taints: Vec<String>,
}

impl EksManaged {
    /// Every `--node-labels` entry, EKS's own first, then the group's.
    pub fn node_labels(&self) -> Vec<(String, String)> {
        let mut l = vec![
            ("eks.amazonaws.com/nodegroup-image".into(), self.ami_id.clone()),
            ("eks.amazonaws.com/capacityType".into(), self.capacity_type.clone()),
            (
                "eks.amazonaws.com/sourceLaunchTemplateVersion".into(),
                self.launch_template_version.clone(),
            ),
            ("eks.amazonaws.com/nodegroup".into(), self.nodegroup.clone()),
            (
                "eks.amazonaws.com/sourceLaunchTemplateId".into(),
                self.launch_template_id.clone(),
            ),
        ];
        l.extend(self.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        l
    }
}

/// MIME multipart with one `text/x-shellscript` part, as EKS injects for a managed node group.
pub fn eks_managed(c: &ClusterFacts, m: &EksManaged) -> Vec<u8> {
    let labels: Vec<String> = m.node_labels().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut kubelet_args = format!("--node-labels={}", labels.join(","));
    if !m.taints.is_empty() {
        kubelet_args.push_str(&format!(" --register-with-taints={}", m.taints.join(",")));
    }
    kubelet_args.push_str(&format!(" --max-pods={}", m.max_pods));
    let script = format!(
        "#!/bin/bash\nset -ex\nB64_CLUSTER_CA={ca}\nAPI_SERVER_URL={endpoint}\nK8S_CLUSTER_DNS_IP={dns}\n\
/etc/eks/bootstrap.sh {name} --kubelet-extra-args '{kubelet_args}' --b64-cluster-ca $B64_CLUSTER_CA \
--apiserver-endpoint $API_SERVER_URL --dns-cluster-ip $K8S_CLUSTER_DNS_IP --use-max-pods false\n",
        ca = c.ca_base64,
        endpoint = c.endpoint,
        dns = c.dns_ip,
        name = c.name,
    );
    multipart(vec![text_part("text/x-shellscript", script, PartEncoding::Plain)])
}

/// A CloudFormation-launched self-managed node: the template's user data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudFormation {
    pub stack: String,
    /// The AutoScalingGroup's logical id the signal is for.
    pub resource: String,
    /// `${BootstrapArguments}`, pasted verbatim after the cluster name.
    pub bootstrap_arguments: String,
}

/// `bootstrap.sh ${ClusterName} ${BootstrapArguments}` then `cfn-signal --exit-code $?`.
pub fn cloudformation(c: &ClusterFacts, cf: &CloudFormation) -> Vec<u8> {
    format!(
        "#!/bin/bash\nset -o xtrace\n/etc/eks/bootstrap.sh {} {}\n/opt/aws/bin/cfn-signal --exit-code $? \\\n  --stack {} \\\n  --resource {} \\\n  --region {}\n",
        c.name, cf.bootstrap_arguments, cf.stack, cf.resource, c.region
    )
    .into_bytes()
}

/// An eksctl self-managed node group.
#[derive(Debug, Clone, PartialEq)]
pub struct Eksctl {
    pub nodegroup: String,
    pub labels: BTreeMap<String, String>,
    /// `key=value:Effect`.
    pub taints: Vec<String>,
    pub max_pods: Option<u32>,
    /// A partial KubeletConfiguration merged over the node's.
    pub kubelet_extra: serde_json::Value,
}

/// Where the eksctl-style files go in the node.
pub const EKSCTL_ENV: &str = "/etc/eksctl/kubelet.env";
pub const EKSCTL_EXTRA_JSON: &str = "/etc/eksctl/kubelet-extra.json";
pub const EKSCTL_HELPER: &str = "/var/lib/cloud/scripts/eksctl/bootstrap.helper.sh";

impl Eksctl {
    /// `kubelet.env`, as eksctl writes it (labels include eksctl's own two).
    pub fn kubelet_env(&self, c: &ClusterFacts) -> BTreeMap<String, String> {
        let mut labels = vec![
            format!("alpha.eksctl.io/cluster-name={}", c.name),
            format!("alpha.eksctl.io/nodegroup-name={}", self.nodegroup),
        ];
        labels.extend(self.labels.iter().map(|(k, v)| format!("{k}={v}")));
        let mut env = BTreeMap::from([
            ("CLUSTER_NAME".to_string(), c.name.clone()),
            ("API_SERVER_URL".to_string(), c.endpoint.clone()),
            ("B64_CLUSTER_CA".to_string(), c.ca_base64.clone()),
            ("CLUSTER_DNS".to_string(), c.dns_ip.clone()),
            ("CONTAINER_RUNTIME".to_string(), "containerd".to_string()),
            ("NODE_LABELS".to_string(), labels.join(",")),
            ("NODE_TAINTS".to_string(), self.taints.join(",")),
        ]);
        if let Some(m) = self.max_pods {
            env.insert("MAX_PODS".into(), m.to_string());
        }
        env
    }
}

/// The `#cloud-config` document (before gzip and base64).
pub fn eksctl_cloud_config(c: &ClusterFacts, e: &Eksctl, helper: &str) -> String {
    let env: String = e.kubelet_env(c).iter().map(|(k, v)| format!("{k}={v}\n")).collect();
    let extra = serde_json::to_string_pretty(&e.kubelet_extra).unwrap_or_else(|_| "{}".into());
    let doc = serde_json::json!({
        "write_files": [
            { "path": EKSCTL_ENV, "permissions": "0644", "owner": "root:root", "content": env },
            { "path": EKSCTL_EXTRA_JSON, "permissions": "0644", "owner": "root:root", "content": extra },
            { "path": EKSCTL_HELPER, "permissions": "0755", "owner": "root:root", "content": helper },
        ],
        "runcmd": [[EKSCTL_HELPER]],
    });
    // JSON is YAML; serde_yaml keeps the multi-line file contents readable.
    let yaml = serde_yaml_ng::to_string(&doc).unwrap_or_default();
    format!("#cloud-config\n{yaml}")
}

/// The eksctl form: base64(gzip(`#cloud-config`)), which is what RunInstances receives.
pub fn eksctl(c: &ClusterFacts, e: &Eksctl, helper: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(gzip(eksctl_cloud_config(c, e, helper).as_bytes()))
}

/// How one MIME part's content is wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PartEncoding {
    #[default]
    Plain,
    Base64,
    /// gzip, then base64 as the transfer encoding (MIME cannot carry raw binary reliably).
    Gzip,
}

pub const NODECONFIG_API_VERSION: &str = "node.eks.aws/v1alpha1";

/// A NodeConfig document around `spec`.
pub fn node_config(spec: serde_yaml_ng::Value) -> serde_yaml_ng::Value {
    let mut doc = serde_yaml_ng::Mapping::new();
    doc.insert("apiVersion".into(), NODECONFIG_API_VERSION.into());
    doc.insert("kind".into(), "NodeConfig".into());
    doc.insert("spec".into(), spec);
    serde_yaml_ng::Value::Mapping(doc)
}

/// The NodeConfig EKS managed node groups and Karpenter put first in AL2023 user data: the cluster's name,
/// endpoint, CA (base64 of the PEM) and service CIDR, so nodeadm never calls DescribeCluster. `omit` names
/// `spec.cluster` keys to leave out.
pub fn nodeadm_cluster_config(c: &ClusterFacts, omit: &[&str]) -> serde_yaml_ng::Value {
    let mut cluster = serde_yaml_ng::Mapping::new();
    for (k, v) in [
        ("name", &c.name),
        ("apiServerEndpoint", &c.endpoint),
        ("certificateAuthority", &c.ca_base64),
        ("cidr", &c.service_cidr),
    ] {
        if !omit.contains(&k) {
            cluster.insert(k.into(), v.as_str().into());
        }
    }
    let mut spec = serde_yaml_ng::Mapping::new();
    spec.insert("cluster".into(), serde_yaml_ng::Value::Mapping(cluster));
    node_config(serde_yaml_ng::Value::Mapping(spec))
}

/// AL2023 user data: one `application/node.eks.aws` part per NodeConfig document, in order (nodeadm merges them).
pub fn nodeadm(configs: &[(serde_yaml_ng::Value, PartEncoding)]) -> Vec<u8> {
    let parts = configs
        .iter()
        .map(|(doc, enc)| {
            let text = serde_yaml_ng::to_string(doc).unwrap_or_default();
            text_part("application/node.eks.aws", text, *enc)
        })
        .collect();
    multipart(parts)
}

/// A `multipart/mixed` document with one part: how a plain user-data file is wrapped in MIME (`encode: [mime]`).
pub fn single_part(content_type: &'static str, text: String, enc: PartEncoding) -> Vec<u8> {
    multipart(vec![text_part(content_type, text, enc)])
}

fn text_part(content_type: &'static str, text: String, enc: PartEncoding) -> MimePart<'static> {
    match enc {
        // Raw 7bit keeps scripts readable; cloud-init reads them as they are.
        PartEncoding::Plain => {
            MimePart::new(ContentType::new(content_type), BodyPart::Text(text.into())).transfer_encoding("7bit")
        }
        PartEncoding::Base64 => base64_part(content_type, text.as_bytes()),
        PartEncoding::Gzip => base64_part(content_type, &gzip(text.as_bytes())),
    }
}

fn base64_part(content_type: &'static str, bytes: &[u8]) -> MimePart<'static> {
    let mut encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
    // 76-column lines, as MIME asks.
    let mut wrapped = String::with_capacity(encoded.len() + encoded.len() / 76 * 2);
    while !encoded.is_empty() {
        let rest = encoded.split_off(encoded.len().min(76));
        wrapped.push_str(&encoded);
        wrapped.push_str("\r\n");
        encoded = rest;
    }
    MimePart::new(ContentType::new(content_type), BodyPart::Text(wrapped.into())).transfer_encoding("base64")
}

/// `MIME-Version` plus a `multipart/mixed` body with the boundary EKS uses (`//`).
fn multipart(parts: Vec<MimePart<'static>>) -> Vec<u8> {
    let root = MimePart::new(
        ContentType::new("multipart/mixed").attribute("boundary", "//"),
        BodyPart::Multipart(parts),
    );
    let mut out = b"MIME-Version: 1.0\r\n".to_vec();
    root.write_part(&mut out);
    out
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let _ = e.write_all(bytes);
    e.finish().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userdata::format::{detect, Kind, Layer};

    fn facts() -> ClusterFacts {
        ClusterFacts {
            name: "demo".into(),
            endpoint: "https://172.20.0.1:6443".into(),
            ca_base64: "LS0tQ0EtLS0=".into(),
            dns_ip: "10.100.0.10".into(),
            service_cidr: "10.100.0.0/16".into(),
            region: "us-west-2".into(),
        }
    }

    /// Splits a shell line into words, honouring single quotes (enough for what the generators write).
    fn words(line: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = String::new();
        let mut quoted = false;
        for ch in line.chars() {
            match ch {
                '\'' => quoted = !quoted,
                ' ' if !quoted => {
                    if !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                }
                c => cur.push(c),
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
        out
    }

    fn flag(words: &[String], name: &str) -> Option<String> {
        words
            .iter()
            .position(|w| w == name)
            .and_then(|i| words.get(i + 1))
            .cloned()
    }

    #[test]
    fn eks_managed_round_trip() {
        let m = EksManaged {
            nodegroup: "ng-a".into(),
            ami_id: "ami-0123".into(),
            capacity_type: "SPOT".into(),
            launch_template_id: "lt-0abc".into(),
            launch_template_version: "3".into(),
            max_pods: 29,
            labels: BTreeMap::from([("team".to_string(), "a".to_string())]),
            taints: vec!["dedicated=a:NoSchedule".into()],
        };
        let ud = eks_managed(&facts(), &m);
        let parsed = detect(&ud).unwrap();
        let leaves = parsed.leaves();
        assert_eq!(leaves.len(), 1, "{parsed}");
        assert_eq!(leaves[0].kind, Kind::ShellScript);
        assert_eq!(leaves[0].content_type.as_deref(), Some("text/x-shellscript"));
        let script = String::from_utf8(leaves[0].content.clone()).unwrap();
        let call = script.lines().find(|l| l.starts_with("/etc/eks/bootstrap.sh")).unwrap();
        let w = words(call);
        assert_eq!(w[1], "demo");
        assert_eq!(flag(&w, "--use-max-pods").as_deref(), Some("false"));
        let extra = words(&flag(&w, "--kubelet-extra-args").unwrap());
        let labels: Vec<(String, String)> = extra[0]
            .strip_prefix("--node-labels=")
            .unwrap()
            .split(',')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        assert_eq!(labels, m.node_labels());
        assert_eq!(extra[1], "--register-with-taints=dedicated=a:NoSchedule");
        assert_eq!(extra[2], "--max-pods=29");
        assert!(script.contains("API_SERVER_URL=https://172.20.0.1:6443\n"));
    }

    #[test]
    fn cloudformation_round_trip() {
        let cf = CloudFormation {
            stack: "nodes".into(),
            resource: "NodeGroup".into(),
            bootstrap_arguments: "--kubelet-extra-args '--node-labels=a=b'".into(),
        };
        let ud = cloudformation(&facts(), &cf);
        let p = detect(&ud).unwrap();
        assert_eq!(p.kind, Kind::ShellScript);
        let text = String::from_utf8(ud).unwrap();
        let joined = text.replace("\\\n", " ");
        let signal = joined.lines().find(|l| l.contains("cfn-signal")).unwrap();
        let w = words(signal);
        assert_eq!(flag(&w, "--exit-code").as_deref(), Some("$?"));
        assert_eq!(flag(&w, "--stack").as_deref(), Some("nodes"));
        assert_eq!(flag(&w, "--resource").as_deref(), Some("NodeGroup"));
        assert_eq!(flag(&w, "--region").as_deref(), Some("us-west-2"));
        let call = words(joined.lines().find(|l| l.starts_with("/etc/eks/bootstrap.sh")).unwrap());
        assert_eq!(call[1..], ["demo", "--kubelet-extra-args", "--node-labels=a=b"]);
    }

    #[test]
    fn eksctl_round_trip() {
        let e = Eksctl {
            nodegroup: "ng-1".into(),
            labels: BTreeMap::from([("role".to_string(), "workers".to_string())]),
            taints: vec!["gpu=true:NoExecute".into()],
            max_pods: Some(20),
            kubelet_extra: serde_json::json!({ "kubeReserved": { "cpu": "150m" } }),
        };
        let api = eksctl(&facts(), &e, "#!/bin/bash\necho helper\n");
        let p = detect(api.as_bytes()).unwrap();
        assert_eq!(p.layers, vec![Layer::Base64, Layer::Gzip]);
        assert_eq!(p.kind, Kind::CloudConfig);
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_slice(&p.content).unwrap();
        let files = doc["write_files"].as_sequence().unwrap();
        let content = |path: &str| {
            files
                .iter()
                .find(|f| f["path"].as_str() == Some(path))
                .and_then(|f| f["content"].as_str())
                .unwrap()
                .to_string()
        };
        let env: BTreeMap<String, String> = content(EKSCTL_ENV)
            .lines()
            .map(|l| {
                let (k, v) = l.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect();
        assert_eq!(env, e.kubelet_env(&facts()));
        assert!(env["NODE_LABELS"].contains("alpha.eksctl.io/nodegroup-name=ng-1"));
        let extra: serde_json::Value = serde_json::from_str(&content(EKSCTL_EXTRA_JSON)).unwrap();
        assert_eq!(extra, e.kubelet_extra);
        assert_eq!(content(EKSCTL_HELPER), "#!/bin/bash\necho helper\n");
        assert_eq!(doc["runcmd"][0][0].as_str(), Some(EKSCTL_HELPER));
    }

    #[test]
    fn nodeadm_cluster_part_carries_what_nodeadm_requires_unless_omitted() {
        let doc = nodeadm_cluster_config(&facts(), &[]);
        assert_eq!(doc["apiVersion"].as_str(), Some(NODECONFIG_API_VERSION));
        assert_eq!(doc["kind"].as_str(), Some("NodeConfig"));
        let cluster = &doc["spec"]["cluster"];
        assert_eq!(cluster["name"].as_str(), Some("demo"));
        assert_eq!(cluster["cidr"].as_str(), Some("10.100.0.0/16"));
        assert_eq!(
            cluster["certificateAuthority"].as_str(),
            Some(facts().ca_base64.as_str())
        );
        assert_eq!(cluster["apiServerEndpoint"].as_str(), Some(facts().endpoint.as_str()));
        let without = nodeadm_cluster_config(&facts(), &["cidr"]);
        assert!(without["spec"]["cluster"].get("cidr").is_none());
        assert!(without["spec"]["cluster"].get("name").is_some());
    }

    #[test]
    fn nodeadm_round_trip_in_every_encoding() {
        let a: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    name: demo\n    cidr: 10.100.0.0/16\n",
        )
        .unwrap();
        let b: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags: [\"--node-labels=x=y\"]\n",
        )
        .unwrap();
        let configs = vec![
            (a.clone(), PartEncoding::Plain),
            (b.clone(), PartEncoding::Base64),
            (a.clone(), PartEncoding::Gzip),
        ];
        let p = detect(&nodeadm(&configs)).unwrap();
        let leaves = p.leaves();
        assert_eq!(leaves.len(), 3, "{p}");
        assert_eq!(leaves[1].layers, vec![Layer::Base64]);
        assert_eq!(leaves[2].layers, vec![Layer::Base64, Layer::Gzip]);
        for (leaf, (doc, _)) in leaves.iter().zip(&configs) {
            assert_eq!(leaf.kind, Kind::NodeConfig);
            let back: serde_yaml_ng::Value = serde_yaml_ng::from_slice(&leaf.content).unwrap();
            assert_eq!(&back, doc);
        }
    }
}
