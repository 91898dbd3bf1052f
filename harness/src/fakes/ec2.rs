//! Fake EC2 Query API: DescribeInstances, which bootstraps call to learn the instance's PrivateDnsName (the
//! name EKS requires for the Node), and DescribeInstanceTypes, for the ENI limits of types a bootstrap's own
//! max-pods table lacks. Signatures are verified against the credentials the fake IMDS issued.
use super::instances::{Instance, Instances};
use super::sigv4;
use crate::eks::max_pods::EniLimits;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// State of the EC2 fake: the instance registry and the instance-type catalogue. Requests must be signed for
/// the region of the instances they ask about.
pub struct Ec2 {
    pub instances: Arc<Instances>,
    /// ENI limits by instance type: the bundled table plus types scenarios declare.
    pub instance_types: RwLock<BTreeMap<String, EniLimits>>,
    /// Instances whose PrivateDnsName DescribeInstances leaves empty, for this many more answers.
    empty_dns: std::sync::Mutex<HashMap<String, u32>>,
}

impl Ec2 {
    pub fn new(instances: Arc<Instances>) -> Arc<Self> {
        let table = crate::eks::max_pods::parse_table(crate::eks::max_pods::TABLE).unwrap_or_default();
        Arc::new(Self {
            instances,
            instance_types: RwLock::new(table),
            empty_dns: Default::default(),
        })
    }

    /// Fault injection: the next `calls` DescribeInstances answers about `instance_id` carry no PrivateDnsName.
    pub fn empty_private_dns_name_for(&self, instance_id: &str, calls: u32) {
        if let Ok(mut m) = self.empty_dns.lock() {
            m.insert(instance_id.to_string(), calls);
        }
    }

    /// Whether this answer about `instance_id` leaves PrivateDnsName empty (counting it).
    fn take_empty_dns(&self, instance_id: &str) -> bool {
        let Ok(mut m) = self.empty_dns.lock() else {
            return false;
        };
        match m.get_mut(instance_id) {
            Some(n) if *n > 0 => {
                *n -= 1;
                true
            }
            _ => false,
        }
    }

    /// Adds (or replaces) an instance type in the catalogue.
    pub fn add_instance_type(&self, name: &str, limits: EniLimits) {
        if let Ok(mut t) = self.instance_types.write() {
            t.insert(name.to_string(), limits);
        }
    }

    pub fn router(self: &Arc<Self>) -> axum::Router {
        axum::Router::new().fallback(handle).with_state(self.clone())
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The EC2 Query protocol's error document.
fn ec2_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{}</Code><Message>{}</Message></Error></Errors><RequestID>{}</RequestID></Response>",
        xml_escape(code),
        xml_escape(message),
        super::random_hex(32)
    );
    (status, [("content-type", "text/xml;charset=UTF-8")], body).into_response()
}

/// An instance as DescribeInstances lists it; `terminated`: in state 48, as EC2 keeps a terminated instance
/// listed for about an hour.
fn instance_xml(i: &Instance, empty_dns: bool, terminated: bool) -> String {
    format!(
        "<item><instanceId>{id}</instanceId><imageId>{ami}</imageId><instanceState>{state}</instanceState>\
<privateDnsName>{dns}</privateDnsName><dnsName></dnsName><instanceType>{ty}</instanceType><placement><availabilityZone>{az}</availabilityZone><tenancy>default</tenancy></placement>\
<privateIpAddress>{ip}</privateIpAddress><subnetId>{subnet}</subnetId><vpcId>{vpc}</vpcId><architecture>x86_64</architecture>{lifecycle}</item>",
        id = xml_escape(&i.instance_id),
        ami = xml_escape(&i.ami_id),
        dns = if empty_dns { String::new() } else { xml_escape(&i.private_dns_name()) },
        ty = xml_escape(&i.instance_type),
        az = xml_escape(&i.availability_zone),
        ip = i.private_ip,
        subnet = xml_escape(&i.vpc.subnet_id),
        vpc = xml_escape(&i.vpc.vpc_id),
        lifecycle = if i.lifecycle == "spot" { "<instanceLifecycle>spot</instanceLifecycle>" } else { "" },
        state = if terminated {
            "<code>48</code><name>terminated</name>"
        } else {
            "<code>16</code><name>running</name>"
        },
    )
}

