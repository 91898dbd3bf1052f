//! Reporters: what a run's events become. The human renderer (live progress for the scenarios running at once,
//! each scenario's report when it ends, the summary table), JSON lines for tools (`--format json`), JUnit XML
//! for CI, and a Markdown summary for pull requests (`--markdown`). They only consume `run::events::Event`s; the runner knows none of them.
mod builder;
pub mod gantt;
pub mod github;
pub mod human;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod picture;
pub mod text;

pub use builder::{ReporterBuilder, Reporters};

/// Writes a report whole or not at all, readable by all (CI uploads it, often as another user than the run's):
/// [`crate::paths::write_atomically`] with 0644. A failure is recorded in `failures`.
pub fn write_whole(path: &std::path::Path, bytes: &[u8], failures: &WriteFailures) -> std::io::Result<()> {
    let written = crate::paths::write_atomically(path, bytes, 0o644);
    if written.is_err() {
        failures.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    written
}

/// Whether a report (JUnit, Markdown) of one run could not be written: the run's exit code must say so, whatever
/// the scenarios did (CI would otherwise read a missing report as nothing to show). Shared by the reporters
/// that write files and the run that owns them.
#[derive(Debug, Clone, Default)]
pub struct WriteFailures(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl WriteFailures {
    pub fn any(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The console format of `nodejoin run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Progress on stderr, reports and the summary on stdout (`list`: a trial a line). `text` is taken too, the
    /// name `list` once had.
    #[default]
    #[value(alias = "text")]
    Human,
    /// One JSON object per event on stdout, nothing else there.
    Json,
}

/// The sample report's checks on its node `node-a`, named as the checks themselves name them (a name no check
/// has would let a reporter test pass on a report no run writes): labels (passed), capacity.pods (failed) and
/// cloud-init status (expected to fail).
#[cfg(test)]
fn sample_names() -> [String; 3] {
    use crate::run::pipeline::assertions::node::{capacity_pods, labels};
    [
        labels::DEF.on("node-a"),
        capacity_pods::DEF.on("node-a"),
        crate::assert::registry::CLOUD_INIT_STATUS.on("node-a"),
    ]
}

/// A failed scenario with a passed, a failed and an expected-to-fail check, for the reporters' tests.
#[cfg(test)]
fn sample_report() -> crate::run::report::ScenarioReport {
    use crate::assert::Check;
    let [labels, capacity_pods, cloud_init] = sample_names();
    let mut r = crate::run::report::ScenarioReport::new("demo", std::path::PathBuf::from("scenarios/demo.yaml"));
    r.checks = vec![
        Check::new(labels, true, "{team: a}", "{team: a, zone: x}"),
        Check::new(capacity_pods, false, "29", "110"),
        Check {
            xfail: true,
            ..Check::new(
                cloud_init,
                true,
                "to fail (failingChecks), i.e. not: done",
                "error\nstage init: boom",
            )
        },
    ];
    r.outcome = crate::run::report::Outcome::Failed;
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_are_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("junit.xml");
        let failures = super::WriteFailures::default();
        super::write_whole(&f, b"<testsuites/>", &failures).unwrap();
        assert!(!failures.any());
        assert_eq!(std::fs::read(&f).unwrap(), b"<testsuites/>");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o044, 0o044, "a report is readable by the uploader: {mode:o}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left");
        assert!(super::write_whole(&dir.path().join("missing/junit.xml"), b"x", &failures).is_err());
        assert!(failures.any(), "the failure is recorded for the run's exit code");
    }
}
