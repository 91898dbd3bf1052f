//! Fake EC2 instance metadata service (IMDSv1 and IMDSv2), one identity per caller address.
//!
//! Rules reproduced from the real service: `PUT /latest/api/token` with a TTL of 1–21600 s (400 otherwise, 403
//! when the request carries `X-Forwarded-For`); GETs with an unknown or expired token get 401; GETs without a
//! token get 401 when the instance requires IMDSv2; directories list their children (sub-directories with a
//! trailing `/`); `user-data` is served decoded and is 404 when there is none; unknown paths are 404. Any dated
//! API version (`/2021-03-23/...`, as cloud-init asks) maps to the same tree as `latest`.
use super::iam::Served;
use super::instances::{ImdsRequest, Instance, Instances};
use axum::body::Body;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::Response;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

pub const TOKEN_HEADER: &str = "x-aws-ec2-metadata-token";
pub const TTL_HEADER: &str = "x-aws-ec2-metadata-token-ttl-seconds";
const MAX_TTL: u64 = 21600;

/// Shared state of the IMDS fake.
pub struct Imds {
    instances: Arc<Instances>,
    tokens: Mutex<HashMap<String, (IpAddr, Instant)>>,
    /// How long to wait for an unknown caller to be registered.
    pub registration_wait: Duration,
}

/// Live tokens kept per caller: real IMDS throttles a caller long before this, and each costs the root process
/// memory until it expires (up to six hours).
const MAX_TOKENS_PER_CALLER: usize = 1000;

impl Imds {
    pub fn new(instances: Arc<Instances>) -> Arc<Self> {
        Arc::new(Self {
            instances,
            tokens: Mutex::new(HashMap::new()),
            registration_wait: Duration::from_secs(5),
        })
    }

    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new().fallback(handle).with_state(self.clone())
    }

    /// A new token for `source`; expired ones go first (a run's nodes ask for thousands, and tokens outlive the
    /// instances that asked: an address is reused by the next scenario's node, whose own tokens are new).
    fn issue_token(&self, source: IpAddr, ttl: Duration) -> String {
        let token = format!("AQAE{}", super::random_alnum(52));
        if let Ok(mut tokens) = self.tokens.lock() {
            let now = Instant::now();
            tokens.retain(|_, (_, expires)| *expires > now);
            // A node asking for tokens in a loop keeps its newest ones: the one closest to expiring goes.
            let mine: Vec<(&String, &Instant)> = tokens
                .iter()
                .filter(|(_, (owner, _))| *owner == source)
                .map(|(t, (_, expires))| (t, expires))
                .collect();
            if mine.len() >= MAX_TOKENS_PER_CALLER {
                if let Some(oldest) = mine.iter().min_by_key(|(_, e)| **e).map(|(t, _)| (*t).clone()) {
                    tokens.remove(&oldest);
                }
            }
            tokens.insert(token.clone(), (source, now + ttl));
        }
        token
    }

    /// Forgets every token issued to `source` (its instance is gone: a later node on the address starts afresh).
    pub fn forget(&self, source: IpAddr) {
        if let Ok(mut tokens) = self.tokens.lock() {
            tokens.retain(|_, (owner, _)| *owner != source);
        }
    }

    #[cfg(test)]
    fn token_count(&self) -> usize {
        self.tokens.lock().map(|t| t.len()).unwrap_or(0)
    }

    /// Remaining TTL of a valid token presented by `source`.
    fn check_token(&self, token: &str, source: IpAddr) -> Option<Duration> {
        let tokens = self.tokens.lock().ok()?;
        let (owner, expires) = tokens.get(token)?;
        let now = Instant::now();
        (*owner == source && *expires > now).then(|| *expires - now)
    }
}

struct Reply {
    status: StatusCode,
    body: Vec<u8>,
    content_type: &'static str,
    ttl: Option<u64>,
    note: String,
}

impl Reply {
    fn text(body: impl Into<Vec<u8>>) -> Self {
        Self {
            status: StatusCode::OK,
            body: body.into(),
            content_type: "text/plain",
            ttl: None,
            note: String::new(),
        }
    }
    fn error(status: StatusCode, note: impl Into<String>) -> Self {
        let body = status.canonical_reason().unwrap_or("error").to_string();
        Self {
            status,
            body: body.into_bytes(),
            content_type: "text/plain",
            ttl: None,
            note: note.into(),
        }
    }
}

pub use super::instances::DEFAULT_HOP_LIMIT;

