//! What a bootstrap did to a node, as `nodejoin compare` sees it: the Node object, the kubelet's live config and
//! command line, the files the bootstrap wrote, the calls it made, the programs it ran, its timings and the
//! scenario's check outcomes. Everything that names this particular instance (its id, address, DNS name, the
//! cluster's endpoint and credentials) is replaced by a placeholder (`{{instance.id}}`, see
//! `assert::files::Identity`), so two runs of the same bootstrap give equal snapshots and a difference is the
//! bootstrap's doing.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One scenario's run, normalised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScenarioSnapshot {
    pub scenario: String,
    /// `PASSED`, `FAILED`, `IGNORED` or `ERROR`.
    pub outcome: String,
    /// Check name (node names replaced by the node's key, e.g. `worker-0/labels`) → outcome.
    pub checks: BTreeMap<String, CheckOutcome>,
    /// Node key (`<group>-<index>`, stable across runs) → what the node showed.
    pub nodes: BTreeMap<String, NodeSnapshot>,
}

/// One check's result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOutcome {
    /// `PASS`, `FAIL` or `XFAIL` (a check the scenario expects to fail, and it did).
    pub mark: String,
    /// What the check found (normalised), for the reader.
    pub actual: String,
}

impl CheckOutcome {
    /// Whether the scenario got what it wanted from this check (`PASS` or `XFAIL`).
    pub fn ok(&self) -> bool {
        self.mark != "FAIL"
    }
}

/// One node, normalised.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeSnapshot {
    /// The Node object as the cluster sees it (`None` fields: the node never registered).
    pub node: NodeFields,
    /// The kubelet's live config (`/configz`), flattened to dotted keys (`kubeletconfig.maxPods`) with each
    /// leaf's JSON text (`29`, `"10.100.0.10"`); lists are leaves.
    pub configz: BTreeMap<String, String>,
    /// The kubelet's command line (argv, the program as its file name), empty when no kubelet ran.
    pub kubelet_args: Vec<String>,
    /// Files the bootstrap wrote (path → content), for the files an EKS-style bootstrap writes.
    pub files: BTreeMap<String, String>,
    /// Calls to the fakes: `service action -> status` → how many times.
    pub calls: BTreeMap<String, usize>,
    /// Programs the harness-run bootstrap ran (file name → how many times); empty when there is no trace.
    pub programs: BTreeMap<String, usize>,
    /// Milestones in seconds (`container up`, `bootstrap done`, and from the kubelet's start: `client CSR
    /// issued`, `Node registered`, `Ready`, `serving CSR issued`, `serving cert live`): only those the scenario
    /// waited for, since one it did not wait for may land on either side of the wait's end.
    pub timings: BTreeMap<String, f64>,
}

/// The Node fields a bootstrap decides.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFields {
    pub registered: bool,
    pub labels: BTreeMap<String, String>,
    /// `key=value:Effect` (or `key:Effect`), in the Node's order.
    pub taints: Vec<String>,
    pub capacity: BTreeMap<String, String>,
    pub allocatable: BTreeMap<String, String>,
    pub provider_id: Option<String>,
}

/// Flattens a JSON value into dotted keys; arrays and scalars are leaves (their JSON text).
pub fn flatten_json(v: &serde_json::Value, prefix: &str, out: &mut BTreeMap<String, String>) {
    match v {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_json(v, &key, out);
            }
        }
        other => {
            out.insert(prefix.to_string(), other.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_flattens_to_dotted_leaves() {
        let v: serde_json::Value =
            serde_json::json!({"kubeletconfig": {"maxPods": 29, "clusterDNS": ["10.100.0.10"], "empty": {}}});
        let mut out = BTreeMap::new();
        flatten_json(&v, "", &mut out);
        assert_eq!(out["kubeletconfig.maxPods"], "29");
        assert_eq!(out["kubeletconfig.clusterDNS"], "[\"10.100.0.10\"]");
        assert_eq!(out["kubeletconfig.empty"], "{}");
    }

    #[test]
    fn snapshots_round_trip_through_json() {
        let mut s = ScenarioSnapshot {
            scenario: "basic".into(),
            outcome: "PASSED".into(),
            ..Default::default()
        };
        s.nodes.insert("worker-0".into(), NodeSnapshot::default());
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<ScenarioSnapshot>(&text).unwrap(), s);
    }
}
