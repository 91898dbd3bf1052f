//! What a node group says of its instances that the flavors read too (capacity type, ENI limits): kept below both
//! `model` and `flavors`, so a flavor can take them without using the model that holds its own settings.
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Lifecycle {
    #[default]
    OnDemand,
    Spot,
}

#[derive(Debug, Clone, Copy, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InstanceTypeInfo {
    /// `MaximumNetworkInterfaces`: how many ENIs the type takes (the ENI formula's max pods).
    pub maximum_network_interfaces: u32,
    /// `Ipv4AddressesPerInterface`: IPv4 addresses per ENI (the ENI formula's max pods).
    pub ipv4_addresses_per_interface: u32,
    /// `DefaultVCpus`, for a type nodejoin has no size of (Karpenter's `vcpus`, podsPerCore).
    #[serde(default)]
    pub vcpus: Option<u32>,
    /// `MemoryInfo.SizeInMiB`, for a type nodejoin has no size of (Karpenter's `memory_mib`).
    #[serde(default)]
    pub memory_mib: Option<u32>,
}
