//! A VM node's place on the run's network, as an instance's primary ENI is on its subnet: a tap device on the
//! run's Docker bridge (its own address, reachable by the control plane and the other nodes), the address given by
//! the run's DHCP server, and what an instance's link carries sent to the harness by DNAT rules on the run's
//! bridge (`hostnet`): 169.254.169.254:80 to the fake IMDS, 169.254.169.253:53 to the VPC resolver, and HTTPS to
//! the gateway (the address the resolver gives AWS's endpoints) to the front of the fakes. Nothing inside the
//! machine is changed for them.
use super::dhcp::{DhcpServer, Leases};
use crate::docker::Docker;
use crate::error::{Error, Result};
use crate::hostnet::{Forward, Proto};
pub use crate::hostnet::{LinkForwards, Tap};
use std::net::{Ipv4Addr, SocketAddr};
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

/// Where the harness serves what a VM reaches on its link, as an instance reaches EC2's services.
#[derive(Debug, Clone, Copy)]
pub struct LinkServices {
    /// The fake IMDS.
    pub imds: SocketAddr,
    /// The VPC resolver ([`crate::fakes::resolver`]), over UDP and over TCP.
    pub resolver_udp: SocketAddr,
    pub resolver_tcp: SocketAddr,
    /// The front of AWS's HTTPS endpoints ([`crate::fakes::front`]).
    pub front: SocketAddr,
}

impl LinkServices {
    /// The forwarding rules of a VM on a link whose gateway is `gateway` (the address the resolver gives AWS's
    /// endpoints).
    pub fn forwards(&self, gateway: Ipv4Addr) -> Vec<Forward> {
        vec![
            Forward {
                at: Ipv4Addr::new(169, 254, 169, 254),
                proto: Proto::Tcp,
                port: 80,
                to: self.imds,
            },
            Forward {
                at: crate::fakes::resolver::LINK_ADDRESS,
                proto: Proto::Udp,
                port: 53,
                to: self.resolver_udp,
            },
            Forward {
                at: crate::fakes::resolver::LINK_ADDRESS,
                proto: Proto::Tcp,
                port: 53,
                to: self.resolver_tcp,
            },
            Forward {
                at: gateway,
                proto: Proto::Tcp,
                port: 443,
                to: self.front,
            },
        ]
    }
}
