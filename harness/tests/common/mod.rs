//! What the clean-up and sharing tests have in common: starting runs, finding what a run owns on the host (Docker
//! objects, processes, state, etcd data) and the host's sysctls. The tests of a binary take turns: sysctls are
//! restored by the last live run only, so a neighbouring test's run would keep them. Every test crate's helpers
//! live here too (the checkout's root, the binary): each crate uses some of them, hence `allow(dead_code)`.
#![allow(dead_code)]
pub mod trials;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// This process's settings, resolved as the CLI and the trials resolve them (no flags).
pub fn settings() -> nodejoin::settings::Settings {
    nodejoin::settings::resolve::from_process(&nodejoin::settings::Flags::default()).expect("the settings resolve")
}

pub fn take_turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The nodejoin binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_nodejoin");

/// The checkout's root (where `scenarios/`, `docs/` and `ci/` are): one definition for every test crate.
pub fn root() -> PathBuf {
    nodejoin::paths::workspace_root()
}

/// The binary, to run from the checkout's root (a test running it elsewhere sets its own `current_dir`).
pub fn nodejoin() -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(root());
    c
}

pub fn docker_lines(args: &[&str]) -> Vec<String> {
    let out = Command::new("docker").args(args).output().expect("docker CLI");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .filter(|l| !l.is_empty())
        .collect()
}

/// Containers and networks labelled with the run id, and the run's kind node containers (named after it).
pub fn docker_objects(run: &str) -> Vec<String> {
    let filter = format!("label={}={run}", nodejoin::docker::RUN_LABEL);
    let mut v = docker_lines(&["ps", "-a", "--filter", &filter, "--format", "container {{.Names}}"]);
    let kind = format!("label={}", nodejoin::cluster::kind::KIND_CLUSTER_LABEL);
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
pub fn processes_of(run: &str) -> Vec<String> {
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

/// Scratch directories of the run (etcd data, node journals; on tmpfs), which a run must not leave behind.
pub fn etcd_data_of(run: &str) -> Vec<String> {
    let prefix = nodejoin::reaper::scratch_prefix(run);
    std::fs::read_dir(nodejoin::reaper::scratch_dir())
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Everything of `run` that should be gone: Docker objects, processes, its state directory, etcd data.
pub fn leftovers(run: &str) -> Vec<String> {
    let mut all = docker_objects(run);
    all.extend(processes_of(run).into_iter().map(|p| format!("process {p}")));
    if state_dir(run).exists() {
        all.push(format!("state dir {}", state_dir(run).display()));
    }
    all.extend(etcd_data_of(run).into_iter().map(|d| format!("etcd data {d}")));
    all
}

pub fn state_dir(run: &str) -> PathBuf {
    nodejoin::paths::cache_dir(&settings()).join("runs").join(run)
}

/// Starts `nodejoin run <scenario>` and returns the child and its run id (read from its first stderr line).
pub fn start_run(scenario: &Path) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    start_run_on("local", scenario)
}

pub fn start_run_on(provider: &str, scenario: &Path) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    start_run_with(provider, scenario, &[])
}

/// `nodejoin run --provider <provider> <scenario>` with extra environment (another cache directory, say).
pub fn start_run_with(
    provider: &str,
    scenario: &Path,
    env: &[(&str, &std::ffi::OsStr)],
) -> (std::process::Child, String, std::thread::JoinHandle<String>) {
    let mut command = nodejoin();
    command.args(["run", "--provider", provider]).arg(scenario);
    for (k, v) in env {
        command.env(k, v);
    }
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodejoin");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = read_lines(stderr, move |line| {
        if let Some(rest) = line.strip_prefix("[nodejoin] run ") {
            let _ = tx.send(rest.split(':').next().unwrap_or_default().to_string());
        }
    });
    let run = rx
        .recv_timeout(Duration::from_secs(600))
        .expect("nodejoin printed its run id");
    (child, run, reader)
}

