//! Runs many scenarios at once on one environment, `jobs` at a time, announcing the run to reporters: the loop
//! `nodejoin run` uses. (Under `cargo test`, libtest-mimic's thread pool plays this part, with the same number of
//! jobs by default, over the same environment and pipeline.)
use crate::run::driver::trial::Trial;
use crate::run::env::Environment;
use crate::run::events::EventSink;
use crate::run::report::ScenarioReport;
use futures::StreamExt;

/// The variable that sets how many scenarios run at once (`nodejoin run -j` and the trials' default).
pub const ENV_JOBS: &str = crate::settings::var::JOBS;

/// Memory a scenario may take at once, for the default: a few node containers and, for IAM scenarios on the
/// local provider, a control plane of its own.
const MEMORY_PER_JOB_MIB: u64 = 1536;

/// How many scenarios to run at once by default: much of a scenario's time is waiting (back-offs, polls, waiter
/// intervals), so two per core, as many as memory holds, at most 8. More only stretches each scenario on a busy
/// machine (Python AWS CLIs and cloud-init are CPU-bound) towards its deadlines. The jobs setting overrides it.
pub fn default_jobs() -> usize {
    if let Some(n) = crate::settings::get().jobs {
        return n.max(1);
    }
    let cpus = crate::host::cpus();
    let by_memory = crate::host::available_memory_mib()
        .map(|m| (m / MEMORY_PER_JOB_MIB) as usize)
        .unwrap_or(usize::MAX);
    jobs_for(cpus, by_memory)
}

/// How many libtest trials run at once (scenario and mutation trials, which mostly wait on nodes, like
/// `nodejoin run -j`): RUST_TEST_THREADS when set, else [`default_jobs`]. `--test-threads` overrides both.
pub fn trial_threads() -> usize {
    std::env::var("RUST_TEST_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(default_jobs)
}

fn jobs_for(cpus: usize, by_memory: usize) -> usize {
    (cpus * 2).min(8).min(by_memory).max(1)
}

/// Runs `trials`, `jobs` at a time; the reports come back in the order of `trials`.
pub async fn run_all(env: &Environment, trials: &[Trial], jobs: usize, events: &EventSink) -> Vec<ScenarioReport> {
    run_all_retried(env, trials, jobs, 0, events).await
}

/// [`run_all`], a failed scenario run again up to `retries` times (`nodejoin run --retries`).
pub async fn run_all_retried(
    env: &Environment,
    trials: &[Trial],
    jobs: usize,
    retries: u32,
    events: &EventSink,
) -> Vec<ScenarioReport> {
    let mut reports: Vec<(usize, ScenarioReport)> = futures::stream::iter(trials.iter().enumerate())
        .map(|(i, trial)| async move { (i, run_guarded(env, trial, retries, events).await) })
        .buffer_unordered(jobs.max(1))
        .collect()
        .await;
    reports.sort_by_key(|(i, _)| *i);
    reports.into_iter().map(|(_, r)| r).collect()
}

/// One scenario, its panic (a harness bug) caught as that scenario's ERROR instead of ending the whole run; its
/// containers are given back by the pipeline's drop, as for a cancelled scenario.
async fn run_guarded(env: &Environment, trial: &Trial, retries: u32, events: &EventSink) -> ScenarioReport {
    guarded(
        &trial.report_name(),
        &trial.file,
        events,
        crate::run::driver::scenario::run_retried(env, trial, retries, events),
    )
    .await
}

async fn guarded(
    name: &str,
    file: &std::path::Path,
    events: &EventSink,
    run: impl std::future::Future<Output = ScenarioReport>,
) -> ScenarioReport {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(run).catch_unwind().await {
        Ok(report) => report,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "(no message)".into());
            let mut report = ScenarioReport::new(name, file.to_path_buf());
            report.outcome = crate::run::Outcome::Error {
                message: format!("the harness panicked while running it: {what}"),
                hint: "a nodejoin bug: please report it with the scenario file".into(),
            };
            events.emit(crate::run::events::Event::ScenarioFinished {
                report: std::sync::Arc::new(report.clone()),
            });
            report
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenario whose run panics is that scenario's ERROR, with the panic's message; the run goes on.
    #[tokio::test]
    async fn a_panicking_scenario_is_its_own_error() {
        let events = EventSink::none();
        let file = std::path::Path::new("scenarios/x.yaml");
        let report = guarded("x", file, &events, async { panic!("index out of bounds") }).await;
        match report.outcome {
            crate::run::Outcome::Error { message, .. } => {
                assert!(
                    message.contains("panicked") && message.contains("index out of bounds"),
                    "{message}"
                )
            }
            other => panic!("not an error: {other:?}"),
        }
        let fine = guarded("y", file, &events, async { ScenarioReport::new("y", file.into()) }).await;
        assert_eq!(fine.name, "y");
    }

    #[test]
    fn jobs_scale_with_cores_within_memory() {
        assert_eq!(jobs_for(2, 100), 4);
        assert_eq!(jobs_for(1, 100), 2);
        assert_eq!(jobs_for(64, 100), 8);
        assert_eq!(jobs_for(2, 3), 3, "memory limits it");
        assert_eq!(jobs_for(2, 0), 1, "never fewer than one");
    }
}
