//! How scenarios become test trials: one per scenario and provider, named `provider/v1.MINOR/scenario` so that
//! `cargo test -- k3s/` or `cargo nextest run -E 'test(/^kind\//)'` selects a provider, and `.../v1.35/...` a
//! version.
use super::model::{Provider, Scenario};

/// Limits the providers trials are made for (comma-separated, e.g. `local,k3s`); default: every provider.
pub const ENV_PROVIDERS: &str = "NODEJOIN_PROVIDERS";

/// `v1.36.3` → `v1.36`.
pub fn minor(version: &str) -> String {
    let mut parts = version.splitn(3, '.');
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => format!("{major}.{minor}"),
        _ => version.to_string(),
    }
}

pub fn name(provider: Provider, version: &str, scenario: &str) -> String {
    format!("{}/{}/{scenario}", provider.as_str(), minor(version))
}

/// The providers enabled by `NODEJOIN_PROVIDERS` (its value given here), or every one.
pub fn enabled(value: Option<&str>) -> Result<Vec<Provider>, String> {
    let Some(v) = value.filter(|v| !v.trim().is_empty()) else {
        return Ok(Provider::ALL.to_vec());
    };
    v.split(',')
        .map(|p| {
            Provider::parse(p).ok_or_else(|| {
                format!(
                    "{ENV_PROVIDERS}: unknown provider '{}' (known: local, k3s, kind)",
                    p.trim()
                )
            })
        })
        .collect()
}

/// The providers `sc` runs on: the enabled ones it does not exclude.
pub fn providers_for(sc: &Scenario, enabled: &[Provider]) -> Vec<Provider> {
    enabled
        .iter()
        .copied()
        .filter(|p| sc.cluster.providers.is_empty() || sc.cluster.providers.contains(p))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(yaml: &str) -> Scenario {
        super::super::load::parse(yaml, std::path::Path::new("scenarios/x.yaml")).unwrap()
    }

    #[test]
    fn names_carry_provider_and_minor_version() {
        assert_eq!(name(Provider::Local, "v1.36.3", "basic"), "local/v1.36/basic");
        assert_eq!(name(Provider::K3s, "v1.35.4", "iam-join"), "k3s/v1.35/iam-join");
        assert_eq!(minor("weird"), "weird");
    }

    #[test]
    fn enabled_providers_come_from_the_environment_value() {
        assert_eq!(enabled(None).unwrap(), Provider::ALL.to_vec());
        assert_eq!(enabled(Some("")).unwrap(), Provider::ALL.to_vec());
        assert_eq!(
            enabled(Some("k3s, local")).unwrap(),
            vec![Provider::K3s, Provider::Local]
        );
        assert!(enabled(Some("local,minikube")).unwrap_err().contains("minikube"));
    }

    #[test]
    fn a_scenario_may_restrict_its_providers() {
        let all = scenario("nodes:\n  - name: a\n    bootstrap: {}\n");
        assert_eq!(providers_for(&all, &Provider::ALL), Provider::ALL.to_vec());
        let local = scenario("cluster: { providers: [local] }\nnodes:\n  - name: a\n    bootstrap: {}\n");
        assert_eq!(providers_for(&local, &Provider::ALL), vec![Provider::Local]);
        assert!(providers_for(&local, &[Provider::Kind]).is_empty());
    }

    /// What `cargo test -- <filter>` and nextest's `test(/.../)` match: substrings of these names.
    #[test]
    fn names_filter_by_provider_and_version() {
        let names: Vec<String> = Provider::ALL
            .iter()
            .flat_map(|p| ["v1.35.4", "v1.36.3"].map(|v| name(*p, v, "basic")))
            .collect();
        let k3s: Vec<_> = names.iter().filter(|n| n.starts_with("k3s/")).collect();
        assert_eq!(k3s, ["k3s/v1.35/basic", "k3s/v1.36/basic"]);
        assert_eq!(names.iter().filter(|n| n.contains("/v1.35/")).count(), 3);
    }
}
