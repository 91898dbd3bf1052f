//! The fake EC2 world: which instances exist, and who they are. IMDS, EC2, the CSR approver and the cloud-node
//! controller all read it, so a node's identity is defined once.
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};
use tokio::sync::Notify;

/// EC2's default `HttpPutResponseHopLimit` for EKS nodes (the node CloudFormation template's and the EKS AMI's
/// launch templates' value): the node and the pods one hop behind it.
pub const DEFAULT_HOP_LIMIT: u8 = 2;

/// One fake EC2 instance (a node container).
#[derive(Debug, Clone)]
pub struct Instance {
    pub instance_id: String,
    pub instance_type: String,
    /// `on-demand` or `spot`.
    pub lifecycle: String,
    pub availability_zone: String,
    pub region: String,
    pub account_id: String,
    pub ami_id: String,
    pub private_ip: Ipv4Addr,
    pub mac: String,
    /// The scenario's VPC and subnet, the same for all its instances. `private_ip` (the container's real address)
    /// is not inside it: see `eks::network`.
    pub vpc: Arc<super::vpc::Vpc>,
    /// The IAM role of the instance profile, if any.
    pub role_name: Option<String>,
    /// Raw user data (served decoded, as IMDS does); `None` → 404.
    pub user_data: Option<Vec<u8>>,
    /// IMDSv2 required (`http-tokens=required`): requests without a token get 401.
    pub imds_v2_required: bool,
    /// `HttpPutResponseHopLimit`: the IP TTL of IMDS's token responses, so how many hops away a caller (a pod
    /// behind the node: 2) may still get a token.
    pub put_hop_limit: u8,
    /// How IMDS hands out the role's credentials (see [`super::iam`]).
    pub credentials: super::credentials::CredentialPolicy,
    pub launch_time: SystemTime,
}

/// The domain of an instance's private DNS name in `region`: `ec2.internal` in us-east-1,
/// `<region>.compute.internal` elsewhere (also what EC2's DHCP gives as the domain name).
pub fn dns_domain(region: &str) -> String {
    if region == "us-east-1" {
        "ec2.internal".to_string()
    } else {
        format!("{region}.compute.internal")
    }
}

impl Instance {
    /// The instance as its credentials' holder (what `iam::CredentialStore::serve` needs of it).
    pub fn holder(&self) -> super::credentials::Holder<'_> {
        super::credentials::Holder {
            instance_id: &self.instance_id,
            account_id: &self.account_id,
            role_name: self.role_name.as_deref(),
            policy: self.credentials,
        }
    }

    /// `ec2.internal` in us-east-1, `<region>.compute.internal` elsewhere.
    pub fn dns_domain(&self) -> String {
        dns_domain(&self.region)
    }

    /// `ip-10-0-1-23.eu-west-1.compute.internal`: the EC2 PrivateDnsName, which EKS requires as the node name.
    pub fn private_dns_name(&self) -> String {
        let dashed = self.private_ip.to_string().replace('.', "-");
        format!("ip-{dashed}.{}", self.dns_domain())
    }

    /// `aws:///<az>/<instance-id>`.
    pub fn provider_id(&self) -> String {
        format!("aws:///{}/{}", self.availability_zone, self.instance_id)
    }

    pub fn role_arn(&self) -> Option<String> {
        self.role_name
            .as_ref()
            .map(|r| format!("arn:aws:iam::{}:role/{r}", self.account_id))
    }

    /// New random identifiers for an instance at `private_ip`.
    pub fn new_ids() -> (String, String) {
        let id = format!("i-{}", super::random_hex(17));
        let mac_bytes = super::random_hex(10);
        let mac = format!(
            "02:{}:{}:{}:{}:{}",
            &mac_bytes[0..2],
            &mac_bytes[2..4],
            &mac_bytes[4..6],
            &mac_bytes[6..8],
            &mac_bytes[8..10]
        );
        (id, mac)
    }
}

/// One request IMDS answered, for reports and assertions.
#[derive(Debug, Clone)]
pub struct ImdsRequest {
    pub at: SystemTime,
    pub source: IpAddr,
    pub method: String,
    pub path: String,
    pub status: u16,
    pub with_token: bool,
    pub note: String,
}

impl super::capped::Weigh for ImdsRequest {
    fn weight(&self) -> usize {
        self.method.len() + self.path.len() + self.note.len()
    }
}

/// All instances, keyed by private IP (which is how IMDS tells callers apart).
#[derive(Default)]
pub struct Instances {
    /// The instance profiles' credentials.
    pub iam: super::iam::CredentialStore,
    by_ip: RwLock<HashMap<IpAddr, Arc<Instance>>>,
    registered: Notify,
    /// IMDS requests by caller address.
    log: Mutex<super::capped::Capped<IpAddr, ImdsRequest>>,
    /// The instances terminated (`after: terminate`), by id: EC2 still lists them (terminated), the cloud
    /// controller deletes their Nodes. Their addresses are free again, as EC2 frees a terminated instance's: the
    /// engine may give one to another scenario's node, which is then the one at that address.
    terminated: RwLock<HashMap<String, Arc<Instance>>>,
}

impl Instances {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn register(&self, instance: Instance) -> Arc<Instance> {
        let instance = Arc::new(instance);
        if let Ok(mut map) = self.by_ip.write() {
            map.insert(IpAddr::V4(instance.private_ip), instance.clone());
        }
        self.registered.notify_waiters();
        instance
    }

