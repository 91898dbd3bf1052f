//! Start-up reaping: whatever a killed earlier run left behind (child processes, containers, networks) is
//! removed before a new run starts. Each run records its owner PID and its children's PIDs under
//! `<cache>/runs/<run-id>/`; Docker objects carry the run id and owner PID as labels.
use crate::docker;
use crate::error::{Error, Result};
use crate::process::Identity;
use crate::settings::Settings;
use std::path::{Path, PathBuf};

mod records;
pub use records::{mark as mark_artifacts, MARKER_FILE};

/// The on-disk record of a live run; removed when dropped.
pub struct RunState {
    pub run_id: String,
    pub dir: PathBuf,
}

fn runs_dir(settings: &Settings) -> PathBuf {
    crate::paths::cache_dir(settings).join("runs")
}

impl RunState {
    /// The run directory appears whole, owner and artifacts directory recorded, by a rename: a reaper never sees
    /// it without its owner, and redacts the artifacts wherever the run wrote them.
    pub fn create(settings: &Settings, run_id: &str, artifacts: &Path) -> Result<Self> {
        let runs = runs_dir(settings);
        let dir = runs.join(run_id);
        let staging = runs.join(format!(".new-{run_id}"));
        std::fs::create_dir_all(staging.join("pids")).map_err(|e| Error::io(&staging, e))?;
        std::fs::write(staging.join(OWNER_FILE), Identity::own().label()).map_err(|e| Error::io(&staging, e))?;
        std::fs::write(staging.join(records::BOOT_FILE), records::boot_id()).map_err(|e| Error::io(&staging, e))?;
        let artifacts = std::path::absolute(artifacts).map_err(|e| Error::io(artifacts, e))?;
        std::fs::write(staging.join(ARTIFACTS_FILE), artifacts.as_os_str().as_encoded_bytes())
            .map_err(|e| Error::io(&staging, e))?;
        std::fs::rename(&staging, &dir).map_err(|e| Error::io(&dir, e))?;
        Ok(Self {
            run_id: run_id.to_string(),
            dir,
        })
    }

    pub fn pids_dir(&self) -> PathBuf {
        self.dir.join("pids")
    }
}

impl Drop for RunState {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The file in a run directory that names its owner (`pid:start`, see [`Identity`]).
const OWNER_FILE: &str = "owner.pid";

/// The file in a run directory that names where the run writes its artifacts (`NODEJOIN_ARTIFACTS_DIR` may
/// differ between the run and the one that reaps it).
const ARTIFACTS_FILE: &str = "artifacts";

/// Redacts the keys and tokens in the artifacts of the run whose record is `dir` (named `run`): where the record
/// says, else under this process's artifacts root. Only a real directory holding the run's own marker is walked
/// (never a link, never a directory a record merely names), and `redact_tree` follows no link below it.
fn redact_artifacts(artifacts_root: &Path, dir: &Path, run: &str) -> usize {
    let recorded = std::fs::read(dir.join(ARTIFACTS_FILE))
        .ok()
        .map(|b| PathBuf::from(std::ffi::OsString::from(String::from_utf8_lossy(&b).into_owned())))
        .filter(|p| p.is_absolute());
    let artifacts = recorded.unwrap_or_else(|| artifacts_root.join(run));
    if records::marked(&artifacts, run) {
        crate::redact::redact_tree(&artifacts)
    } else {
        0
    }
}

/// The owner a run directory names, if it names one.
fn owner_of(dir: &Path) -> Option<Identity> {
    Identity::parse(&std::fs::read_to_string(dir.join(OWNER_FILE)).ok()?)
}

/// Kills the processes recorded for a run (only while the PID is still the recorded process: same start time,
/// same program).
fn kill_recorded(dir: &std::path::Path) -> usize {
    let mut killed = 0;
    let Ok(entries) = std::fs::read_dir(dir.join("pids")) else {
        return 0;
    };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let Some((id, program)) = crate::process::read_record(&text) else {
            continue;
        };
        if !id.alive() {
            continue;
        }
        let pid = id.pid;
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        if exe
            .as_deref()
            .map(|e| e.to_string_lossy().trim_end_matches(" (deleted)").to_string())
            == Some(program.to_string())
        {
            // With what it started: a recorded `kind create` may be running `docker run` itself.
            crate::process::kill_tree(pid);
            killed += 1;
        }
    }
    killed
}

/// What start-up reaping removed.
#[derive(Debug, Default)]
pub struct Reaped {
    pub processes: usize,
    pub docker_objects: usize,
    pub runs: Vec<String>,
}

