//! Every wait on something outside the harness (a child process, a `docker exec` output stream, another
//! process's lock) has a deadline and a name, so a hang ends as an `Error::Timeout` that says what was waited
//! for, instead of a run that never ends. The deadlines are generous: they bound hangs, not slow machines.
use crate::error::{Error, Result};
use std::future::Future;
use std::process::Output;
use std::time::{Duration, Instant};

/// A short command in a node container: a file read, a journal, a systemd probe, `find`, `ctr images ls`.
pub const NODE_EXEC: Duration = Duration::from_secs(120);
/// A Go build (Kubernetes binaries, nodeadm, aws-iam-authenticator, crictl, kind): ~10 minutes cold on a
/// 2-core machine, so three times that.
pub const GO_BUILD: Duration = Duration::from_secs(30 * 60);
/// Building an image: debootstrap of the node base, `docker build`, `docker import`.
pub const IMAGE_BUILD: Duration = Duration::from_secs(30 * 60);
/// `kind create cluster` (it waits up to 120 s for the control plane itself, after starting the node).
pub const KIND_CREATE: Duration = Duration::from_secs(10 * 60);
/// A short Docker API call (an inspect, a container's logs, a `cat` run in a container) or `kind delete cluster`.
pub const DOCKER_CALL: Duration = Duration::from_secs(120);
/// A one-shot probe of a local program, such as `kubelet --version`.
pub const TOOL_PROBE: Duration = Duration::from_secs(30);
/// systemd finishing its boot in a node container: about 1 s alone, 50 s for 50 nodes started at once on 2 cores.
pub const SYSTEMD_BOOT: Duration = Duration::from_secs(120);
/// A machine's bootstrap, which its boot starts (cloud-init's stages, nodeadm): about a minute under QEMU TCG
/// alone, over 90 s beside other scenarios on 2 cores. A negative scenario's `within` is the window watched after
/// it, so it bounds the bootstrap before that window only when longer.
pub const MACHINE_BOOTSTRAP: Duration = Duration::from_secs(10 * 60);
/// etcd, kube-apiserver or kube-controller-manager of the local provider getting ready: ~10 s here, 40-55 s in
/// an emulated (QEMU TCG) guest and over 90 s there on a loaded host. A process that exits fails at once.
pub const CONTROL_PLANE_START: Duration = Duration::from_secs(5 * 60);
/// A dockerd nodejoin started must answer within this (it usually does in 1-3 s).
pub const DOCKERD_START: Duration = Duration::from_secs(60);
/// Waiting for another process that holds a cache lock (it may be building what the lock guards).
pub const CACHE_LOCK: Duration = Duration::from_secs(45 * 60);
/// Installing the host's missing Debian packages (`apt-get update` or `install`: a dead mirror must not hang a
/// run).
pub const APT: Duration = Duration::from_secs(15 * 60);
/// A git command on the user's repository (`compare`'s worktree, its prune).
pub const GIT: Duration = Duration::from_secs(5 * 60);
/// The clean-up after SIGINT, SIGTERM or SIGHUP: whatever is left after this, `nodejoin reap` removes.
pub const CLEANUP: Duration = Duration::from_secs(120);

/// `fut`, or `Error::Timeout` naming `what` if it has not finished after `after`.
pub async fn within<T>(what: impl Into<String>, after: Duration, fut: impl Future<Output = Result<T>>) -> Result<T> {
    match tokio::time::timeout(after, fut).await {
        Ok(result) => result,
        Err(_) => Err(Error::Timeout {
            what: what.into(),
            after,
        }),
    }
}

/// Runs `cmd` to completion and collects its output, killing it and every process it started if it has not
/// finished after `after` (a build script's `go` outlives a killed `bash` otherwise).
pub async fn output(cmd: &mut tokio::process::Command, what: &str, after: Duration) -> Result<Output> {
    output_recorded(cmd, what, after, None).await
}

