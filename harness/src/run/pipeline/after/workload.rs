//! What a `drain` evicts: a ReplicaSet of pause pods on the node under a PodDisruptionBudget, and a DaemonSet's
//! pod, placed before the step. The local provider runs no scheduler, so the harness binds the workload's pods
//! itself, as a scheduler would: to the nodes their affinity allows and whose labels their `nodeSelector` names, a
//! ReplicaSet's only to a Ready node that is not cordoned (a DaemonSet's pod tolerates that, as its controller makes
//! it). Only the workload's own pods (by their label) are bound; on a provider with a scheduler, it binds them
//! first.
use crate::run::pipeline::observe::through_apiserver::said;
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use std::time::{Duration, Instant};

/// The namespace the workload lives in.
pub(super) const NAMESPACE: &str = "default";
/// The label every pod of one node's workload carries (its value: the instance id).
const LABEL: &str = "nodejoin.dev/drain";
/// The label a ReplicaSet's pods carry besides [`LABEL`] (the DaemonSet's: `daemonset`).
const ROLE: &str = "nodejoin.dev/drain-role";
/// The sandbox image the node image caches (as `podRuns` uses): nothing is pulled.
const IMAGE: &str = "localhost/kubernetes/pause:latest";
/// How long the workload may take to run on the node before the step.
const PLACED_WITHIN: Duration = Duration::from_secs(60);

/// One node's workload, by name.
pub(super) struct Workload {
    /// `nodejoin-drain-<instance id>`: the ReplicaSet's, the budget's and (with `-ds`) the DaemonSet's name.
    pub name: String,
    pub id: String,
    pub replicas: u32,
    pub min_available: u32,
    /// The labels the ReplicaSet's pods select nodes by.
    pub node_selector: std::collections::BTreeMap<String, String>,
}

impl Workload {
    pub fn new(instance_id: &str, w: crate::scenario::after::Workload) -> Self {
        Self {
            name: format!("nodejoin-drain-{instance_id}"),
            id: instance_id.to_string(),
            replicas: w.replicas,
            min_available: w.min_available,
            node_selector: w.node_selector,
        }
    }

    /// The selector of the ReplicaSet's pods.
    pub fn replica_selector(&self) -> String {
        format!("{LABEL}={},{ROLE}=replica", self.id)
    }

    fn daemon_selector(&self) -> String {
        format!("{LABEL}={},{ROLE}=daemonset", self.id)
    }

