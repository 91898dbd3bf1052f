//! EC2 user data: detecting its format layer by layer (`format`) and writing it the way EKS, CloudFormation,
//! eksctl and nodeadm users do (`generate`). Pure functions; the node's cloud-init is what runs it.
pub mod format;
pub mod generate;

use base64::Engine;

/// What EC2 does with the `UserData` of RunInstances or a launch template: base64-decode it. IMDS then serves
/// the decoded bytes at `/latest/user-data`.
pub fn from_api(encoded: &str) -> Result<Vec<u8>, String> {
    let compact: String = encoded.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| format!("user data is not valid base64 (EC2 requires it for RunInstances): {e}"))
}
