//! The VPC's resolver as a VM node sees it: EC2's DHCP names it as the DNS server, at the link-local address
//! every instance has for it (169.254.169.253; the host sends it here, as it does IMDS's address). It answers what
//! Route 53's resolver answers inside a VPC for the names a bootstrap asks: the AWS endpoints the run fakes (with
//! the front's address: [`super::front`]) and the private DNS names of the run's instances
//! (`ip-10-0-1-23.us-west-2.compute.internal`). Any other name is NXDOMAIN: the run has no Internet, and a name it
//! does not know is said so at once rather than timed out. Each question is recorded in the run's call log as
//! `dns A <name>` with 200 (answered) or 404 (no such name), under the instance that asked.
use super::calls::{Call, CallLog};
use super::instances::Instances;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{rdata::A, RData, Record, RecordType};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// EC2's resolver address on every instance's link (Amazon's "169.254.169.253", beside IMDS's).
pub const LINK_ADDRESS: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 253);

/// How long a client may keep an answer; instances' addresses do not change while a run lives.
const TTL: u32 = 60;

/// What the resolver knows: where the front listens (the answer for AWS's names) and the run's instances.
#[derive(Clone)]
pub struct Zone {
    pub front: Ipv4Addr,
    pub instances: Arc<Instances>,
}

/// A response to send, and the question it answers as the call log names it (`A ec2.us-west-2.amazonaws.com`)
/// with whether the name exists; no question for a malformed or unsupported query.
pub struct Reply {
    pub bytes: Vec<u8>,
    pub asked: Option<(String, bool)>,
}

/// The answer for one name, and whether it exists.
enum Found {
    Address(Ipv4Addr),
    /// The name exists but has no record of the type asked (an AAAA for an IPv4-only name).
    NoData,
    NoName,
}

impl Zone {
    fn find(&self, name: &str, kind: RecordType) -> Found {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        let address = if super::front::service_of(&name).is_some() {
            Some(self.front)
        } else {
            self.instances.by_private_dns_name(&name).map(|i| i.private_ip)
        };
        match (address, kind) {
            (Some(a), RecordType::A) => Found::Address(a),
            (Some(_), _) => Found::NoData,
            (None, _) => Found::NoName,
        }
    }

    /// The reply to one query message; `None` for what is not a query (it is dropped).
    pub fn answer(&self, query: &[u8]) -> Option<Reply> {
        let request = Message::from_vec(query).ok()?;
        if request.metadata.message_type != MessageType::Query {
            return None;
        }
        let mut response = Message::response(request.metadata.id, request.metadata.op_code);
        response.metadata.recursion_desired = request.metadata.recursion_desired;
        response.metadata.recursion_available = true;
        if let Some(edns) = &request.edns {
            let mut ours = Edns::new();
            ours.set_max_payload(edns.max_payload().clamp(512, 1232));
            response.set_edns(ours);
        }
        let [question] = request.queries.as_slice() else {
            response.metadata.response_code = ResponseCode::FormErr;
            return response.to_vec().ok().map(|bytes| Reply { bytes, asked: None });
        };
        response.add_query(question.clone());
        if request.metadata.op_code != OpCode::Query {
            response.metadata.response_code = ResponseCode::NotImp;
            return response.to_vec().ok().map(|bytes| Reply { bytes, asked: None });
        }
        let name = question.name().to_ascii();
        let asked = format!("{} {}", question.query_type(), name.trim_end_matches('.'));
        let known = match self.find(&name, question.query_type()) {
            Found::Address(ip) => {
                response.add_answer(Record::from_rdata(question.name().clone(), TTL, RData::A(A(ip))));
                true
            }
            Found::NoData => true,
            Found::NoName => {
                response.metadata.response_code = ResponseCode::NXDomain;
                false
            }
        };
        response.to_vec().ok().map(|bytes| Reply {
            bytes,
            asked: Some((asked, known)),
        })
    }
}

