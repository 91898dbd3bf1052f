//! Nothing of a run outlives it: after `nodejoin run` exits no container, network, process, state directory
//! or changed host sysctl of the run is left; SIGINT, SIGTERM and SIGHUP mid-join clean up before the CLI exits
//! (128 + the signal); and when a run is killed with SIGKILL (no destructors), the next start-up (`nodejoin
//! reap`, which every run also does first) removes what it left. However a run ends, its artifacts keep no
//! private key or client key, wherever they were written. The tests take turns: the sysctls are restored
//! by the last live run only, so a run of a neighbouring test would keep them. The same for kind's control
//! plane is tests/kind_cleanup.rs: a libtest-mimic target, so where kind cannot run it is ignored, not passed.
use std::path::Path;
use std::time::{Duration, Instant};

mod common;
use common::*;

#[test]
fn a_finished_run_leaves_nothing_behind() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let _turn = take_turn();
    let (mut child, run, reader) = start_run(Path::new("scenarios/basic-bootstrap-token.yaml"));
    wait_mid_join(&run, &mut child, false);
    let recorded = recorded_sysctls(&run);
    let status = child.wait().expect("wait");
    let log = reader.join().unwrap_or_default();
    assert!(status.success(), "nodejoin run failed:\n{log}");
    assert_eq!(leftovers(&run), Vec::<String>::new(), "run {run} left these behind");
    assert_sysctls_restored(&run, &recorded);
}

/// SIGINT (Ctrl-C), SIGTERM and SIGHUP mid-join: the CLI removes the run's processes, containers, network and
/// sysctl changes itself, then exits with 128 + the signal.
#[test]
fn termination_signals_clean_up_before_exiting() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let _turn = take_turn();
    for (signal, name) in [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let started = Instant::now();
        // Artifacts elsewhere than the default: the clean-up finds them by the run's record.
        let artifacts = tempfile::tempdir().expect("artifacts dir");
        let (mut child, run, reader) = start_run_with(
            "local",
            Path::new("scenarios/basic-bootstrap-token.yaml"),
            &[("NODEJOIN_ARTIFACTS_DIR", artifacts.path().as_os_str())],
        );
        wait_mid_join(&run, &mut child, true);
        let recorded = recorded_sysctls(&run);
        // SAFETY: kill(2) on the child this test started.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0, "{name}");
        let status = wait_exit(&mut child, Duration::from_secs(150), name);
        let log = reader.join().unwrap_or_default();
        assert_eq!(
            status.code(),
            Some(128 + signal),
            "{name}: exit status {status}:\n{log}"
        );
        assert!(
            log.contains(&format!("{name}: removing run {run}")),
            "{name}: no clean-up announced:\n{log}"
        );
        assert_eq!(
            leftovers(&run),
            Vec::<String>::new(),
            "{name} left these of run {run} behind"
        );
        assert_sysctls_restored(&run, &recorded);
        // The bootstrap was under way: the cluster's CA and component keys and the kubeconfigs were written.
        let (keys, files) = unredacted_keys(&artifacts.path().join(&run));
        assert!(
            files > 0,
            "{name}: run {run} wrote no artifacts (this check would prove nothing)"
        );
        assert_eq!(
            keys,
            Vec::<std::path::PathBuf>::new(),
            "{name} left these keys unredacted"
        );
        eprintln!(
            "{name}: run {run} cleaned up, {:.1?} from start to checked",
            started.elapsed()
        );
    }
}

