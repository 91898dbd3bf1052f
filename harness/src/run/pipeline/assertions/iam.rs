//! The checks of an IAM node (`auth: iam`): what the token webhook granted, the identity the API server saw, who
//! mapped the node's role, and the tokens' format.
use crate::assert::{audit, Check};
use crate::run::env::Environment;
use crate::scenario::model::{NodeGroup, Scenario};

/// Every token the node presented is in a real token client's format (one odd token among good ones is a
/// client that changed mid-run: the kubelet's exec plugin swapped, a second generator).
fn token_format_check(name: String, decisions: &[crate::fakes::authenticator::Decision]) -> Check {
    use crate::eks::token::{known_client, shape};
    let odd: Vec<&crate::fakes::authenticator::Decision> =
        decisions.iter().filter(|d| known_client(&d.token).is_none()).collect();
    let actual = match (odd.first(), decisions.first()) {
        (Some(d), _) => format!(
            "{} of {} tokens in no real client's format, first: {}",
            odd.len(),
            decisions.len(),
            shape(&d.token)
        ),
        (None, Some(d)) => format!(
            "{}: {} ({} token(s))",
            known_client(&d.token).unwrap_or_default(),
            shape(&d.token),
            decisions.len()
        ),
        (None, None) => "no token".into(),
    };
    Check::new(
        name,
        odd.is_empty() && !decisions.is_empty(),
        "a real token client's format (aws eks get-token or aws-iam-authenticator: k8s-aws-v1. + unpadded base64url presigned STS GetCallerIdentity)",
        actual,
    )
}

/// Checks for one IAM node that joined: the identity the API server saw, who mapped the role (and when), and
/// the token's format against the real AWS CLI's.
pub fn checks(
    env: &Environment,
    events: &[audit::Event],
    sc: &Scenario,
    group: &NodeGroup,
    instance: &crate::fakes::instances::Instance,
    node_name: &str,
    expect: &crate::scenario::model::Expect,
) -> (Vec<Check>, Vec<String>) {
    let instance_id = instance.instance_id.as_str();
    let mut checks = Vec::new();
    let mut notes = Vec::new();
    let created = audit::node_created(events, node_name, instance.launch_time);
    let decisions = env.authenticator.decisions_for(instance_id);
    let accepted = decisions.iter().find(|d| d.granted.is_some());
    if let Some(d) = accepted {
        if let Some(m) = &d.granted {
            notes.push(format!(
                "{node_name}: token webhook granted {} groups [{}] via {}",
                m.username,
                m.groups.join(", "),
                m.source
            ));
        }
        checks.push(token_format_check(
            crate::assert::registry::IAM_TOKEN_FORMAT.on(node_name),
            &decisions,
        ));
    } else if sc.cluster.auth == crate::scenario::model::AuthMode::Iam {
        let last = decisions
            .last()
            .map(|d| d.line())
            .unwrap_or_else(|| "no TokenReview for this instance".into());
        checks.push(Check::new(
            crate::assert::registry::IAM_TOKEN_ACCEPTED.on(node_name),
            false,
            "the webhook accepts the node's token",
            last,
        ));
    }
    if let Some(want) = &expect.identity {
        let (user, groups) = created
            .map(|e| (e.acting_user().username.clone(), e.acting_user().groups.clone()))
            .unwrap_or_default();
        if let Some(u) = want.username.clone() {
            checks.push(Check::new(
                crate::assert::registry::IDENTITY_USERNAME.on(node_name),
                user == u,
                u,
                if created.is_some() {
                    user.clone()
                } else {
                    "no Node create in the audit log".into()
                },
            ));
        }
        if !want.groups.is_empty() {
            let missing: Vec<&String> = want.groups.iter().filter(|g| !groups.contains(g)).collect();
            checks.push(Check::new(
                crate::assert::registry::IDENTITY_GROUPS.on(node_name),
                created.is_some() && missing.is_empty(),
                format!("[{}] (subset)", want.groups.join(", ")),
                format!("[{}]", groups.join(", ")),
            ));
        }
    }
    if let Some(who) = &expect.aws_auth_changed_by {
        let role_arn = format!("arn:aws:iam::{}:role/{}", sc.cluster.account_id, group.role);
        let writes = audit::aws_auth_writes(events, &role_arn, instance.launch_time);
        let by = writes.iter().find(|w| &w.acting_user().username == who);
        let before = match (by, created) {
            (Some(w), Some(n)) => w.stage_timestamp < n.stage_timestamp,
            _ => false,
        };
        let actual = match (by, created) {
            (Some(w), Some(n)) => format!(
                "written by {who} at {}, Node created at {}",
                w.stage_timestamp, n.stage_timestamp
            ),
            (Some(w), None) => format!(
                "written by {who} at {}; no Node create in the audit log",
                w.stage_timestamp
            ),
            (None, _) => format!(
                "writers of {role_arn}: [{}]",
                writes
                    .iter()
                    .map(|w| w.acting_user().username.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        checks.push(Check::new(
            crate::assert::registry::AWS_AUTH_CHANGED_BY.on(node_name),
            by.is_some() && before,
            format!("{who} added {role_arn} before the Node registered"),
            actual,
        ));
    }
    (checks, notes)
}

#[cfg(test)]
mod tests {
    use crate::fakes::authenticator::Decision;

    fn decision(token: &str) -> Decision {
        Decision {
            at: std::time::SystemTime::now(),
            control_plane: "cp".into(),
            cluster: "demo".into(),
            instance_id: Some("i-1".into()),
            access_key_id: None,
            granted: None,
            reason: String::new(),
            token: token.into(),
        }
    }

    /// The format check reads every token the node presented, not the first: one odd token fails it.
    #[test]
    fn every_token_is_checked_for_a_real_clients_format() {
        let real = crate::eks::token::REFERENCE_TOKEN.trim();
        let padded = format!("{real}=");
        let good = super::token_format_check("n/IAM token format".into(), &[decision(real), decision(real)]);
        assert!(good.passed, "{}", good.actual);
        let mixed = super::token_format_check("n/IAM token format".into(), &[decision(real), decision(&padded)]);
        assert!(!mixed.passed, "{}", mixed.actual);
        assert!(mixed.actual.contains("1 of 2"), "{}", mixed.actual);
        assert!(!super::token_format_check("n/x".into(), &[]).passed);
    }
}
