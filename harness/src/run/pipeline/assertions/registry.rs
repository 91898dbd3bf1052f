//! The checks registry: one table of every check, in report order (the Node's checks after `ready`). The
//! pipeline runs the Node checks from it, the GitHub reporter points annotations at its keys, the book's checks
//! page is its rows (docs/src/reference/checks.md, kept in step by `tests/book.rs`) and the mutation catalogue
//! names its catchers among it. A new core check is its definition (`assert::registry`) plus one entry here; a
//! new Node check is its file in `node/` (definition and [`NodeCheck`] impl) plus one entry here.
use super::node::{self, NodeCheck};
use crate::assert::registry::{self as def, CheckDef};

/// One check of the table.
pub(crate) enum Entry {
    /// Made by `assert` or the pipeline's own code, which names it by its definition.
    Core(&'static CheckDef),
    /// A check on a registered Node: the pipeline runs these in the table's order.
    Node(&'static dyn NodeCheck),
}

impl Entry {
    /// Its definition: name, form, when, proves and keys.
    pub(crate) fn def(&self) -> &'static CheckDef {
        match self {
            Entry::Core(d) => d,
            Entry::Node(c) => c.def(),
        }
    }
}

/// Every check, in the order reports and the book list them.
pub(crate) const CHECKS: &[Entry] = &[
    Entry::Core(&def::BOOTSTRAP_EXIT),
    Entry::Core(&def::KUBELET_RUNNING),
    Entry::Core(&def::KUBELET_STARTED),
    Entry::Core(&def::NODE_CONTAINER),
    Entry::Core(&def::NODEADM),
    Entry::Core(&def::REGISTERED),
    Entry::Core(&def::NOT_REGISTERED),
    Entry::Core(&def::READY),
    Entry::Node(&node::kubelet_enabled::KubeletEnabled),
    Entry::Node(&node::labels::Labels),
    Entry::Node(&node::labels_exactly::LabelsExactly),
    Entry::Node(&node::taints::Taints),
    Entry::Node(&node::capacity_pods::CapacityPods),
    Entry::Node(&node::provider_id::ProviderId),
    Entry::Node(&node::kubelet_version::KubeletVersion),
    Entry::Node(&node::serving_cert::ServingCert),
    Entry::Node(&node::cluster_dns::ClusterDns),
    Entry::Node(&node::through_exec::ThroughExec),
    Entry::Node(&node::through_logs::ThroughLogs),
    Entry::Node(&node::through_port_forward::ThroughPortForward),
    Entry::Core(&def::CLIENT_CSR),
    Entry::Core(&def::SERVING_CSR),
    Entry::Core(&def::IAM_TOKEN_ACCEPTED),
    Entry::Core(&def::IAM_TOKEN_FORMAT),
    Entry::Core(&def::IDENTITY_USERNAME),
    Entry::Core(&def::IDENTITY_GROUPS),
    Entry::Core(&def::AWS_AUTH_CHANGED_BY),
    Entry::Core(&def::SANDBOX_IMAGE),
    Entry::Core(&def::CONTAINERD_WARNINGS),
    Entry::Core(&def::POD_RUNS),
    Entry::Core(&def::CLOUD_INIT_STATUS),
    Entry::Core(&def::CLOUD_INIT_MODULE),
    Entry::Core(&def::CLOUD_INIT_ERRORS),
    Entry::Core(&def::CLOUD_INIT_WARNINGS),
    Entry::Core(&def::CFN_SIGNAL),
    Entry::Core(&def::CALLS_ALLOWED),
    Entry::Core(&def::CALLS_EXACTLY),
    Entry::Core(&def::CALLS),
    Entry::Core(&def::NO_CALLS_AFTER_READY),
    Entry::Core(&def::FILE),
    Entry::Core(&def::IDEMPOTENT),
    Entry::Core(&def::DETERMINISTIC),
    Entry::Core(&def::EXECUTABLES_TRACE),
    Entry::Core(&def::EXECUTABLES_FORBIDDEN),
    Entry::Core(&def::EXECUTABLES_ONLY),
    Entry::Core(&def::EXECUTABLE_RAN),
    Entry::Core(&def::HOST_KERNEL_UNTOUCHED),
    Entry::Core(&def::LOCAL_STORAGE),
    Entry::Core(&def::EVIDENCE),
    Entry::Core(&def::READY_AFTER),
    Entry::Core(&def::KUBELET_VERSION_AFTER),
    Entry::Core(&def::POD_KEPT_AFTER),
    Entry::Core(&def::NODE_DELETED_AFTER),
    Entry::Core(&def::CORDONED_AFTER),
    Entry::Core(&def::DRAINED_AFTER),
    Entry::Core(&def::SCHEDULABLE_AFTER),
    Entry::Core(&def::INHIBITOR_LOCK_BEFORE),
    Entry::Core(&def::PODS_TERMINATED_AFTER),
    Entry::Core(&def::NOT_READY_AFTER),
    Entry::Core(&def::CLIENT_CSR_AFTER),
    Entry::Core(&def::SERVING_CSR_AFTER),
    Entry::Core(&def::SERVING_CERT_AFTER),
    Entry::Core(&def::POD_RUNS_AGAIN),
    Entry::Core(&def::FAILING_CHECKS),
];

/// The checks on a registered Node, in the table's order: what the pipeline runs once a Node registered.
pub(crate) fn node_checks() -> impl Iterator<Item = &'static dyn NodeCheck> {
    CHECKS.iter().filter_map(|e| match e {
        Entry::Node(c) => Some(*c),
        Entry::Core(_) => None,
    })
}

