//! `karpenter`: the AL2023 user data Karpenter writes for a NodePool and an EC2NodeClass
//! (`crate::userdata::producers::karpenter`): the node class's own user data first, then Karpenter's NodeConfig
//! with its labels, maxPods, clusterDNS and taints (startup taints and `karpenter.sh/unregistered` included).
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::userdata::producers::{karpenter::Karpenter, Taint};
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
    /// The EC2NodeClass's `spec.kubelet` (a KubeletConfiguration fragment; `maxPods` an integer). Karpenter adds
    /// maxPods for the instance type and clusterDNS when they are absent.
    #[serde(default)]
    #[schemars(with = "serde_json::Value")]
    pub kubelet: serde_json::Map<String, serde_json::Value>,
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
            if !m.is_u64() {
                return Err(format!(
                    "karpenter.kubelet.maxPods: {m} is not a whole number (a CEL expression is not evaluated by \
                     nodejoin yet: give the number it evaluates to)"
                ));
            }
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
        let karpenter = Karpenter {
            nodepool: self.node_pool.clone(),
            nodeclass: self.node_class.clone(),
            capacity_type: self.capacity_type.clone(),
            labels: input.render_map(&self.labels)?,
            taints: taints(&self.taints)?,
            startup_taints: taints(&self.startup_taints)?,
            kubelet: self.kubelet.clone(),
            max_pods: super::eni_max_pods(input.group, Self::KEY)?,
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
