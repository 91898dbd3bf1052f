//! A build killed with SIGKILL at any point leaves the next run correct (issue 28): the Kubernetes build's Go
//! processes are found by their owner mark and killed by the next start-up, its work directories go, and the next
//! run builds again instead of trusting half-written binaries. Runs in a cache directory of its own; Go's build
//! and module caches are shared, so the rebuild is mostly linking.
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn nodejoin(cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodejoin"));
    c.current_dir(nodejoin::paths::workspace_root())
        .env("NODEJOIN_CACHE_DIR", cache)
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
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("build Kubernetes") && line.contains("(1/4)") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
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
    let apiserver = cache.path().join("k8s").join(version).join("kube-apiserver");
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
