//! `logs through apiserver`: `kubectl logs` of the node's pod works, so the API server accepted the kubelet's
//! serving certificate.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::registry::CheckDef;
use crate::scenario::model::ApiServerAction;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "logs through apiserver",
    form: "logs through apiserver",
    when: "`expect.throughApiServer: [logs]` (with `podRuns`)",
    proves: "`kubectl logs` of the node's pod works: the API server verified the kubelet's serving certificate \
             against the cluster CA and the kubelet served the container's log; a refusal is quoted in the API \
             server's words",
    keys: &["throughApiServer", "podRuns"],
};

pub(crate) struct ThroughLogs;

impl NodeCheck for ThroughLogs {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            super::through_apiserver(f, ApiServerAction::Logs, &DEF, |client, pod| {
                Box::pin(crate::run::pipeline::observe::through_apiserver::logs(client, pod))
            })
            .await
        })
    }
}
