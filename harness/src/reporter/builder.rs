//! The reporters of one run, assembled from what the user asked for (nextest's `ReporterBuilder`): `report.txt`
//! files first (the console's brief report names each once it is written), the console (human or JSON lines),
//! JUnit, the Markdown summary, and the record of finished scenarios that a run cut short by a signal ends its
//! reports with. Adding a reporter is its file plus one line here.
use super::{github, human, json, junit, markdown, text, Format, WriteFailures};
use crate::run::events::{EventSink, Finished, Reporter};
use crate::run::report::ScenarioReport;
use std::path::{Path, PathBuf};

/// What a user asked of a run's reports (`nodejoin run --format/--junit/--markdown`).
#[derive(Debug, Clone, Default)]
pub struct ReporterBuilder {
    pub format: Format,
    /// Default: `<run dir>/junit.xml`.
    pub junit: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    /// GitHub Actions annotations of failures (under `GITHUB_ACTIONS=true`), naming files from this directory
    /// (the checkout's root), as JUnit's `file` then does too.
    pub annotations: Option<PathBuf>,
}

/// A run's reporters, behind one sink, and what the run reads back from them when it ends.
pub struct Reporters {
    pub sink: EventSink,
    finished: Finished,
    failures: WriteFailures,
}

impl ReporterBuilder {
    /// The reporters for run `run_id`, whose artifacts go to `run_dir`.
    pub fn build(self, run_id: &str, run_dir: &Path) -> Reporters {
        let failures = WriteFailures::default();
        let finished = Finished::default();
        let json = self.format == Format::Json;
        let mut reporters: Vec<Box<dyn Reporter>> = vec![Box::new(text::ReportFiles)];
        reporters.push(Box::new(super::picture::Pictures::default()));
        reporters.push(match self.format {
            Format::Human => Box::new(human::Human::new()),
            Format::Json => Box::new(json::JsonLines::new(std::io::stdout())),
        });
        let junit = self.junit.unwrap_or_else(|| run_dir.join("junit.xml"));
        reporters.push(Box::new(junit::Junit::new(
            run_id,
            junit,
            json,
            failures.clone(),
            self.annotations.clone(),
        )));
        if let Some(root) = self.annotations.clone() {
            reporters.push(Box::new(github::Annotations::new(json, root)));
        }
        if let Some(md) = self.markdown {
            // Under GitHub Actions the summary is read on the job's page, where a link to a runner's file is dead:
            // the files are named as they are in the uploaded artifact instead.
            let in_artifact = self.annotations.is_some();
            reporters.push(Box::new(markdown::Markdown::new(md, failures.clone(), in_artifact)));
        }
        reporters.push(Box::new(finished.clone()));
        Reporters {
            sink: EventSink::to(reporters),
            finished,
            failures,
        }
    }
}

impl Reporters {
    /// The reports of the scenarios finished so far.
    pub fn finished(&self) -> Vec<ScenarioReport> {
        self.finished.reports()
    }

    /// Whether a report file (JUnit, Markdown) could not be written.
    pub fn write_failed(&self) -> bool {
        self.failures.any()
    }
}