async fn handle(State(ec2): State<Arc<Ec2>>, call: super::SignedCall) -> Response {
    let params: HashMap<String, String> = match call.form() {
        Ok(p) => p.into_iter().collect(),
        Err(e) => return ec2_error(StatusCode::BAD_REQUEST, "MalformedQueryString", &e),
    };
    // The region a request must be signed for: the region of the instance it names (any region otherwise).
    let region = params
        .iter()
        .find(|(k, _)| k.starts_with("InstanceId."))
        .and_then(|(_, id)| ec2.instances.by_id(id))
        .map(|i| i.region.clone());
    let verified = sigv4::verify_request(
        &call.received(),
        &ec2.instances.iam,
        "ec2",
        region.as_deref(),
        SystemTime::now(),
    );
    if let Err(f) = verified {
        let message = f.message();
        tracing::info!("ec2: request refused: {message}");
        return ec2_error(StatusCode::UNAUTHORIZED, f.ec2_code(), &message);
    }
    match params.get("Action").map(String::as_str) {
        Some("DescribeInstances") => describe_instances(&ec2, &params),
        Some("DescribeInstanceTypes") => describe_instance_types(&ec2, &params),
        Some(other) => ec2_error(
            StatusCode::BAD_REQUEST,
            "InvalidAction",
            &format!("The action {other} is not valid for this web service."),
        ),
        None => ec2_error(
            StatusCode::BAD_REQUEST,
            "MissingAction",
            "The request must contain the parameter Action",
        ),
    }
}

/// The `InstanceType.N` / `InstanceId.N` values of a request, in order.
fn numbered<'a>(params: &'a HashMap<String, String>, prefix: &str) -> Vec<&'a String> {
    let mut v: Vec<(usize, &String)> = params
        .iter()
        .filter_map(|(k, v)| k.strip_prefix(prefix).and_then(|n| n.parse().ok()).map(|n| (n, v)))
        .collect();
    v.sort();
    v.into_iter().map(|(_, v)| v).collect()
}

fn describe_instance_types(ec2: &Ec2, params: &HashMap<String, String>) -> Response {
    let wanted = numbered(params, "InstanceType.");
    if wanted.is_empty() {
        return ec2_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterCombination",
            "nodejoin's fake EC2 answers DescribeInstanceTypes for explicit InstanceTypes only",
        );
    }
    let catalogue = ec2.instance_types.read().map(|t| t.clone()).unwrap_or_default();
    let mut items = String::new();
    for ty in wanted {
        let Some(l) = catalogue.get(ty.as_str()) else {
            return ec2_error(
                StatusCode::BAD_REQUEST,
                "InvalidInstanceType",
                &format!("The following supplied instance types do not exist: [{ty}]"),
            );
        };
        items.push_str(&format!(
            "<item><instanceType>{}</instanceType><currentGeneration>true</currentGeneration><networkInfo><maximumNetworkInterfaces>{}</maximumNetworkInterfaces><ipv4AddressesPerInterface>{}</ipv4AddressesPerInterface><ipv6Supported>true</ipv6Supported></networkInfo></item>",
            xml_escape(ty),
            l.enis,
            l.ipv4_per_eni
        ));
    }
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstanceTypesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>{}</requestId><instanceTypeSet>{items}</instanceTypeSet></DescribeInstanceTypesResponse>",
        super::random_hex(32)
    );
    (StatusCode::OK, [("content-type", "text/xml;charset=UTF-8")], body).into_response()
}

