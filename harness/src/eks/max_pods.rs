//! max-pods and kube-reserved memory, as the EKS AMI derives them from the instance type.
//!
//! The ENI table is shared with the reference bootstrap script (`fixtures/bootstrap/eni-limits.txt`, installed
//! in nodes as `/etc/eks/eni-limits.txt`); the script computes max-pods in awk. The unit tests here pin the table
//! to the contract's known values (m5.large 29, t3.medium 17, ...), which the scenarios then assert end to end.
use std::collections::BTreeMap;

pub const TABLE: &str = include_str!("../../share/fixtures/bootstrap/eni-limits.txt");

/// ENI limits of one instance type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EniLimits {
    pub enis: u32,
    pub ipv4_per_eni: u32,
}

impl EniLimits {
    /// `ENIs × (IPv4 per ENI − 1) + 2`: one address per ENI is the ENI's own, plus host-network pods.
    pub fn max_pods(&self) -> u32 {
        self.enis * self.ipv4_per_eni.saturating_sub(1) + 2
    }
}

/// Parses the table; malformed lines are reported with their line number.
pub fn parse_table(text: &str) -> Result<BTreeMap<String, EniLimits>, String> {
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let parsed = match fields.as_slice() {
            [ty, enis, ips] => enis
                .parse()
                .ok()
                .zip(ips.parse().ok())
                .map(|(e, p)| (ty.to_string(), e, p)),
            _ => None,
        };
        let (ty, enis, ipv4_per_eni) =
            parsed.ok_or_else(|| format!("line {}: expected `type enis ipv4-per-eni`", i + 1))?;
        out.insert(ty, EniLimits { enis, ipv4_per_eni });
    }
    Ok(out)
}

/// Looks an instance type up in the bundled table.
pub fn limits(instance_type: &str) -> Option<EniLimits> {
    parse_table(TABLE).ok()?.get(instance_type).copied()
}

/// max-pods for a known instance type.
pub fn max_pods(instance_type: &str) -> Option<u32> {
    limits(instance_type).map(|l| l.max_pods())
}

/// kube-reserved memory in MiB: `11 × maxPods + 255`.
pub fn kube_reserved_memory_mib(max_pods: u32) -> u32 {
    11 * max_pods + 255
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_table_parses() {
        let table = parse_table(TABLE).unwrap();
        assert!(table.len() > 20);
    }

    #[test]
    fn known_values_from_the_contract() {
        assert_eq!(max_pods("m5.large"), Some(29));
        assert_eq!(max_pods("t3.medium"), Some(17));
        assert_eq!(max_pods("m4.xlarge"), Some(58));
        assert_eq!(max_pods("m5.8xlarge"), Some(234));
        assert_eq!(max_pods("t3.micro"), Some(4));
        assert_eq!(max_pods("x9.nonexistent"), None);
    }

    #[test]
    fn reserved_memory() {
        assert_eq!(kube_reserved_memory_mib(29), 574);
        assert_eq!(kube_reserved_memory_mib(110), 1465);
    }

    #[test]
    fn malformed_lines_are_reported() {
        let err = parse_table("m5.large 3 10\nbroken line here extra\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        assert!(parse_table("m5.large three 10").is_err());
    }
}
