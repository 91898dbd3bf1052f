//! The action's steps one at a time, against a stand-in `nodejoin` that records what it was given (its
//! arguments and the `NODEJOIN_*` variables): each matrix cell and attempt names its own artifact and rerun record,
//! a re-run attempt runs only what failed (from a record no link can plant), the compare step gets every axis the
//! run step gets, and no step sets a `NODEJOIN_*` variable nodejoin does not read.
use super::{action, sh, substitute};
use std::collections::BTreeMap;
use std::path::Path;

/// The step named `name` (its name up to the first parenthesis, as written).
fn step(name: &str) -> serde_yaml_ng::Value {
    action()["runs"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .cloned()
        .unwrap_or_else(|| panic!("no step {name}"))
}

/// The action's inputs at their defaults, with `set` over them.
pub fn inputs(set: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut inputs: BTreeMap<String, String> = action()["inputs"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().unwrap().to_string(),
                v["default"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for (k, v) in set {
        inputs.insert(k.to_string(), v.to_string());
    }
    inputs
}

/// Runs `step` in `dir` as a runner would (its `env:` filled in from `inputs` and `ctx`, a fresh GITHUB_OUTPUT,
/// `path` first on PATH); its exit code, output, and the outputs it wrote.
fn run_step(
    dir: &Path,
    step: &serde_yaml_ng::Value,
    inputs: &BTreeMap<String, String>,
    ctx: &BTreeMap<String, String>,
    path: Option<&Path>,
) -> (i32, String, BTreeMap<String, String>) {
    let output = dir.join("github-output");
    std::fs::write(&output, "").unwrap();
    let mut env = BTreeMap::from([
        ("GITHUB_OUTPUT".to_string(), output.display().to_string()),
        (
            "GITHUB_STEP_SUMMARY".to_string(),
            dir.join("summary").display().to_string(),
        ),
        ("RUNNER_TEMP".to_string(), dir.display().to_string()),
    ]);
    let mut search = std::env::var("PATH").unwrap_or_default();
    if let Some(p) = path {
        search = format!("{}:{search}", p.display());
    }
    env.insert("PATH".into(), search);
    for (k, v) in step["env"].as_mapping().into_iter().flatten() {
        env.insert(
            k.as_str().unwrap().into(),
            substitute(v.as_str().unwrap_or(""), inputs, ctx),
        );
    }
    let (code, out) = sh(dir, step["run"].as_str().unwrap(), &env);
    let outputs = std::fs::read_to_string(&output)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    (code, out, outputs)
}

fn ctx(dir: &Path, attempt: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("github.run_id".to_string(), "4711".to_string()),
        ("github.run_attempt".to_string(), attempt.to_string()),
        ("github.job".to_string(), "bootstrap".to_string()),
        ("steps.which.outputs.confined".to_string(), "false".to_string()),
        ("runner.temp".to_string(), dir.display().to_string()),
    ])
}

/// A stand-in `nodejoin` in `dir/bin`: logs its arguments and NODEJOIN_* variables to `dir/calls.log` (what it
/// saw of a rerun record too), and as `run` writes a record of its own.
fn stand_in(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = r#"#!/usr/bin/env bash
log="$STAND_IN_LOG"
{
  printf 'args:'; printf ' %s' "$@"; echo
  env | grep '^NODEJOIN_' | grep -v '^NODEJOIN_ACTION_' | sort
  if [ -f "$NODEJOIN_ARTIFACTS_DIR/last-run.json" ]; then echo "record: $(cat "$NODEJOIN_ARTIFACTS_DIR/last-run.json")"; fi
} >> "$log"
if [ "$1" = run ]; then
  echo '{"runId":"nj-this","failed":[],"passed":["local/v1.36/join"]}' > "$NODEJOIN_ARTIFACTS_DIR/last-run.json"
fi
"#;
    let file = bin.join("nodejoin");
    std::fs::write(&file, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn each_matrix_cell_and_attempt_names_its_own_artifact_and_record() {
    let tmp = tempfile::tempdir().unwrap();
    let cell = step("The matrix cell");
    let outputs = |set: &[(&str, &str)], attempt: &str| {
        let (code, out, o) = run_step(tmp.path(), &cell, &inputs(set), &ctx(tmp.path(), attempt), None);
        assert_eq!(code, 0, "{out}");
        o
    };
    let a = outputs(&[("containerd", "2.2"), ("partition", "count:1/2")], "1");
    let b = outputs(&[("containerd", "2.4"), ("partition", "count:1/2")], "1");
    let again = outputs(&[("containerd", "2.2"), ("partition", "count:1/2")], "1");
    let second = outputs(&[("containerd", "2.2"), ("partition", "count:1/2")], "2");
    let name = |o: &BTreeMap<String, String>| o["artifact-name"].clone();
    assert!(name(&a).starts_with("nodejoin-local-default-2.2-count-1of2-"), "{a:?}");
    assert!(
        name(&a).ends_with("-attempt1") && name(&second).ends_with("-attempt2"),
        "{a:?} {second:?}"
    );
    assert_ne!(name(&a), name(&b), "two cells, one artifact name");
    assert_eq!(name(&a), name(&again), "one cell, two names");
    assert_ne!(a["record-key"], b["record-key"]);
    assert_eq!(
        a["record-prefix"], second["record-prefix"],
        "a re-run finds the last attempt's record"
    );
    assert!(a["record-key"].starts_with(&a["record-prefix"]) && a["record-prefix"].contains("-4711-"));
    assert_eq!((a["rerun"].as_str(), second["rerun"].as_str()), ("false", "true"));
    let never = outputs(&[("rerun-failed", "false")], "3");
    assert_eq!(never["rerun"], "false");
    // A name given is kept; one GitHub would refuse fails the step, naming the input.
    assert_eq!(name(&outputs(&[("artifact-name", "mine")], "1")), "mine");
    let (code, out, _) = run_step(
        tmp.path(),
        &cell,
        &inputs(&[("artifact-name", "a/b")]),
        &ctx(tmp.path(), "1"),
        None,
    );
    assert!(code != 0 && out.contains("title=artifact-name"), "{out}");
}

#[test]
fn a_rerun_attempt_runs_only_what_failed_and_keeps_its_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = stand_in(dir);
    let run = step("Run the scenarios");
    let record = dir.join("nodejoin-record");
    std::fs::create_dir_all(&record).unwrap();
    let last = r#"{"runId":"nj-last","failed":["local/v1.36/join"],"passed":[]}"#;
    std::fs::write(record.join("last-run.json"), last).unwrap();
    let mut c = ctx(dir, "2");
    c.insert("steps.cell.outputs.rerun".into(), "true".into());
    let log = dir.join("calls.log");
    let go = |c: &BTreeMap<String, String>| {
        std::fs::write(&log, "").unwrap();
        let mut s = run.clone();
        s["env"]["STAND_IN_LOG"] = log.display().to_string().into();
        let (code, out, _) = run_step(dir, &s, &inputs(&[]), c, Some(&bin));
        assert_eq!(code, 0, "{out}");
        (std::fs::read_to_string(&log).unwrap(), out)
    };
    let (calls, out) = go(&c);
    assert!(
        calls.contains(" --rerun-failed") && calls.contains("record: {\"runId\":\"nj-last\""),
        "{calls}\n{out}"
    );
    assert!(out.contains("only the trials that failed"), "{out}");
    let kept = std::fs::read_to_string(record.join("last-run.json")).unwrap();
    assert!(
        kept.contains("nj-this"),
        "this attempt's record is kept for the next: {kept}"
    );
    // A record planted as a link is not taken: every trial runs.
    std::fs::remove_file(record.join("last-run.json")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", record.join("last-run.json")).unwrap();
    let (calls, out) = go(&c);
    assert!(
        !calls.contains("--rerun-failed") && out.contains("every trial runs"),
        "{calls}\n{out}"
    );
    // The first attempt runs everything.
    c.insert("steps.cell.outputs.rerun".into(), "false".into());
    let (calls, _) = go(&c);
    assert!(!calls.contains("--rerun-failed"), "{calls}");
}

#[test]
fn the_compare_step_gets_every_axis_the_run_step_gets() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let bin = stand_in(dir);
    let set = [
        ("compare-base", "git:HEAD~1"),
        ("kubernetes-version", "v1.35.4"),
        ("containerd", "2.4"),
        ("eks-ami", "amazon-eks-ami"),
        ("profile", "ci"),
        ("jobs", "3"),
        ("filter", "tag(al2023)"),
        ("partition", "hash:2/3"),
    ];
    let mut c = ctx(dir, "1");
    c.insert("steps.which.outputs.confined".into(), "true".into());
    let log = dir.join("calls.log");
    let mut seen = Vec::new();
    for name in ["Run the scenarios", "Compare with the base version"] {
        std::fs::write(&log, "").unwrap();
        let mut s = step(name);
        s["env"]["STAND_IN_LOG"] = log.display().to_string().into();
        let (code, out, _) = run_step(dir, &s, &inputs(&set), &c, Some(&bin));
        assert_eq!(code, 0, "{name}: {out}");
        seen.push(std::fs::read_to_string(&log).unwrap());
    }
    let [run, compare] = [&seen[0], &seen[1]];
    for want in [
        "NODEJOIN_K8S_VERSION=v1.35.4",
        "NODEJOIN_CONTAINERD_LINE=2.4",
        "NODEJOIN_EKS_AMI=amazon-eks-ami",
        "NODEJOIN_PROFILE=ci",
        "NODEJOIN_JOBS=3",
        "NODEJOIN_CONFINED=true",
        " -E tag(al2023)",
        " --partition hash:2/3",
        " --provider local",
    ] {
        assert!(run.contains(want), "the run step lacks {want}: {run}");
        assert!(compare.contains(want), "the compare step lacks {want}: {compare}");
    }
    assert!(compare.contains("args: compare --base git:HEAD~1"), "{compare}");
}

/// The summary links the uploaded artifact (where the timelines are) by the URL upload-artifact gave, and only
/// an https one.
#[test]
fn the_summary_links_the_artifact() {
    let tmp = tempfile::tempdir().unwrap();
    let link = step("Link the artifact");
    let summary = tmp.path().join("summary");
    for (url, want) in [
        (
            "https://github.com/acme/acme-ami/actions/runs/4711/artifacts/99",
            Some("Artifact [nodejoin-x](https://github.com/acme/acme-ami/actions/runs/4711/artifacts/99)"),
        ),
        ("javascript:alert(1)", None),
    ] {
        std::fs::write(&summary, "").unwrap();
        let mut c = ctx(tmp.path(), "1");
        c.insert("steps.upload.outputs.artifact-url".into(), url.into());
        c.insert("steps.cell.outputs.artifact-name".into(), "nodejoin-x".into());
        let (code, out, _) = run_step(tmp.path(), &link, &inputs(&[]), &c, None);
        assert_eq!(code, 0, "{out}");
        let text = std::fs::read_to_string(&summary).unwrap();
        match want {
            Some(w) => assert!(text.contains(w), "{text}"),
            None => assert!(text.is_empty(), "{text}"),
        }
    }
}

/// A `NODEJOIN_*` variable a step sets is one nodejoin reads (a settings row's, listed in `--help`), or the
/// action's own, named `NODEJOIN_ACTION_*`: none looks like a setting and does nothing.
#[test]
fn no_step_sets_a_variable_nodejoin_does_not_read() {
    let help = nodejoin::settings::help();
    for s in action()["runs"]["steps"].as_sequence().unwrap() {
        for (k, _) in s["env"].as_mapping().into_iter().flatten() {
            let k = k.as_str().unwrap();
            if k.starts_with("NODEJOIN_") && !k.starts_with("NODEJOIN_ACTION_") {
                assert!(
                    help.contains(k),
                    "step {:?} sets {k}, which nodejoin does not read",
                    s["name"].as_str()
                );
            }
        }
    }
}
