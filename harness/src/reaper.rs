//! Start-up reaping: whatever a killed earlier run left behind (child processes, containers, networks) is
//! removed before a new run starts. Each run records its owner PID and its children's PIDs under
//! `<cache>/runs/<run-id>/`; Docker objects carry the run id and owner PID as labels.
use crate::docker;
use crate::error::{Error, Result};
use crate::process::alive;
use std::path::PathBuf;

/// The on-disk record of a live run; removed when dropped.
pub struct RunState {
    pub run_id: String,
    pub dir: PathBuf,
}

fn runs_dir() -> PathBuf {
    crate::paths::cache_dir().join("runs")
}

impl RunState {
    pub fn create(run_id: &str) -> Result<Self> {
        let dir = runs_dir().join(run_id);
        std::fs::create_dir_all(dir.join("pids")).map_err(|e| Error::io(&dir, e))?;
        std::fs::write(dir.join("owner.pid"), std::process::id().to_string()).map_err(|e| Error::io(&dir, e))?;
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

/// Kills the processes recorded for a run (only if the PID still runs the recorded program).
fn kill_recorded(dir: &std::path::Path) -> usize {
    let mut killed = 0;
    let Ok(entries) = std::fs::read_dir(dir.join("pids")) else {
        return 0;
    };
    for entry in entries.flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        let mut lines = text.lines();
        let (Some(pid), Some(program)) = (lines.next().and_then(|p| p.parse::<u32>().ok()), lines.next()) else {
            continue;
        };
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

/// How many runs other than this process's are alive (their owner PID runs).
pub fn other_live_runs() -> usize {
    let me = std::process::id();
    std::fs::read_dir(runs_dir())
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| std::fs::read_to_string(e.path().join("owner.pid")).ok())
                .filter_map(|p| p.trim().parse::<u32>().ok())
                .filter(|pid| *pid != me && alive(*pid))
                .count()
        })
        .unwrap_or(0)
}

/// What start-up reaping removed.
#[derive(Debug, Default)]
pub struct Reaped {
    pub processes: usize,
    pub docker_objects: usize,
    pub runs: Vec<String>,
}

/// Reaps runs whose owner process is gone. `docker` may be absent (then only processes are reaped).
pub async fn reap_stale(docker: Option<&testcontainers::bollard::Docker>) -> Reaped {
    let mut reaped = Reaped::default();
    if let Ok(entries) = std::fs::read_dir(runs_dir()) {
        for entry in entries.flatten() {
            let owner = std::fs::read_to_string(entry.path().join("owner.pid"))
                .ok()
                .and_then(|p| p.trim().parse::<u32>().ok());
            if owner.is_some_and(alive) {
                continue;
            }
            reaped.processes += kill_recorded(&entry.path());
            let run = entry.file_name().to_string_lossy().to_string();
            remove_scratch(&run);
            reaped.runs.push(run);
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    if let Some(d) = docker {
        let mut dead: Vec<String> = Vec::new();
        if let Ok(owners) = docker::owners(d).await {
            dead.extend(owners.into_iter().filter(|(_, pid)| !alive(*pid)).map(|(run, _)| run));
        }
        // kind's containers carry no label of ours: a run is found by their name, and is dead when no live process
        // owns its state directory (a `kind create` in flight when its run was killed can leave one behind after
        // everything else of the run is gone).
        dead.extend(docker::kind_runs(d).await.into_iter().filter(|run| !run_alive(run)));
        dead.sort();
        dead.dedup();
        for run in dead {
            reaped.docker_objects += remove_run_objects(d, &run).await;
            if !reaped.runs.contains(&run) {
                reaped.runs.push(run);
            }
        }
    }
    crate::node::sysctl::restore_if_last(other_live_runs);
    if !reaped.runs.is_empty() {
        tracing::info!(runs = ?reaped.runs, processes = reaped.processes, docker_objects = reaped.docker_objects, "reaped leftovers of killed runs");
    }
    reaped
}

/// Whether a live process owns the run's state directory.
fn run_alive(run: &str) -> bool {
    std::fs::read_to_string(runs_dir().join(run).join("owner.pid"))
        .ok()
        .and_then(|p| p.trim().parse::<u32>().ok())
        .is_some_and(alive)
}

/// Removes a run's containers and networks, looking again until none is left (bounded): a container whose
/// creation was in flight when its owner died can show up a moment after the first pass.
async fn remove_run_objects(d: &testcontainers::bollard::Docker, run: &str) -> usize {
    let mut removed = 0;
    for _ in 0..20 {
        // kind's node containers first: they hold the run network.
        removed += docker::remove_kind_nodes(d, run).await;
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
pub async fn emergency_cleanup(run_id: &str) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
    let dir = runs_dir().join(run_id);
    kill_recorded(&dir);
    remove_scratch(run_id);
    if let Ok(d) = docker::connect().await {
        remove_run_objects(&d, run_id).await;
    }
    crate::node::sysctl::restore_if_last(other_live_runs);
    let _ = std::fs::remove_dir_all(dir);
}

/// Removes a run's scratch directories outside the run directory (etcd data on tmpfs).
fn remove_scratch(run_id: &str) {
    let prefix = format!("{}{run_id}-", crate::cluster::local::ETCD_DATA_PREFIX);
    if let Ok(entries) = std::fs::read_dir(crate::cluster::local::shm_or_tmp()) {
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
    format!("{secs:x}-{}", crate::fakes::random_hex(6))
}
