//! `nodeadm`: AL2023 user data, MIME `application/node.eks.aws` NodeConfig parts run by the node's nodeadm: a
//! first part with the cluster's details, as EKS and Karpenter write it, then the scenario's own parts; nodeadm
//! merges them in order.
use super::{Flavor, FlavorSpec, GenerateInput, Generated};
use crate::userdata::generate::{self, PartEncoding};
use serde::Deserialize;

/// AL2023 user data: a first NodeConfig with the cluster's details, as EKS and Karpenter write it, then the
/// scenario's own NodeConfig parts; nodeadm merges them in order.
#[derive(Debug, Clone, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeadmSpec {
    /// `spec.cluster` fields left out of the generated first part (`name`, `apiServerEndpoint`,
    /// `certificateAuthority`, `cidr`): how a negative scenario hands nodeadm an incomplete config.
    #[serde(default)]
    pub omit: Vec<NodeadmClusterField>,
    /// How the generated first part is wrapped.
    #[serde(default)]
    pub encoding: PartEncoding,
    /// Further parts, in order.
    #[serde(default)]
    pub parts: Vec<NodeadmPart>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum NodeadmClusterField {
    Name,
    ApiServerEndpoint,
    CertificateAuthority,
    Cidr,
}

impl NodeadmClusterField {
    pub fn key(self) -> &'static str {
        match self {
            Self::Name => "name",
            Self::ApiServerEndpoint => "apiServerEndpoint",
            Self::CertificateAuthority => "certificateAuthority",
            Self::Cidr => "cidr",
        }
    }
}

/// One more NodeConfig part: its `spec` (strings may hold placeholders) and how the part is wrapped.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeadmPart {
    /// The part's NodeConfig `spec` (strings may hold placeholders).
    #[schemars(with = "serde_json::Value")]
    pub spec: serde_yaml_ng::Value,
    /// How the part is wrapped: `plain` (the default), `base64` or `gzip`.
    #[serde(default)]
    pub encoding: PartEncoding,
}

impl FlavorSpec for NodeadmSpec {
    const KEY: &'static str = "nodeadm";
}

impl Flavor for NodeadmSpec {
    /// Every string in the parts' specs, keys included.
    fn texts(&self) -> Vec<String> {
        let mut out = Vec::new();
        for p in &self.parts {
            super::collect_strings(&p.spec, &mut out);
        }
        out
    }

    fn check(&self) -> Result<(), String> {
        if self.parts.iter().any(|p| !p.spec.is_mapping()) {
            return Err("nodeadm.parts[].spec must be a mapping (a NodeConfig's spec)".into());
        }
        Ok(())
    }

    fn nodeadm(&self) -> bool {
        true
    }

    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String> {
        let omit: Vec<&str> = self.omit.iter().map(|f| f.key()).collect();
        let mut configs = vec![(generate::nodeadm_cluster_config(input.facts, &omit), self.encoding)];
        for part in &self.parts {
            let spec = crate::scenario::template::render_yaml(&part.spec, input.vars)?;
            configs.push((generate::node_config(spec), part.encoding));
        }
        Ok(Generated::served(generate::nodeadm(&configs)))
    }
}
