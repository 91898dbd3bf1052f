//! One scenario: the run of its pipeline of named actions (`actions`), turned into a report that never panics.
use crate::error::Error;
use crate::run::env::Environment;
use crate::run::events::{Event, EventSink};
use crate::run::pipeline::Context;
use crate::run::report::{Attempt, Outcome, ScenarioReport};
use crate::run::trial::Trial;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

/// Runs one trial and never panics: every failure ends up in the report. Nothing is printed or written: the
/// caller renders the report ([`run_observed`] hands it to reporters).
pub async fn run(env: &Environment, trial: &Trial) -> ScenarioReport {
    run_observed(env, trial, &EventSink::none()).await
}

/// [`run`], announcing its start, each phase, each check and its end to `events`.
pub async fn run_observed(env: &Environment, trial: &Trial, events: &EventSink) -> ScenarioReport {
    let report = attempt(env, trial, events).await;
    events.emit(Event::ScenarioFinished {
        report: Arc::new(report.clone()),
    });
    report
}

/// [`run_observed`], run again after a failed or erred attempt, up to `retries` more times (`nodejoin run
/// --retries`): a later pass is reported FLAKY, with every failed attempt kept in the report (its artifacts
/// moved to `<scenario>.attempt-N`). A scenario cut short by a signal is not retried.
pub async fn run_retried(env: &Environment, trial: &Trial, retries: u32, events: &EventSink) -> ScenarioReport {
    let of = retries.saturating_add(1);
    let mut earlier = Vec::new();
    let mut this = trial.clone();
    loop {
        let mut report = attempt(env, &this, events).await;
        let failed = matches!(report.outcome, Outcome::Failed | Outcome::Error { .. });
        if failed && this.attempt < of && !crate::reaper::interrupted() {
            if let Some(aside) = keep_attempt(env, &trial.report_name(), this.attempt) {
                report.report_file = Some(aside.join("report.txt"));
                report.artifacts = report.artifacts.take().map(|_| aside);
            }
            events.emit(Event::AttemptFailed {
                report: Arc::new(report.clone()),
                attempt: this.attempt,
                of,
            });
            earlier.push(Attempt {
                number: this.attempt,
                status: report.status_word(),
                failures: report.failure_lines(),
                failed_checks: report
                    .checks
                    .iter()
                    .filter(|c| !c.passed)
                    .map(|c| report.stable_name(&c.name))
                    .collect(),
                wall: report.wall,
                artifacts: report.artifacts.clone(),
            });
            this.attempt += 1;
            continue;
        }
        report.earlier_attempts = earlier;
        events.emit(Event::ScenarioFinished {
            report: Arc::new(report.clone()),
        });
        return report;
    }
}

/// Moves a failed attempt's artifacts aside, so the next attempt's do not overwrite them; where they went.
fn keep_attempt(env: &Environment, scenario: &str, attempt: u32) -> Option<PathBuf> {
    let aside = env.run_dir.join(format!("{scenario}.attempt-{attempt}"));
    std::fs::rename(env.run_dir.join(scenario), &aside).ok().map(|()| aside)
}

/// One attempt of `trial`, announced to `events` but for its end.
async fn attempt(env: &Environment, trial: &Trial, events: &EventSink) -> ScenarioReport {
    let start = Instant::now();
    let (scenario, file) = (&trial.scenario, &trial.file);
    let name = trial.report_name();
    events.emit(Event::ScenarioStarted {
        scenario: name.clone(),
        provider: trial.provider.as_str().to_string(),
    });
    let mut report = ScenarioReport::new(&name, file.to_path_buf());
    let trial_name = trial.test_name();
    if let Some(reason) = scenario.not_applicable() {
        report.outcome = Outcome::Ignored(reason);
    } else {
        // One provider's trial of a scenario at a time: the trials of one scenario on several providers share its
        // node container names and its cluster name (the fake EKS's record, the token webhook's cluster), so two
        // at once would collide.
        let _one_at_a_time = env.scenario_lock(&scenario.name).await;
        let mut cx = Context::new(env, trial, report, events);
        let result = cx.run().await;
        report = std::mem::replace(&mut cx.report, ScenarioReport::new(&name, file.to_path_buf()));
        drop(cx);
        decide(&mut report, result);
    }
    report.wall = start.elapsed();
    report.trial = trial_name;
    // Where the whole report goes; a reporter writes it (`reporter::text::ReportFiles`).
    let dir = env.run_dir.join(&name);
    if std::fs::create_dir_all(&dir).is_ok() {
        report.report_file = Some(dir.join("report.txt"));
    }
    report
}

/// The outcome: the pipeline's error if it failed, else failed when a check failed.
fn decide(report: &mut ScenarioReport, result: crate::Result<()>) {
    match result {
        Err(e) => {
            // Whatever failed while a Ctrl-C clean-up was killing the run failed because of it.
            let e = if crate::reaper::interrupted() {
                Error::Interrupted
            } else {
                e
            };
            report.outcome = match e {
                Error::ProviderUnavailable { provider, reason } => {
                    Outcome::Unavailable(format!("provider {provider}: {reason}"))
                }
                e => Outcome::Error {
                    hint: e.hint().to_string(),
                    message: e.to_string(),
                },
            };
        }
        Ok(()) if report.checks.iter().any(|c| !c.passed) => report.outcome = Outcome::Failed,
        Ok(()) => {}
    }
}
