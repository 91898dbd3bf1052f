//! `exec through apiserver`: `kubectl exec` into the node's pod works, so the API server accepted the kubelet's
//! serving certificate.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::registry::CheckDef;
use crate::scenario::model::ApiServerAction;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "exec through apiserver",
    form: "exec through apiserver",
    when: "`expect.throughApiServer: [exec]` (with `podRuns`)",
    proves: "`kubectl exec` into the node's pod works: the API server, which verifies the kubelet's serving \
             certificate against the cluster CA as EKS's does, reached :10250 and the kubelet ran a process in the \
             container; a certificate it refuses is quoted in its words (`x509: …`)",
    keys: &["throughApiServer", "podRuns"],
};

pub(crate) struct ThroughExec;

impl NodeCheck for ThroughExec {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            super::through_apiserver(f, ApiServerAction::Exec, &DEF, |client, pod| {
                Box::pin(crate::run::pipeline::observe::through_apiserver::exec(client, pod))
            })
            .await
        })
    }
}
