//! Runs sharing a host never touch each other: two nodejoin processes with their own cache directories overlap on
//! one Docker engine (the first on kind where kind can run), a third process reaps from yet another cache and a
//! fourth as another user, and none of them removes, kills or restores anything of the live run; a user's own
//! kind cluster named like ours survives; and the host's sysctls end exactly as they were before the first run.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;
use common::*;

/// The provider of the long-lived run: kind when it can run here (so the reaper's kind rules are what is
/// tested), else local, said. Where kind is required (NODEJOIN_REQUIRE_PROVIDERS, or CI, which provisions it) a
/// kind that cannot run fails the test.
fn first_provider() -> &'static str {
    use nodejoin::run::trials;
    use nodejoin::scenario::model::Provider;
    let Ok(enabled) = trials::enabled(std::env::var(trials::ENV_PROVIDERS).ok().as_deref()) else {
        return "local";
    };
    if !enabled.contains(&Provider::KIND) {
        eprintln!("note: NODEJOIN_PROVIDERS does not enable kind: the live run is on local");
        return "local";
    }
    let required = trials::required(std::env::var(trials::ENV_REQUIRE).ok().as_deref(), &enabled)
        .map(|r| r.contains(&Provider::KIND))
        .unwrap_or(false);
    match kind_ready() {
        None => "kind",
        Some(why) => {
            assert!(
                !required && std::env::var("CI").is_err(),
                "kind cannot run here, and it is required (NODEJOIN_REQUIRE_PROVIDERS or CI): {why}"
            );
            eprintln!("note: kind cannot run here ({why}): the live run is on local");
            "local"
        }
    }
}

/// The keys whose values differ between two sysctl snapshots, with both values.
fn changed(before: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    let now = host_sysctls();
    let mut keys: Vec<&String> = before.keys().chain(now.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| before.get(*k) != now.get(*k))
        .map(|k| format!("{k}: {:?} -> {:?}", before.get(k), now.get(k)))
        .collect()
}

/// kind's control-plane node (kind asks for `--privileged`) has a node's privileges: no module loading, reboot,
/// raw I/O or clock capability, `/proc/sysrq-trigger` and the host's kernel parameters read-only.
fn kind_node_has_a_nodes_privileges(run: &str) {
    let node = docker_objects(run)
        .into_iter()
        .filter_map(|o| o.strip_prefix("container ").map(str::to_string))
        .find(|c| c.starts_with(&format!("nj-{run}-")) && c.ends_with("-control-plane"))
        .expect("the kind control-plane container");
    let exec = |script: &str| {
        Command::new("docker")
            .args(["exec", &node, "sh", "-c", script])
            .output()
            .expect("docker exec")
    };
    // kind may have created the container and not yet started it.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !exec("true").status.success() {
        assert!(std::time::Instant::now() < deadline, "kind's node {node} never ran");
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = String::from_utf8_lossy(&exec("grep CapEff /proc/1/status").stdout).to_string();
    let caps = u64::from_str_radix(status.split_whitespace().nth(1).unwrap_or("0"), 16).expect("CapEff");
    for (name, bit) in [
        ("SYS_MODULE", 16),
        ("SYS_RAWIO", 17),
        ("SYS_BOOT", 22),
        ("SYS_TIME", 25),
    ] {
        assert_eq!(caps & (1 << bit), 0, "kind's node {node} has CAP_{name} ({status})");
    }
    assert!(
        caps & (1 << 21) != 0,
        "kind's node {node} lacks CAP_SYS_ADMIN, which systemd needs ({status})"
    );
    for (what, script) in [
        ("/proc/sysrq-trigger", "echo h > /proc/sysrq-trigger"),
        (
            "/proc/sys/kernel/panic",
            "cat /proc/sys/kernel/panic > /proc/sys/kernel/panic",
        ),
    ] {
        let out = exec(script);
        assert!(!out.status.success(), "kind's node {node} could write {what}");
    }
}

