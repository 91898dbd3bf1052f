//! A script written for `cargo nextest run` reads nodejoin's exit codes the same way: each code nextest
//! documents (NextestExitCode) that nodejoin can reach without a cluster, produced by the CLI and read by such a
//! script; `--no-tests` as nextest's; `list` taking the selection options `run` takes (`--rerun-failed` too).
//! 100 from a run is in `tests/cli.rs` (a required provider) and `tests/faults.rs`, 110 in `tests/parallel.rs`.
use std::path::Path;
use std::process::Command;

mod common;

/// The part of a CI script written for cargo-nextest that reads its exit code (nextest's book, "Exit codes").
const NEXTEST_SCRIPT: &str = r#"
"$@"
case $? in
  0) echo "verdict: passed" ;;
  4) echo "verdict: no tests to run" ;;
  94) echo "verdict: bad filter" ;;
  96) echo "verdict: setup error" ;;
  100) echo "verdict: tests failed" ;;
  104) echo "verdict: listing failed" ;;
  *) echo "verdict: unknown" ;;
esac
"#;

/// `nodejoin ARGS` (with `envs`) run through [`NEXTEST_SCRIPT`]: the verdict it read, and the output.
fn read_by_script(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> (String, String) {
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(NEXTEST_SCRIPT)
        .arg("nextest-script")
        .arg(common::BIN)
        .args(args)
        .current_dir(dir)
        .env("NODEJOIN_ARTIFACTS_DIR", dir.join("artifacts"));
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let verdict = stdout
        .lines()
        .find_map(|l| l.strip_prefix("verdict: "))
        .unwrap_or("none")
        .to_string();
    (verdict, format!("{}{stdout}", String::from_utf8_lossy(&out.stderr)))
}

/// A folder with a scenario that runs only on kind (skipped on the default provider, before any work), one
/// that runs anywhere, and an invalid one beside them.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let s = dir.path().join("scenarios");
    std::fs::create_dir_all(&s).unwrap();
    let node = "nodes:\n  - name: a\n    bootstrap: { args: [x] }\n";
    std::fs::write(
        s.join("kind-only.yaml"),
        format!("cluster:\n  providers: [kind]\n{node}"),
    )
    .unwrap();
    std::fs::write(s.join("anywhere.yaml"), format!("tags: [smoke]\n{node}")).unwrap();
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(
        bad.join("typo.yaml"),
        "nodes:\n  - name: a\n    instanceTipe: m5.large\n",
    )
    .unwrap();
    dir
}

#[test]
fn exit_codes_are_nextests() {
    let r = repo();
    let dir = r.path();
    let bin = |args: &[&str], envs: &[(&str, &str)]| read_by_script(dir, args, envs);
    let kind_only = ["run", "scenarios/kind-only.yaml"];
    // 4: nothing ran (every scenario skipped), as nextest's --no-tests=fail, its default.
    let (v, out) = bin(&kind_only, &[]);
    assert_eq!(v, "no tests to run", "{out}");
    assert!(
        out.contains("it runs only on kind") && out.contains("--no-tests"),
        "{out}"
    );
    // --no-tests=warn: 0 and a warning; pass: 0; also from the variable.
    let (v, out) = bin(&[&kind_only[..], &["--no-tests", "warn"]].concat(), &[]);
    assert!(v == "passed" && out.contains("warning: nothing to run"), "{out}");
    let (v, out) = bin(&kind_only, &[("NODEJOIN_NO_TESTS", "pass")]);
    assert!(v == "passed" && !out.contains("warning:"), "{out}");
    // A filter that selects none: nothing to run.
    let (v, out) = bin(&["run", "-E", "tag(nightly)", "scenarios"], &[]);
    assert!(v == "no tests to run" && out.contains("kept none"), "{out}");
    // 94: a filter that does not parse.
    let (v, out) = bin(&["run", "-E", "tag(smoke", "scenarios"], &[]);
    assert!(v == "bad filter" && out.contains("')' expected at column"), "{out}");
    let (v, out) = bin(&["list", "-E", "tag(smoke", "scenarios"], &[]);
    assert_eq!(v, "bad filter", "{out}");
    // 96: setup (a bad setting, a missing rerun record).
    let (v, out) = bin(&kind_only, &[("NODEJOIN_NO_TESTS", "sometimes")]);
    assert!(
        v == "setup error" && out.contains("no-tests 'sometimes' is unknown"),
        "{out}"
    );
    let (v, out) = bin(&["run", "--rerun-failed", "scenarios"], &[]);
    assert!(v == "setup error" && out.contains("no record of a last run"), "{out}");
    // 104: a scenario file that cannot be loaded.
    let (v, out) = bin(&["run", "bad/typo.yaml"], &[]);
    assert!(
        v == "listing failed" && out.contains("unknown field `instanceTipe`"),
        "{out}"
    );
    let (v, out) = bin(&["list", "bad"], &[]);
    assert_eq!(v, "listing failed", "{out}");
    // 2: clap's own usage error.
    let (v, out) = bin(&["run", "--no-tests", "maybe"], &[]);
    assert_eq!(v, "unknown", "clap's 2: {out}");
    // 0: a list.
    let (v, out) = bin(&["list", "scenarios"], &[]);
    assert!(v == "passed" && out.contains("local/v1.36/anywhere"), "{out}");
}

/// `list` takes every option that chooses trials: `--rerun-failed` lists what a rerun would run (from the same
/// record), and `--format human` is the vocabulary `run` uses (`text`, its old name, still taken).
#[test]
fn list_shows_what_a_rerun_would_take() {
    let r = repo();
    let dir = r.path();
    let record = serde_json::json!({
        "runId": "nj-test",
        "failed": ["local/v1.36/anywhere"],
        "passed": [],
    });
    std::fs::create_dir_all(dir.join("artifacts")).unwrap();
    std::fs::write(dir.join("artifacts/last-run.json"), record.to_string()).unwrap();
    for format in ["human", "text"] {
        let (v, out) = read_by_script(dir, &["list", "--rerun-failed", "--format", format, "scenarios"], &[]);
        assert!(v == "passed" && out.contains("local/v1.36/anywhere"), "{out}");
        assert!(out.contains("that failed in run nj-test"), "{out}");
    }
    let (_, out) = read_by_script(
        dir,
        &["list", "--format", "json", "--containerd", "2.4", "scenarios"],
        &[],
    );
    assert!(out.contains("\"name\": \"local/v1.36/anywhere\""), "{out}");
}
