//! Facts about a Node object the expectations compare against.
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;

use crate::scenario::model::Taint;

pub fn is_ready(node: &Node) -> bool {
    ready_status(node) == Some("True")
}

/// The Node's Ready condition, if it has one.
pub fn ready_condition(node: &Node) -> Option<&k8s_openapi::api::core::v1::NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The status of the Node's Ready condition (`True`, `False`, `Unknown`), if it has one.
pub fn ready_status(node: &Node) -> Option<&str> {
    ready_condition(node).map(|c| c.status.as_str())
}

pub fn labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

pub fn taints(node: &Node) -> Vec<Taint> {
    let mut t: Vec<Taint> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|t| Taint {
            key: t.key,
            value: t.value.filter(|v| !v.is_empty()),
            effect: t.effect,
        })
        .collect();
    t.sort();
    t
}

/// Taints that come and go while a node starts (not-ready until Ready, uninitialized until the cloud-node
/// controller has run): the final taints are compared once these are gone.
pub fn has_transient_taints(node: &Node) -> bool {
    taints(node).iter().any(|t| is_transient_taint(&t.key))
}

/// Whether a taint key is one the cluster's controllers put on and take off while a node starts (the node
/// lifecycle controller's not-ready/unreachable, the cloud-node controller's uninitialized), not one a bootstrap
/// sets. The node lifecycle controller can add `not-ready:NoExecute` a moment after the node is Ready, when its
/// pass looked at the node just before.
pub fn is_transient_taint(key: &str) -> bool {
    key == crate::controllers::cloud_node::UNINITIALIZED_TAINT
        || key == "node.kubernetes.io/not-ready"
        || key == "node.kubernetes.io/unreachable"
}

pub fn capacity_pods(node: &Node) -> Option<String> {
    node.status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("pods"))
        .map(|q| q.0.clone())
}

pub fn provider_id(node: &Node) -> Option<String> {
    node.spec.as_ref().and_then(|s| s.provider_id.clone())
}

/// Labels of `expected` that are missing or different on the node, as `key: expected != actual`.
pub fn label_mismatches(expected: &BTreeMap<String, String>, actual: &BTreeMap<String, String>) -> Vec<String> {
    expected
        .iter()
        .filter(|(k, v)| actual.get(*k) != Some(v))
        .map(|(k, v)| {
            format!(
                "{k}={v} (node has {})",
                actual.get(k).map(String::as_str).unwrap_or("nothing")
            )
        })
        .collect()
}

pub fn format_taints(t: &[Taint]) -> String {
    let parts: Vec<String> = t
        .iter()
        .map(|t| {
            format!(
                "{}{}:{}",
                t.key,
                t.value.as_ref().map(|v| format!("={v}")).unwrap_or_default(),
                t.effect
            )
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_superset() {
        let want = BTreeMap::from([("a".to_string(), "1".to_string())]);
        let have = BTreeMap::from([("a".to_string(), "1".to_string()), ("b".to_string(), "2".to_string())]);
        assert!(label_mismatches(&want, &have).is_empty());
        let wrong = BTreeMap::from([("a".to_string(), "2".to_string())]);
        assert_eq!(label_mismatches(&want, &wrong), ["a=1 (node has 2)"]);
        assert_eq!(label_mismatches(&want, &BTreeMap::new()), ["a=1 (node has nothing)"]);
    }
}
