//! The fake EC2 world's VPC: one per scenario, shared by its instances, and reported the same way by IMDS (the
//! interface's `vpc-*`/`subnet-*` leaves), EC2 DescribeInstances (`vpcId`, `subnetId`) and EKS DescribeCluster
//! (`resourcesVpcConfig`).
use crate::eks::network::Network;
use ipnet::{Ipv4Net, Ipv6Net};
use sha2::{Digest, Sha256};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vpc {
    pub vpc_id: String,
    pub subnet_id: String,
    /// Primary first.
    pub ipv4_cidrs: Vec<Ipv4Net>,
    pub subnet_ipv4: Ipv4Net,
    pub ipv6_cidrs: Vec<Ipv6Net>,
    pub subnet_ipv6: Option<Ipv6Net>,
}

impl Vpc {
    /// The VPC of a scenario's network. Its ids are derived from `seed` (the EKS cluster name), so every node of
    /// a scenario, and every run of it, sees the same `vpc-…` and `subnet-…`.
    pub fn new(seed: &str, network: &Network) -> Arc<Self> {
        let id = |kind: &str| {
            let digest = Sha256::digest(format!("nodejoin {kind} {seed}"));
            format!("{kind}-0{}", &hex::encode(digest)[..16])
        };
        Arc::new(Self {
            vpc_id: id("vpc"),
            subnet_id: id("subnet"),
            ipv4_cidrs: network.vpc_cidrs().to_vec(),
            subnet_ipv4: network.subnet_cidr(),
            ipv6_cidrs: network.vpc_ipv6_cidrs().to_vec(),
            subnet_ipv6: network.subnet_ipv6_cidr(),
        })
    }

    /// The VPC leaves IMDS serves under `network/interfaces/macs/<mac>/`, as the real service names them.
    /// Multi-valued leaves are newline-separated. `ipv6s` (the interface's own IPv6 addresses) is not among them:
    /// a node container holds no IPv6 address, and real IMDS has no `ipv6s` for an interface without one, even
    /// in a dual-stack subnet.
    pub fn interface_leaves(&self) -> Vec<(&'static str, String)> {
        let lines = |v: Vec<String>| v.join("\n");
        let mut leaves = vec![
            ("vpc-id", self.vpc_id.clone()),
            ("subnet-id", self.subnet_id.clone()),
            (
                "vpc-ipv4-cidr-block",
                self.ipv4_cidrs.first().map(|c| c.to_string()).unwrap_or_default(),
            ),
            (
                "vpc-ipv4-cidr-blocks",
                lines(self.ipv4_cidrs.iter().map(|c| c.to_string()).collect()),
            ),
            ("subnet-ipv4-cidr-block", self.subnet_ipv4.to_string()),
        ];
        if !self.ipv6_cidrs.is_empty() {
            leaves.push((
                "vpc-ipv6-cidr-blocks",
                lines(self.ipv6_cidrs.iter().map(|c| c.to_string()).collect()),
            ));
        }
        if let Some(s) = self.subnet_ipv6 {
            leaves.push(("subnet-ipv6-cidr-blocks", s.to_string()));
        }
        leaves
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn network(yaml: &str) -> Network {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn ids_are_stable_per_seed_and_shaped_like_aws() {
        let n = Network::default();
        let a = Vpc::new("demo", &n);
        assert_eq!(a, Vpc::new("demo", &n));
        assert_ne!(a.vpc_id, Vpc::new("other", &n).vpc_id);
        for (id, kind) in [(&a.vpc_id, "vpc-0"), (&a.subnet_id, "subnet-0")] {
            let hex = id.strip_prefix(kind).unwrap();
            assert_eq!(hex.len(), 16, "{id}");
            assert!(hex.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        }
    }

    #[test]
    fn leaves_follow_the_network() {
        let v = Vpc::new("demo", &network("vpcCidrs: [10.0.0.0/16, 100.64.0.0/16]"));
        let leaves: std::collections::BTreeMap<_, _> = v.interface_leaves().into_iter().collect();
        assert_eq!(leaves["vpc-ipv4-cidr-block"], "10.0.0.0/16");
        assert_eq!(leaves["vpc-ipv4-cidr-blocks"], "10.0.0.0/16\n100.64.0.0/16");
        assert_eq!(leaves["subnet-ipv4-cidr-block"], "10.0.0.0/19");
        assert_eq!(leaves["vpc-id"], v.vpc_id);
        assert!(!leaves.contains_key("vpc-ipv6-cidr-blocks"));
        let v = Vpc::new("demo", &network("vpcIpv6Cidrs: [\"2600:1f14:abc:de00::/56\"]"));
        let leaves: std::collections::BTreeMap<_, _> = v.interface_leaves().into_iter().collect();
        assert_eq!(leaves["vpc-ipv6-cidr-blocks"], "2600:1f14:abc:de00::/56");
        assert_eq!(leaves["subnet-ipv6-cidr-blocks"], "2600:1f14:abc:de00::/64");
        assert!(!leaves.contains_key("ipv6s"));
    }
}
