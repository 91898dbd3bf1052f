//! `capa`: the AL2023 user data Cluster API Provider AWS writes for a `NodeadmConfig`
//! (`crate::userdata::producers::capa`). The cluster's name is the scenario's: CAPA names an EKS cluster
//! `<namespace>_<name>` unless told otherwise, so a scenario copying a CAPA cluster names it that way.
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::userdata::producers::capa::Capa;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A Cluster API `NodeadmConfig` (bootstrap.cluster.x-k8s.io, EKS): the fields that reach the user data.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapaSpec {
    /// `preNodeadmCommands`: shell lines run by cloud-init before nodeadm starts the kubelet.
    #[serde(default)]
    pub pre_nodeadm_commands: Vec<String>,
    /// nodeadm's feature gates (e.g. `InstanceIdNodeName: true`).
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    /// `kubelet`: a KubeletConfiguration fragment and flags for nodeadm's kubelet.
    #[serde(default)]
    pub kubelet: CapaKubelet,
}

/// `NodeadmConfig.spec.kubelet`.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapaKubelet {
    /// A KubeletConfiguration fragment.
    #[serde(default)]
    #[schemars(with = "Option<serde_json::Value>")]
    pub config: Option<serde_json::Value>,
    /// Kubelet flags, e.g. `--node-labels=tier=workers`.
    #[serde(default)]
    pub flags: Vec<String>,
}

impl FlavorSpec for CapaSpec {
    const KEY: &'static str = "capa";
}

impl Flavor for CapaSpec {
    fn texts(&self) -> Vec<String> {
        self.pre_nodeadm_commands.iter().chain(&self.kubelet.flags).cloned().collect()
    }

    fn check(&self) -> Result<(), String> {
        match &self.kubelet.config {
            Some(c) if !c.is_object() => Err("capa.kubelet.config must be a mapping (a KubeletConfiguration fragment)".into()),
            _ => Ok(()),
        }
    }

    fn nodeadm(&self) -> bool {
        true
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let capa = Capa {
            pre_nodeadm_commands: input.render_list(&self.pre_nodeadm_commands)?,
            feature_gates: self.feature_gates.clone(),
            kubelet_config: self.kubelet.config.clone(),
            kubelet_flags: input.render_list(&self.kubelet.flags)?,
        };
        Ok(Generated::served(capa.user_data(input.facts)))
    }
}
