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
use std::collections::{BTreeMap, HashMap};
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

/// The most of a token a logged decision keeps (a real one, with its session token, is under 4 KiB).
const TOKEN_KEPT: usize = 16 << 10;

impl super::capped::Weigh for Decision {
    fn weight(&self) -> usize {
        self.control_plane.len()
            + self.cluster.len()
            + self.instance_id.as_ref().map_or(0, String::len)
            + self.access_key_id.as_ref().map_or(0, String::len)
            + self.reason.len()
            + self.token.len()
    }
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
    /// The EKS cluster names the control plane serves now, with how many running scenarios announced each.
    clusters: BTreeMap<String, usize>,
}

/// A cluster name served by a control plane for as long as this lives: the scenario that announced it holds it
/// until it ends, and dropping it withdraws the name, so a shared control plane never keeps accepting tokens
/// minted for a scenario that is gone.
#[must_use = "dropping the announcement withdraws the cluster name at once"]
pub struct Announcement {
    auth: Arc<Authenticator>,
    control_plane: String,
    name: String,
}

impl Drop for Announcement {
    fn drop(&mut self) {
        self.auth.withdraw(&self.control_plane, &self.name);
    }
}

pub struct Authenticator {
    instances: Arc<Instances>,
    eks: Arc<Eks>,
    bindings: RwLock<HashMap<String, Binding>>,
    /// By the instance whose credentials signed the token (`None`: no instance's).
    decisions: Mutex<super::capped::Capped<Option<String>, Decision>>,
    /// Where each review is also logged as a call of the node whose token it was.
    calls: std::sync::OnceLock<Arc<super::calls::CallLog>>,
}

