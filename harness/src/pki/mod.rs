//! Cluster PKI generated in Rust (rcgen): the cluster CA, the front-proxy CA, service-account keys and the
//! serving and client certificates the control plane needs.
use crate::error::{Error, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use std::net::IpAddr;

pub mod keep;
pub mod keys;
use std::path::{Path, PathBuf};

/// A certificate and its private key, PEM encoded.
#[derive(Clone)]
pub struct CertKey {
    pub cert_pem: String,
    pub key_pem: String,
}

/// What a leaf certificate is for.
#[derive(Clone, Copy)]
pub enum Usage {
    Server,
    Client,
}

fn pki_err(e: impl std::fmt::Display) -> Error {
    Error::Pki(e.to_string())
}

fn serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f;
    SerialNumber::from_slice(&bytes)
}

fn dn(common_name: &str, orgs: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    for o in orgs {
        dn.push(DnType::OrganizationName, *o);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

/// A certificate authority that can issue leaves.
#[derive(Clone)]
pub struct Ca(pub CertKey);

/// The one domain the endpoints CA may vouch for: AWS's service names (`fakes::front::service_of`).
pub const ENDPOINTS_DOMAIN: &str = "amazonaws.com";

impl Ca {
    pub fn generate(common_name: &str) -> Result<Self> {
        Self::generate_within(common_name, None)
    }

    /// The CA of AWS's endpoints for a run's nodes (and a disk of the user's built to trust it): constrained to
    /// [`ENDPOINTS_DOMAIN`] and to no IP address, so a node (or an exported disk, long after) that trusts it trusts
    /// nothing else it might sign, should its key be had.
    pub fn generate_endpoints(common_name: &str) -> Result<Self> {
        Self::generate_within(common_name, Some(ENDPOINTS_DOMAIN))
    }

    /// Whether its certificate constrains the names it may sign for (an endpoints CA kept by an older nodejoin
    /// does not).
    pub fn name_constrained(&self) -> bool {
        let Ok(der) = pem_to_der(&self.0.cert_pem) else {
            return false;
        };
        x509_parser::parse_x509_certificate(&der)
            .ok()
            .is_some_and(|(_, cert)| cert.name_constraints().ok().flatten().is_some())
    }

    /// A CA, its names constrained to `domain` (and no IP address) when one is given (RFC 5280's name
    /// constraints, which the clients of a node honour: OpenSSL's, Go's, rustls').
    fn generate_within(common_name: &str, domain: Option<&str>) -> Result<Self> {
        let key = KeyPair::generate().map_err(pki_err)?;
        let mut params = CertificateParams::default();
        if let Some(domain) = domain {
            params.name_constraints = Some(rcgen::NameConstraints {
                permitted_subtrees: vec![rcgen::GeneralSubtree::DnsName(domain.to_string())],
                excluded_subtrees: vec![
                    rcgen::GeneralSubtree::IpAddress(rcgen::CidrSubnet::V4([0; 4], [0; 4])),
                    rcgen::GeneralSubtree::IpAddress(rcgen::CidrSubnet::V6([0; 16], [0; 16])),
                ],
            });
        }
        params.distinguished_name = dn(common_name, &[]);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        params.serial_number = Some(serial());
        let cert = params.self_signed(&key).map_err(pki_err)?;
        Ok(Ca(CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }))
    }

    pub fn issue(&self, common_name: &str, orgs: &[&str], sans: &[SanType], usage: Usage) -> Result<CertKey> {
        let ca_key = keys::from_pem(&self.0.key_pem).map_err(pki_err)?;
        let issuer = Issuer::from_ca_cert_pem(&self.0.cert_pem, ca_key).map_err(pki_err)?;
        let key = KeyPair::generate().map_err(pki_err)?;
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(common_name, orgs);
        params.subject_alt_names = sans.to_vec();
        params.serial_number = Some(serial());
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.use_authority_key_identifier_extension = true;
        let cert = params.signed_by(&key, &issuer).map_err(pki_err)?;
        Ok(CertKey {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Every credential of a local control plane.
pub struct ClusterPki {
    pub ca: Ca,
    pub front_proxy_ca: Ca,
    /// etcd's own CA (as kubeadm has one): only the API server's etcd client certificate opens etcd, not every
    /// certificate of the cluster CA.
    pub etcd_ca: Ca,
    /// etcd's serving certificate (127.0.0.1).
    pub etcd_server: CertKey,
    pub apiserver_etcd_client: CertKey,
    pub apiserver: CertKey,
    pub apiserver_kubelet_client: CertKey,
    pub front_proxy_client: CertKey,
    pub admin: CertKey,
    pub controller_manager: CertKey,
    pub service_account_key_pem: String,
    pub service_account_pub_pem: String,
}

/// SANs of the API server's serving certificate: every address a client (harness or node) uses.
pub fn apiserver_sans(addresses: &[IpAddr]) -> Vec<SanType> {
    let mut sans: Vec<SanType> = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
    ]
    .iter()
    .filter_map(|d| d.to_string().try_into().ok().map(SanType::DnsName))
    .collect();
    sans.extend(addresses.iter().map(|ip| SanType::IpAddress(*ip)));
    sans
}

impl ClusterPki {
    /// `addresses`: the addresses the API server is reached at (bind address, 127.0.0.1, first service IP).
    pub fn generate(addresses: &[IpAddr]) -> Result<Self> {
        let ca = Ca::generate("kubernetes")?;
        let front_proxy_ca = Ca::generate("front-proxy-ca")?;
        let sa = KeyPair::generate().map_err(pki_err)?;
        let etcd_ca = Ca::generate("etcd-ca")?;
        let loopback = [SanType::IpAddress(IpAddr::from([127, 0, 0, 1]))];
        Ok(Self {
            etcd_server: etcd_ca.issue("etcd", &[], &loopback, Usage::Server)?,
            apiserver_etcd_client: etcd_ca.issue("kube-apiserver-etcd-client", &[], &[], Usage::Client)?,
            etcd_ca,
            apiserver: ca.issue("kube-apiserver", &[], &apiserver_sans(addresses), Usage::Server)?,
            apiserver_kubelet_client: ca.issue(
                "kube-apiserver-kubelet-client",
                &["system:masters"],
                &[],
                Usage::Client,
            )?,
            front_proxy_client: front_proxy_ca.issue("front-proxy-client", &[], &[], Usage::Client)?,
            admin: ca.issue("kubernetes-admin", &["system:masters"], &[], Usage::Client)?,
            controller_manager: ca.issue("system:kube-controller-manager", &[], &[], Usage::Client)?,
            service_account_key_pem: sa.serialize_pem(),
            service_account_pub_pem: sa.public_key_pem(),
            ca,
            front_proxy_ca,
        })
    }

    /// Writes everything under `dir` (mode 0600 for keys) and returns the paths.
    pub fn write(&self, dir: &Path) -> Result<PkiPaths> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let write = |name: &str, content: &str, secret: bool| -> Result<PathBuf> {
            let path = dir.join(name);
            // Keys are 0600 from their first byte, never widened afterwards.
            match secret {
                true => crate::paths::write_private(&path, content.as_bytes()),
                false => std::fs::write(&path, content),
            }
            .map_err(|e| Error::io(&path, e))?;
            Ok(path)
        };
        let pair = |name: &str, ck: &CertKey| -> Result<(PathBuf, PathBuf)> {
            Ok((
                write(&format!("{name}.crt"), &ck.cert_pem, false)?,
                write(&format!("{name}.key"), &ck.key_pem, true)?,
            ))
        };
        Ok(PkiPaths {
            ca: pair("ca", &self.ca.0)?,
            front_proxy_ca: pair("front-proxy-ca", &self.front_proxy_ca.0)?,
            etcd_ca: pair("etcd-ca", &self.etcd_ca.0)?,
            etcd_server: pair("etcd-server", &self.etcd_server)?,
            apiserver_etcd_client: pair("apiserver-etcd-client", &self.apiserver_etcd_client)?,
            apiserver: pair("apiserver", &self.apiserver)?,
            apiserver_kubelet_client: pair("apiserver-kubelet-client", &self.apiserver_kubelet_client)?,
            front_proxy_client: pair("front-proxy-client", &self.front_proxy_client)?,
            controller_manager: pair("controller-manager", &self.controller_manager)?,
            sa_key: write("sa.key", &self.service_account_key_pem, true)?,
            sa_pub: write("sa.pub", &self.service_account_pub_pem, false)?,
        })
    }
}

/// (certificate, key) paths on disk.
pub struct PkiPaths {
    pub ca: (PathBuf, PathBuf),
    pub front_proxy_ca: (PathBuf, PathBuf),
    pub etcd_ca: (PathBuf, PathBuf),
    pub etcd_server: (PathBuf, PathBuf),
    pub apiserver_etcd_client: (PathBuf, PathBuf),
    pub apiserver: (PathBuf, PathBuf),
    pub apiserver_kubelet_client: (PathBuf, PathBuf),
    pub front_proxy_client: (PathBuf, PathBuf),
    pub controller_manager: (PathBuf, PathBuf),
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
}

/// CN and organisations of a certificate's or request's subject.
pub fn subject_names(subject: &x509_parser::x509::X509Name) -> (String, Vec<String>) {
    let cn = subject
        .iter_common_name()
        .filter_map(|c| c.as_str().ok())
        .next()
        .unwrap_or_default()
        .to_string();
    let orgs = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    (cn, orgs)
}

/// DNS names and IP addresses among subject alternative names, plus a description of any other kind.
pub fn split_sans(names: &[x509_parser::extensions::GeneralName]) -> (Vec<String>, Vec<IpAddr>, Vec<String>) {
    use x509_parser::extensions::GeneralName;
    let (mut dns, mut ips, mut other) = (Vec::new(), Vec::new(), Vec::new());
    for name in names {
        match name {
            GeneralName::DNSName(d) => dns.push(d.to_string()),
            GeneralName::IPAddress(b) => match <[u8; 4]>::try_from(*b) {
                Ok(v4) => ips.push(IpAddr::from(v4)),
                Err(_) => match <[u8; 16]>::try_from(*b) {
                    Ok(v6) => ips.push(IpAddr::from(v6)),
                    Err(_) => other.push(format!("{name:?}")),
                },
            },
            _ => other.push(format!("{name:?}")),
        }
    }
    (dns, ips, other)
}

/// Parses the first certificate of a PEM bundle to DER.
pub fn pem_to_der(pem: &str) -> Result<Vec<u8>> {
    let (_, parsed) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(pki_err)?;
    Ok(parsed.contents)
}

#[cfg(test)]
mod tests {

    /// The endpoints CA vouches for AWS's names and nothing else (issue 66): a leaf it signs for another name, or
    /// for an IP address, is refused by a verifier that honours name constraints (rustls' here, as OpenSSL's and
    /// Go's do in a node).
    #[test]
    fn the_endpoints_ca_vouches_for_aws_names_only() {
        use rustls::client::danger::ServerCertVerifier;
        let ca = Ca::generate_endpoints("test endpoints CA").unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(rustls::pki_types::CertificateDer::from(
                pem_to_der(&ca.0.cert_pem).unwrap(),
            ))
            .unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let verify = |name: &str, san: SanType| {
            let leaf = ca.issue(name, &[], &[san], Usage::Server).unwrap();
            let der = rustls::pki_types::CertificateDer::from(pem_to_der(&leaf.cert_pem).unwrap());
            let server = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
            verifier
                .verify_server_cert(&der, &[], &server, &[], rustls::pki_types::UnixTime::now())
                .map(|_| ())
                .map_err(|e| e.to_string())
        };
        let dns = |n: &str| SanType::DnsName(n.to_string().try_into().unwrap());
        verify("ec2.us-west-2.amazonaws.com", dns("ec2.us-west-2.amazonaws.com")).unwrap();
        verify("sts.amazonaws.com", dns("sts.amazonaws.com")).unwrap();
        let other = verify("github.com", dns("github.com")).unwrap_err();
        assert!(
            other.to_lowercase().contains("name") || other.contains("Constraint"),
            "{other}"
        );
        verify("10.0.0.1", SanType::IpAddress("10.0.0.1".parse().unwrap())).unwrap_err();
        assert!(
            verify("evilamazonaws.com", dns("evilamazonaws.com")).is_err(),
            "a suffix is not the domain"
        );
        assert!(ca.name_constrained());
        assert!(!Ca::generate("a cluster CA").unwrap().name_constrained());
    }

    use super::*;
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

    #[test]
    fn apiserver_cert_has_every_address_and_chains_to_ca() {
        let addrs: Vec<IpAddr> = vec![
            "127.0.0.1".parse().unwrap(),
            "172.18.0.1".parse().unwrap(),
            "10.100.0.1".parse().unwrap(),
        ];
        let pki = ClusterPki::generate(&addrs).unwrap();
        let der = pem_to_der(&pki.apiserver.cert_pem).unwrap();
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let san = cert.subject_alternative_name().unwrap().unwrap();
        let ips: Vec<String> = san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::IPAddress(b) if b.len() == 4 => Some(IpAddr::from([b[0], b[1], b[2], b[3]]).to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(ips, ["127.0.0.1", "172.18.0.1", "10.100.0.1"]);
        let ca_der = pem_to_der(&pki.ca.0.cert_pem).unwrap();
        let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
        assert!(cert.verify_signature(Some(ca.public_key())).is_ok());
        let other = Ca::generate("other").unwrap();
        let other_der = pem_to_der(&other.0.cert_pem).unwrap();
        let (_, other) = X509Certificate::from_der(&other_der).unwrap();
        assert!(cert.verify_signature(Some(other.public_key())).is_err());
    }

    #[test]
    fn admin_is_system_masters() {
        let pki = ClusterPki::generate(&["127.0.0.1".parse().unwrap()]).unwrap();
        let der = pem_to_der(&pki.admin.cert_pem).unwrap();
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let org: Vec<_> = cert
            .subject()
            .iter_organization()
            .filter_map(|o| o.as_str().ok())
            .collect();
        assert_eq!(org, ["system:masters"]);
    }
}
