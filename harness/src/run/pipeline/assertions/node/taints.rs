//! `taints`: the Node's exact taints once the cloud controller's uninitialized taint is gone, each registered by
//! the kubelet.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::provenance;
use crate::assert::registry::CheckDef;
use crate::assert::{self, Check};
use crate::scenario::expect::SetBy;
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "taints",
    form: "taints",
    when: "`expect.taints`",
    proves: "the Node's exact taints once the cloud controller's uninitialized taint is gone, each registered by \
             the kubelet",
    keys: &["taints"],
};

pub(crate) struct Taints;

impl NodeCheck for Taints {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            let Some(taints) = &f.expect.taints else {
                return Finding::NotAsked;
            };
            let mut want = taints.clone();
            want.sort();
            let have = assert::node::taints(f.node);
            let allowed = f.expect.set_by.taints.unwrap_or(SetBy::Kubelet);
            let mut wrong_setter = Vec::new();
            let mut setters = Vec::new();
            for t in have.iter().filter(|t| want.contains(t)) {
                let by = f.who.taint(t);
                let one = assert::node::format_taints(std::slice::from_ref(t));
                if !provenance::satisfies(&by, allowed) {
                    wrong_setter.push(format!(
                        "{one} {} (expected {})",
                        provenance::describe(&by),
                        super::describe_set_by(allowed)
                    ));
                }
                setters.push(format!("{one} {}", provenance::describe(&by)));
            }
            let actual = assert::node::format_taints(&have);
            Finding::Check(Check::new(
                DEF.on(f.name()),
                want == have && wrong_setter.is_empty(),
                assert::node::format_taints(&want),
                match (wrong_setter.is_empty(), setters.is_empty()) {
                    (false, _) => format!("{actual}: {}", wrong_setter.join(", ")),
                    (true, true) => actual,
                    (true, false) => format!("{actual} ({})", setters.join("; ")),
                },
            ))
        })
    }
}
