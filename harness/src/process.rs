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
        // One file per child (several control planes may run in one run).
        let pidfile = record_child(state_dir, name, pid, program).map_err(|e| Error::io(state_dir, e))?;
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

/// `git` for a repository nodejoin did not make (a user's, a named amazon-eks-ami checkout, a cache's), run as
/// root: the repository's own configuration can name programs git runs (`core.fsmonitor` on `status`, hooks on
/// `worktree add`), so those are turned off on the command line, which outranks it. `GIT_DIR` and
/// `GIT_WORK_TREE` from the environment are dropped.
pub fn git() -> std::process::Command {
    let mut c = std::process::Command::new("git");
    c.args(["-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null"])
        .args([
            "-c",
            "core.sshCommand=false",
            "-c",
            "diff.external=",
            "-c",
            "core.pager=cat",
        ])
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE");
    c
}

/// Random lower-case hex string of `len` characters: what makes the names of a run's objects unique.
pub fn random_hex(len: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..len)
        .map(|_| char::from_digit(rng.random_range(0..16), 16).unwrap_or('0'))
        .collect()
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

/// The fields of /proc/<pid>/stat after `comm` (which may contain anything, so they are read after the last
/// ')'): index 0 is the state, 1 the parent PID, 19 the start time.
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    if pid == 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// Is a process with this PID alive? A zombie (exited, not yet reaped by its parent) is not. Read from /proc,
/// which every user may read, never from kill(2), whose EPERM would make another user's process look dead.
pub fn alive(pid: u32) -> bool {
    match stat_fields(pid) {
        Some(f) => f.first().map(String::as_str) != Some("Z"),
        None => hidden(pid),
    }
}

/// Whether `pid` runs but /proc hides it from us (`hidepid=`: another user's process): kill(2) with no signal
/// then answers EPERM, never ESRCH. Such a process is never proven dead, so never reaped.
fn hidden(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only asks whether the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A process as the reaper proves it: its PID and its start time (clock ticks after boot), so a PID the kernel
/// has given to another process since is never taken for the one recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Identity {
    pub pid: u32,
    /// `None` for records that carry no start time: then the PID alone decides.
    pub start: Option<u64>,
}

impl Identity {
    /// The identity of a running process, if it runs.
    pub fn of(pid: u32) -> Option<Self> {
        let start = stat_fields(pid)?.get(19)?.parse().ok()?;
        Some(Self {
            pid,
            start: Some(start),
        })
    }

    /// This process.
    pub fn own() -> Self {
        let pid = std::process::id();
        Self::of(pid).unwrap_or(Self { pid, start: None })
    }

    /// Whether the process it names still runs (the same process: same PID and start time), not a zombie.
    pub fn alive(&self) -> bool {
        let Some(fields) = stat_fields(self.pid) else {
            // Hidden from us by `hidepid=`: its start time cannot be compared, and it is never taken for dead.
            return hidden(self.pid);
        };
        let running = fields.first().map(String::as_str) != Some("Z");
        let same = match self.start {
            Some(start) => fields.get(19).and_then(|s| s.parse::<u64>().ok()) == Some(start),
            None => true,
        };
        running && same
    }

    /// `pid:start` (labels and records); [`Identity::parse`] reads it back, and a bare PID.
    pub fn label(&self) -> String {
        match self.start {
            Some(start) => format!("{}:{start}", self.pid),
            None => self.pid.to_string(),
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let (pid, start) = match text.split_once(':') {
            Some((pid, start)) => (pid, Some(start.parse().ok()?)),
            None => (text, None),
        };
        Some(Self {
            pid: pid.parse().ok().filter(|p| *p > 0)?,
            start,
        })
    }
}

/// The environment mark of processes a nodejoin process starts for builds (`go build`, the rootfs script, and
/// everything they start, which inherits it): the owner's identity. The reaper kills marked processes whose
/// owner is gone, however deep in a build they were.
pub const OWNER_ENV: &str = crate::settings::var::OWNER;

/// Marks `cmd` (and what it starts) as this process's.
pub fn mark(cmd: &mut tokio::process::Command) {
    cmd.env(OWNER_ENV, Identity::own().label());
}

/// Processes whose environment carries [`OWNER_ENV`] naming an owner that no longer runs (only those this user
/// may read: another user's processes cannot be killed by this one either).
pub fn orphans_of_dead_owners() -> Vec<u32> {
    marked_where(|owner| !owner.alive())
}

/// Processes this process started for builds (and what they started), by their mark: what a signal's exit must
/// stop, as it leaves no destructor to do it.
pub fn marked_by_self() -> Vec<u32> {
    let me = Identity::own();
    marked_where(|owner| *owner == me)
}

fn marked_where(owner_matches: impl Fn(&Identity) -> bool) -> Vec<u32> {
    let me = std::process::id();
    let needle = format!("{OWNER_ENV}=");
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
                return false;
            };
            env.split(|b| *b == 0)
                .filter_map(|kv| std::str::from_utf8(kv).ok()?.strip_prefix(needle.as_str()))
                .filter_map(Identity::parse)
                .any(|owner| owner_matches(&owner))
        })
        .collect()
}