/// Every check's definition, in the table's order.
pub fn all_checks() -> Vec<&'static CheckDef> {
    CHECKS.iter().map(Entry::def).collect()
}

/// The book's table of the checks.
pub fn checks_table() -> String {
    let mut table = String::from("| check | when | real-world rule |\n|---|---|---|\n");
    for def in all_checks() {
        table.push_str(&def.row());
        table.push('\n');
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names given more than once.
    fn duplicates<'a>(defs: &[&'a CheckDef]) -> Vec<&'a str> {
        let mut names: Vec<&str> = defs.iter().map(|d| d.name).collect();
        names.sort_unstable();
        let mut twice: Vec<&str> = names.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
        twice.dedup();
        twice
    }

    /// The checks that name no scenario key.
    fn keyless<'a>(defs: &[&'a CheckDef]) -> Vec<&'a str> {
        defs.iter().filter(|d| d.keys.is_empty()).map(|d| d.name).collect()
    }

    #[test]
    fn names_are_unique() {
        assert_eq!(duplicates(&all_checks()), Vec::<&str>::new());
    }

    #[test]
    fn a_planted_duplicate_is_caught() {
        let mut planted = all_checks();
        planted.push(&node::labels::DEF);
        assert_eq!(duplicates(&planted), ["labels"]);
    }

    /// Only the node container's check is every node's, whatever its scenario: it alone asks for no key.
    #[test]
    fn every_check_but_the_node_container_names_its_keys() {
        assert_eq!(keyless(&all_checks()), [def::NODE_CONTAINER.name]);
        let planted = CheckDef {
            keys: &[],
            ..def::READY
        };
        let mut with_planted: Vec<&CheckDef> = all_checks();
        with_planted.push(&planted);
        assert_eq!(keyless(&with_planted), ["node container", "ready"]);
    }

    /// The book lists the Node's checks right after `ready`, as reports do; the pipeline runs them all.
    #[test]
    fn the_node_checks_follow_ready_and_all_run() {
        let names: Vec<&str> = all_checks().iter().map(|d| d.name).collect();
        let ready = names.iter().position(|n| *n == "ready");
        let node: Vec<&str> = node_checks().map(|c| c.def().name).collect();
        assert!(!node.is_empty());
        assert_eq!(ready.map(|r| &names[r + 1..r + 1 + node.len()]), Some(&node[..]));
    }
}
