//! Kubeconfig files: the ones the harness writes (client certificates), clients from them, and the ones providers
//! write (k3s, kind), read back and pointed at the port Docker mapped.
use crate::error::{Error, Result};
use std::path::Path;

fn kubeconfig_err(e: impl std::fmt::Display) -> Error {
    Error::ControlPlane {
        component: "kubeconfig".into(),
        message: e.to_string(),
    }
}

/// Writes a kubeconfig that authenticates with a client certificate.
pub fn write_kubeconfig(
    path: &Path,
    server: &str,
    ca_pem: &str,
    cert_pem: &str,
    key_pem: &str,
    user: &str,
) -> Result<()> {
    use base64::Engine;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "nodejoin", "cluster": { "server": server, "certificate-authority-data": b64(ca_pem) } }],
        "users": [{ "name": user, "user": { "client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem) } }],
        "contexts": [{ "name": "nodejoin", "context": { "cluster": "nodejoin", "user": user } }],
        "current-context": "nodejoin",
    });
    let text = serde_yaml_ng::to_string(&doc).map_err(kubeconfig_err)?;
    crate::paths::write_private(path, text.as_bytes()).map_err(|e| Error::io(path, e))
}

/// A kube client from a kubeconfig file.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client> {
    Ok(kube::Client::try_from(bounded_config(path).await?)?)
}

/// A kubeconfig file's client configuration, every call bounded ([`bound`]).
async fn bounded_config(path: &Path) -> Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(path).map_err(kubeconfig_err)?;
    let mut config = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(kubeconfig_err)?;
    bound(&mut config);
    Ok(config)
}

/// A client from a kubeconfig file that retries nothing itself: kube's default policy retries a 429 for up to
/// 15 backoffs (minutes), and a 429 is an answer a drain must see (an eviction a PodDisruptionBudget refuses).
pub async fn answering_client(path: &Path) -> Result<kube::Client> {
    let mut config = bounded_config(path).await?;
    config.default_retry = false;
    Ok(kube::Client::try_from(config)?)
}

/// How long the harness waits for the API server to accept a connection, and for any answer on it (a watch
/// included: the harness's watches ask the server to end them sooner, see `controllers::cache`).
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
pub const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// Every call bounded: an API server that stops answering (stopped, overloaded, its etcd gone) fails a call
/// within [`READ_TIMEOUT`] instead of holding a scenario past its deadline (kube's defaults wait 295 s).
pub fn bound(config: &mut kube::Config) {
    config.connect_timeout = Some(CONNECT_TIMEOUT);
    config.read_timeout = Some(READ_TIMEOUT);
    config.write_timeout = Some(READ_TIMEOUT);
}

/// A kubeconfig a provider wrote (k3s's, kind's), pointed at `server` (the port Docker mapped), and the cluster CA it names.
pub fn point_at(yaml: &str, server: &str) -> std::result::Result<(String, String), String> {
    use base64::Engine;
    let mut doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(yaml).map_err(|e| format!("kubeconfig: {e}"))?;
    let clusters = doc
        .get_mut("clusters")
        .and_then(|c| c.as_sequence_mut())
        .filter(|c| !c.is_empty())
        .ok_or("kubeconfig has no clusters")?;
    let mut ca = None;
    for c in clusters.iter_mut() {
        let cluster = c.get_mut("cluster").ok_or("kubeconfig cluster without `cluster`")?;
        if ca.is_none() {
            let data = cluster
                .get("certificate-authority-data")
                .and_then(|v| v.as_str())
                .ok_or("kubeconfig names no certificate-authority-data")?;
            let pem = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map_err(|e| format!("certificate-authority-data: {e}"))?;
            ca = Some(String::from_utf8(pem).map_err(|e| format!("certificate-authority-data: {e}"))?);
        }
        if let Some(m) = cluster.as_mapping_mut() {
            m.insert("server".into(), server.into());
        }
    }
    let text = serde_yaml_ng::to_string(&doc).map_err(|e| e.to_string())?;
    Ok((text, ca.unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_is_pointed_at_the_mapped_port_and_yields_the_ca() {
        use base64::Engine;
        let ca = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let k3s = format!(
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: {}\n    server: https://127.0.0.1:6443\n  name: default\ncontexts:\n- context: {{cluster: default, user: default}}\n  name: default\ncurrent-context: default\nkind: Config\nusers:\n- name: default\n  user: {{client-certificate-data: QQ==, client-key-data: QQ==}}\n",
            base64::engine::general_purpose::STANDARD.encode(ca)
        );
        let (text, got_ca) = point_at(&k3s, "https://127.0.0.1:32771").unwrap();
        assert_eq!(got_ca, ca);
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(
            doc["clusters"][0]["cluster"]["server"].as_str(),
            Some("https://127.0.0.1:32771")
        );
        assert_eq!(doc["users"][0]["name"].as_str(), Some("default"));
        assert!(point_at("clusters: []", "x").is_err());
        assert!(point_at("not: [valid", "x").is_err());
    }
}