/// Records a child in `dir` as `<name>-<pid>.pid`: its identity and its program (canonical, as
/// /proc/<pid>/exe shows it), so the reaper kills it only while that PID is still this child. Returns the file.
pub fn record_child(dir: &Path, name: &str, pid: u32, program: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let file = dir.join(format!("{name}-{pid}.pid"));
    let exe = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    let id = Identity::of(pid).unwrap_or(Identity { pid, start: None });
    std::fs::write(&file, format!("{pid}\n{}\n{}\n", exe.display(), id.label()))?;
    Ok(file)
}

/// A record written by [`record_child`]: the identity and the program.
pub fn read_record(text: &str) -> Option<(Identity, String)> {
    let mut lines = text.lines();
    let pid: u32 = lines.next()?.trim().parse().ok()?;
    let program = lines.next()?.to_string();
    let id = lines
        .next()
        .and_then(Identity::parse)
        .filter(|id| id.pid == pid)
        .unwrap_or(Identity { pid, start: None });
    Some((id, program))
}

/// The parent PID of `pid`, from /proc/<pid>/stat (after the last ')', since comm may contain anything).
fn parent_of(pid: u32) -> Option<u32> {
    stat_fields(pid)?.get(1)?.parse().ok()
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
/// A TCP port held for a component this process starts: bound with SO_REUSEPORT but never listening, so the
/// component (started with its port-sharing flag, as the same user) binds it too and takes every connection,
/// while no other process can take the port between its choice and the component's bind (the kernel never
/// hands a held port out to a bind of port 0 or to an outgoing connection). Dropped once the component is gone.
pub struct HeldPort {
    _socket: socket2::Socket,
    pub port: u16,
}

impl HeldPort {
    /// A port of the kernel's choosing on `ip`, held until this is dropped.
    pub fn bind(ip: std::net::IpAddr) -> Result<Self> {
        use socket2::{Domain, Protocol, Socket, Type};
        let err = |e: std::io::Error| Error::ControlPlane {
            component: "ports".into(),
            message: format!("no free port on {ip}: {e}"),
        };
        let addr = std::net::SocketAddr::new(ip, 0);
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP)).map_err(err)?;
        socket.set_reuse_port(true).map_err(err)?;
        socket.bind(&addr.into()).map_err(err)?;
        let port = socket
            .local_addr()
            .map_err(err)?
            .as_socket()
            .map(|a| a.port())
            .ok_or_else(|| err(std::io::Error::other("not an IP socket")))?;
        Ok(Self { _socket: socket, port })
    }
}

