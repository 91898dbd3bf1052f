//! The CLI on bad input: one clear line per failure plus a hint, a non-zero exit, and nothing started.
use std::process::{Command, Output};

fn nodejoin(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodejoin"));
    c.current_dir(nodejoin::paths::workspace_root()).args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("run nodejoin")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
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
    let out = nodejoin(&["run", file.to_str().unwrap()], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}:3:5", file.display())), "{err}");
    assert!(err.contains("unknown field `instanceTipe`"), "{err}");
    assert!(err.contains("hint:"), "{err}");
    // It failed before starting anything: no run was announced.
    assert!(!err.contains("[nodejoin] run "), "{err}");
}

#[test]
fn missing_scenario_file_is_a_clear_error() {
    let out = nodejoin(&["run", "scenarios/does-not-exist.yaml"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("does-not-exist.yaml") && err.contains("no such scenario file"),
        "{err}"
    );
}

#[test]
fn unreachable_docker_says_how_to_fix_it() {
    let env = [("DOCKER_HOST", "unix:///nonexistent/docker.sock")];
    let out = nodejoin(&["run", "scenarios/basic-bootstrap-token.yaml"], &env);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("Docker is not reachable"), "{err}");
    assert!(err.contains("hint: start the Docker engine"), "{err}");
    let doctor = nodejoin(&["doctor"], &env);
    let text = String::from_utf8_lossy(&doctor.stdout).to_string();
    assert_eq!(doctor.status.code(), Some(1), "{text}");
    assert!(
        text.contains("MISS Docker engine") && text.contains("fix: apt-get install docker.io"),
        "{text}"
    );
}

#[test]
fn bad_version_is_refused_before_any_work() {
    let out = nodejoin(&["assets", "--version", "1.36"], &[]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("v1.36.3"), "{err}");
}
