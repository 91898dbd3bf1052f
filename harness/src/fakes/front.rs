//! AWS's HTTPS endpoints by their own names (`ec2.us-west-2.amazonaws.com`, `api.ecr.…`, the EKS ECR registry),
//! for a node that reaches AWS as an instance does, with no endpoint variable: the run's resolver
//! ([`super::resolver`]) answers those names with the front's address, and the front serves each name with a
//! certificate the run's endpoints CA signs for it (issued when a client first asks for it by SNI), then hands the
//! request, Host and caller unchanged, to the fake of that service. SigV4 signs the Host header, so a fake checks
//! the very signature the client made for AWS's name.
use axum::extract::Request;
use axum::response::IntoResponse;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The AWS services a node reaches through the front.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    Ec2,
    Eks,
    Sts,
    CloudFormation,
    /// ECR's API (`api.ecr.<region>.amazonaws.com`).
    Ecr,
    /// An ECR registry (`<account>.dkr.ecr.<region>.amazonaws.com`).
    Registry,
}

/// `us-west-2`, `us-gov-west-1`, `ap-southeast-1`: two letters, one or more words, a number.
fn is_region(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 3
        && parts[0].len() == 2
        && parts[0].bytes().all(|b| b.is_ascii_lowercase())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts
            .last()
            .is_some_and(|n| !n.is_empty() && n.len() <= 2 && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The service AWS serves at `host` (a port and a trailing dot ignored, any case), among those the front has;
/// `None` for any other name.
pub fn service_of(host: &str) -> Option<Service> {
    let host = host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let rest = host.strip_suffix(".amazonaws.com")?;
    let labels: Vec<&str> = rest.split('.').collect();
    match labels.as_slice() {
        ["sts"] => Some(Service::Sts),
        [service, region] if is_region(region) => match *service {
            "ec2" => Some(Service::Ec2),
            "eks" => Some(Service::Eks),
            "sts" => Some(Service::Sts),
            "cloudformation" => Some(Service::CloudFormation),
            "ecr" => Some(Service::Ecr),
            _ => None,
        },
        ["api", "ecr", region] if is_region(region) => Some(Service::Ecr),
        [account, "dkr", "ecr", region]
            if is_region(region) && account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit()) =>
        {
            Some(Service::Registry)
        }
        _ => None,
    }
}

/// The front's router: each request to the fake of the service its Host names; 421 for a name it does not
/// serve (a client that reached the front under another name).
pub fn router(routes: Vec<(Service, axum::Router)>) -> axum::Router {
    let routes: Arc<HashMap<Service, axum::Router>> = Arc::new(routes.into_iter().collect());
    axum::Router::new().fallback(move |req: Request| {
        let routes = routes.clone();
        async move {
            use tower::ServiceExt;
            // An absolute-form target's authority wins over Host (RFC 9112 3.2.2).
            let host = req
                .uri()
                .host()
                .map(str::to_string)
                .or_else(|| {
                    req.headers()
                        .get(axum::http::header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .map(str::to_string)
                })
                .unwrap_or_default();
            let Some(fake) = service_of(&host).and_then(|s| routes.get(&s)).cloned() else {
                return (
                    axum::http::StatusCode::MISDIRECTED_REQUEST,
                    format!("nodejoin: no AWS service of this run answers at '{host}'\n"),
                )
                    .into_response();
            };
            match fake.oneshot(req).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    })
}

/// How many names the front issues certificates for in one run: the services, regions and registries of a run's
/// scenarios, many times over.
pub const MAX_NAMES: usize = 256;

/// Certificates for the names the front serves, each issued by the run's endpoints CA the first time a client
/// names it (SNI), then kept for the run. A handshake for any other name, or without a name, is refused, and so
/// is one for a new name once [`MAX_NAMES`] are issued (a node naming endless accounts' registries must not grow
/// the harness without bound).
pub struct Certificates {
    ca: crate::pki::Ca,
    issued: Mutex<HashMap<String, Arc<rustls::sign::CertifiedKey>>>,
}

impl std::fmt::Debug for Certificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("front::Certificates")
    }
}

impl Certificates {
    pub fn new(ca: crate::pki::Ca) -> Self {
        Self {
            ca,
            issued: Mutex::new(HashMap::new()),
        }
    }

    /// The certificate for `name`, issued now if it is the first time.
    pub fn for_name(&self, name: &str) -> Result<Arc<rustls::sign::CertifiedKey>, String> {
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if service_of(&name).is_none() {
            return Err(format!("no AWS service of this run answers at '{name}'"));
        }
        let mut issued = self.issued.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(found) = issued.get(&name) {
            return Ok(found.clone());
        }
        if issued.len() >= MAX_NAMES {
            return Err(format!(
                "{MAX_NAMES} names already have certificates in this run; '{name}' is refused"
            ));
        }
        let san = rcgen::SanType::DnsName(name.clone().try_into().map_err(|e| format!("{name}: {e}"))?);
        let cert = self
            .ca
            .issue(&name, &[], &[san], crate::pki::Usage::Server)
            .map_err(|e| e.to_string())?;
        let der = crate::pki::pem_to_der(&cert.cert_pem).map_err(|e| e.to_string())?;
        let key = rustls::pki_types::PrivateKeyDer::try_from(
            crate::pki::pem_to_der(&cert.key_pem).map_err(|e| e.to_string())?,
        )
        .map_err(|e| format!("key: {e}"))?;
        let signer = rustls::crypto::ring::sign::any_supported_type(&key).map_err(|e| format!("key: {e}"))?;
        let certified = Arc::new(rustls::sign::CertifiedKey::new(
            vec![rustls::pki_types::CertificateDer::from(der)],
            signer,
        ));
        issued.insert(name, certified.clone());
        Ok(certified)
    }
}

impl rustls::server::ResolvesServerCert for Certificates {
    fn resolve(&self, hello: rustls::server::ClientHello<'_>) -> Option<Arc<rustls::sign::CertifiedKey>> {
        let name = hello.server_name()?;
        match self.for_name(name) {
            Ok(cert) => Some(cert),
            Err(e) => {
                tracing::debug!("front: refused a handshake for {name}: {e}");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::Response;

    #[test]
    fn aws_names_map_to_their_services() {
        assert_eq!(service_of("ec2.us-west-2.amazonaws.com"), Some(Service::Ec2));
        assert_eq!(service_of("EC2.us-west-2.amazonaws.com.:443"), Some(Service::Ec2));
        assert_eq!(service_of("eks.eu-central-1.amazonaws.com"), Some(Service::Eks));
        assert_eq!(service_of("sts.amazonaws.com"), Some(Service::Sts));
        assert_eq!(service_of("sts.us-gov-west-1.amazonaws.com"), Some(Service::Sts));
        assert_eq!(
            service_of("cloudformation.ap-southeast-1.amazonaws.com"),
            Some(Service::CloudFormation)
        );
        assert_eq!(service_of("api.ecr.us-west-2.amazonaws.com"), Some(Service::Ecr));
        assert_eq!(
            service_of("602401143452.dkr.ecr.us-west-2.amazonaws.com"),
            Some(Service::Registry)
        );
    }

    #[test]
    fn other_names_are_not_served() {
        for host in [
            "amazonaws.com",
            "s3.us-west-2.amazonaws.com",
            "ec2.amazonaws.com",
            "ec2.us-west.amazonaws.com",
            "ec2.us-west-2.amazonaws.com.evil.example",
            "evil.ec2.us-west-2.amazonaws.com",
            "60240114345.dkr.ecr.us-west-2.amazonaws.com",
            "60240114345x.dkr.ecr.us-west-2.amazonaws.com",
            "ip-172-20-0-5.us-west-2.compute.internal",
            "",
        ] {
            assert_eq!(service_of(host), None, "{host}");
        }
    }

    #[test]
    fn a_certificate_is_issued_once_per_served_name_and_never_for_another() {
        let certs = Certificates::new(crate::pki::Ca::generate("test endpoints CA").unwrap());
        let a = certs.for_name("ec2.us-west-2.amazonaws.com").unwrap();
        let b = certs.for_name("EC2.us-west-2.amazonaws.com.").unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        let der = a.cert[0].as_ref().to_vec();
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        let sans = parsed.subject_alternative_name().unwrap().unwrap();
        let (dns, _, _) = crate::pki::split_sans(&sans.value.general_names);
        assert_eq!(dns, vec!["ec2.us-west-2.amazonaws.com".to_string()]);
        assert!(certs.for_name("www.example.com").is_err());
        // A bound on the names one run issues: the names issued still work, a new one is refused.
        for i in 1..MAX_NAMES {
            certs
                .for_name(&format!("{:012}.dkr.ecr.us-west-2.amazonaws.com", i))
                .unwrap();
        }
        assert!(certs.for_name("000000009999.dkr.ecr.us-west-2.amazonaws.com").is_err());
        assert!(certs.for_name("ec2.us-west-2.amazonaws.com").is_ok());
    }

    #[tokio::test]
    async fn requests_reach_the_fake_their_host_names() {
        use tower::ServiceExt;
        let ec2 = axum::Router::new().fallback(|| async { "ec2" });
        let registry = axum::Router::new().fallback(|| async { "registry" });
        let front = router(vec![(Service::Ec2, ec2), (Service::Registry, registry)]);
        let ask = |host: &str| {
            Request::builder()
                .uri("/v2/")
                .header("host", host)
                .body(axum::body::Body::empty())
                .unwrap()
        };
        let body = |r: Response| async move {
            let status = r.status();
            let bytes = axum::body::to_bytes(r.into_body(), 1024).await.unwrap();
            (status.as_u16(), String::from_utf8_lossy(&bytes).to_string())
        };
        let r = front.clone().oneshot(ask("ec2.us-west-2.amazonaws.com")).await.unwrap();
        assert_eq!(body(r).await, (200, "ec2".to_string()));
        let r = front
            .clone()
            .oneshot(ask("602401143452.dkr.ecr.us-west-2.amazonaws.com"))
            .await
            .unwrap();
        assert_eq!(body(r).await.1, "registry");
        // A served name whose fake the front was not given, and a name that is not AWS's.
        let r = front.clone().oneshot(ask("eks.us-west-2.amazonaws.com")).await.unwrap();
        assert_eq!(body(r).await.0, 421);
        let r = front.clone().oneshot(ask("example.com")).await.unwrap();
        assert_eq!(body(r).await.0, 421);
        // An absolute-form target names the service, whatever Host says.
        let absolute = Request::builder()
            .uri("https://ec2.us-west-2.amazonaws.com/")
            .header("host", "example.com")
            .body(axum::body::Body::empty())
            .unwrap();
        let r = front.oneshot(absolute).await.unwrap();
        assert_eq!(body(r).await.1, "ec2");
    }
}
