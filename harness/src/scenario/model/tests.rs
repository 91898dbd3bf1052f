use super::*;

#[test]
fn hop_limits_are_ec2s_range() {
    let text =
        |n: &str| format!("nodes:\n  - name: a\n    imds:\n      hopLimit: {n}\n    bootstrap:\n      args: [x]\n");
    let load = |n: &str| crate::scenario::load::parse(&text(n), &crate::paths::workspace_root().join("t.yaml"));
    let s = load("1").unwrap();
    assert_eq!(s.nodes[0].imds.hop_limit, Some(1));
    for bad in ["0", "65", "300", "-1"] {
        let e = load(bad).unwrap_err().to_string();
        assert!(e.contains("t.yaml:4:"), "{bad}: {e}");
    }
    assert!(load("0").unwrap_err().to_string().contains("EC2 takes 1 to 64"));
}

#[test]
fn version_ranges() {
    let v: VersionSupport = serde_yaml_ng::from_str("{ min: \"1.35\", reason: the flag was removed in 1.35 }").unwrap();
    assert_eq!(v.unsupported("v1.36.3"), None);
    assert_eq!(v.unsupported("v1.35.0"), None);
    let why = v.unsupported("v1.34.4").unwrap();
    assert!(why.contains("1.35 to any") && why.contains("removed in 1.35"), "{why}");
    let max: VersionSupport = serde_yaml_ng::from_str("{ max: v1.34.9, reason: r }").unwrap();
    assert!(max.unsupported("v1.35.1").is_some() && max.unsupported("v1.34.4").is_none());
    assert!(serde_yaml_ng::from_str::<VersionSupport>("{ min: latest, reason: r }").is_err());
    assert!(serde_yaml_ng::from_str::<VersionSupport>("{ min: \"1.35\" }").is_err());
}
