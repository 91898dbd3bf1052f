//! The identity an EC2 instance shows its software, derived from its instance id and type: the DMI in
//! `/sys/class/dmi/id` (Nitro: `product_uuid` starting with `ec2` and equal to `product_serial`, board asset tag =
//! instance id) and `/sys/hypervisor/uuid` (Xen instances: the same uuid, lower case). The node entrypoint writes
//! them from the variables `settings::var::NODE_DMI_PREFIX` and `NODE_HYPERVISOR_UUID` name. cloud-init 22.4 ignores DMI inside a container
//! but reads the hypervisor uuid, so that is how it recognises AWS (and uses IMDSv2) in a node.
use sha2::{Digest, Sha256};

/// `(file in /sys/class/dmi/id, value)` pairs for one instance.
pub fn ec2_identity(instance_id: &str, instance_type: &str) -> Vec<(&'static str, String)> {
    let h = hex::encode(Sha256::digest(instance_id.as_bytes())).to_uppercase();
    // EC2 UUIDs begin with "EC2" (Nitro: the same value as the serial number).
    let uuid = format!(
        "EC2{}-{}-{}-{}-{}",
        &h[0..5],
        &h[5..9],
        &h[9..13],
        &h[13..17],
        &h[17..29]
    );
    vec![
        ("sys_vendor", "Amazon EC2".to_string()),
        ("bios_vendor", "Amazon EC2".to_string()),
        ("board_vendor", "Amazon EC2".to_string()),
        ("chassis_vendor", "Amazon EC2".to_string()),
        ("chassis_asset_tag", "Amazon EC2".to_string()),
        ("product_name", instance_type.to_string()),
        ("product_uuid", uuid.clone()),
        ("product_serial", uuid),
        ("board_asset_tag", instance_id.to_string()),
    ]
}

/// The container environment that carries [`ec2_identity`] to the node's entrypoint.
pub fn entrypoint_env(instance_id: &str, instance_type: &str) -> Vec<(String, String)> {
    let dmi = ec2_identity(instance_id, instance_type);
    let uuid = dmi
        .iter()
        .find(|(f, _)| *f == "product_uuid")
        .map(|(_, v)| v.to_lowercase())
        .unwrap_or_default();
    dmi.into_iter()
        .map(|(file, value)| {
            (
                format!("{}{}", crate::settings::var::NODE_DMI_PREFIX, file.to_uppercase()),
                value,
            )
        })
        .chain([(crate::settings::var::NODE_HYPERVISOR_UUID.to_string(), uuid)])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_what_cloud_init_recognises_as_aws() {
        let id = ec2_identity("i-0123456789abcdef0", "m5.large");
        let get = |k: &str| id.iter().find(|(f, _)| *f == k).map(|(_, v)| v.clone()).unwrap();
        let uuid = get("product_uuid");
        // cloud-init 22.4 identify_aws: lower-cased uuid starts with "ec2" and equals the serial.
        assert!(uuid.to_lowercase().starts_with("ec2"), "{uuid}");
        assert_eq!(uuid.len(), 36);
        assert_eq!(uuid.matches('-').count(), 4);
        assert_eq!(get("product_serial"), uuid);
        assert_eq!(get("board_asset_tag"), "i-0123456789abcdef0");
        assert_eq!(get("sys_vendor"), "Amazon EC2");
        assert_eq!(get("product_name"), "m5.large");
        // Stable per instance, different across instances.
        assert_eq!(ec2_identity("i-0123456789abcdef0", "m5.large"), id);
        assert_ne!(ec2_identity("i-0fedcba9876543210", "m5.large")[6], id[6]);
        let env = entrypoint_env("i-0123456789abcdef0", "m5.large");
        assert!(env
            .iter()
            .any(|(k, v)| *k == format!("{}PRODUCT_UUID", crate::settings::var::NODE_DMI_PREFIX) && *v == uuid));
        // cloud-init reads /sys/hypervisor/uuid in containers, lower-cases it and wants an "ec2" prefix.
        assert!(env.iter().any(|(k, v)| k == crate::settings::var::NODE_HYPERVISOR_UUID
            && *v == uuid.to_lowercase()
            && v.starts_with("ec2")));
    }
}
