//! Scenario reports: the text printed for people, the per-phase timings, and JUnit XML for CI.
pub use super::timeline::{secs, NodeTimeline, AGGREGATE_FROM_NODES};
use crate::assert::Check;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Outcome {
    Passed,
    Failed,
    /// Does not apply (a Kubernetes version the scenario excludes); the reason says why (never counted as
    /// passed).
    Ignored(String),
    /// Its provider cannot run on this machine (found when it was run); the reason says why. Reported like an
    /// ignored scenario, or as a failure where the provider is required.
    Unavailable(String),
    /// The harness could not carry the scenario out (bad scenario, missing prerequisite...).
    Error {
        message: String,
        hint: String,
    },
}

#[derive(Debug, Clone)]
pub struct ScenarioReport {
    pub name: String,
    pub file: PathBuf,
    pub outcome: Outcome,
    pub checks: Vec<Check>,
    /// Scenario-level phases in order, e.g. ("control plane ready", 6.1 s).
    pub phases: Vec<(String, Duration)>,
    pub nodes: Vec<NodeTimeline>,
    pub wall: Duration,
    pub artifacts: Option<PathBuf>,
    /// Every node's calls to the fakes, one line each (in report.txt and JUnit, not on the console).
    pub call_log: String,
    /// Notes worth printing (approver decisions, evidence quotes, reaped leftovers).
    pub notes: Vec<String>,
    /// The control plane's processes and their RSS in KiB, read when the join was observed (local provider).
    pub control_plane_rss: Vec<(String, u64)>,
    /// How many calls the scenario's nodes made to the fakes.
    pub call_count: usize,
    /// What the nodes showed, normalised (only when the scenario asked for it: `nodejoin compare`).
    pub snapshot: Option<crate::compare::snapshot::ScenarioSnapshot>,
    /// Where the whole report was written (`report.txt`), once it was.
    pub report_file: Option<PathBuf>,
}

impl ScenarioReport {
    pub fn new(name: &str, file: PathBuf) -> Self {
        Self {
            name: name.to_string(),
            file,
            outcome: Outcome::Passed,
            checks: vec![],
            phases: vec![],
            nodes: vec![],
            wall: Duration::ZERO,
            artifacts: None,
            call_log: String::new(),
            notes: vec![],
            control_plane_rss: vec![],
            call_count: 0,
            snapshot: None,
            report_file: None,
        }
    }

    /// Figures over the nodes, for reports of [`AGGREGATE_FROM_NODES`] nodes or more.
    pub fn aggregate(&self) -> Vec<String> {
        let window: Duration = self
            .phases
            .iter()
            .filter(|(p, _)| p == super::timeline::PHASE_BOOTSTRAP || p == super::timeline::PHASE_JOIN_OBSERVED)
            .map(|(_, d)| *d)
            .sum();
        let figures = super::timeline::Figures {
            nodes: &self.nodes,
            calls: self.call_count,
            calls_window: window,
            control_plane_rss_kib: self.control_plane_rss.iter().map(|(_, kib)| kib).sum(),
        };
        figures.lines(AGGREGATE_FROM_NODES)
    }

    pub fn passed(&self) -> bool {
        matches!(self.outcome, Outcome::Passed)
    }

