//! `cluster.network`: the VPC a scenario's instances live in, as IMDS, EC2 and EKS report it.
//!
//! The declared VPC is independent of the Docker network the node containers really sit on, so a scenario can
//! choose it (and with it which branch of the cluster-DNS fallback a bootstrap takes). A node's `local-ipv4`
//! stays its container's real address, because the API server and the harness must reach its kubelet; so that
//! address does not lie in the declared blocks. That is harmless for bootstraps: they read the VPC blocks only
//! for derivations (the DNS fallback), never to pick an address or a route.
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::{Deserialize, Deserializer};
use std::net::Ipv4Addr;

/// The VPC and the instances' subnet, validated as AWS would (`CreateVpc`, `AssociateVpcCidrBlock`,
/// `CreateSubnet`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "NetworkSpec")]
pub struct Network {
    vpc_cidrs: Vec<Ipv4Net>,
    vpc_ipv6_cidrs: Vec<Ipv6Net>,
    subnet_cidr: Ipv4Net,
}

/// What the file says; [`Network`] is what it means once checked and defaulted.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schemars(rename = "Network")]
struct NetworkSpec {
    /// The VPC's IPv4 blocks, the primary first (default 192.168.0.0/16, eksctl's).
    #[serde(default = "default_vpc_cidrs")]
    #[schemars(with = "Vec<String>")]
    vpc_cidrs: Vec<Ipv4Net>,
    /// The VPC's IPv6 blocks (/44 to /60).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    vpc_ipv6_cidrs: Vec<Ipv6Net>,
    /// The instances' subnet, inside the primary block (default: its first eighth).
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    subnet_cidr: Option<Ipv4Net>,
}

/// eksctl's default VPC. Not the Docker subnet: which address pool Docker draws from is the host's business, and a
/// host whose pool is in 10.0.0.0/8 would silently flip the DNS fallback of every scenario.
fn default_vpc_cidrs() -> Vec<Ipv4Net> {
    vec![Ipv4Net::new(Ipv4Addr::new(192, 168, 0, 0), 16).unwrap_or_default()]
}

impl schemars::JsonSchema for Network {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        NetworkSpec::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        NetworkSpec::json_schema(generator)
    }
}

impl Default for Network {
    fn default() -> Self {
        let vpc_cidrs = default_vpc_cidrs();
        let subnet_cidr = default_subnet(&vpc_cidrs[0]);
        Self {
            vpc_cidrs,
            vpc_ipv6_cidrs: Vec::new(),
            subnet_cidr,
        }
    }
}

/// The first of the eight subnets eksctl cuts a VPC into (`192.168.0.0/16` → `192.168.0.0/19`), no smaller than
/// AWS's minimum /28.
fn default_subnet(primary: &Ipv4Net) -> Ipv4Net {
    let prefix = (primary.prefix_len() + 3).min(28);
    Ipv4Net::new(primary.network(), prefix).unwrap_or(*primary)
}

impl TryFrom<NetworkSpec> for Network {
    type Error = String;

    fn try_from(spec: NetworkSpec) -> Result<Self, String> {
        if spec.vpc_cidrs.is_empty() {
            return Err("network.vpcCidrs needs at least one IPv4 block (the first is the primary)".into());
        }
        for c in &spec.vpc_cidrs {
            canonical(&IpNet::V4(*c), "vpcCidrs")?;
            if !(16..=28).contains(&c.prefix_len()) {
                return Err(format!("network.vpcCidrs: {c}: AWS VPC blocks are /16 to /28"));
            }
        }
        for c in &spec.vpc_ipv6_cidrs {
            canonical(&IpNet::V6(*c), "vpcIpv6Cidrs")?;
            if !(44..=60).contains(&c.prefix_len()) {
                return Err(format!(
                    "network.vpcIpv6Cidrs: {c}: AWS VPC IPv6 blocks are /44 to /60 (Amazon's are /56)"
                ));
            }
        }
        let all: Vec<IpNet> = spec
            .vpc_cidrs
            .iter()
            .map(|c| IpNet::V4(*c))
            .chain(spec.vpc_ipv6_cidrs.iter().map(|c| IpNet::V6(*c)))
            .collect();
        for (i, a) in all.iter().enumerate() {
            if let Some(b) = all[i + 1..].iter().find(|b| overlap(a, b)) {
                return Err(format!("network: VPC blocks {a} and {b} overlap"));
            }
        }
        let subnet_cidr = match spec.subnet_cidr {
            None => default_subnet(&spec.vpc_cidrs[0]),
            Some(s) => {
                canonical(&IpNet::V4(s), "subnetCidr")?;
                if !spec.vpc_cidrs.iter().any(|v| v.contains(&s)) {
                    let blocks: Vec<String> = spec.vpc_cidrs.iter().map(|c| c.to_string()).collect();
                    return Err(format!(
                        "network.subnetCidr {s} is not inside a VPC block ({})",
                        blocks.join(", ")
                    ));
                }
                if s.prefix_len() > 28 {
                    return Err(format!("network.subnetCidr {s}: AWS subnets are /28 or larger"));
                }
                s
            }
        };
        Ok(Self {
            vpc_cidrs: spec.vpc_cidrs,
            vpc_ipv6_cidrs: spec.vpc_ipv6_cidrs,
            subnet_cidr,
        })
    }
}

