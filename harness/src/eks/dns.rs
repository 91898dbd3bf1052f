//! Cluster DNS IP derivation, as EKS bootstrap does it (the documented EKS bootstrap contract).
use ipnet::{IpNet, Ipv4Net};
use std::net::{IpAddr, Ipv4Addr};

/// The kube-dns service IP for a service CIDR: the network address with its last octet set to 10
/// (`10.100.0.0/16` → `10.100.0.10`); for IPv6 the network address plus `a`.
pub fn from_service_cidr(cidr: &IpNet) -> IpAddr {
    match cidr.network() {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            IpAddr::from([o[0], o[1], o[2], 10])
        }
        IpAddr::V6(v6) => {
            let mut segments = v6.segments();
            segments[7] = 0xa;
            IpAddr::from(segments)
        }
    }
}

/// The service CIDR EKS picks when CreateCluster names none: `172.20.0.0/16` if any VPC CIDR block starts with
/// `10.`, otherwise `10.100.0.0/16` (the service range must not overlap the VPC).
pub fn eks_default_service_cidr(vpc_cidrs: &[IpNet]) -> Ipv4Net {
    let vpc_in_ten = vpc_cidrs
        .iter()
        .any(|c| matches!(c.network(), IpAddr::V4(v4) if v4.octets()[0] == 10));
    let (network, prefix) = if vpc_in_ten {
        (Ipv4Addr::new(172, 20, 0, 0), 16)
    } else {
        (Ipv4Addr::new(10, 100, 0, 0), 16)
    };
    Ipv4Net::new(network, prefix).unwrap_or_default()
}

/// The legacy fallback when no service CIDR is known: the DNS IP of the service CIDR EKS would have picked,
/// `172.20.0.10` if any VPC CIDR block starts with `10.`, otherwise `10.100.0.10`.
pub fn legacy_fallback(vpc_cidrs: &[IpNet]) -> IpAddr {
    from_service_cidr(&IpNet::V4(eks_default_service_cidr(vpc_cidrs)))
}

/// `--dns-cluster-ip` wins, then the service CIDR, then the VPC heuristic.
pub fn cluster_dns(explicit: Option<IpAddr>, service_cidr: Option<&IpNet>, vpc_cidrs: &[IpNet]) -> IpAddr {
    explicit
        .or_else(|| service_cidr.map(from_service_cidr))
        .unwrap_or_else(|| legacy_fallback(vpc_cidrs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn service_cidr_gives_dot_ten() {
        assert_eq!(from_service_cidr(&net("10.100.0.0/16")).to_string(), "10.100.0.10");
        assert_eq!(from_service_cidr(&net("192.168.0.0/16")).to_string(), "192.168.0.10");
        assert_eq!(from_service_cidr(&net("172.20.0.0/16")).to_string(), "172.20.0.10");
        // A CIDR written with host bits still uses its network address.
        assert_eq!(from_service_cidr(&net("10.96.5.7/12")).to_string(), "10.96.0.10");
    }

    #[test]
    fn ipv6_adds_a() {
        assert_eq!(from_service_cidr(&net("fd00:1234::/108")).to_string(), "fd00:1234::a");
    }

    #[test]
    fn fallback_depends_on_vpc() {
        assert_eq!(legacy_fallback(&[net("10.0.0.0/16")]).to_string(), "172.20.0.10");
        assert_eq!(legacy_fallback(&[net("192.168.0.0/16")]).to_string(), "10.100.0.10");
        assert_eq!(legacy_fallback(&[]).to_string(), "10.100.0.10");
        // Any block counts, not only the primary; IPv6 blocks never do.
        let secondary = [net("192.168.0.0/16"), net("10.1.0.0/16")];
        assert_eq!(legacy_fallback(&secondary).to_string(), "172.20.0.10");
        assert_eq!(legacy_fallback(&[net("2600:1f14::/56")]).to_string(), "10.100.0.10");
        assert_eq!(eks_default_service_cidr(&secondary).to_string(), "172.20.0.0/16");
    }

    #[test]
    fn precedence() {
        let explicit: IpAddr = "10.0.0.53".parse().unwrap();
        let cidr = net("192.168.0.0/16");
        assert_eq!(cluster_dns(Some(explicit), Some(&cidr), &[]), explicit);
        assert_eq!(
            cluster_dns(None, Some(&cidr), &[net("10.0.0.0/8")]).to_string(),
            "192.168.0.10"
        );
        assert_eq!(cluster_dns(None, None, &[net("10.0.0.0/8")]).to_string(), "172.20.0.10");
    }
}
