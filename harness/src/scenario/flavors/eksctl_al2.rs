//! `eksctlAl2`: eksctl's self-managed AL2 node group (base64(gzip(`#cloud-config`)) with `write_files` and `runcmd`,
//! embedding the eksctl-style helper in fixtures/user-data/eksctl/).
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::userdata::generate;
use serde::Deserialize;
use std::collections::BTreeMap;

/// The eksctl-style helper the generated cloud-config embeds, under the fixtures.
const HELPER: &str = "user-data/eksctl/bootstrap.helper.sh";

/// eksctl's self-managed node group: base64(gzip(#cloud-config)).
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EksctlAl2Spec {
    /// Defaults to the node group's name.
    #[serde(default)]
    pub nodegroup: Option<String>,
    /// The node group's labels (`NODE_LABELS`; eksctl adds its cluster-name and nodegroup-name labels).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `key=value:Effect`.
    #[serde(default)]
    pub taints: Vec<String>,
    /// `MAX_PODS`: the kubelet's `--max-pods` (default: none, bootstrap.sh's own).
    #[serde(default)]
    pub max_pods: Option<u32>,
    /// A partial KubeletConfiguration (`kubelet-extra.json`) merged over the node's.
    #[serde(default)]
    pub kubelet_extra_config: Option<serde_json::Value>,
}

impl FlavorSpec for EksctlAl2Spec {
    const KEY: &'static str = "eksctlAl2";
}

impl Flavor for EksctlAl2Spec {
    fn texts(&self) -> Vec<String> {
        self.labels.values().chain(&self.taints).cloned().collect()
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let helper_path = crate::paths::fixtures_dir(input.settings).join(HELPER);
        let helper =
            std::fs::read_to_string(&helper_path).map_err(|err| format!("{}: {err}", helper_path.display()))?;
        let ng = generate::Eksctl {
            nodegroup: self.nodegroup.clone().unwrap_or_else(|| input.group.name.to_string()),
            labels: input.render_map(&self.labels)?,
            taints: input.render_list(&self.taints)?,
            max_pods: self.max_pods,
            kubelet_extra: self.kubelet_extra_config.clone().unwrap_or_else(|| serde_json::json!({})),
        };
        let api = generate::eksctl(input.facts, &ng, &helper);
        Ok(Generated {
            served: crate::userdata::from_api(&api)?,
            api_form: Some(api.into_bytes()),
        })
    }
}
