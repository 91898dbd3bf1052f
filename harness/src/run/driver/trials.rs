//! How scenarios become test trials: one per scenario and provider, named `provider/v1.MINOR/scenario` so that
//! `cargo test -- k3s/` or `cargo nextest run -E 'test(/kind\//)'` selects a provider, and `.../v1.35/...` a
//! version.
use crate::cluster::Availability;
use crate::scenario::model::{Provider, Scenario};

/// Limits the providers trials are made for (comma-separated, e.g. `local,k3s`); default: every provider.
pub const ENV_PROVIDERS: &str = crate::settings::var::PROVIDERS;
/// Providers that must run (comma-separated): their trials fetch what is missing at run time, and fail rather
/// than skip when they cannot run. CI sets it to its cell's provider.
pub const ENV_REQUIRE: &str = crate::settings::var::REQUIRE_PROVIDERS;

/// What a trial is, decided when trials are listed, so `--list` and nextest already see a skip as a skip.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    Run,
    /// Listed as ignored, with the reason.
    Ignore(String),
    /// A required provider that cannot run: a failing trial that says why.
    Fail(String),
}

/// The plan for a trial of `provider` on a Kubernetes version the scenario may not support (`unsupported`),
/// given the provider's list-time `availability` and whether it is `required`.
pub fn plan(provider: Provider, unsupported: Option<String>, availability: &Availability, required: bool) -> Plan {
    let p = provider.as_str();
    if let Some(reason) = unsupported {
        return Plan::Ignore(reason);
    }
    match (availability, required) {
        (Availability::Ready, _) | (Availability::Fetchable(_), true) => Plan::Run,
        (Availability::Fetchable(what), false) => Plan::Ignore(format!(
            "provider {p}: {what}; trials fetch or build what is missing only for providers in {ENV_REQUIRE} (e.g. {ENV_REQUIRE}={p})"
        )),
        (Availability::Unavailable(why), true) => Plan::Fail(format!(
            "provider {p} is required ({ENV_REQUIRE}) but cannot run here: {why}"
        )),
        (Availability::Unavailable(why), false) => Plan::Ignore(format!("provider {p} cannot run here: {why}")),
    }
}

/// The scenarios named more than once among `names` (a run's scenarios, one per Kubernetes version it takes
/// them on): their reports say which version ([`crate::run::trial::Trial::report_name`]).
pub fn on_several_versions<'a>(names: impl IntoIterator<Item = &'a str>) -> std::collections::BTreeSet<String> {
    let mut count = std::collections::BTreeMap::new();
    for n in names {
        *count.entry(n).or_insert(0usize) += 1;
    }
    count
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(name, _)| name.to_string())
        .collect()
}

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

/// The providers enabled by [`ENV_PROVIDERS`] (its value given here), or every one.
pub fn enabled(value: Option<&str>) -> Result<Vec<Provider>, String> {
    match value.filter(|v| !v.trim().is_empty()) {
        None => Ok(Provider::all()),
        Some(v) => parse_list(ENV_PROVIDERS, v),
    }
}

/// The providers [`ENV_REQUIRE`] (its value given here) requires, or none; each must be enabled.
pub fn required(value: Option<&str>, enabled: &[Provider]) -> Result<Vec<Provider>, String> {
    let required = match value.filter(|v| !v.trim().is_empty()) {
        None => Vec::new(),
        Some(v) => parse_list(ENV_REQUIRE, v)?,
    };
    match required.iter().find(|p| !enabled.contains(p)) {
        Some(p) => Err(format!(
            "{ENV_REQUIRE} requires {} but {ENV_PROVIDERS} does not enable it",
            p.as_str()
        )),
        None => Ok(required),
    }
}

