//! The VPC's resolver as a VM node sees it: the run's DHCP names it as the DNS server at the link-local address
//! every instance has for Route 53's resolver (169.254.169.253; EC2's own DHCP names the same resolver at the
//! VPC's base address plus two, which on a Docker network is a container's), and the host sends what a VM asks
//! there here, as it does IMDS's address. It answers what Route 53's resolver answers inside a VPC for the names a
//! bootstrap asks: the endpoints of the AWS services the run fakes, in any region (with the front's address:
//! [`super::front`]), and the private DNS names of the run's instances (`ip-10-0-1-23.us-west-2.compute.internal`).
//! It does not recurse: any other name is NXDOMAIN at once. It answers only the run's own callers, over UDP and
//! TCP, and each question is recorded in the run's call log as `dns A <name>` with 200 (the name exists) or 404
//! (no such name), under the instance that asked.
use super::callers::Callers;
use super::calls::{Call, CallLog};
use super::instances::Instances;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, SOA};
use hickory_proto::rr::{DNSClass, Name, RData, Record, RecordType};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Route 53 resolver's address on every instance's link, beside IMDS's.
pub const LINK_ADDRESS: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 253);

/// How long a client may keep an answer, or the absence of one; instances' addresses do not change while a run
/// lives.
const TTL: u32 = 60;

/// TCP connections served at once, and how long one may wait for its next message.
const TCP_CONNECTIONS: usize = 64;
const TCP_IDLE: Duration = Duration::from_secs(10);

/// What the resolver knows: where the front listens (the answer for AWS's names), the run's instances, and who
/// may ask.
#[derive(Clone)]
pub struct Zone {
    pub front: Ipv4Addr,
    pub instances: Arc<Instances>,
    pub callers: Arc<Callers>,
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
    /// The name exists but has no record of the type asked (an AAAA for an IPv4-only name, a parent of names that
    /// exist such as `us-west-2.amazonaws.com`).
    NoData,
    NoName,
}

/// Whether `name` (lowercase, no trailing dot) is a parent of names the resolver answers: it exists, with no
/// address of its own.
fn is_parent(name: &str) -> bool {
    if matches!(name, "amazonaws.com" | "internal" | "compute.internal" | "ec2.internal") {
        return true;
    }
    if let Some(region) = name.strip_suffix(".compute.internal") {
        return !region.contains('.');
    }
    let Some(rest) = name.strip_suffix(".amazonaws.com") else {
        return false;
    };
    match rest.split('.').collect::<Vec<_>>().as_slice() {
        [region] | ["ecr", region] | ["api" | "dkr", "ecr", region] => {
            super::front::service_of(&format!("ec2.{region}.amazonaws.com")).is_some()
        }
        _ => false,
    }
}

