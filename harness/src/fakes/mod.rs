//! In-process fakes of the AWS surfaces a node bootstrap talks to. Each is an axum server the harness starts on
//! an ephemeral port of an address the node containers reach (the Docker network's gateway).
pub mod authenticator;
pub mod callers;
pub mod calls;
pub mod capped;
pub mod cloudformation;
pub mod ec2;
pub mod ecr;
pub mod eks;
pub mod front;
pub mod imds;
pub mod instances;
pub mod proxy;
pub mod registry;
pub mod resolver;
pub mod sts;
pub mod vpc;

/// SigV4, the credential store and AWS's formats are shared with the EKS derivations (`crate::aws`).
pub use crate::aws::{credentials, iam, sigv4};
pub(crate) use crate::aws::{random_alnum, rfc3339};
pub(crate) use crate::process::random_hex;

use crate::error::{Error, Result};
use std::net::{IpAddr, SocketAddr};

/// A running fake; it stops when dropped.
pub struct FakeServer {
    pub name: &'static str,
    pub addr: SocketAddr,
    tls: bool,
    task: tokio::task::JoinHandle<()>,
}

/// A caller's connection: its address, and its socket while a request on it is being answered.
#[derive(Clone, Copy, Debug)]
pub struct Peer {
    pub addr: SocketAddr,
    fd: std::os::fd::RawFd,
    /// The IP TTL the connection started with (the host's default), for responses not shaped otherwise.
    pub default_ttl: u32,
}

impl Peer {
    /// The connection `tcp` from `addr`, as its requests' handlers see it (plain and TLS fakes alike).
    fn of(tcp: &tokio::net::TcpStream, addr: SocketAddr) -> Self {
        use std::os::fd::AsRawFd;
        Self {
            addr,
            fd: tcp.as_raw_fd(),
            default_ttl: socket2::SockRef::from(tcp).ttl_v4().unwrap_or(64),
        }
    }

    /// Sets the IP TTL of what is sent on this connection from now on (a response's hop limit).
    pub fn set_ttl(&self, ttl: u32) -> std::io::Result<()> {
        // SAFETY: the connection (and so its socket) lives while one of its requests is answered, which is
        // when a handler holds its `Peer`.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
        socket2::SockRef::from(&fd).set_ttl_v4(ttl)
    }
}

/// Gives handlers the caller's address as `ConnectInfo<SocketAddr>`.
async fn peer_address(
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<Peer>,
    mut request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    request.extensions_mut().insert(axum::extract::ConnectInfo(peer.addr));
    next.run(request).await
}

/// The next connection, with its slot: on an accept error (out of descriptors, EMFILE) it pauses instead of
/// spinning, and a connection past the cap, or past its source's share of it, is closed at once; `None` then.
async fn accept_bounded(
    name: &'static str,
    listener: &tokio::net::TcpListener,
    slots: &Slots,
) -> Option<(tokio::net::TcpStream, Slot)> {
    let (tcp, peer) = match listener.accept().await {
        Ok(accepted) => accepted,
        Err(e) => {
            tracing::debug!(fake = name, "accept: {e}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            return None;
        }
    };
    match slots.take(peer.ip()) {
        Ok(slot) => Some((tcp, slot)),
        Err(why) => {
            tracing::warn!(fake = name, %peer, "refused a connection: {why}");
            None
        }
    }
}

/// Connections a fake serves at once, in all and per source address: one node (or anything on the run's network)
/// holding connections open takes at most its share, never every slot the other nodes need.
#[derive(Clone)]
struct Slots {
    all: std::sync::Arc<tokio::sync::Semaphore>,
    by_source: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>>,
}

/// A connection's slot: given back when dropped.
struct Slot {
    _all: tokio::sync::OwnedSemaphorePermit,
    source: IpAddr,
    by_source: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut m) = self.by_source.lock() {
            if let Some(n) = m.get_mut(&self.source) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    m.remove(&self.source);
                }
            }
        }
    }
}

impl Slots {
    fn new() -> Self {
        Self {
            all: std::sync::Arc::new(tokio::sync::Semaphore::new(CONNECTIONS)),
            by_source: Default::default(),
        }
    }

    fn take(&self, source: IpAddr) -> std::result::Result<Slot, String> {
        let mut m = self
            .by_source
            .lock()
            .map_err(|_| "the slot table is poisoned".to_string())?;
        let n = m.entry(source).or_insert(0);
        if *n >= PER_SOURCE {
            return Err(format!("{PER_SOURCE} already open from {source}"));
        }
        let all = self
            .all
            .clone()
            .try_acquire_owned()
            .map_err(|_| format!("{CONNECTIONS} already open"))?;
        *n += 1;
        Ok(Slot {
            _all: all,
            source,
            by_source: self.by_source.clone(),
        })
    }
}