    fn template(&self, role: &str, nodes: &[&str]) -> serde_json::Value {
        let mut template = serde_json::json!({
            "metadata": { "labels": { LABEL: self.id, ROLE: role, "app.kubernetes.io/managed-by": "nodejoin" } },
            "spec": {
                // Not 0: a pod with no grace period is deleted at once by the API server; with one, it stays
                // until the node's kubelet has ended it, which is what a drain waits for.
                "terminationGracePeriodSeconds": 5,
                "automountServiceAccountToken": false,
                "enableServiceLinks": false,
                // One term per node: a `metadata.name` field selector takes one value (the terms are ORed).
                "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": nodes.iter().map(|n| serde_json::json!({
                        "matchFields": [{ "key": "metadata.name", "operator": "In", "values": [n] }]
                    })).collect::<Vec<_>>()
                } } },
                "containers": [{ "name": "pause", "image": IMAGE, "imagePullPolicy": "Never" }]
            }
        });
        if role == "replica" && !self.node_selector.is_empty() {
            template["spec"]["nodeSelector"] = serde_json::json!(self.node_selector);
        }
        template
    }

    /// Creates the ReplicaSet (its pods allowed on `nodes`), the budget over its pods, and a DaemonSet for `node`.
    pub async fn create(&self, client: &kube::Client, node: &str, nodes: &[&str]) -> Result<(), String> {
        let labels = |role: &str| serde_json::json!({ LABEL: self.id, ROLE: role });
        let rs: ReplicaSet = serde_json::from_value(serde_json::json!({
            "metadata": { "name": self.name, "namespace": NAMESPACE },
            "spec": { "replicas": self.replicas, "selector": { "matchLabels": labels("replica") },
                      "template": self.template("replica", nodes) }
        }))
        .map_err(|e| e.to_string())?;
        let ds: DaemonSet = serde_json::from_value(serde_json::json!({
            "metadata": { "name": format!("{}-ds", self.name), "namespace": NAMESPACE },
            "spec": { "selector": { "matchLabels": labels("daemonset") }, "template": self.template("daemonset", &[node]) }
        }))
        .map_err(|e| e.to_string())?;
        let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "metadata": { "name": self.name, "namespace": NAMESPACE },
            "spec": { "minAvailable": self.min_available, "selector": { "matchLabels": labels("replica") } }
        }))
        .map_err(|e| e.to_string())?;
        let pp = PostParams::default();
        Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE)
            .create(&pp, &pdb)
            .await
            .map_err(|e| format!("creating the PodDisruptionBudget: {}", said(&e)))?;
        Api::<ReplicaSet>::namespaced(client.clone(), NAMESPACE)
            .create(&pp, &rs)
            .await
            .map_err(|e| format!("creating the ReplicaSet: {}", said(&e)))?;
        Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE)
            .create(&pp, &ds)
            .await
            .map_err(|e| format!("creating the DaemonSet: {}", said(&e)))?;
        Ok(())
    }

    /// Waits until every replica and the DaemonSet's pod run Ready on `node` and the budget allows what it
    /// should: what runs, or why not (each pod's state, the last refused binding).
    pub async fn placed(&self, client: &kube::Client, node: &str) -> Result<String, String> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NAMESPACE);
        let t0 = Instant::now();
        let mut refused = None;
        loop {
            for (sel, cordoned) in [(self.daemon_selector(), true), (self.replica_selector(), false)] {
                if let Some(e) = bind_pending(client, &sel, &[node], cordoned).await {
                    refused = Some(e);
                }
            }
            let all = pods
                .list(&ListParams::default().labels(&format!("{LABEL}={}", self.id)))
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let ready = |role: &str| {
                all.iter()
                    .filter(|p| role_of(p) == Some(role) && runs_ready_on(p, node))
                    .count()
            };
            let (replicas, daemon) = (ready("replica"), ready("daemonset"));
            let allowed = budgets
                .get(&self.name)
                .await
                .ok()
                .and_then(|b| b.status)
                .filter(|s| s.observed_generation.is_some())
                .map(|s| {
                    (
                        s.disruptions_allowed.unwrap_or_default(),
                        s.current_healthy.unwrap_or_default(),
                    )
                });
            let want = (self.replicas - self.min_available) as i32;
            if replicas == self.replicas as usize && daemon == 1 && allowed.map(|a| a.0) == Some(want) {
                return Ok(format!(
                    "{replicas} replicas and the DaemonSet's pod Ready on the node; the budget allows {want} \
                     disruption(s) ({} healthy, {} wanted)",
                    allowed.map(|a| a.1).unwrap_or_default(),
                    self.min_available
                ));
            }
            if t0.elapsed() >= PLACED_WITHIN {
                let states: Vec<String> = all
                    .iter()
                    .map(|p| {
                        let at = p.spec.as_ref().and_then(|s| s.node_name.clone());
                        format!(
                            "{} ({}): {}",
                            p.metadata.name.as_deref().unwrap_or("?"),
                            at.unwrap_or_else(|| "not bound".into()),
                            crate::run::pipeline::observe::pod::not_running(p)
                        )
                    })
                    .collect();
                return Err(format!(
                    "the workload did not run before the step: {replicas} of {} replicas and {daemon} of 1 \
                     DaemonSet pod Ready on the node, the budget allowing {} disruption(s) after {}s; pods: [{}]{}",
                    self.replicas,
                    allowed
                        .map(|a| a.0.to_string())
                        .unwrap_or_else(|| "(not computed yet)".into()),
                    PLACED_WITHIN.as_secs(),
                    if states.is_empty() {
                        "none created".to_string()
                    } else {
                        states.join("; ")
                    },
                    refused.map(|e| format!("; binding refused: {e}")).unwrap_or_default()
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// The DaemonSet's pod on `node`: Running and Ready, or what it says.
    pub async fn daemon_pod(&self, client: &kube::Client, node: &str) -> Result<String, String> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
        let list = pods
            .list(&ListParams::default().labels(&self.daemon_selector()))
            .await
            .map_err(|e| format!("listing the DaemonSet's pods: {}", said(&e)))?;
        match list.items.iter().find(|p| on(p, node)) {
            Some(p) if runs_ready_on(p, node) && p.metadata.deletion_timestamp.is_none() => {
                Ok("the DaemonSet's pod left Running".into())
            }
            Some(p) => Err(format!(
                "the DaemonSet's pod is not left running: {}",
                crate::run::pipeline::observe::pod::not_running(p)
            )),
            None => Err("the DaemonSet's pod is gone from the node".into()),
        }
    }

    /// Deletes what was created (their pods with them); the node may be gone: not waited for.
    pub async fn remove(&self, client: &kube::Client) {
        let dp = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            ..DeleteParams::default()
        };
        let _ = Api::<ReplicaSet>::namespaced(client.clone(), NAMESPACE)
            .delete(&self.name, &dp)
            .await;
        let _ = Api::<DaemonSet>::namespaced(client.clone(), NAMESPACE)
            .delete(&format!("{}-ds", self.name), &dp)
            .await;
        let _ = Api::<PodDisruptionBudget>::namespaced(client.clone(), NAMESPACE)
            .delete(&self.name, &dp)
            .await;
    }
}

fn role_of(p: &Pod) -> Option<&str> {
    p.metadata.labels.as_ref()?.get(ROLE).map(String::as_str)
}

fn on(p: &Pod, node: &str) -> bool {
    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)
}

