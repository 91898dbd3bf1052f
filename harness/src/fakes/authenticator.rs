//! The API server's token webhook, playing EKS's IAM authenticator: a `TokenReview` for a `k8s-aws-v1.` token
//! is answered by verifying the presigned GetCallerIdentity (as STS would, in-process), then mapping the
//! caller through the cluster's access entries and/or its live `kube-system/aws-auth`, per its authentication
//! mode. Served over HTTPS; every decision is kept, with its reason, for reports and evidence.
use super::instances::Instances;
use crate::eks::aws_auth::AwsAuth;
use crate::eks::identity::{self, Mapped};
use crate::eks::token;
use crate::fakes::eks::Eks;
use axum::extract::{Path, State};
use axum::Json;
use k8s_openapi::api::core::v1::ConfigMap;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

/// One TokenReview answered.
#[derive(Debug, Clone)]
pub struct Decision {
    pub at: SystemTime,
    pub control_plane: String,
    /// The EKS cluster the token was checked for.
    pub cluster: String,
    /// The instance whose credentials signed the token, when the key is one IMDS issued.
    pub instance_id: Option<String>,
    pub access_key_id: Option<String>,
    pub granted: Option<Mapped>,
    /// Why it was refused, or which entry granted it.
    pub reason: String,
    pub token: String,
}

impl Decision {
    /// One line for reports and evidence.
    pub fn line(&self) -> String {
        match &self.granted {
            Some(m) => format!(
                "{} accepted: {} as {} groups [{}] ({})",
                crate::fakes::rfc3339(self.at),
                self.access_key_id.as_deref().unwrap_or("?"),
                m.username,
                m.groups.join(", "),
                m.source
            ),
            None => format!(
                "{} rejected: {} ({})",
                crate::fakes::rfc3339(self.at),
                self.reason,
                self.access_key_id.as_deref().unwrap_or("unknown key")
            ),
        }
    }
}

/// What the webhook knows about one control plane.
struct Binding {
    client: kube::Client,
    clusters: Vec<String>,
}

pub struct Authenticator {
    instances: Arc<Instances>,
    eks: Arc<Eks>,
    bindings: RwLock<HashMap<String, Binding>>,
    decisions: Mutex<Vec<Decision>>,
    /// Where each review is also logged as a call of the node whose token it was.
    calls: std::sync::OnceLock<Arc<super::calls::CallLog>>,
}

impl Authenticator {
    pub fn new(instances: Arc<Instances>, eks: Arc<Eks>) -> Arc<Self> {
        Arc::new(Self {
            instances,
            eks,
            bindings: RwLock::new(HashMap::new()),
            decisions: Mutex::new(Vec::new()),
            calls: std::sync::OnceLock::new(),
        })
    }

