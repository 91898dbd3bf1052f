//! A scenario's report as data: its outcome, checks, phases, node timelines and notes. What people and CI read
//! is made from it by the reporters (`crate::reporter`).
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

/// An attempt of a scenario that failed before the one reported (`nodejoin run --retries`).
#[derive(Debug, Clone)]
pub struct Attempt {
    /// From 1.
    pub number: u32,
    /// `FAILED` or `ERROR`.
    pub status: &'static str,
    pub failures: Vec<String>,
    /// The checks that failed, by their stable names ([`ScenarioReport::stable_name`]).
    pub failed_checks: Vec<String>,
    pub wall: Duration,
    /// Where that attempt's artifacts were moved (`<scenario>.attempt-N`), when it kept any.
    pub artifacts: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct ScenarioReport {
    pub name: String,
    /// `provider/v1.MINOR/scenario`, as cargo and nextest name the trial (JUnit's classname); empty when the
    /// report was made before the trial was known.
    pub trial: String,
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
    /// Part of `wall` spent blocked on builds other scenarios had started (binaries, node images, the sandbox
    /// image), measured in `provision`: in a cold run it dwarfs a scenario's own work, so reports show it apart.
    pub waited_for_builds: Duration,
    /// Part of `wall` spent waiting for room (node slots, the VM lane, an IAM control plane to itself) while
    /// other scenarios ran: the run's, not the scenario's own time.
    pub waited_for_room: Duration,
    /// The attempts that failed before this one: a scenario that passes after any is FLAKY.
    pub earlier_attempts: Vec<Attempt>,
}

impl ScenarioReport {
    pub fn new(name: &str, file: PathBuf) -> Self {
        Self {
            name: name.to_string(),
            trial: String::new(),
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
            waited_for_builds: Duration::ZERO,
            waited_for_room: Duration::ZERO,
            earlier_attempts: Vec::new(),
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

    /// The trial's name (`provider/v1.MINOR/scenario`), else the scenario's when the report predates its trial.
    pub fn trial_name(&self) -> &str {
        if self.trial.is_empty() {
            &self.name
        } else {
            &self.trial
        }
    }

    /// A check's name with its node's DNS name (made from the address this run gave it) replaced by its stable
    /// label (`worker-0`): the same in every matrix cell and attempt (JUnit, annotations).
    pub fn stable_name(&self, check: &str) -> String {
        for n in self.nodes.iter().filter(|n| !n.label.is_empty()) {
            if let Some(rest) = check.strip_prefix(&format!("{}/", n.node_name)) {
                return format!("{}/{rest}", n.label);
            }
        }
        check.to_string()
    }

    /// Passed, but only after a failed attempt (`--retries`): nextest's FLAKY.
    pub fn flaky(&self) -> bool {
        self.passed() && !self.earlier_attempts.is_empty()
    }

    pub fn status_word(&self) -> &'static str {
        match self.outcome {
            Outcome::Passed if self.flaky() => "FLAKY",
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
}