pub fn docker_available() -> bool {
    Command::new("docker")
        .arg("info")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The sysctl baseline the run recorded at its start (it restores it when it is the last live run).
pub fn recorded_sysctls(run: &str) -> BTreeMap<String, String> {
    nodejoin::sysctl::baseline(&settings()).unwrap_or_else(|| panic!("run {run} recorded no host sysctl baseline"))
}

/// The host sysctls the kubelet changes are back to what `recorded` says, unless another run is still alive
/// (then the baseline must still be kept, for the last one to restore).
pub fn assert_sysctls_restored(run: &str, recorded: &BTreeMap<String, String>) {
    let settings = settings();
    if nodejoin::sysctl::baseline(&settings).is_some() {
        assert!(
            nodejoin::sysctl::live_runs(&settings) > 0,
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
        &nodejoin::sysctl::current(),
        recorded,
        "run {run} left host sysctls changed"
    );
}

/// The names of `run`'s running node containers.
pub fn node_containers(run: &str) -> Vec<String> {
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
}

/// Whether a node container of `run` has its kubelet running (the bootstrap is done and the join under way).
pub fn kubelet_running(run: &str) -> bool {
    node_containers(run)
        .iter()
        .any(|node| docker_lines(&["exec", node, "systemctl", "is-active", "kubelet"]) == ["active"])
}

/// Waits until `run` has a node container and its control plane's API server, and with `joining`, until a
/// node's kubelet runs too (mid-join).
pub fn wait_mid_join(run: &str, child: &mut std::process::Child, joining: bool) {
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
pub fn wait_exit(child: &mut std::process::Child, limit: Duration, what: &str) -> std::process::ExitStatus {
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

/// Whether the kind provider can run here (its node image and CLI present), asked the way trials are listed.
pub fn kind_ready() -> Option<String> {
    let rt = tokio::runtime::Runtime::new().expect("tokio runtime");
    rt.block_on(async {
        let docker = nodejoin::docker::connect().await.ok();
        let kind = nodejoin::cluster::Provider::KIND.get();
        match kind
            .probe(&settings(), nodejoin::assets::DEFAULT_VERSION, docker.as_ref())
            .await
        {
            nodejoin::cluster::Availability::Ready => None,
            nodejoin::cluster::Availability::Fetchable(why) | nodejoin::cluster::Availability::Unavailable(why) => {
                Some(why)
            }
        }
    })
}

/// A scenario that stays mid-join for a while: our reference bootstrap, `late` late.
pub fn slow_scenario(dir: &Path, late: Duration) -> PathBuf {
    let script =
        std::fs::read_to_string(root().join("fixtures/bootstrap/bootstrap.sh")).expect("the reference bootstrap");
    let (shebang, rest) = script.split_once('\n').expect("a shebang line");
    std::fs::write(
        dir.join("slow.sh"),
        format!("{shebang}\nsleep {}\n{rest}", late.as_secs()),
    )
    .unwrap();
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

//END

/// `nodejoin reap` as user nobody (in the docker group, so it sees the engine's objects) with its own cache:
/// from a copy of the binary nobody may execute (the build's is under root's home).
pub fn reap_as_nobody(scratch: &Path) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt;
    let bin = scratch.join("nodejoin");
    std::fs::copy(BIN, &bin).unwrap();
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

/// The host's sysctls a run could change (kernel, vm, fs and the host namespace's net.core, net.ipv4 and
/// net.bridge; per-interface entries aside, as Docker's veths come and go), without the counters the kernel
/// moves on its own (dentries, inodes, open files, the last pid, random).
pub fn host_sysctls() -> BTreeMap<String, String> {
    const VOLATILE: &[&str] = &[
        "fs/dentry-state",
        "fs/file-nr",
        "fs/inode-nr",
        "fs/inode-state",
        "fs/quota/",
        "fs/aio-nr",
        "kernel/ns_last_pid",
        "kernel/random/",
        "kernel/pty/nr",
        "kernel/perf_event_max_sample_rate",
        "net/ipv4/conf/",
        "net/ipv4/neigh/",
    ];
    const KEPT: &[&str] = &[
        "net/ipv4/conf/all/",
        "net/ipv4/conf/default/",
        "net/ipv4/neigh/default/",
    ];
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => walk(&path, out),
                Ok(t) if t.is_file() => out.push(path),
                _ => {}
            }
        }
    }
    let mut files = Vec::new();
    for top in ["kernel", "vm", "fs", "net/core", "net/ipv4", "net/bridge"] {
        walk(&Path::new("/proc/sys").join(top), &mut files);
    }
    files
        .into_iter()
        .filter_map(|path| {
            let key = path.strip_prefix("/proc/sys").ok()?.to_string_lossy().to_string();
            let volatile = VOLATILE.iter().any(|v| key.starts_with(v)) && !KEPT.iter().any(|k| key.starts_with(k));
            // Write-only entries (vm/drop_caches) fail to read and are left out.
            let value = std::fs::read_to_string(&path).ok()?;
            (!volatile).then(|| (key, value.split_whitespace().collect::<Vec<_>>().join(" ")))
        })
        .collect()
}

/// Stops a run this test started if the test fails while it is alive (SIGTERM, so the run cleans up and puts
/// the host's sysctls back, then a wait), instead of leaving it to die of a broken stderr pipe when the test
/// binary exits.
pub struct StopOnPanic(pub u32);

impl Drop for StopOnPanic {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // SAFETY: kill(2) on a child this test started and has not waited for (so its pid is not reused).
        unsafe { libc::kill(self.0 as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(150);
        let proc = PathBuf::from(format!("/proc/{}/stat", self.0));
        // A zombie (state Z) has exited: done.
        while Instant::now() < deadline
            && std::fs::read_to_string(&proc)
                .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
        {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The long-lived processes of a run on this host (its control plane: etcd, kube-apiserver,
/// kube-controller-manager), without the docker and kind commands that come and go.
pub fn control_plane_processes_of(run: &str) -> Vec<String> {
    processes_of(run)
        .into_iter()
        .filter(|p| {
            ["etcd", "kube-apiserver", "kube-controller-manager"]
                .iter()
                .any(|c| p.split(' ').nth(1).is_some_and(|exe| exe.ends_with(c)))
        })
        .collect()
}

/// A cache directory of its own holding what the default one holds (hard links: no
/// rebuild, nothing shared that either process writes; runs, scratch and locks are its own).
pub fn hardlinked_cache() -> tempfile::TempDir {
    let cache = nodejoin::paths::cache_dir(&settings());
    let parent = cache.parent().map(Path::to_path_buf).unwrap_or_else(std::env::temp_dir);
    let other = tempfile::Builder::new()
        .prefix("nodejoin-other-cache-")
        .tempdir_in(parent)
        .expect("another cache directory beside the cache");
    for entry in std::fs::read_dir(&cache)
        .expect("the cache (README's first command fills it)")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().to_string();
        if ["runs", "tmp", "cgroup2-vm"].contains(&name.as_str()) || name.ends_with(".lock") {
            continue;
        }
        let copied = Command::new("cp")
            .arg("-al")
            .arg(entry.path())
            .arg(other.path())
            .status()
            .is_ok_and(|s| s.success())
            || Command::new("cp")
                .arg("-a")
                .arg(entry.path())
                .arg(other.path())
                .status()
                .is_ok_and(|s| s.success());
        assert!(
            copied,
            "could not copy {} into {}",
            entry.path().display(),
            other.path().display()
        );
    }
    other
}

/// Reads a child's pipe line by line in a thread, calling `seen` on each (to signal a milestone), and returns
/// everything it read, newline-terminated, when the pipe closes.
pub fn read_lines(
    pipe: impl std::io::Read + Send + 'static,
    seen: impl Fn(&str) + Send + 'static,
) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            seen(&line);
            all.push_str(&line);
            all.push('\n');
        }
        all
    })
}

/// The files below `dir` still holding a private key or a kubeconfig's client key (a PEM block, or a
/// `client-key-data` value that is not the redaction mark), and how many files there are at all.
pub fn unredacted_keys(dir: &Path) -> (Vec<PathBuf>, usize) {
    fn walk(dir: &Path, found: &mut Vec<PathBuf>, files: &mut usize) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            if kind.is_dir() {
                walk(&e.path(), found, files);
            } else if kind.is_file() {
                *files += 1;
                let text = String::from_utf8_lossy(&std::fs::read(e.path()).unwrap_or_default()).into_owned();
                let secret = text.lines().any(|l| {
                    let l = l.trim();
                    (l.starts_with("-----BEGIN") && l.contains("PRIVATE KEY"))
                        || l.strip_prefix("client-key-data:")
                            .is_some_and(|v| !v.trim().is_empty() && !v.contains("redacted"))
                });
                if secret {
                    found.push(e.path());
                }
            }
        }
    }
    let (mut found, mut files) = (Vec::new(), 0);
    walk(dir, &mut found, &mut files);
    (found, files)
}

/// A user's repository as untrusted input: a `.git` whose config holds a credential, and a `nodejoin/` folder.
pub fn untrusted_repo() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::write(
        dir.path().join(".git/config"),
        "[remote \"origin\"]\n\turl = https://token@example.com/x\n",
    )
    .unwrap();
    let scenarios = dir.path().join("nodejoin");
    std::fs::create_dir_all(&scenarios).unwrap();
    (dir, scenarios)
}