    pub fn status_word(&self) -> &'static str {
        match self.outcome {
            Outcome::Passed => "PASSED",
            Outcome::Failed => "FAILED",
            Outcome::Ignored(_) | Outcome::Unavailable(_) => "IGNORED",
            Outcome::Error { .. } => "ERROR",
        }
    }

    /// One line per failure (for the CLI and the trial's failure message).
    pub fn failure_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| format!("{}: expected {}, got {}", c.name, c.expected, c.actual))
            .collect();
        if let Outcome::Error { message, hint } = &self.outcome {
            lines.push(format!("{message} (hint: {hint})"));
        }
        lines
    }

    /// The report for a person at a terminal: [`Self::render`] up to [`BRIEF_FROM_NODES`] nodes; beyond, the
    /// figures over the nodes, the failed and expected-to-fail checks and the scenario's own notes, with the
    /// rest counted and left to `report.txt` (a 50-node scenario fits on one screen).
    pub fn render_brief(&self) -> String {
        if self.nodes.len() < BRIEF_FROM_NODES {
            return self.render();
        }
        let mut out = self.head();
        for line in self.aggregate() {
            out.push_str(&format!("  nodes: {line}\n"));
        }
        let passed = self.checks.iter().filter(|c| c.passed && !c.xfail).count();
        let shown: Vec<&Check> = self.checks.iter().filter(|c| !c.passed || c.xfail).collect();
        out.push_str(&format!(
            "  checks: {}/{} passed{}\n",
            self.checks.iter().filter(|c| c.passed).count(),
            self.checks.len(),
            if passed > 0 {
                format!(" ({passed} PASS lines in the full report)")
            } else {
                String::new()
            }
        ));
        for c in shown.iter().take(BRIEF_CHECKS) {
            out.push_str(&format!(
                "  {}\n",
                cut(&check_line(c).replace('\n', " / "), CAUSE_CHARS)
            ));
        }
        if shown.len() > BRIEF_CHECKS {
            out.push_str(&format!(
                "  ... {} more in the full report\n",
                shown.len() - BRIEF_CHECKS
            ));
        }
        if let Outcome::Error { message, hint } = &self.outcome {
            out.push_str(&format!("  error: {message}\n  hint: {hint}\n"));
        }
        // The scenario's own notes; those of one node each (they start with its name) are counted.
        let per_node = |n: &String| self.nodes.iter().any(|t| n.starts_with(&format!("{}: ", t.node_name)));
        for n in self.notes.iter().filter(|n| !per_node(n)) {
            out.push_str(&format!("  note: {}\n", one_line(n, CAUSE_CHARS)));
        }
        let node_notes = self.notes.iter().filter(|n| per_node(n)).count();
        if node_notes > 0 {
            out.push_str(&format!(
                "  notes: {node_notes} about single nodes, and each node's milestones, in the full report\n"
            ));
        }
        if let Some(f) = &self.report_file {
            out.push_str(&format!("  full report: {}\n", f.display()));
        }
        if let Some(a) = &self.artifacts {
            out.push_str(&format!("  artifacts: {}\n", a.display()));
        }
        out
    }

    /// The lines both renderings start with: the verdict, why it was ignored, the phases.
    fn head(&self) -> String {
        let mut out = format!(
            "scenario {}: {} in {}\n",
            self.name,
            self.status_word(),
            secs(self.wall)
        );
        if let Outcome::Ignored(reason) | Outcome::Unavailable(reason) = &self.outcome {
            out.push_str(&format!("  ignored: {reason}\n"));
        }
        if !self.phases.is_empty() {
            let phases: Vec<String> = self.phases.iter().map(|(n, d)| format!("{n} {}", secs(*d))).collect();
            out.push_str(&format!("  phases: {}\n", phases.join(" | ")));
        }
        out
    }

    /// The whole report: every node's milestones, every check, every note (`report.txt`, JUnit).
    pub fn render(&self) -> String {
        let mut out = self.head();
        for n in &self.nodes {
            out.push_str(&format!("  node {} ({}, {})\n", n.node_name, n.instance_id, n.ip));
            let milestones = [
                ("container up", n.container_up, ""),
                ("bootstrap done", n.bootstrap, ""),
                ("client CSR issued", n.client_csr_issued, "+"),
                ("Node registered", n.registered, "+"),
                ("Ready", n.ready, "+"),
                ("serving CSR issued", n.serving_csr_issued, "+"),
                ("serving cert live", n.serving_cert_live, "+"),
            ];
            let parts: Vec<String> = milestones
                .iter()
                .map(|(name, d, plus)| match d {
                    Some(d) => format!("{name} {plus}{}", secs(*d)),
                    None => format!("{name} -"),
                })
                .collect();
            let cpu = n.cpu.map(|c| format!(" | CPU {}", secs(c))).unwrap_or_default();
            out.push_str(&format!("    {}{cpu}\n", parts.join(" | ")));
        }
        for line in self.aggregate() {
            out.push_str(&format!("  nodes: {line}\n"));
        }
        let passed = self.checks.iter().filter(|c| c.passed).count();
        out.push_str(&format!("  checks: {passed}/{} passed\n", self.checks.len()));
        for c in &self.checks {
            out.push_str(&format!("  {}\n", check_line(c).replace('\n', "\n          ")));
        }
        if let Outcome::Error { message, hint } = &self.outcome {
            out.push_str(&format!("  error: {message}\n  hint: {hint}\n"));
        }
        for n in &self.notes {
            out.push_str(&format!("  note: {n}\n"));
        }
        if let Some(a) = &self.artifacts {
            out.push_str(&format!("  artifacts: {}\n", a.display()));
        }
        out
    }
}

