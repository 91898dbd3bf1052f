//! `{{name}}` placeholders in scenario values, filled from the run (cluster endpoint, CA, instance id...).
use std::collections::BTreeMap;

/// Every placeholder a scenario may use (filled in by `run::scenario`).
pub const KNOWN: &[&str] = &[
    "cluster.name",
    "cluster.endpoint",
    "cluster.caBase64",
    "cluster.region",
    "cluster.serviceIpv4Cidr",
    "cluster.dnsIp",
    "bootstrapToken",
    "unrelatedCaBase64",
    "instance.id",
    "instance.privateDnsName",
    "instance.privateIp",
    "instance.az",
    "instance.type",
    "node.arch",
    // The boot id the Node's kubelet reports after a step that boots it again (`after`: a step's expectations only).
    "node.bootId",
    // The run's HTTPS proxy (`http://ADDRESS:PORT`, CONNECT only), for a node configured to use one.
    "proxy.url",
    // Which attempt of the scenario this is, from 1 (`nodejoin run --retries`), as nextest's NEXTEST_ATTEMPT:
    // how a scenario reproduces a fault that clears on a retry.
    "run.attempt",
];

/// The node's architecture as Kubernetes names it (`kubernetes.io/arch`): the host's, since node containers run
/// the host's binaries.
pub fn node_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

/// Checks `text` uses only known placeholders, so a typo fails when the scenario is loaded, not after a
/// control plane and containers were started.
pub fn check(text: &str) -> Result<(), String> {
    render(text, &empty_vars()).map(|_| ())
}

/// Every known placeholder with an empty value: for checks at load time, before the run knows the values.
pub fn empty_vars() -> BTreeMap<String, String> {
    KNOWN.iter().map(|k| (k.to_string(), String::new())).collect()
}

/// Replaces every `{{key}}` with its value; unknown keys are an error naming them.
pub fn render(text: &str, vars: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| format!("unclosed '{{{{' in '{text}'"))?;
        let key = after[..end].trim();
        let value = vars.get(key).ok_or_else(|| {
            format!(
                "unknown placeholder {{{{{key}}}}}; known: {}",
                vars.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })?;
        out.push_str(value);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

/// `value` with the placeholders of every string in it (keys included) filled in.
pub fn render_yaml(
    value: &serde_yaml_ng::Value,
    vars: &BTreeMap<String, String>,
) -> Result<serde_yaml_ng::Value, String> {
    use serde_yaml_ng::Value;
    Ok(match value {
        Value::String(s) => Value::String(render(s, vars)?),
        Value::Sequence(items) => {
            Value::Sequence(items.iter().map(|i| render_yaml(i, vars)).collect::<Result<_, _>>()?)
        }
        Value::Mapping(m) => Value::Mapping(
            m.iter()
                .map(|(k, v)| Ok((render_yaml(k, vars)?, render_yaml(v, vars)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_and_reports_unknown_keys() {
        let vars = BTreeMap::from([("cluster.name".to_string(), "demo".to_string())]);
        assert_eq!(render("--name {{cluster.name}}!", &vars).unwrap(), "--name demo!");
        assert_eq!(render("{{ cluster.name }}", &vars).unwrap(), "demo");
        assert_eq!(render("plain", &vars).unwrap(), "plain");
        assert!(render("{{nope}}", &vars).unwrap_err().contains("cluster.name"));
        assert!(render("{{cluster.name", &vars).is_err());
    }
}