/// Bound to `node`, Running, and Ready.
pub(super) fn runs_ready_on(p: &Pod, node: &str) -> bool {
    let status = p.status.as_ref();
    on(p, node)
        && status.and_then(|s| s.phase.as_deref()) == Some("Running")
        && status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Binds the pods matching `selector` that no node holds yet to the first of `targets` their affinity allows
/// and that can take them: Ready, carrying the labels of the pod's `nodeSelector` and, unless `tolerates_cordon`,
/// not cordoned. Where none can, the pod stays Pending, as a scheduler would leave it. The last refusal, or why
/// a pod fits no node, if any.
pub(super) async fn bind_pending(
    client: &kube::Client,
    selector: &str,
    targets: &[&str],
    tolerates_cordon: bool,
) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let list = match pods.list(&ListParams::default().labels(selector)).await {
        Ok(l) => l,
        Err(e) => return Some(format!("listing the pods to bind: {}", said(&e))),
    };
    let mut last = None;
    let nodes: Api<Node> = Api::all(client.clone());
    for p in list.items {
        let unbound = p.spec.as_ref().is_some_and(|s| s.node_name.is_none());
        if !unbound || p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(name) = p.metadata.name.clone() else { continue };
        let allowed = allowed_nodes(&p);
        let mut unfit = Vec::new();
        let mut bound = false;
        for t in targets.iter().filter(|t| allowed.iter().any(|a| a == *t)) {
            let why = match nodes.get(t).await {
                Ok(n) => unfit_for(&p, &n, tolerates_cordon),
                Err(e) => Some(format!("not read ({})", said(&e))),
            };
            if let Some(why) = why {
                unfit.push(format!("{t}: {why}"));
                continue;
            }
            let binding = serde_json::json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": { "name": name, "namespace": NAMESPACE },
                "target": { "apiVersion": "v1", "kind": "Node", "name": t }
            });
            let done: Result<serde_json::Value, _> = pods
                .create_subresource("binding", &name, &PostParams::default(), &binding)
                .await;
            match done {
                Ok(_) => {
                    bound = true;
                    break;
                }
                Err(e) => last = Some(format!("binding {name} to {t}: {}", said(&e))),
            }
        }
        if !bound && !unfit.is_empty() {
            last = Some(format!("{name} fits no node ({})", unfit.join("; ")));
        }
    }
    last
}

