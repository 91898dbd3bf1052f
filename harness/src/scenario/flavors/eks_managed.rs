//! `eksManaged`: what EKS injects for a managed node group (MIME with a shell part calling bootstrap.sh with the
//! managed labels).
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::scenario::model::Lifecycle;
use crate::userdata::generate;
use serde::Deserialize;
use std::collections::BTreeMap;

/// What EKS injects for a managed node group: MIME with a shell part calling bootstrap.sh with EKS's labels.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EksManagedSpec {
    /// Defaults to the node group's name.
    #[serde(default)]
    pub nodegroup: Option<String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `key=value:Effect`.
    #[serde(default)]
    pub taints: Vec<String>,
    #[serde(default = "default_launch_template")]
    pub launch_template_id: String,
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

impl FlavorSpec for EksManagedSpec {
    const KEY: &'static str = "eksManaged";
}

impl Flavor for EksManagedSpec {
    fn texts(&self) -> Vec<String> {
        self.labels.values().chain(&self.taints).cloned().collect()
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let group = input.group;
        let max_pods = match self.max_pods {
            Some(n) => n,
            None => crate::eks::max_pods::max_pods(&group.instance_type)
                .or_else(|| {
                    group.instance_type_info.map(|i| {
                        crate::eks::max_pods::EniLimits {
                            enis: i.maximum_network_interfaces,
                            ipv4_per_eni: i.ipv4_addresses_per_interface,
                        }
                        .max_pods()
                    })
                })
                .ok_or_else(|| {
                    format!(
                        "eksManaged: instance type {} is not in the ENI table; set maxPods or instanceTypeInfo",
                        group.instance_type
                    )
                })?,
        };
        let managed = generate::EksManaged {
            nodegroup: self.nodegroup.clone().unwrap_or_else(|| group.name.clone()),
            ami_id: input.ami_id.to_string(),
            capacity_type: match group.lifecycle {
                Lifecycle::OnDemand => "ON_DEMAND".into(),
                Lifecycle::Spot => "SPOT".into(),
            },
            launch_template_id: self.launch_template_id.clone(),
            launch_template_version: self.launch_template_version.clone(),
            max_pods,
            labels: input.render_map(&self.labels)?,
            taints: input.render_list(&self.taints)?,
        };
        Ok(Generated::served(generate::eks_managed(input.facts, &managed)))
    }
}
