//! A build killed with SIGKILL at any point leaves the next run correct (issue 28): the Kubernetes build's Go
//! processes, the node image's rootfs script (with its /proc mounted in the chroot) and its `docker build` are
//! found by their owner mark and killed by the next start-up, their work directories go (unmounted first), and
//! the next run builds again instead of trusting half-written output. Each runs in a cache directory of its own;
//! Go's build and module caches are shared, so the Kubernetes rebuild is mostly linking.
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

fn nodejoin(cache: &Path) -> Command {
    let mut c = common::nodejoin();
    c.env("NODEJOIN_CACHE_DIR", cache)
        .env_remove("NODEJOIN_K8S_ASSETS")
        .env_remove("NODEJOIN_K8S_VERSION");
    c
}

/// Processes whose owner mark names `pid` (see `process::OWNER_ENV`).
fn marked_by(pid: u32) -> Vec<u32> {
    let needle = format!("{}={pid}:", nodejoin::process::OWNER_ENV);
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|kv| kv.starts_with(needle.as_bytes())))
                .unwrap_or(false)
        })
        .collect()
}

#[test]
fn a_killed_kubernetes_build_is_reaped_and_built_again() {
    if which("go").is_none() {
        panic!("this test needs Go on PATH (README's first command installs it)");
    }
    let cache = tempfile::tempdir().unwrap();
    let mut child = nodejoin(cache.path())
        .arg("assets")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start nodejoin assets");
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = common::read_lines(stderr, move |line| {
        if line.contains("build Kubernetes") && line.contains("(1/4)") {
            let _ = tx.send(());
        }
    });
    rx.recv_timeout(Duration::from_secs(600))
        .expect("the Kubernetes build started");
    // Mid-build: Go is compiling or linking under the mark.
    let deadline = Instant::now() + Duration::from_secs(60);
    while marked_by(pid).len() < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let running = marked_by(pid);
    assert!(
        running.len() >= 2,
        "no build process carried the mark: this test proves nothing"
    );
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let log = reader.join().unwrap_or_default();
    assert!(
        !marked_by(pid).is_empty(),
        "the build ended with its owner: nothing was left to reap\n{log}"
    );

    let out = nodejoin(cache.path()).arg("reap").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(15);
    while !marked_by(pid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        marked_by(pid),
        Vec::<u32>::new(),
        "the killed build's processes still run after reap"
    );
    let scratch: Vec<_> = std::fs::read_dir(cache.path().join("tmp"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(scratch.is_empty(), "<cache>/tmp kept {scratch:?}");

    let out = nodejoin(cache.path()).arg("assets").output().unwrap();
    assert!(
        out.status.success(),
        "the next build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let version = nodejoin::assets::DEFAULT_VERSION;
    let apiserver = cache
        .path()
        .join("k8s")
        .join(std::env::consts::ARCH)
        .join(version)
        .join("kube-apiserver");
    let v = Command::new(&apiserver)
        .arg("--version")
        .output()
        .expect("the rebuilt kube-apiserver runs");
    assert!(
        String::from_utf8_lossy(&v.stdout).contains(version),
        "{}",
        String::from_utf8_lossy(&v.stdout)
    );
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Starts `nodejoin <args>` in `cache` with `env`, its stderr collected by a thread.
fn spawn(cache: &Path, args: &[&str], env: &[(&str, &str)]) -> (std::process::Child, std::thread::JoinHandle<String>) {
    spawn_seeing(cache, args, env, |_| {})
}

/// [`spawn`], `seen` called with each line of its stderr as it comes.
fn spawn_seeing(
    cache: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    seen: impl Fn(&str) + Send + 'static,
) -> (std::process::Child, std::thread::JoinHandle<String>) {
    let mut cmd = nodejoin(cache);
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start nodejoin");
    let stderr = child.stderr.take().unwrap();
    (child, common::read_lines(stderr, seen))
}

/// The node images built on `base` (their `io.nodejoin.base` label).
fn node_images_on(base: &str) -> Vec<String> {
    common::docker_lines(&["image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "nodejoin-node"])
        .into_iter()
        .filter(|t| {
            let label = format!("{{{{index .Config.Labels \"{}\"}}}}", nodejoin::node::image::BASE_LABEL);
            common::docker_lines(&["image", "inspect", "--format", &label, t]) == [base]
        })
        .collect()
}

/// Mount points at or below `dir`.
fn mounts_below(dir: &Path) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|p| Path::new(p).starts_with(dir))
        .map(str::to_string)
        .collect()
}

/// A process's command line, spaces for NULs.
fn cmdline(pid: u32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).replace('\0', " ")
}

/// Waits until `ready` holds while `child` runs (a failure names `what` and quotes the child's log if it ended).
fn wait_for(child: &mut std::process::Child, limit: Duration, what: &str, ready: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !ready() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("nodejoin ended ({status}) before {what}");
        }
        assert!(Instant::now() < deadline, "no {what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILLs `child` mid-build, shows something of it was left (else the test proves nothing), reaps from the
/// same cache and shows nothing is left running or mounted and `<cache>/tmp` is empty.
fn kill_and_reap(mut child: std::process::Child, reader: std::thread::JoinHandle<String>, cache: &Path, what: &str) {
    let pid = child.id();
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let log = reader.join().unwrap_or_default();
    let left = marked_by(pid);
    let work: Vec<_> = std::fs::read_dir(cache.join("tmp"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        !left.is_empty() || !work.is_empty(),
        "the killed {what} left nothing to reap (no process, no work directory):\n{log}"
    );
    let out = nodejoin(cache).arg("reap").output().unwrap();
    assert!(out.status.success(), "reap: {}", String::from_utf8_lossy(&out.stderr));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !marked_by(pid).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let running: Vec<String> = marked_by(pid).into_iter().map(cmdline).collect();
    assert_eq!(running, Vec::<String>::new(), "the killed {what} still runs after reap");
    assert_eq!(
        mounts_below(cache),
        Vec::<String>::new(),
        "the killed {what} left mounts"
    );
    let scratch: Vec<_> = std::fs::read_dir(cache.join("tmp"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        scratch.is_empty(),
        "the killed {what} left <cache>/tmp holding {scratch:?}"
    );
}

/// The node image's two builds killed with SIGKILL: the rootfs script mid-way (a mount in its chroot), then the
/// node layer's build (through the Docker API, its context's work directory in `<cache>/tmp`); each is reaped, and the third attempt builds an image whose kubelet runs. The
/// Debian suite is named (bookworm, the default's packages) so the base is one of the test's own, rebuilt from
/// scratch and removed at the end, while the default images stay untouched.
#[test]
fn killed_node_image_builds_are_reaped_and_built_again() {
    assert!(
        common::docker_available(),
        "this test needs a running Docker engine (see `nodejoin doctor`)"
    );
    let suite = [("NODEJOIN_DEBIAN_SUITE", "bookworm")];
    let base = nodejoin::node::image::debootstrap_base_tag(&common::settings(), "bookworm").expect("the base recipe");
    let built = node_images_on(&base);
    let _ = Command::new("docker").arg("rmi").arg(&base).args(&built).output();
    let cache = common::hardlinked_cache();
    let started = Instant::now();

    let (mut child, reader) = spawn(cache.path(), &["image", "build"], &suite);
    let tmp = cache.path().join("tmp");
    wait_for(
        &mut child,
        Duration::from_secs(900),
        "a mount in the rootfs build's chroot",
        || !mounts_below(&tmp).is_empty(),
    );
    kill_and_reap(child, reader, cache.path(), "rootfs script");
    let killed_rootfs = started.elapsed();

    // The node layer is built through the Docker API: no process of ours runs it, so what is left to reap is its
    // work directory in `<cache>/tmp` (the context archive streamed to the engine).
    let building = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = building.clone();
    let (mut child, reader) = spawn_seeing(cache.path(), &["image", "build"], &suite, move |line| {
        if line.contains("node image") && line.contains("docker build") {
            seen.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let tmp = cache.path().join("tmp");
    let context_in = |tmp: &Path| {
        std::fs::read_dir(tmp)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains("-context-"))
            })
            .unwrap_or(false)
    };
    wait_for(&mut child, Duration::from_secs(1200), "the node layer's build", || {
        building.load(std::sync::atomic::Ordering::SeqCst) && context_in(&tmp)
    });
    // Into the engine's hands: the context is being sent or built.
    std::thread::sleep(Duration::from_secs(2));
    kill_and_reap(child, reader, cache.path(), "node image build");
    let killed_build = started.elapsed();

    let (mut child, reader) = spawn(cache.path(), &["image", "build"], &suite);
    let status = child.wait().expect("wait");
    let log = reader.join().unwrap_or_default();
    assert!(status.success(), "the build after the kills failed:\n{log}");
    let node = node_images_on(&base);
    assert_eq!(
        node.len(),
        1,
        "one node image on base {base} after the rebuild: {node:?}\n{log}"
    );
    let version = Command::new("docker")
        .args([
            "run",
            "--rm",
            "--entrypoint",
            "/usr/libexec/nodejoin/kubelet",
            &node[0],
            "--version",
        ])
        .output()
        .expect("docker run");
    let _ = Command::new("docker").arg("rmi").arg(&node[0]).arg(&base).output();
    assert!(
        String::from_utf8_lossy(&version.stdout).contains(nodejoin::assets::DEFAULT_VERSION),
        "the rebuilt image's kubelet: {}{}",
        String::from_utf8_lossy(&version.stdout),
        String::from_utf8_lossy(&version.stderr)
    );
    eprintln!(
        "rootfs killed at {killed_rootfs:.0?}, docker build killed at {killed_build:.0?}, rebuilt at {:.0?}",
        started.elapsed()
    );
}

/// A build through the Docker API that fails says why, with the build's own last lines (the step that failed).
#[test]
fn a_failed_api_build_quotes_the_engine_and_its_step() {
    assert!(common::docker_available(), "this test needs a running Docker engine");
    let ctx = tempfile::tempdir().unwrap();
    std::fs::write(
        ctx.path().join("Dockerfile"),
        "FROM scratch\nCOPY not-in-the-context /x\n",
    )
    .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let tag = format!("nodejoin-test-failed-build:{}", std::process::id());
    let err = rt
        .block_on(async {
            let docker = nodejoin::docker::connect().await?;
            nodejoin::docker::images::build(&common::settings(), &docker, ctx.path(), &tag, &[], &[]).await
        })
        .expect_err("a COPY of a missing file fails");
    let text = err.to_string();
    assert!(text.contains(&tag) && text.contains("not-in-the-context"), "{text}");
    assert!(
        text.contains("COPY not-in-the-context"),
        "the failed step is quoted: {text}"
    );
}