#[cfg(test)]
mod tests {
    /// A repository whose own configuration names programs (issue 66: `core.fsmonitor` in a named amazon-eks-ami
    /// checkout ran as root on `git status`): the git nodejoin runs on it runs none of them.
    #[test]
    fn git_runs_nothing_a_repositorys_configuration_names() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let owned = tmp.path().join("owned");
        let plain = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .arg("-C")
                .arg(&repo)
                .args(args)
                .output()
                .unwrap();
            assert!(
                ok.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&ok.stderr)
            );
        };
        std::fs::create_dir(&repo).unwrap();
        plain(&["init", "-q"]);
        std::fs::write(repo.join("f"), "a").unwrap();
        plain(&["add", "f"]);
        plain(&[
            "-c",
            "user.email=a@b.invalid",
            "-c",
            "user.name=n",
            "commit",
            "-qm",
            "x",
        ]);
        std::fs::write(repo.join("f"), "b").unwrap();
        let planted = format!("touch {}; echo", owned.display());
        plain(&["config", "core.fsmonitor", &planted]);
        std::fs::create_dir(repo.join(".git/hooks-planted")).unwrap();
        let hook = repo.join(".git/hooks-planted/post-checkout");
        std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", owned.display())).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        plain(&["config", "core.hooksPath", ".git/hooks-planted"]);
        for args in [&["status", "--porcelain"][..], &["checkout", "-q", "-b", "other"][..]] {
            let out = super::git().arg("-C").arg(&repo).args(args).output().unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            assert!(
                !owned.exists(),
                "git {args:?} ran what the repository's configuration names"
            );
        }
        // The control: plain git runs it.
        let _ = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["status"])
            .output();
        assert!(
            owned.exists(),
            "the planted configuration does nothing: the test proves nothing"
        );
    }

    use super::*;

    #[test]
    fn a_held_port_is_refused_to_others_and_shared_with_its_component() {
        use std::io::{Read, Write};
        let held = HeldPort::bind("127.0.0.1".parse().unwrap()).unwrap();
        let taken = std::net::TcpListener::bind(("127.0.0.1", held.port));
        assert_eq!(
            taken.map(|_| ()).map_err(|e| e.kind()),
            Err(std::io::ErrorKind::AddrInUse),
            "a process without port sharing took the held port"
        );
        // The component: SO_REUSEPORT, listening; every connection reaches it, none the holder.
        use socket2::{Domain, Socket, Type};
        let component = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        component.set_reuse_port(true).unwrap();
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], held.port).into();
        component.bind(&addr.into()).unwrap();
        component.listen(8).unwrap();
        let listener: std::net::TcpListener = component.into();
        for _ in 0..4 {
            let mut client = std::net::TcpStream::connect(addr).unwrap();
            client.write_all(b"x").unwrap();
            let (mut conn, _) = listener.accept().unwrap();
            let mut b = [0u8; 1];
            conn.read_exact(&mut b).unwrap();
        }
    }

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

    #[test]
    fn an_identity_is_a_pid_and_its_start_time() {
        let me = Identity::own();
        assert!(me.start.is_some() && me.alive());
        assert_eq!(Identity::parse(&me.label()), Some(me));
        let reused = Identity {
            start: me.start.map(|s| s + 1),
            ..me
        };
        assert!(
            !reused.alive(),
            "the same PID with another start time is another process"
        );
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let id = Identity::of(child.id()).unwrap();
        assert!(id.alive());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!id.alive());
        assert_eq!(Identity::parse("12"), Some(Identity { pid: 12, start: None }));
        assert_eq!(Identity::parse("0"), None);
        assert_eq!(Identity::parse("12:x"), None);
    }

    #[test]
    fn a_record_names_its_process_by_identity() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let file = record_child(dir.path(), "etcd", me, Path::new("/proc/self/exe")).unwrap();
        let (id, _) = read_record(&std::fs::read_to_string(file).unwrap()).unwrap();
        assert_eq!(id, Identity::own());
        // An older record (PID and program only) is still read.
        assert_eq!(
            read_record("12\n/bin/x\n").unwrap().0,
            Identity { pid: 12, start: None }
        );
    }

    #[test]
    fn orphans_of_a_recorded_child_are_found_by_their_mark() {
        let dead = Identity {
            pid: std::process::id(),
            start: Identity::own().start.map(|s| s + 1),
        };
        let mut orphan = std::process::Command::new("sleep")
            .arg("30")
            .env(OWNER_ENV, dead.label())
            .spawn()
            .unwrap();
        let mut ours = std::process::Command::new("sleep")
            .arg("30")
            .env(OWNER_ENV, Identity::own().label())
            .spawn()
            .unwrap();
        let found = orphans_of_dead_owners();
        assert!(found.contains(&orphan.id()), "{found:?}");
        assert!(!found.contains(&ours.id()), "a live owner's process is not an orphan");
        for c in [&mut orphan, &mut ours] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}
