//! For people: a spinner per running scenario naming its current phase (indicatif, on stderr, hidden when stderr
//! is not a terminal), each scenario's report on stdout as it finishes, its failures on stderr, and the summary.
use super::text;
use crate::run::events::{Event, Reporter};
use crate::run::report;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::collections::HashMap;
use std::time::Duration;

pub struct Human {
    multi: MultiProgress,
    running: HashMap<String, ProgressBar>,
    total: usize,
    finished: usize,
}

impl Default for Human {
    fn default() -> Self {
        Self::new()
    }
}

impl Human {
    pub fn new() -> Self {
        Self {
            multi: MultiProgress::new(),
            running: HashMap::new(),
            total: 0,
            finished: 0,
        }
    }

    fn print(&self, text: &str) {
        self.multi.suspend(|| print!("{text}"));
    }
}

impl Reporter for Human {
    fn on(&mut self, event: &Event) {
        match event {
            Event::RunStarted {
                run_id,
                artifacts,
                scenarios,
                jobs,
            } => {
                self.total = *scenarios;
                self.multi.suspend(|| {
                    eprintln!(
                        "[nodejoin] run {run_id}: {scenarios} scenario(s), {jobs} at a time; artifacts in {}",
                        artifacts.display()
                    )
                });
            }
            Event::ScenarioStarted { scenario, .. } => {
                let bar = self.multi.add(ProgressBar::new_spinner());
                bar.set_style(
                    ProgressStyle::with_template("{spinner} {prefix:.bold} {wide_msg} {elapsed}")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                bar.set_prefix(scenario.clone());
                bar.enable_steady_tick(Duration::from_millis(200));
                self.running.insert(scenario.clone(), bar);
            }
            Event::PhaseStarted { scenario, phase } => {
                if let Some(bar) = self.running.get(scenario) {
                    bar.set_message(phase.clone());
                }
            }
            Event::PhaseDone { .. } | Event::CheckDone { .. } => {}
            Event::AttemptFailed { report, attempt, of } => {
                if let Some(bar) = self.running.remove(&report.name) {
                    bar.finish_and_clear();
                    self.multi.remove(&bar);
                }
                let failures = report.failure_lines();
                self.multi.suspend(|| {
                    eprintln!(
                        "[nodejoin] {}: attempt {attempt} of {of} {}, retrying",
                        report.name,
                        report.status_word()
                    );
                    for line in failures {
                        eprintln!("  TRY {attempt} FAIL {}: {line}", report.name);
                    }
                });
            }
            Event::ScenarioFinished { report } => {
                if let Some(bar) = self.running.remove(&report.name) {
                    bar.finish_and_clear();
                    self.multi.remove(&bar);
                }
                self.finished += 1;
                self.print(&text::brief(report));
                // Where a failed scenario's nodes got to, on one clock, and its picture (written earlier in the sink).
                if matches!(report.outcome, report::Outcome::Failed | report::Outcome::Error { .. }) {
                    let mut timeline = text::node_timeline(report);
                    if let Some(svg) = super::picture::path_for(report).filter(|p| p.is_file()) {
                        timeline.push_str(&format!("  timeline picture: {}\n", svg.display()));
                    }
                    self.print(&timeline);
                }
                let failures = report.failure_lines();
                if !failures.is_empty() {
                    self.multi.suspend(|| {
                        for line in failures {
                            eprintln!("FAIL {}: {line}", report.name);
                        }
                    });
                }
                self.multi.suspend(|| {
                    eprintln!(
                        "[nodejoin] {}/{} done ({} {})",
                        self.finished,
                        self.total,
                        report.name,
                        report.status_word()
                    )
                });
            }
            Event::RunFinished {
                reports,
                wall,
                host_cpu,
                ..
            } => {
                let mut rss = crate::host::own_peak_rss_mib()
                    .map(|m| format!(", harness peak RSS {m} MiB"))
                    .unwrap_or_default();
                if let Some(cpu) = crate::host::own_cpu_time() {
                    rss.push_str(&format!(", harness CPU {}", report::secs(cpu)));
                }
                self.print(&format!(
                    "\n{}\nwall {}{rss}\n{}\n",
                    text::summary(reports),
                    report::secs(*wall),
                    crate::run::cost::RunCost::of(reports, *wall, *host_cpu).line()
                ));
            }
        }
    }
}
