//! The user-data generators a node group can name in `userData` (AL2023: `eksManaged`, `eksctl`, `nodeadm`,
//! `karpenter`, `capa`; AL2:
//! `eksManagedAl2`, `cloudFormationAl2`, `eksctlAl2`): each one file here (its YAML spec, the texts whose placeholders are checked when the scenario
//! loads, and the user data it writes) plus one line in [`registry!`]. The loader reads a flavor's spec as the
//! typed struct it is, so a mistake in it is reported at its own line and column; the schema lists them all.
use super::instance::{InstanceTypeInfo, Lifecycle};

/// The AutoScalingGroup resource a stack's instances signal, by default (a flavor's and a file's stack).
pub(crate) fn default_resource() -> String {
    "NodeGroup".into()
}
use crate::userdata::generate::ClusterFacts;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a generator writes: the bytes IMDS serves, and the RunInstances form when that differs (base64).
pub struct Generated {
    pub served: Vec<u8>,
    pub api_form: Option<Vec<u8>>,
}

impl Generated {
    /// User data IMDS serves as it is (what most generators write).
    pub fn served(served: Vec<u8>) -> Self {
        Self { served, api_form: None }
    }
}

/// What a generator works from: the cluster as EKS or the template fills it in, the node group's facts, the
/// instance's AMI, and the node's placeholder values.
pub struct GenerateInput<'a> {
    /// The run's settings (where nodejoin's own files are).
    pub settings: &'a crate::settings::Settings,
    pub facts: &'a ClusterFacts,
    pub group: GroupFacts<'a>,
    pub ami_id: &'a str,
    pub vars: &'a BTreeMap<String, String>,
}

/// What the flavors read of their node group, taken from it by the caller: the node group (`model`) holds the
/// flavor's settings, so the flavors do not name it back.
#[derive(Debug, Clone, Copy)]
pub struct GroupFacts<'a> {
    pub name: &'a str,
    pub instance_type: &'a str,
    pub instance_type_info: Option<InstanceTypeInfo>,
    pub lifecycle: Lifecycle,
}

impl GenerateInput<'_> {
    pub fn render(&self, text: &str) -> Result<String, String> {
        super::template::render(text, self.vars)
    }

    pub fn render_map(&self, m: &BTreeMap<String, String>) -> Result<BTreeMap<String, String>, String> {
        m.iter().map(|(k, v)| Ok((k.clone(), self.render(v)?))).collect()
    }

    pub fn render_list(&self, l: &[String]) -> Result<Vec<String>, String> {
        l.iter().map(|t| self.render(t)).collect()
    }
}

/// maxPods for the group's instance type by the ENI formula (what EKS and Karpenter compute), from the ENI table
/// or the group's `instanceTypeInfo`.
pub fn eni_max_pods(group: &GroupFacts<'_>, flavor: &str) -> Result<u32, String> {
    eni_limits(group, flavor).map(|l| l.max_pods())
}

/// The group's instance type's ENI limits, from the ENI table or the group's `instanceTypeInfo`.
pub fn eni_limits(group: &GroupFacts<'_>, flavor: &str) -> Result<crate::eks::max_pods::EniLimits, String> {
    crate::eks::max_pods::limits(group.instance_type)
        .or_else(|| {
            group.instance_type_info.map(|i| crate::eks::max_pods::EniLimits {
                enis: i.maximum_network_interfaces,
                ipv4_per_eni: i.ipv4_addresses_per_interface,
            })
        })
        .ok_or_else(|| {
            format!(
                "{flavor}: instance type {} is not in the ENI table; set maxPods or instanceTypeInfo",
                group.instance_type
            )
        })
}

/// One user-data flavor, as a scenario names it.
pub trait Flavor: std::fmt::Debug + Send + Sync {
    /// Every text in its spec that may hold placeholders (checked when the scenario loads).
    fn texts(&self) -> Vec<String>;
    /// What its spec needs beyond its types, checked when the scenario loads.
    fn check(&self) -> Result<(), String> {
        Ok(())
    }
    /// The user data it writes for one node.
    fn generate(&self, input: &GenerateInput<'_>) -> Result<Generated, String>;
    /// Does it write AL2023 user data (NodeConfig parts that nodeadm runs)?
    fn nodeadm(&self) -> bool {
        false
    }
    /// The CloudFormation stack (and resource) that launched the group, when the flavor is a template's.
    fn stack(&self) -> Option<(String, String)> {
        None
    }
}

/// A flavor's spec type: what it is called under `userData`.
pub trait FlavorSpec: Flavor + serde::de::DeserializeOwned + schemars::JsonSchema + 'static {
    const KEY: &'static str;
}

/// The flavor a node group's `userData` names, with its key there.
#[derive(Debug, Clone)]
pub struct Generator {
    key: &'static str,
    flavor: Arc<dyn Flavor>,
}

impl Generator {
    fn of<F: FlavorSpec>(flavor: F) -> Self {
        Self {
            key: F::KEY,
            flavor: Arc::new(flavor),
        }
    }

    /// Its key under `userData`.
    pub fn key(&self) -> &'static str {
        self.key
    }
}

impl std::ops::Deref for Generator {
    type Target = dyn Flavor;
    fn deref(&self) -> &Self::Target {
        self.flavor.as_ref()
    }
}

/// The registry: one line per flavor (its module and spec type). It gives the keys, the typed reading of each
/// flavor's spec and their schemas.
macro_rules! registry {
    ($($module:ident :: $spec:ident),* $(,)?) => {
        $(pub mod $module;)*

        /// Every flavor's key, in the registry's order.
        pub const KEYS: &[&str] = &[$(<$module::$spec as FlavorSpec>::KEY),*];

        /// Reads the flavor called `key` from the map's next value, typed (so an error in it carries its own
        /// line); `None` when no flavor has that key.
        pub(crate) fn next_flavor<'de, A: serde::de::MapAccess<'de>>(
            key: &str,
            map: &mut A,
        ) -> Option<Result<Generator, A::Error>> {
            $(
                if key == <$module::$spec as FlavorSpec>::KEY {
                    return Some(map.next_value::<$module::$spec>().map(Generator::of));
                }
            )*
            None
        }

        /// Each flavor's key and schema.
        pub(crate) fn schemas(generator: &mut schemars::SchemaGenerator) -> Vec<(&'static str, schemars::Schema)> {
            vec![$((<$module::$spec as FlavorSpec>::KEY, generator.subschema_for::<$module::$spec>())),*]
        }
    };
}

registry! {
    eks_managed::EksManagedSpec,
    eksctl::EksctlSpec,
    nodeadm::NodeadmSpec,
    karpenter::KarpenterSpec,
    capa::CapaSpec,
    eks_managed_al2::EksManagedAl2Spec,
    cloud_formation_al2::CloudFormationAl2Spec,
    eksctl_al2::EksctlAl2Spec,
}

/// Every string in a YAML value (keys and values), for placeholder checks.
pub(super) fn collect_strings(v: &serde_yaml_ng::Value, out: &mut Vec<String>) {
    use serde_yaml_ng::Value;
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Sequence(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Mapping(m) => m.iter().for_each(|(k, v)| {
            collect_strings(k, out);
            collect_strings(v, out);
        }),
        Value::Tagged(t) => collect_strings(&t.value, out),
        _ => {}
    }
}