#[test]
fn overlapping_runs_with_their_own_caches_and_users_leave_each_other_alone() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let _turn = take_turn();
    assert_eq!(
        nodejoin::sysctl::live_runs(&common::settings()),
        0,
        "another nodejoin run is alive on this host: the host's sysctls before this test are not known"
    );
    let before = host_sysctls();
    let kubelet_differs = nodejoin::sysctl::KUBELET_VALUES
        .iter()
        .any(|(k, v)| before.get(*k).map(String::as_str) != Some(*v));
    if !kubelet_differs {
        assert!(
            std::env::var_os("CI").is_none(),
            "this host already has every sysctl the kubelet needs: the restore cannot be told from no change"
        );
        eprintln!("note: NOT VERIFIED: this host already has the kubelet's sysctls, so a restore changes nothing");
    }

    let image = docker_lines(&["image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "nodejoin-node"])
        .into_iter()
        .next()
        .expect("a node image (README's first command builds it)");
    let users = "nj-demo-1-control-plane";
    let _ = Command::new("docker").args(["rm", "-f", users]).output();
    let created = Command::new("docker")
        .args([
            "create",
            "--name",
            users,
            "--label",
            "io.x-k8s.kind.cluster=nj-demo-1",
            &image,
        ])
        .output()
        .expect("docker create");
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));

    let scratch = tempfile::tempdir().unwrap();
    let provider = first_provider();
    let (mut first, run, first_log) = start_run_on(provider, &slow_scenario(scratch.path(), Duration::from_secs(45)));
    let _stop_first = StopOnPanic(first.id());
    wait_mid_join(&run, &mut first, false);
    let objects = docker_objects(&run);
    let procs = control_plane_processes_of(&run);
    let lives = |first: &mut std::process::Child, what: &str| {
        assert!(
            first.try_wait().expect("wait").is_none(),
            "run {run} ended before {what}: this test proved nothing"
        );
        let now = docker_objects(&run);
        for o in &objects {
            assert!(now.contains(o), "{what} removed {o} of live run {run}");
        }
        for p in &procs {
            assert!(
                control_plane_processes_of(&run).contains(p),
                "{what} killed {p} of live run {run}"
            );
        }
    };

    if provider == "kind" {
        kind_node_has_a_nodes_privileges(&run);
    }

    // A second run, from another cache directory, starts (reaping first, as every run does), passes and ends.
    let other = hardlinked_cache();
    let (mut second, second_run, second_log) = start_run_with(
        "local",
        Path::new("scenarios/basic-bootstrap-token.yaml"),
        &[("NODEJOIN_CACHE_DIR", other.path().as_os_str())],
    );
    let _stop_second = StopOnPanic(second.id());
    let status = wait_exit(&mut second, Duration::from_secs(300), "the second run's start");
    let log = second_log.join().unwrap_or_default();
    assert!(
        status.success(),
        "the second run {second_run} failed beside run {run}:\n{log}"
    );
    lives(&mut first, "the second run (another cache directory)");
    // Its end must not put the host's sysctls back under the first run's nodes.
    let now = nodejoin::sysctl::current();
    for (key, value) in nodejoin::sysctl::KUBELET_VALUES {
        assert_eq!(
            now.get(*key).map(String::as_str),
            Some(*value),
            "the second run's end restored {key} while run {run} still has nodes"
        );
    }

    let out = nodejoin()
        .arg("reap")
        .env("NODEJOIN_CACHE_DIR", scratch.path().join("third-cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reap (root, another cache): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lives(&mut first, "`nodejoin reap` from another cache directory");
    let out = reap_as_nobody(scratch.path());
    assert!(
        out.status.success(),
        "reap (nobody): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    lives(&mut first, "`nodejoin reap` as user nobody");

    let status = wait_exit(&mut first, Duration::from_secs(300), "the other processes");
    let log = first_log.join().unwrap_or_default();
    assert!(
        status.success(),
        "run {run} ({provider}) failed beside the other processes:\n{log}"
    );
    assert_eq!(leftovers(&run), Vec::<String>::new(), "run {run} left these behind");
    let second_state: PathBuf = other.path().join("runs").join(&second_run);
    let mut left = docker_objects(&second_run);
    if second_state.exists() {
        left.push(format!("state dir {}", second_state.display()));
    }
    assert_eq!(
        left,
        Vec::<String>::new(),
        "the second run {second_run} left these behind"
    );
    assert_eq!(
        changed(&before),
        Vec::<String>::new(),
        "two overlapping runs left host sysctls changed"
    );

    let out = nodejoin().arg("reap").output().unwrap();
    assert!(out.status.success());
    let survived = docker_lines(&[
        "ps",
        "-a",
        "--filter",
        &format!("name=^{users}$"),
        "--format",
        "{{.Names}}",
    ]);
    let _ = Command::new("docker").args(["rm", "-f", users]).output();
    assert_eq!(
        survived,
        [users],
        "a user's kind cluster named like ours was removed by reap"
    );
}