/// What a check's result is called: `PASS`, `FAIL`, or `XFAIL` for a check that failed as the scenario said it
/// would (`failingChecks`; one of those that passed instead is a `FAIL`).
pub fn check_mark(c: &Check) -> &'static str {
    match (c.passed, c.xfail) {
        (true, false) => "PASS",
        (true, true) => "XFAIL",
        (false, _) => "FAIL",
    }
}

/// One check, passed or not, with what was expected and what was found: `PASS name: expected X, got Y`.
pub fn check_line(c: &Check) -> String {
    format!(
        "{:<5} {}: expected {}, got {}",
        check_mark(c),
        c.name,
        c.expected,
        c.actual
    )
}

/// A summary table of several scenarios.
pub fn summary_table(reports: &[ScenarioReport]) -> String {
    let width = reports.iter().map(|r| r.name.len()).max().unwrap_or(8).max(8);
    let mut out = format!(
        "{:<width$}  {:<7}  {:>8}  {:>6}  {}\n",
        "scenario", "result", "wall", "checks", "slowest node: registered / Ready / serving"
    );
    for r in reports {
        let checks = format!("{}/{}", r.checks.iter().filter(|c| c.passed).count(), r.checks.len());
        let node = r
            .nodes
            .iter()
            .max_by_key(|n| n.ready.unwrap_or(Duration::MAX))
            .map(|n| {
                let f = |d: Option<Duration>| d.map(secs).unwrap_or_else(|| "-".into());
                format!("{} / {} / {}", f(n.registered), f(n.ready), f(n.serving_cert_live))
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<width$}  {:<7}  {:>8}  {:>6}  {}\n",
            r.name,
            r.status_word(),
            secs(r.wall),
            checks,
            node
        ));
    }
    let count = |w: &str| reports.iter().filter(|r| r.status_word() == w).count();
    out.push_str(&format!(
        "{} passed, {} failed, {} ignored, {} errors\n",
        count("PASSED"),
        count("FAILED"),
        count("IGNORED"),
        count("ERROR")
    ));
    // The cause of each failure or error, one line each, so that the end of a long log (a CI step's tail)
    // still says why without scrolling back to the scenario's own block.
    for r in reports
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed | Outcome::Error { .. }))
    {
        if let Some(first) = r.failure_lines().first() {
            let more = r.failure_lines().len() - 1;
            let more = if more > 0 {
                format!(" (+{more} more)")
            } else {
                String::new()
            };
            out.push_str(&format!("  {}: {}{more}\n", r.name, one_line(first, CAUSE_CHARS)));
        }
    }
    out
}

/// From how many nodes a scenario's console report is brief ([`ScenarioReport::render_brief`]).
pub const BRIEF_FROM_NODES: usize = 10;

/// How many failed or expected-to-fail checks a brief report lists.
const BRIEF_CHECKS: usize = 10;

/// How much of a failure's cause the summary quotes (the scenario's report has all of it).
const CAUSE_CHARS: usize = 240;

/// `s` on one line, cut to `max` characters at a character boundary.
fn one_line(s: &str, max: usize) -> String {
    cut(&s.split_whitespace().collect::<Vec<_>>().join(" "), max)
}