async fn handle(
    State(imds): State<Arc<Imds>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    extensions: axum::http::Extensions,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let source = peer.ip();
    let path = uri.path().to_string();
    let token = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let reply = answer(&imds, source, &method, &path, &headers, token.as_deref()).await;
    // EC2 sends token responses with the instance's hop limit as their IP TTL (every other response with the
    // usual one): a caller more hops away than that (a pod, at hop limit 1) never gets its token.
    if let Some(ConnectInfo(connection)) = extensions.get::<ConnectInfo<super::Peer>>() {
        let ttl = match (reply.ttl, imds.instances.by_ip(source)) {
            (Some(_), Some(instance)) => u32::from(instance.put_hop_limit),
            _ => connection.default_ttl,
        };
        if let Err(e) = connection.set_ttl(ttl) {
            tracing::warn!(%source, "imds: cannot set the response's IP TTL to {ttl}: {e}");
        }
    }
    imds.instances.record(ImdsRequest {
        at: SystemTime::now(),
        source,
        method: method.to_string(),
        path: path.clone(),
        status: reply.status.as_u16(),
        with_token: token.is_some(),
        note: reply.note.clone(),
    });
    if !reply.note.is_empty() {
        tracing::info!(%source, %method, %path, status = reply.status.as_u16(), "imds: {}", reply.note);
    }
    let mut response = Response::new(Body::from(reply.body));
    *response.status_mut() = reply.status;
    response
        .headers_mut()
        .insert("content-type", HeaderValue::from_static(reply.content_type));
    if let Some(ttl) = reply.ttl {
        if let Ok(v) = HeaderValue::from_str(&ttl.to_string()) {
            response.headers_mut().insert(TTL_HEADER, v);
        }
    }
    response
}

