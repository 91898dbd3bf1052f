//! The CLI on bad input: one clear line per failure plus a hint, a non-zero exit, and nothing started.
use std::process::Command;

/// Runs `nodejoin ARGS` and checks its exit code and that its output (stderr, then stdout) contains every
/// one of `wanted`; returns that output for further checks.
fn expect_failure(args: &[&str], envs: &[(&str, &str)], code: i32, wanted: &[&str]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodejoin"));
    c.current_dir(nodejoin::paths::workspace_root()).args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().expect("run nodejoin");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(out.status.code(), Some(code), "nodejoin {args:?}:\n{text}");
    for w in wanted {
        assert!(text.contains(w), "nodejoin {args:?}: expected {w:?} in:\n{text}");
    }
    text
}

#[test]
fn unknown_field_is_reported_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typo.yaml");
    std::fs::write(
        &file,
        "nodes:\n  - name: a\n    instanceTipe: m5.large\n    bootstrap: {}\n",
    )
    .unwrap();
    let position = format!("{}:3:5", file.display());
    let text = expect_failure(
        &["run", file.to_str().unwrap()],
        &[],
        2,
        &[&position, "unknown field `instanceTipe`", "hint:"],
    );
    // It failed before starting anything: no run was announced.
    assert!(!text.contains("[nodejoin] run "), "{text}");
}

#[test]
fn missing_scenario_file_is_a_clear_error() {
    expect_failure(
        &["run", "scenarios/does-not-exist.yaml"],
        &[],
        2,
        &["does-not-exist.yaml", "no such scenario file"],
    );
}

#[test]
fn unreachable_docker_says_how_to_fix_it() {
    let env = [("DOCKER_HOST", "unix:///nonexistent/docker.sock")];
    let run = ["run", "scenarios/basic-bootstrap-token.yaml"];
    expect_failure(
        &run,
        &env,
        2,
        &["Docker is not reachable", "hint: start the Docker engine"],
    );
    expect_failure(
        &["doctor"],
        &env,
        1,
        &["MISS Docker engine", "fix: apt-get install docker.io"],
    );
}

#[test]
fn bad_version_is_refused_before_any_work() {
    expect_failure(&["assets", "--version", "1.36"], &[], 2, &["v1.36.3"]);
}
