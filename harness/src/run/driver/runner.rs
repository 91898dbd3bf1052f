//! Runs many scenarios at once on one environment, `jobs` at a time, announcing the run to reporters: the loop
//! `nodejoin run` uses. (Under `cargo test`, libtest-mimic's thread pool plays this part, with the same number of
//! jobs by default, over the same environment and pipeline.)
use crate::run::env::Environment;
use crate::run::events::EventSink;
use crate::run::report::ScenarioReport;
use crate::run::trial::Trial;
use futures::StreamExt;

/// The variable that sets how many scenarios run at once (`nodejoin run -j` and the trials' default).
pub const ENV_JOBS: &str = crate::settings::var::JOBS;

/// Memory a scenario may take at once, for the default: a few node containers and, for IAM scenarios on the
/// local provider, a control plane of its own.
const MEMORY_PER_JOB_MIB: u64 = 1536;

/// How many scenarios to run at once by default: much of a scenario's time is waiting (back-offs, polls, waiter
/// intervals), so two per core, as many as memory holds, at most 8. More only stretches each scenario on a busy
/// machine (Python AWS CLIs and cloud-init are CPU-bound) towards its deadlines. The jobs setting overrides it.
pub fn default_jobs(settings: &crate::settings::Settings) -> usize {
    if let Some(n) = settings.jobs {
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
pub fn trial_threads(settings: &crate::settings::Settings) -> usize {
    std::env::var("RUST_TEST_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| default_jobs(settings))
}

fn jobs_for(cpus: usize, by_memory: usize) -> usize {
    (cpus * 2).min(8).min(by_memory).max(1)
}

/// Runs `trials`, `jobs` at a time; the reports come back in the order of `trials`.
pub async fn run_all(env: &Environment, trials: &[Trial], jobs: usize, events: &EventSink) -> Vec<ScenarioReport> {
    run_all_retried(env, trials, jobs, 0, events).await
}

/// [`run_all`], a failed scenario run again up to `retries` times (`nodejoin run --retries`). Scenarios with
/// VM nodes take the lane of [`schedule`] (one VM scenario at a time: [`Environment::machine`]).
pub async fn run_all_retried(
    env: &Environment,
    trials: &[Trial],
    jobs: usize,
    retries: u32,
    events: &EventSink,
) -> Vec<ScenarioReport> {
    // The longest first (by what each cost the last time it ran here), the rest packed around them; one at a
    // time, in the order given (the order changes no wall then).
    let costs_file = super::costs::Costs::path(&env.settings);
    let mut costs = super::costs::Costs::load(&costs_file);
    let mut order: Vec<usize> = (0..trials.len()).collect();
    if jobs > 1 {
        order.sort_by_key(|i| std::cmp::Reverse(costs.expected(&trials[*i])));
    }
    let done = schedule(
        order.clone(),
        |i| trials[*i].scenario.has_vm_nodes(),
        jobs,
        |i| run_guarded(env, &trials[i], retries, events),
    )
    .await;
    // Back in the order the trials were given.
    let mut reports: Vec<Option<ScenarioReport>> = (0..trials.len()).map(|_| None).collect();
    for (i, r) in order.into_iter().zip(done) {
        reports[i] = Some(r);
    }
    let reports: Vec<ScenarioReport> = reports.into_iter().flatten().collect();
    costs.note(trials, &reports);
    costs.save(&costs_file);
    reports
}

/// Runs `items`, `jobs` at a time, and gives their results in the items' order. Those `in_lane` run one after
/// another in a lane that holds one of the jobs from the start until its last item ends. So the first of them
/// starts at once beside the others, instead of waiting in the queue (where the later ones would hold jobs while
/// they waited their turn) or coming last, with little beside them to run.
async fn schedule<T, R, Fut>(items: Vec<T>, in_lane: impl Fn(&T) -> bool, jobs: usize, run: impl Fn(T) -> Fut) -> Vec<R>
where
    Fut: std::future::Future<Output = R>,
{
    let jobs = jobs.max(1);
    let (lane, others): (Vec<_>, Vec<_>) = items.into_iter().enumerate().partition(|(_, t)| in_lane(t));
    let permits = std::sync::Arc::new(tokio::sync::Semaphore::new(jobs));
    // Taken here, before any other item asks.
    let held = permits.clone().try_acquire_owned().ok().filter(|_| !lane.is_empty());
    let run = &run;
    let lane = async move {
        let mut done = Vec::new();
        for (i, item) in lane {
            done.push((i, run(item).await));
        }
        drop(held);
        done
    };
    let rest = futures::stream::iter(others)
        .map(|(i, item)| {
            let permits = permits.clone();
            async move {
                let _job = permits.acquire_owned().await;
                (i, run(item).await)
            }
        })
        .buffer_unordered(jobs)
        .collect::<Vec<_>>();
    let (lane, rest) = futures::join!(lane, rest);
    let mut results: Vec<(usize, R)> = lane.into_iter().chain(rest).collect();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, r)| r).collect()
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

    /// The lane's items run one after another, the first from the start, beside the others; those share the jobs
    /// the lane leaves; results come in the items' order. (The runtime is single-threaded: the order of the log
    /// is the order of the polls.)
    #[tokio::test]
    async fn a_lane_runs_one_at_a_time_from_the_start_beside_the_others() {
        use std::sync::{Arc, Mutex};
        use std::time::Duration;
        let log: Arc<Mutex<Vec<(u32, bool)>>> = Arc::default();
        let items: Vec<u32> = (0..8).collect();
        let results = schedule(
            items,
            |i| *i >= 6,
            3,
            |i| {
                let log = log.clone();
                async move {
                    log.lock().unwrap().push((i, true));
                    tokio::time::sleep(Duration::from_millis(if i >= 6 { 100 } else { 10 })).await;
                    log.lock().unwrap().push((i, false));
                    i * 10
                }
            },
        )
        .await;
        assert_eq!(results, (0..8).map(|i| i * 10).collect::<Vec<_>>());
        let log = log.lock().unwrap().clone();
        assert_eq!(log[0], (6, true), "the lane's first item starts first: {log:?}");
        let pos = |e: (u32, bool)| log.iter().position(|x| *x == e).unwrap();
        assert!(pos((0, true)) < pos((6, false)), "others start beside it: {log:?}");
        assert!(
            pos((7, true)) > pos((6, false)),
            "the lane's items one after another: {log:?}"
        );
        let (mut lane, mut others) = (0, 0);
        for (i, start) in &log {
            let n = if *i >= 6 { &mut lane } else { &mut others };
            if *start {
                *n += 1
            } else {
                *n -= 1
            }
            assert!(
                lane <= 1 && lane + others <= 3,
                "at most one lane item, 3 in all: {log:?}"
            );
        }
    }

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
