//! A VM node's place on the run's network, as an instance's primary ENI is on its subnet: a tap device on the
//! run's Docker bridge (its own address, reachable by the control plane and the other nodes), the address given by
//! the run's DHCP server, and 169.254.169.254:80 from that address sent to the fake IMDS by one DNAT rule on the
//! run's bridge (`hostnet`), so nothing inside the machine is changed.
use super::dhcp::{DhcpServer, Leases};
use crate::docker::Docker;
use crate::error::{Error, Result};
pub use crate::hostnet::{ImdsRedirect, Tap};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

fn vm_err(m: impl Into<String>) -> Error {
    Error::Vm(m.into())
}

/// The run network as VM nodes see it: its bridge, the DHCP server on it and the addresses handed out.
pub struct RunLink {
    pub bridge: String,
    pub leases: Leases,
    _dhcp: DhcpServer,
    next: AtomicU32,
}

impl RunLink {
    /// Finds the Linux bridge of Docker network `network` and starts the DHCP server on it.
    pub async fn start(docker: &Docker, network: &crate::docker::RunNetwork) -> Result<Self> {
        let inspected = docker
            .inspect_network(&network.name, None)
            .await
            .map_err(|e| vm_err(format!("network {}: {e}", network.name)))?;
        let bridge = inspected
            .options
            .as_ref()
            .and_then(|o| o.get("com.docker.network.bridge.name").cloned())
            .or_else(|| {
                inspected
                    .id
                    .as_deref()
                    .and_then(|id| id.get(..12))
                    .map(|id| format!("br-{id}"))
            })
            .ok_or_else(|| vm_err(format!("network {} has no bridge", network.name)))?;
        let leases = Leases::new(network.gateway, network.subnet);
        let dhcp = DhcpServer::start(&bridge, leases.clone())
            .map_err(|e| vm_err(format!("a DHCP server on {bridge}: {e}")))?;
        Ok(Self {
            bridge,
            leases,
            _dhcp: dhcp,
            next: AtomicU32::new(0),
        })
    }

    /// An address for the next VM: from the top of the subnet down, where Docker, which hands its containers
    /// addresses from the bottom up, does not reach.
    pub fn next_address(&self) -> Result<Ipv4Addr> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let top = u32::from(self.leases.subnet.broadcast());
        let ip = Ipv4Addr::from(top.saturating_sub(1 + n));
        if self.leases.subnet.hosts().count() < 512 || !self.leases.subnet.contains(&ip) || n > 200 {
            return Err(vm_err(format!("no address left for a VM in {}", self.leases.subnet)));
        }
        Ok(ip)
    }
}