/// `s` cut to `max` characters at a character boundary.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// JUnit XML (one test case per scenario) for CI systems. Every check, passed ones too, is a property of its
/// scenario's test case (name: the check's name; value: `PASS: expected X, got Y`) and a line of system-out.
pub fn junit(reports: &[ScenarioReport], run_id: &str) -> Result<String, String> {
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
                s.set_description(r.render());
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
                format!("{}: expected {}, got {}", check_mark(c), c.expected, c.actual),
            )
        }));
        case.set_system_out(format!("{}{}", r.render(), r.call_log));
        suite.add_test_case(case);
    }
    report.add_test_suite(suite);
    report.to_string().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> ScenarioReport {
        let mut r = ScenarioReport::new("demo", PathBuf::from("scenarios/demo.yaml"));
        r.checks = vec![
            Check::new("node-a/labels", true, "{team: a}", "{team: a, zone: x}"),
            Check::new("node-a/capacity pods", false, "29", "110"),
            Check {
                xfail: true,
                ..Check::new(
                    "node-a/cloud-init status",
                    true,
                    "to fail (failingChecks), i.e. not: done",
                    "error\nstage init: boom",
                )
            },
        ];
        r.outcome = Outcome::Failed;
        r
    }

    #[test]
    fn every_check_is_listed_with_expected_and_actual() {
        let text = report().render();
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("  checks: 2/3 passed"))
            .unwrap();
        assert_eq!(
            lines[at + 1..at + 5],
            [
                "  PASS  node-a/labels: expected {team: a}, got {team: a, zone: x}",
                "  FAIL  node-a/capacity pods: expected 29, got 110",
                "  XFAIL node-a/cloud-init status: expected to fail (failingChecks), i.e. not: done, got error",
                "          stage init: boom",
            ],
            "{text}"
        );
        assert_eq!(
            report().failure_lines(),
            vec!["node-a/capacity pods: expected 29, got 110"]
        );
    }

    #[test]
    fn a_passed_scenario_lists_its_checks_too() {
        let mut r = ScenarioReport::new("ok", PathBuf::from("scenarios/ok.yaml"));
        r.checks = vec![Check::new("node-a/Ready", true, "True", "True")];
        let text = r.render();
        assert!(
            text.contains("  checks: 1/1 passed\n  PASS  node-a/Ready: expected True, got True\n"),
            "{text}"
        );
    }

    #[test]
    fn a_large_scenario_is_brief_on_the_console_and_whole_in_its_report() {
        let mut r = ScenarioReport::new("fleet", PathBuf::from("scenarios/fleet.yaml"));
        for i in 0..50 {
            let node = format!("i-{i:017}");
            r.nodes.push(NodeTimeline {
                node_name: node.clone(),
                ready: Some(Duration::from_secs(20 + i)),
                ..Default::default()
            });
            for what in ["registered", "ready", "labels", "capacity.pods", "providerID"] {
                r.checks.push(Check::new(format!("{node}/{what}"), true, "x", "x"));
            }
            r.notes.push(format!(
                "{node}: 9 calls to the fakes: 1x imds GET /latest/meta-data/mac"
            ));
        }
        r.checks.push(Check::new(
            "i-00000000000000007/serving cert",
            false,
            "issued",
            "no CSR",
        ));
        r.notes.push("node group fleet: containerd v2.2.4".into());
        r.outcome = Outcome::Failed;
        r.report_file = Some(PathBuf::from("target/nodejoin/run/fleet/report.txt"));
        let brief = r.render_brief();
        assert!(brief.lines().count() <= 40, "{} lines:\n{brief}", brief.lines().count());
        assert!(
            brief.contains("  checks: 250/251 passed (250 PASS lines in the full report)\n"),
            "{brief}"
        );
        assert!(
            brief.contains("  FAIL  i-00000000000000007/serving cert: expected issued, got no CSR\n"),
            "{brief}"
        );
        assert!(
            brief.contains("  note: node group fleet: containerd v2.2.4\n"),
            "{brief}"
        );
        assert!(brief.contains("  notes: 50 about single nodes"), "{brief}");
        assert!(
            brief.contains("  full report: target/nodejoin/run/fleet/report.txt\n"),
            "{brief}"
        );
        let whole = r.render();
        assert!(
            whole.lines().count() > 300,
            "the full report keeps every node, check and note"
        );
        // Below the threshold, the console shows the whole report.
        r.nodes.truncate(BRIEF_FROM_NODES - 1);
        assert_eq!(r.render_brief(), r.render());
    }

    #[test]
    fn the_summary_ends_with_each_failures_cause() {
        let mut err = ScenarioReport::new("broken", PathBuf::from("scenarios/broken.yaml"));
        err.outcome = Outcome::Error {
            message: format!("node x: container failed to start:\n{}", "y".repeat(400)),
            hint: "see the engine".into(),
        };
        let mut ok = ScenarioReport::new("ok", PathBuf::from("scenarios/ok.yaml"));
        ok.checks = vec![Check::new("node-a/Ready", true, "True", "True")];
        let table = summary_table(&[ok, report(), err]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[4], "1 passed, 1 failed, 0 ignored, 1 errors", "{table}");
        assert_eq!(
            lines[5], "  demo: node-a/capacity pods: expected 29, got 110",
            "{table}"
        );
        assert!(
            lines[6].starts_with("  broken: node x: container failed to start: yyy"),
            "{table}"
        );
        assert!(lines[6].ends_with('…') && lines[6].chars().count() < 260, "{table}");
        assert_eq!(lines.len(), 7, "{table}");
    }

    #[test]
    fn junit_carries_every_check() {
        let mut ok = ScenarioReport::new("ok", PathBuf::from("scenarios/ok.yaml"));
        ok.checks = vec![Check::new("node-a/Ready", true, "True", "True")];
        let xml = junit(&[ok, report()], "run-1").unwrap();
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
