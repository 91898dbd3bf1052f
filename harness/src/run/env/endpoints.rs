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
