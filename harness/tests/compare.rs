//! `nodejoin compare` end to end: the same bootstrap on both sides shows no difference (timings within the
//! threshold); the bundled one-flag variant (`--use-max-pods false`) shows that flag's effect on `/configz`, the
//! Node, the kubelet config file and the programs run (no ENI-table lookup), breaks the scenario's max-pods check,
//! and shows nothing else.
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Command;

const SCENARIO: &str = "scenarios/basic-bootstrap-token.yaml";

/// Runs `nodejoin compare ARGS --format json`: its exit code and the comparison.
fn compare(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nodejoin"))
        .current_dir(nodejoin::paths::workspace_root())
        .arg("compare")
        .args(args)
        .args(["--format", "json", SCENARIO])
        .output()
        .expect("run nodejoin");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n{stderr}"));
    (out.status.code(), v, stderr)
}

/// `(node, aspect, key)` of every difference.
fn keys(v: &Value) -> BTreeSet<(String, String, String)> {
    v["differences"]
        .as_array()
        .expect("differences")
        .iter()
        .map(|d| {
            (
                d["node"].as_str().unwrap_or("").to_string(),
                d["aspect"].as_str().unwrap_or("").to_string(),
                d["key"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn the_same_bootstrap_on_both_sides_shows_no_difference() {
    let script = "script:fixtures/bootstrap/bootstrap.sh";
    let (code, v, stderr) = compare(&["--base", script, "--head", script]);
    assert_eq!(code, Some(0), "{v:#}\n{stderr}");
    assert_eq!(v["compared"], serde_json::json!(["basic-bootstrap-token"]), "{v:#}");
    assert!(
        keys(&v).is_empty(),
        "differences between two runs of one bootstrap:\n{v:#}\n{stderr}"
    );
    assert!(v["breaks"].as_array().unwrap().is_empty());
}

#[test]
fn one_changed_flag_shows_its_effect_and_nothing_else() {
    let (code, v, stderr) = compare(&["--head", "overlay:fixtures/bootstrap-variants/use-max-pods-false"]);
    assert_eq!(
        code,
        Some(1),
        "the variant breaks capacity.pods, so the exit code says so:\n{v:#}\n{stderr}"
    );
    let k = |node: &str, aspect: &str, key: &str| (node.to_string(), aspect.to_string(), key.to_string());
    let expected: BTreeSet<_> = [
        k("worker-0", "node", "capacity.pods"),
        k("worker-0", "node", "allocatable.pods"),
        k("worker-0", "node", "allocatable.memory"),
        k("worker-0", "configz", "kubeletconfig.maxPods"),
        k("worker-0", "configz", "kubeletconfig.kubeReserved.memory"),
        k("worker-0", "files", "/etc/kubernetes/kubelet/kubelet-config.json"),
        // max-pods from the ENI table is an awk lookup the bootstrap no longer makes.
        k("worker-0", "programs", "awk"),
        k("", "outcome", "outcome"),
        k("", "checks", "worker-0/capacity.pods"),
    ]
    .into_iter()
    .collect();
    assert_eq!(keys(&v), expected, "{v:#}\n{stderr}");
    let diff = |key: &str| {
        v["differences"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["key"] == key)
            .cloned()
            .unwrap()
    };
    assert_eq!(diff("kubeletconfig.maxPods")["base"], "29");
    assert_eq!(diff("kubeletconfig.maxPods")["head"], "110");
    assert_eq!(diff("capacity.pods")["head"], "110");
    let breaks: BTreeSet<&str> = v["breaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        breaks,
        BTreeSet::from([
            "basic-bootstrap-token: outcome PASSED -> FAILED",
            "basic-bootstrap-token: worker-0/capacity.pods"
        ]),
        "{v:#}"
    );
}

#[test]
fn a_side_that_does_not_exist_or_applies_to_nothing_is_refused_before_anything_runs() {
    let root = nodejoin::paths::workspace_root();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_nodejoin"))
            .current_dir(&root)
            .arg("compare")
            .args(args)
            .output()
            .expect("run nodejoin");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["--head", "script:nope.sh", SCENARIO]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--head script:nope.sh") && err.contains("no such file") && err.contains("hint:"),
        "{err}"
    );
    let (code, err) = run(&[
        "--head",
        "user-data:fixtures/user-data/wrong-content-type.mime",
        SCENARIO,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("applies to none"), "{err}");
    assert!(!err.contains("[nodejoin] compare run"), "nothing started:\n{err}");
}
