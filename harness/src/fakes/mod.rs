//! In-process fakes of the AWS surfaces a node bootstrap talks to. Each is an axum server the harness starts on
//! an ephemeral port of an address the node containers reach (the Docker network's gateway).
pub mod ec2;
pub mod eks;
pub mod imds;
pub mod instances;
pub mod sigv4;

use crate::error::{Error, Result};
use rand::distr::{Alphanumeric, SampleString};
use std::net::{IpAddr, SocketAddr};

/// A running fake; it stops when dropped.
pub struct FakeServer {
    pub name: &'static str,
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl FakeServer {
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
        let app = router.into_make_service_with_connect_info::<SocketAddr>();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(fake = name, "server stopped: {e}");
            }
        });
        tracing::debug!(fake = name, %addr, "listening");
        Ok(Self { name, addr, task })
    }

    /// `http://ip:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Random string of `len` characters from `[A-Za-z0-9]`.
pub(crate) fn random_alnum(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::rng(), len)
}

/// Random lower-case hex string of `len` characters.
pub(crate) fn random_hex(len: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
        .collect()
}

/// RFC 3339 UTC timestamp with seconds precision, as AWS APIs print them.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    humantime::format_rfc3339_seconds(t).to_string()
}
