//! Host sysctls a node's kubelet needs. They are not namespaced, so a node's values are the host's. Nodes see
//! `/proc/sys` read-only (all but `net/`, which is per network namespace: see `node::privileges`), so the
//! kubelet (whose `protectKernelDefaults: true`, as nodeadm configures it, refuses other values) must find them
//! already set: a run sets them on the host itself before its first node starts, having recorded what was there.
//! The last run out puts the recorded values back.
//!
//! The record and the list of live runs are host-wide (`/run/nodejoin` for root, who alone can change the host's
//! sysctls), never per cache directory, so runs with different caches and users overlapping in any order leave
//! the host as the first found it.
use crate::process::Identity;
use crate::settings::Settings;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The kubelet's kernel settings (its `setupKernelTunables`), as EKS AMIs ship them in sysctl.d.
pub const KUBELET_VALUES: &[(&str, &str)] = &[
    ("vm/overcommit_memory", "1"),
    ("vm/panic_on_oom", "0"),
    ("kernel/panic", "10"),
    ("kernel/panic_on_oops", "1"),
    ("kernel/keys/root_maxkeys", "1000000"),
    ("kernel/keys/root_maxbytes", "25000000"),
];

/// Where the host-wide record lives: `/run/nodejoin` when this process may write there (root), else the cache
/// directory (a user who cannot write `/run` cannot change the host's sysctls either).
pub fn host_state_dir(settings: &Settings) -> PathBuf {
    let run = Path::new("/run/nodejoin");
    if std::fs::create_dir_all(run).is_ok() && owned_by_root(run) {
        return run.to_path_buf();
    }
    crate::paths::cache_dir(settings)
}

/// Whether `dir` is a real directory of root's (not a link, not a directory someone else made first).
fn owned_by_root(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == 0)
}

/// The host-wide state: the record, the live runs and the lock that guards both.
struct HostState {
    dir: PathBuf,
}

impl HostState {
    fn new(dir: PathBuf) -> Self {
        Self { dir }
    }

    fn baseline_file(&self) -> PathBuf {
        self.dir.join("sysctl-baseline")
    }

    fn live_dir(&self) -> PathBuf {
        self.dir.join("sysctl-runs")
    }