/// AWS refuses a block written with host bits (`10.0.0.1/16`); saying so beats serving a block it never would.
fn canonical(c: &IpNet, field: &str) -> Result<(), String> {
    if c.trunc() == *c {
        Ok(())
    } else {
        Err(format!("network.{field}: {c} has host bits set; write {}", c.trunc()))
    }
}

pub(crate) fn overlap(a: &IpNet, b: &IpNet) -> bool {
    a.contains(b) || b.contains(a)
}

impl Network {
    /// The IPv4 blocks, primary first.
    pub fn vpc_cidrs(&self) -> &[Ipv4Net] {
        &self.vpc_cidrs
    }

    pub fn vpc_ipv6_cidrs(&self) -> &[Ipv6Net] {
        &self.vpc_ipv6_cidrs
    }

    /// The instances' subnet: the scenario's `subnetCidr`, else the primary block's first /19 (for a /16).
    pub fn subnet_cidr(&self) -> Ipv4Net {
        self.subnet_cidr
    }

    /// The subnet's IPv6 block when the VPC has one: AWS subnets take a /64 of it; the first is used.
    pub fn subnet_ipv6_cidr(&self) -> Option<Ipv6Net> {
        self.vpc_ipv6_cidrs
            .first()
            .and_then(|b| Ipv6Net::new(b.network(), 64).ok())
    }

    /// Every block, IPv4 then IPv6.
    pub fn all_cidrs(&self) -> Vec<IpNet> {
        self.vpc_cidrs
            .iter()
            .map(|c| IpNet::V4(*c))
            .chain(self.vpc_ipv6_cidrs.iter().map(|c| IpNet::V6(*c)))
            .collect()
    }
}

/// `serviceIpv4Cidr`, checked as EKS's CreateCluster does: inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16,
/// /12 to /24. (That it must not overlap the VPC needs both fields: the loader checks it.)
pub(crate) fn service_cidr<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Ipv4Net>, D::Error> {
    let c = Ipv4Net::deserialize(d)?;
    let private = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
        .iter()
        .filter_map(|p| p.parse::<Ipv4Net>().ok())
        .any(|p| p.contains(&c));
    if !private || !(12..=24).contains(&c.prefix_len()) {
        return Err(serde::de::Error::custom(format!(
            "serviceIpv4Cidr {c}: EKS takes a /12 to /24 inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
        )));
    }
    Ok(Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::Cluster;

    fn parse(yaml: &str) -> Result<Network, String> {
        serde_yaml_ng::from_str::<Network>(yaml).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_eksctls_vpc_and_first_subnet() {
        let n = parse("{}").unwrap();
        assert_eq!(n, Network::default());
        assert_eq!(n.vpc_cidrs()[0].to_string(), "192.168.0.0/16");
        assert_eq!(n.subnet_cidr().to_string(), "192.168.0.0/19");
        assert!(n.subnet_ipv6_cidr().is_none());
        let n = parse("vpcCidrs: [10.0.0.0/16, 100.64.0.0/16]").unwrap();
        assert_eq!(n.subnet_cidr().to_string(), "10.0.0.0/19");
        let n = parse("vpcCidrs: [10.0.0.0/27]").unwrap();
        assert_eq!(n.subnet_cidr().to_string(), "10.0.0.0/28");
        let n = parse("vpcCidrs: [10.0.0.0/16]\nvpcIpv6Cidrs: [\"2600:1f14:abc:de00::/56\"]").unwrap();
        assert_eq!(n.subnet_ipv6_cidr().unwrap().to_string(), "2600:1f14:abc:de00::/64");
    }

    #[test]
    fn explicit_subnet_in_a_secondary_block() {
        let n = parse("vpcCidrs: [10.0.0.0/16, 100.64.0.0/16]\nsubnetCidr: 100.64.32.0/20").unwrap();
        assert_eq!(n.subnet_cidr().to_string(), "100.64.32.0/20");
    }

    #[test]
    fn invalid_networks_say_why() {
        for (yaml, needle) in [
            ("vpcCidrs: []", "at least one"),
            ("vpcCidrs: [10.0.0.0/8]", "/16 to /28"),
            ("vpcCidrs: [10.0.0.1/16]", "write 10.0.0.0/16"),
            ("vpcCidrs: [10.0.0.0/16, 10.0.128.0/17]", "overlap"),
            ("subnetCidr: 10.0.0.0/24", "not inside a VPC block (192.168.0.0/16)"),
            ("subnetCidr: 192.168.0.0/29", "/28 or larger"),
            ("subnetCidr: 192.168.0.1/24", "host bits"),
            ("vpcIpv6Cidrs: [\"2600::/64\"]", "/44 to /60"),
            ("vpcCidr: 10.0.0.0/16", "unknown field `vpcCidr`"),
        ] {
            let err = parse(yaml).unwrap_err();
            assert!(err.contains(needle), "{yaml}: {err}");
        }
    }

    #[test]
    fn service_cidr_defaults_follow_the_vpc() {
        let mut c = Cluster::default();
        assert_eq!(c.service_cidr().to_string(), "10.100.0.0/16");
        c.network = parse("vpcCidrs: [10.0.0.0/16]").unwrap();
        assert_eq!(c.service_cidr().to_string(), "172.20.0.0/16");
        c.service_ipv4_cidr = Some("10.200.0.0/16".parse().unwrap());
        assert_eq!(c.service_cidr().to_string(), "10.200.0.0/16");
    }
}
