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
    /// The directory files are named from (the checkout's root on a runner), else the working directory.
    root: Option<PathBuf>,
}

impl Junit {
    pub fn new(
        run_id: &str,
        path: PathBuf,
        to_stderr: bool,
        failures: super::WriteFailures,
        root: Option<PathBuf>,
    ) -> Self {
        Self {
            run_id: run_id.to_string(),
            path,
            to_stderr,
            failures,
            root,
        }
    }
}

impl Reporter for Junit {
    fn on(&mut self, event: &Event) {
        let Event::RunFinished { reports, .. } = event else {
            return;
        };
        let said = match xml(reports, &self.run_id, self.root.as_deref()) {
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

/// JUnit XML for CI systems, one test suite per trial: a test case per check (classname the trial,
/// `provider/v1.MINOR/scenario`; name `node/check`, the node named by its group and index so names are the same
/// in every matrix cell and run; `file` the scenario), and one named `scenario` for its outcome, carrying its
/// time, whole report and, for a FLAKY one, each failed attempt as a `flakyFailure`.
pub fn xml(reports: &[ScenarioReport], run_id: &str, root: Option<&std::path::Path>) -> Result<String, String> {
    use quick_junit::{Report, TestSuite};
    let mut report = Report::new(format!("nodejoin-{run_id}"));
    for r in reports {
        let class = r.trial_name().to_string();
        let file = crate::paths::relative_to(&r.file, root);
        let mut suite = TestSuite::new(class.clone());
        suite.set_time(r.wall);
        let ran = !matches!(r.outcome, Outcome::Ignored(_) | Outcome::Unavailable(_));
        if ran {
            for c in &r.checks {
                suite.add_test_case(check_case(r, c, &class, &file));
            }
        }
        suite.add_test_case(outcome_case(r, &class, &file));
        report.add_test_suite(suite);
    }
    report.to_string().map_err(|e| e.to_string())
}

fn check_case(r: &ScenarioReport, c: &crate::assert::Check, class: &str, file: &str) -> quick_junit::TestCase {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus};
    let said = format!("{}: expected {}, got {}", c.mark(), c.expected, c.actual);
    let status = if c.passed {
        TestCaseStatus::success()
    } else {
        let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
        s.set_message(format!("expected {}, got {}", c.expected, c.actual));
        s.set_description(said.clone());
        s
    };
    let mut case = TestCase::new(r.stable_name(&c.name), status);
    case.set_classname(class.to_string());
    case.extra.insert("file".into(), file.into());
    case.set_system_out(format!("{} ({})\n", said, c.name));
    case
}

fn outcome_case(r: &ScenarioReport, class: &str, file: &str) -> quick_junit::TestCase {
    use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestRerun};
    let mut status = match &r.outcome {
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
    status.add_reruns(r.earlier_attempts.iter().map(|a| {
        let kind = if a.status == "ERROR" {
            NonSuccessKind::Error
        } else {
            NonSuccessKind::Failure
        };
        let mut rerun = TestRerun::new(kind);
        rerun.set_message(format!("attempt {} {}: {}", a.number, a.status, a.failures.join("; ")));
        rerun.set_time(a.wall);
        rerun
    }));
    let mut case = TestCase::new("scenario", status);
    case.set_classname(class.to_string());
    case.extra.insert("file".into(), file.into());
    case.set_time(r.wall);
    case.set_assertions(r.checks.len());
    case.set_system_out(format!("{}{}", super::text::full(r), r.call_log));
    case
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assert::Check;
    use std::path::PathBuf;

    use super::super::{sample_names, sample_report as report};

    #[test]
    fn every_check_is_a_test_case_of_its_trial() {
        let mut ok = ScenarioReport::new("ok", PathBuf::from("scenarios/ok.yaml"));
        ok.trial = "local/v1.36/ok".into();
        ok.nodes.push(crate::run::report::NodeTimeline {
            node_name: "ip-172-31-0-4.ec2.internal".into(),
            label: "worker-0".into(),
            ..Default::default()
        });
        ok.checks = vec![Check::new("ip-172-31-0-4.ec2.internal/ready", true, "True", "True")];
        let mut flaky = ok.clone();
        flaky.name = "flaky".into();
        flaky.trial = "local/v1.36/flaky".into();
        flaky.earlier_attempts.push(crate::run::report::Attempt {
            number: 1,
            status: "FAILED",
            failures: vec!["worker-0/cloud-init status: expected done, got error".into()],
            failed_checks: vec!["worker-0/cloud-init status".into()],
            wall: std::time::Duration::from_secs(3),
            artifacts: None,
        });
        let xml = xml(&[ok, report(), flaky], "run-1", None).unwrap();
        assert!(
            xml.contains("<testcase name=\"worker-0/ready\" classname=\"local/v1.36/ok\""),
            "the node by its stable label, under its trial: {xml}"
        );
        assert!(xml.contains("file=\"scenarios/ok.yaml\""), "{xml}");
        assert!(
            xml.contains(&format!("<testcase name=\"{}\" classname=\"demo\"", sample_names()[1])),
            "{xml}"
        );
        assert!(xml.contains("<failure message=\"expected 29, got 110\""), "{xml}");
        assert!(
            xml.contains("message=\"attempt 1 FAILED: worker-0/cloud-init status"),
            "{xml}"
        );
        assert!(xml.contains("XFAIL: expected to fail (failingChecks)"), "{xml}");
        // One per check, plus one for each scenario's outcome.
        assert_eq!(xml.matches("<testcase ").count(), 1 + 1 + 3 + 1 + 1 + 1, "{xml}");
    }
}
