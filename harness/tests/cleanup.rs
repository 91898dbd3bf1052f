//! Nothing of a run outlives it: after `nodejoin run` exits no container, network, process, state directory
//! or changed host sysctl of the run is left; SIGINT, SIGTERM and SIGHUP mid-join clean up before the CLI exits
//! (128 + the signal); and when a run is killed with SIGKILL (no destructors), the next start-up (`nodejoin
//! reap`, which every run also does first) removes what it left. The tests take turns: the sysctls are restored
//! by the last live run only, so a run of a neighbouring test would keep them.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn take_turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn nodejoin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodejoin"));
    c.current_dir(nodejoin::paths::workspace_root());
    c
}

fn docker_lines(args: &[&str]) -> Vec<String> {
    let out = Command::new("docker").args(args).output().expect("docker CLI");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Containers and networks labelled with the run id, and the run's kind node containers (named after it).
fn docker_objects(run: &str) -> Vec<String> {
    let filter = format!("label={}={run}", nodejoin::docker::RUN_LABEL);
    let mut v = docker_lines(&["ps", "-a", "--filter", &filter, "--format", "container {{.Names}}"]);
    let kind = format!("label={}", nodejoin::docker::KIND_CLUSTER_LABEL);
    v.extend(
        docker_lines(&["ps", "-a", "--filter", &kind, "--format", "container {{.Names}}"])
            .into_iter()
            .filter(|c| c.starts_with(&format!("container nj-{run}-"))),
    );
    v.extend(docker_lines(&[
        "network",
        "ls",
        "--filter",
        &filter,
        "--format",
        "network {{.Name}}",
    ]));
    v
}

/// Processes whose command line mentions the run (control-plane processes carry its directory in their flags).
fn processes_of(run: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(cmd) = std::fs::read(entry.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(run) && !cmd.contains("cleanup") {
                found.push(format!(
                    "{} {}",
                    entry.file_name().to_string_lossy(),
                    cmd.chars().take(120).collect::<String>()
                ));
            }
        }
    }
    found
}

/// etcd data directories of the run (on tmpfs).
fn etcd_data_of(run: &str) -> Vec<String> {
    let prefix = format!("{}{run}-", nodejoin::cluster::local::ETCD_DATA_PREFIX);
    std::fs::read_dir(nodejoin::cluster::local::shm_or_tmp())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Everything of `run` that should be gone: Docker objects, processes, its state directory, etcd data.
fn leftovers(run: &str) -> Vec<String> {
    let mut all = docker_objects(run);
    all.extend(processes_of(run).into_iter().map(|p| format!("process {p}")));
    if state_dir(run).exists() {
        all.push(format!("state dir {}", state_dir(run).display()));
    }
    all.extend(etcd_data_of(run).into_iter().map(|d| format!("etcd data {d}")));
    all
}

fn state_dir(run: &str) -> PathBuf {
    nodejoin::paths::cache_dir().join("runs").join(run)
}

/// Starts `nodejoin run <scenario>` and returns the child and its run id (read from its first stderr line).
fn start_run(scenario: &Path) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    start_run_on("local", scenario)
}

fn start_run_on(provider: &str, scenario: &Path) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    let mut child = nodejoin()
        .args(["run", "--provider", provider])
        .arg(scenario)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodejoin");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("[nodejoin] run ") {
                let _ = tx.send(rest.split(':').next().unwrap_or_default().to_string());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    let run = rx
        .recv_timeout(Duration::from_secs(600))
        .expect("nodejoin printed its run id");
    (child, run, reader)
}