/// The resolver on `ip`'s UDP port given by the system; stopped when dropped.
pub struct Resolver {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Resolver {
    pub async fn start(ip: Ipv4Addr, zone: Zone, calls: Arc<CallLog>) -> std::io::Result<Self> {
        let socket = tokio::net::UdpSocket::bind((ip, 0)).await?;
        let addr = socket.local_addr()?;
        let task = tokio::spawn(async move {
            let mut buf = vec![0u8; 1500];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                let started = Instant::now();
                let Some(Reply { bytes, asked }) = zone.answer(&buf[..n]) else {
                    continue;
                };
                if let Err(e) = socket.send_to(&bytes, from).await {
                    tracing::debug!("resolver: reply to {from}: {e}");
                }
                if let Some((action, known)) = asked {
                    calls.record(Call {
                        at: SystemTime::now(),
                        started,
                        service: "dns",
                        action,
                        status: if known { 200 } else { 404 },
                        latency: started.elapsed(),
                        source: from.ip(),
                        instance_id: zone.instances.by_ip(from.ip()).map(|i| i.instance_id.clone()),
                        fault: None,
                    });
                }
            }
        });
        Ok(Self { addr, task })
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;
    use hickory_proto::rr::Name;

    fn zone() -> Zone {
        Zone {
            front: Ipv4Addr::new(172, 20, 0, 1),
            instances: Instances::new(),
        }
    }

    fn ask(name: &str, kind: RecordType) -> Vec<u8> {
        let mut m = Message::new(4242, MessageType::Query, OpCode::Query);
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), kind));
        m.to_vec().unwrap()
    }

    fn reply(zone: &Zone, name: &str, kind: RecordType) -> (Message, Option<(String, bool)>) {
        let reply = zone.answer(&ask(name, kind)).unwrap();
        (Message::from_vec(&reply.bytes).unwrap(), reply.asked)
    }

    #[test]
    fn aws_endpoints_resolve_to_the_front() {
        let z = zone();
        let (m, asked) = reply(&z, "ec2.us-west-2.amazonaws.com.", RecordType::A);
        assert_eq!(m.metadata.id, 4242);
        assert_eq!(m.metadata.message_type, MessageType::Response);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert_eq!(m.answers.len(), 1);
        assert_eq!(m.answers[0].data, RData::A(A(z.front)));
        assert_eq!(asked, Some(("A ec2.us-west-2.amazonaws.com".to_string(), true)));
        // The name exists, without an IPv6 address.
        let (m, _) = reply(&z, "602401143452.dkr.ecr.us-west-2.amazonaws.com.", RecordType::AAAA);
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert!(m.answers.is_empty());
    }

    #[test]
    fn unknown_names_are_nxdomain() {
        let z = zone();
        for name in [
            "www.example.com.",
            "s3.us-west-2.amazonaws.com.",
            "ip-172-20-0-9.us-west-2.compute.internal.",
        ] {
            let (m, asked) = reply(&z, name, RecordType::A);
            assert_eq!(m.metadata.response_code, ResponseCode::NXDomain, "{name}");
            assert!(m.answers.is_empty());
            assert_eq!(asked.map(|a| a.1), Some(false));
        }
    }

    #[test]
    fn the_run_s_instances_resolve_by_their_private_dns_names() {
        let z = zone();
        let instance = z.instances.register(crate::fakes::instances::tests::instance());
        let name = format!("{}.", instance.private_dns_name());
        assert_eq!(name, "ip-172-18-0-5.us-west-2.compute.internal.");
        let (m, asked) = reply(&z, &name.to_uppercase(), RecordType::A);
        assert_eq!(m.answers[0].data, RData::A(A(Ipv4Addr::new(172, 18, 0, 5))));
        assert_eq!(asked.map(|a| a.1), Some(true));
    }

    #[test]
    fn garbage_and_responses_are_dropped() {
        let z = zone();
        assert!(z.answer(b"\x00\x01garbage").is_none());
        let mut m = Message::new(1, MessageType::Response, OpCode::Query);
        m.add_query(Query::query(
            Name::from_ascii("ec2.us-west-2.amazonaws.com.").unwrap(),
            RecordType::A,
        ));
        assert!(z.answer(&m.to_vec().unwrap()).is_none());
    }
}
