//! vCPUs and memory of the instance types the ENI table knows (EC2's DescribeInstanceTypes `DefaultVCpus` and
//! `MemoryInfo.SizeInMiB`, from the EC2 instance-type documentation): what Karpenter's CEL variables `vcpus` and
//! `memory_mib` hold for a node of that type.

/// `(instance type, vCPUs, memory in MiB)`.
const SIZES: &[(&str, u32, u32)] = &[
    ("t2.micro", 1, 1024),
    ("t2.small", 1, 2048),
    ("t2.medium", 2, 4096),
    ("t2.large", 2, 8192),
    ("t3.micro", 2, 1024),
    ("t3.small", 2, 2048),
    ("t3.medium", 2, 4096),
    ("t3.large", 2, 8192),
    ("t3.xlarge", 4, 16384),
    ("t3.2xlarge", 8, 32768),
    ("m4.large", 2, 8192),
    ("m4.xlarge", 4, 16384),
    ("m4.2xlarge", 8, 32768),
    ("m5.large", 2, 8192),
    ("m5.xlarge", 4, 16384),
    ("m5.2xlarge", 8, 32768),
    ("m5.4xlarge", 16, 65536),
    ("m5.8xlarge", 32, 131072),
    ("m5.12xlarge", 48, 196608),
    ("m5.16xlarge", 64, 262144),
    ("m5.24xlarge", 96, 393216),
    ("m5d.large", 2, 8192),
    ("m5d.xlarge", 4, 16384),
    ("m5d.2xlarge", 8, 32768),
    ("m5d.4xlarge", 16, 65536),
    ("m6i.large", 2, 8192),
    ("m6i.xlarge", 4, 16384),
    ("m6i.2xlarge", 8, 32768),
    ("m7i.large", 2, 8192),
    ("m7i.xlarge", 4, 16384),
    ("c5.large", 2, 4096),
    ("c5.xlarge", 4, 8192),
    ("c5.2xlarge", 8, 16384),
    ("c5.4xlarge", 16, 32768),
    ("c6i.large", 2, 4096),
    ("c6i.xlarge", 4, 8192),
    ("r5.large", 2, 16384),
    ("r5.xlarge", 4, 32768),
    ("r5.2xlarge", 8, 65536),
    ("r6i.large", 2, 16384),
];

/// vCPUs and memory (MiB) of a known instance type.
pub fn size(instance_type: &str) -> Option<(u32, u32)> {
    SIZES
        .iter()
        .find(|(t, _, _)| *t == instance_type)
        .map(|&(_, vcpus, mib)| (vcpus, mib))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_type_of_the_eni_table_has_a_size() {
        let table = super::super::max_pods::parse_table(super::super::max_pods::TABLE).unwrap();
        for t in table.keys() {
            assert!(super::size(t).is_some(), "{t} has no size");
        }
        assert_eq!(super::size("m5.large"), Some((2, 8192)));
        assert_eq!(super::size("m5.xlarge"), Some((4, 16384)));
    }
}
