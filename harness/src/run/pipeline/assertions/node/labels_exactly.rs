//! `labels exactly`: the Node carries exactly the labels the scenario lists; extra ones are named with who set
//! them.
use super::{Finding, NodeCheck, NodeFacts};
use crate::assert::provenance;
use crate::assert::registry::CheckDef;
use crate::assert::{self, Check};
use futures::future::BoxFuture;

pub(crate) const DEF: CheckDef = CheckDef {
    name: "labels exactly",
    form: "labels exactly",
    when: "`expect.labelsExactly`",
    proves: "the Node carries exactly these labels; extra ones are listed with who set them",
    keys: &["labelsExactly"],
};

pub(crate) struct LabelsExactly;

impl NodeCheck for LabelsExactly {
    fn def(&self) -> &'static CheckDef {
        &DEF
    }

    fn check<'a>(&'a self, f: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding> {
        Box::pin(async move {
            let Some(want) = f.expect.labels_exactly.clone() else {
                return Finding::NotAsked;
            };
            let have = assert::node::labels(f.node);
            let mut wrong = assert::node::label_mismatches(&want, &have);
            wrong.extend(
                have.iter()
                    .filter(|(k, _)| !want.contains_key(*k))
                    .map(|(k, v)| format!("unexpected {k}={v} ({})", provenance::describe(&f.who.label(k)))),
            );
            let setters = super::labels::setters(&want, &have, f.expect, &f.who, &mut wrong);
            Finding::Check(Check::new(
                DEF.on(f.name()),
                wrong.is_empty(),
                format!("exactly {} labels: {}", want.len(), super::labels::list(&want)),
                if wrong.is_empty() {
                    format!("the same set ({})", setters.join("; "))
                } else {
                    wrong.join(", ")
                },
            ))
        })
    }
}
