//! Runs many scenarios at once on one environment, `jobs` at a time, announcing the run to reporters: the loop
//! `nodejoin run` uses. (Under `cargo test`, libtest-mimic's thread pool plays this part, with the same number of
//! jobs by default, over the same environment and pipeline.)
use super::env::Environment;
use super::events::EventSink;
use super::report::ScenarioReport;
use crate::scenario::model::Scenario;
use futures::StreamExt;
use std::path::PathBuf;

/// The variable that sets how many scenarios run at once (`nodejoin run -j` and the trials' default).
pub const ENV_JOBS: &str = "NODEJOIN_JOBS";

/// Memory a scenario may take at once, for the default: a few node containers and, for IAM scenarios on the
/// local provider, a control plane of its own.
const MEMORY_PER_JOB_MIB: u64 = 1536;

/// How many scenarios to run at once by default: much of a scenario's time is waiting (back-offs, polls, waiter
/// intervals), so two per core, as many as memory holds, at most 8. More only stretches each scenario on a busy
/// machine (Python AWS CLIs and cloud-init are CPU-bound) towards its deadlines. `NODEJOIN_JOBS` overrides it.
pub fn default_jobs() -> usize {
    if let Some(n) = crate::host::count_from_env(ENV_JOBS) {
        return n;
    }
    let cpus = crate::host::cpus();
    let by_memory = crate::host::available_memory_mib()
        .map(|m| (m / MEMORY_PER_JOB_MIB) as usize)
        .unwrap_or(usize::MAX);
    jobs_for(cpus, by_memory)
}

fn jobs_for(cpus: usize, by_memory: usize) -> usize {
    (cpus * 2).min(8).min(by_memory).max(1)
}

/// Runs `scenarios`, `jobs` at a time; the reports come back in the order of `scenarios`.
pub async fn run_all(
    env: &Environment,
    scenarios: &[(PathBuf, Scenario)],
    jobs: usize,
    events: &EventSink,
) -> Vec<ScenarioReport> {
    let mut reports: Vec<(usize, ScenarioReport)> = futures::stream::iter(scenarios.iter().enumerate())
        .map(|(i, (file, sc))| async move { (i, super::scenario::run_observed(env, sc, file, events).await) })
        .buffer_unordered(jobs.max(1))
        .collect()
        .await;
    reports.sort_by_key(|(i, _)| *i);
    reports.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_scale_with_cores_within_memory() {
        assert_eq!(jobs_for(2, 100), 4);
        assert_eq!(jobs_for(1, 100), 2);
        assert_eq!(jobs_for(64, 100), 8);
        assert_eq!(jobs_for(2, 3), 3, "memory limits it");
        assert_eq!(jobs_for(2, 0), 1, "never fewer than one");
    }
}
