//! nodejoin from a user's repository (`tests/from_repo/`, copied to a temporary directory): four scenarios in
//! folders, tags, and a `.config/nodejoin.toml` whose `ci` profile retries once. Listed, filtered and sharded as
//! nextest does; run whole under GitHub Actions (annotations on the failing key's line, JUnit whose test cases
//! are the checks, read back by a JUnit reader, FLAKY in every reporter); its failures rerun; and run as two
//! shards in two processes, which must reach the verdicts the whole run reached. (`ci/nextest-skips.sh` holds
//! the partitions to cargo-nextest's own split of the same names.)
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

/// A copy of the sample repository; runs write their artifacts under it (`out/`, the `ci` profile's).
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = common::root().join("harness/tests/from_repo");
    copy(&from, dir.path());
    dir
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

/// `nodejoin ARGS` in `repo`, as a runner would run it: the variables that would outrank the repository's
/// profile removed (CI's own artifacts directory, retries, jobs), `envs` added. Exit code, stdout, stderr.
fn nodejoin(repo: &Path, args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let mut c = common::nodejoin();
    c.current_dir(repo).args(args);
    for k in [
        "NODEJOIN_ARTIFACTS_DIR",
        "NODEJOIN_RETRIES",
        "NODEJOIN_PROFILE",
        "NODEJOIN_JOBS",
        "GITHUB_ACTIONS",
    ] {
        c.env_remove(k);
    }
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().expect("run nodejoin");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn listed(repo: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec!["list", "nodejoin/scenarios", "--format", "json"];
    args.extend(extra);
    let (code, out, err) = nodejoin(repo, &args, &[]);
    assert_eq!(code, 0, "nodejoin {args:?}: {err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

const ALL: [&str; 4] = [
    "local/v1.36/wrong-label",
    "local/v1.36/first-attempt-fails",
    "local/v1.36/basic",
    "local/v1.36/max-pods",
];

#[test]
fn scenarios_in_folders_are_listed_filtered_and_sharded() {
    let repo = repository();
    let r = repo.path();
    assert_eq!(listed(r, &[]), ALL, "found in every folder, in path order");
    let (_, out, _) = nodejoin(r, &["list", "nodejoin/scenarios", "--format", "json"], &[]);
    let first: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(first[0]["file"], "nodejoin/scenarios/broken/wrong-label.yaml");
    assert_eq!(first[0]["tags"], serde_json::json!(["broken"]));
    assert_eq!(
        listed(r, &["-E", "tag(smoke)"]),
        ["local/v1.36/basic", "local/v1.36/max-pods"]
    );
    assert_eq!(
        listed(r, &["-E", "file(nodejoin/scenarios/flaky/*) | scenario(wrong-*)"]),
        ["local/v1.36/wrong-label", "local/v1.36/first-attempt-fails"]
    );
    assert_eq!(
        listed(r, &["-E", "tag(smoke)", "-E", "tag(flaky)"]).len(),
        3,
        "-E repeated: any"
    );
    for kind in ["count", "hash"] {
        let one = listed(r, &["--partition", &format!("{kind}:1/2")]);
        let two = listed(r, &["--partition", &format!("{kind}:2/2")]);
        assert!(
            one.iter().all(|n| !two.contains(n)),
            "{kind}: {one:?} and {two:?} overlap"
        );
        let mut both: Vec<String> = one.into_iter().chain(two).collect();
        both.sort();
        let mut all: Vec<String> = ALL.iter().map(|s| s.to_string()).collect();
        all.sort();
        assert_eq!(both, all, "{kind}: the shards cover every trial");
    }
    // count deals in name order (basic, first-attempt-fails, max-pods, wrong-label): the first shard takes the
    // first and third.
    assert_eq!(
        listed(r, &["--partition", "count:1/2"]),
        ["local/v1.36/basic", "local/v1.36/max-pods"]
    );
    let (code, _, err) = nodejoin(r, &["list", "nodejoin/scenarios", "-E", "tag(smoke"], &[]);
    assert!(code == 94 && err.contains("')' expected at column"), "{err}");
    let (code, _, err) = nodejoin(r, &["list", "nodejoin/scenarios", "--profile", "nightly"], &[]);
    assert!(
        code == 96 && err.contains("no profile 'nightly' (it defines: ci, default, versions)"),
        "{err}"
    );
    // A profile's list of versions: a trial of every scenario on each; one that excludes a version is listed
    // as ignored there, with why.
    let (_, out, _) = nodejoin(
        r,
        &[
            "list",
            "nodejoin/scenarios",
            "--profile",
            "versions",
            "--format",
            "json",
        ],
        &[],
    );
    let both: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = both
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 8, "{names:?}");
    assert!(
        names.contains(&"local/v1.35/basic") && names.contains(&"local/v1.36/basic"),
        "{names:?}"
    );
    let old = both
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "local/v1.35/max-pods")
        .unwrap();
    assert!(
        old["ignored"]
            .as_str()
            .unwrap()
            .contains("outside this scenario's versions"),
        "{old}"
    );
    assert_eq!(
        listed(r, &["--kubernetes-version", "v1.35.4,v1.36.3", "-E", "version(v1.35)"]).len(),
        4,
        "the flag names several too, and the filter selects by version"
    );
}

/// What each scenario's JSON said last: scenario → outcome.
fn verdicts(json_lines: &str) -> BTreeMap<String, String> {
    json_lines
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "scenario_finished")
        .map(|v| {
            (
                v["scenario"].as_str().unwrap().to_string(),
                v["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The 1-based line of the first line of `file` that contains `text`.
fn line_of(file: &Path, text: &str) -> usize {
    let body = std::fs::read_to_string(file).unwrap();
    body.lines().position(|l| l.contains(text)).unwrap() + 1
}

#[test]
fn a_run_from_the_repository_annotates_retries_reruns_and_shards() {
    assert!(
        Command::new("docker")
            .arg("info")
            .output()
            .is_ok_and(|o| o.status.success()),
        "this test needs a running Docker engine (README's first command starts one)"
    );
    let repo = repository();
    let r = repo.path();
    let junit = r.join("junit.xml");
    let markdown = r.join("summary.md");
    // Started in nodejoin/ (the action's `working-directory`): annotations still name files from the checkout's
    // root, GITHUB_WORKSPACE, which GitHub resolves them from; the profile is found upwards.
    let workspace = r.display().to_string();
    let (code, out, err) = nodejoin(
        &r.join("nodejoin"),
        &[
            "run",
            "scenarios",
            "--profile",
            "ci",
            "--junit",
            junit.to_str().unwrap(),
            "--markdown",
            markdown.to_str().unwrap(),
        ],
        &[("GITHUB_ACTIONS", "true"), ("GITHUB_WORKSPACE", workspace.as_str())],
    );
    let all = format!("{out}\n{err}");
    assert_eq!(code, 100, "wrong-label fails the run, the flaky one does not:\n{all}");
    assert!(
        out.contains("2 passed, 1 failed, 0 ignored, 0 errors, 1 flaky"),
        "{out}"
    );
    assert!(out.contains("scenario first-attempt-fails: FLAKY in "), "{out}");
    assert!(
        out.contains("attempt 1 FAILED in ") && out.contains("probe: the registry mirror did not answer on attempt 1"),
        "the first attempt's cause is the part's own words: {out}"
    );
    assert!(
        err.contains("first-attempt-fails: attempt 1 of 2 FAILED, retrying"),
        "{err}"
    );
    // The annotations: on the exact line of the key that asked, paths relative to the repository.
    let broken = r.join("nodejoin/scenarios/broken/wrong-label.yaml");
    let error = format!(
        "::error file=nodejoin/scenarios/broken/wrong-label.yaml,line={},title=local/v1.36/wrong-label / worker-0 / labels::expected team=billing",
        line_of(&broken, "labels: { team: billing }")
    );
    assert!(out.contains(&error), "{error} not in:\n{out}");
    let flaky = r.join("nodejoin/scenarios/flaky/first-attempt-fails.yaml");
    let warning = format!(
        "::warning file=nodejoin/scenarios/flaky/first-attempt-fails.yaml,line={},title=local/v1.36/first-attempt-fails FLAKY::passed on attempt 2",
        line_of(&flaky, "userData:")
    );
    assert!(out.contains(&warning), "{warning} not in:\n{out}");
    assert_eq!(out.matches("::error ").count(), 1, "one per failed check: {out}");
    // JUnit, read back: a test case per check, named by the node's group, under the trial.
    let xml = std::fs::read_to_string(&junit).unwrap();
    let report = quick_junit::Report::deserialize_from_str(&xml).unwrap_or_else(|e| panic!("{e}: {xml}"));
    let suite = |name: &str| {
        report
            .test_suites
            .iter()
            .find(|s| s.name.as_str() == name)
            .unwrap_or_else(|| panic!("no suite {name}: {xml}"))
    };
    let wrong = suite("local/v1.36/wrong-label");
    let labels = wrong
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "worker-0/labels")
        .expect("a labels case");
    assert!(
        matches!(labels.status, quick_junit::TestCaseStatus::NonSuccess { .. }),
        "{xml}"
    );
    assert_eq!(
        labels.classname.as_ref().map(|c| c.as_str()),
        Some("local/v1.36/wrong-label")
    );
    assert_eq!(
        labels.extra.get("file").map(|f| f.as_str()),
        Some("nodejoin/scenarios/broken/wrong-label.yaml")
    );
    assert!(wrong.test_cases.len() > 3, "every check is a case: {xml}");
    let outcome = suite("local/v1.36/first-attempt-fails")
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "scenario")
        .expect("the outcome's case");
    match &outcome.status {
        quick_junit::TestCaseStatus::Success { flaky_runs } => assert_eq!(flaky_runs.len(), 1, "{xml}"),
        other => panic!("the flaky scenario's case is a success with a flaky run, not {other:?}"),
    }
    // The failed attempt kept its artifacts, report and picture apart.
    let attempt = std::fs::read_dir(r.join("out"))
        .unwrap()
        .flatten()
        .map(|run| run.path().join("first-attempt-fails.attempt-1"))
        .find(|d| d.is_dir())
        .expect("the first attempt's directory");
    for kept in ["report.txt", "timeline.svg"] {
        assert!(attempt.join(kept).is_file(), "{kept} not in {}", attempt.display());
    }
    let md = std::fs::read_to_string(&markdown).unwrap();
    assert!(
        md.contains("| first-attempt-fails | FLAKY |") && md.contains("flaky: passed on attempt 2"),
        "{md}"
    );
    // The record of the run: --rerun-failed runs wrong-label only.
    let (code, out, err) = nodejoin(
        r,
        &[
            "run",
            "nodejoin/scenarios",
            "--profile",
            "ci",
            "--rerun-failed",
            "--retries",
            "0",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(code, 100, "{err}");
    assert!(err.contains("rerunning 1 trial(s) that failed in run "), "{err}");
    assert_eq!(
        verdicts(&out),
        BTreeMap::from([("wrong-label".to_string(), "failed".to_string())])
    );
    // Two shards in two processes reach the whole run's verdicts (the JSON reporter says FLAKY too).
    let mut sharded = BTreeMap::new();
    for shard in ["count:1/2", "count:2/2"] {
        let (_, out, err) = nodejoin(
            r,
            &[
                "run",
                "nodejoin/scenarios",
                "--profile",
                "ci",
                "--partition",
                shard,
                "--format",
                "json",
            ],
            &[],
        );
        let got = verdicts(&out);
        assert_eq!(got.len(), 2, "{shard}: {err}");
        sharded.extend(got);
    }
    let whole: BTreeMap<String, String> = [
        ("basic", "passed"),
        ("first-attempt-fails", "flaky"),
        ("max-pods", "passed"),
        ("wrong-label", "failed"),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(sharded, whole);
    // A scenario on two versions is two trials with reports and artifacts apart (1.35's is ignored: the
    // scenario starts at 1.36, and a second Kubernetes build would cost CI minutes).
    let (code, out, err) = nodejoin(
        r,
        &[
            "run",
            "nodejoin/scenarios",
            "--profile",
            "ci",
            "-E",
            "scenario(max-pods)",
            "--kubernetes-version",
            "v1.35.4,v1.36.3",
            "--format",
            "json",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        verdicts(&out),
        BTreeMap::from([
            ("max-pods@v1.35".to_string(), "ignored".to_string()),
            ("max-pods@v1.36".to_string(), "passed".to_string())
        ])
    );
    let dirs: Vec<PathBuf> = std::fs::read_dir(r.join("out"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        dirs.iter().any(|d| d.join("max-pods@v1.36/report.txt").is_file()),
        "the 1.36 trial's report is in its own directory: {dirs:?}"
    );
    // Each shard kept its own record, beside the whole run's.
    let runs: Vec<PathBuf> = std::fs::read_dir(r.join("out"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    for record in ["last-run.json", "last-run-count-1-2.json", "last-run-count-2-2.json"] {
        assert!(runs.iter().any(|p| p.ends_with(record)), "{record} not in {runs:?}");
    }
}
