//! `labels`: the labels the scenario expects are on the Node (a subset), each set by the kubelet (EKS's cloud
//! labels: by anyone).
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::provenance::{self, Provenance};
use crate::assert::registry::CheckDef;
use crate::assert::{self, Check};
use crate::scenario::model::Expect;
use futures::future::BoxFuture;
use std::collections::BTreeMap;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "labels",
    form: "labels",
    when: "`expect.labels`",
    proves: "those labels are on the Node (subset), each set by the kubelet (EKS's cloud labels: by anyone) — see \
             [Who set what](#who-set-what)",
    keys: &["labels"],
};

pub(crate) struct Labels;

impl NodeCheck for Labels {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            let e = f.expect;
            if e.labels.is_empty() {
                return Finding::NotAsked;
            }
            let have = assert::node::labels(f.node);
            let want = e.labels.clone();
            let mut wrong = assert::node::label_mismatches(&want, &have);
            let setters = setters(&want, &have, e, &f.who, &mut wrong);
            Finding::Check(Check::new(
                DEF.on(f.name()),
                wrong.is_empty(),
                format!("{} (subset)", list(&want)),
                if wrong.is_empty() {
                    format!("all present ({})", setters.join("; "))
                } else {
                    wrong.join(", ")
                },
            ))
        })
    }
}

/// Labels as `key=value` pairs, comma-separated, as kubectl's `--show-labels` shows them.
pub(super) fn list(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Who set each wanted label the Node carries ("team set by kubelet"); a setter `expect.setBy` does not allow
/// is added to `wrong`.
pub(super) fn setters(
    want: &BTreeMap<String, String>,
    have: &BTreeMap<String, String>,
    e: &Expect,
    who: &Provenance,
    wrong: &mut Vec<String>,
) -> Vec<String> {
    let mut setters = Vec::new();
    for key in want.keys().filter(|k| have.contains_key(*k)) {
        let by = who.label(key);
        let allowed = e.set_by.label(key);
        if !provenance::satisfies(&by, allowed) {
            wrong.push(format!(
                "{key} {} (expected {})",
                provenance::describe(&by),
                super::describe_set_by(allowed)
            ));
        }
        setters.push(format!("{key} {}", provenance::describe(&by)));
    }
    setters
}
