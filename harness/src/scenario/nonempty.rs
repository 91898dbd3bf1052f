//! Texts a scenario looks for (evidence, a file's `contains`): never empty, since an empty text is found in
//! anything and the check would prove nothing. Refused as the YAML is read, so the error carries its line.
use serde::{Deserialize, Deserializer};

/// A text to look for: never empty (an empty one is found in anything and proves nothing).
pub fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Err(serde::de::Error::custom(
            "an empty text is found in anything: say what to look for",
        ));
    }
    Ok(s)
}

/// Texts to look for, none empty.
pub fn texts<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v = Vec::<String>::deserialize(d)?;
    if v.iter().any(String::is_empty) {
        return Err(serde::de::Error::custom(
            "an empty text is found in anything: say what to look for",
        ));
    }
    Ok(v)
}
