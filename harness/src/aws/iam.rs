//! Instance-profile credentials: what IMDS hands each instance, and what STS, EC2, EKS and the token webhook
//! check signatures against. One store, so a key the fake IMDS never issued is unknown everywhere.
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

pub use super::credentials::{CredentialMode, CredentialPolicy, Holder};

/// One set of temporary credentials of an instance profile's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCredentials {
    pub access_key_id: String,
    /// The secret AWS knows (IMDS may serve another one, see [`CredentialMode::WrongSecret`]).
    pub secret_access_key: String,
    pub session_token: String,
    pub issued: SystemTime,
    pub expiration: SystemTime,
    pub instance_id: String,
    pub role_name: String,
    pub account_id: String,
}

impl IssuedCredentials {
    /// `arn:aws:iam::<account>:role/<role>`.
    pub fn role_arn(&self) -> String {
        format!("arn:aws:iam::{}:role/{}", self.account_id, self.role_name)
    }

    /// What STS GetCallerIdentity answers for an instance profile: the assumed role, session = instance id.
    pub fn caller_arn(&self) -> String {
        format!(
            "arn:aws:sts::{}:assumed-role/{}/{}",
            self.account_id, self.role_name, self.instance_id
        )
    }

    /// `AROA<role id>:<session>`, the UserId STS reports for an assumed role.
    pub fn user_id(&self) -> String {
        format!("{}:{}", role_id(&self.account_id, &self.role_name), self.instance_id)
    }
}

/// A stable, role-specific `AROA...` id (21 characters, as IAM's unique ids are).
pub fn role_id(account: &str, role: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(format!("{account}/{role}").as_bytes());
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let tail: String = digest
        .iter()
        .take(17)
        .map(|b| ALPHABET[(*b as usize) % ALPHABET.len()] as char)
        .collect();
    format!("AROA{tail}")
}

/// What IMDS serves at `iam/security-credentials/<role>`.
#[derive(Debug, Clone)]
pub struct Served {
    pub credentials: Arc<IssuedCredentials>,
    /// The secret in the document (differs from the real one in [`CredentialMode::WrongSecret`]).
    pub secret_served: String,
}

/// Every credential issued in this run, by access key id, and the current one of each instance.
#[derive(Default)]
pub struct CredentialStore {
    by_key: Mutex<HashMap<String, Arc<IssuedCredentials>>>,
    current: Mutex<HashMap<String, Arc<IssuedCredentials>>>,
}

/// Credentials are replaced once less than this share of their lifetime is left (at most 15 minutes before
/// expiry), so a caller that refreshes when IMDS says so never holds expired ones.
fn refresh_margin(lifetime: Duration) -> Duration {
    (lifetime / 3).min(Duration::from_secs(15 * 60))
}

impl CredentialStore {
    /// The credentials IMDS serves `instance` now: the current set, or a new one when the current set is near
    /// its expiry. Old sets stay valid until they expire, as with AWS.
    pub fn serve(&self, instance: Holder<'_>, now: SystemTime) -> Option<Served> {
        let role = instance.role_name?.to_string();
        let policy = instance.policy;
        let mut current = self.current.lock().ok()?;
        let fresh_enough = |c: &IssuedCredentials| match policy.mode {
            CredentialMode::Expired => true,
            _ => c
                .expiration
                .duration_since(now)
                .is_ok_and(|left| left > refresh_margin(policy.lifetime)),
        };
        let creds = match current.get(instance.instance_id) {
            Some(c) if fresh_enough(c) => c.clone(),
            _ => {
                let (issued, expiration) = match policy.mode {
                    CredentialMode::Expired => {
                        let expired = now - Duration::from_secs(60);
                        (expired - policy.lifetime, expired)
                    }
                    _ => (now, now + policy.lifetime),
                };
                let c = Arc::new(IssuedCredentials {
                    access_key_id: format!("ASIA{}", super::random_alnum(16).to_uppercase()),
                    secret_access_key: super::random_alnum(40),
                    session_token: format!("IQoJb3JpZ2luX2Vj{}", super::random_alnum(340)),
                    issued,
                    expiration,
                    instance_id: instance.instance_id.to_string(),
                    role_name: role,
                    account_id: instance.account_id.to_string(),
                });
                if let Ok(mut keys) = self.by_key.lock() {
                    keys.insert(c.access_key_id.clone(), c.clone());
                }
                current.insert(instance.instance_id.to_string(), c.clone());
                c
            }
        };
        let secret_served = match policy.mode {
            CredentialMode::WrongSecret => creds.secret_access_key.chars().rev().collect(),
            _ => creds.secret_access_key.clone(),
        };
        Some(Served {
            credentials: creds,
            secret_served,
        })
    }