impl Zone {
    fn find(&self, name: &str, kind: RecordType) -> Found {
        let address = if super::front::service_of(name).is_some() {
            Some(self.front)
        } else {
            self.instances.by_private_dns_name(name).map(|i| i.private_ip)
        };
        match (address, kind) {
            (Some(a), RecordType::A) => Found::Address(a),
            (Some(_), _) => Found::NoData,
            (None, _) if is_parent(name) => Found::NoData,
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
        response.metadata.checking_disabled = request.metadata.checking_disabled;
        if let Some(edns) = &request.edns {
            // EDNS answered with EDNS, the DO bit echoed (RFC 3225): a resolver that gets neither back takes the
            // server for an older one and asks again.
            let mut ours = Edns::new();
            ours.set_max_payload(edns.max_payload().clamp(512, 1232));
            ours.set_dnssec_ok(edns.flags().dnssec_ok);
            response.set_edns(ours);
        }
        let done = |response: Message, asked: Option<(String, bool)>| {
            response.to_vec().ok().map(|bytes| Reply { bytes, asked })
        };
        let [question] = request.queries.as_slice() else {
            response.metadata.response_code = ResponseCode::FormErr;
            return done(response, None);
        };
        response.add_query(question.clone());
        if request.metadata.op_code != OpCode::Query || question.query_class() != DNSClass::IN {
            response.metadata.response_code = ResponseCode::NotImp;
            return done(response, None);
        }
        let name = question.name().to_ascii().trim_end_matches('.').to_ascii_lowercase();
        let asked = format!("{} {name}", question.query_type());
        let known = match self.find(&name, question.query_type()) {
            Found::Address(ip) => {
                response.add_answer(Record::from_rdata(question.name().clone(), TTL, RData::A(A(ip))));
                true
            }
            Found::NoData => {
                response.add_authority(negative_soa());
                true
            }
            Found::NoName => {
                response.metadata.response_code = ResponseCode::NXDomain;
                response.add_authority(negative_soa());
                false
            }
        };
        done(response, Some((asked, known)))
    }
}

/// The SOA a negative answer carries, so a resolver keeps it for [`TTL`] instead of asking again (RFC 2308). Its
/// owner is the root, a suffix of every name asked.
fn negative_soa() -> Record {
    let resolver = Name::from_ascii("resolver.nodejoin.invalid.").unwrap_or_else(|_| Name::root());
    let soa = SOA::new(resolver.clone(), resolver, 1, 3600, 600, 86400, TTL);
    Record::from_rdata(Name::root(), TTL, RData::SOA(soa))
}

/// The resolver on `ip`'s UDP and TCP ports given by the system; stopped when dropped.
pub struct Resolver {
    pub udp: SocketAddr,
    pub tcp: SocketAddr,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Resolver {
    pub async fn start(ip: Ipv4Addr, zone: Zone, calls: Arc<CallLog>) -> std::io::Result<Self> {
        let socket = tokio::net::UdpSocket::bind((ip, 0)).await?;
        let udp = socket.local_addr()?;
        let listener = tokio::net::TcpListener::bind((ip, 0)).await?;
        let tcp = listener.local_addr()?;
        let (z, log) = (zone.clone(), calls.clone());
        let over_udp = tokio::spawn(async move {
            let mut buf = vec![0u8; 1500];
            loop {
                let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                    continue;
                };
                if !z.callers.admits(from.ip()) {
                    continue;
                }
                let started = Instant::now();
                let Some(reply) = z.answer(&buf[..n]) else {
                    continue;
                };
                if let Err(e) = socket.send_to(&reply.bytes, from).await {
                    tracing::debug!("resolver: reply to {from}: {e}");
                }
                record(&z, &log, from, started, reply.asked);
            }
        });
        let slots = Arc::new(tokio::sync::Semaphore::new(TCP_CONNECTIONS));
        let over_tcp = tokio::spawn(async move {
            loop {
                let Ok((stream, from)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                if !zone.callers.admits(from.ip()) {
                    continue;
                }
                let Ok(slot) = slots.clone().try_acquire_owned() else {
                    continue;
                };
                let (zone, calls) = (zone.clone(), calls.clone());
                tokio::spawn(async move {
                    let _slot = slot;
                    serve_tcp(stream, from, &zone, &calls).await;
                });
            }
        });
        Ok(Self {
            udp,
            tcp,
            tasks: vec![over_udp, over_tcp],
        })
    }
}

/// Answers the messages of one TCP connection (each with its two-byte length, RFC 1035 4.2.2) until the caller
/// closes it or is idle for [`TCP_IDLE`].
async fn serve_tcp(mut stream: tokio::net::TcpStream, from: SocketAddr, zone: &Zone, calls: &CallLog) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    loop {
        let mut len = [0u8; 2];
        let Ok(Ok(_)) = tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut len)).await else {
            return;
        };
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
        let Ok(Ok(_)) = tokio::time::timeout(TCP_IDLE, stream.read_exact(&mut query)).await else {
            return;
        };
        let started = Instant::now();
        let Some(reply) = zone.answer(&query) else {
            return;
        };
        let Ok(n) = u16::try_from(reply.bytes.len()) else {
            return;
        };
        let mut framed = n.to_be_bytes().to_vec();
        framed.extend(&reply.bytes);
        if stream.write_all(&framed).await.is_err() {
            return;
        }
        record(zone, calls, from, started, reply.asked);
    }
}

