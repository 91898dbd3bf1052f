//! `eksManagedAl2`: what EKS injected for an AL2 managed node group (AL2 support ended 2025-11-26) (MIME with a shell part calling bootstrap.sh with the
//! managed labels).
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::userdata::generate;
use serde::Deserialize;
use std::collections::BTreeMap;

/// What EKS injects for a managed node group: MIME with a shell part calling bootstrap.sh with EKS's labels.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EksManagedAl2Spec {
    /// Defaults to the node group's name.
    #[serde(default)]
    pub nodegroup: Option<String>,
    /// The node group's labels (CreateNodegroup `labels`), after EKS's own in `--node-labels`.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `key=value:Effect`.
    #[serde(default)]
    pub taints: Vec<String>,
    /// The launch template's id, in EKS's `eks.amazonaws.com/sourceLaunchTemplateId` label (default
    /// `lt-0nodejoin0000000001`).
    #[serde(default = "default_launch_template")]
    pub launch_template_id: String,
    /// The launch template's version, in EKS's `eks.amazonaws.com/sourceLaunchTemplateVersion` label
    /// (default `"1"`).
    #[serde(default = "default_launch_template_version")]
    pub launch_template_version: String,
    /// Defaults to the ENI formula for the instance type, as EKS computes it.
    #[serde(default)]
    pub max_pods: Option<u32>,
}

fn default_launch_template() -> String {
    "lt-0nodejoin0000000001".into()
}
fn default_launch_template_version() -> String {
    "1".into()
}

impl FlavorSpec for EksManagedAl2Spec {
    const KEY: &'static str = "eksManagedAl2";
}

impl Flavor for EksManagedAl2Spec {
    fn texts(&self) -> Vec<String> {
        self.labels.values().chain(&self.taints).cloned().collect()
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let ids = super::eks_managed::GroupIds {
            nodegroup: &self.nodegroup,
            labels: &self.labels,
            launch_template_id: &self.launch_template_id,
            launch_template_version: &self.launch_template_version,
            max_pods: self.max_pods,
        };
        let managed = super::eks_managed::managed_group(input, Self::KEY, &ids, input.render_list(&self.taints)?)?;
        Ok(Generated::served(generate::eks_managed(input.facts, &managed)))
    }
}
