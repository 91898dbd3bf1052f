//! Fake ECR API: `GetAuthorizationToken` (AWS JSON 1.1), which nodeadm calls before it pulls the EKS sandbox
//! image and which the image credential provider calls for the kubelet. Signed with the instance's credentials
//! (SigV4 verified); every password it hands out is remembered, so the fake registry can tell whether a pull
//! came with a token that this chain really issued.
use super::instances::Instances;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

const TARGET: &str = "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken";
/// ECR tokens live 12 hours.
const TOKEN_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The account of the EKS image registry in every non-opt-in region.
pub const EKS_REGISTRY_ACCOUNT: &str = "602401143452";

/// The EKS image registry host for `region` (the non-opt-in account; `services/domain` is `amazonaws.com`).
pub fn eks_registry_host(region: &str) -> String {
    format!("{EKS_REGISTRY_ACCOUNT}.dkr.ecr.{region}.amazonaws.com")
}

pub struct Ecr {
    instances: Arc<Instances>,
    /// password -> instance id it was issued to.
    issued: Mutex<HashMap<String, String>>,
}

impl Ecr {
    pub fn new(instances: Arc<Instances>) -> Arc<Self> {
        Arc::new(Self {
            instances,
            issued: Mutex::new(HashMap::new()),
        })
    }

    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new().fallback(handle).with_state(self.clone())
    }

    /// The instance a registry password was issued to, if this fake issued it.
    pub fn holder(&self, password: &str) -> Option<String> {
        self.issued.lock().ok()?.get(password).cloned()
    }

    /// Records a password issued to `instance_id`.
    pub(crate) fn remember(&self, password: &str, instance_id: &str) {
        if let Ok(mut m) = self.issued.lock() {
            m.insert(password.to_string(), instance_id.to_string());
        }
    }

    /// How many tokens `instance_id` obtained.
    pub fn tokens_for(&self, instance_id: &str) -> usize {
        self.issued
            .lock()
            .map(|m| m.values().filter(|v| *v == instance_id).count())
            .unwrap_or(0)
    }
}

async fn handle(State(ecr): State<Arc<Ecr>>, call: super::SignedCall) -> Response {
    use super::aws_json_error;
    let target = call
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let (creds, region) = match call.verify_json(&ecr.instances.iam, "ecr", None) {
        Ok(v) => (v.credentials, v.region),
        Err(r) => return *r,
    };
    if target != TARGET {
        return aws_json_error(
            StatusCode::BAD_REQUEST,
            "UnknownOperationException",
            &format!("nodejoin's fake ECR answers GetAuthorizationToken only, not '{target}'"),
        );
    }
    let input: serde_json::Value = if call.body.is_empty() {
        serde_json::json!({})
    } else {
        match serde_json::from_slice(&call.body) {
            Ok(v) => v,
            Err(e) => return aws_json_error(StatusCode::BAD_REQUEST, "SerializationException", &e.to_string()),
        }
    };
    let accounts: Vec<String> = match input["registryIds"].as_array() {
        Some(ids) if !ids.is_empty() => ids.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
        _ => vec![creds.account_id.clone()],
    };
    let expires = SystemTime::now() + TOKEN_LIFETIME;
    let expires_at = expires
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut data = Vec::new();
    for account in accounts {
        let password = super::random_hex(64);
        ecr.remember(&password, &creds.instance_id);
        let token = base64::engine::general_purpose::STANDARD.encode(format!("AWS:{password}"));
        data.push(serde_json::json!({
            "authorizationToken": token,
            "expiresAt": expires_at,
            "proxyEndpoint": format!("https://{account}.dkr.ecr.{region}.amazonaws.com"),
        }));
    }
    tracing::info!(instance = %creds.instance_id, "ecr: authorization token issued");
    (
        StatusCode::OK,
        [("content-type", "application/x-amz-json-1.1")],
        serde_json::json!({ "authorizationData": data }).to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::sigv4::tests::sign_headers;
    use crate::fakes::FakeServer;

    #[tokio::test]
    async fn tokens_are_signed_for_and_remembered() {
        let instances = Instances::new();
        let i = instances.register(crate::fakes::instances::tests::instance());
        let creds = instances.iam.serve(i.holder(), SystemTime::now()).unwrap().credentials;
        let ecr = Ecr::new(instances);
        let s = FakeServer::start("ecr", "127.0.0.1".parse().unwrap(), ecr.router())
            .await
            .unwrap();
        let url = format!("{}/", s.url());
        let client = reqwest::Client::new();
        let send = |target: &'static str, body: &'static str, signed: bool| {
            let headers = [("content-type", "application/x-amz-json-1.1"), ("x-amz-target", target)];
            let mut req = client.post(&url).body(body);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            if signed {
                for (k, v) in sign_headers("POST", &url, &headers, body.as_bytes(), &creds, "eu-west-1", "ecr") {
                    req = req.header(k, v);
                }
            }
            req.send()
        };
        let r = send(TARGET, "{\"registryIds\":[\"602401143452\"]}", true)
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let v: serde_json::Value = r.json().await.unwrap();
        let d = &v["authorizationData"][0];
        assert_eq!(
            d["proxyEndpoint"].as_str().unwrap(),
            format!("https://{}", eks_registry_host("eu-west-1"))
        );
        let token = base64::engine::general_purpose::STANDARD
            .decode(d["authorizationToken"].as_str().unwrap())
            .unwrap();
        let (user, password) = std::str::from_utf8(&token).unwrap().split_once(':').unwrap();
        assert_eq!(user, "AWS");
        assert_eq!(ecr.holder(password).as_deref(), Some(i.instance_id.as_str()));
        assert_eq!(ecr.tokens_for(&i.instance_id), 1);
        assert!(ecr.holder("made-up").is_none());

        assert_eq!(send(TARGET, "{}", false).await.unwrap().status(), 403);
        let other = send("AmazonEC2ContainerRegistry_V20150921.DescribeImages", "{}", true)
            .await
            .unwrap();
        assert_eq!(other.status(), 400);
        assert_eq!(ecr.tokens_for(&i.instance_id), 1);
    }
}
