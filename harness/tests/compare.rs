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
    let out = common::nodejoin()
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
        Some(100),
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
    let run = |args: &[&str]| {
        let out = common::nodejoin()
            .arg("compare")
            .args(args)
            .output()
            .expect("run nodejoin");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, err) = run(&["--head", "script:nope.sh", SCENARIO]);
    assert_eq!(code, Some(96), "{err}");
    assert!(
        err.contains("--head script:nope.sh") && err.contains("no such file") && err.contains("hint:"),
        "{err}"
    );
    let (code, err) = run(&[
        "--head",
        "user-data:fixtures/user-data/wrong-content-type.mime",
        SCENARIO,
    ]);
    assert_eq!(code, Some(96), "{err}");
    assert!(err.contains("applies to none"), "{err}");
    assert!(!err.contains("[nodejoin] compare run"), "nothing started:\n{err}");
}

mod common;

/// The worktrees registered in `repo` (`git worktree list`): the repository's own, plus compare's while it runs.
fn worktrees(repo: &std::path::Path) -> usize {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["worktree", "list", "--porcelain"])
        .output()
        .expect("git worktree list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("worktree "))
        .count()
}

/// `compare --base git:HEAD` checks the revision out as a worktree of the user's repository: Ctrl-C mid-run
/// removes it (and its registration) before the CLI exits, and after a SIGKILL the next `nodejoin reap` does.
#[test]
fn a_compare_worktree_goes_with_its_process_however_it_ends() {
    use std::time::{Duration, Instant};
    assert!(
        common::docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let repo = tempfile::tempdir().unwrap();
    let scenario = common::slow_scenario(repo.path(), Duration::from_secs(60));
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "a slow scenario"]);
    assert_eq!(worktrees(repo.path()), 1);

    for (signal, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGKILL, "SIGKILL")] {
        let mut child = common::nodejoin()
            .args(["compare", "--base", "git:HEAD"])
            .arg(&scenario)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start nodejoin compare");
        let pid = child.id();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = common::read_lines(stderr, move |line| {
            if line.starts_with("[nodejoin] compare run ") {
                let _ = tx.send(());
            }
        });
        rx.recv_timeout(Duration::from_secs(300))
            .expect("compare started a run");
        let deadline = Instant::now() + Duration::from_secs(60);
        while worktrees(repo.path()) < 2 {
            assert!(Instant::now() < deadline, "{name}: compare registered no worktree");
            std::thread::sleep(Duration::from_millis(100));
        }
        // SAFETY: kill(2) on the child this test started.
        assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
        let status = child.wait().expect("wait");
        let log = reader.join().unwrap_or_default();
        if signal == libc::SIGKILL {
            assert_eq!(
                worktrees(repo.path()),
                2,
                "a SIGKILLed compare should have left its worktree (otherwise this test proves nothing)"
            );
            let out = common::nodejoin().arg("reap").output().expect("nodejoin reap");
            assert!(out.status.success(), "reap: {}", String::from_utf8_lossy(&out.stderr));
        } else {
            assert_eq!(
                status.code(),
                Some(128 + signal),
                "{name}: exit status {status}:\n{log}"
            );
        }
        assert_eq!(
            worktrees(repo.path()),
            1,
            "{name}: the compare worktree is still registered:\n{log}"
        );
        let prefix = format!("{pid}_");
        let left: Vec<String> = std::fs::read_dir(nodejoin::paths::scratch_root(&common::settings()))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with(&prefix))
            .collect();
        assert_eq!(
            left,
            Vec::<String>::new(),
            "{name}: compare's work directory is left in <cache>/tmp"
        );
    }
}
