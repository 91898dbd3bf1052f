//! Probes the kubelet's :10250 the way a client that trusts only the cluster CA would: the handshake succeeds
//! only once the kubelet serves a certificate chained to the cluster CA and valid for the node's IP.
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use x509_parser::prelude::*;

/// What the kubelet presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingCert {
    pub subject_cn: String,
    pub subject_o: Vec<String>,
    pub dns_names: Vec<String>,
    pub ips: Vec<IpAddr>,
}

/// `Ok(cert)` when a TLS handshake verified against `ca_pem` succeeds; `Err(reason)` otherwise.
pub async fn probe(ip: IpAddr, port: u16, ca_pem: &str) -> Result<ServingCert, String> {
    let mut roots = rustls::RootCertStore::empty();
    let der = crate::pki::pem_to_der(ca_pem).map_err(|e| e.to_string())?;
    roots
        .add(rustls::pki_types::CertificateDer::from(der))
        .map_err(|e| e.to_string())?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::TcpStream::connect(SocketAddr::new(ip, port)),
    )
    .await
    .map_err(|_| "connect timed out".to_string())?
    .map_err(|e| format!("connect: {e}"))?;
    let name = rustls::pki_types::ServerName::IpAddress(ip.into());
    let tls = tokio::time::timeout(Duration::from_secs(2), connector.connect(name, tcp))
        .await
        .map_err(|_| "handshake timed out".to_string())?
        .map_err(|e| format!("handshake: {e}"))?;
    let (_, session) = tls.get_ref();
    let leaf = session
        .peer_certificates()
        .and_then(|c| c.first())
        .ok_or("no peer certificate")?;
    describe(leaf.as_ref())
}

pub fn describe(der: &[u8]) -> Result<ServingCert, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| e.to_string())?;
    let subject = cert.subject();
    let mut out = ServingCert {
        subject_cn: subject
            .iter_common_name()
            .filter_map(|c| c.as_str().ok())
            .next()
            .unwrap_or_default()
            .to_string(),
        subject_o: subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect(),
        dns_names: vec![],
        ips: vec![],
    };
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => out.dns_names.push(d.to_string()),
                GeneralName::IPAddress(b) if b.len() == 4 => out.ips.push(IpAddr::from([b[0], b[1], b[2], b[3]])),
                _ => {}
            }
        }
    }
    out.dns_names.sort();
    out.ips.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki::{Ca, Usage};
    use rcgen::SanType;

    async fn serve(cert: crate::pki::CertKey) -> SocketAddr {
        let certs = vec![rustls::pki_types::CertificateDer::from(
            crate::pki::pem_to_der(&cert.cert_pem).unwrap(),
        )];
        let key = rustls::pki_types::PrivateKeyDer::try_from(
            x509_parser::pem::parse_x509_pem(cert.key_pem.as_bytes())
                .unwrap()
                .1
                .contents,
        )
        .unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((s, _)) = listener.accept().await {
                let a = acceptor.clone();
                tokio::spawn(async move {
                    let _ = a.accept(s).await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn accepts_only_certificates_from_the_cluster_ca() {
        let ca = Ca::generate("kubernetes").unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let good = ca
            .issue(
                "system:node:n1",
                &["system:nodes"],
                &[SanType::IpAddress(ip)],
                Usage::Server,
            )
            .unwrap();
        let addr = serve(good).await;
        let cert = probe(ip, addr.port(), &ca.0.cert_pem).await.unwrap();
        assert_eq!(cert.subject_cn, "system:node:n1");
        assert_eq!(cert.subject_o, ["system:nodes"]);
        assert_eq!(cert.ips, [ip]);

        let other = Ca::generate("other").unwrap();
        let foreign = other
            .issue(
                "system:node:n1",
                &["system:nodes"],
                &[SanType::IpAddress(ip)],
                Usage::Server,
            )
            .unwrap();
        let addr = serve(foreign).await;
        assert!(probe(ip, addr.port(), &ca.0.cert_pem)
            .await
            .unwrap_err()
            .contains("handshake"));

        let wrong_ip = ca
            .issue(
                "system:node:n1",
                &["system:nodes"],
                &[SanType::IpAddress("10.9.9.9".parse().unwrap())],
                Usage::Server,
            )
            .unwrap();
        let addr = serve(wrong_ip).await;
        assert!(probe(ip, addr.port(), &ca.0.cert_pem).await.is_err());
    }
}
