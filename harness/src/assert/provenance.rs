//! Who set a Node field: the kubelet (so the bootstrap's flags and config did), the harness's cloud-node
//! controller (standing in for EKS's AWS cloud controller manager), or someone else. Read from the Node's
//! `managedFields` and, for what those cannot tell, from the kubelet's registration request in the audit log.
use super::audit::Event;
use crate::scenario::expect::SetBy;
pub use crate::scenario::expect::CLOUD_LABELS;
use crate::scenario::model::Taint;
use k8s_openapi::api::core::v1::Node;

/// The field manager the kubelet writes the Node as.
pub const KUBELET: &str = "kubelet";
/// The field manager of the harness's cloud-node controller.
pub const CLOUD_NODE: &str = crate::controllers::cloud_node::FIELD_MANAGER;

/// One writer of a field, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Setter {
    Kubelet,
    CloudNode,
    Other(String),
    /// Nothing on record says who (the text says what is known).
    Unknown(String),
}

impl Setter {
    fn from_manager(m: &str) -> Self {
        match m {
            KUBELET => Setter::Kubelet,
            CLOUD_NODE => Setter::CloudNode,
            other => Setter::Other(other.to_string()),
        }
    }

    /// Whether this writer is one `want` allows.
    pub fn allowed_by(&self, want: SetBy) -> bool {
        match want {
            SetBy::Any => true,
            SetBy::Kubelet => *self == Setter::Kubelet,
            SetBy::CloudController => *self == Setter::CloudNode,
        }
    }
}

impl std::fmt::Display for Setter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Setter::Kubelet => f.write_str("kubelet"),
            Setter::CloudNode => f.write_str("cloud-node controller"),
            Setter::Other(m) => write!(f, "'{m}'"),
            Setter::Unknown(why) => write!(f, "nobody known ({why})"),
        }
    }
}

/// What is known about who wrote one Node.
#[derive(Debug, Clone, Default)]
pub struct Provenance {
    /// (manager, subresource, fieldsV1) of each managedFields entry.
    entries: Vec<(String, String, serde_json::Value)>,
    /// The Node as the kubelet registered it (request object of its create), when the audit log has it.
    registered: Option<serde_json::Value>,
    /// Who registered the Node, from the audit log (`system:node:<name>` for its kubelet).
    registrant: Option<String>,
    /// The Node's name: its kubelet registers as `system:node:<name>`.
    node_name: String,
}

impl Provenance {
    /// From the Node's managedFields and, if found, its creation in the audit log.
    pub fn of(node: &Node, created: Option<&Event>) -> Self {
        let entries = node
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .map(|m| {
                (
                    m.manager.clone().unwrap_or_default(),
                    m.subresource.clone().unwrap_or_default(),
                    m.fields_v1.as_ref().map(|f| f.0.clone()).unwrap_or_default(),
                )
            })
            .collect();
        Self {
            entries,
            registered: created.and_then(|e| e.request_object.clone()),
            registrant: created.map(|e| e.acting_user().username.clone()),
            node_name: node.metadata.name.clone().unwrap_or_default(),
        }
    }

    /// Managers owning the field at `path` (`["f:metadata", "f:labels", "f:team"]`).
    fn owners(&self, path: &[&str]) -> Vec<Setter> {
        let mut out: Vec<Setter> = Vec::new();
        for (manager, _, fields) in &self.entries {
            let mut at = fields;
            let found = path.iter().all(|p| match at.get(*p) {
                Some(next) => {
                    at = next;
                    true
                }
                None => false,
            });
            let setter = Setter::from_manager(manager);
            if found && !out.contains(&setter) {
                out.push(setter);
            }
        }
        out
    }

    /// Whether the Node's own kubelet registered it: its create came from `system:node:<name>`, or, without an
    /// audit record, the kubelet owns the `kubernetes.io/hostname` label it sets at registration.
    fn kubelet_registered(&self) -> bool {
        match &self.registrant {
            Some(user) => *user == format!("system:node:{}", self.node_name),
            None => self.owners(&["f:metadata", "f:labels", "f:kubernetes.io/hostname"]) == [Setter::Kubelet],
        }
    }

    pub fn label(&self, key: &str) -> Vec<Setter> {
        self.owners(&["f:metadata", "f:labels", &format!("f:{key}")])
    }

    pub fn provider_id(&self) -> Vec<Setter> {
        self.owners(&["f:spec", "f:providerID"])
    }

    /// Owners of `status.capacity.<resource>`; a value set when the Node was created and never changed has no
    /// owner in managedFields (status is a subresource), so it belongs to whoever registered the Node.
    pub fn capacity(&self, resource: &str) -> Vec<Setter> {
        let owners = self.owners(&["f:status", "f:capacity", &format!("f:{resource}")]);
        if owners.is_empty() && self.kubelet_registered() {
            return vec![Setter::Kubelet];
        }
        owners
    }

    /// Who set `taint`: the kubelet when its registration carried it (`--register-with-taints`); else whoever
    /// owns the taint list now (an atomic list: its last writer).
    pub fn taint(&self, taint: &Taint) -> Vec<Setter> {
        let Some(registration) = &self.registered else {
            let last: Vec<String> = self
                .owners(&["f:spec", "f:taints"])
                .iter()
                .map(ToString::to_string)
                .collect();
            return vec![Setter::Unknown(format!(
                "no audit record of the registration; the taint list was last written by {}",
                if last.is_empty() {
                    "nobody on record".into()
                } else {
                    last.join(" and ")
                }
            ))];
        };
        let registered = registration["spec"]["taints"].as_array().cloned().unwrap_or_default();
        let carried = registered.iter().any(|t| {
            t["key"].as_str() == Some(taint.key.as_str())
                && t["effect"].as_str() == Some(taint.effect.as_str())
                && t["value"].as_str().filter(|v| !v.is_empty()) == taint.value.as_deref()
        });
        if carried && self.kubelet_registered() {
            return vec![Setter::Kubelet];
        }
        self.owners(&["f:spec", "f:taints"])
    }
}