/// Why `node` cannot take `pod`, as a scheduler would judge it (readiness, the cordon, the pod's `nodeSelector`),
/// or `None` if it can.
fn unfit_for(pod: &Pod, node: &Node, tolerates_cordon: bool) -> Option<String> {
    if !crate::assert::node::is_ready(node) {
        return Some("not Ready".into());
    }
    if !tolerates_cordon && node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        return Some("cordoned".into());
    }
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let wanted = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_selector.clone())
        .unwrap_or_default();
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(k, v)| labels.get(*k) != Some(*v))
        .map(|(k, v)| match labels.get(k) {
            Some(has) => format!("label {k}={has}, not {v}"),
            None => format!("no label {k}={v}"),
        })
        .collect();
    (!missing.is_empty()).then(|| format!("{} (the pod's nodeSelector)", missing.join(", ")))
}

/// The node names a pod's required node affinity allows by `metadata.name` (what the workload and the
/// DaemonSet controller write).
fn allowed_nodes(p: &Pod) -> Vec<String> {
    let terms = p
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .filter(|f| f.key == "metadata.name" && f.operator == "In")
        .flat_map(|f| f.values.iter().flatten().cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pods_allowed_nodes_come_from_its_affinity() {
        let w = Workload::new("i-0abc", crate::scenario::after::Workload::default());
        assert_eq!(w.name, "nodejoin-drain-i-0abc");
        assert_eq!(
            w.replica_selector(),
            "nodejoin.dev/drain=i-0abc,nodejoin.dev/drain-role=replica"
        );
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "p" },
            "spec": w.template("replica", &["a", "b"])["spec"].clone()
        }))
        .unwrap();
        assert_eq!(allowed_nodes(&pod), ["a", "b"]);
        assert_eq!(pod.spec.unwrap().termination_grace_period_seconds, Some(5));
        let bare: Pod =
            serde_json::from_value(serde_json::json!({ "metadata": { "name": "p" }, "spec": { "containers": [] } }))
                .unwrap();
        assert!(allowed_nodes(&bare).is_empty());
        assert!(!runs_ready_on(&bare, "a"));
    }

    #[test]
    fn a_node_without_the_selected_labels_cannot_take_a_replica() {
        let mut w = Workload::new("i-0abc", crate::scenario::after::Workload::default());
        w.node_selector.insert("app-pool".into(), "web".into());
        let pod = |role| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": "p" }, "spec": w.template(role, &["a"])["spec"].clone()
            }))
            .unwrap()
        };
        let node = |labels: serde_json::Value, unschedulable: bool| -> Node {
            serde_json::from_value(serde_json::json!({
                "metadata": { "name": "a", "labels": labels },
                "spec": { "unschedulable": unschedulable },
                "status": { "conditions": [{ "type": "Ready", "status": "True" }] }
            }))
            .unwrap()
        };
        let (replica, daemon) = (pod("replica"), pod("daemonset"));
        assert_eq!(
            unfit_for(&replica, &node(serde_json::json!({ "app-pool": "web" }), false), false),
            None
        );
        assert_eq!(
            unfit_for(&replica, &node(serde_json::json!({}), false), false).as_deref(),
            Some("no label app-pool=web (the pod's nodeSelector)")
        );
        assert_eq!(
            unfit_for(
                &replica,
                &node(serde_json::json!({ "app-pool": "batch" }), false),
                false
            )
            .as_deref(),
            Some("label app-pool=batch, not web (the pod's nodeSelector)")
        );
        assert_eq!(
            unfit_for(&replica, &node(serde_json::json!({ "app-pool": "web" }), true), false).as_deref(),
            Some("cordoned")
        );
        // The DaemonSet's pod selects nothing and tolerates the cordon.
        assert_eq!(unfit_for(&daemon, &node(serde_json::json!({}), true), true), None);
        let not_ready: Node = serde_json::from_value(serde_json::json!({ "metadata": { "name": "a" } })).unwrap();
        assert_eq!(unfit_for(&daemon, &not_ready, true).as_deref(), Some("not Ready"));
    }
}
