//! One scenario: the run of its pipeline of named actions (`actions`), turned into a report that never panics.
use crate::error::Error;
use crate::run::driver::trial::Trial;
use crate::run::env::Environment;
use crate::run::events::{Event, EventSink};
use crate::run::pipeline::Context;
use crate::run::report::{Outcome, ScenarioReport};
use std::sync::Arc;
use std::time::Instant;

/// Runs one trial and never panics: every failure ends up in the report. Nothing is printed or written: the
/// caller renders the report ([`run_observed`] hands it to reporters).
pub async fn run(env: &Environment, trial: &Trial) -> ScenarioReport {
    run_observed(env, trial, &EventSink::none()).await
}

/// [`run`], announcing its start, each phase, each check and its end to `events`.
pub async fn run_observed(env: &Environment, trial: &Trial, events: &EventSink) -> ScenarioReport {
    let start = Instant::now();
    let (scenario, file) = (&trial.scenario, &trial.file);
    events.emit(Event::ScenarioStarted {
        scenario: scenario.name.clone(),
        provider: trial.provider.as_str().to_string(),
    });
    let mut report = ScenarioReport::new(&scenario.name, file.to_path_buf());
    if let Some(reason) = scenario.not_applicable() {
        report.outcome = Outcome::Ignored(reason);
    } else {
        // One provider's trial of a scenario at a time: the trials of one scenario on several providers share its
        // node container names and its cluster name (the fake EKS's record, the token webhook's cluster), so two
        // at once would collide.
        let _one_at_a_time = env.scenario_lock(&scenario.name).await;
        let mut cx = Context::new(env, trial, report, events);
        let result = cx.run().await;
        report = std::mem::replace(&mut cx.report, ScenarioReport::new(&scenario.name, file.to_path_buf()));
        drop(cx);
        decide(&mut report, result);
    }
    report.wall = start.elapsed();
    // Where the whole report goes; a reporter writes it (`reporter::text::ReportFiles`).
    let dir = env.run_dir.join(&scenario.name);
    if std::fs::create_dir_all(&dir).is_ok() {
        report.report_file = Some(dir.join("report.txt"));
    }
    events.emit(Event::ScenarioFinished {
        report: Arc::new(report.clone()),
    });
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