fn docker_available() -> bool {
    Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The sysctl baseline the run recorded at its start (it restores it when it is the last live run).
fn recorded_sysctls(run: &str) -> BTreeMap<String, String> {
    nodejoin::node::sysctl::baseline().unwrap_or_else(|| panic!("run {run} recorded no host sysctl baseline"))
}

/// The host sysctls the kubelet changes are back to what `recorded` says, unless another run is still alive
/// (then the baseline must still be kept, for the last one to restore).
fn assert_sysctls_restored(run: &str, recorded: &BTreeMap<String, String>) {
    if nodejoin::node::sysctl::baseline().is_some() {
        assert!(
            nodejoin::node::sysctl::live_runs() > 0,
            "run {run} was the last live run, yet it left its sysctl baseline behind"
        );
        // In CI nothing else runs, so the restore must be checked; on a shared machine say it was not.
        assert!(
            std::env::var_os("CI").is_none(),
            "run {run}: another nodejoin run is alive, so the sysctl restore could not be verified"
        );
        eprintln!("note: NOT VERIFIED: another nodejoin run is alive; it restores the host sysctls when it ends");
        return;
    }
    assert_eq!(
        &nodejoin::node::sysctl::current(),
        recorded,
        "run {run} left host sysctls changed"
    );
}

/// Whether a node container of `run` has its kubelet running (the bootstrap is done and the join under way).
fn kubelet_running(run: &str) -> bool {
    let filter = format!("label={}={run}", nodejoin::docker::RUN_LABEL);
    docker_lines(&[
        "ps",
        "--filter",
        &filter,
        "--filter",
        "label=io.nodejoin.node",
        "--format",
        "{{.Names}}",
    ])
    .iter()
    .any(|node| docker_lines(&["exec", node, "systemctl", "is-active", "kubelet"]) == ["active"])
}

/// Waits until `run` has a node container and its control plane's API server, and with `joining`, until a
/// node's kubelet runs too (mid-join).
fn wait_mid_join(run: &str, child: &mut std::process::Child, joining: bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let has_container = docker_objects(run).iter().any(|o| o.starts_with("container"));
        // A local API server carries the run in its flags; a kind one lives in the run's kind container.
        let has_apiserver = processes_of(run).iter().any(|p| p.contains("kube-apiserver"))
            || docker_objects(run)
                .iter()
                .any(|o| o.starts_with(&format!("container nj-{run}-")));
        if has_container && has_apiserver && (!joining || kubelet_running(run)) {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("run {run} ended ({status}) before it had a node container and a control plane");
        }
        assert!(
            Instant::now() < deadline,
            "run {run} never had both a node container and a control plane"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The child's exit, or a failure if it is still running after `limit` (it is then killed).
fn wait_exit(child: &mut std::process::Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for nodejoin") {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("nodejoin was still running {limit:?} after {what}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

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
        let (mut child, run, reader) = start_run(Path::new("scenarios/basic-bootstrap-token.yaml"));
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
    let (mut child, run, reader) = start_run(Path::new("scenarios/wrong-ca.yaml"));
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

    let out = nodejoin().arg("reap").output().expect("nodejoin reap");
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
}

/// Whether the kind provider can run here (its node image and CLI present), asked the way trials are listed.
fn kind_ready() -> Option<String> {
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    rt.block_on(async {
        let docker = nodejoin::docker::connect().await.ok();
        let kind = nodejoin::cluster::provider("kind").expect("the kind provider");
        match kind.probe(nodejoin::assets::DEFAULT_VERSION, docker.as_ref()).await {
            nodejoin::cluster::Availability::Ready => None,
            nodejoin::cluster::Availability::Fetchable(why) | nodejoin::cluster::Availability::Unavailable(why) => {
                Some(why)
            }
        }
    })
}

/// The same for kind: SIGTERM mid-join removes the kind control-plane container with the rest, and a SIGKILLed
/// run's kind container (which kind cannot label with the run) is found by name and reaped at the next start.
#[test]
fn kind_control_planes_go_with_their_run() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    // The trials' rules: a cell that does not enable kind (NODEJOIN_PROVIDERS) has no kind to check; where kind is
    // required, or under CI (where .ci/run provisions it), a kind that cannot run fails; elsewhere it is said.
    use nodejoin::scenario::{model::Provider, trials};
    let enabled = trials::enabled(std::env::var(trials::ENV_PROVIDERS).ok().as_deref()).expect("NODEJOIN_PROVIDERS");
    if !enabled.contains(&Provider::KIND) {
        eprintln!("kind_control_planes_go_with_their_run: NODEJOIN_PROVIDERS does not enable kind; nothing to check");
        return;
    }
    let required = trials::required(std::env::var(trials::ENV_REQUIRE).ok().as_deref(), &enabled)
        .expect("NODEJOIN_REQUIRE_PROVIDERS")
        .contains(&Provider::KIND);
    if let Some(why) = kind_ready() {
        assert!(
            !required && std::env::var("CI").is_err(),
            "kind cannot run here, and it is required (NODEJOIN_REQUIRE_PROVIDERS or CI): {why}"
        );
        eprintln!(
            "kind_control_planes_go_with_their_run: NOT CHECKED: kind cannot run here ({why}); `nodejoin image build --kind` provides it"
        );
        return;
    }
    let _turn = take_turn();
    let scenario = Path::new("scenarios/basic-bootstrap-token.yaml");
    let (mut child, run, reader) = start_run_on("kind", scenario);
    wait_mid_join(&run, &mut child, true);
    assert!(
        docker_objects(&run)
            .iter()
            .any(|o| o.starts_with(&format!("container nj-{run}-"))),
        "the kind control plane should be up mid-join: {:?}",
        docker_objects(&run)
    );
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = wait_exit(&mut child, Duration::from_secs(150), "SIGTERM");
    let log = reader.join().unwrap_or_default();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "exit status {status}:\n{log}");
    assert_eq!(
        leftovers(&run),
        Vec::<String>::new(),
        "SIGTERM left these of kind run {run} behind"
    );

    let (mut child, run, reader) = start_run_on("kind", scenario);
    wait_mid_join(&run, &mut child, false);
    child.kill().expect("SIGKILL nodejoin");
    let _ = child.wait();
    let _ = reader.join();
    assert!(
        docker_objects(&run)
            .iter()
            .any(|o| o.starts_with(&format!("container nj-{run}-"))),
        "a SIGKILLed kind run should have left its kind container (otherwise this test proves nothing): {:?}",
        docker_objects(&run)
    );
    let out = nodejoin().arg("reap").output().expect("nodejoin reap");
    assert!(
        out.status.success(),
        "nodejoin reap failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        leftovers(&run),
        Vec::<String>::new(),
        "reap left these of kind run {run} behind"
    );
}

/// A scenario that stays mid-join for a while: our reference bootstrap, 20 s late.
fn slow_scenario(dir: &Path) -> PathBuf {
    let script = std::fs::read_to_string(nodejoin::paths::workspace_root().join("fixtures/bootstrap/bootstrap.sh"))
        .expect("the reference bootstrap");
    let (shebang, rest) = script.split_once('\n').expect("a shebang line");
    std::fs::write(dir.join("slow.sh"), format!("{shebang}\nsleep 20\n{rest}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("slow.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let scenario = dir.join("slow-join.yaml");
    std::fs::write(
        &scenario,
        r#"description: a run that stays mid-join while other processes reap
nodes:
  - name: slow
    bootstrap:
      script: slow.sh
      args: ["{{cluster.name}}", --apiserver-endpoint, "{{cluster.endpoint}}", --b64-cluster-ca, "{{cluster.caBase64}}"]
    expect:
      within: 120s
"#,
    )
    .unwrap();
    scenario
}

/// `nodejoin reap` as user nobody (in the docker group, so it sees the engine's objects) with its own cache:
/// from a copy of the binary nobody may execute (the build's is under root's home).
fn reap_as_nobody(scratch: &Path) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt;
    let bin = scratch.join("nodejoin");
    std::fs::copy(env!("CARGO_BIN_EXE_nodejoin"), &bin).unwrap();
    std::fs::set_permissions(scratch, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let docker_gid = std::fs::read_to_string("/etc/group")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            l.strip_prefix("docker:x:")
                .and_then(|r| r.split(':').next())
                .map(str::to_string)
        })
        .expect("a docker group (the engine's socket is root:docker)");
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534"])
        .arg(format!("--groups={docker_gid}"))
        .arg("--")
        .arg(&bin)
        .arg("reap")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent")
        .env("NODEJOIN_CACHE_DIR", scratch.join("nobody-cache"))
        .current_dir(scratch)
        .output()
        .expect("setpriv")
}

/// Runs sharing a host: while a run is mid-join, `nodejoin reap` from another cache directory (as root) and as
/// another user (nobody, whose kill(2) of a root process fails with EPERM) leaves every object and process of
/// it alone, and a user's own kind cluster named like ours (`nj-demo-1`, kind's label only) survives; the run
/// then passes.
#[test]
fn other_cache_directories_and_users_leave_a_live_run_alone() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let _turn = take_turn();
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
    let (mut child, run, reader) = start_run(&slow_scenario(scratch.path()));
    wait_mid_join(&run, &mut child, false);
    let before = docker_objects(&run);
    let procs = processes_of(&run);

    let other_cache = scratch.path().join("other-cache");
    let out = nodejoin()
        .arg("reap")
        .env("NODEJOIN_CACHE_DIR", &other_cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "reap (root, another cache): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = reap_as_nobody(scratch.path());
    assert!(
        out.status.success(),
        "reap (nobody): {}",
        String::from_utf8_lossy(&out.stderr)
    );

    assert!(
        child.try_wait().expect("wait").is_none(),
        "run {run} ended before the other processes reaped: this test proved nothing"
    );
    let after = docker_objects(&run);
    for o in &before {
        assert!(
            after.contains(o),
            "reap from another cache or user removed {o} of live run {run}"
        );
    }
    for p in &procs {
        assert!(processes_of(&run).contains(p), "reap killed {p} of live run {run}");
    }
    let status = wait_exit(&mut child, Duration::from_secs(300), "the reaps");
    let log = reader.join().unwrap_or_default();
    assert!(status.success(), "run {run} failed beside the reaps:\n{log}");
    assert_eq!(leftovers(&run), Vec::<String>::new(), "run {run} left these behind");

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
