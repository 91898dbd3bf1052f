//! `capacity.pods`: max-pods as the bootstrap set it, reported by the kubelet.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::provenance;
use crate::assert::registry::CheckDef;
use crate::assert::{self, Check};
use crate::scenario::expect::SetBy;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "capacity.pods",
    form: "capacity.pods",
    when: "`expect.capacityPods`",
    proves: "max-pods as the bootstrap set it (EKS: ENIs × (IPv4 per ENI − 1) + 2), reported by the kubelet",
    keys: &["capacityPods"],
};

pub(crate) struct CapacityPods;

impl NodeCheck for CapacityPods {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            let Some(pods) = f.expect.capacity_pods else {
                return Finding::NotAsked;
            };
            let have = assert::node::capacity_pods(f.node);
            let by = f.who.capacity("pods");
            let allowed = f.expect.set_by.capacity_pods.unwrap_or(SetBy::Kubelet);
            Finding::Check(Check::new(
                DEF.on(f.name()),
                have.as_deref() == Some(pods.to_string().as_str()) && provenance::satisfies(&by, allowed),
                format!("{pods}, {}", super::describe_set_by(allowed)),
                format!("{}, {}", have.as_deref().unwrap_or("none"), provenance::describe(&by)),
            ))
        })
    }
}
