//! What every provider hands its API server besides flags: the audit policy (who changed aws-auth, Node and CSR
//! traffic) and the kubeconfig-format file pointing it at the harness's token webhook.
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The audit policy, written next to the control plane's other files.
pub const AUDIT_POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: RequestResponse
    resources:
      - group: ""
        resources: ["configmaps"]
        resourceNames: ["aws-auth"]
  # A create carries no name when the policy is evaluated: log kube-system ConfigMap creations in full (a handful
  # at start-up), so the creation of aws-auth and its author are on record.
  - level: RequestResponse
    verbs: ["create"]
    namespaces: ["kube-system"]
    resources:
      - group: ""
        resources: ["configmaps"]
  # The Node as its registrant sent it: which labels, taints and providerID the kubelet itself registered.
  - level: Request
    verbs: ["create"]
    resources:
      - group: ""
        resources: ["nodes"]
  - level: Metadata
    resources:
      - group: ""
        resources: ["nodes", "nodes/status"]
      - group: "certificates.k8s.io"
        resources: ["certificatesigningrequests", "certificatesigningrequests/approval"]
  - level: None
"#;

/// The kubeconfig-format file that points the API server at the token webhook.
pub fn write_webhook_config(dir: &Path, w: &crate::cluster::TokenWebhook) -> Result<PathBuf> {
    use base64::Engine;
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "eks-iam-authenticator", "cluster": {
            "server": w.url,
            "certificate-authority-data": base64::engine::general_purpose::STANDARD.encode(&w.ca_pem),
        }}],
        "users": [{ "name": "apiserver", "user": {} }],
        "contexts": [{ "name": "webhook", "context": { "cluster": "eks-iam-authenticator", "user": "apiserver" } }],
        "current-context": "webhook",
    });
    let path = dir.join("token-webhook.kubeconfig");
    let text = serde_yaml_ng::to_string(&doc).map_err(|e| Error::ControlPlane {
        component: "token webhook".into(),
        message: e.to_string(),
    })?;
    std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}
