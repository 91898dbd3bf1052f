//! `karpenter`: the AL2023 user data Karpenter writes for a NodePool and an EC2NodeClass
//! (`crate::userdata::producers::karpenter`): the node class's own user data first, then Karpenter's NodeConfig
//! with its labels, maxPods, clusterDNS and taints (startup taints and `karpenter.sh/unregistered` included).
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::userdata::producers::{karpenter::Karpenter, karpenter_kubelet, Taint};
use base64::Engine;
use serde::Deserialize;
use std::collections::BTreeMap;

/// Karpenter's AL2023 user data for a NodePool and an EC2NodeClass.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct KarpenterSpec {
    /// The NodePool's name (`karpenter.sh/nodepool`).
    #[serde(default = "default_name")]
    pub node_pool: String,
    /// The EC2NodeClass's name (`karpenter.k8s.aws/ec2nodeclass`).
    #[serde(default = "default_name")]
    pub node_class: String,
    /// `on-demand`, `spot` or `reserved` (`karpenter.sh/capacity-type`).
    #[serde(default = "default_capacity_type")]
    pub capacity_type: String,
    /// The NodePool template's labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The NodePool's taints, `key=value:Effect` or `key:Effect`.
    #[serde(default)]
    pub taints: Vec<String>,
    /// The NodePool's startup taints (removed by a controller once the node is ready).
    #[serde(default)]
    pub startup_taints: Vec<String>,
    /// The EC2NodeClass's `spec.kubelet` (a KubeletConfiguration fragment). Karpenter adds maxPods for the
    /// instance type (capped by `podsPerCore`) and clusterDNS when they are absent; with `nodeClassCEL`, `maxPods`
    /// and `kubeReserved`/`systemReserved` values may be CEL expressions, which it evaluates for the instance type.
    #[serde(default)]
    #[schemars(with = "serde_json::Value")]
    pub kubelet: serde_json::Map<String, serde_json::Value>,
    /// Karpenter's `NodeClassCEL` feature gate (`AWS_FEATURE_GATES`, off by default): without it a node class
    /// whose kubelet holds an expression is not ready and nothing launches.
    #[serde(default, rename = "nodeClassCEL")]
    pub node_class_cel: bool,
    /// The EC2NodeClass's `instanceStorePolicy` (`RAID0`).
    #[serde(default)]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// The EC2NodeClass's `spec.userData`: MIME, a NodeConfig or a shell script; placeholders filled in.
    #[serde(default)]
    pub user_data: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub enum InstanceStorePolicy {
    #[serde(rename = "RAID0")]
    Raid0,
}

fn default_name() -> String {
    "default".into()
}
fn default_capacity_type() -> String {
    "on-demand".into()
}

impl FlavorSpec for KarpenterSpec {
    const KEY: &'static str = "karpenter";
}

impl Flavor for KarpenterSpec {
    fn texts(&self) -> Vec<String> {
        let mut t: Vec<String> = self.labels.values().chain(&self.taints).chain(&self.startup_taints).cloned().collect();
        t.extend(self.user_data.clone());
        t
    }

    fn check(&self) -> Result<(), String> {
        if !matches!(self.capacity_type.as_str(), "on-demand" | "spot" | "reserved") {
            return Err(format!(
                "karpenter.capacityType: `{}` is not one of on-demand, spot, reserved",
                self.capacity_type
            ));
        }
        if let Some(m) = self.kubelet.get("maxPods") {
            if !(m.is_u64() || m.is_string()) {
                return Err(format!(
                    "karpenter.kubelet.maxPods: {m} is neither a whole number nor a CEL expression"
                ));
            }
        }
        if karpenter_kubelet::has_expressions(&self.kubelet) {
            if !self.node_class_cel {
                return Err("karpenter.kubelet holds a CEL expression, which Karpenter refuses unless its \
                            NodeClassCEL feature gate is on (off by default: the EC2NodeClass is then not ready, \
                            KubeletExpressionsDisabled, and nothing launches): set karpenter.nodeClassCEL: true"
                    .into());
            }
            karpenter_kubelet::check(&self.kubelet)?;
        }
        for t in self.taints.iter().chain(&self.startup_taints) {
            if !t.contains("{{") {
                Taint::parse(t).map_err(|e| format!("karpenter: {e}"))?;
            }
        }
        Ok(())
    }

