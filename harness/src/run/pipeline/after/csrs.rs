//! The CSRs a step after the join made: those of the node the cluster did not hold before it, judged against what
//! the step expects of them.
use crate::assert::csr::{client_csr, serving_csr, CsrState};
use crate::assert::Check;
use crate::run::env::SharedCluster;
use crate::scenario::expect::CsrExpectation;
use std::collections::BTreeSet;

/// The names of every CSR of `node` the cluster holds now.
pub(super) fn csr_names(cluster: &SharedCluster, node: &str) -> BTreeSet<String> {
    let Some(snapshot) = cluster.cache.snapshot() else {
        return BTreeSet::new();
    };
    snapshot
        .csrs
        .iter()
        .filter(|c| crate::assert::csr::belongs_to(c, node))
        .filter_map(|c| c.metadata.name.clone())
        .collect()
}

/// The client and serving CSRs of `node` made since `before` was taken, and, given `since` (Unix seconds), made
/// in that second or later: `before` comes from the cluster's watch cache, which may not hold yet a CSR the
/// kubelet made just before the step (its first serving CSR, a second or two after it started); a CSR made before
/// a restarted machine came up is its old kubelet's, not one the step caused.
pub(super) fn new_csrs(
    cluster: &SharedCluster,
    node: &str,
    before: &BTreeSet<String>,
    since: Option<i64>,
) -> (Vec<CsrState>, Vec<CsrState>) {
    let Some(snapshot) = cluster.cache.snapshot() else {
        return (Vec::new(), Vec::new());
    };
    let made_since = |c: &k8s_openapi::api::certificates::v1::CertificateSigningRequest| match (
        since,
        c.metadata.creation_timestamp.as_ref(),
    ) {
        (Some(since), Some(t)) => t.0.as_second() >= since,
        _ => true,
    };
    let fresh: Vec<&k8s_openapi::api::certificates::v1::CertificateSigningRequest> = snapshot
        .csrs
        .iter()
        .filter(|c| c.metadata.name.as_ref().is_some_and(|n| !before.contains(n)))
        .map(|c| c.as_ref())
        .filter(|c| made_since(c))
        .collect();
    let clients = fresh
        .iter()
        .filter_map(|c| client_csr(std::slice::from_ref(c), node))
        .collect();
    let servings = fresh
        .iter()
        .filter_map(|c| serving_csr(std::slice::from_ref(c), node))
        .collect();
    (clients, servings)
}

/// How long after Ready the CSRs of a step are given to appear (a kubelet asks for a serving certificate it lacks
/// just after it starts).
const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// The checks on the client and serving CSRs `node` made since second `since` (not in `before`), once the node is
/// back and [`SETTLE`] has passed, against what `step` expects (named `<check> after <step>`).
pub(super) async fn after_step(
    cluster: &SharedCluster,
    node: &str,
    step: &crate::scenario::after::Step,
    before: &BTreeSet<String>,
    since: i64,
) -> Vec<Check> {
    use crate::assert::registry as def;
    tokio::time::sleep(SETTLE).await;
    let action = step.action.name();
    let (clients, servings) = new_csrs(cluster, node, before, Some(since));
    let client = csr_check(
        def::CLIENT_CSR_AFTER.on_with(node, action),
        step.client_csr(true),
        &clients,
        cluster,
    );
    let serving = csr_check(
        def::SERVING_CSR_AFTER.on_with(node, action),
        step.serving_csr(),
        &servings,
        cluster,
    );
    client.into_iter().chain(serving).collect()
}

/// Why the approver refused `csr`, if it did.
pub(super) fn refusal(cluster: &SharedCluster, csr: &str) -> Option<String> {
    cluster
        .approver
        .decisions()
        .into_iter()
        .rev()
        .find(|d| d.csr == csr && !d.approved)
        .map(|d| format!("the approver refused it: {}", d.reason))
}

/// A step's CSRs against what the scenario expects of them (a pending one quoted with the approver's reason);
/// nothing for `any`.
pub(super) fn csr_check(
    name: String,
    want: CsrExpectation,
    new: &[CsrState],
    cluster: &SharedCluster,
) -> Option<Check> {
    let why = |c: &CsrState| c.name.as_deref().and_then(|n| refusal(cluster, n));
    judge(name, want, new, why)
}

fn judge(
    name: String,
    want: CsrExpectation,
    new: &[CsrState],
    why: impl Fn(&CsrState) -> Option<String>,
) -> Option<Check> {
    let (passed, expected) = match want {
        CsrExpectation::Any => return None,
        CsrExpectation::None => (new.is_empty(), "no new CSR"),
        CsrExpectation::Issued => (new.iter().any(|c| c.issued), "a new CSR, issued"),
        CsrExpectation::Pending => (
            !new.is_empty() && new.iter().all(|c| !c.issued),
            "a new CSR, not issued",
        ),
    };
    let actual = if new.is_empty() {
        "no new CSR".to_string()
    } else {
        new.iter()
            .map(|c| {
                format!(
                    "{} by {} ({})",
                    c.name.as_deref().unwrap_or("?"),
                    c.requester.as_deref().unwrap_or("?"),
                    if c.issued {
                        "issued".to_string()
                    } else if c.approved {
                        "approved, not issued".to_string()
                    } else {
                        match why(c) {
                            Some(w) => format!("pending; {w}"),
                            None => "pending".to_string(),
                        }
                    }
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(Check::new(name, passed, expected, actual))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr(name: &str, issued: bool) -> CsrState {
        CsrState {
            name: Some(name.into()),
            requester: Some("system:node:n".into()),
            approved: issued,
            issued,
        }
    }

    #[test]
    fn a_new_csr_fails_none_and_passes_issued() {
        assert!(judge("x".into(), CsrExpectation::Any, &[], |_| None).is_none());
        assert!(judge("x".into(), CsrExpectation::None, &[], |_| None).is_some_and(|c| c.passed));
        let one = [csr("csr-1", true)];
        let c = judge("x".into(), CsrExpectation::None, &one, |_| None).unwrap();
        assert!(!c.passed);
        assert!(c.actual.contains("csr-1 by system:node:n (issued)"), "{}", c.actual);
        assert!(judge("x".into(), CsrExpectation::Issued, &one, |_| None).is_some_and(|c| c.passed));
        assert!(judge("x".into(), CsrExpectation::Pending, &one, |_| None).is_some_and(|c| !c.passed));
        let pending = [csr("csr-2", false)];
        assert!(judge("x".into(), CsrExpectation::Pending, &pending, |_| None).is_some_and(|c| c.passed));
        assert!(judge("x".into(), CsrExpectation::Issued, &[], |_| None).is_some_and(|c| !c.passed));
    }
}
