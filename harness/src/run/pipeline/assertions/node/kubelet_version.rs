//! `kubelet version`: the Node reports the kubelet its group names (`kubeletVersion`): a skewed node group runs
//! the version it was given, not the control plane's.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::registry::CheckDef;
use crate::assert::Check;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "kubelet version",
    form: "kubelet version",
    when: "node groups that name their own `kubeletVersion`",
    proves: "the Node's `status.nodeInfo.kubeletVersion` is the group's: an older kubelet joins a newer API server \
             within Kubernetes' version skew policy (up to three minor versions older, never newer, refused when \
             the scenario loads otherwise)",
    keys: &["kubeletVersion"],
};

pub(crate) struct KubeletVersion;

impl NodeCheck for KubeletVersion {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            let Some(want) = f.n.group.kubelet_version.as_deref() else {
                return Finding::NotAsked;
            };
            let have = f
                .node
                .status
                .as_ref()
                .and_then(|s| s.node_info.as_ref())
                .map(|i| i.kubelet_version.clone());
            Finding::Check(Check::new(
                DEF.on(f.name()),
                have.as_deref() == Some(want),
                want,
                have.unwrap_or_else(|| "no nodeInfo".into()),
            ))
        })
    }
}
