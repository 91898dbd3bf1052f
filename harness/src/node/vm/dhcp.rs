//! The DHCP server of a run's network for its VM nodes: as EC2 gives an instance its primary private address by
//! DHCP, each VM gets the address its instance was given, by MAC, with what EC2's default DHCP options give: the
//! VPC's resolver as its DNS server (at the link-local address instances have for it) and its region's private
//! domain name. It answers only the MACs it was told about (a
//! node container on the same bridge never asks; anything else is ignored), on the run's bridge only.
use dhcproto::v4::{DhcpOption, Message, MessageType, Opcode};
use dhcproto::{Decodable, Encodable};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Mutex};

/// A lease's length; nodes live minutes.
const LEASE_SECS: u32 = 3600;

/// What the server hands out: its own address (the bridge's), the subnet, and one address (with its domain name)
/// per MAC.
#[derive(Clone)]
pub struct Leases {
    pub server: Ipv4Addr,
    pub subnet: ipnet::Ipv4Net,
    by_mac: Arc<Mutex<HashMap<[u8; 6], Lease>>>,
}

#[derive(Clone)]
struct Lease {
    ip: Ipv4Addr,
    domain: String,
}

impl Leases {
    pub fn new(server: Ipv4Addr, subnet: ipnet::Ipv4Net) -> Self {
        Self {
            server,
            subnet,
            by_mac: Arc::default(),
        }
    }

    /// `mac` gets `ip`, and `domain` (`us-west-2.compute.internal`) as its domain name.
    pub fn reserve(&self, mac: [u8; 6], ip: Ipv4Addr, domain: &str) {
        let lease = Lease {
            ip,
            domain: domain.to_string(),
        };
        self.by_mac.lock().unwrap_or_else(|p| p.into_inner()).insert(mac, lease);
    }

    pub fn release(&self, mac: &[u8; 6]) {
        self.by_mac.lock().unwrap_or_else(|p| p.into_inner()).remove(mac);
    }

    fn of(&self, chaddr: &[u8]) -> Option<Lease> {
        let mac: [u8; 6] = chaddr.get(..6)?.try_into().ok()?;
        self.by_mac.lock().unwrap_or_else(|p| p.into_inner()).get(&mac).cloned()
    }

    /// The answer to one client message, and where to send it; `None` for a MAC it does not know, a message
    /// that is not a request, or a request for another address (then a NAK).
    pub fn answer(&self, req: &Message) -> Option<(Message, SocketAddrV4)> {
        if req.opcode() != Opcode::BootRequest {
            return None;
        }
        let Lease { ip, domain } = self.of(req.chaddr())?;
        let kind = match req.opts().msg_type()? {
            MessageType::Discover => MessageType::Offer,
            MessageType::Request => {
                let asked = match req.opts().get(dhcproto::v4::OptionCode::RequestedIpAddress) {
                    Some(DhcpOption::RequestedIpAddress(a)) => *a,
                    _ => req.ciaddr(),
                };
                let other_server = matches!(
                    req.opts().get(dhcproto::v4::OptionCode::ServerIdentifier),
                    Some(DhcpOption::ServerIdentifier(s)) if *s != self.server
                );
                if other_server {
                    return None;
                }
                if asked == ip {
                    MessageType::Ack
                } else {
                    MessageType::Nak
                }
            }
            _ => return None,
        };
        let mut reply = Message::new_with_id(
            req.xid(),
            Ipv4Addr::UNSPECIFIED,
            if kind == MessageType::Nak {
                Ipv4Addr::UNSPECIFIED
            } else {
                ip
            },
            self.server,
            req.giaddr(),
            req.chaddr(),
        );
        reply.set_opcode(Opcode::BootReply).set_flags(req.flags());
        let opts = reply.opts_mut();
        opts.insert(DhcpOption::MessageType(kind));
        opts.insert(DhcpOption::ServerIdentifier(self.server));
        if kind != MessageType::Nak {
            opts.insert(DhcpOption::AddressLeaseTime(LEASE_SECS));
            opts.insert(DhcpOption::Renewal(LEASE_SECS / 2));
            opts.insert(DhcpOption::Rebinding(LEASE_SECS * 7 / 8));
            opts.insert(DhcpOption::SubnetMask(self.subnet.netmask()));
            opts.insert(DhcpOption::BroadcastAddr(self.subnet.broadcast()));
            opts.insert(DhcpOption::Router(vec![self.server]));
            opts.insert(DhcpOption::DomainNameServer(vec![crate::fakes::resolver::LINK_ADDRESS]));
            opts.insert(DhcpOption::DomainName(domain));
        }
        // A client that has its address renews by unicast; until then only a broadcast reaches it.
        let to = if req.ciaddr().is_unspecified() || kind == MessageType::Nak {
            SocketAddrV4::new(Ipv4Addr::BROADCAST, 68)
        } else {
            SocketAddrV4::new(req.ciaddr(), 68)
        };
        Some((reply, to))
    }
}

