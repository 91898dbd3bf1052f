//! Every request a node makes to a fake, recorded by one axum middleware in front of each fake (time, method,
//! API action or path, status, latency, the instance it came from), and the faults a scenario injects there
//! (latency, an error status, or no answer at all, for the first N matching calls). Calls are named
//! `service action` (`ec2 DescribeInstances`, `eks DescribeCluster`) or `service METHOD path` for path-addressed
//! services (`imds GET /latest/meta-data/instance-id`), and scenarios match them with `*` globs.
use super::instances::Instances;
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// One request as a fake saw it.
#[derive(Debug, Clone)]
pub struct Call {
    pub at: SystemTime,
    pub started: Instant,
    pub service: &'static str,
    /// `DescribeInstances`, or `GET /latest/meta-data/instance-id`.
    pub action: String,
    /// The HTTP status, or 0 when the fake never answered (an injected hang).
    pub status: u16,
    pub latency: Duration,
    pub source: IpAddr,
    /// The instance the source address belongs to.
    pub instance_id: Option<String>,
    /// The fault injected into this call, if any.
    pub fault: Option<String>,
}

impl super::capped::Weigh for Call {
    fn weight(&self) -> usize {
        self.action.len()
            + self.fault.as_ref().map_or(0, String::len)
            + self.instance_id.as_ref().map_or(0, String::len)
    }
}

impl Call {
    /// `service action`: what patterns match.
    pub fn key(&self) -> String {
        format!("{} {}", self.service, self.action)
    }

    /// One log line.
    pub fn line(&self, since: Instant) -> String {
        let t = self.started.saturating_duration_since(since).as_secs_f64();
        let mut s = if self.status == 0 {
            format!("+{t:8.3}s {} -> no answer", self.key())
        } else {
            format!(
                "+{t:8.3}s {} -> {} in {:.1} ms",
                self.key(),
                self.status,
                self.latency.as_secs_f64() * 1000.0
            )
        };
        if let Some(f) = &self.fault {
            s.push_str(&format!(" [fault: {f}]"));
        }
        s
    }
}

/// What to do to the matching calls of one instance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fault {
    pub service: String,
    /// A glob on the call's action (`*` by default).
    pub action: String,
    /// Only the first N matching calls (all when `None`).
    pub first: Option<u32>,
    pub status: Option<u16>,
    pub latency: Option<Duration>,
    /// Never answer.
    pub hang: bool,
}

impl Fault {
    fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = self.latency {
            parts.push(format!("latency {}ms", l.as_millis()));
        }
        if let Some(s) = self.status {
            parts.push(format!("status {s}"));
        }
        if self.hang {
            parts.push("no answer".into());
        }
        parts.join(", ")
    }
}

struct ArmedFault {
    instance_id: String,
    fault: Fault,
    used: u32,
}

#[derive(Default)]
pub struct CallLog {
    /// By instance (`None`: a caller no instance owns).
    calls: Mutex<super::capped::Capped<Option<String>, Call>>,
    faults: Mutex<Vec<ArmedFault>>,
}

/// `*` matches any run of characters (`/` too); everything else literally (a call's key holds `?` and `[`).
/// Through globset, each pattern escaped but for its `*` and compiled once per thread.
pub fn glob(pattern: &str, text: &str) -> bool {
    thread_local! {
        static COMPILED: std::cell::RefCell<std::collections::HashMap<String, Option<globset::GlobMatcher>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() > 4096 {
            c.clear();
        }
        c.entry(pattern.to_string())
            .or_insert_with(|| {
                let escaped: Vec<String> = pattern.split('*').map(globset::escape).collect();
                globset::GlobBuilder::new(&escaped.join("*"))
                    .literal_separator(false)
                    .backslash_escape(false)
                    .build()
                    .ok()
                    .map(|g| g.compile_matcher())
            })
            .as_ref()
            .is_some_and(|m| m.is_match(text))
    })
}

impl CallLog {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Arms `faults` for the calls of `instance_id`.
    pub fn inject(&self, instance_id: &str, faults: &[Fault]) {
        if let Ok(mut f) = self.faults.lock() {
            f.extend(faults.iter().map(|fault| ArmedFault {
                instance_id: instance_id.to_string(),
                fault: fault.clone(),
                used: 0,
            }));
        }
    }

