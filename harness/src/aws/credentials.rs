//! How an instance's credentials are to behave: a setting of the instance (`instances`) that the credential issuer
//! (`iam`) reads, kept apart so neither module needs the other's.
use std::time::Duration;

/// How an instance's IMDS credentials behave; the non-default modes reproduce real failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CredentialMode {
    /// Valid credentials, rotated before they expire.
    #[default]
    Valid,
    /// IMDS keeps serving credentials that have already expired (a stuck refresh, as after a long stop).
    Expired,
    /// IMDS serves a SecretAccessKey that AWS does not know for the key: every signature fails to verify.
    WrongSecret,
}

/// The credential settings of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialPolicy {
    pub lifetime: Duration,
    pub mode: CredentialMode,
}

impl Default for CredentialPolicy {
    fn default() -> Self {
        Self {
            lifetime: Duration::from_secs(6 * 3600),
            mode: CredentialMode::Valid,
        }
    }
}

/// Who credentials are served to: an instance, with the instance profile's role (none: no credentials).
#[derive(Debug, Clone, Copy)]
pub struct Holder<'a> {
    pub instance_id: &'a str,
    pub account_id: &'a str,
    pub role_name: Option<&'a str>,
    pub policy: CredentialPolicy,
}