#[test]
fn a_killed_run_is_reaped_at_the_next_start() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let _turn = take_turn();
    // Its artifacts go where the reaper's do not: the run's record says where.
    let artifacts = tempfile::tempdir().expect("artifacts dir");
    let (mut child, run, reader) = start_run_with(
        "local",
        Path::new("scenarios/wrong-ca.yaml"),
        &[("NODEJOIN_ARTIFACTS_DIR", artifacts.path().as_os_str())],
    );
    // Wait until the run has a node container and its control plane, then kill it without giving it a chance
    // to clean up.
    wait_mid_join(&run, &mut child, false);
    let recorded = recorded_sysctls(&run);
    child.kill().expect("SIGKILL nodejoin");
    let _ = child.wait();
    let _ = reader.join();
    let left = docker_objects(&run);
    assert!(
        !left.is_empty(),
        "a SIGKILLed run should have left its containers (otherwise this test proves nothing)"
    );
    let procs = processes_of(&run);
    assert!(
        !procs.is_empty(),
        "a SIGKILLed run should have left its control-plane processes"
    );

    assert!(
        !etcd_data_of(&run).is_empty(),
        "a SIGKILLed run should have left its etcd data"
    );
    assert!(
        procs.iter().any(|p| p.contains("etcd")),
        "etcd should be among the leftovers: {procs:?}"
    );

    let (keys, _) = unredacted_keys(&artifacts.path().join(&run));
    assert!(
        !keys.is_empty(),
        "a SIGKILLed run should have left its keys (otherwise this test proves nothing)"
    );
    let out = nodejoin()
        .arg("reap")
        .env_remove("NODEJOIN_ARTIFACTS_DIR")
        .output()
        .expect("nodejoin reap");
    assert!(
        out.status.success(),
        "nodejoin reap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while !processes_of(&run).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        leftovers(&run),
        Vec::<String>::new(),
        "reap left these of run {run} behind"
    );
    assert_sysctls_restored(&run, &recorded);
    let (keys, _) = unredacted_keys(&artifacts.path().join(&run));
    assert_eq!(
        keys,
        Vec::<std::path::PathBuf>::new(),
        "reap left these keys unredacted"
    );
}

/// A planted run record (issue 66: one once made root set another directory's files to 0600 and redact them) is
/// not acted on: `nodejoin reap` leaves the directory it names as it was, kills nothing it names (a live process,
/// this test), and removes it. Planted three ways: a record like the host's own naming a directory without the
/// run's marker, one from another boot, and one by a name no run has.
#[test]
fn a_planted_run_record_is_removed_and_nothing_it_names_is_touched() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let victim = tmp.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    let secret = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\n";
    std::fs::write(victim.join("id_rsa"), secret).unwrap();
    std::fs::set_permissions(victim.join("id_rsa"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    // A live process of the host's the records name (the test itself): never killed.
    let me = std::process::id();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    for (name, boot) in [
        ("6748a1b2-abcdef", boot.trim()),
        ("6748a1b2-fedcba", "00000000-0000-0000-0000-000000000000"),
        ("planted", boot.trim()),
    ] {
        let record = cache.join("runs").join(name);
        std::fs::create_dir_all(record.join("pids")).unwrap();
        std::fs::write(record.join("owner.pid"), "999999999").unwrap();
        std::fs::write(record.join("boot"), boot).unwrap();
        std::fs::write(record.join("artifacts"), victim.as_os_str().as_encoded_bytes()).unwrap();
        // The first is shaped and placed as this host's own from this boot (root wrote it here): its processes
        // would be killed as a real record's are, so it names none; its artifacts still lack the run's marker.
        if name != "6748a1b2-abcdef" {
            std::fs::write(record.join("pids/1"), format!("{me}\n{}\n", exe.display())).unwrap();
        }
    }
    let out = nodejoin()
        .arg("reap")
        .env("NODEJOIN_CACHE_DIR", &cache)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(victim.join("id_rsa")).unwrap(),
        secret,
        "redacted"
    );
    assert_eq!(
        std::fs::metadata(victim.join("id_rsa")).unwrap().permissions().mode() & 0o777,
        0o644,
        "its mode was changed"
    );
    let left: Vec<_> = std::fs::read_dir(cache.join("runs")).unwrap().flatten().collect();
    assert!(left.is_empty(), "planted records left: {left:?}");
}
