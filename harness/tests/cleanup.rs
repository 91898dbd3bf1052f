//! Nothing of a run outlives it: after `nodejoin run` exits no container, network, process or state
//! directory of the run is left; and when a run is killed with SIGKILL (no destructors), the next start-up
//! (`nodejoin reap`, which every run also does first) removes what it left.
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// Containers and networks labelled with the run id.
fn docker_objects(run: &str) -> Vec<String> {
    let filter = format!("label={}={run}", nodejoin::docker::RUN_LABEL);
    let mut v = docker_lines(&["ps", "-a", "--filter", &filter, "--format", "container {{.Names}}"]);
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
    let mut child = nodejoin()
        .arg("run")
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

#[test]
fn a_finished_run_leaves_nothing_behind() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let (mut child, run, reader) = start_run(Path::new("scenarios/basic-bootstrap-token.yaml"));
    let status = child.wait().expect("wait");
    let log = reader.join().unwrap_or_default();
    assert!(status.success(), "nodejoin run failed:\n{log}");
    assert_eq!(leftovers(&run), Vec::<String>::new(), "run {run} left these behind");
}

#[test]
fn a_killed_run_is_reaped_at_the_next_start() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let (mut child, run, reader) = start_run(Path::new("scenarios/wrong-ca.yaml"));
    // Wait until the run has a node container and its control plane, then kill it without giving it a chance
    // to clean up.
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let has_container = docker_objects(&run).iter().any(|o| o.starts_with("container"));
        let has_apiserver = processes_of(&run).iter().any(|p| p.contains("kube-apiserver"));
        if has_container && has_apiserver {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} never had both a node container and a control plane"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
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
}