/// Builds of owners that are gone: their marked processes killed, their work directories in `<cache>/tmp`
/// unmounted and removed. Returns how many processes were killed.
fn reap_builds(settings: &Settings) -> usize {
    let orphans = crate::process::orphans_of_dead_owners();
    for pid in &orphans {
        crate::process::kill_tree(*pid);
    }
    let Ok(entries) = std::fs::read_dir(crate::paths::scratch_root(settings)) else {
        return orphans.len();
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        let Some(owner) = crate::paths::owner_of_scratch(&name) else {
            continue;
        };
        if owner.alive() {
            continue;
        }
        // Only a work directory this user made and alone may write: its unmounts and its `worktree-of` (a git
        // run in the repository it names) are acted on.
        if !records::own_private_dir(&e.path()) {
            tracing::warn!(dir = %e.path().display(), "a work directory nodejoin did not make: left alone");
            continue;
        }
        remove_work_dir(&e.path());
    }
    orphans.len()
}

/// On a termination signal's exit (no destructor runs): this process's builds stopped and its work
/// directories removed, as the next start-up would for a killed process.
pub fn leave_own_work(settings: &Settings) {
    for pid in crate::process::marked_by_self() {
        crate::process::kill_tree(pid);
    }
    let me = crate::process::Identity::own();
    let Ok(entries) = std::fs::read_dir(crate::paths::scratch_root(settings)) else {
        return;
    };
    for e in entries.flatten() {
        if crate::paths::owner_of_scratch(&e.file_name().to_string_lossy()) == Some(me) {
            remove_work_dir(&e.path());
        }
    }
}

/// The file in a work directory naming the git repository it holds a worktree of (`compare` at a revision).
pub const WORKTREE_REPO_FILE: &str = "worktree-of";

/// Removes a work directory: what is mounted in it first, and a compare worktree's registration in the user's
/// repository after (`git worktree prune` forgets worktrees whose directory is gone).
fn remove_work_dir(dir: &Path) {
    unmount_below(dir);
    let repo = std::fs::read_to_string(dir.join(WORKTREE_REPO_FILE)).ok();
    let _ = std::fs::remove_dir_all(dir);
    if let Some(repo) = repo.map(|r| r.trim().to_string()).filter(|r| !r.is_empty()) {
        let _ = crate::deadline::output_blocking(
            crate::process::git().args(["-C", &repo, "worktree", "prune"]),
            "git worktree prune",
            crate::deadline::GIT,
        );
    }
}

