//! A provider as a scenario file names it (`cluster.providers`): one of the registered names (`cluster::REGISTRY`),
//! refused with its line otherwise.
use serde::{Deserialize, Deserializer};

pub use crate::cluster::Provider;

/// In the schema: one of the registered names.
impl schemars::JsonSchema for Provider {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Provider".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = crate::cluster::REGISTRY.iter().map(|r| r.name).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

impl<'de> Deserialize<'de> for Provider {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Provider::parse(&name).ok_or_else(|| {
            let known: Vec<&str> = crate::cluster::REGISTRY.iter().map(|r| r.name).collect();
            serde::de::Error::custom(format!("unknown provider '{name}' (known: {})", known.join(", ")))
        })
    }
}
