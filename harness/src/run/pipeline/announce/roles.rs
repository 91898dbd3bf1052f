//! Mapping node roles before the nodes boot (`auth: iam`), the way EKS does for a managed node group (as
//! `eks:node-manager`) or the cluster's user does for a self-managed one.
use crate::eks::aws_auth::{AwsAuth, RoleMapping};
use crate::eks::identity::{AccessEntry, AccessEntryType};
use crate::error::{Error, Result};
use crate::fakes::eks::ClusterRecord;
use crate::run::env::SharedCluster;
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
    rbac_synced(client).await
}

/// How long the API server's RBAC authorizer may take to see a Role and RoleBinding just written.
const RBAC_SYNC: std::time::Duration = std::time::Duration::from_secs(10);

/// Waits until the authorizer allows `eks:node-manager` what its Role grants (a SubjectAccessReview, asked as
/// the cluster creator), for up to [`RBAC_SYNC`]: it reads Roles and RoleBindings from its informer's cache, a
/// moment behind what was just written, and a call made as the node manager at once was once refused (a
/// scenario error with nothing wrong). After that the answer is the authorizer's.
async fn rbac_synced(client: &kube::Client) -> Result<()> {
    use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
    let reviews: Api<SubjectAccessReview> = Api::all(client.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(NODE_MANAGER.into()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some("kube-system".into()),
                verb: Some("get".into()),
                resource: Some("configmaps".into()),
                name: Some("aws-auth".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let t0 = std::time::Instant::now();
    loop {
        let allowed = reviews
            .create(&PostParams::default(), &review)
            .await?
            .status
            .is_some_and(|s| s.allowed);
        if allowed || t0.elapsed() >= RBAC_SYNC {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}
