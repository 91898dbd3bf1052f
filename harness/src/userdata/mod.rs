//! EC2 user data: detecting its format layer by layer (`format`), writing it the way EKS, CloudFormation,
//! eksctl and nodeadm users do (`generate`), filling a user's own file in whatever layers it comes (`file`), and
//! pointing a producer's output for a real cluster at this run's (`rendered`).
//! Pure functions; the node's cloud-init is what runs it.
pub mod file;
pub mod format;
pub mod generate;
pub mod producers;
pub mod rendered;

use base64::Engine;

/// Does this user data hold a NodeConfig (alone or as an `application/node.eks.aws` part)? Then the node's
/// nodeadm runs it, as on an AL2023 AMI. Undecodable user data holds none.
pub fn carries_node_config(served: &[u8]) -> bool {
    format::detect(served).is_ok_and(|p| p.leaves().iter().any(|l| l.kind == format::Kind::NodeConfig))
}

/// What EC2 does with the `UserData` of RunInstances or a launch template: base64-decode it. IMDS then serves
/// the decoded bytes at `/latest/user-data`.
pub fn from_api(encoded: impl AsRef<[u8]>) -> Result<Vec<u8>, String> {
    let compact: Vec<u8> = encoded
        .as_ref()
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| format!("user data is not valid base64 (EC2 requires it for RunInstances): {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn node_config_is_found_alone_or_in_a_part() {
        use super::generate::{node_config, nodeadm, PartEncoding};
        let doc = node_config(serde_yaml_ng::from_str("cluster: {name: demo}").unwrap());
        assert!(super::carries_node_config(&nodeadm(&[(
            doc.clone(),
            PartEncoding::Gzip
        )])));
        assert!(super::carries_node_config(
            serde_yaml_ng::to_string(&doc).unwrap().as_bytes()
        ));
        assert!(!super::carries_node_config(b"#!/bin/bash\necho hi\n"));
        assert!(!super::carries_node_config(b"\x1f\x8b not really gzip"));
    }
}