/// "set by kubelet", "set by kubelet and cloud-node controller", "set by nobody on record".
pub fn describe(setters: &[Setter]) -> String {
    if setters.is_empty() {
        return "set by nobody on record".into();
    }
    let names: Vec<String> = setters.iter().map(ToString::to_string).collect();
    format!("set by {}", names.join(" and "))
}

/// Whether `setters` satisfies `want`: someone allowed wrote it, and for `kubelet` nobody else did.
pub fn satisfies(setters: &[Setter], want: SetBy) -> bool {
    match want {
        SetBy::Any => true,
        SetBy::Kubelet => !setters.is_empty() && setters.iter().all(|s| s.allowed_by(want)),
        SetBy::CloudController => setters.iter().any(|s| s.allowed_by(want)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

    fn entry(manager: &str, subresource: Option<&str>, fields: serde_json::Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            subresource: subresource.map(Into::into),
            fields_v1: Some(FieldsV1(fields)),
            ..Default::default()
        }
    }

    /// The shape of a real Node's managedFields (recorded from a run: kubelet registration, the cloud-node
    /// controller's labels, kube-controller-manager owning the taint list).
    fn node(provider_id_by: &str) -> Node {
        let mut n = Node::default();
        n.metadata.managed_fields = Some(vec![
            entry(
                "kube-controller-manager",
                None,
                serde_json::json!({"f:spec": {"f:taints": {}}}),
            ),
            entry(
                KUBELET,
                None,
                serde_json::json!({"f:metadata": {"f:labels": {"f:kubernetes.io/hostname": {}, "f:team": {}}}}),
            ),
            entry(
                KUBELET,
                Some("status"),
                serde_json::json!({"f:status": {"f:conditions": {}}}),
            ),
            entry(
                CLOUD_NODE,
                None,
                serde_json::json!({"f:metadata": {"f:labels": {"f:topology.kubernetes.io/zone": {}}}}),
            ),
            entry(
                provider_id_by,
                None,
                serde_json::json!({"f:spec": {"f:providerID": {}}}),
            ),
        ]);
        n
    }

    fn created(taints: serde_json::Value) -> Event {
        // The test Node's name is empty, so its kubelet is `system:node:`.
        serde_json::from_value(serde_json::json!({
            "verb": "create",
            "stage": "ResponseComplete",
            "user": {"username": "system:node:"},
            "requestObject": {"metadata": {"name": "ip-1"}, "spec": {"taints": taints}},
        }))
        .unwrap()
    }

    #[test]
    fn labels_and_provider_id_come_from_managed_fields() {
        let p = Provenance::of(&node(KUBELET), None);
        assert_eq!(p.label("team"), [Setter::Kubelet]);
        assert_eq!(p.label("topology.kubernetes.io/zone"), [Setter::CloudNode]);
        assert!(p.label("absent").is_empty());
        assert_eq!(p.provider_id(), [Setter::Kubelet]);
        let filled = Provenance::of(&node(CLOUD_NODE), None);
        assert_eq!(describe(&filled.provider_id()), "set by cloud-node controller");
        assert!(!satisfies(&filled.provider_id(), SetBy::Kubelet));
        assert!(satisfies(&filled.provider_id(), SetBy::CloudController));
        assert!(satisfies(&filled.provider_id(), SetBy::Any));
        assert!(!satisfies(&[], SetBy::Kubelet));
    }

    #[test]
    fn capacity_set_at_registration_belongs_to_the_registrant() {
        let ev = created(serde_json::json!([]));
        assert_eq!(
            Provenance::of(&node(KUBELET), Some(&ev)).capacity("pods"),
            [Setter::Kubelet]
        );
        let mut by_admin = ev.clone();
        by_admin.user.username = "kubernetes-admin".into();
        assert!(Provenance::of(&node(KUBELET), Some(&by_admin))
            .capacity("pods")
            .is_empty());
    }

    #[test]
    fn taints_are_the_kubelets_when_it_registered_them() {
        let t = Taint {
            key: "dedicated".into(),
            value: Some("payments".into()),
            effect: "NoSchedule".into(),
        };
        let ev = created(serde_json::json!([{"key": "dedicated", "value": "payments", "effect": "NoSchedule"}]));
        assert_eq!(Provenance::of(&node(KUBELET), Some(&ev)).taint(&t), [Setter::Kubelet]);
        // Not in the registration: added later; the list's last writer is all that is known.
        let none = created(serde_json::json!([]));
        let later = Provenance::of(&node(KUBELET), Some(&none)).taint(&t);
        assert_eq!(later, [Setter::Other("kube-controller-manager".into())]);
        assert_eq!(describe(&later), "set by 'kube-controller-manager'");
        // Without the registration nobody is blamed, and the kubelet is not credited.
        let unknown = Provenance::of(&node(KUBELET), None).taint(&t);
        assert!(describe(&unknown).contains("no audit record"), "{unknown:?}");
        assert!(!satisfies(&unknown, SetBy::Kubelet));
        // Another node's kubelet registering it is not this node's kubelet.
        let mut other = ev.clone();
        other.user.username = "system:node:ip-9".into();
        assert!(Provenance::of(&node(KUBELET), Some(&other)).taint(&t) != [Setter::Kubelet]);
    }
}