    fn nodeadm(&self) -> bool {
        true
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let taints = |l: &[String]| -> Result<Vec<Taint>, String> {
            input.render_list(l)?.iter().map(|t| Taint::parse(t)).collect()
        };
        let facts = instance_facts(&input.group, &self.kubelet)?;
        let karpenter = Karpenter {
            nodepool: self.node_pool.clone(),
            nodeclass: self.node_class.clone(),
            capacity_type: self.capacity_type.clone(),
            labels: input.render_map(&self.labels)?,
            taints: taints(&self.taints)?,
            startup_taints: taints(&self.startup_taints)?,
            kubelet: karpenter_kubelet::resolve(&self.kubelet, &facts)?,
            max_pods: facts.eni_max_pods,
            cluster_dns: input.facts.dns_ip.clone(),
            raid0: self.instance_store_policy == Some(InstanceStorePolicy::Raid0),
            user_data: self.user_data.as_deref().map(|u| input.render(u)).transpose()?,
        };
        let served = karpenter.user_data(input.facts)?;
        // The launch template carries it base64-encoded.
        let api = base64::engine::general_purpose::STANDARD.encode(&served);
        Ok(Generated {
            served,
            api_form: Some(api.into_bytes()),
        })
    }
}

/// Karpenter's view of the group's instance type: its ENI limits and, when the kubelet needs them (an expression,
/// podsPerCore), its vCPUs and memory.
fn instance_facts(
    group: &super::GroupFacts<'_>,
    kubelet: &serde_json::Map<String, serde_json::Value>,
) -> Result<karpenter_kubelet::InstanceFacts, String> {
    let ty = group.instance_type;
    let info = group.instance_type_info;
    let limits = super::eni_limits(group, KarpenterSpec::KEY)?;
    let needs_size = karpenter_kubelet::has_expressions(kubelet) || kubelet.contains_key("podsPerCore");
    let size = crate::eks::instance_sizes::size(ty).or_else(|| info.and_then(|i| Some((i.vcpus?, i.memory_mib?))));
    let (vcpus, memory_mib) = match size {
        Some(s) => s,
        None if needs_size => {
            return Err(format!(
                "karpenter: instance type {ty} has no known vCPUs and memory: set instanceTypeInfo.vcpus and memoryMib"
            ))
        }
        None => (0, 0),
    };
    Ok(karpenter_kubelet::InstanceFacts {
        instance_type: ty.to_string(),
        vcpus,
        memory_mib,
        default_enis: limits.enis,
        ips_per_eni: limits.ipv4_per_eni,
        eni_max_pods: limits.max_pods(),
    })
}

#[cfg(test)]
mod tests {
    fn load(karpenter: &str) -> Result<crate::scenario::Scenario, String> {
        let text = format!(
            "cluster: {{ auth: iam }}\nnodes:\n  - name: a\n    userData:\n      karpenter: {karpenter}\n"
        );
        crate::scenario::load::parse(&text, &crate::paths::workspace_root().join("t.yaml")).map_err(|e| e.to_string())
    }

    #[test]
    fn expressions_need_karpenters_feature_gate_and_must_compile() {
        let e = load("{ kubelet: { maxPods: \"max_pods - 1\" } }").unwrap_err();
        assert!(e.contains("NodeClassCEL") && e.contains("nodeClassCEL: true"), "{e}");
        let e = load("{ kubelet: { kubeReserved: { cpu: \"vcpus * 30\" } } }").unwrap_err();
        assert!(e.contains("NodeClassCEL"), "{e}");
        assert!(load("{ nodeClassCEL: true, kubelet: { maxPods: \"max_pods - 1\" } }").is_ok());
        let e = load("{ nodeClassCEL: true, kubelet: { maxPods: \"max_pods -\" } }").unwrap_err();
        assert!(e.contains("does not compile"), "{e}");
        let e = load("{ kubelet: { maxPods: -3 } }").unwrap_err();
        assert!(e.contains("neither a whole number nor a CEL expression"), "{e}");
        // Static values need no gate.
        assert!(load("{ kubelet: { maxPods: 42, kubeReserved: { cpu: 80m, memory: 1Gi } } }").is_ok());
    }
}