fn describe_instances(ec2: &Ec2, params: &HashMap<String, String>) -> Response {
    let ids = numbered(params, "InstanceId.");
    let mut found = Vec::new();
    for id in &ids {
        match ec2.instances.by_id(id) {
            Some(i) => found.push(i),
            None => {
                return ec2_error(
                    StatusCode::BAD_REQUEST,
                    "InvalidInstanceID.NotFound",
                    &format!("The instance ID '{id}' does not exist"),
                )
            }
        }
    }
    if ids.is_empty() {
        return ec2_error(
            StatusCode::BAD_REQUEST,
            "InvalidParameterCombination",
            "nodejoin's fake EC2 answers DescribeInstances for explicit InstanceIds only",
        );
    }
    let reservations: String = found
        .iter()
        .map(|i| {
            format!(
                "<item><reservationId>r-{}</reservationId><ownerId>{}</ownerId><groupSet/><instancesSet>{}</instancesSet></item>",
                i.instance_id.trim_start_matches("i-"),
                i.account_id,
                instance_xml(
                    i,
                    ec2.take_empty_dns(&i.instance_id),
                    ec2.instances.is_terminated(&i.instance_id)
                )
            )
        })
        .collect();
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<DescribeInstancesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>{}</requestId><reservationSet>{reservations}</reservationSet></DescribeInstancesResponse>",
        super::random_hex(32)
    );
    (StatusCode::OK, [("content-type", "text/xml;charset=UTF-8")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::sigv4::tests::sign_headers;
    use crate::fakes::FakeServer;

    #[tokio::test]
    async fn signed_calls_and_instance_types() {
        let instances = Instances::new();
        let i = instances.register(crate::fakes::instances::tests::instance());
        let creds = instances.iam.serve(i.holder(), SystemTime::now()).unwrap().credentials;
        let ec2 = Ec2::new(instances);
        ec2.add_instance_type(
            "x9z.large",
            EniLimits {
                enis: 4,
                ipv4_per_eni: 8,
            },
        );
        let s = FakeServer::start("ec2", "127.0.0.1".parse().unwrap(), ec2.router())
            .await
            .unwrap();
        let client = reqwest::Client::new();
        let call = |body: String, region: &'static str| {
            let url = format!("{}/", s.url());
            let ct = ("content-type", "application/x-www-form-urlencoded; charset=utf-8");
            let headers = sign_headers("POST", &url, &[ct], body.as_bytes(), &creds, region, "ec2");
            let mut req = client.post(&url).body(body);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            req.send()
        };
        let types = "Action=DescribeInstanceTypes&Version=2016-11-15&InstanceType.1=";
        let text = call(format!("{types}x9z.large"), "us-west-2")
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(text.contains("<maximumNetworkInterfaces>4</maximumNetworkInterfaces><ipv4AddressesPerInterface>8</ipv4AddressesPerInterface>"), "{text}");
        let text = call(format!("{types}m5.large"), "us-west-2")
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(text.contains("<maximumNetworkInterfaces>3<"), "{text}");
        let text = call(format!("{types}nope.large"), "us-west-2")
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(text.contains("InvalidInstanceType"), "{text}");
        let describe = format!(
            "Action=DescribeInstances&Version=2016-11-15&InstanceId.1={}",
            i.instance_id
        );
        let text = call(describe.clone(), "us-west-2").await.unwrap().text().await.unwrap();
        assert!(
            text.contains(&format!("<privateDnsName>{}</privateDnsName>", i.private_dns_name())),
            "{text}"
        );
        // The scenario's VPC, not one made up per instance.
        let vpc = format!(
            "<subnetId>{}</subnetId><vpcId>{}</vpcId>",
            i.vpc.subnet_id, i.vpc.vpc_id
        );
        assert!(text.contains(&vpc), "{text}");
        // Signed for another region than the instance's.
        let r = call(describe, "eu-west-1").await.unwrap();
        assert_eq!(r.status(), 401);
        assert!(r.text().await.unwrap().contains("AuthFailure"));
        // Unsigned.
        let r = client
            .post(format!("{}/", s.url()))
            .body("Action=DescribeInstances")
            .send()
            .await
            .unwrap();
        assert!(r.text().await.unwrap().contains("MissingAuthenticationToken"));
    }
}
