//! JUnit XML for CI, built from the finished run's reports and written when the run finishes (to `--junit`,
//! else `<artifacts>/junit.xml`).
use crate::run::events::{Event, Reporter};
use crate::run::report::{Outcome, ScenarioReport};
use std::path::PathBuf;

pub struct Junit {
    run_id: String,
    path: PathBuf,
    /// Where to say what happened (stderr for `--format json`, whose stdout is JSON only).
    to_stderr: bool,
    failures: super::WriteFailures,
}

impl Junit {
    pub fn new(run_id: &str, path: PathBuf, to_stderr: bool, failures: super::WriteFailures) -> Self {
        Self {
            run_id: run_id.to_string(),
            path,
            to_stderr,
            failures,
        }
    }
}

impl Reporter for Junit {
    fn on(&mut self, event: &Event) {
        let Event::RunFinished { reports, .. } = event else {
            return;
        };
        let said = match xml(reports, &self.run_id) {
            Ok(xml) => match super::write_whole(&self.path, xml.as_bytes(), &self.failures) {
                Ok(()) => format!("JUnit report: {}", self.path.display()),
                Err(e) => format!("error: cannot write {}: {e}", self.path.display()),
            },
            Err(e) => format!("error: JUnit report: {e}"),
        };
        if self.to_stderr || said.starts_with("error") {
            eprintln!("{said}");
        } else {
            println!("{said}");
        }
    }
}

/// JUnit XML (one test case per scenario) for CI systems. Every check, passed ones too, is a property of its
/// scenario's test case (name: the check's name; value: `PASS: expected X, got Y`) and a line of system-out.
pub fn xml(reports: &[ScenarioReport], run_id: &str) -> Result<String, String> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new(format!("nodejoin-{run_id}"));
    let mut suite = TestSuite::new("nodejoin scenarios");
    for r in reports {
        let status = match &r.outcome {
            Outcome::Passed => TestCaseStatus::success(),
            Outcome::Ignored(reason) | Outcome::Unavailable(reason) => {
                let mut s = TestCaseStatus::skipped();
                s.set_message(reason.clone());
                s
            }
            Outcome::Failed | Outcome::Error { .. } => {
                let kind = if matches!(r.outcome, Outcome::Failed) {
                    NonSuccessKind::Failure
                } else {
                    NonSuccessKind::Error
                };
                let mut s = TestCaseStatus::non_success(kind);
                s.set_message(r.failure_lines().join("; "));
                s.set_description(super::text::full(r));
                s
            }
        };
        let mut case = TestCase::new(r.name.clone(), status);
        case.set_classname("nodejoin.scenarios");
        case.set_time(r.wall);
        case.set_assertions(r.checks.len());
        case.add_properties(r.checks.iter().map(|c| {
            quick_junit::Property::new(
                c.name.clone(),
                format!("{}: expected {}, got {}", c.mark(), c.expected, c.actual),
            )
        }));
        case.set_system_out(format!("{}{}", super::text::full(r), r.call_log));
        suite.add_test_case(case);
    }
    report.add_test_suite(suite);
    report.to_string().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assert::Check;
    use std::path::PathBuf;

    use super::super::sample_report as report;

    #[test]
    fn junit_carries_every_check() {
        let mut ok = ScenarioReport::new("ok", PathBuf::from("scenarios/ok.yaml"));
        ok.checks = vec![Check::new("node-a/Ready", true, "True", "True")];
        let xml = xml(&[ok, report()], "run-1").unwrap();
        assert!(xml.contains("assertions=\"1\""), "{xml}");
        assert!(xml.contains("assertions=\"3\""), "{xml}");
        for property in [
            "<property name=\"node-a/Ready\" value=\"PASS: expected True, got True\"/>",
            "<property name=\"node-a/labels\" value=\"PASS: expected {team: a}, got {team: a, zone: x}\"/>",
            "<property name=\"node-a/capacity pods\" value=\"FAIL: expected 29, got 110\"/>",
        ] {
            assert!(xml.contains(property), "{property} not in {xml}");
        }
        assert!(xml.contains("XFAIL: expected to fail (failingChecks)"), "{xml}");
        // system-out of the passed scenario lists its passed check.
        assert!(xml.contains("PASS  node-a/Ready: expected True, got True"), "{xml}");
    }
}