/// Serves HTTP/1.1 on one connection until the caller closes it, a request's head bounded by [`HANDSHAKE`].
async fn serve_connection<I>(name: &'static str, io: I, app: axum::Router)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper_util::service::TowerToHyperService::new(app);
    if let Err(e) = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HANDSHAKE)
        .serve_connection(hyper_util::rt::TokioIo::new(io), service)
        .with_upgrades()
        .await
    {
        tracing::debug!(fake = name, "connection: {e}");
    }
}

/// rustls's server builder with ring and its default protocol versions.
fn tls_builder(
) -> std::result::Result<rustls::ConfigBuilder<rustls::ServerConfig, rustls::WantsVerifier>, rustls::Error> {
    rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
}

/// Connections a fake serves at once; more are closed at once (every node of a run shares the fakes).
const CONNECTIONS: usize = 1024;
/// Connections one source address may hold open at once: far more than a bootstrap opens (the API server, the
/// token webhook's one caller, pools a few), a quarter of [`CONNECTIONS`].
const PER_SOURCE: usize = CONNECTIONS / 4;
/// How long a request's body may take to arrive, once its head has: a caller that trickles it holds a slot no
/// longer than this.
pub(crate) const BODY_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);
/// How long a TLS handshake, and then a request's head, may take.
const HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(10);

impl FakeServer {
    /// Serves `router` on `ip:0` to `callers` only (a run's fakes: see [`callers`]).
    pub async fn start_for(
        name: &'static str,
        ip: IpAddr,
        router: axum::Router,
        callers: std::sync::Arc<callers::Callers>,
    ) -> Result<Self> {
        let router = router.layer(axum::middleware::from_fn_with_state(callers, callers::admit));
        Self::start(name, ip, router).await
    }

    /// Serves `router` on `ip:0`; the handlers see the caller's address through `ConnectInfo`.
    pub async fn start(name: &'static str, ip: IpAddr, router: axum::Router) -> Result<Self> {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.map_err(|e| Error::Fake {
            service: name,
            message: format!("bind {ip}:0: {e}"),
        })?;
        let addr = listener.local_addr().map_err(|e| Error::Fake {
            service: name,
            message: e.to_string(),
        })?;
        // Handlers see the caller's address as `ConnectInfo<SocketAddr>`; those that shape packets (IMDS's hop
        // limit) also see the connection as `ConnectInfo<Peer>`.
        let router = router.layer(axum::middleware::from_fn(peer_address));
        // Bounded as the TLS fake is: connections at once, and the time a request's head may take (a node that
        // opens connections and sends nothing must not exhaust the harness).
        let slots = Slots::new();
        let task = tokio::spawn(async move {
            loop {
                let Some((tcp, slot)) = accept_bounded(name, &listener, &slots).await else {
                    continue;
                };
                let peer = Peer::of(&tcp, tcp.peer_addr().unwrap_or(addr));
                let app = router.clone().layer(axum::Extension(axum::extract::ConnectInfo(peer)));
                tokio::spawn(async move {
                    let _slot = slot;
                    serve_connection(name, tcp, app).await;
                });
            }
        });
        tracing::debug!(fake = name, %addr, "listening");
        Ok(Self {
            name,
            addr,
            tls: false,
            task,
        })
    }

    /// Serves `router` over HTTPS with `cert` on `ip:0` (for callers that insist on TLS, like the API
    /// server's token webhook).
    pub async fn start_tls(
        name: &'static str,
        ip: IpAddr,
        router: axum::Router,
        cert: &crate::pki::CertKey,
        callers: std::sync::Arc<callers::Callers>,
    ) -> Result<Self> {
        let fail = |message: String| Error::Fake { service: name, message };
        let certs = vec![rustls::pki_types::CertificateDer::from(crate::pki::pem_to_der(
            &cert.cert_pem,
        )?)];
        let key = rustls::pki_types::PrivateKeyDer::try_from(crate::pki::pem_to_der(&cert.key_pem)?)
            .map_err(|e| fail(format!("key: {e}")))?;
        let config = tls_builder()
            .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
            .map_err(|e| fail(format!("TLS config: {e}")))?;
        Self::serve_tls(name, ip, router, config, callers, None).await
    }

    /// Serves `router` over HTTPS on `ip:0` with the certificate `certs` gives for the name each client asks
    /// (SNI): the front of AWS's endpoints ([`front`]). `refused` hears of each handshake a client ended with an
    /// alert (it does not trust the certificate), with the client's address.
    pub async fn start_tls_named(
        name: &'static str,
        ip: IpAddr,
        router: axum::Router,
        certs: std::sync::Arc<dyn rustls::server::ResolvesServerCert>,
        callers: std::sync::Arc<callers::Callers>,
        refused: Refused,
    ) -> Result<Self> {
        let config = tls_builder()
            .map(|b| b.with_no_client_auth().with_cert_resolver(certs))
            .map_err(|e| Error::Fake {
                service: name,
                message: format!("TLS config: {e}"),
            })?;
        Self::serve_tls(name, ip, router, config, callers, Some(refused)).await
    }

    /// The accept loop of the TLS fakes: only `callers`' connections, each bounded as the plain fakes' are.
    async fn serve_tls(
        name: &'static str,
        ip: IpAddr,
        router: axum::Router,
        config: rustls::ServerConfig,
        callers: std::sync::Arc<callers::Callers>,
        refused: Option<Refused>,
    ) -> Result<Self> {
        let fail = |message: String| Error::Fake { service: name, message };
        let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
        let listener = tokio::net::TcpListener::bind((ip, 0))
            .await
            .map_err(|e| fail(format!("bind {ip}:0: {e}")))?;
        let addr = listener.local_addr().map_err(|e| fail(e.to_string()))?;
        // Handlers see the caller as the plain fakes' do (`ConnectInfo`), so a fake behind TLS knows its instance.
        let router = router.layer(axum::middleware::from_fn(peer_address));
        // Bounded: connections at once, the TLS handshake, the request head. A node (or anything on the run's
        // network) holding connections open or sending nothing must not exhaust the harness.
        let slots = Slots::new();
        let task = tokio::spawn(async move {
            loop {
                let Some((tcp, slot)) = accept_bounded(name, &listener, &slots).await else {
                    continue;
                };
                let Ok(peer) = tcp.peer_addr() else { continue };
                if !callers.admits(peer.ip()) {
                    tracing::warn!(fake = name, %peer, "refused a caller outside the run's network");
                    continue;
                }
                let client = peer.ip();
                let peer = Peer::of(&tcp, peer);
                let acceptor = acceptor.clone();
                let app = router.clone().layer(axum::Extension(axum::extract::ConnectInfo(peer)));
                let refused = refused.clone();
                tokio::spawn(async move {
                    let _slot = slot;
                    let tls = match tokio::time::timeout(HANDSHAKE, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => tls,
                        Ok(Err(e)) => {
                            if let (Some(alert), Some(hook)) = (client_alert(&e), refused) {
                                hook(client, alert);
                            }
                            return;
                        }
                        Err(_) => return,
                    };
                    serve_connection(name, tls, app).await;
                });
            }
        });
        tracing::debug!(fake = name, %addr, "listening (TLS)");
        Ok(Self {
            name,
            addr,
            tls: true,
            task,
        })
    }

    /// `http://ip:port` (`https://` for TLS fakes).
    pub fn url(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }
}

