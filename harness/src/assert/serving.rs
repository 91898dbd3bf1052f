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

impl std::fmt::Display for ServingCert {
    /// `CN system:node:x, O system:nodes, DNS x, IP 10.0.0.1`: the fields a kubelet's serving certificate is
    /// judged by.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |v: Vec<String>| if v.is_empty() { "none".to_string() } else { v.join(" ") };
        write!(
            f,
            "CN {}, O {}, DNS {}, IP {}",
            self.subject_cn,
            list(self.subject_o.clone()),
            list(self.dns_names.clone()),
            list(self.ips.iter().map(|i| i.to_string()).collect())
        )
    }
}

/// `Ok(cert)` when a TLS handshake verified against `ca_pem` succeeds; `Err(reason)` otherwise.
pub async fn probe(ip: IpAddr, port: u16, ca_pem: &str) -> Result<ServingCert, String> {
    describe(&probe_leaf(ip, port, ca_pem).await?)
}

/// What a certificate is told apart from its renewal by: its serial number, in hex.
pub fn serial(der: &[u8]) -> Result<String, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| e.to_string())?;
    Ok(cert.raw_serial_as_string())
}

/// The leaf certificate (DER) served at `ip:port` when a TLS handshake verified against `ca_pem` succeeds.
pub async fn probe_leaf(ip: IpAddr, port: u16, ca_pem: &str) -> Result<Vec<u8>, String> {
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
    Ok(leaf.as_ref().to_vec())
}

pub fn describe(der: &[u8]) -> Result<ServingCert, String> {
    let (_, cert) = X509Certificate::from_der(der).map_err(|e| e.to_string())?;
    let (subject_cn, subject_o) = crate::pki::subject_names(cert.subject());
    let (dns_names, ips, _) = match cert.subject_alternative_name() {
        Ok(Some(san)) => crate::pki::split_sans(&san.value.general_names),
        _ => Default::default(),
    };
    let mut out = ServingCert {
        subject_cn,
        subject_o,
        dns_names,
        ips,
    };
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

    /// Serves a node certificate issued by `issuer` for `san`, and probes it trusting only `trusted`.
    async fn probe_served(issuer: &Ca, san: IpAddr, trusted: &Ca) -> Result<ServingCert, String> {
        let cert = issuer
            .issue(
                "system:node:n1",
                &["system:nodes"],
                &[SanType::IpAddress(san)],
                Usage::Server,
            )
            .unwrap();
        let addr = serve(cert).await;
        probe(addr.ip(), addr.port(), &trusted.0.cert_pem).await
    }

    #[tokio::test]
    async fn accepts_only_certificates_from_the_cluster_ca() {
        let ca = Ca::generate("kubernetes").unwrap();
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let cert = probe_served(&ca, ip, &ca).await.unwrap();
        assert_eq!(cert.subject_cn, "system:node:n1");
        assert_eq!(cert.subject_o, ["system:nodes"]);
        assert_eq!(cert.ips, [ip]);

        let other = Ca::generate("other").unwrap();
        assert!(probe_served(&other, ip, &ca).await.unwrap_err().contains("handshake"));
        assert!(probe_served(&ca, "10.9.9.9".parse().unwrap(), &ca).await.is_err());
    }
}
