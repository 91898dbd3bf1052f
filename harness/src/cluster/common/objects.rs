//! Cluster objects a node join depends on: TLS-bootstrap RBAC, EKS's node-bootstrapper role, bootstrap tokens.
use crate::error::Result;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use std::collections::BTreeMap;

const MANAGER: &str = "nodejoin";

fn binding(name: &str, role: &str, group: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": { "name": name, "labels": { "app.kubernetes.io/managed-by": "nodejoin" } },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group }],
    })
}

/// The bindings client-certificate TLS bootstrapping needs, and the ClusterRole EKS creates so kubelets may
/// request serving certificates (`eks:node-bootstrapper`).
pub async fn apply_node_bootstrap_rbac(client: &kube::Client) -> Result<()> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let role = serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": { "name": "eks:node-bootstrapper", "labels": { "app.kubernetes.io/managed-by": "nodejoin" } },
        "rules": [{ "apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/selfnodeserver"], "verbs": ["create"] }],
    });
    let pp = PatchParams::apply(MANAGER).force();
    roles.patch("eks:node-bootstrapper", &pp, &Patch::Apply(&role)).await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let wanted = [
        (
            "nodejoin:kubelet-bootstrap",
            "system:node-bootstrapper",
            "system:bootstrappers",
        ),
        (
            "nodejoin:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            "system:bootstrappers",
        ),
        (
            "nodejoin:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "system:nodes",
        ),
        ("eks:node-bootstrapper", "eks:node-bootstrapper", "system:bootstrappers"),
        ("eks:node-bootstrapper-nodes", "eks:node-bootstrapper", "system:nodes"),
    ];
    for (name, role, group) in wanted {
        bindings
            .patch(name, &pp, &Patch::Apply(&binding(name, role, group)))
            .await?;
    }
    Ok(())
}

/// A bootstrap token (`<id>.<secret>`) as kubeadm creates it: Secret `kube-system/bootstrap-token-<id>`.
pub struct BootstrapToken {
    pub id: String,
    pub secret: String,
}

impl BootstrapToken {
    pub fn token(&self) -> String {
        format!("{}.{}", self.id, self.secret)
    }
}

fn token_chars(n: usize) -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..n)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// Creates a token valid for authentication, expiring after `ttl`.
pub async fn create_bootstrap_token(
    client: &kube::Client,
    description: &str,
    ttl: std::time::Duration,
) -> Result<BootstrapToken> {
    let token = BootstrapToken {
        id: token_chars(6),
        secret: token_chars(16),
    };
    let expiration = crate::fakes::rfc3339(std::time::SystemTime::now() + ttl);
    let data = BTreeMap::from([
        ("token-id".to_string(), token.id.clone()),
        ("token-secret".to_string(), token.secret.clone()),
        ("usage-bootstrap-authentication".to_string(), "true".to_string()),
        ("usage-bootstrap-signing".to_string(), "true".to_string()),
        ("description".to_string(), description.to_string()),
        ("expiration".to_string(), expiration),
    ]);
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(format!("bootstrap-token-{}", token.id)),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        type_: Some("bootstrap.kubernetes.io/token".into()),
        string_data: Some(data),
        ..Default::default()
    };
    Api::<Secret>::namespaced(client.clone(), "kube-system")
        .create(&PostParams::default(), &secret)
        .await?;
    Ok(token)
}

/// Deletes a bootstrap token (scenario teardown).
pub async fn delete_bootstrap_token(client: &kube::Client, token: &BootstrapToken) {
    let api = Api::<Secret>::namespaced(client.clone(), "kube-system");
    let _ = api
        .delete(&format!("bootstrap-token-{}", token.id), &Default::default())
        .await;
}

/// Waits until kube-controller-manager signs certificates: it answers `/healthz` well before its CSR
/// controllers have synced, and a kubelet that starts in that window waits seconds for its client certificate.
/// A throw-away `kube-apiserver-client` CSR, approved here, is issued as soon as signing works.
pub async fn wait_for_csr_signing(client: &kube::Client, timeout: std::time::Duration) -> Result<bool> {
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequest, CertificateSigningRequestCondition, CertificateSigningRequestSpec,
    };
    let key = rcgen::KeyPair::generate().map_err(|e| crate::Error::Pki(e.to_string()))?;
    let mut params = rcgen::CertificateParams::default();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "nodejoin:readiness-probe");
    let pem = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(|e| crate::Error::Pki(e.to_string()))?;
    let name = format!("nodejoin-readiness-{}", token_chars(6));
    let api: Api<CertificateSigningRequest> = Api::all(client.clone());
    let csr = CertificateSigningRequest {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        spec: CertificateSigningRequestSpec {
            request: k8s_openapi::ByteString(pem.into_bytes()),
            signer_name: "kubernetes.io/kube-apiserver-client".into(),
            usages: Some(vec!["client auth".into(), "digital signature".into()]),
            expiration_seconds: Some(600),
            ..Default::default()
        },
        status: None,
    };
    let mut created = api.create(&PostParams::default(), &csr).await?;
    created.status.get_or_insert_with(Default::default).conditions = Some(vec![CertificateSigningRequestCondition {
        type_: "Approved".into(),
        status: "True".into(),
        reason: Some("NodejoinReadinessProbe".into()),
        ..Default::default()
    }]);
    api.replace_subresource("approval", &name, &PostParams::default(), &created)
        .await?;
    let deadline = std::time::Instant::now() + timeout;
    let mut issued = false;
    while std::time::Instant::now() < deadline {
        let current = api.get(&name).await?;
        if current
            .status
            .and_then(|s| s.certificate)
            .is_some_and(|c| !c.0.is_empty())
        {
            issued = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _ = api.delete(&name, &Default::default()).await;
    Ok(issued)
}
