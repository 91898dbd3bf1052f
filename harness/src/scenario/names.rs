//! Names a scenario gives that become names elsewhere: a node group's name is part of container names, host
//! names and artifact paths; an expected node name is a Kubernetes object name (a DNS subdomain) and an
//! artifact directory. Checked at load so `../../x` or `/etc` can never become a path.
use std::collections::BTreeMap;

/// A DNS-1123 label: 1–63 of `a-z`, `0-9`, `-`, starting and ending alphanumeric.
pub fn dns_label(s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > 63 {
        return Err(format!("'{s}' must be 1 to 63 characters"));
    }
    let ok = s
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    let ends = |b: Option<u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if !ok || !ends(s.bytes().next()) || !ends(s.bytes().last()) {
        return Err(format!(
            "'{s}' may hold only lowercase letters, digits and '-', and must start and end with a letter or digit"
        ));
    }
    Ok(())
}

/// A DNS-1123 subdomain (what Kubernetes requires of a Node's name): dot-separated labels, at most 253 in all.
pub fn dns_subdomain(s: &str) -> Result<(), String> {
    if s.len() > 253 {
        return Err(format!("'{s}' is longer than 253 characters"));
    }
    s.split('.')
        .try_for_each(dns_label)
        .map_err(|e| format!("'{s}' is not a DNS subdomain: {e}"))
}

/// A label as Kubernetes takes one: a key `[prefix/]name` (the prefix a DNS subdomain, the name 1–63 of
/// alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric) and a value of the name's form or empty.
pub fn label(key: &str, value: &str) -> Result<(), String> {
    let name_part = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
            && s.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
    };
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if !name_part(name) || prefix.is_some_and(|p| dns_subdomain(p).is_err()) {
        return Err(format!(
            "label key '{key}' is not `[prefix/]name` (a DNS subdomain prefix; a name of 1 to 63 letters, digits, \
             '-', '_', '.', starting and ending with a letter or digit)"
        ));
    }
    if !value.is_empty() && !name_part(value) {
        return Err(format!(
            "label value '{value}' of '{key}' must be empty or 1 to 63 letters, digits, '-', '_', '.', starting and \
             ending with a letter or digit"
        ));
    }
    Ok(())
}

/// A node group's name: a label short enough to take `-<index>` and still be one (at most 56).
pub fn node_group(name: &str) -> Result<(), String> {
    dns_label(name).map_err(|e| format!("node group name {e}"))?;
    if name.len() > 56 {
        return Err(format!("node group name '{name}' is longer than 56 characters"));
    }
    Ok(())
}

/// An expected node name, placeholders and all: rendered with a sample value for each placeholder (the run's
/// values are alphanumeric, dashes and dots), it must be a DNS subdomain.
pub fn node_name(template: &str) -> Result<(), String> {
    let sample: BTreeMap<String, String> = super::template::KNOWN
        .iter()
        .map(|k| (k.to_string(), "a0".to_string()))
        .collect();
    let rendered = super::template::render(template, &sample)?;
    dns_subdomain(&rendered).map_err(|e| format!("expect.nodeName: {e}"))
}

/// An EKS cluster name as EKS accepts it: 1 to 100 letters, digits, `-` and `_`, starting with a letter or digit.
pub fn eks_cluster(name: &str) -> Result<(), String> {
    let ok = (1..=100).contains(&name.len())
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cluster.name '{}' is not an EKS cluster name (1 to 100 letters, digits, '-' and '_', starting with a letter or digit)",
            name.escape_debug()
        ))
    }
}

/// An AWS region's form: lowercase words and a number joined by `-` (`us-west-2`, `us-gov-west-1`).
pub fn region(region: &str) -> Result<(), String> {
    let parts: Vec<&str> = region.split('-').collect();
    let ok = region.len() <= 32
        && parts.len() >= 3
        && parts[..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
        && parts
            .last()
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cluster.region '{}' is not a region (e.g. us-west-2)",
            region.escape_debug()
        ))
    }
}

