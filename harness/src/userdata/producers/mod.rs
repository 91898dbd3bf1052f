//! AL2023 user data as each producer writes it in 2026, byte for byte where the bytes are known: EKS managed node
//! groups (`eks_managed`), eksctl (`eksctl`), Karpenter (`karpenter`), Cluster API's `NodeadmConfig` (`capa`). Each
//! module cites the producer's source it follows; none of it is the producer's code. The node's cloud-init and
//! nodeadm read what these write, so a framing quirk a producer has is kept, not tidied.
pub mod capa;
pub mod eks_managed;
pub mod eksctl;
pub mod karpenter;
pub mod karpenter_kubelet;

use std::collections::BTreeMap;

/// One part of a user's own user data (a launch template's, an EC2NodeClass's, a `preNodeadmCommands`), as the
/// producer receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UserPart {
    /// A NodeConfig document (YAML text).
    NodeConfig(String),
    /// A shell script.
    Shell(String),
}

impl UserPart {
    /// The part's MIME content type.
    pub fn content_type(&self) -> &'static str {
        match self {
            Self::NodeConfig(_) => "application/node.eks.aws",
            Self::Shell(_) => "text/x-shellscript; charset=\"us-ascii\"",
        }
    }

    pub fn text(&self) -> &str {
        match self {
            Self::NodeConfig(t) | Self::Shell(t) => t,
        }
    }
}

/// A taint as producers take it: `key=value:Effect` or `key:Effect` (kubelet's `--register-with-taints` form).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl Taint {
    /// Reads `key=value:Effect` or `key:Effect`; the effect must be one Kubernetes knows.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (kv, effect) = text
            .rsplit_once(':')
            .ok_or_else(|| format!("taint `{text}`: expected key=value:Effect or key:Effect"))?;
        if !matches!(effect, "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            return Err(format!(
                "taint `{text}`: the effect must be NoSchedule, PreferNoSchedule or NoExecute"
            ));
        }
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        if key.is_empty() {
            return Err(format!("taint `{text}`: the key is empty"));
        }
        Ok(Self {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        })
    }

    /// `key=value:Effect`, or `key:Effect` when the value is empty.
    pub fn flag_form(&self) -> String {
        if self.value.is_empty() {
            format!("{}:{}", self.key, self.effect)
        } else {
            format!("{}={}:{}", self.key, self.value, self.effect)
        }
    }

    /// A `corev1.Taint` as JSON (`value` left out when empty, as Go's `omitempty` does).
    pub fn to_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        m.insert("effect".into(), self.effect.clone().into());
        m.insert("key".into(), self.key.clone().into());
        if !self.value.is_empty() {
            m.insert("value".into(), self.value.clone().into());
        }
        serde_json::Value::Object(m)
    }
}

/// MIME with boundary `//` and LF line ends, each part one `Content-Type` header and its body followed by a line
/// end, as Go's `mime/multipart` writes it with every `\r` taken out (Karpenter's framing, and the form copies of
/// EKS's merged user data show).
pub fn lf_multipart<'a>(parts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<u8> {
    let mut out = String::from("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n");
    for (content_type, body) in parts {
        out.push_str(&format!("--//\nContent-Type: {content_type}\n\n{body}\n"));
    }
    out.push_str("--//--\n");
    out.into_bytes()
}

/// `k1=v1,k2=v2`, in the map's (sorted) order.
pub fn label_list(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// YAML as Go's `sigs.k8s.io/yaml` writes a JSON value: mapping keys sorted, block style, sequences not indented
/// under their key, empty mappings as `{}`.
pub fn sorted_yaml(value: &serde_json::Value) -> String {
    serde_yaml_ng::to_string(&sorted(value)).unwrap_or_default()
}

fn sorted(value: &serde_json::Value) -> serde_yaml_ng::Value {
    use serde_yaml_ng::Value as Y;
    match value {
        serde_json::Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = serde_yaml_ng::Mapping::new();
            for k in keys {
                out.insert(Y::String(k.clone()), sorted(&m[k]));
            }
            Y::Mapping(out)
        }
        serde_json::Value::Array(items) => Y::Sequence(items.iter().map(sorted).collect()),
        other => serde_yaml_ng::to_value(other).unwrap_or(Y::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taints_read_both_forms_and_refuse_unknown_effects() {
        let t = Taint::parse("dedicated=gpu:NoSchedule").unwrap();
        assert_eq!(
            (t.key.as_str(), t.value.as_str(), t.effect.as_str()),
            ("dedicated", "gpu", "NoSchedule")
        );
        assert_eq!(t.flag_form(), "dedicated=gpu:NoSchedule");
        let t = Taint::parse("karpenter.sh/unregistered:NoExecute").unwrap();
        assert_eq!(t.value, "");
        assert_eq!(t.flag_form(), "karpenter.sh/unregistered:NoExecute");
        assert_eq!(
            t.to_json(),
            serde_json::json!({"effect": "NoExecute", "key": "karpenter.sh/unregistered"})
        );
        assert!(Taint::parse("a=b:Sometimes").unwrap_err().contains("effect"));
        assert!(Taint::parse("nocolon").is_err());
        assert!(Taint::parse("=v:NoSchedule").is_err());
    }

    #[test]
    fn yaml_keys_are_sorted_and_sequences_sit_under_their_key() {
        let v = serde_json::json!({"spec": {"b": [1, 2], "a": {}, "c": "--x=\"y\""}});
        assert_eq!(sorted_yaml(&v), "spec:\n  a: {}\n  b:\n  - 1\n  - 2\n  c: --x=\"y\"\n");
    }
}