/// `output`, recording the child in `record` (a run's pids directory: `<name>-<pid>.pid` holding the PID and the
/// program) while it runs, so the reaper kills it, and what it started, if the run is killed meanwhile.
pub async fn output_recorded(
    cmd: &mut tokio::process::Command,
    what: &str,
    after: Duration,
    record: Option<(&std::path::Path, &str, &std::path::Path)>,
) -> Result<Output> {
    let process_err = |message: String| Error::Process {
        what: what.to_string(),
        message,
    };
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| process_err(format!("cannot start: {e}")))?;
    let pid = child.id();
    let pidfile = match (record, pid) {
        (Some((dir, name, program)), Some(pid)) => Some(
            crate::process::record_child(dir, name, pid, program)
                .map_err(|e| process_err(format!("cannot record its PID in {}: {e}", dir.display())))?,
        ),
        _ => None,
    };
    let _forget = pidfile.map(crate::process::RemoveOnDrop);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    // The child stays owned out here, so after a timeout it is still there to find its descendants from.
    let collected = tokio::time::timeout(after, async {
        let (out, err, status) = tokio::join!(drain(stdout), drain(stderr), child.wait());
        Ok::<_, std::io::Error>(Output {
            status: status?,
            stdout: out?,
            stderr: err?,
        })
    })
    .await;
    match collected {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => Err(process_err(e.to_string())),
        Err(_) => {
            if let Some(pid) = pid {
                crate::process::kill_tree(pid);
            }
            let _ = child.kill().await;
            Err(Error::Timeout {
                what: what.to_string(),
                after,
            })
        }
    }
}

/// Everything a child's pipe gives until it closes.
async fn drain(pipe: Option<impl tokio::io::AsyncRead + Unpin>) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    if let Some(mut p) = pipe {
        p.read_to_end(&mut buf).await?;
    }
    Ok(buf)
}

/// The blocking form of `output`, for the few synchronous callers (container state probes): polls the child
/// until it exits or `after` has passed, then kills it.
pub fn output_blocking(cmd: &mut std::process::Command, what: &str, after: Duration) -> Result<Output> {
    let process_err = |message: String| Error::Process {
        what: what.to_string(),
        message,
    };
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| process_err(format!("cannot start: {e}")))?;
    // The pipes are drained on threads so a chatty child never blocks on a full pipe while we poll.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    let status = loop {
        match child.try_wait().map_err(|e| process_err(e.to_string()))? {
            Some(status) => break status,
            None if start.elapsed() >= after => {
                crate::process::kill_tree(child.id());
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout {
                    what: what.to_string(),
                    after,
                });
            }
            None => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(200));
            }
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_future_that_finishes_in_time_keeps_its_result() {
        let v = within("a quick thing", Duration::from_secs(5), async { Ok(7) }).await;
        assert_eq!(v.unwrap(), 7);
        let e = within("a failing thing", Duration::from_secs(5), async {
            Err::<(), _>(Error::Docker("boom".into()))
        })
        .await
        .unwrap_err();
        assert!(matches!(e, Error::Docker(_)), "its own error, not a timeout: {e}");
    }

    #[tokio::test]
    async fn a_hang_becomes_a_named_timeout() {
        let start = Instant::now();
        let e = within(
            "the journal of node n-1",
            Duration::from_millis(50),
            futures::future::pending::<Result<()>>(),
        )
        .await
        .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_eq!(e.to_string(), "the journal of node n-1 did not finish within 50ms");
        assert!(e.hint().contains("deadline"), "{}", e.hint());
    }

    #[tokio::test]
    async fn a_child_past_its_deadline_is_killed_with_its_children() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("grandchild.pid");
        // bash starts a grandchild (as a build script starts `go`) and waits for it.
        let script = format!("sleep 300 & echo $! > {}; wait", pidfile.display());
        let start = Instant::now();
        let e = output(
            tokio::process::Command::new("bash").args(["-c", &script]),
            "a hanging build",
            Duration::from_millis(500),
        )
        .await
        .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        let grandchild: u32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
        let gone = (0..50).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            !crate::process::alive(grandchild)
        });
        assert!(gone, "the grandchild {grandchild} outlived the deadline");
    }

    #[tokio::test]
    async fn a_child_in_time_gives_its_output() {
        let out = output(
            tokio::process::Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            "sh",
            Duration::from_secs(10),
        )
        .await
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
        assert_eq!(out.status.code(), Some(3));
    }

    #[test]
    fn the_blocking_form_bounds_and_collects() {
        let out = output_blocking(
            std::process::Command::new("sh").args(["-c", "echo hi"]),
            "sh",
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
        let start = Instant::now();
        let e = output_blocking(
            std::process::Command::new("sleep").arg("300"),
            "docker inspect of a hung engine",
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(
            e.to_string(),
            "docker inspect of a hung engine did not finish within 300ms"
        );
        let e = output_blocking(
            &mut std::process::Command::new("/nonexistent/program"),
            "a missing program",
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert!(e.to_string().contains("a missing program: cannot start"), "{e}");
    }
}