/// Two scenario files of one name would write one report folder and one trial name: refused, naming both.
pub fn unique_scenarios<'a>(
    scenarios: impl IntoIterator<Item = (&'a std::path::Path, &'a super::Scenario)>,
) -> crate::error::Result<()> {
    let mut seen: BTreeMap<&str, &std::path::Path> = BTreeMap::new();
    for (file, s) in scenarios {
        if let Some(first) = seen.insert(s.name.as_str(), file) {
            if first != file {
                return Err(crate::error::Error::ScenarioInvalid {
                    file: file.to_path_buf(),
                    message: format!(
                        "scenario name '{}' is also {}'s: scenarios need names of their own (rename a file)",
                        s.name,
                        first.display()
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod cluster_tests {
    #[test]
    fn cluster_names_and_regions_cannot_carry_a_path() {
        for ok in ["demo", "prod_eks-1", "A1"] {
            assert!(super::eks_cluster(ok).is_ok(), "{ok}");
        }
        for bad in ["", "/tmp/x", "../x", "-x", "a.b", "a b", &"x".repeat(101)] {
            assert!(super::eks_cluster(bad).is_err(), "{bad}");
        }
        for ok in ["us-west-2", "us-gov-west-1", "ap-southeast-4"] {
            assert!(super::region(ok).is_ok(), "{ok}");
        }
        for bad in ["", "us", "us-west", "/tmp/x", "us-west-2/..", "US-WEST-2", "us--2"] {
            assert!(super::region(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_scenarios_of_one_name_are_refused() {
        let yaml = "nodes:\n  - name: a\n    bootstrap:\n      args: [\"x\"]\n";
        let root = crate::paths::workspace_root();
        let (fa, fb) = (root.join("one/basic.yaml"), root.join("two/basic.yaml"));
        let a = crate::scenario::load::parse(yaml, &fa).unwrap();
        let b = crate::scenario::load::parse(yaml, &fb).unwrap();
        let err = unique_scenarios([(fa.as_path(), &a), (fb.as_path(), &b)])
            .unwrap_err()
            .to_string();
        assert!(err.contains("one/basic.yaml") && err.contains("'basic'"), "{err}");
        assert!(unique_scenarios([(fa.as_path(), &a)]).is_ok());
        // The bundled scenarios have names of their own.
        let files = crate::scenario::discover(&[root.join("scenarios")]).unwrap();
        let loaded: Vec<_> = files
            .iter()
            .map(|f| crate::scenario::load_file(f, &Default::default()).unwrap())
            .collect();
        unique_scenarios(files.iter().map(|f| f.as_path()).zip(loaded.iter())).unwrap();
    }

    #[test]
    fn node_names_are_dns_subdomains() {
        for ok in [
            "renamed-node",
            "{{instance.id}}",
            "ip-10-0-0-1.ec2.internal",
            "{{instance.privateDnsName}}",
        ] {
            assert!(node_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "../../x",
            "/etc/passwd",
            "Upper",
            "a..b",
            "-a",
            "a_b",
            "with space",
            &"a".repeat(254),
        ] {
            assert!(node_name(bad).is_err(), "{bad}");
        }
        assert!(node_group("workers").is_ok());
        for bad in ["Workers", "my group", "a/b", "..", &"a".repeat(57)] {
            assert!(node_group(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn labels_are_checked_as_kubernetes_checks_them() {
        assert!(label("eks.amazonaws.com/nodegroup", "workers").is_ok());
        assert!(label("app-pool", "").is_ok());
        assert!(label("a/b/c", "x").unwrap_err().contains("label key 'a/b/c'"));
        assert!(label("Bad_Prefix/x", "y").is_err());
        assert!(label("x", "-y").unwrap_err().contains("label value '-y'"));
        assert!(label(&"k".repeat(64), "v").is_err());
    }
}
