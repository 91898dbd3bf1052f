//! `eksManaged`: an EKS managed node group on AL2023 (`crate::userdata::producers::eks_managed`): the launch
//! template's own parts merged with the NodeConfig EKS adds (cluster, maxPods, clusterDNS, EKS's labels), in
//! either order; with `customAmi` EKS adds nothing.
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::scenario::instance::Lifecycle;
use crate::userdata::generate;
use crate::userdata::producers::eks_managed::{EksManaged, PartOrder};
use crate::userdata::producers::UserPart;
use serde::Deserialize;
use std::collections::BTreeMap;

/// An EKS managed node group on AL2023: the launch template's parts and EKS's NodeConfig.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EksManagedSpec {
    /// Defaults to the node group's name.
    #[serde(default)]
    pub nodegroup: Option<String>,
    /// The node group's labels (CreateNodegroup `labels`).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
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
    /// The launch template's own user data, part by part (placeholders filled in).
    #[serde(default)]
    pub launch_template: Vec<LaunchTemplatePart>,
    /// Where EKS's part goes: `launchTemplateFirst` (default) or `eksFirst`. EKS does not say; test both.
    #[serde(default)]
    pub part_order: PartOrderSpec,
    /// The launch template names an AMI: EKS adds nothing, the parts must carry the whole NodeConfig.
    #[serde(default)]
    pub custom_ami: bool,
}

/// One part of the launch template's user data: exactly one of `nodeConfig` (a NodeConfig's `spec`) or `shell`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LaunchTemplatePart {
    /// A NodeConfig's `spec`.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub node_config: Option<serde_yaml_ng::Value>,
    /// A shell script.
    #[serde(default)]
    pub shell: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PartOrderSpec {
    #[default]
    LaunchTemplateFirst,
    EksFirst,
}

fn default_launch_template() -> String {
    "lt-0nodejoin0000000001".into()
}
fn default_launch_template_version() -> String {
    "1".into()
}

/// The fields both managed-group flavors (this and `eksManagedAl2`) share.
pub(super) struct GroupIds<'a> {
    pub nodegroup: &'a Option<String>,
    pub labels: &'a BTreeMap<String, String>,
    pub launch_template_id: &'a str,
    pub launch_template_version: &'a str,
    pub max_pods: Option<u32>,
}

/// What EKS knows of a managed node group: its name, the instance's AMI, the capacity type, the launch template,
/// maxPods (the ENI formula unless given) and the labels, placeholders filled in.
pub(super) fn managed_group(
    input: &GenerateInput<'_>,
    key: &str,
    ids: &GroupIds<'_>,
    taints: Vec<String>,
) -> Result<generate::EksManaged, String> {
    let group = &input.group;
    Ok(generate::EksManaged {
        nodegroup: ids.nodegroup.clone().unwrap_or_else(|| group.name.to_string()),
        ami_id: input.ami_id.to_string(),
        capacity_type: match group.lifecycle {
            Lifecycle::OnDemand => "ON_DEMAND".into(),
            Lifecycle::Spot => "SPOT".into(),
        },
        launch_template_id: ids.launch_template_id.to_string(),
        launch_template_version: ids.launch_template_version.to_string(),
        max_pods: match ids.max_pods {
            Some(n) => n,
            None => super::eni_max_pods(group, key)?,
        },
        labels: input.render_map(ids.labels)?,
        taints,
    })
}

impl EksManagedSpec {
    fn ids(&self) -> GroupIds<'_> {
        GroupIds {
            nodegroup: &self.nodegroup,
            labels: &self.labels,
            launch_template_id: &self.launch_template_id,
            launch_template_version: &self.launch_template_version,
            max_pods: self.max_pods,
        }
    }
}

impl FlavorSpec for EksManagedSpec {
    const KEY: &'static str = "eksManaged";
}

impl Flavor for EksManagedSpec {
    fn texts(&self) -> Vec<String> {
        let mut t: Vec<String> = self.labels.values().cloned().collect();
        for p in &self.launch_template {
            if let Some(spec) = &p.node_config {
                super::collect_strings(spec, &mut t);
            }
            t.extend(p.shell.clone());
        }
        t
    }

    fn check(&self) -> Result<(), String> {
        for p in &self.launch_template {
            match (&p.node_config, &p.shell) {
                (Some(spec), None) if !spec.is_mapping() => {
                    return Err("eksManaged.launchTemplate[].nodeConfig must be a mapping (a NodeConfig's spec)".into())
                }
                (Some(_), None) | (None, Some(_)) => {}
                _ => return Err("eksManaged.launchTemplate[]: give exactly one of nodeConfig or shell".into()),
            }
        }
        if self.custom_ami && self.launch_template.is_empty() {
            return Err("eksManaged.customAmi: EKS adds nothing, so launchTemplate must carry the whole NodeConfig".into());
        }
        Ok(())
    }

    fn nodeadm(&self) -> bool {
        true
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let managed = managed_group(input, Self::KEY, &self.ids(), Vec::new())?;
        let (labels, max_pods) = (managed.node_labels(), managed.max_pods);
        let mut launch_template = Vec::new();
        for p in &self.launch_template {
            launch_template.push(match (&p.node_config, &p.shell) {
                (Some(spec), _) => {
                    let spec = crate::scenario::template::render_yaml(spec, input.vars)?;
                    UserPart::NodeConfig(serde_yaml_ng::to_string(&generate::node_config(spec)).unwrap_or_default())
                }
                (None, Some(s)) => UserPart::Shell(input.render(s)?),
                (None, None) => return Err("eksManaged.launchTemplate[]: give exactly one of nodeConfig or shell".into()),
            });
        }
        let managed = EksManaged {
            labels,
            max_pods,
            launch_template,
            order: match self.part_order {
                PartOrderSpec::LaunchTemplateFirst => PartOrder::LaunchTemplateFirst,
                PartOrderSpec::EksFirst => PartOrder::EksFirst,
            },
            custom_ami: self.custom_ami,
        };
        Ok(Generated::served(managed.user_data(input.facts)))
    }
}
