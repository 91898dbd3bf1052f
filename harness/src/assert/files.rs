//! Checks on the files a bootstrap wrote, read from the real node after a real join: determinism across identical
//! nodes (after normalising what is meant to differ: instance id, addresses, names), idempotency of a re-run,
//! partial JSON/YAML values (`path.to.key = value`) and golden files, with unified diffs on mismatch.
use super::Check;
use std::collections::BTreeMap;

/// The files a bootstrap writes that determinism and idempotency compare (those present on the node).
pub const BOOTSTRAP_OUTPUTS: &[&str] = &[
    "/etc/kubernetes/kubelet/kubelet-config.json",
    "/etc/kubernetes/kubelet/config.json",
    "/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf",
    "/var/lib/kubelet/kubeconfig",
    "/etc/kubernetes/pki/ca.crt",
    "/etc/eks/kubelet/environment",
    "/etc/containerd/config.toml",
];

/// Directories whose every file is compared too (systemd drop-ins).
pub const BOOTSTRAP_OUTPUT_DIRS: &[&str] = &["/etc/systemd/system/kubelet.service.d"];

/// What identifies one node: each value is replaced by its placeholder before comparing.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub values: Vec<(String, &'static str)>,
}

impl Identity {
    /// Instance id, private IP (dotted and dashed, as in `ip-10-0-0-1`), private DNS name, MAC.
    pub fn of(instance_id: &str, private_ip: &str, private_dns_name: &str, mac: &str) -> Self {
        let mut values = vec![
            (private_dns_name.to_string(), "{{instance.privateDnsName}}"),
            (instance_id.to_string(), "{{instance.id}}"),
            (private_ip.to_string(), "{{instance.privateIp}}"),
            (
                format!("ip-{}", private_ip.replace('.', "-")),
                "ip-{{instance.privateIpDashed}}",
            ),
            (mac.to_string(), "{{instance.mac}}"),
        ];
        // Longest first, so a DNS name is replaced before the IP inside it.
        values.sort_by_key(|v| std::cmp::Reverse(v.0.len()));
        values.retain(|(v, _)| !v.is_empty());
        Identity { values }
    }

    /// One more value to replace (a cluster's endpoint, CA, token), keeping the longest-first order. Values
    /// shorter than 4 characters are left alone: they would match by accident.
    pub fn with(mut self, value: &str, placeholder: &'static str) -> Self {
        if value.len() >= 4 && !self.values.iter().any(|(v, _)| v == value) {
            self.values.push((value.to_string(), placeholder));
            self.values.sort_by_key(|v| std::cmp::Reverse(v.0.len()));
        }
        self
    }

    pub fn normalise(&self, text: &str) -> String {
        self.values
            .iter()
            .fold(text.to_string(), |t, (v, p)| t.replace(v.as_str(), p))
    }
}

/// A unified diff of `a` and `b`, labelled.
pub fn unified_diff(a: &str, b: &str, label_a: &str, label_b: &str) -> String {
    similar::TextDiff::from_lines(a, b)
        .unified_diff()
        .context_radius(2)
        .header(label_a, label_b)
        .to_string()
}

