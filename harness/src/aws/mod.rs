//! AWS's own mechanics, shared by the fakes (which serve them) and the EKS derivations (which check tokens with
//! them): SigV4 signing and verification, the credential store IAM issues instance credentials from, and the
//! formats AWS prints. Nothing here serves HTTP or knows Kubernetes.
pub mod credentials;
pub mod iam;
pub mod sigv4;

use rand::distr::{Alphanumeric, SampleString};

/// Random string of `len` characters from `[A-Za-z0-9]` (key ids, secrets, session tokens).
pub(crate) fn random_alnum(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::rng(), len)
}

/// RFC 3339 UTC timestamp with seconds precision, as AWS APIs print them.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}
