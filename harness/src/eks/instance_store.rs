//! Instance-store volumes of the instance types that have them (EC2's DescribeInstanceTypes
//! `InstanceStorageInfo.Disks`, from the EC2 instance-type documentation): the disks a VM node of that type gets
//! (NVMe on EC2; ATA with EC2's model on a VM, `node::vm::qemu`), which the AMI's `setup-local-disks` finds by
//! their model (`Amazon EC2 NVMe Instance Storage`).

/// `(instance type, disks, size of each in GB)`.
const STORES: &[(&str, u32, u32)] = &[
    ("m5d.large", 1, 75),
    ("m5d.xlarge", 1, 150),
    ("m5d.2xlarge", 1, 300),
    ("m5d.4xlarge", 2, 300),
];

/// The model EC2 gives an instance-store NVMe disk (an EBS volume is `Amazon Elastic Block Store`).
pub const MODEL: &str = "Amazon EC2 NVMe Instance Storage";

/// How many instance-store disks `instance_type` has and the size of each (GB); `None` for a type without.
pub fn disks(instance_type: &str) -> Option<(u32, u32)> {
    STORES
        .iter()
        .find(|(t, _, _)| *t == instance_type)
        .map(|&(_, n, gb)| (n, gb))
}

/// How many instance-store disks `instance_type` has (0 for a type without, or one not listed).
pub fn count(instance_type: &str) -> u32 {
    disks(instance_type).map_or(0, |(n, _)| n)
}

/// The instance types listed here.
pub fn types() -> Vec<&'static str> {
    STORES.iter().map(|(t, _, _)| *t).collect()
}

/// The most disks any type listed here has.
pub fn most_disks() -> u32 {
    STORES.iter().map(|&(_, n, _)| n).max().unwrap_or(0)
}

/// The serial of an instance's `index`th instance-store disk: `AWS` and 17 hex digits, 20 characters as on EC2,
/// derived from the instance id so a run is reproducible.
pub fn serial(instance_id: &str, index: u32) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{instance_id}/{index}").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02X}")).collect();
    format!("AWS{}", &hex[..17])
}

/// The serial of an instance's EBS root volume as its NVMe controller reports it on Nitro: the volume id without
/// its dash (`vol` and 17 hex digits, 20 characters), derived from the instance id so a run is reproducible.
pub fn ebs_serial(instance_id: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{instance_id}/root").as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("vol{}", &hex[..17])
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_type_with_instance_store_has_eni_limits_and_a_size() {
        let table = super::super::max_pods::parse_table(super::super::max_pods::TABLE).unwrap();
        for (t, n, gb) in super::STORES {
            assert!(table.contains_key(*t), "{t} has no ENI limits");
            assert!(super::super::instance_sizes::size(t).is_some(), "{t} has no size");
            assert!(*n > 0 && *gb > 0);
        }
        assert_eq!(super::disks("m5d.4xlarge"), Some((2, 300)));
        assert_eq!(super::disks("m5.large"), None);
        assert_eq!((super::count("m5d.4xlarge"), super::count("m5.large")), (2, 0));
    }

    #[test]
    fn an_ebs_root_serial_is_a_volume_id_without_its_dash() {
        let s = super::ebs_serial("i-0123456789abcdef0");
        assert!(
            s.len() == 20
                && s.starts_with("vol")
                && s[3..].bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{s}"
        );
        assert_ne!(s, super::ebs_serial("i-0123456789abcdef1"));
    }

    #[test]
    fn serials_are_ec2_shaped_and_distinct_per_disk() {
        let a = super::serial("i-0123456789abcdef0", 0);
        let b = super::serial("i-0123456789abcdef0", 1);
        assert_eq!(a.len(), 20);
        assert!(
            a.starts_with("AWS") && a[3..].chars().all(|c| c.is_ascii_hexdigit()),
            "{a}"
        );
        assert_ne!(a, b);
    }
}
