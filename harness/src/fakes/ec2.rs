//! Fake EC2 Query API: DescribeInstances, which bootstraps call to learn the instance's PrivateDnsName (the
//! name EKS requires for the Node).
use super::instances::{Instance, Instances};
use super::sigv4;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::sync::Arc;

/// State of the EC2 fake: the instance registry. Requests must be signed for the region of the instances
/// they ask about.
pub struct Ec2 {
    pub instances: Arc<Instances>,
}

impl Ec2 {
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

fn instance_xml(i: &Instance) -> String {
    format!(
        "<item><instanceId>{id}</instanceId><imageId>{ami}</imageId><instanceState><code>16</code><name>running</name></instanceState>\
<privateDnsName>{dns}</privateDnsName><dnsName></dnsName><instanceType>{ty}</instanceType><placement><availabilityZone>{az}</availabilityZone><tenancy>default</tenancy></placement>\
<privateIpAddress>{ip}</privateIpAddress><architecture>x86_64</architecture>{lifecycle}</item>",
        id = xml_escape(&i.instance_id),
        ami = xml_escape(&i.ami_id),
        dns = xml_escape(&i.private_dns_name()),
        ty = xml_escape(&i.instance_type),
        az = xml_escape(&i.availability_zone),
        ip = i.private_ip,
        lifecycle = if i.lifecycle == "spot" { "<instanceLifecycle>spot</instanceLifecycle>" } else { "" },
    )
}

async fn handle(State(ec2): State<Arc<Ec2>>, headers: HeaderMap, body: String) -> Response {
    let params: HashMap<String, String> = match serde_urlencoded_pairs(&body) {
        Ok(p) => p,
        Err(e) => return ec2_error(StatusCode::BAD_REQUEST, "MalformedQueryString", &e),
    };
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
    // The region a request must be signed for: the region of the instance it names (any region otherwise).
    let region = params
        .iter()
        .find(|(k, _)| k.starts_with("InstanceId."))
        .and_then(|(_, id)| ec2.instances.by_id(id))
        .map(|i| i.region.clone());
    let scope = match (&region, auth.map(sigv4::parse_authorization)) {
        (_, None) => Err("Missing Authentication Token".to_string()),
        (_, Some(Err(e))) => Err(e),
        (Some(r), Some(Ok(a))) => sigv4::check_scope(auth, r, "ec2").map(|_| a),
        (None, Some(Ok(a))) if a.service != "ec2" => {
            Err("Credential should be scoped to correct service: 'ec2'".into())
        }
        (None, Some(Ok(a))) => Ok(a),
    };
    if let Err(message) = scope {
        tracing::info!("ec2: request refused: {message}");
        let code = if auth.is_none() {
            "MissingAuthenticationToken"
        } else {
            "AuthFailure"
        };
        return ec2_error(StatusCode::UNAUTHORIZED, code, &message);
    }
    match params.get("Action").map(String::as_str) {
        Some("DescribeInstances") => describe_instances(&ec2, &params),
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

fn serde_urlencoded_pairs(body: &str) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    for pair in body.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode =
            |s: &str| percent_decode(&s.replace('+', " ")).ok_or_else(|| format!("bad percent-encoding in '{pair}'"));
        out.insert(decode(k)?, decode(v)?);
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn describe_instances(ec2: &Ec2, params: &HashMap<String, String>) -> Response {
    let mut ids: Vec<(usize, &String)> = params
        .iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("InstanceId.")
                .and_then(|n| n.parse().ok())
                .map(|n| (n, v))
        })
        .collect();
    ids.sort();
    let mut found = Vec::new();
    for (_, id) in &ids {
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
                instance_xml(i)
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

    #[test]
    fn form_decoding() {
        let p =
            serde_urlencoded_pairs("Action=DescribeInstances&InstanceId.1=i-abc&Version=2016-11-15&X=a%2Fb+c").unwrap();
        assert_eq!(p["Action"], "DescribeInstances");
        assert_eq!(p["InstanceId.1"], "i-abc");
        assert_eq!(p["X"], "a/b c");
        assert!(serde_urlencoded_pairs("A=%zz").is_err());
    }
}