/// Compares each node's files (path → content, already normalised) with the first node's.
pub fn determinism(group: &str, nodes: &[(String, BTreeMap<String, String>)]) -> Check {
    let name = super::registry::DETERMINISTIC.on(group);
    let Some((first, reference)) = nodes.first() else {
        return Check::new(name, false, "two nodes or more", "no node");
    };
    let mut diffs = Vec::new();
    for (node, files) in &nodes[1..] {
        let paths: std::collections::BTreeSet<&String> = reference.keys().chain(files.keys()).collect();
        for p in paths {
            let a = reference.get(p).map(String::as_str);
            let b = files.get(p).map(String::as_str);
            if a != b {
                diffs.push(unified_diff(
                    a.unwrap_or(""),
                    b.unwrap_or(""),
                    &format!("{first}:{p}{}", if a.is_none() { " (absent)" } else { "" }),
                    &format!("{node}:{p}{}", if b.is_none() { " (absent)" } else { "" }),
                ));
            }
        }
    }
    // Every path any node wrote: zero means nothing was compared, which proves nothing.
    let compared = nodes
        .iter()
        .flat_map(|(_, files)| files.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    Check::new(
        name,
        nodes.len() >= 2 && compared > 0 && diffs.is_empty(),
        format!(
            "identical files on the {} nodes once instance id, addresses and names are normalised",
            nodes.len()
        ),
        if nodes.len() < 2 {
            "only one node: give the group count: 2 or more".to_string()
        } else if compared == 0 {
            format!(
                "0 files compared: none of the bootstrap's outputs ({} and {}/*) exists on any node",
                BOOTSTRAP_OUTPUTS.join(", "),
                BOOTSTRAP_OUTPUT_DIRS.join("/*, ")
            )
        } else if diffs.is_empty() {
            format!("{compared} files identical")
        } else {
            diffs.join("\n")
        },
    )
}

/// Compares a node's files before and after the bootstrap ran again.
pub fn idempotency(
    node: &str,
    exit_code: i64,
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> Check {
    let mut diffs = Vec::new();
    let paths: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    for p in paths {
        let (a, b) = (before.get(p), after.get(p));
        if a != b {
            diffs.push(unified_diff(
                a.map(String::as_str).unwrap_or(""),
                b.map(String::as_str).unwrap_or(""),
                &format!("{p} (first run)"),
                &format!("{p} (second run)"),
            ));
        }
    }
    // No file before or after: nothing was compared, so nothing is proven.
    let compared = before.len().max(after.len());
    let passed = exit_code == 0 && compared > 0 && diffs.is_empty();
    let mut actual = format!("second run exit {exit_code}");
    if compared == 0 {
        actual.push_str(", 0 files compared: none of the bootstrap's outputs exists on the node");
    } else if diffs.is_empty() {
        actual.push_str(&format!(", {} files unchanged", before.len()));
    } else {
        actual.push_str(&format!(":\n{}", diffs.join("\n")));
    }
    Check::new(
        super::registry::IDEMPOTENT.on(node),
        passed,
        "running the bootstrap again exits 0 and changes no file",
        actual,
    )
}

/// The value at a dotted path (`authentication.webhook.enabled`, `clusterDNS.0`) of a JSON or YAML document.
pub fn value_at<'a>(doc: &'a serde_yaml_ng::Value, path: &str) -> Option<&'a serde_yaml_ng::Value> {
    path.split('.').try_fold(doc, |v, key| match v {
        serde_yaml_ng::Value::Sequence(items) => key.parse::<usize>().ok().and_then(|i| items.get(i)),
        serde_yaml_ng::Value::Mapping(m) => m.get(key),
        _ => None,
    })
}

/// Partial checks: each `path = value` must hold in `content` (JSON or YAML).
pub fn values(
    node: &str,
    file: &str,
    content: Option<&str>,
    want: &BTreeMap<String, serde_yaml_ng::Value>,
) -> Vec<Check> {
    let doc = content.map(serde_yaml_ng::from_str::<serde_yaml_ng::Value>);
    want.iter()
        .map(|(path, expected)| {
            let name = super::registry::FILE.on_with(node, format!("{file} {path}"));
            let show = |v: &serde_yaml_ng::Value| serde_json::to_string(v).unwrap_or_else(|_| format!("{v:?}"));
            match &doc {
                None => Check::new(name, false, show(expected), "the file does not exist"),
                Some(Err(e)) => Check::new(name, false, show(expected), format!("not JSON or YAML: {e}")),
                Some(Ok(d)) => match value_at(d, path) {
                    Some(v) => Check::new(name, v == expected, show(expected), show(v)),
                    None => Check::new(name, false, show(expected), "no such key"),
                },
            }
        })
        .collect()
}