impl Authenticator {
    pub fn new(instances: Arc<Instances>, eks: Arc<Eks>) -> Arc<Self> {
        Arc::new(Self {
            instances,
            eks,
            bindings: RwLock::new(HashMap::new()),
            decisions: Mutex::new(Default::default()),
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
                    clusters: BTreeMap::new(),
                },
            );
        }
    }

    /// Forgets a control plane that was stopped: its path then answers that nothing is bound to it.
    pub fn unbind(&self, control_plane: &str) {
        if let Ok(mut b) = self.bindings.write() {
            b.remove(control_plane);
        }
    }

    /// Makes tokens for EKS cluster `name` (the `x-k8s-aws-id` they are signed with) valid on `control_plane`
    /// until the returned announcement is dropped.
    pub fn announce(self: &Arc<Self>, control_plane: &str, name: &str) -> Result<Announcement, String> {
        let mut bindings = self
            .bindings
            .write()
            .map_err(|_| "the token webhook's bindings are poisoned".to_string())?;
        let binding = bindings
            .get_mut(control_plane)
            .ok_or_else(|| format!("control plane {control_plane} is not bound to the token webhook"))?;
        *binding.clusters.entry(name.to_string()).or_default() += 1;
        Ok(Announcement {
            auth: self.clone(),
            control_plane: control_plane.to_string(),
            name: name.to_string(),
        })
    }

    /// Whether a control plane other than `control_plane` serves the cluster name now (a scenario using it runs).
    pub fn served_elsewhere(&self, control_plane: &str, name: &str) -> bool {
        self.bindings
            .read()
            .map(|b| {
                b.iter()
                    .any(|(cp, x)| cp != control_plane && x.clusters.contains_key(name))
            })
            .unwrap_or(false)
    }

    fn withdraw(&self, control_plane: &str, name: &str) {
        let Ok(mut b) = self.bindings.write() else {
            return;
        };
        let Some(clusters) = b.get_mut(control_plane).map(|x| &mut x.clusters) else {
            return;
        };
        if let Some(n) = clusters.get_mut(name) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                clusters.remove(name);
            }
        }
    }

    /// The cluster names `control_plane` accepts tokens for now.
    pub fn served(&self, control_plane: &str) -> Vec<String> {
        self.bindings
            .read()
            .ok()
            .and_then(|b| b.get(control_plane).map(|x| x.clusters.keys().cloned().collect()))
            .unwrap_or_default()
    }

    /// Forgets the decisions about `instance_id`'s tokens (its node is gone).
    pub fn forget(&self, instance_id: &str) {
        if let Ok(mut d) = self.decisions.lock() {
            d.forget(&Some(instance_id.to_string()));
        }
    }

    /// How many decisions about `instance_id`'s tokens were past the cap: counted, not kept.
    pub fn decisions_dropped(&self, instance_id: &str) -> u64 {
        self.decisions
            .lock()
            .map(|d| d.dropped(&Some(instance_id.to_string())))
            .unwrap_or(0)
    }

    /// Decisions about tokens signed with `instance_id`'s credentials, oldest first.
    pub fn decisions_for(&self, instance_id: &str) -> Vec<Decision> {
        self.decisions
            .lock()
            .map(|d| d.of(&Some(instance_id.to_string())))
            .unwrap_or_default()
    }

    /// The decisions about `instance_id`'s tokens, one line each, and a line saying how many were past the cap.
    pub fn decision_lines(&self, instance_id: &str) -> String {
        let cut = super::capped::cut_note(self.decisions_dropped(instance_id), "decisions");
        self.decisions_for(instance_id)
            .iter()
            .map(|d| d.line())
            .chain(cut)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Reviews `token` for `control_plane` now.
    pub async fn decide(&self, control_plane: &str, token: &str) -> Decision {
        self.decide_at(control_plane, token, SystemTime::now()).await
    }

    /// Reviews `token` for `control_plane` as of `now` (tests replay recorded tokens at the time they were made).
    async fn decide_at(&self, control_plane: &str, token: &str, now: SystemTime) -> Decision {
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
                Some(x) => (x.clusters.keys().cloned().collect::<Vec<_>>(), Some(x.client.clone())),
                None => (Vec::new(), None),
            },
            Err(_) => (Vec::new(), None),
        };
        let mut decision = Decision {
            at: now,
            control_plane: control_plane.to_string(),
            cluster: clusters.join(","),
            instance_id,
            access_key_id: key,
            granted: None,
            reason: String::new(),
            token: token.to_string(),
        };
        match self.map(parsed, &clusters, client, now).await {
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
            // The token is the node's text: a real one is a few kilobytes (its shape is read from it), so a bound
            // far above that keeps every real one whole.
            let mut kept = decision.clone();
            kept.token = super::capped::clip(&kept.token, TOKEN_KEPT);
            kept.reason = super::capped::clip(&kept.reason, super::capped::REASON_TEXT);
            d.push(kept.instance_id.clone(), kept);
        }
        decision
    }

    async fn map(
        &self,
        parsed: Result<token::Token, String>,
        clusters: &[String],
        client: Option<kube::Client>,
        now: SystemTime,
    ) -> Result<(String, Mapped), String> {
        let t = parsed.map_err(|e| format!("malformed token: {e}"))?;
        let client = client.ok_or("no control plane is bound to this webhook path")?;
        if clusters.is_empty() {
            return Err("no EKS cluster is announced for this control plane".into());
        }
        // The token carries no cluster name, only a signature over it: each name served here is tried.
        let mut refusals = Vec::new();
        let mut verified = None;
        for c in clusters {
            match token::verify(&t, c, &self.instances.iam, now) {
                Ok(creds) => {
                    verified = Some((c.clone(), creds));
                    break;
                }
                Err(e) => refusals.push(e),
            }
        }
        let Some((cluster, creds)) = verified else {
            return Err(refusal(clusters, refusals));
        };
        let record = self
            .eks
            .get(&cluster)
            .ok_or_else(|| format!("EKS cluster '{cluster}' is not known"))?;
        token::check_host(&t.host, &record.region)?;
        let caller = super::sts::caller(&creds);
        // In API mode EKS never reads aws-auth, so a malformed one cannot break logins there.
        let aws_auth = match record.authentication_mode {
            crate::eks::identity::AuthenticationMode::Api => None,
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

/// Why no served cluster name verified: a check that does not depend on the name (expiry, key) is said once;
/// signature mismatches for every name mean the token was made for a cluster this control plane does not serve.
fn refusal(clusters: &[String], refusals: Vec<token::Rejected>) -> String {
    if let Some(other) = refusals
        .iter()
        .find(|r| !matches!(r, token::Rejected::SignatureMismatch { .. }))
    {
        return other.to_string();
    }
    match refusals.as_slice() {
        [one] => one.to_string(),
        _ => format!(
            "signature does not match for any {} this control plane serves ({}): a token made for another cluster, or altered",
            token::CLUSTER_ID_HEADER,
            clusters.join(", ")
        ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eks::identity::AuthenticationMode;
    use crate::eks::identity::{AccessEntry, AccessEntryType};
    use crate::fakes::eks::ClusterRecord;
    use crate::fakes::sigv4::tests::{golden_store, GOLDEN_KEY};
    use std::time::Duration;

    /// The recorded tokens were made for this cluster name (fakes/testdata/README.md).
    const GOLDEN_CLUSTER: &str = "golden-cluster";

    /// A webhook whose credential store holds the golden key, and whose fake EKS knows `golden-cluster` and
    /// `other` (API mode, the golden role mapped by an access entry), with two control planes bound.
    fn webhook() -> Arc<Authenticator> {
        let instances = Instances::new();
        let far = SystemTime::now() + Duration::from_secs(10 * 365 * 86400);
        let golden = golden_store(far).lookup(GOLDEN_KEY).expect("the golden key");
        instances.iam.insert((*golden).clone());
        let eks = Eks::new(instances.clone());
        for name in [GOLDEN_CLUSTER, "other"] {
            let record = eks.put(ClusterRecord {
                name: name.into(),
                region: "us-west-2".into(),
                account_id: golden.account_id.clone(),
                endpoint: format!("https://{name}.example:6443"),
                ca_base64: "Q0E=".into(),
                service_ipv4_cidr: "10.100.0.0/16".into(),
                vpc: crate::fakes::vpc::Vpc::new(name, &Default::default()),
                version: "1.36".into(),
                id: "c0ffee".into(),
                created: SystemTime::now(),
                creating_for_calls: Default::default(),
                creating_for: None,
                first_described: Default::default(),
                authentication_mode: AuthenticationMode::Api,
                access_entries: RwLock::new(Vec::new()),
            });
            let entry = AccessEntry::new(
                &golden.role_arn(),
                AccessEntryType::Standard,
                Some("golden-node"),
                &["golden-nodes".to_string()],
            )
            .expect("a valid entry");
            record.create_access_entry(entry).expect("created");
        }
        let auth = Authenticator::new(instances, eks);
        // Never connected to: in API mode the webhook reads no aws-auth.
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
        for cp in ["control-plane-a", "control-plane-b"] {
            auth.bind(cp, kube::Client::try_from(config.clone()).expect("a client"));
        }
        auth
    }

    /// Each real client's token and the time it was made.
    fn tokens() -> Vec<(&'static str, String, SystemTime)> {
        token::REFERENCE_CLIENTS
            .iter()
            .map(|(client, t)| {
                let t = t.trim().to_string();
                let at = token::parse(&t).expect("a recorded token parses").presigned.date;
                (*client, t, at)
            })
            .collect()
    }

    #[tokio::test]
    async fn a_token_is_accepted_only_where_its_cluster_is_served_now() {
        let auth = webhook();
        for (client, t, at) in tokens() {
            // Served by A: accepted there, and refused by B, which serves another cluster.
            let on_a = auth.announce("control-plane-a", GOLDEN_CLUSTER).expect("bound");
            let _other_on_b = auth.announce("control-plane-b", "other").expect("bound");
            let d = auth.decide_at("control-plane-a", &t, at).await;
            assert_eq!(
                d.granted.as_ref().map(|m| m.username.as_str()),
                Some("golden-node"),
                "{client}: {}",
                d.reason
            );
            assert_eq!(d.cluster, GOLDEN_CLUSTER);
            let d = auth.decide_at("control-plane-b", &t, at).await;
            assert!(d.granted.is_none(), "{client}: B accepted a token for A's cluster");
            assert!(
                d.reason.contains("a token made for another cluster"),
                "{client}: {}",
                d.reason
            );
            assert!(d.reason.contains("'other'"), "{client}: {}", d.reason);
            // The scenario on A ends: its name is withdrawn, and A refuses the same token.
            drop(on_a);
            assert!(auth.served("control-plane-a").is_empty());
            let d = auth.decide_at("control-plane-a", &t, at).await;
            assert!(d.granted.is_none(), "{client}: a withdrawn name is still served");
            assert_eq!(d.reason, "no EKS cluster is announced for this control plane");
            // A serves another scenario's cluster now: the earlier name stays refused.
            let _next_on_a = auth.announce("control-plane-a", "other").expect("bound");
            let d = auth.decide_at("control-plane-a", &t, at).await;
            assert!(d.granted.is_none(), "{client}: {}", d.reason);
            assert!(d.reason.contains("for x-k8s-aws-id 'other'"), "{client}: {}", d.reason);
        }
    }

    #[tokio::test]
    async fn a_name_announced_twice_is_served_until_both_scenarios_end() {
        let auth = webhook();
        let (_, t, at) = tokens().remove(0);
        let first = auth.announce("control-plane-a", GOLDEN_CLUSTER).expect("bound");
        let second = auth.announce("control-plane-a", GOLDEN_CLUSTER).expect("bound");
        let _other = auth.announce("control-plane-a", "other").expect("bound");
        assert_eq!(auth.served("control-plane-a"), [GOLDEN_CLUSTER, "other"]);
        drop(first);
        assert!(auth.decide_at("control-plane-a", &t, at).await.granted.is_some());
        drop(second);
        let d = auth.decide_at("control-plane-a", &t, at).await;
        assert!(d.granted.is_none());
        assert_eq!(auth.served("control-plane-a"), ["other"]);
        // With several names served and none matching, all of them are named.
        let _third = auth.announce("control-plane-a", "third").expect("bound");
        let d = auth.decide_at("control-plane-a", &t, at).await;
        assert!(d.reason.contains("(other, third)"), "{}", d.reason);
        // A refusal that does not depend on the name is given as it is.
        let d = auth
            .decide_at("control-plane-a", &t, at + Duration::from_secs(16 * 60))
            .await;
        assert!(d.reason.starts_with("token expired"), "{}", d.reason);
    }

    #[tokio::test]
    async fn unbound_control_planes_serve_nothing() {
        let auth = webhook();
        let (_, t, at) = tokens().remove(0);
        assert!(auth.announce("control-plane-z", GOLDEN_CLUSTER).is_err());
        let served = auth.announce("control-plane-a", GOLDEN_CLUSTER).expect("bound");
        auth.unbind("control-plane-a");
        let d = auth.decide_at("control-plane-a", &t, at).await;
        assert_eq!(d.reason, "no control plane is bound to this webhook path");
        // Withdrawing after the control plane is gone is harmless.
        drop(served);
        assert!(auth.served("control-plane-a").is_empty());
    }
}
