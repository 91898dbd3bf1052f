//! The IAM side of a scenario (`auth: iam`): mapping node roles before the nodes boot, the way EKS does for a
//! managed node group (as `eks:node-manager`) or the cluster's user does for a self-managed one, and the
//! checks on what the token webhook granted and the API server saw.
use super::env::{Environment, SharedCluster};
use crate::assert::{audit, Check};
use crate::eks::aws_auth::{AwsAuth, RoleMapping};
use crate::eks::identity::{AccessEntry, AccessEntryType};
use crate::error::{Error, Result};
use crate::fakes::eks::ClusterRecord;
use crate::scenario::model::{AuthenticationMode, MappingVia, NodeGroup, NodegroupKind, RoleMappingSpec, Scenario};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};

/// The user EKS edits aws-auth as for managed node groups.
pub const NODE_MANAGER: &str = "eks:node-manager";

fn invalid(sc: &Scenario, message: String) -> Error {
    Error::ScenarioInvalid {
        file: std::path::PathBuf::from(&sc.name),
        message,
    }
}

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

/// A Kubernetes API call of the IAM set-up failed: the cluster's fault, not the scenario file's.
fn api(sc: &Scenario, message: String) -> Error {
    Error::ControlPlane {
        component: "kube-apiserver".into(),
        message: format!("setting up aws-auth for scenario {}: {message}", sc.name),
    }
}

/// Where a group's role mapping goes when the scenario does not say.
pub fn mapping_via(mode: AuthenticationMode, spec: &RoleMappingSpec) -> MappingVia {
    spec.via.unwrap_or(match mode {
        AuthenticationMode::Api => MappingVia::AccessEntry,
        _ => MappingVia::AwsAuth,
    })
}

/// Writes aws-auth and access entries for the scenario; returns one note per change.
pub async fn map_node_roles(sc: &Scenario, cluster: &SharedCluster, record: &ClusterRecord) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let admin = cluster.client.clone();
    let mode = sc.cluster.authentication_mode;
    apply_node_manager_rbac(&admin).await?;
    // A shared control plane may still hold an earlier IAM scenario's aws-auth: every scenario starts without one.
    if remove_aws_auth(&admin).await.map_err(|e| api(sc, e))? {
        notes.push("aws-auth: an earlier scenario's ConfigMap removed from the shared control plane".into());
    }
    if let Some(extra) = &sc.cluster.aws_auth {
        for m in &extra.map_roles {
            upsert_aws_auth(&admin, m.clone()).await.map_err(|e| api(sc, e))?;
        }
        if !extra.map_users.is_empty() {
            let mut current = read(&admin).await.map_err(|e| api(sc, e))?;
            current.map_users.extend(extra.map_users.iter().cloned());
            write(&admin, &current).await.map_err(|e| api(sc, e))?;
        }
        notes.push("aws-auth: the scenario's own entries written by the cluster creator (kubernetes-admin)".into());
    }
    for e in &sc.cluster.access_entries {
        let entry = AccessEntry::new(
            &e.principal_arn,
            e.entry_type,
            e.username.as_deref(),
            &e.kubernetes_groups,
        )
        .map_err(|m| invalid(sc, format!("accessEntries: {m}")))?;
        create_entry(sc, record, entry)?;
    }
    let mut done = Vec::new();
    for g in &sc.nodes {
        if done.contains(&g.role) {
            continue;
        }
        done.push(g.role.clone());
        let role_arn = format!("arn:aws:iam::{}:role/{}", sc.cluster.account_id, g.role);
        match mapping_via(mode, &g.role_mapping) {
            MappingVia::None => notes.push(format!("{}: role not mapped (by the scenario's choice)", g.role)),
            MappingVia::AwsAuth => {
                let (client, who) = match g.nodegroup {
                    NodegroupKind::Managed => (
                        cluster.control_plane.lock().await.client_as(NODE_MANAGER, &[]).await?,
                        NODE_MANAGER,
                    ),
                    NodegroupKind::SelfManaged => (admin.clone(), "kubernetes-admin"),
                };
                let mapping = RoleMapping {
                    rolearn: role_arn.clone(),
                    username: g.role_mapping.username.clone(),
                    groups: g.role_mapping.groups.clone(),
                };
                upsert_aws_auth(&client, mapping).await.map_err(|e| api(sc, e))?;
                notes.push(format!("aws-auth: {role_arn} mapped by {who} ({} node group)", kind(g)));
            }
            MappingVia::AccessEntry => {
                let entry =
                    node_entry(&role_arn, &g.role_mapping).map_err(|m| invalid(sc, format!("{}: {m}", g.name)))?;
                let t = entry.entry_type.as_str();
                create_entry(sc, record, entry)?;
                notes.push(format!(
                    "access entry: {role_arn} ({t}) created for the {} node group",
                    kind(g)
                ));
            }
        }
    }
    Ok(notes)
}