/// A golden file check: `content` (normalised) must equal `golden` (its placeholders already filled).
pub fn golden(node: &str, file: &str, content: Option<&str>, golden: &str, golden_path: &str) -> Check {
    let name = super::registry::FILE.on_with(node, format!("{file} matches {golden_path}"));
    match content {
        None => Check::new(name, false, "the file", "the file does not exist"),
        Some(c) if c == golden => Check::new(name, true, "identical", "identical"),
        Some(c) => Check::new(name, false, "identical", unified_diff(golden, c, golden_path, file)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn identity_is_normalised_longest_first() {
        let id = Identity::of("i-0abc", "10.0.1.5", "ip-10-0-1-5.eu-west-1.compute.internal", "02:aa");
        let text = "providerID: aws:///eu-west-1a/i-0abc\n--node-ip=10.0.1.5 --hostname-override=ip-10-0-1-5.eu-west-1.compute.internal ip-10-0-1-5 02:aa";
        assert_eq!(
            id.normalise(text),
            "providerID: aws:///eu-west-1a/{{instance.id}}\n--node-ip={{instance.privateIp}} --hostname-override={{instance.privateDnsName}} ip-{{instance.privateIpDashed}} {{instance.mac}}"
        );
    }

    #[test]
    fn identical_nodes_pass_and_a_timestamp_is_a_diff() {
        let a = files(&[("/k.json", "{\"maxPods\": 29}\n"), ("/d.conf", "x\n")]);
        let ok = determinism("g", &[("n1".into(), a.clone()), ("n2".into(), a.clone())]);
        assert!(ok.passed, "{}", ok.actual);
        let b = files(&[
            ("/k.json", "{\"maxPods\": 29}\n"),
            ("/d.conf", "x\n# at 1795390000.123\n"),
        ]);
        let bad = determinism("g", &[("n1".into(), a.clone()), ("n2".into(), b)]);
        assert!(!bad.passed);
        assert!(
            bad.actual.contains("--- n1:/d.conf") && bad.actual.contains("+# at 1795390000.123"),
            "{}",
            bad.actual
        );
        let missing = determinism(
            "g",
            &[
                ("n1".into(), a.clone()),
                ("n2".into(), files(&[("/k.json", "{\"maxPods\": 29}\n")])),
            ],
        );
        assert!(missing.actual.contains("(absent)"), "{}", missing.actual);
        assert!(!determinism("g", &[("n1".into(), a)]).passed, "one node proves nothing");
    }

    #[test]
    fn nothing_compared_is_a_failure() {
        let none = determinism("g", &[("n1".into(), files(&[])), ("n2".into(), files(&[]))]);
        assert!(!none.passed, "{}", none.actual);
        assert!(none.actual.starts_with("0 files compared"), "{}", none.actual);
        assert!(none.actual.contains("kubelet-config.json"), "{}", none.actual);
        // One node with a file and one without is a difference, not an empty comparison.
        let one = determinism("g", &[("n1".into(), files(&[("/k", "1")])), ("n2".into(), files(&[]))]);
        assert!(!one.passed && one.actual.contains("(absent)"), "{}", one.actual);
        let empty = idempotency("n", 0, &files(&[]), &files(&[]));
        assert!(!empty.passed, "{}", empty.actual);
        assert!(empty.actual.contains("0 files compared"), "{}", empty.actual);
    }

    #[test]
    fn idempotency_needs_success_and_no_change() {
        let a = files(&[("/k.json", "1\n")]);
        assert!(idempotency("n", 0, &a, &a).passed);
        assert!(!idempotency("n", 1, &a, &a).passed);
        let changed = idempotency("n", 0, &a, &files(&[("/k.json", "2\n")]));
        assert!(
            !changed.passed && changed.actual.contains("-1") && changed.actual.contains("+2"),
            "{}",
            changed.actual
        );
    }

    #[test]
    fn partial_values_in_json_and_yaml() {
        let json =
            r#"{"maxPods": 29, "clusterDNS": ["10.100.0.10"], "authentication": {"webhook": {"enabled": true}}}"#;
        let want: BTreeMap<String, serde_yaml_ng::Value> = serde_yaml_ng::from_str(
            "maxPods: 29\nclusterDNS.0: 10.100.0.10\nauthentication.webhook.enabled: true\nmissing.key: 1\n",
        )
        .unwrap();
        let checks = values("n", "/k.json", Some(json), &want);
        let by = |k: &str| checks.iter().find(|c| c.name.ends_with(k)).unwrap();
        assert!(by("maxPods").passed && by("clusterDNS.0").passed && by("enabled").passed);
        assert_eq!(by("missing.key").actual, "no such key");
        let yaml = "clusters:\n- cluster:\n    server: https://x:6443\n";
        let want: BTreeMap<String, serde_yaml_ng::Value> =
            BTreeMap::from([("clusters.0.cluster.server".into(), "https://x:6443".into())]);
        assert!(values("n", "kc", Some(yaml), &want)[0].passed);
        assert_eq!(values("n", "kc", None, &want)[0].actual, "the file does not exist");
    }

    #[test]
    fn golden_files_diff() {
        assert!(golden("n", "/f", Some("a\nb\n"), "a\nb\n", "g").passed);
        let c = golden("n", "/f", Some("a\nc\n"), "a\nb\n", "g");
        assert!(!c.passed && c.actual.contains("-b") && c.actual.contains("+c"));
    }
}