/// Hears of a TLS handshake a client ended with an alert: its address and the alert (`UnknownCA`).
pub type Refused = std::sync::Arc<dyn Fn(IpAddr, String) + Send + Sync>;

/// The alert a client sent to end a handshake, if that is how it failed (it refused the certificate).
fn client_alert(e: &std::io::Error) -> Option<String> {
    match e.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::AlertReceived(alert) => Some(format!("{alert:?}")),
        _ => None,
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An error in the XML shape of AWS Query APIs (STS, CloudFormation).
pub fn query_error(
    namespace: &str,
    status: axum::http::StatusCode,
    code: &str,
    message: &str,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let body = format!(
        "<ErrorResponse xmlns=\"{namespace}\"><Error><Type>Sender</Type><Code>{}</Code><Message>{}</Message></Error><RequestId>{}</RequestId></ErrorResponse>",
        esc(code),
        esc(message),
        random_hex(32)
    );
    (status, [("content-type", "text/xml")], body).into_response()
}

/// An error in the shape the AWS REST-JSON protocol uses (botocore reads `x-amzn-ErrorType` and the body).
pub fn aws_json_error(status: axum::http::StatusCode, code: &str, message: &str) -> axum::response::Response {
    use axum::response::IntoResponse;
    let body = serde_json::json!({ "message": message, "__type": code });
    (
        status,
        [
            ("x-amzn-errortype", code.to_string()),
            ("content-type", "application/json".to_string()),
        ],
        body.to_string(),
    )
        .into_response()
}

/// A Query API call's parameters and the credentials that signed it.
pub struct VerifiedQuery {
    pub params: Vec<(String, String)>,
    pub credentials: std::sync::Arc<iam::IssuedCredentials>,
    /// The region the request was signed for (the endpoint the caller meant: `--region`).
    pub region: String,
}

/// A whole request as SigV4 covers it; an axum extractor, so each signed handler takes one argument.
pub struct SignedCall {
    pub method: axum::http::Method,
    pub uri: axum::http::Uri,
    pub headers: axum::http::HeaderMap,
    pub body: axum::body::Bytes,
}

/// Request bodies the fakes accept (AWS calls a node makes are small).
const MAX_BODY: usize = 1 << 20;

impl<S: Send + Sync> axum::extract::FromRequest<S> for SignedCall {
    type Rejection = axum::response::Response;

    async fn from_request(req: axum::extract::Request, _state: &S) -> std::result::Result<Self, Self::Rejection> {
        use axum::response::IntoResponse;
        let (parts, body) = req.into_parts();
        let body = tokio::time::timeout(BODY_WITHIN, axum::body::to_bytes(body, MAX_BODY))
            .await
            .map_err(|_| (axum::http::StatusCode::REQUEST_TIMEOUT, "the body took too long").into_response())?
            .map_err(|e| (axum::http::StatusCode::PAYLOAD_TOO_LARGE, e.to_string()).into_response())?;
        Ok(Self {
            method: parts.method,
            uri: parts.uri,
            headers: parts.headers,
            body,
        })
    }
}

impl SignedCall {
    pub fn received(&self) -> sigv4::Received<'_> {
        sigv4::Received {
            method: self.method.as_str(),
            path_and_query: self.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"),
            headers: &self.headers,
            body: &self.body,
        }
    }

    /// Query API parameters: the query string of a GET, the form body otherwise.
    pub fn form(&self) -> std::result::Result<Vec<(String, String)>, String> {
        if self.method == axum::http::Method::GET {
            sigv4::form_pairs(self.uri.query().unwrap_or_default())
        } else {
            sigv4::form_pairs(&String::from_utf8_lossy(&self.body))
        }
    }

    /// Verifies a JSON-protocol call's signature (EKS, ECR), for `region` when given: the credentials and the
    /// region it was signed for, or the AWS JSON error.
    pub fn verify_json(
        &self,
        store: &iam::CredentialStore,
        service: &str,
        region: Option<&str>,
    ) -> std::result::Result<sigv4::Verified, Box<axum::response::Response>> {
        sigv4::verify_request(&self.received(), store, service, region, std::time::SystemTime::now()).map_err(|f| {
            let message = f.message();
            tracing::info!("{service}: request refused: {message}");
            Box::new(aws_json_error(
                axum::http::StatusCode::FORBIDDEN,
                f.json_code(),
                &message,
            ))
        })
    }

    /// Verifies a Query API call (STS, CloudFormation) for the one `action` the fake answers: its parameters
    /// and the credentials that signed it, or the AWS-shaped error in `namespace`.
    pub fn verify_query(
        &self,
        store: &iam::CredentialStore,
        service: &str,
        namespace: &str,
        action: &str,
    ) -> std::result::Result<VerifiedQuery, Box<axum::response::Response>> {
        use axum::http::StatusCode;
        let params = self.form().map_err(|e| {
            Box::new(query_error(
                namespace,
                StatusCode::BAD_REQUEST,
                "MalformedQueryString",
                &e,
            ))
        })?;
        let verified = match sigv4::verify_request(&self.received(), store, service, None, std::time::SystemTime::now())
        {
            Ok(v) => v,
            Err(f) => {
                tracing::info!("{service}: request refused: {}", f.message());
                return Err(Box::new(query_error(
                    namespace,
                    StatusCode::FORBIDDEN,
                    f.sts_code(),
                    &f.message(),
                )));
            }
        };
        let given = params.iter().find(|(k, _)| k == "Action").map(|(_, v)| v.as_str());
        if given != Some(action) {
            return Err(Box::new(query_error(
                namespace,
                StatusCode::BAD_REQUEST,
                "InvalidAction",
                &format!("nodejoin's fake {service} answers {action} only, not {given:?}"),
            )));
        }
        Ok(VerifiedQuery {
            params,
            credentials: verified.credentials,
            region: verified.region,
        })
    }
}

#[cfg(test)]
mod tests {
    /// One source holding connections open takes its share and no more; the others still get theirs, and a
    /// closed connection gives its slot back.
    #[test]
    fn one_source_cannot_take_every_slot() {
        let slots = super::Slots::new();
        let flood: std::net::IpAddr = [172, 31, 0, 9].into();
        let held: Vec<_> = (0..super::PER_SOURCE).map(|_| slots.take(flood).unwrap()).collect();
        let e = slots.take(flood).err().unwrap();
        assert!(e.contains("already open from 172.31.0.9"), "{e}");
        let other = slots.take([172, 31, 0, 10].into());
        assert!(other.is_ok(), "another node was refused");
        drop(held);
        assert!(slots.take(flood).is_ok(), "closed connections kept their slots");
    }
}
