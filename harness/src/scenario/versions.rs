//! Kubernetes versions in the scenario format: a release (`v1.36.3`), a minor (`1.35`), each checked while
//! deserializing.
use serde::{Deserialize, Deserializer};

/// `1.35` or `v1.35.2` → (1, 35).
pub(crate) fn parse_minor(s: &str) -> Option<(u32, u32)> {
    let mut it = s.trim_start_matches('v').split('.');
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

pub(super) fn opt_minor<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(u32, u32)>, D::Error> {
    let s = String::deserialize(d)?;
    parse_minor(&s)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("'{s}' is not a Kubernetes minor version like 1.35")))
}

pub(super) fn opt_version<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = String::deserialize(d)?;
    let e = |_| serde::de::Error::custom(format!("kubeletVersion '{v}' must look like v1.34.4"));
    crate::assets::check_version(&v).map_err(e).map(|()| Some(v.clone()))
}

pub(super) fn version<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v = String::deserialize(d)?;
    crate::assets::check_version(&v)
        .map_err(|_| serde::de::Error::custom(format!("kubernetesVersion '{v}' must look like v1.36.3")))?;
    Ok(v)
}