    /// The fault to apply to this call, counting it against its `first` budget.
    fn fault_for(&self, instance_id: &str, service: &str, action: &str) -> Option<Fault> {
        let mut faults = self.faults.lock().ok()?;
        let armed = faults.iter_mut().find(|a| {
            a.instance_id == instance_id
                && a.fault.service == service
                && glob(&a.fault.action, action)
                && a.fault.first.is_none_or(|n| a.used < n)
        })?;
        armed.used += 1;
        Some(armed.fault.clone())
    }

    pub fn record(&self, mut call: Call) {
        // The action is the node's text (a form's `Action=`, a path): kept to a bound, the cut said in it.
        call.action = super::capped::clip(&call.action, super::capped::ENTRY_TEXT);
        if let Ok(mut c) = self.calls.lock() {
            c.push(call.instance_id.clone(), call);
        }
    }

    /// How many calls of `instance_id` were past the cap: counted, not kept.
    pub fn dropped(&self, instance_id: &str) -> u64 {
        self.calls
            .lock()
            .map(|c| c.dropped(&Some(instance_id.to_string())))
            .unwrap_or(0)
    }

    /// Forgets `instance_id`'s calls (its node is gone).
    pub fn forget(&self, instance_id: &str) {
        if let Ok(mut c) = self.calls.lock() {
            c.forget(&Some(instance_id.to_string()));
        }
    }

    /// The calls no instance made (from an address no instance has).
    #[cfg(test)]
    pub fn unowned(&self) -> Vec<Call> {
        self.calls.lock().map(|c| c.of(&None)).unwrap_or_default()
    }

    /// The calls from `instance_id`, in order.
    pub fn of(&self, instance_id: &str) -> Vec<Call> {
        self.calls
            .lock()
            .map(|c| c.of(&Some(instance_id.to_string())))
            .unwrap_or_default()
    }
}

/// The middleware's state: which fake this is, and where to record.
#[derive(Clone)]
pub struct Recorder {
    pub service: &'static str,
    pub log: Arc<CallLog>,
    pub instances: Arc<Instances>,
}

/// The API action of a request: `X-Amz-Target`'s operation (JSON protocols), the Query protocol's `Action`,
/// EKS's REST routes, else `METHOD path`.
pub fn action_of(service: &str, method: &str, path: &str, query: &str, target: Option<&str>, body: &[u8]) -> String {
    if let Some(t) = target {
        return t.rsplit('.').next().unwrap_or(t).to_string();
    }
    let from_form = |text: &str| {
        text.split('&')
            .find_map(|kv| kv.strip_prefix("Action="))
            .map(str::to_string)
    };
    if let Some(a) = from_form(query).or_else(|| from_form(&String::from_utf8_lossy(body))) {
        return a;
    }
    if service == "eks" {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let named = match (method, segments.as_slice()) {
            ("GET", ["clusters", _]) => Some("DescribeCluster"),
            ("GET", ["clusters", _, "access-entries"]) => Some("ListAccessEntries"),
            ("POST", ["clusters", _, "access-entries"]) => Some("CreateAccessEntry"),
            ("GET", ["clusters", _, "access-entries", _]) => Some("DescribeAccessEntry"),
            _ => None,
        };
        if let Some(n) = named {
            return n.to_string();
        }
    }
    format!("{method} {path}")
}