/// Detaches every mount at or below `dir` (deepest first): a killed rootfs script leaves its /proc mounted.
pub(crate) fn unmount_below(dir: &Path) {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let mut points: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape_mount_point)
        .filter(|p| p.starts_with(dir))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for p in points {
        if let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) {
            // SAFETY: umount2 with a NUL-terminated path we own.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// A mount point as mountinfo writes it: the kernel escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mount_point(field: &str) -> PathBuf {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |v, c| v.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    use std::os::unix::ffi::OsStringExt;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Reaps runs whose owner process is gone. `docker` may be absent (then only processes are reaped).
pub async fn reap_stale(settings: &Settings, docker: Option<&crate::docker::Docker>) -> Reaped {
    let mut reaped = Reaped::default();
    reaped.processes += reap_builds(settings);
    if let Ok(entries) = std::fs::read_dir(runs_dir(settings)) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if owner_of(&entry.path()).is_some_and(|o| o.alive()) {
                continue;
            }
            if name.starts_with(".new-") {
                // A run directory whose owner died while creating it (or one being created this instant,
                // whose owner file is not written yet: left for the next reaper).
                if owner_of(&entry.path()).is_some() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
                continue;
            }
            if let Some(why) = records::distrust(&entry.path(), &name) {
                // Not this host's record from this boot: nothing it names is killed, removed or rewritten.
                tracing::warn!(record = %entry.path().display(), "a run record nodejoin cannot vouch for ({why}): removed, nothing done for it");
                let _ = std::fs::remove_dir_all(entry.path());
                continue;
            }
            reaped.processes += kill_recorded(&entry.path());
            crate::hostnet::remove_leftovers(&name);
            // Its artifacts lose their keys and tokens, wherever it wrote them.
            redact_artifacts(&crate::paths::artifacts_root(settings), &entry.path(), &name);
            let run = name;
            remove_scratch(&run);
            reaped.runs.push(run);
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    if let Some(d) = docker {
        let mut dead: Vec<String> = Vec::new();
        if let Ok(owners) = docker::owners(d).await {
            dead.extend(
                owners
                    .into_iter()
                    .filter(|(_, owner)| !owner.alive())
                    .map(|(run, _)| run),
            );
        }
        dead.sort();
        dead.dedup();
        for run in dead {
            reaped.docker_objects += remove_run_objects(d, &run).await;
            if !reaped.runs.contains(&run) {
                reaped.runs.push(run);
            }
        }
    }
    crate::sysctl::restore_if_last(settings);
    if !reaped.runs.is_empty() {
        tracing::info!(runs = ?reaped.runs, processes = reaped.processes, docker_objects = reaped.docker_objects, "reaped leftovers of killed runs");
    }
    reaped
}

/// Removes a run's containers and networks, looking again until none is left (bounded): a container whose
/// creation was in flight when its owner died can show up a moment after the first pass.
async fn remove_run_objects(d: &crate::docker::Docker, run: &str) -> usize {
    let mut removed = 0;
    for _ in 0..20 {
        // Every container first (kind's node containers, labelled by its docker shim, hold the run network), then
        // the networks.
        removed += docker::remove_labelled(d, docker::RUN_LABEL, Some(run))
            .await
            .unwrap_or(0);
        // A network the engine refuses to remove with no container on it is not waited for: it stays until the
        // engine restarts (leaks_of_run leaves it out).
        if docker::leaks_of_run(d, run)
            .await
            .map(|o| o.is_empty())
            .unwrap_or(false)
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    removed
}

static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this process is being interrupted (Ctrl-C): failures seen from then on are the clean-up's doing.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Kills this run's recorded processes and removes its Docker objects: the Ctrl-C path, where destructors
/// will not run.
pub async fn emergency_cleanup(settings: &Settings, run_id: &str) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
    let dir = runs_dir(settings).join(run_id);
    kill_recorded(&dir);
    crate::hostnet::remove_leftovers(run_id);
    if let Ok(d) = docker::connect().await {
        remove_run_objects(&d, run_id).await;
    }
    // Last: a node being started while the clean-up began may still have made its scratch directory (a journal's)
    // meanwhile; none is made once `interrupted()` reads true.
    remove_scratch(run_id);
    crate::sysctl::leave(settings, run_id);
    // The artifacts get uploaded however the run ends: its keys, kubeconfigs and tokens go first. Off the
    // runtime (a journal may be large); the record stays if the deadline cuts this short, for the next reaper.
    let record = dir.clone();
    let run = run_id.to_string();
    let root = crate::paths::artifacts_root(settings);
    let _ = tokio::task::spawn_blocking(move || redact_artifacts(&root, &record, &run)).await;
    let _ = std::fs::remove_dir_all(dir);
}

/// A run's scratch directories outside its run directory are `<scratch_dir>/<SCRATCH_PREFIX><run id>-…` (the
/// local provider's etcd data, the nodes' journals), so a killed run's are found by name.
pub const SCRATCH_PREFIX: &str = "nodejoin-etcd-";

/// The start of every scratch directory name of run `run_id` ([`SCRATCH_PREFIX`]).
pub fn scratch_prefix(run_id: &str) -> String {
    format!("{SCRATCH_PREFIX}{run_id}-")
}

/// Where scratch directories go: /dev/shm (tmpfs, where etcd is fastest) when it exists.
pub fn scratch_dir() -> PathBuf {
    let shm = PathBuf::from("/dev/shm");
    if shm.is_dir() {
        shm
    } else {
        std::env::temp_dir()
    }
}

/// Removes a run's scratch directories outside the run directory (etcd data and journals on tmpfs).
fn remove_scratch(run_id: &str) {
    let prefix = scratch_prefix(run_id);
    if let Ok(entries) = std::fs::read_dir(scratch_dir()) {
        for e in entries.flatten() {
            if e.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// A fresh run id: time-ordered and unique among parallel runs.
pub fn new_run_id() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!("{secs:x}-{}", crate::process::random_hex(6))
}

#[cfg(test)]
mod tests {
    #[test]
    fn mount_points_are_unescaped_as_the_kernel_escapes_them() {
        let p = super::unescape_mount_point("/tmp/a\\040b\\011c\\012d\\134e\\x");
        assert_eq!(p, std::path::PathBuf::from("/tmp/a b\tc\nd\\e\\x"));
        assert_eq!(
            super::unescape_mount_point("/plain"),
            std::path::PathBuf::from("/plain")
        );
        assert_eq!(
            super::unescape_mount_point("/end\\04"),
            std::path::PathBuf::from("/end\\04")
        );
    }
}