    /// Logs every TokenReview into `calls` too, as a call of the instance whose credentials signed the token
    /// (the API server makes the request, on the node's behalf).
    pub fn log_calls_to(&self, calls: Arc<super::calls::CallLog>) {
        let _ = self.calls.set(calls);
    }

    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new()
            .route("/authenticate/{control_plane}", axum::routing::post(review))
            .with_state(self.clone())
    }

    /// The path a control plane's API server posts its TokenReviews to.
    pub fn path(control_plane: &str) -> String {
        format!("/authenticate/{control_plane}")
    }

    /// Tells the webhook how to read a control plane's aws-auth.
    pub fn bind(&self, control_plane: &str, client: kube::Client) {
        if let Ok(mut b) = self.bindings.write() {
            b.insert(
                control_plane.to_string(),
                Binding {
                    client,
                    clusters: Vec::new(),
                },
            );
        }
    }

    /// Makes tokens for EKS cluster `name` valid on `control_plane` (the `x-k8s-aws-id` they must carry).
    pub fn add_cluster(&self, control_plane: &str, name: &str) {
        if let Ok(mut b) = self.bindings.write() {
            if let Some(binding) = b.get_mut(control_plane) {
                if !binding.clusters.iter().any(|c| c == name) {
                    binding.clusters.push(name.to_string());
                }
            }
        }
    }

    pub fn remove_cluster(&self, control_plane: &str, name: &str) {
        if let Ok(mut b) = self.bindings.write() {
            if let Some(binding) = b.get_mut(control_plane) {
                binding.clusters.retain(|c| c != name);
            }
        }
    }

    /// Decisions about tokens signed with `instance_id`'s credentials, oldest first.
    pub fn decisions_for(&self, instance_id: &str) -> Vec<Decision> {
        self.decisions
            .lock()
            .map(|d| {
                d.iter()
                    .filter(|x| x.instance_id.as_deref() == Some(instance_id))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Reviews `token` for `control_plane` now.
    pub async fn decide(&self, control_plane: &str, token: &str) -> Decision {
        let started = std::time::Instant::now();
        let parsed = token::parse(token);
        let key = parsed
            .as_ref()
            .ok()
            .map(|t| t.presigned.credential.access_key_id.clone());
        let instance_id = key
            .as_deref()
            .and_then(|k| self.instances.iam.lookup(k))
            .map(|c| c.instance_id.clone());
        let (clusters, client) = match self.bindings.read() {
            Ok(b) => match b.get(control_plane) {
                Some(x) => (x.clusters.clone(), Some(x.client.clone())),
                None => (Vec::new(), None),
            },
            Err(_) => (Vec::new(), None),
        };
        let mut decision = Decision {
            at: SystemTime::now(),
            control_plane: control_plane.to_string(),
            cluster: clusters.join(","),
            instance_id,
            access_key_id: key,
            granted: None,
            reason: String::new(),
            token: token.to_string(),
        };
        match self.map(parsed, &clusters, client).await {
            Ok((cluster, mapped)) => {
                decision.cluster = cluster;
                decision.reason = mapped.source.clone();
                decision.granted = Some(mapped);
            }
            Err(reason) => decision.reason = reason,
        }
        tracing::info!(control_plane, "token webhook: {}", decision.line());
        if let (Some(log), Some(instance)) = (self.calls.get(), &decision.instance_id) {
            let ip = self
                .instances
                .by_id(instance)
                .map(|i| std::net::IpAddr::V4(i.private_ip))
                .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED));
            log.record(super::calls::Call {
                at: decision.at,
                started,
                service: "token-webhook",
                action: if decision.granted.is_some() {
                    "TokenReview (accepted)".into()
                } else {
                    "TokenReview (rejected)".into()
                },
                status: 200,
                latency: started.elapsed(),
                source: ip,
                instance_id: Some(instance.clone()),
                fault: None,
            });
        }
        if let Ok(mut d) = self.decisions.lock() {
            d.push(decision.clone());
        }
        decision
    }

    async fn map(
        &self,
        parsed: Result<token::Token, String>,
        clusters: &[String],
        client: Option<kube::Client>,
    ) -> Result<(String, Mapped), String> {
        let t = parsed.map_err(|e| format!("malformed token: {e}"))?;
        let client = client.ok_or("no control plane is bound to this webhook path")?;
        if clusters.is_empty() {
            return Err("no EKS cluster is announced for this control plane".into());
        }
        let now = SystemTime::now();
        let mut first_error = None;
        let mut verified = None;
        for c in clusters {
            match token::verify(&t, c, &self.instances.iam, now) {
                Ok(creds) => {
                    verified = Some((c.clone(), creds));
                    break;
                }
                Err(e) => {
                    first_error.get_or_insert(e.to_string());
                }
            }
        }
        let Some((cluster, creds)) = verified else {
            return Err(first_error.unwrap_or_default());
        };
        let record = self
            .eks
            .get(&cluster)
            .ok_or_else(|| format!("EKS cluster '{cluster}' is not known"))?;
        let caller = super::sts::caller(&creds);
        // In API mode EKS never reads aws-auth, so a malformed one cannot break logins there.
        let aws_auth = match record.authentication_mode {
            crate::scenario::model::AuthenticationMode::Api => None,
            _ => read_aws_auth(&client).await?,
        };
        let instances = self.instances.clone();
        let resolve = move |id: &str| instances.by_id(id).map(|i| i.private_dns_name());
        let mapped = identity::map(
            record.authentication_mode,
            aws_auth.as_ref(),
            &record.access_entries(),
            &caller,
            &resolve,
        )?;
        Ok((cluster, mapped))
    }
}

/// `kube-system/aws-auth`, parsed; `None` when it does not exist. A malformed ConfigMap rejects every IAM
/// login, as it does in EKS.
async fn read_aws_auth(client: &kube::Client) -> Result<Option<AwsAuth>, String> {
    let api: kube::Api<ConfigMap> = kube::Api::namespaced(client.clone(), "kube-system");
    match api.get_opt("aws-auth").await {
        Ok(None) => Ok(None),
        Ok(Some(cm)) => AwsAuth::parse(&cm.data.unwrap_or_default())
            .map(Some)
            .map_err(|e| format!("kube-system/aws-auth is malformed: {e}")),
        Err(e) => Err(format!("cannot read kube-system/aws-auth: {e}")),
    }
}

async fn review(
    State(auth): State<Arc<Authenticator>>,
    Path(control_plane): Path<String>,
    Json(body): Json<serde_json::Value>,
) -> Json<serde_json::Value> {
    let token = body["spec"]["token"].as_str().unwrap_or_default();
    let api_version = body["apiVersion"]
        .as_str()
        .unwrap_or("authentication.k8s.io/v1")
        .to_string();
    let d = auth.decide(&control_plane, token).await;
    let status = match &d.granted {
        Some(m) => serde_json::json!({
            "authenticated": true,
            "user": { "username": m.username, "uid": m.uid, "groups": m.groups, "extra": m.extra },
        }),
        None => serde_json::json!({ "authenticated": false, "error": d.reason }),
    };
    Json(serde_json::json!({ "apiVersion": api_version, "kind": "TokenReview", "status": status }))
}