/// Records the call, applying the instance's faults first.
pub async fn middleware(
    State(r): State<Recorder>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    req: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let at = SystemTime::now();
    let (parts, body) = req.into_parts();
    // Query-protocol actions are in the body: read it (the calls are small) and hand it on unchanged.
    // Bounded in size and in time: a caller that trickles its body gives up its slot after
    // [`super::BODY_WITHIN`], answered 408.
    let bytes = match tokio::time::timeout(super::BODY_WITHIN, axum::body::to_bytes(body, 1 << 20)).await {
        Ok(b) => b.unwrap_or_default(),
        Err(_) => return (axum::http::StatusCode::REQUEST_TIMEOUT, "the body took too long\n").into_response(),
    };
    let target = parts.headers.get("x-amz-target").and_then(|v| v.to_str().ok());
    // A proxy's CONNECT names its target in the authority, not the path.
    let path = match parts.uri.authority() {
        Some(a) if parts.method == axum::http::Method::CONNECT => a.as_str(),
        _ => parts.uri.path(),
    };
    let action = action_of(
        r.service,
        parts.method.as_str(),
        path,
        parts.uri.query().unwrap_or_default(),
        target,
        &bytes,
    );
    let instance_id = r.instances.by_ip(peer.ip()).map(|i| i.instance_id.clone());
    let fault = instance_id
        .as_deref()
        .and_then(|id| r.log.fault_for(id, r.service, &action));
    let mut applied = None;
    let response = match &fault {
        Some(f) => {
            applied = Some(f.describe());
            if let Some(l) = f.latency {
                tokio::time::sleep(l).await;
            }
            if f.hang {
                // Logged now, as unanswered: the client gives up and closes the connection, which drops this
                // future before it could be logged.
                r.log.record(Call {
                    at,
                    started,
                    service: r.service,
                    action: action.clone(),
                    status: 0,
                    latency: started.elapsed(),
                    source: peer.ip(),
                    instance_id: instance_id.clone(),
                    fault: applied.clone(),
                });
                std::future::pending::<()>().await;
            }
            match f.status {
                Some(s) => {
                    let status =
                        axum::http::StatusCode::from_u16(s).unwrap_or(axum::http::StatusCode::SERVICE_UNAVAILABLE);
                    (status, format!("nodejoin injected fault: {s}\n")).into_response()
                }
                None => {
                    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                        .await
                }
            }
        }
        None => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
    };
    r.log.record(Call {
        at,
        started,
        service: r.service,
        action,
        status: response.status().as_u16(),
        latency: started.elapsed(),
        source: peer.ip(),
        instance_id,
        fault: applied,
    });
    response
}