/// The question in the call log, under the instance that asked.
fn record(zone: &Zone, calls: &CallLog, from: SocketAddr, started: Instant, asked: Option<(String, bool)>) {
    let Some((action, known)) = asked else { return };
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

impl Drop for Resolver {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::Query;

    fn zone() -> Zone {
        Zone {
            front: Ipv4Addr::new(172, 20, 0, 1),
            instances: Instances::new(),
            callers: Arc::new(Callers::of_run("172.20.0.0/16".parse().unwrap())),
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
    fn unknown_names_are_nxdomain_with_an_soa_to_keep_it() {
        let z = zone();
        for name in [
            "www.example.com.",
            "s3.us-west-2.amazonaws.com.",
            "ip-172-20-0-9.us-west-2.compute.internal.",
        ] {
            let (m, asked) = reply(&z, name, RecordType::A);
            assert_eq!(m.metadata.response_code, ResponseCode::NXDomain, "{name}");
            assert!(m.answers.is_empty());
            assert_eq!(m.authorities.len(), 1);
            assert_eq!(m.authorities[0].record_type(), RecordType::SOA);
            assert_eq!(asked.map(|a| a.1), Some(false));
        }
    }

    #[test]
    fn parents_of_answered_names_exist_without_an_address() {
        let z = zone();
        for name in [
            "amazonaws.com.",
            "us-west-2.amazonaws.com.",
            "dkr.ecr.us-west-2.amazonaws.com.",
            "us-west-2.compute.internal.",
            "ec2.internal.",
        ] {
            let (m, asked) = reply(&z, name, RecordType::A);
            assert_eq!(m.metadata.response_code, ResponseCode::NoError, "{name}");
            assert!(m.answers.is_empty(), "{name}");
            assert_eq!(asked.map(|a| a.1), Some(true));
        }
        let (m, _) = reply(&z, "evil.us-west-2.amazonaws.com.", RecordType::A);
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    }

    #[test]
    fn edns_and_its_do_bit_are_echoed_and_the_name_logged_in_lowercase() {
        let z = zone();
        let mut m = Message::new(7, MessageType::Query, OpCode::Query);
        m.add_query(Query::query(
            Name::from_ascii("EC2.US-West-2.amazonaws.com.").unwrap(),
            RecordType::A,
        ));
        let mut edns = Edns::new();
        edns.set_max_payload(4096).set_dnssec_ok(true);
        m.set_edns(edns);
        let reply = z.answer(&m.to_vec().unwrap()).unwrap();
        let back = Message::from_vec(&reply.bytes).unwrap();
        let edns = back.edns.expect("EDNS answered with EDNS");
        assert!(edns.flags().dnssec_ok);
        assert_eq!(edns.max_payload(), 1232);
        assert_eq!(reply.asked.unwrap().0, "A ec2.us-west-2.amazonaws.com");
        // Another class is not answered as IN.
        let mut m = Message::new(8, MessageType::Query, OpCode::Query);
        let mut q = Query::query(Name::from_ascii("ec2.us-west-2.amazonaws.com.").unwrap(), RecordType::A);
        q.set_query_class(DNSClass::CH);
        m.add_query(q);
        let reply = z.answer(&m.to_vec().unwrap()).unwrap();
        let back = Message::from_vec(&reply.bytes).unwrap();
        assert_eq!(back.metadata.response_code, ResponseCode::NotImp);
        assert!(reply.asked.is_none());
    }

    #[tokio::test]
    async fn it_answers_over_udp_and_tcp_and_logs_each_question() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let calls = CallLog::new();
        let r = Resolver::start(Ipv4Addr::LOCALHOST, zone(), calls.clone())
            .await
            .unwrap();
        let query = ask("ec2.us-west-2.amazonaws.com.", RecordType::A);
        let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        udp.send_to(&query, r.udp).await.unwrap();
        let mut buf = vec![0u8; 1500];
        let (n, _) = tokio::time::timeout(Duration::from_secs(5), udp.recv_from(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(Message::from_vec(&buf[..n]).unwrap().answers.len(), 1);
        let mut tcp = tokio::net::TcpStream::connect(r.tcp).await.unwrap();
        let mut framed = u16::try_from(query.len()).unwrap().to_be_bytes().to_vec();
        framed.extend(&query);
        tcp.write_all(&framed).await.unwrap();
        let mut len = [0u8; 2];
        tcp.read_exact(&mut len).await.unwrap();
        let mut answer = vec![0u8; usize::from(u16::from_be_bytes(len))];
        tcp.read_exact(&mut answer).await.unwrap();
        assert_eq!(Message::from_vec(&answer).unwrap().answers.len(), 1);
        drop(tcp);
        // The TCP question is logged once its answer is written.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let logged = calls.unowned();
        assert_eq!(logged.len(), 2, "{logged:?}");
        assert!(logged
            .iter()
            .all(|c| c.key() == "dns A ec2.us-west-2.amazonaws.com" && c.status == 200));
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
