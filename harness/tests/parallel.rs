//! Scenarios run at once (`nodejoin run -j`) do not see each other: three scenarios, two of them on one shared
//! control plane and one IAM scenario on its own, run together; each one's report (nodes, checks, notes, calls,
//! the identities the API server's audit log showed) names only its own nodes and instances. The JSON-lines
//! events prove they overlapped in time, so the test cannot pass by running them one after another. Its JUnit
//! file cannot be written (a path under /proc): every scenario passes, and the run still exits 110, nextest's
//! WRITE_OUTPUT_ERROR (CI would otherwise read a missing report as nothing to show).
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

mod common;

const SCENARIOS: [&str; 3] = ["basic-bootstrap-token", "two-nodes", "iam-join"];

#[test]
fn scenarios_running_at_once_see_only_their_own_nodes_calls_and_audit_events() {
    let files: Vec<String> = SCENARIOS.iter().map(|s| format!("scenarios/{s}.yaml")).collect();
    let out = common::nodejoin()
        .args([
            "run",
            "--format",
            "json",
            "-j",
            "3",
            "--junit",
            "/proc/nodejoin-unwritable/junit.xml",
        ])
        .args(&files)
        .output()
        .expect("run nodejoin");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(110),
        "the JUnit file cannot be written:\n{stderr}\n{stdout}"
    );
    assert!(stderr.contains("a report could not be written"), "{stderr}");
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(events.iter().all(|e| e["formatVersion"] == 1), "{stdout}");
    let finished = events.iter().find(|e| e["event"] == "run_finished");
    assert_eq!(
        finished.map(|e| (e["passed"].clone(), e["failed"].clone())),
        Some((3.into(), 0.into())),
        "every scenario passed:\n{stdout}"
    );

    // They overlapped: every scenario started before any finished.
    let position = |kind: &str, name: &str| {
        events
            .iter()
            .position(|e| e["event"] == kind && e["scenario"] == name)
            .unwrap_or_else(|| panic!("no {kind} event for {name}"))
    };
    let last_start = SCENARIOS.iter().map(|s| position("scenario_started", s)).max();
    let first_finish = SCENARIOS.iter().map(|s| position("scenario_finished", s)).min();
    assert!(
        last_start < first_finish,
        "the scenarios did not run at once:\n{stdout}"
    );

    // Each scenario's own nodes and instances.
    let mut own: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    let mut reports: BTreeMap<&str, &Value> = BTreeMap::new();
    for s in SCENARIOS {
        let report = &events[position("scenario_finished", s)];
        assert_eq!(report["outcome"], "passed", "{s}: {report}");
        let nodes = report["nodes"].as_array().cloned().unwrap_or_default();
        assert!(!nodes.is_empty(), "{s}: no nodes in {report}");
        let ids = own.entry(s).or_default();
        for n in nodes {
            for key in ["node", "instanceId", "ip"] {
                ids.insert(n[key].as_str().unwrap_or_default().to_string());
            }
        }
        reports.insert(s, report);
    }
    assert_eq!(
        own["two-nodes"].len(),
        6,
        "two nodes, three names each: {:?}",
        own["two-nodes"]
    );

    for s in SCENARIOS {
        let text = reports[s].to_string();
        // Its checks are about its own nodes (or its groups) only.
        for c in reports[s]["checks"].as_array().cloned().unwrap_or_default() {
            let name = c["check"].as_str().unwrap_or_default();
            let owner = name.split('/').next().unwrap_or_default();
            assert!(
                own[s].contains(owner) || !own.values().any(|ids| ids.contains(owner)),
                "{s}: check {name} is about another scenario's node"
            );
        }
        // Nothing of another scenario's nodes anywhere in its report: calls, audit identities, notes.
        for (other, ids) in &own {
            if *other == s {
                continue;
            }
            for id in ids {
                assert!(
                    !text.contains(&format!("{id}\"")) && !text.contains(&format!("{id} ")),
                    "{s}'s report mentions {other}'s {id}: {text}"
                );
            }
        }
        // Its own calls are there: the count and the per-node note.
        assert!(reports[s]["calls"].as_u64().unwrap_or(0) > 0, "{s}: no calls recorded");
    }
    // The IAM scenario's identity came from the audit log of its API server, for its own node.
    let iam = reports["iam-join"].to_string();
    assert!(iam.contains("identity"), "iam-join has no identity check: {iam}");
}
