//! `cargo test` honours a repository's profile as `nodejoin run` does: the cargo-test trials resolve their
//! settings through the same function (variables over `.config/nodejoin.toml`), so `NODEJOIN_PROFILE=ci cargo
//! test --test scenarios -- --list` lists what the ci profile asks for.
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `scenarios` test binary cargo built beside this one (the newest, should older builds be there).
fn scenarios_binary() -> PathBuf {
    let me = std::env::current_exe().unwrap();
    let deps = me.parent().unwrap();
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(deps)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
            name.starts_with("scenarios-") && p.extension().is_none()
        })
        .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, p)| p)
        .expect("cargo builds the scenarios test binary with this one (cargo test --workspace)")
}

/// A repository with one scenario and a ci profile that asks for two Kubernetes versions.
fn repository() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".config")).unwrap();
    std::fs::write(
        dir.path().join(".config/nodejoin.toml"),
        "[profile.ci]\nkubernetes-versions = [\"v1.35.4\", \"v1.36.3\"]\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("scenarios")).unwrap();
    std::fs::write(
        dir.path().join("scenarios/joins.yaml"),
        "description: a node joins\nnodes:\n  - name: worker\n    bootstrap:\n      args: [\"{{cluster.name}}\"]\n",
    )
    .unwrap();
    dir
}

/// The trials `--list` names, run from `dir` with `profile` set or not.
fn listed(dir: &Path, profile: Option<&str>) -> Vec<String> {
    let mut cmd = Command::new(scenarios_binary());
    cmd.arg("--list")
        .current_dir(dir)
        .env("NODEJOIN_SCENARIOS", dir.join("scenarios"))
        .env("NODEJOIN_PROVIDERS", "local")
        .env_remove("NODEJOIN_K8S_VERSION")
        .env_remove("NODEJOIN_PROFILE");
    if let Some(p) = profile {
        cmd.env("NODEJOIN_PROFILE", p);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(String::from)
        .collect()
}

#[test]
fn nodejoin_profile_reaches_cargo_tests_trials() {
    let dir = repository();
    let plain = listed(dir.path(), None);
    assert_eq!(plain.len(), 1, "{plain:?}");
    let ci = listed(dir.path(), Some("ci"));
    assert_eq!(ci, ["local/v1.35/joins", "local/v1.36/joins"]);
}

#[test]
fn an_unknown_profile_stops_the_trials_with_its_name() {
    let dir = repository();
    let out = Command::new(scenarios_binary())
        .arg("--list")
        .current_dir(dir.path())
        .env("NODEJOIN_SCENARIOS", dir.path().join("scenarios"))
        .env("NODEJOIN_PROFILE", "nightly")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no profile 'nightly' (it defines: ci)"), "{stderr}");
}
