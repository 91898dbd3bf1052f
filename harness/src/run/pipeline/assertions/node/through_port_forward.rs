//! `port-forward through apiserver`: `kubectl port-forward` to the node's pod reaches into it, so the API server
//! accepted the kubelet's serving certificate.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::registry::CheckDef;
use crate::scenario::model::ApiServerAction;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "port-forward through apiserver",
    form: "port-forward through apiserver",
    when: "`expect.throughApiServer: [portForward]` (with `podRuns`)",
    proves: "`kubectl port-forward` to the node's pod works: the API server verified the kubelet's serving \
             certificate against the cluster CA, upgraded the connection through the kubelet, and the kubelet \
             answered for a port inside the pod; a refusal is quoted in the API server's words",
    keys: &["throughApiServer", "podRuns"],
};

pub(crate) struct ThroughPortForward;

impl NodeCheck for ThroughPortForward {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            super::through_apiserver(f, ApiServerAction::PortForward, &DEF, |client, pod| {
                Box::pin(crate::run::pipeline::observe::through_apiserver::port_forward(
                    client, pod,
                ))
            })
            .await
        })
    }
}