/// `router` with the recording middleware in front.
pub fn recorded(router: axum::Router, recorder: Recorder) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(recorder, middleware))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake that answers POST / with "ok", recorded into `log`, every caller at one node's address.
    fn posting_app(log: Arc<CallLog>) -> axum::Router {
        let recorder = Recorder {
            service: "ec2",
            log,
            instances: Arc::new(Instances::default()),
        };
        recorded(
            axum::Router::new().route("/", axum::routing::post(|| async { "ok" })),
            recorder,
        )
        .layer(axum::extract::connect_info::MockConnectInfo(SocketAddr::from((
            [172, 31, 9, 9],
            40000,
        ))))
    }

    /// A caller that sends a request's head and never its whole body is answered 408 after the body's deadline
    /// (time is paused: the deadline passes at once), its slot not held for ever.
    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_arrives_is_cut_off() {
        use tower::ServiceExt;
        let app = posting_app(CallLog::new());
        let never = futures::stream::pending::<Result<axum::body::Bytes, std::io::Error>>();
        let req = axum::http::Request::post("/")
            .body(axum::body::Body::from_stream(never))
            .unwrap();
        let res = app.oneshot(req).await.unwrap();
        assert_eq!(res.status(), 408);
    }

    /// A flood of large requests from one address (issue 66: 300 POSTs of 1 MB each once kept 300 MB) keeps each
    /// call's action to its bound, with the cut said, and the source's log to its byte budget.
    #[tokio::test]
    async fn a_call_flood_costs_a_bounded_log() {
        use tower::ServiceExt;
        let log = CallLog::new();
        let app = posting_app(log.clone());
        let body = format!("Action={}", "A".repeat((1 << 20) - 8));
        for _ in 0..40 {
            let req = axum::http::Request::post("/")
                .body(axum::body::Body::from(body.clone()))
                .unwrap();
            let res = app.clone().oneshot(req).await.unwrap();
            assert_eq!(res.status(), 200);
        }
        let kept = log.unowned();
        assert_eq!(kept.len(), 40);
        for c in &kept {
            assert!(c.action.len() < 300, "{} bytes kept of one action", c.action.len());
            assert!(
                c.action.ends_with("bytes cut)"),
                "the cut is not said: {}",
                &c.action[200..]
            );
        }
    }

    #[test]
    fn globs() {
        assert!(glob("*", "anything"));
        assert!(glob("imds *", "imds GET /latest/meta-data/mac"));
        assert!(glob("imds GET /latest/meta-data/*", "imds GET /latest/meta-data/mac"));
        assert!(!glob("imds PUT *", "imds GET /latest/api/token"));
        assert!(glob("*Describe*", "ec2 DescribeInstances"));
        assert!(glob("ec2 DescribeInstances", "ec2 DescribeInstances"));
        assert!(!glob("ec2 Describe", "ec2 DescribeInstances"));
        assert!(glob("a*b*c", "a-b-b-c"));
        assert!(!glob("a*b*c", "a-c-b"));
        // Everything but `*` is literal: a query's `?`, brackets, braces, a backslash.
        assert!(glob("imds GET /x?y=[1]{a,b}\\*", "imds GET /x?y=[1]{a,b}\\z"));
        assert!(!glob("imds GET /x?", "imds GET /xy"));
        assert!(!glob("[ab]", "a"));
    }

    #[test]
    fn actions_by_protocol() {
        assert_eq!(
            action_of(
                "ec2",
                "POST",
                "/",
                "",
                None,
                b"Action=DescribeInstances&Version=2016-11-15"
            ),
            "DescribeInstances"
        );
        assert_eq!(
            action_of(
                "sts",
                "GET",
                "/",
                "Action=GetCallerIdentity&Version=2011-06-15",
                None,
                b""
            ),
            "GetCallerIdentity"
        );
        assert_eq!(
            action_of(
                "ecr",
                "POST",
                "/",
                "",
                Some("AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken"),
                b"{}"
            ),
            "GetAuthorizationToken"
        );
        assert_eq!(
            action_of("eks", "GET", "/clusters/demo", "", None, b""),
            "DescribeCluster"
        );
        assert_eq!(
            action_of("eks", "POST", "/clusters/demo/access-entries", "", None, b"{}"),
            "CreateAccessEntry"
        );
        assert_eq!(
            action_of("imds", "PUT", "/latest/api/token", "", None, b""),
            "PUT /latest/api/token"
        );
    }

    #[tokio::test]
    async fn calls_are_recorded_and_faults_apply_to_the_first_n() {
        use crate::fakes::FakeServer;
        let instances = Instances::new();
        let mut inst = crate::fakes::instances::tests::instance();
        inst.private_ip = "127.0.0.1".parse().unwrap();
        let i = instances.register(inst);
        let log = CallLog::new();
        log.inject(
            &i.instance_id,
            &[Fault {
                service: "imds".into(),
                action: "GET /latest/meta-data/*".into(),
                first: Some(2),
                status: Some(503),
                latency: Some(Duration::from_millis(20)),
                hang: false,
            }],
        );
        let router = axum::Router::new().fallback(|| async { "ok" });
        let app = recorded(
            router,
            Recorder {
                service: "imds",
                log: log.clone(),
                instances,
            },
        );
        let s = FakeServer::start("imds", "127.0.0.1".parse().unwrap(), app)
            .await
            .unwrap();
        let client = reqwest::Client::new();
        let url = format!("{}/latest/meta-data/mac", s.url());
        let mut statuses = Vec::new();
        for _ in 0..3 {
            statuses.push(client.get(&url).send().await.unwrap().status().as_u16());
        }
        let token = client
            .put(format!("{}/latest/api/token", s.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(statuses, [503, 503, 200]);
        assert_eq!(token.status(), 200, "the fault's pattern does not match the token call");
        let calls = log.of(&i.instance_id);
        assert_eq!(calls.len(), 4);
        assert_eq!(calls[0].key(), "imds GET /latest/meta-data/mac");
        assert!(calls[0].fault.as_deref().unwrap().contains("status 503"));
        assert!(calls[0].latency >= Duration::from_millis(20));
        assert!(calls[2].fault.is_none());
        assert_eq!(calls[3].key(), "imds PUT /latest/api/token");
        assert!(calls[0].line(calls[0].started).contains("-> 503"));

        // A hang is logged as unanswered, though the client gave up.
        log.inject(
            &i.instance_id,
            &[Fault {
                service: "imds".into(),
                action: "GET /latest/user-data".into(),
                hang: true,
                ..Default::default()
            }],
        );
        let gave_up = client
            .get(format!("{}/latest/user-data", s.url()))
            .timeout(Duration::from_millis(300))
            .send()
            .await;
        assert!(gave_up.is_err());
        let calls = log.of(&i.instance_id);
        let last = calls.last().unwrap();
        assert_eq!((last.key().as_str(), last.status), ("imds GET /latest/user-data", 0));
        assert!(
            last.line(last.started).ends_with("-> no answer [fault: no answer]"),
            "{}",
            last.line(last.started)
        );
    }
}
