//! What an EKS managed node group's instances get as user data on AL2023. EKS's code is not public; this follows
//! the EKS User Guide ("Customize managed nodes with launch templates") and the EKS AMI's own notes: without an
//! AMI in the launch template EKS adds an `application/node.eks.aws` part with the cluster's name, endpoint, CA
//! and service CIDR, `maxPods` (the smallest over the group's instance types) and `clusterDNS`, and
//! `--node-labels` with `eks.amazonaws.com/{nodegroup-image, capacityType, sourceLaunchTemplateVersion, nodegroup,
//! sourceLaunchTemplateId}` in one double-quoted flag (the form copies of it in public repositories show); with a
//! custom AMI it adds nothing. The group's API taints are not in it: EKS applies them after the node has joined.
//! Where EKS's part goes relative to the launch template's own parts is not published; maintainers' statements
//! (terraform-aws-eks #3186, #3334) and sassoftware/viya4-iac-aws#428 put it last, awslabs/amazon-eks-ami#1988
//! shows otherwise, so both orders are written.
use super::UserPart;

/// Where EKS's part goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PartOrder {
    /// The launch template's parts, then EKS's (its values override the user's where both set one).
    #[default]
    LaunchTemplateFirst,
    /// EKS's part, then the launch template's.
    EksFirst,
}

/// A managed node group: what EKS knows of it.
#[derive(Debug, Clone)]
pub struct EksManaged {
    /// EKS's own labels, then the group's (`generate::EksManaged::node_labels`).
    pub labels: Vec<(String, String)>,
    pub max_pods: u32,
    /// The launch template's own user data, as parts.
    pub launch_template: Vec<UserPart>,
    pub order: PartOrder,
    /// The launch template names an AMI: EKS adds nothing.
    pub custom_ami: bool,
}

impl EksManaged {
    /// EKS's NodeConfig.
    pub fn node_config(&self, c: &crate::userdata::generate::ClusterFacts) -> String {
        let labels: Vec<String> = self.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let flags = format!("    - \"--node-labels={}\"\n", labels.join(","));
        format!(
            "---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  cluster:\n    apiServerEndpoint: {}\n    \
certificateAuthority: {}\n    cidr: {}\n    name: {}\n  kubelet:\n    config:\n      maxPods: {}\n      clusterDNS:\n      \
- {}\n    flags:\n{flags}",
            c.endpoint, c.ca_base64, c.service_cidr, c.name, self.max_pods, c.dns_ip
        )
    }

    /// The merged user data: MIME, boundary `//`, the launch template's parts and EKS's in the group's order.
    pub fn user_data(&self, c: &crate::userdata::generate::ClusterFacts) -> Vec<u8> {
        let own: Vec<(&str, String)> = self
            .launch_template
            .iter()
            .map(|p| (p.content_type(), p.text().to_string()))
            .collect();
        let mut parts = Vec::new();
        let eks = (UserPart::NodeConfig(String::new()).content_type(), self.node_config(c));
        match (self.custom_ami, self.order) {
            (true, _) => parts.extend(own),
            (false, PartOrder::LaunchTemplateFirst) => {
                parts.extend(own);
                parts.push(eks);
            }
            (false, PartOrder::EksFirst) => {
                parts.push(eks);
                parts.extend(own);
            }
        }
        // Each body ends in a line end of its own, then the one before the next delimiter.
        let parts: Vec<(&str, String)> = parts
            .into_iter()
            .map(|(t, b)| {
                if b.ends_with('\n') {
                    (t, b)
                } else {
                    (t, format!("{b}\n"))
                }
            })
            .collect();
        super::lf_multipart(parts.iter().map(|(t, b)| (*t, b.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::userdata::format::{detect, Kind};

    fn facts() -> crate::userdata::generate::ClusterFacts {
        crate::userdata::generate::ClusterFacts {
            name: "demo".into(),
            endpoint: "https://172.20.0.1:6443".into(),
            ca_base64: "LS0tQ0EtLS0=".into(),
            dns_ip: "10.100.0.10".into(),
            region: "us-west-2".into(),
            service_cidr: "10.100.0.0/16".into(),
        }
    }

    fn group(order: PartOrder, custom_ami: bool) -> EksManaged {
        EksManaged {
            labels: vec![
                ("eks.amazonaws.com/nodegroup".into(), "ng".into()),
                ("team".into(), "a".into()),
            ],
            max_pods: 29,
            launch_template: vec![
                UserPart::NodeConfig("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n".into()),
                UserPart::Shell("#!/bin/bash\necho lt\n".into()),
            ],
            order,
            custom_ami,
        }
    }

    fn kinds(ud: &[u8]) -> Vec<Kind> {
        detect(ud)
            .unwrap()
            .leaves()
            .into_iter()
            .map(|l| l.kind.clone())
            .collect()
    }

    #[test]
    fn eks_part_goes_where_the_order_says_and_not_at_all_with_a_custom_ami() {
        let first = group(PartOrder::EksFirst, false).user_data(&facts());
        assert_eq!(
            kinds(&first),
            vec![Kind::NodeConfig, Kind::NodeConfig, Kind::ShellScript]
        );
        assert!(String::from_utf8(first)
            .unwrap()
            .contains("--//\nContent-Type: application/node.eks.aws\n\n---\n"));
        let last = String::from_utf8(group(PartOrder::LaunchTemplateFirst, false).user_data(&facts())).unwrap();
        assert!(
            last.ends_with("    - \"--node-labels=eks.amazonaws.com/nodegroup=ng,team=a\"\n\n--//--\n"),
            "{last}"
        );
        assert_eq!(
            kinds(last.as_bytes()),
            vec![Kind::NodeConfig, Kind::ShellScript, Kind::NodeConfig]
        );
        let custom = group(PartOrder::EksFirst, true).user_data(&facts());
        assert_eq!(kinds(&custom), vec![Kind::NodeConfig, Kind::ShellScript]);
    }

    #[test]
    fn eks_node_config_carries_the_cluster_max_pods_dns_and_labels() {
        let doc: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&group(PartOrder::EksFirst, false).node_config(&facts())).unwrap();
        assert_eq!(doc["spec"]["cluster"]["cidr"].as_str(), Some("10.100.0.0/16"));
        assert_eq!(doc["spec"]["kubelet"]["config"]["maxPods"].as_u64(), Some(29));
        assert_eq!(
            doc["spec"]["kubelet"]["config"]["clusterDNS"][0].as_str(),
            Some("10.100.0.10")
        );
        assert_eq!(
            doc["spec"]["kubelet"]["flags"][0].as_str(),
            Some("--node-labels=eks.amazonaws.com/nodegroup=ng,team=a")
        );
    }
}
