//! `configz clusterDNS`: the cluster DNS the kubelet actually uses, from its live `/configz`.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::registry::CheckDef;
use crate::assert::Check;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "configz clusterDNS",
    form: "configz clusterDNS",
    when: "`expect.clusterDNS`",
    proves: "the kubelet's live `/configz` (service CIDR .10; without a CIDR 172.20.0.10 for a `10.` VPC, else \
             10.100.0.10)",
    keys: &["clusterDNS"],
};

pub(crate) struct ClusterDns;

impl NodeCheck for ClusterDns {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            let Some(want) = f.expect.cluster_dns.clone() else {
                return Finding::NotAsked;
            };
            // A dead node's kubelet cannot answer: asking through the API server's proxy only waits out a timeout.
            let have = match &f.n.container_exit {
                Some(why) => Err(format!("not asked: {why}")),
                None => super::configz_cluster_dns(f.cluster, f.name()).await,
            };
            let passed = have.as_ref() == Ok(&want);
            let shown = match have {
                Ok(dns) if dns.is_empty() => "no clusterDNS".to_string(),
                Ok(dns) => dns.join(", "),
                Err(e) => e,
            };
            Finding::Check(Check::new(DEF.on(f.name()), passed, want.join(", "), shown))
        })
    }
}
