//! `eksctl`: an eksctl self-managed node group on AL2023 (`crate::userdata::producers::eksctl`): its commands and
//! NodeConfigs in Go's MIME framing with a random boundary, handed to EC2 base64-encoded.
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::userdata::producers::eksctl::{random_boundary, Eksctl};
use crate::userdata::producers::Taint;
use base64::Engine;
use serde::Deserialize;
use std::collections::BTreeMap;

/// An eksctl self-managed node group (`nodeGroups:` in its config file) on AL2023.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EksctlSpec {
    /// Defaults to the node group's name.
    #[serde(default)]
    pub nodegroup: Option<String>,
    /// The node group's labels (eksctl adds its cluster-name and nodegroup-name labels).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `key=value:Effect`, or `key:Effect` for an empty value.
    #[serde(default)]
    pub taints: Vec<String>,
    /// `maxPodsPerNode`: a second NodeConfig part setting the kubelet's maxPods (default: none).
    #[serde(default)]
    pub max_pods_per_node: Option<u32>,
    /// Shell commands, each its own part, run by cloud-init.
    #[serde(default)]
    pub pre_bootstrap_commands: Vec<String>,
    /// A KubeletConfiguration fragment merged into the NodeConfig's kubelet config.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub kubelet_extra_config: Option<serde_json::Map<String, serde_json::Value>>,
}

impl FlavorSpec for EksctlSpec {
    const KEY: &'static str = "eksctl";
}

impl Flavor for EksctlSpec {
    fn texts(&self) -> Vec<String> {
        self.labels.values().chain(&self.taints).chain(&self.pre_bootstrap_commands).cloned().collect()
    }

    fn nodeadm(&self) -> bool {
        true
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let mut labels = input.render_map(&self.labels)?;
        labels.insert("alpha.eksctl.io/cluster-name".into(), input.facts.name.clone());
        labels.insert(
            "alpha.eksctl.io/nodegroup-name".into(),
            self.nodegroup.clone().unwrap_or_else(|| input.group.name.to_string()),
        );
        let eksctl = Eksctl {
            labels,
            taints: input.render_list(&self.taints)?.iter().map(|t| Taint::parse(t)).collect::<Result<_, _>>()?,
            max_pods: self.max_pods_per_node,
            kubelet_extra: self.kubelet_extra_config.clone().unwrap_or_default(),
            pre_bootstrap_commands: input.render_list(&self.pre_bootstrap_commands)?,
            boundary: random_boundary(),
        };
        let served = eksctl.user_data(input.facts);
        let api = base64::engine::general_purpose::STANDARD.encode(&served);
        Ok(Generated {
            served,
            api_form: Some(api.into_bytes()),
        })
    }
}
