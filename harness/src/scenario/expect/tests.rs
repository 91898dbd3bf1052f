use super::*;

/// Evidence that renders to nothing would match every line: refused, naming what was written.
#[test]
fn evidence_empty_once_rendered_is_refused() {
    let e: Expect =
        serde_yaml_ng::from_str("evidence: [{ source: kubelet, contains: \"{{cluster.name}}\" }]\n").unwrap();
    let mut empty: BTreeMap<String, String> = super::super::template::KNOWN
        .iter()
        .map(|k| (k.to_string(), "x".to_string()))
        .collect();
    empty.insert("cluster.name".into(), String::new());
    let err = e.resolved(&empty).unwrap_err();
    assert!(
        err.contains("contains: {{cluster.name}}") && err.contains("empty"),
        "{err}"
    );
    let mut named = empty.clone();
    named.insert("cluster.name".into(), "demo".into());
    assert_eq!(e.resolved(&named).unwrap().evidence[0].contains, "demo");
}

/// Every value a check compares is filled in once, from the node's values; the rest stays as written.
#[test]
fn a_nodes_expectation_is_resolved_once_with_its_values() {
    let e: Expect = serde_yaml_ng::from_str(
        r#"
nodeName: "{{instance.privateDnsName}}"
labels: { id: "{{instance.id}}" }
clusterDNS: ["{{cluster.dnsIp}}"]
evidence: [{ source: kubelet, contains: "node {{instance.id}}" }]
identity: { username: "system:node:{{instance.privateDnsName}}", groups: [system:nodes] }
files: [{ path: /etc/x, values: { a: "{{instance.az}}", n: 3 }, contains: ["{{cluster.name}}"] }]
within: 90s
"#,
    )
    .unwrap();
    let vars: BTreeMap<String, String> = [
        ("instance.privateDnsName", "ip-10-0-0-1.ec2.internal"),
        ("instance.id", "i-0abc"),
        ("instance.az", "us-east-1a"),
        ("cluster.dnsIp", "10.100.0.10"),
        ("cluster.name", "demo"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let r = e.resolved(&vars).unwrap();
    assert_eq!(r.node_name.as_deref(), Some("ip-10-0-0-1.ec2.internal"));
    assert_eq!(r.labels["id"], "i-0abc");
    assert_eq!(r.cluster_dns, Some(vec!["10.100.0.10".to_string()]));
    assert_eq!(r.evidence[0].contains, "node i-0abc");
    assert_eq!(
        r.identity.as_ref().and_then(|i| i.username.as_deref()),
        Some("system:node:ip-10-0-0-1.ec2.internal")
    );
    assert_eq!(r.files[0].values["a"], serde_yaml_ng::Value::from("us-east-1a"));
    assert_eq!(r.files[0].values["n"], serde_yaml_ng::Value::from(3));
    assert_eq!(r.files[0].contains, ["demo"]);
    assert_eq!(
        r.provider_id.as_deref(),
        Some("aws:///us-east-1a/i-0abc"),
        "the default, resolved"
    );
    assert_eq!(r.within, e.within);
    // A value the run did not provide is an error naming it.
    assert!(e
        .resolved(&BTreeMap::new())
        .unwrap_err()
        .contains("instance.privateDnsName"));
}
