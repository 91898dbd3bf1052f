//! Faults a CI user meets, each ending in a prompt verdict that quotes its cause (issue 29): the API server
//! stopped (SIGSTOP) mid-join, a node container killed or OOM-killed mid-join, kube-controller-manager killed mid-join (ERROR,
//! with every node's logs kept), and a run stopped with SIGTERM under `--format json --junit` (its last line is
//! `run_finished`, its JUnit file parses). Times are printed, not asserted: each bound below only stops a hang.
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

const SCENARIO: &str = "scenarios/basic-bootstrap-token.yaml";

/// The pid of `run`'s control-plane process `component` (its executable's name).
fn component_pid(run: &str, component: &str) -> u32 {
    control_plane_processes_of(run)
        .iter()
        .find(|p| p.split(' ').nth(1).is_some_and(|exe| exe.ends_with(component)))
        .and_then(|p| p.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("run {run} has no {component}: {:?}", processes_of(run)))
}

/// Resumes a stopped process however the test ends (a stopped API server would hold its run's clean-up).
struct Resume(u32);

impl Drop for Resume {
    fn drop(&mut self) {
        // SAFETY: kill(2) with SIGCONT on a process this test stopped.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// What a fault left: the run, its exit and its log (how long after the fault the exit came is printed).
struct Faulted {
    run: String,
    status: std::process::ExitStatus,
    log: String,
}

/// Runs `scenario` until mid-join (with `joining`, until a kubelet runs), applies `fault` to the run (whatever
/// it returns lives until the run has exited: a guard that undoes the fault), then waits for the run to end.
fn after_fault<G>(scenario: &Path, joining: bool, what: &str, fault: impl FnOnce(&str) -> G) -> Faulted {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let (mut child, run, reader) = start_run(scenario);
    let _stop = StopOnPanic(child.id());
    wait_mid_join(&run, &mut child, joining);
    let guard = fault(&run);
    let at = Instant::now();
    let status = wait_exit(&mut child, Duration::from_secs(240), what);
    let took = at.elapsed();
    drop(guard);
    let log = reader.join().unwrap_or_default();
    eprintln!("{what}: nodejoin exited {took:.1?} later ({status})");
    // However the fault ended the run, it leaves nothing behind.
    assert_eq!(leftovers(&run), Vec::<String>::new(), "run {run} left these behind");
    Faulted { run, status, log }
}

#[test]
fn a_stopped_api_server_ends_the_scenario_with_its_cause() {
    let _turn = take_turn();
    let f = after_fault(Path::new(SCENARIO), true, "the API server was stopped", |run| {
        let apiserver = component_pid(run, "kube-apiserver");
        // SAFETY: kill(2) with SIGSTOP on the run's API server, resumed by the guard.
        assert_eq!(unsafe { libc::kill(apiserver as i32, libc::SIGSTOP) }, 0);
        Resume(apiserver)
    });
    assert!(!f.status.success(), "a run whose API server stopped passed:\n{}", f.log);
    assert!(
        f.log.contains("did not answer") || f.log.contains("timed out") || f.log.contains("timeout"),
        "the verdict does not say the API stopped answering:\n{}",
        f.log
    );
}

/// The run's node container (the bundled scenario has one).
fn node_container(run: &str) -> String {
    node_containers(run).into_iter().next().expect("a node container")
}

/// `docker ARGS`, which must succeed.
fn docker_ok(args: &[&str]) {
    let out = Command::new("docker").args(args).output().expect("docker");
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The node container dies mid-join by `fault`: the scenario fails quoting `cause`, keeps its report, leaves
/// nothing behind.
fn a_dead_node_fails_its_scenario(what: &str, fault: impl FnOnce(&str), cause: &[&str]) {
    let f = after_fault(Path::new(SCENARIO), true, what, |run| fault(&node_container(run)));
    assert_eq!(
        f.status.code(),
        Some(100),
        "a run whose node died must fail:\n{}",
        f.log
    );
    assert!(
        f.log.contains("the last lines of its journal"),
        "the verdict does not quote the dead node's journal:\n{}",
        f.log
    );
    for c in cause {
        assert!(
            f.log.contains("node container") && f.log.contains(c),
            "the verdict does not quote the dead container's {c:?}:\n{}",
            f.log
        );
    }
    let scenario_dir = nodejoin::paths::artifacts_root(&common::settings())
        .join(&f.run)
        .join("basic-bootstrap-token");
    assert!(
        scenario_dir.join("report.txt").is_file(),
        "no report under {}",
        scenario_dir.display()
    );
    // The dead node's evidence: where its journal would be, why it is not, and what it wrote to disk.
    let node_dir = std::fs::read_dir(&scenario_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join("journal.log").is_file())
        .unwrap_or_else(|| panic!("no node artifacts under {}", scenario_dir.display()));
    // Its journal, read from its disk after it died (journald keeps it in /var/log/journal, as on EC2).
    let journal = std::fs::read_to_string(node_dir.join("journal.log")).unwrap();
    assert!(
        !journal.starts_with("(not collected") && journal.contains("kubelet"),
        "{journal}"
    );
    assert!(node_dir.join("files").is_dir() && node_dir.join("bootstrap.log").is_file());
}

#[test]
fn a_killed_node_container_fails_its_scenario_quoting_the_exit_code() {
    let _turn = take_turn();
    // Before it dies, the node plants links where the host looks for its journal (issue 66): one named as
    // journald names a machine's directory, to a directory of the host's, and one to the host's own journal. The
    // host must take only the node's real directory, and render it where a link reaches nothing of the host's:
    // its journal (with the kubelet's lines) is what the verdict and journal.log quote.
    let host = tempfile::tempdir().unwrap();
    let planted = format!(
        "ln -s /var/log/journal {m}/0 && ln -s {h} {m}/ffffffffffffffffffffffffffffffff && \
         ln -s {h} {m}/00000000000000000000000000000000",
        m = nodejoin::node::journal::MOUNT,
        h = host.path().display()
    );
    a_dead_node_fails_its_scenario(
        "the node container was killed",
        |node| {
            docker_ok(&["exec", node, "sh", "-c", &planted]);
            docker_ok(&["kill", node]);
        },
        &["exit code 137"],
    );
}

#[test]
fn an_oom_killed_node_container_fails_its_scenario_saying_so() {
    let _turn = take_turn();
    a_dead_node_fails_its_scenario(
        "the node container was OOM-killed",
        |node| {
            // A memory limit, then a process that fills it, with the node's init (systemd) as the kernel's
            // first choice: the container dies of OOM as a node whose init is OOM-killed does.
            docker_ok(&["update", "--memory", "768m", "--memory-swap", "768m", node]);
            docker_ok(&[
                "exec",
                "-d",
                node,
                "sh",
                "-c",
                "echo 1000 > /proc/1/oom_score_adj && exec tail /dev/zero",
            ]);
        },
        &["exit code 137", "OOMKilled"],
    );
}

/// Files under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}

#[test]
fn a_killed_controller_manager_is_an_error_with_every_nodes_logs() {
    let _turn = take_turn();
    let scratch = tempfile::tempdir().unwrap();
    let scenario = slow_scenario(scratch.path(), Duration::from_secs(15));
    let f = after_fault(&scenario, false, "kube-controller-manager was killed", |run| {
        // The controller manager starts once the API server is ready.
        let deadline = Instant::now() + Duration::from_secs(60);
        while !control_plane_processes_of(run)
            .iter()
            .any(|p| p.contains("kube-controller-manager"))
        {
            assert!(
                Instant::now() < deadline,
                "run {run} never started kube-controller-manager"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let kcm = component_pid(run, "kube-controller-manager");
        // SAFETY: kill(2) with SIGKILL on the run's controller manager.
        assert_eq!(unsafe { libc::kill(kcm as i32, libc::SIGKILL) }, 0);
    });
    assert!(
        !f.status.success(),
        "a run whose controller manager died passed:\n{}",
        f.log
    );
    assert!(
        f.log.contains("ERROR") && f.log.contains("kube-controller-manager"),
        "the verdict is not an ERROR naming kube-controller-manager:\n{}",
        f.log
    );
    let dir = nodejoin::paths::artifacts_root(&common::settings())
        .join(&f.run)
        .join("slow-join");
    let kept = files_under(&dir);
    assert!(
        kept.iter()
            .any(|f| f.contains("journal") || f.ends_with("bootstrap.log")),
        "the erred scenario kept no node logs under {}: {kept:?}",
        dir.display()
    );
}

#[test]
fn sigterm_still_ends_json_with_run_finished_and_writes_junit() {
    assert!(
        docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let _turn = take_turn();
    let scratch = tempfile::tempdir().unwrap();
    let junit = scratch.path().join("junit.xml");
    let slow = slow_scenario(scratch.path(), Duration::from_secs(40));
    let mut child = nodejoin()
        .args(["run", "--jobs", "1", "--format", "json", "--junit"])
        .arg(&junit)
        .arg(SCENARIO)
        .arg(&slow)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodejoin");
    let _stop = StopOnPanic(child.id());
    let stderr = child.stderr.take().unwrap();
    let err_reader = read_lines(stderr, |_| {});
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out_reader = read_lines(stdout, move |line| {
        if line.contains("\"scenario_finished\"") {
            let _ = tx.send(());
        }
    });
    rx.recv_timeout(Duration::from_secs(300))
        .expect("the first scenario finished");
    // The slow one is running now (one job at a time).
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) on the child this test started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = wait_exit(&mut child, Duration::from_secs(150), "SIGTERM");
    let out = out_reader.join().unwrap_or_default();
    let lines: Vec<&str> = out.lines().collect();
    let log = err_reader.join().unwrap_or_default();
    assert_eq!(status.code(), Some(128 + libc::SIGTERM), "{log}");
    let last: serde_json::Value =
        serde_json::from_str(lines.last().expect("JSON lines")).expect("the last line is JSON");
    assert_eq!(last["event"], "run_finished", "last line: {last}\n{log}");
    assert_eq!(last["cancelled"], "SIGTERM", "{last}");
    assert_eq!(last["passed"], 1, "the finished scenario counts: {last}");
    assert_eq!(last["errors"], 1, "the cancelled one is an error: {last}");
    let xml = std::fs::read_to_string(&junit).unwrap_or_else(|e| panic!("no JUnit at {}: {e}\n{log}", junit.display()));
    assert!(
        xml.trim_start().starts_with("<?xml") && xml.trim_end().ends_with("</testsuites>"),
        "{xml}"
    );
    // The running scenario ends as interrupted, one never started as cancelled: an error either way.
    assert!(
        xml.contains("interrupted") || xml.contains("cancelled by SIGTERM"),
        "{xml}"
    );
}