    fn lock(&self) -> std::io::Result<std::fs::File> {
        use std::os::unix::io::AsRawFd;
        std::fs::create_dir_all(&self.dir)?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join("sysctl.lock"))?;
        // SAFETY: flock on a descriptor we own; blocks until the lock is free (held for a few file operations).
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(file)
    }

    /// The runs registered and still alive, other than `me`; dead ones are forgotten.
    /// Every registered run: its name and its owner, if the record names one.
    fn registered(&self) -> Vec<(String, PathBuf, Option<Identity>)> {
        let Ok(entries) = std::fs::read_dir(self.live_dir()) else {
            return Vec::new();
        };
        entries
            .flatten()
            .map(|e| {
                let owner = std::fs::read_to_string(e.path()).ok().and_then(|t| Identity::parse(&t));
                (e.file_name().to_string_lossy().to_string(), e.path(), owner)
            })
            .collect()
    }

    /// The registered runs still alive, other than `me`; dead ones are forgotten.
    fn others_alive(&self, me: Option<&str>) -> usize {
        let mut alive = 0;
        for (name, path, owner) in self.registered() {
            if Some(name.as_str()) == me {
                continue;
            }
            if owner.is_some_and(|o| o.alive()) {
                alive += 1;
            } else {
                let _ = std::fs::remove_file(path);
            }
        }
        alive
    }

    /// Records the baseline when no other run is alive (else the first run's record stands), registers `run`, and
    /// sets the kubelet's values. Returns the keys it changed, as `key before -> after`.
    fn enter(&self, run: &str, at: &Path) -> Vec<String> {
        let Ok(_lock) = self.lock() else {
            return Vec::new();
        };
        if self.others_alive(Some(run)) == 0 || !self.baseline_file().exists() {
            let text: String = read(at).iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            let _ = crate::paths::write_private(&self.baseline_file(), text.as_bytes());
        }
        let _ = std::fs::create_dir_all(self.live_dir());
        let _ = std::fs::write(self.live_dir().join(run), Identity::own().label());
        write_values(at, KUBELET_VALUES.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    /// Unregisters `run` (if given) and, when no other run is alive, restores the baseline and forgets it.
    fn leave(&self, run: Option<&str>, at: &Path) -> Vec<String> {
        let Ok(_lock) = self.lock() else {
            return Vec::new();
        };
        if let Some(run) = run {
            let _ = std::fs::remove_file(self.live_dir().join(run));
        }
        if self.others_alive(run) > 0 {
            return Vec::new();
        }
        let Ok(text) = std::fs::read_to_string(self.baseline_file()) else {
            return Vec::new();
        };
        let restored = write_values(at, parse(&text));
        let _ = std::fs::remove_file(self.baseline_file());
        restored
    }
}

/// The host's values of the keys we own, read under `at` (`/proc/sys`).
fn read(at: &Path) -> BTreeMap<String, String> {
    KUBELET_VALUES
        .iter()
        .filter_map(|(k, _)| {
            std::fs::read_to_string(at.join(k))
                .ok()
                .map(|v| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// A record read back: only keys we own with numeric values (a record is a file on disk; a key such as
/// `../../etc/x` must never become a path we write).
fn parse(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| KUBELET_VALUES.iter().any(|(owned, _)| owned == k))
        .filter(|(_, v)| {
            !v.trim().is_empty()
                && v.split_whitespace()
                    .all(|n| n.trim_start_matches('-').parse::<u64>().is_ok())
        })
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// Writes every value that differs now; returns what changed.
fn write_values(at: &Path, values: impl IntoIterator<Item = (String, String)>) -> Vec<String> {
    let mut changed = Vec::new();
    for (k, v) in values {
        let path = at.join(&k);
        // A key this kernel lacks is left alone.
        let Ok(now) = std::fs::read_to_string(&path).map(|s| s.trim().to_string()) else {
            continue;
        };
        if now != v && std::fs::write(&path, &v).is_ok() {
            changed.push(format!("{} {now} -> {v}", k.replace('/', ".")));
        }
    }
    changed
}

/// The values a live run recorded before it set the kubelet's (leak checks compare them with [`current`] after
/// the last run ends).
pub fn baseline(settings: &Settings) -> Option<BTreeMap<String, String>> {
    let state = HostState::new(host_state_dir(settings));
    std::fs::read_to_string(state.baseline_file()).ok().map(|t| parse(&t))
}

/// How many runs registered with the host-wide record are alive.
pub fn live_runs(settings: &Settings) -> usize {
    let state = HostState::new(host_state_dir(settings));
    match state.lock() {
        Ok(_lock) => state.others_alive(None),
        Err(_) => 0,
    }
}

/// Whether a run of another nodejoin process is registered and alive (what it may be about to start from must
/// not be pruned under it).
pub fn other_processes_run(settings: &Settings) -> bool {
    let me = std::process::id();
    HostState::new(host_state_dir(settings))
        .registered()
        .into_iter()
        .filter_map(|(_, _, owner)| owner)
        .any(|owner| owner.pid != me && owner.alive())
}

/// The host's values now, of the sysctls the kubelet needs.
pub fn current() -> BTreeMap<String, String> {
    read(Path::new("/proc/sys"))
}

/// Restores the baseline if no registered run is alive any more (the reaper, after a killed run).
pub fn restore_if_last(settings: &Settings) {
    let restored = HostState::new(host_state_dir(settings)).leave(None, Path::new("/proc/sys"));
    if !restored.is_empty() {
        tracing::info!(?restored, "restored the host sysctls nodejoin set for the kubelet");
    }
}

/// Unregisters `run` and restores if it was the last (the Ctrl-C path, where destructors do not run).
pub fn leave(settings: &Settings, run: &str) {
    leave_in(host_state_dir(settings), run);
}

fn leave_in(dir: PathBuf, run: &str) {
    let restored = HostState::new(dir).leave(Some(run), Path::new("/proc/sys"));
    if !restored.is_empty() {
        tracing::info!(?restored, "restored the host sysctls nodejoin set for the kubelet");
    }
}

/// Held by a run while it has nodes: the host carries the kubelet's values; on drop the last run out puts the
/// recorded ones back.
pub struct SysctlGuard {
    run: String,
    dir: PathBuf,
}

impl SysctlGuard {
    pub fn enter(settings: &Settings, run: &str) -> Self {
        let dir = host_state_dir(settings);
        let changed = HostState::new(dir.clone()).enter(run, Path::new("/proc/sys"));
        if !changed.is_empty() {
            tracing::info!(
                ?changed,
                "set the host sysctls the kubelet needs (restored by the last run out)"
            );
        }
        SysctlGuard {
            run: run.to_string(),
            dir,
        }
    }
}

impl Drop for SysctlGuard {
    fn drop(&mut self) {
        leave_in(self.dir.clone(), &self.run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(values: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (k, v) in values {
            let p = dir.path().join(k);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{v}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn only_owned_keys_and_numbers_are_read_back() {
        let m = parse("kernel/panic=0\nvm/overcommit_memory=0\n../../etc/passwd=1\nkernel/panic_on_oops=x\n");
        assert_eq!(
            m,
            BTreeMap::from([
                ("kernel/panic".to_string(), "0".to_string()),
                ("vm/overcommit_memory".to_string(), "0".to_string()),
            ])
        );
    }

    /// Two overlapping runs, the first out before the second: the host ends as the first found it, and carries
    /// the kubelet's values while either runs.
    #[test]
    fn overlapping_runs_leave_the_host_as_the_first_found_it() {
        let before = [
            ("vm/overcommit_memory", "0"),
            ("kernel/panic", "0"),
            ("kernel/panic_on_oops", "0"),
        ];
        let proc = fake_proc(&before);
        let state_dir = tempfile::tempdir().unwrap();
        let state = HostState::new(state_dir.path().to_path_buf());
        let changed = state.enter("a", proc.path());
        assert_eq!(changed.len(), 3, "{changed:?}");
        assert_eq!(read(proc.path())["kernel/panic"], "10");
        state.enter("b", proc.path());
        // The second run must not take the first's values for the host's.
        assert_eq!(
            parse(&std::fs::read_to_string(state.baseline_file()).unwrap())["kernel/panic"],
            "0"
        );
        assert!(state.leave(Some("a"), proc.path()).is_empty(), "b still runs");
        assert_eq!(read(proc.path())["kernel/panic"], "10");
        state.leave(Some("b"), proc.path());
        for (k, v) in before {
            assert_eq!(read(proc.path())[k], v, "{k}");
        }
        assert!(!state.baseline_file().exists());
    }

    /// A run killed without leaving is found dead by its identity, and the next one out restores.
    #[test]
    fn a_dead_runs_registration_does_not_hold_the_host() {
        let proc = fake_proc(&[("kernel/panic", "0")]);
        let state_dir = tempfile::tempdir().unwrap();
        let state = HostState::new(state_dir.path().to_path_buf());
        state.enter("killed", proc.path());
        std::fs::write(state.live_dir().join("killed"), "999999999:1").unwrap();
        state.leave(None, proc.path());
        assert_eq!(read(proc.path())["kernel/panic"], "0");
    }
}
