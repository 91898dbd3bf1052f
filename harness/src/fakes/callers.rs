//! Who may call a run's fakes. They listen on the run network's gateway, an address every container on the host
//! can route to; without a check, a container of another Docker network (another run, a user's) could read the
//! run's instance credentials from its IMDS or have tokens judged by its webhook. A fake answers only its run's
//! own network (the nodes, a kind or k3s control plane on it), loopback, and the host's own addresses: a host
//! process's connection to the gateway (the local API server calling the token webhook) can leave with another
//! of the host's addresses as its source, e.g. after Docker's masquerade rule for the network.
use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The addresses a run's fakes answer.
#[derive(Debug, Clone)]
pub struct Callers {
    networks: Vec<IpNet>,
    host: Vec<IpAddr>,
}

impl Callers {
    /// The run network `subnet`, loopback and this host's addresses.
    pub fn of_run(subnet: ipnet::Ipv4Net) -> Self {
        Self {
            networks: vec![IpNet::V4(subnet)],
            host: host_addresses(),
        }
    }

    pub fn admits(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        ip.is_loopback() || self.networks.iter().any(|n| n.contains(&ip)) || self.host.contains(&ip)
    }
}

/// Every address of this host's interfaces (getifaddrs(3)).
fn host_addresses() -> Vec<IpAddr> {
    let mut out = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return out;
    }
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let entry = unsafe { &*cur };
        if !entry.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr whose family says its real type.
            let family = unsafe { (*entry.ifa_addr).sa_family } as i32;
            if family == libc::AF_INET {
                // SAFETY: an AF_INET sockaddr is a sockaddr_in.
                let sin = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in) };
                out.push(IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes()));
            } else if family == libc::AF_INET6 {
                // SAFETY: an AF_INET6 sockaddr is a sockaddr_in6.
                let sin6 = unsafe { &*(entry.ifa_addr as *const libc::sockaddr_in6) };
                out.push(IpAddr::from(sin6.sin6_addr.s6_addr));
            }
        }
        cur = entry.ifa_next;
    }
    // SAFETY: the list getifaddrs allocated, freed once.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// Middleware: a caller outside [`Callers`] gets 403 and a line saying why (the caller's address comes from the
/// server's `ConnectInfo`).
pub async fn admit(State(callers): State<Arc<Callers>>, request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    match peer {
        Some(ip) if !callers.admits(ip) => (
            http::StatusCode::FORBIDDEN,
            format!("nodejoin: {ip} is not on this run's network; its fakes answer only their own run\n"),
        )
            .into_response(),
        _ => next.run(request).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_outside_the_run_network_are_refused() {
        let c = Callers::of_run("172.18.0.0/16".parse().unwrap());
        assert!(c.admits("172.18.0.5".parse().unwrap()));
        assert!(c.admits("127.0.0.1".parse().unwrap()));
        assert!(c.admits("::ffff:172.18.0.9".parse().unwrap()));
        assert!(!c.admits("172.19.0.5".parse().unwrap()), "another Docker network");
        assert!(!c.admits("203.0.113.7".parse().unwrap()));
    }

    #[test]
    fn the_host_itself_is_a_caller_of_its_run() {
        let host = host_addresses();
        assert!(host.iter().any(|a| a.is_loopback()), "{host:?}");
        let c = Callers::of_run("10.255.255.0/24".parse().unwrap());
        for a in host {
            assert!(c.admits(a), "{a}");
        }
    }
}