    /// Forgets `instance` (its scenario is over): at its address only if it is still the one there (a terminated
    /// instance's address may be another's by now).
    pub fn remove(&self, instance: &Instance) {
        let ip = IpAddr::V4(instance.private_ip);
        if let Ok(mut map) = self.by_ip.write() {
            if map.get(&ip).is_some_and(|i| i.instance_id == instance.instance_id) {
                map.remove(&ip);
            }
        }
        if let Ok(mut t) = self.terminated.write() {
            t.remove(&instance.instance_id);
        }
        self.iam.forget_instance(&instance.instance_id);
    }

    pub fn by_ip(&self, ip: IpAddr) -> Option<Arc<Instance>> {
        self.by_ip.read().ok()?.get(&ip).cloned()
    }

    /// Waits up to `wait` for an instance at `ip`: a container may call IMDS a moment before the harness has
    /// registered the address Docker gave it.
    pub async fn wait_by_ip(&self, ip: IpAddr, wait: Duration) -> Option<Arc<Instance>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.registered.notified();
            if let Some(found) = self.by_ip(ip) {
                return Some(found);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.by_ip(ip);
            }
        }
    }

    /// EC2 terminates the instance `id`: from now on it reports it `terminated`, and its address is no longer
    /// its own (nothing IMDS serves there is its; [`Instances::forget_requests`] too).
    pub fn terminate(&self, id: &str) {
        let Some(instance) = self.by_id(id) else { return };
        if let Ok(mut map) = self.by_ip.write() {
            let ip = IpAddr::V4(instance.private_ip);
            if map.get(&ip).is_some_and(|i| i.instance_id == id) {
                map.remove(&ip);
            }
        }
        if let Ok(mut t) = self.terminated.write() {
            t.insert(id.to_string(), instance);
        }
    }

    pub fn is_terminated(&self, id: &str) -> bool {
        self.terminated.read().is_ok_and(|t| t.contains_key(id))
    }

    /// A running instance or a terminated one, by id.
    pub fn by_id(&self, id: &str) -> Option<Arc<Instance>> {
        if let Some(t) = self.terminated.read().ok().and_then(|t| t.get(id).cloned()) {
            return Some(t);
        }
        self.by_ip.read().ok()?.values().find(|i| i.instance_id == id).cloned()
    }

    /// A running instance by its private DNS name, else a terminated one (whose address, and so name, another
    /// may have been given since).
    pub fn by_private_dns_name(&self, name: &str) -> Option<Arc<Instance>> {
        let live = self
            .by_ip
            .read()
            .ok()
            .and_then(|m| m.values().find(|i| i.private_dns_name() == name).cloned());
        live.or_else(|| {
            self.terminated
                .read()
                .ok()?
                .values()
                .find(|i| i.private_dns_name() == name)
                .cloned()
        })
    }

    pub fn record(&self, mut request: ImdsRequest) {
        // The path and method are the node's text: kept to a bound, the cut said in them.
        request.path = super::capped::clip(&request.path, super::capped::ENTRY_TEXT);
        request.method = super::capped::clip(&request.method, 16);
        if let Ok(mut log) = self.log.lock() {
            log.push(request.source, request);
        }
    }

    /// Forgets the IMDS requests from `ip` (its node's scenario is over: the next node at this address starts a
    /// log of its own).
    pub fn forget_requests(&self, ip: IpAddr) {
        if let Ok(mut log) = self.log.lock() {
            log.forget(&ip);
        }
    }

    /// How many IMDS requests from `ip` were past the cap: counted, not kept.
    pub fn requests_dropped(&self, ip: IpAddr) -> u64 {
        self.log.lock().map(|l| l.dropped(&ip)).unwrap_or(0)
    }

    /// The IMDS requests made from `ip`, oldest first.
    pub fn requests_from(&self, ip: IpAddr) -> Vec<ImdsRequest> {
        self.log.lock().map(|l| l.of(&ip)).unwrap_or_default()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_terminated_instance_gives_up_its_address() {
        let instances = Instances::new();
        let old = instances.register(instance());
        instances.terminate(&old.instance_id);
        assert!(instances.by_ip(IpAddr::V4(old.private_ip)).is_none());
        assert!(instances.is_terminated(&old.instance_id));
        // Another scenario's node gets the same address.
        let new = instances.register(Instance {
            instance_id: "i-0new".into(),
            ..instance()
        });
        assert_eq!(
            instances.by_id(&old.instance_id).map(|i| i.instance_id.clone()),
            Some(old.instance_id.clone())
        );
        // The terminated one's teardown leaves the new one where it is.
        instances.remove(&old);
        assert_eq!(
            instances
                .by_ip(IpAddr::V4(new.private_ip))
                .map(|i| i.instance_id.clone()),
            Some("i-0new".to_string())
        );
        assert!(instances.by_id(&old.instance_id).is_none() && !instances.is_terminated(&old.instance_id));
    }

    /// A plain m5.large in us-west-2 at 172.18.0.5 with role `NodeRole`.
    pub(crate) fn instance() -> Instance {
        Instance {
            instance_id: "i-0abc".into(),
            instance_type: "m5.large".into(),
            lifecycle: "on-demand".into(),
            availability_zone: "us-west-2a".into(),
            region: "us-west-2".into(),
            account_id: "111122223333".into(),
            ami_id: "ami-1".into(),
            private_ip: Ipv4Addr::new(172, 18, 0, 5),
            mac: "02:00:00:00:00:01".into(),
            vpc: super::super::vpc::Vpc::new("test", &Default::default()),
            role_name: Some("NodeRole".into()),
            user_data: None,
            imds_v2_required: true,
            put_hop_limit: DEFAULT_HOP_LIMIT,
            credentials: Default::default(),
            launch_time: SystemTime::now(),
        }
    }
}