async fn answer(
    imds: &Imds,
    source: IpAddr,
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    token: Option<&str>,
) -> Reply {
    if path == "/latest/api/token" {
        if method != Method::PUT {
            return Reply::error(StatusCode::METHOD_NOT_ALLOWED, "token endpoint takes PUT");
        }
        if headers.contains_key("x-forwarded-for") {
            return Reply::error(
                StatusCode::FORBIDDEN,
                "token PUT through a proxy (X-Forwarded-For) refused",
            );
        }
        let ttl = headers
            .get(TTL_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        return match ttl {
            Some(ttl) if (1..=MAX_TTL).contains(&ttl) => {
                let mut reply = Reply::text(imds.issue_token(source, Duration::from_secs(ttl)));
                reply.ttl = Some(ttl);
                reply
            }
            _ => Reply::error(
                StatusCode::BAD_REQUEST,
                format!("token PUT needs {TTL_HEADER} between 1 and {MAX_TTL}"),
            ),
        };
    }
    if method != Method::GET && method != Method::HEAD {
        return Reply::error(StatusCode::METHOD_NOT_ALLOWED, format!("{method} not allowed"));
    }
    let Some(instance) = imds.instances.wait_by_ip(source, imds.registration_wait).await else {
        return Reply::error(StatusCode::NOT_FOUND, format!("no instance is registered for {source}"));
    };
    let remaining = match token {
        Some(t) => match imds.check_token(t, source) {
            Some(left) => Some(left.as_secs()),
            None => {
                return Reply::error(
                    StatusCode::UNAUTHORIZED,
                    "IMDSv2 token unknown, expired or from another instance",
                )
            }
        },
        None if instance.imds_v2_required => {
            return Reply::error(
                StatusCode::UNAUTHORIZED,
                "IMDSv1 request refused: this instance requires IMDSv2 tokens",
            );
        }
        None => None,
    };
    // Credentials are issued on first use and rotated before they expire, like the real service does.
    let served = imds.instances.iam.serve(instance.holder(), SystemTime::now());
    let mut reply = lookup(&instance, served.as_ref(), path);
    reply.ttl = remaining;
    reply
}

/// Answers a GET for `path` (`/<version>/<rest>`).
fn lookup(instance: &Instance, served: Option<&Served>, path: &str) -> Reply {
    let trimmed = path.trim_start_matches('/');
    if trimmed.is_empty() {
        return Reply::text("latest");
    }
    let (version, rest) = trimmed.split_once('/').unwrap_or((trimmed, ""));
    if !is_api_version(version) {
        return Reply::error(StatusCode::NOT_FOUND, format!("unknown API version {version}"));
    }
    if rest == "user-data" || rest == "user-data/" {
        return match &instance.user_data {
            Some(data) => {
                let mut reply = Reply::text(data.clone());
                reply.content_type = "application/octet-stream";
                reply
            }
            None => Reply::error(StatusCode::NOT_FOUND, String::new()),
        };
    }
    let tree = tree(instance, served);
    let key = rest.trim_end_matches('/');
    if let Some(value) = tree.get(key) {
        let mut reply = Reply::text(value.clone());
        if value.starts_with('{') {
            reply.content_type = "application/json";
        }
        return reply;
    }
    // A directory: list the immediate children, sub-directories with a trailing slash.
    let prefix = if key.is_empty() {
        String::new()
    } else {
        format!("{key}/")
    };
    let mut children = BTreeSet::new();
    for leaf in tree.keys() {
        if let Some(below) = leaf.strip_prefix(&prefix) {
            match below.split_once('/') {
                Some((dir, _)) => children.insert(format!("{dir}/")),
                None => children.insert(below.to_string()),
            };
        }
    }
    if key.is_empty() && instance.user_data.is_some() {
        children.insert("user-data".to_string());
    }
    if children.is_empty() {
        return Reply::error(StatusCode::NOT_FOUND, String::new());
    }
    Reply::text(children.into_iter().collect::<Vec<_>>().join("\n"))
}

fn is_api_version(v: &str) -> bool {
    v == "latest"
        || (v.len() == 10
            && v.chars()
                .enumerate()
                .all(|(i, c)| if i == 4 || i == 7 { c == '-' } else { c.is_ascii_digit() }))
}

/// Every leaf of the metadata tree of one instance, keyed by path below the API version.
/// `served`: the instance profile's current credentials (the `iam/` branch exists only with them).
pub fn tree(i: &Instance, served: Option<&Served>) -> BTreeMap<String, String> {
    let mut t = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        t.insert(k.to_string(), v);
    };
    let dns = i.private_dns_name();
    let ip = i.private_ip.to_string();
    let mac = &i.mac;
    let eni = format!("eni-{}", &i.instance_id.trim_start_matches("i-"));
    put("meta-data/ami-id", i.ami_id.clone());
    put("meta-data/ami-launch-index", "0".into());
    put("meta-data/hostname", dns.clone());
    put("meta-data/local-hostname", dns.clone());
    put("meta-data/local-ipv4", ip.clone());
    put("meta-data/instance-id", i.instance_id.clone());
    put("meta-data/instance-type", i.instance_type.clone());
    put("meta-data/instance-life-cycle", i.lifecycle.clone());
    put("meta-data/mac", mac.clone());
    put(
        "meta-data/reservation-id",
        format!("r-{}", &i.instance_id.trim_start_matches("i-")),
    );
    put("meta-data/security-groups", "nodejoin-nodes".into());
    put("meta-data/placement/availability-zone", i.availability_zone.clone());
    put("meta-data/placement/region", i.region.clone());
    put("meta-data/services/domain", "amazonaws.com".into());
    put("meta-data/services/partition", "aws".into());
    let m = format!("meta-data/network/interfaces/macs/{mac}");
    put(&format!("{m}/device-number"), "0".into());
    put(&format!("{m}/interface-id"), eni);
    put(&format!("{m}/local-hostname"), dns.clone());
    put(&format!("{m}/local-ipv4s"), ip.clone());
    put(&format!("{m}/mac"), mac.clone());
    put(&format!("{m}/owner-id"), i.account_id.clone());
    put(&format!("{m}/security-group-ids"), "sg-0nodejoin".into());
    for (leaf, value) in i.vpc.interface_leaves() {
        put(&format!("{m}/{leaf}"), value);
    }
    if let (Some(role), Some(role_arn), Some(served)) = (&i.role_name, i.role_arn(), served) {
        let c = &served.credentials;
        let updated = super::rfc3339(c.issued);
        let profile_arn = role_arn.replace(":role/", ":instance-profile/");
        put(
            "meta-data/iam/info",
            serde_json::json!({
                "Code": "Success",
                "LastUpdated": updated,
                "InstanceProfileArn": profile_arn,
                "InstanceProfileId": format!("AIPA{}", i.instance_id.trim_start_matches("i-").to_uppercase()),
            })
            .to_string(),
        );
        put(
            &format!("meta-data/iam/security-credentials/{role}"),
            serde_json::json!({
                "Code": "Success",
                "LastUpdated": updated,
                "Type": "AWS-HMAC",
                "AccessKeyId": c.access_key_id,
                "SecretAccessKey": served.secret_served,
                "Token": c.session_token,
                "Expiration": super::rfc3339(c.expiration),
            })
            .to_string(),
        );
    }
    put(
        "dynamic/instance-identity/document",
        serde_json::json!({
            "accountId": i.account_id,
            "architecture": "x86_64",
            "availabilityZone": i.availability_zone,
            "imageId": i.ami_id,
            "instanceId": i.instance_id,
            "instanceType": i.instance_type,
            "pendingTime": super::rfc3339(i.launch_time),
            "privateIp": ip,
            "region": i.region,
            "version": "2017-09-30",
        })
        .to_string(),
    );
    t
}

#[cfg(test)]
mod tests;
