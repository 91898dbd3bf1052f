//! Child processes (etcd, kube-apiserver, kube-controller-manager) owned by RAII guards.
//!
//! Each child's PID is written to the run's state directory so that a later start-up can kill it if this
//! process died without running destructors (SIGKILL, OOM); see `reaper`.
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// A supervised child: killed (SIGTERM, then SIGKILL) when dropped.
pub struct Supervised {
    pub name: String,
    pub log: PathBuf,
    child: tokio::process::Child,
    pidfile: PathBuf,
}

impl Supervised {
    /// Starts `program args` with stdout and stderr appended to `<log_dir>/<name>.log`.
    pub fn spawn(name: &str, program: &Path, args: &[String], log_dir: &Path, state_dir: &Path) -> Result<Self> {
        let log = log_dir.join(format!("{name}.log"));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| Error::io(&log, e))?;
        let err_file = file.try_clone().map_err(|e| Error::io(&log, e))?;
        std::fs::write(log_dir.join(format!("{name}.args")), args.join("\n")).map_err(|e| Error::io(log_dir, e))?;
        let child = tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err_file))
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::ControlPlane {
                component: name.to_string(),
                message: format!("cannot start {}: {e}", program.display()),
            })?;
        let pid = child.id().unwrap_or(0);
        std::fs::create_dir_all(state_dir).map_err(|e| Error::io(state_dir, e))?;
        // One file per child (several control planes may run in one run); the program path is canonical so the
        // reaper can compare it with /proc/<pid>/exe.
        let pidfile = state_dir.join(format!("{name}-{pid}.pid"));
        let exe = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
        std::fs::write(&pidfile, format!("{pid}\n{}\n", exe.display())).map_err(|e| Error::io(&pidfile, e))?;
        Ok(Self {
            name: name.to_string(),
            log,
            child,
            pidfile,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `Some(status)` when the child has exited.
    pub fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            Ok(None) => None,
            Err(e) => Some(e.to_string()),
        }
    }

    /// The last `lines` lines of the child's log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log, lines)
    }

    /// Resident memory in KiB (from /proc), for the report.
    pub fn rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?)).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// Stops the child: SIGTERM, up to `grace` to exit, then SIGKILL.
    pub async fn stop(&mut self, grace: std::time::Duration) {
        if let Some(pid) = self.child.id() {
            // SAFETY: plain kill(2) on our own child's PID.
            unsafe {
                libc::kill(pid as i32, libc::SIGTERM);
            }
            if tokio::time::timeout(grace, self.child.wait()).await.is_err() {
                let _ = self.child.kill().await;
            }
        }
        let _ = std::fs::remove_file(&self.pidfile);
    }
}

impl Drop for Supervised {
    fn drop(&mut self) {
        // kill_on_drop sends SIGKILL; the pidfile goes so the reaper does not look for it.
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.pidfile);
    }
}

/// The last `lines` lines of a text file ("" when unreadable).
pub fn tail(path: &Path, lines: usize) -> String {
    last_lines(&std::fs::read_to_string(path).unwrap_or_default(), lines, "\n")
}

/// The last `n` lines of `text`, joined with `sep`.
pub fn last_lines(text: &str, n: usize, sep: &str) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(n)..].join(sep)
}

/// Is a process with this PID alive? A zombie (exited, not yet reaped by its parent) is not.
pub fn alive(pid: u32) -> bool {
    // SAFETY: kill(pid, 0) only checks for existence and permission.
    if pid == 0 || unsafe { libc::kill(pid as i32, 0) } != 0 {
        return false;
    }
    // /proc/<pid>/stat: "pid (comm) STATE ..."; comm may contain spaces, so read after the last ')'.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}

/// The parent PID of `pid`, from /proc/<pid>/stat (after the last ')', since comm may contain anything).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Removes a file when dropped (a PID record whose process has ended).
pub struct RemoveOnDrop(pub std::path::PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Kills `pid` and every process descended from it (SIGKILL): a timed-out `bash build.sh` must not leave its
/// `go build` running. Descendants are collected first, so none is reparented away mid-walk.
pub fn kill_tree(pid: u32) {
    let mut tree = vec![pid];
    let mut all: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|p| Some((p, parent_of(p)?)))
        .collect();
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        let (children, rest): (Vec<_>, Vec<_>) = all.into_iter().partition(|(_, pp)| *pp == parent);
        tree.extend(children.into_iter().map(|(p, _)| p));
        all = rest;
        i += 1;
    }
    for p in tree {
        // SAFETY: kill(2) on processes we started (the child and its descendants).
        unsafe {
            libc::kill(p as i32, libc::SIGKILL);
        }
    }
}

/// A free TCP port on `ip` (bound and released; the caller binds it right away).
pub fn free_port(ip: std::net::IpAddr) -> Result<u16> {
    std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::ControlPlane {
            component: "ports".into(),
            message: format!("no free port on {ip}: {e}"),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness() {
        assert!(alive(std::process::id()));
        assert!(!alive(0));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!alive(pid), "an exited, unreaped child is a zombie, not alive");
        child.wait().unwrap();
        assert!(!alive(pid));
    }
}