/// The server on `bridge` (the run network's Linux bridge); stopped when dropped.
pub struct DhcpServer {
    task: tokio::task::JoinHandle<()>,
}

impl DhcpServer {
    pub fn start(bridge: &str, leases: Leases) -> std::io::Result<Self> {
        use socket2::{Domain, Protocol, Socket, Type};
        let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_reuse_address(true)?;
        socket.set_broadcast(true)?;
        // Only this run's bridge: other runs' servers (each on its own bridge) and the host's own networks are
        // never answered.
        socket.bind_device(Some(bridge.as_bytes()))?;
        socket.set_nonblocking(true)?;
        socket.bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 67).into())?;
        let socket = tokio::net::UdpSocket::from_std(socket.into())?;
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 1500];
            loop {
                let Ok((n, _from)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                let Ok(req) = Message::from_bytes(&buf[..n]) else {
                    continue;
                };
                if let Some((reply, to)) = leases.answer(&req) {
                    if let Ok(bytes) = reply.to_vec() {
                        if let Err(e) = socket.send_to(&bytes, to).await {
                            tracing::warn!("DHCP reply to {to}: {e}");
                        }
                    }
                }
            }
        });
        Ok(Self { task })
    }
}

impl Drop for DhcpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(kind: MessageType, mac: [u8; 6], requested: Option<Ipv4Addr>) -> Message {
        let z = Ipv4Addr::UNSPECIFIED;
        let mut m = Message::new_with_id(7, z, z, z, z, &mac);
        m.opts_mut().insert(DhcpOption::MessageType(kind));
        if let Some(r) = requested {
            m.opts_mut().insert(DhcpOption::RequestedIpAddress(r));
        }
        m
    }

    #[test]
    fn a_known_mac_gets_its_address_offered_then_acknowledged() {
        let leases = Leases::new("172.18.0.1".parse().unwrap(), "172.18.0.0/16".parse().unwrap());
        let mac = [2, 0, 0, 0, 0, 1];
        let ip: Ipv4Addr = "172.18.255.250".parse().unwrap();
        leases.reserve(mac, ip, "us-west-2.compute.internal");
        let (offer, to) = leases.answer(&client(MessageType::Discover, mac, None)).unwrap();
        assert_eq!(offer.opts().msg_type(), Some(MessageType::Offer));
        assert_eq!((offer.yiaddr(), offer.xid()), (ip, 7));
        assert_eq!(to, SocketAddrV4::new(Ipv4Addr::BROADCAST, 68));
        assert_eq!(
            offer.opts().get(dhcproto::v4::OptionCode::Router),
            Some(&DhcpOption::Router(vec!["172.18.0.1".parse().unwrap()]))
        );
        // EC2's default options: the VPC resolver, the region's private domain.
        assert_eq!(
            offer.opts().get(dhcproto::v4::OptionCode::DomainNameServer),
            Some(&DhcpOption::DomainNameServer(vec!["169.254.169.253".parse().unwrap()]))
        );
        assert_eq!(
            offer.opts().get(dhcproto::v4::OptionCode::DomainName),
            Some(&DhcpOption::DomainName("us-west-2.compute.internal".into()))
        );
        let (ack, _) = leases.answer(&client(MessageType::Request, mac, Some(ip))).unwrap();
        assert_eq!(ack.opts().msg_type(), Some(MessageType::Ack));
        // Round trip through the wire format.
        let back = Message::from_bytes(&ack.to_vec().unwrap()).unwrap();
        assert_eq!(back.yiaddr(), ip);
    }

    #[test]
    fn other_addresses_are_refused_and_unknown_macs_ignored() {
        let leases = Leases::new("172.18.0.1".parse().unwrap(), "172.18.0.0/16".parse().unwrap());
        let mac = [2, 0, 0, 0, 0, 1];
        leases.reserve(mac, "172.18.255.250".parse().unwrap(), "ec2.internal");
        let (nak, _) = leases
            .answer(&client(MessageType::Request, mac, Some("172.18.0.9".parse().unwrap())))
            .unwrap();
        assert_eq!(nak.opts().msg_type(), Some(MessageType::Nak));
        assert!(leases
            .answer(&client(MessageType::Discover, [2, 0, 0, 0, 0, 2], None))
            .is_none());
        leases.release(&mac);
        assert!(leases.answer(&client(MessageType::Discover, mac, None)).is_none());
    }
}
