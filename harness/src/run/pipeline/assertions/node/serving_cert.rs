//! `serving cert`: the kubelet's :10250 serves its own identity, chained to the cluster CA.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::registry::CheckDef;
use crate::assert::{self, Check};
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "serving cert",
    form: "serving cert",
    when: "`expect.servingCert`",
    proves: ":10250 serves `CN=system:node:<name>, O=system:nodes` with exactly the instance's DNS name and IP, \
             chained to the cluster CA",
    keys: &["servingCert", "expect"],
};

pub(crate) struct ServingCert;

impl NodeCheck for ServingCert {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            if !f.expect.serving_cert {
                return Finding::NotAsked;
            }
            let n = f.n;
            let expected = assert::serving::ServingCert {
                subject_cn: format!("system:node:{}", f.name()),
                subject_o: vec!["system:nodes".into()],
                dns_names: vec![n.instance.private_dns_name()],
                ips: vec![std::net::IpAddr::V4(n.instance.private_ip)],
            };
            let actual = match &n.serving {
                Some(cert) => cert.to_string(),
                None => format!("no CA-verified TLS on :10250 ({})", n.serving_error),
            };
            Finding::Check(Check::new(
                DEF.on(f.name()),
                n.serving.as_ref() == Some(&expected),
                expected.to_string(),
                actual,
            ))
        })
    }
}
