//! Durations in scenario files, written like `60s`, `2m`, `1500ms` (humantime).
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// Durations written like `60s`, `2m`, `1500ms`.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s)
        .map_err(|e| serde::de::Error::custom(format!("'{s}' is not a duration like 60s: {e}")))
}

/// An optional duration (absent: `None`).
pub fn opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    duration(d).map(Some)
}
