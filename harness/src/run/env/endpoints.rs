//! Where each of a run's fakes listens, found by name among those started (not by place in the list).
use crate::error::{Error, Result};
use crate::fakes::FakeServer;

pub(super) struct Endpoints {
    pub imds: std::net::SocketAddr,
    pub eks: String,
    pub ec2: String,
    pub sts: String,
    pub webhook: std::net::SocketAddr,
    pub cloudformation: String,
    pub ecr: String,
    pub registry: String,
    pub proxy: String,
    /// The front of AWS's endpoints by their own names.
    pub front: std::net::SocketAddr,
}

impl Endpoints {
    pub fn of(fakes: &[FakeServer]) -> Result<Self> {
        let fake = |name: &str| {
            fakes
                .iter()
                .find(|f| f.name == name)
                .ok_or_else(|| Error::Pipeline(format!("no fake called {name} was started")))
        };
        Ok(Self {
            imds: fake("imds")?.addr,
            eks: fake("eks")?.url(),
            ec2: fake("ec2")?.url(),
            sts: fake("sts")?.url(),
            webhook: fake("token-webhook")?.addr,
            cloudformation: fake("cloudformation")?.url(),
            ecr: fake("ecr")?.url(),
            registry: fake("registry")?.url(),
            proxy: fake("proxy")?.url(),
            front: fake("aws-endpoints")?.addr,
        })
    }
}

/// The CA the run serves AWS's names under: the one kept in `NODEJOIN_ENDPOINTS_CA` (which a disk of the
/// user's was built to trust), else a fresh one.
pub(super) fn ca(settings: &crate::settings::Settings) -> Result<crate::pki::Ca> {
    match &settings.endpoints_ca {
        Some(dir) => crate::pki::Ca::load(dir)
            .inspect(|ca| {
                if !ca.name_constrained() {
                    tracing::warn!(
                        "the endpoints CA in {} has no name constraints (an older nodejoin made it): a disk that \
                         trusts it trusts anything its key signs; `nodejoin image endpoints-ca` in a new directory \
                         makes one limited to {} names",
                        dir.display(),
                        crate::pki::ENDPOINTS_DOMAIN
                    );
                }
            })
            .map_err(|e| Error::Host {
                what: format!("{}: {e}", crate::settings::var::ENDPOINTS_CA),
                fix: format!(
                    "name a directory holding the CA's {} and {} (nodejoin image endpoints-ca DIR makes one)",
                    crate::pki::keep::CERT_FILE,
                    crate::pki::keep::KEY_FILE
                ),
            }),
        None => crate::pki::Ca::generate_endpoints("nodejoin AWS endpoints CA"),
    }
}

/// Records a handshake a node ended with an alert at the front (its software does not trust the run's endpoints
/// CA) in the call log, under the instance, as `tls handshake refused: <alert> -> 495`.
pub(super) fn refusals(
    calls: std::sync::Arc<crate::fakes::calls::CallLog>,
    instances: std::sync::Arc<crate::fakes::instances::Instances>,
) -> crate::fakes::Refused {
    std::sync::Arc::new(move |ip, alert| {
        calls.record(crate::fakes::calls::Call {
            at: std::time::SystemTime::now(),
            started: std::time::Instant::now(),
            service: "tls",
            action: format!("handshake refused: {alert}"),
            // nginx's "SSL Certificate Error": no HTTP status means a refused certificate.
            status: 495,
            latency: std::time::Duration::ZERO,
            source: ip,
            instance_id: instances.by_ip(ip).map(|i| i.instance_id.clone()),
            fault: None,
        })
    })
}
