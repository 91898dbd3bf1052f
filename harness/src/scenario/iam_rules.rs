//! Load-time rules for what only an IAM cluster does: the expectations and settings that the run reads only with
//! `cluster.auth: iam` (and, for the identity checks, only for nodes that join) would otherwise be skipped
//! without a word, and a scenario would pass without checking what it says.
use super::expect::EvidenceSource;
use super::model::{AuthMode, RoleMappingSpec, Scenario};
use super::position::{group_line, locate};
use crate::error::{Error, Result};
use std::path::Path;

/// Refuses IAM-only keys in a scenario that cannot use them, pointing at the key.
pub(super) fn check(s: &Scenario, text: &str, file: &Path) -> Result<()> {
    let iam = s.cluster.auth == AuthMode::Iam;
    let fail = |key: &str, after: usize, message: String| {
        let (line, column) = locate(text, key, after).unwrap_or((0, 0));
        Err(Error::ScenarioParse {
            file: file.to_path_buf(),
            line,
            column,
            message,
        })
    };
    let not_iam = |what: &str, why: &str| {
        format!(
            "{what} needs cluster.auth: iam ({why}); with auth: {} it would never be checked. hint: set `cluster: {{ auth: iam }}`, or remove it",
            match s.cluster.auth {
                AuthMode::Iam => "iam",
                AuthMode::BootstrapToken => "bootstrap-token",
            }
        )
    };
    let cluster_line = locate(text, "cluster", 0).map_or(0, |(l, _)| l);
    if !iam {
        if s.cluster.aws_auth.is_some() {
            return fail(
                "awsAuth",
                cluster_line,
                not_iam(
                    "cluster.awsAuth",
                    "aws-auth maps IAM roles, and only the token webhook reads it",
                ),
            );
        }
        if !s.cluster.access_entries.is_empty() {
            return fail(
                "accessEntries",
                cluster_line,
                not_iam(
                    "cluster.accessEntries",
                    "access entries map IAM principals for the token webhook",
                ),
            );
        }
    }
    for g in &s.nodes {
        let at = group_line(text, g).unwrap_or(0);
        let e = &g.expect;
        let keys = [
            (
                "identity",
                e.identity.is_some(),
                "expect.identity",
                "the identity is the IAM token's mapping",
            ),
            (
                "awsAuthChangedBy",
                e.aws_auth_changed_by.is_some(),
                "expect.awsAuthChangedBy",
                "the node role is written into aws-auth only for IAM clusters",
            ),
        ];
        for (key, set, what, why) in keys {
            if !set {
                continue;
            }
            if !iam {
                return fail(key, at, format!("node group '{}': {}", g.name, not_iam(what, why)));
            }
            if !e.joins {
                return fail(
                    key,
                    at,
                    format!(
                        "node group '{}': {what} is checked on the Node's registration, and this group expects joins: false; hint: remove it, or prove the refusal with evidence from source: authenticator",
                        g.name
                    ),
                );
            }
        }
        if !iam && !is_default(&g.role_mapping) {
            return fail(
                "roleMapping",
                at,
                format!(
                    "node group '{}': {}",
                    g.name,
                    not_iam("roleMapping", "the role is mapped only for the IAM token webhook")
                ),
            );
        }
        if !iam && e.evidence.iter().any(|ev| ev.source == EvidenceSource::Authenticator) {
            return fail(
                "authenticator",
                at,
                format!(
                    "node group '{}': {}",
                    g.name,
                    not_iam(
                        "evidence from source: authenticator",
                        "the token webhook reviews IAM tokens only; it would never have a line"
                    )
                ),
            );
        }
    }
    Ok(())
}

fn is_default(m: &RoleMappingSpec) -> bool {
    let d = RoleMappingSpec::default();
    m.via.is_none() && m.username == d.username && m.groups == d.groups
}