    /// The credentials with this access key id, if this run issued them.
    pub fn lookup(&self, access_key_id: &str) -> Option<Arc<IssuedCredentials>> {
        self.by_key.lock().ok()?.get(access_key_id).cloned()
    }

    /// Registers credentials made elsewhere (tests, golden vectors).
    pub fn insert(&self, creds: IssuedCredentials) -> Arc<IssuedCredentials> {
        let c = Arc::new(creds);
        if let Ok(mut keys) = self.by_key.lock() {
            keys.insert(c.access_key_id.clone(), c.clone());
        }
        c
    }

    /// Forgets an instance's credentials (its container is gone); keys stay known until they expire.
    pub fn forget_instance(&self, instance_id: &str) {
        if let Ok(mut current) = self.current.lock() {
            current.remove(instance_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::instances::tests::instance;

    #[test]
    fn rotates_before_expiry_and_keeps_old_keys_valid_until_then() {
        let store = CredentialStore::default();
        let mut i = instance();
        i.credentials.lifetime = Duration::from_secs(300);
        let t0 = SystemTime::now();
        let a = store.serve(i.holder(), t0).unwrap().credentials;
        assert!(a.access_key_id.starts_with("ASIA") && a.access_key_id.len() == 20);
        assert_eq!(a.expiration, t0 + Duration::from_secs(300));
        // Still fresh: the same set.
        let b = store
            .serve(i.holder(), t0 + Duration::from_secs(150))
            .unwrap()
            .credentials;
        assert_eq!(a.access_key_id, b.access_key_id);
        // Less than a third of the lifetime left: a new set; the old key is still known.
        let c = store
            .serve(i.holder(), t0 + Duration::from_secs(201))
            .unwrap()
            .credentials;
        assert_ne!(a.access_key_id, c.access_key_id);
        assert!(c.expiration > a.expiration);
        assert_eq!(store.lookup(&a.access_key_id).unwrap().access_key_id, a.access_key_id);
        assert_eq!(
            c.caller_arn(),
            format!("arn:aws:sts::111122223333:assumed-role/NodeRole/{}", i.instance_id)
        );
        assert!(c.user_id().starts_with("AROA") && c.user_id().ends_with(&i.instance_id));
    }

    #[test]
    fn failure_modes() {
        let store = CredentialStore::default();
        let mut i = instance();
        i.credentials.mode = CredentialMode::Expired;
        let now = SystemTime::now();
        let s = store.serve(i.holder(), now).unwrap();
        assert!(s.credentials.expiration < now);
        // A stuck refresh keeps serving the same expired set.
        let again = store.serve(i.holder(), now + Duration::from_secs(60)).unwrap();
        assert_eq!(s.credentials.access_key_id, again.credentials.access_key_id);

        let mut j = instance();
        j.instance_id = "i-0other".into();
        j.credentials.mode = CredentialMode::WrongSecret;
        let s = store.serve(j.holder(), now).unwrap();
        assert_ne!(s.secret_served, s.credentials.secret_access_key);

        let mut k = instance();
        k.role_name = None;
        assert!(store.serve(k.holder(), now).is_none());
    }
}