fn parse_list(var: &str, value: &str) -> Result<Vec<Provider>, String> {
    value
        .split(',')
        .map(|p| {
            Provider::parse(p)
                .ok_or_else(|| format!("{var}: unknown provider '{}' (known: local, k3s, kind)", p.trim()))
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
        crate::scenario::load::parse(yaml, std::path::Path::new("scenarios/x.yaml")).unwrap()
    }

    #[test]
    fn scenarios_taken_more_than_once_are_on_several_versions() {
        let several = on_several_versions(["basic", "iam", "basic", "pinned"]);
        assert_eq!(several.into_iter().collect::<Vec<_>>(), ["basic"]);
    }

    #[test]
    fn names_carry_provider_and_minor_version() {
        assert_eq!(name(Provider::LOCAL, "v1.36.3", "basic"), "local/v1.36/basic");
        assert_eq!(name(Provider::K3S, "v1.35.4", "iam-join"), "k3s/v1.35/iam-join");
        assert_eq!(minor("weird"), "weird");
    }

    #[test]
    fn enabled_providers_come_from_the_environment_value() {
        assert_eq!(enabled(None).unwrap(), Provider::all());
        assert_eq!(enabled(Some("")).unwrap(), Provider::all());
        assert_eq!(
            enabled(Some("k3s, local")).unwrap(),
            vec![Provider::K3S, Provider::LOCAL]
        );
        assert!(enabled(Some("local,minikube")).unwrap_err().contains("minikube"));
    }

    #[test]
    fn required_providers_must_be_known_and_enabled() {
        let all = Provider::all();
        assert_eq!(required(None, &all).unwrap(), vec![]);
        assert_eq!(required(Some(" "), &all).unwrap(), vec![]);
        assert_eq!(
            required(Some("local,kind"), &all).unwrap(),
            vec![Provider::LOCAL, Provider::KIND]
        );
        assert!(required(Some("minikube"), &all)
            .unwrap_err()
            .contains(&format!("{ENV_REQUIRE}: unknown provider 'minikube'")));
        let err = required(Some("kind"), &[Provider::LOCAL]).unwrap_err();
        assert!(
            err.contains(&format!("requires kind but {ENV_PROVIDERS} does not enable it")),
            "{err}"
        );
    }

    /// The list-time decision, for every availability and both answers to "required?".
    #[test]
    fn plans_never_turn_a_skip_into_a_pass() {
        let ready = Availability::Ready;
        let fetch = Availability::Fetchable("image x is not present locally".into());
        let gone = Availability::Unavailable("image x cannot be pulled".into());
        assert_eq!(plan(Provider::K3S, None, &ready, false), Plan::Run);
        assert_eq!(
            plan(Provider::K3S, None, &fetch, true),
            Plan::Run,
            "required: fetched at run time"
        );
        let Plan::Ignore(why) = plan(Provider::K3S, None, &fetch, false) else {
            panic!("absent and not required is ignored");
        };
        assert!(
            why.contains("image x is not present locally") && why.contains(&format!("{ENV_REQUIRE}=k3s")),
            "{why}"
        );
        assert_eq!(
            plan(Provider::K3S, None, &gone, false),
            Plan::Ignore("provider k3s cannot run here: image x cannot be pulled".into())
        );
        assert_eq!(
            plan(Provider::KIND, None, &gone, true),
            Plan::Fail(format!(
                "provider kind is required ({ENV_REQUIRE}) but cannot run here: image x cannot be pulled"
            ))
        );
        // A version the scenario does not apply to is ignored whatever the provider's state.
        assert_eq!(
            plan(Provider::KIND, Some("needs 1.35".into()), &gone, true),
            Plan::Ignore("needs 1.35".into())
        );
    }

    #[test]
    fn a_scenario_may_restrict_its_providers() {
        let all = scenario("nodes:\n  - name: a\n    bootstrap: {}\n");
        assert_eq!(providers_for(&all, &Provider::all()), Provider::all());
        let local = scenario("cluster: { providers: [local] }\nnodes:\n  - name: a\n    bootstrap: {}\n");
        assert_eq!(providers_for(&local, &Provider::all()), vec![Provider::LOCAL]);
        assert!(providers_for(&local, &[Provider::KIND]).is_empty());
    }

    /// What `cargo test -- <filter>` and nextest's `test(/.../)` match: substrings of these names.
    #[test]
    fn names_filter_by_provider_and_version() {
        let names: Vec<String> = Provider::all()
            .iter()
            .flat_map(|p| ["v1.35.4", "v1.36.3"].map(|v| name(*p, v, "basic")))
            .collect();
        let k3s: Vec<_> = names.iter().filter(|n| n.starts_with("k3s/")).collect();
        assert_eq!(k3s, ["k3s/v1.35/basic", "k3s/v1.36/basic"]);
        assert_eq!(names.iter().filter(|n| n.contains("/v1.35/")).count(), 3);
    }
}