fn kind(g: &NodeGroup) -> &'static str {
    match g.nodegroup {
        NodegroupKind::Managed => "managed",
        NodegroupKind::SelfManaged => "self-managed",
    }
}

/// EC2_LINUX for the default node mapping; otherwise a STANDARD entry with the scenario's username and groups.
fn node_entry(role_arn: &str, spec: &RoleMappingSpec) -> std::result::Result<AccessEntry, String> {
    let defaults = RoleMappingSpec::default();
    if spec.username == defaults.username && spec.groups == defaults.groups {
        AccessEntry::new(role_arn, AccessEntryType::Ec2Linux, None, &[])
    } else {
        AccessEntry::new(role_arn, AccessEntryType::Standard, Some(&spec.username), &spec.groups)
    }
}

fn create_entry(sc: &Scenario, record: &ClusterRecord, entry: AccessEntry) -> Result<()> {
    if record.authentication_mode == AuthenticationMode::ConfigMap {
        return Err(invalid(
            sc,
            "access entries need authenticationMode API or API_AND_CONFIG_MAP, not CONFIG_MAP".into(),
        ));
    }
    record
        .create_access_entry(entry)
        .map(|_| ())
        .map_err(|(_, code, m)| invalid(sc, format!("CreateAccessEntry: {code}: {m}")))
}

async fn read(client: &kube::Client) -> std::result::Result<AwsAuth, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    match api
        .get_opt("aws-auth")
        .await
        .map_err(|e| format!("read aws-auth: {e}"))?
    {
        Some(cm) => AwsAuth::parse(&cm.data.unwrap_or_default()),
        None => Ok(AwsAuth::default()),
    }
}

async fn write(client: &kube::Client, auth: &AwsAuth) -> std::result::Result<(), String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some("aws-auth".into()),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        data: Some(auth.to_data()?),
        ..Default::default()
    };
    match api.get_opt("aws-auth").await.map_err(|e| e.to_string())? {
        Some(existing) => {
            let mut updated = cm;
            updated.metadata.resource_version = existing.metadata.resource_version;
            api.replace("aws-auth", &PostParams::default(), &updated)
                .await
                .map_err(|e| format!("update aws-auth: {e}"))?;
        }
        None => {
            api.create(&PostParams::default(), &cm)
                .await
                .map_err(|e| format!("create aws-auth: {e}"))?;
        }
    }
    Ok(())
}

/// Deletes aws-auth; `true` if there was one.
async fn remove_aws_auth(client: &kube::Client) -> std::result::Result<bool, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    match api.delete("aws-auth", &Default::default()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(format!("delete aws-auth: {e}")),
    }
}

/// Adds `mapping` to aws-auth (creating the ConfigMap if needed) as the client's user.
async fn upsert_aws_auth(client: &kube::Client, mapping: RoleMapping) -> std::result::Result<(), String> {
    let mut current = read(client).await?;
    if current.map_roles.iter().any(|r| r == &mapping) {
        return Ok(());
    }
    current.map_roles.push(mapping);
    write(client, &current).await
}

/// The Role EKS gives `eks:node-manager`: it may create aws-auth and edit it, nothing else.
async fn apply_node_manager_rbac(client: &kube::Client) -> Result<()> {
    let pp = PatchParams::apply("nodejoin").force();
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(client.clone(), "kube-system");
    let role = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": { "name": NODE_MANAGER, "namespace": "kube-system", "labels": { "app.kubernetes.io/managed-by": "nodejoin" } },
        "rules": [
            { "apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"] },
            { "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["aws-auth"], "verbs": ["get", "update", "patch"] },
        ],
    });
    roles.patch(NODE_MANAGER, &pp, &Patch::Apply(&role)).await?;
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> = Api::namespaced(client.clone(), "kube-system");
    let binding = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": { "name": NODE_MANAGER, "namespace": "kube-system", "labels": { "app.kubernetes.io/managed-by": "nodejoin" } },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NODE_MANAGER },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": NODE_MANAGER }],
    });
    bindings.patch(NODE_MANAGER, &pp, &Patch::Apply(&binding)).await?;
    Ok(())
}

/// The token webhook's decisions about `instance_id`'s tokens, one line each.
pub fn decision_lines(env: &Environment, instance_id: &str) -> String {
    env.authenticator
        .decisions_for(instance_id)
        .iter()
        .map(|d| d.line())
        .collect::<Vec<_>>()
        .join("\n")
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
    let c = |what: &str| format!("{node_name}/{what}");
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
        checks.push(token_format_check(c("IAM token format"), &decisions));
    } else if sc.cluster.auth == crate::scenario::model::AuthMode::Iam {
        let last = decisions
            .last()
            .map(|d| d.line())
            .unwrap_or_else(|| "no TokenReview for this instance".into());
        checks.push(Check::new(
            c("IAM token accepted"),
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
                c("identity.username"),
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
                c("identity.groups"),
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
            c("aws-auth changed by"),
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
