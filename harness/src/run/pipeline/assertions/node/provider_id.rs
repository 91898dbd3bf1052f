//! `providerID`: `aws:///<az>/<instance-id>`, set by the kubelet from the bootstrap's config or flag.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::provenance;
use crate::assert::registry::CheckDef;
use crate::assert::{self, Check};
use crate::scenario::expect::SetBy;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "providerID",
    form: "providerID",
    when: "nodes that join",
    proves: "`aws:///<az>/<instance-id>`, set by the kubelet from the bootstrap's config or flag (EKS's cloud \
             controller would fill an empty one: `setBy: { providerID: cloudController }` says a scenario relies on \
             that)",
    keys: &["providerID"],
};

pub(crate) struct ProviderId;

impl NodeCheck for ProviderId {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            // Resolved with the node's values, the default included (`Expect::resolved`).
            let want = f.expect.provider_id.clone().unwrap_or_default();
            let have = assert::node::provider_id(f.node);
            let by = f.who.provider_id();
            let allowed = f.expect.set_by.provider_id.unwrap_or(SetBy::Kubelet);
            Finding::Check(Check::new(
                DEF.on(f.name()),
                have.as_deref() == Some(want.as_str()) && provenance::satisfies(&by, allowed),
                format!("{want}, {}", super::describe_set_by(allowed)),
                format!("{}, {}", have.as_deref().unwrap_or("none"), provenance::describe(&by)),
            ))
        })
    }
}
