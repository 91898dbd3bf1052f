//! An HTTP proxy for nodes configured to use one (nodeadm's `spec.instance.environment`, `HTTPS_PROXY`): it
//! tunnels `CONNECT host:port` and records each tunnel as a call (`proxy CONNECT 172.20.0.1:6443`), so a scenario
//! sees which traffic went through it and which `NO_PROXY` kept away. It reaches only addresses of the run's own
//! network (the fakes and the control plane on its gateway, the nodes): a node cannot use it to reach the host's
//! other networks or the internet. Plain-HTTP proxying (`HTTP_PROXY`, absolute-form requests) is refused with 501:
//! through a real proxy, a node's IMDS or fake endpoint would be the proxy's, not the node's.
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// How long connecting to a tunnel's target may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which targets a tunnel may reach.
#[derive(Debug, Clone)]
pub struct Proxy {
    network: ipnet::Ipv4Net,
}

impl Proxy {
    /// A proxy whose tunnels reach `network` (the run's Docker network) only.
    pub fn new(network: ipnet::Ipv4Net) -> Arc<Self> {
        Arc::new(Self { network })
    }

    pub fn router(self: Arc<Self>) -> axum::Router {
        axum::Router::new().fallback(handle).with_state(self)
    }

    /// The target of `CONNECT authority`, if the proxy may reach it: an IPv4 address of the run's network and a
    /// port (names are not resolved: a node's endpoints are addresses).
    fn target(&self, authority: &str) -> Result<SocketAddr, String> {
        let addr: SocketAddr = authority
            .parse()
            .map_err(|_| format!("{authority} is not an address:port (nodejoin's proxy resolves no names)"))?;
        match addr.ip() {
            IpAddr::V4(v4) if self.network.contains(&v4) => Ok(addr),
            _ => Err(format!(
                "{authority} is outside this run's network {}: nodejoin's proxy reaches nothing else",
                self.network
            )),
        }
    }
}

async fn handle(State(proxy): State<Arc<Proxy>>, req: Request) -> Response {
    if req.method() != Method::CONNECT {
        return (
            StatusCode::NOT_IMPLEMENTED,
            "nodejoin's proxy tunnels CONNECT only (HTTPS_PROXY); plain HTTP is not proxied\n",
        )
            .into_response();
    }
    let authority = req.uri().authority().map(|a| a.to_string()).unwrap_or_default();
    let target = match proxy.target(&authority) {
        Ok(t) => t,
        Err(why) => return (StatusCode::FORBIDDEN, format!("{why}\n")).into_response(),
    };
    let upstream = match tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(target)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return (StatusCode::BAD_GATEWAY, format!("{target}: {e}\n")).into_response(),
        Err(_) => return (StatusCode::GATEWAY_TIMEOUT, format!("{target}: no answer\n")).into_response(),
    };
    tokio::spawn(async move {
        match hyper::upgrade::on(req).await {
            Ok(upgraded) => {
                let mut client = hyper_util::rt::TokioIo::new(upgraded);
                let mut upstream = upstream;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
            Err(e) => tracing::debug!("proxy: CONNECT {target} not upgraded: {e}"),
        }
    });
    Response::new(Body::empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn tunnels_reach_the_run_network_only() {
        let p = Proxy::new("172.20.0.0/16".parse().unwrap());
        assert!(p.target("172.20.0.1:6443").is_ok());
        assert!(p.target("172.20.3.4:443").is_ok());
        for bad in [
            "10.0.0.1:443",
            "127.0.0.1:22",
            "169.254.169.254:80",
            "example.com:443",
            "[::1]:443",
            "x",
        ] {
            assert!(p.target(bad).is_err(), "{bad}");
        }
    }

    /// A CONNECT through the proxy served by `FakeServer` reaches an echo server and is recorded; plain HTTP is
    /// refused.
    #[tokio::test]
    async fn connect_tunnels_bytes_both_ways() {
        let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        let proxy = Proxy::new("127.0.0.0/8".parse().unwrap());
        let server = crate::fakes::FakeServer::start("proxy", "127.0.0.1".parse().unwrap(), proxy.router())
            .await
            .unwrap();
        let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        s.write_all(format!("CONNECT {echo_addr} HTTP/1.1\r\nHost: {echo_addr}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut head = vec![0u8; 256];
        let n = s.read(&mut head).await.unwrap();
        let head = String::from_utf8_lossy(&head[..n]).to_string();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        s.write_all(b"through the tunnel").await.unwrap();
        let mut back = [0u8; 18];
        s.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"through the tunnel");
        let mut plain = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        plain
            .write_all(format!("GET http://{echo_addr}/ HTTP/1.1\r\nHost: {echo_addr}\r\n\r\n").as_bytes())
            .await
            .unwrap();
        let mut head = vec![0u8; 256];
        let n = plain.read(&mut head).await.unwrap();
        assert!(String::from_utf8_lossy(&head[..n]).starts_with("HTTP/1.1 501"));
    }
}
