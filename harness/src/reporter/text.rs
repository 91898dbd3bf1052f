//! The text people read: a scenario's whole report (`report.txt`, JUnit's system-out), its brief form on the
//! console, and the summary table that ends a run; [`ReportFiles`] writes each scenario's `report.txt` when it
//! finishes. Built from the reports the runner's events carry; the runner prints nothing itself.
use crate::assert::Check;
use crate::run::events::{Event, Reporter};
use crate::run::report::{secs, Outcome, ScenarioReport};
use std::time::Duration;

/// Writes each finished scenario's whole report, then its calls to the fakes, to the `report.txt` the runner
/// named for it ([`ScenarioReport::report_file`]); reporters after it in a sink find the file there.
pub struct ReportFiles;

impl Reporter for ReportFiles {
    fn on(&mut self, event: &Event) {
        let (Event::ScenarioFinished { report } | Event::AttemptFailed { report, .. }) = event else {
            return;
        };
        if let Some(file) = &report.report_file {
            let text = format!("{}{}", full(report), report.call_log);
            if let Err(e) = std::fs::write(file, text) {
                eprintln!("error: cannot write {}: {e}", file.display());
            }
        }
    }
}

/// The report for a person at a terminal: [`full`] up to [`BRIEF_FROM_NODES`] nodes; beyond, the
/// figures over the nodes, the failed and expected-to-fail checks and the scenario's own notes, with the
/// rest counted and left to `report.txt` (a 50-node scenario fits on one screen).
pub fn brief(r: &ScenarioReport) -> String {
    if r.nodes.len() < BRIEF_FROM_NODES {
        return full(r);
    }
    let mut out = head(r);
    for line in r.aggregate() {
        out.push_str(&format!("  nodes: {line}\n"));
    }
    let passed = r.checks.iter().filter(|c| c.passed && !c.xfail).count();
    let shown: Vec<&Check> = r.checks.iter().filter(|c| !c.passed || c.xfail).collect();
    out.push_str(&format!(
        "  checks: {}/{} passed{}\n",
        r.checks.iter().filter(|c| c.passed).count(),
        r.checks.len(),
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
    if let Outcome::Error { message, hint } = &r.outcome {
        out.push_str(&format!("  error: {message}\n  hint: {hint}\n"));
    }
    // The scenario's own notes; those of one node each (they start with its name) are counted.
    let per_node = |n: &String| r.nodes.iter().any(|t| n.starts_with(&format!("{}: ", t.node_name)));
    for n in r.notes.iter().filter(|n| !per_node(n)) {
        out.push_str(&format!("  note: {}\n", one_line(n, CAUSE_CHARS)));
    }
    let node_notes = r.notes.iter().filter(|n| per_node(n)).count();
    if node_notes > 0 {
        out.push_str(&format!(
            "  notes: {node_notes} about single nodes, and each node's milestones, in the full report\n"
        ));
    }
    // Named only once written ([`ReportFiles`], earlier in the sink).
    if let Some(f) = r.report_file.as_ref().filter(|f| f.is_file()) {
        out.push_str(&format!("  full report: {}\n", f.display()));
    }
    if let Some(a) = &r.artifacts {
        out.push_str(&format!("  artifacts: {}\n", a.display()));
    }
    out
}

/// The lines both renderings start with: the verdict, why it was ignored, the phases.
/// Where a node's CPU went: `CPU by part: kubelet 0.40s | ... (1.42x its real parts; nodejoin 6%)`, then each
/// phase's parts.
fn cpu_profile_line(n: &crate::run::timeline::NodeTimeline) -> Option<String> {
    let whole = n.cpu_parts()?;
    let mut line = format!("CPU by part: {}", whole.line());
    if let (Some(ratio), Some(share)) = (whole.ratio(), whole.nodejoin_share()) {
        line.push_str(&format!(
            " ({ratio:.2}x its real parts; nodejoin {:.0}%)",
            share * 100.0
        ));
    }
    let phases: Vec<String> = n
        .cpu_profile
        .iter()
        .map(|(phase, p)| format!("{phase} {}", secs(p.total())))
        .collect();
    line.push_str(&format!("; by phase: {}", phases.join(" | ")));
    Some(line)
}

fn head(r: &ScenarioReport) -> String {
    let mut out = format!(
        "scenario {}: {} in {}{}\n",
        r.name,
        r.status_word(),
        secs(r.wall),
        waited_note(r)
    );
    if let Outcome::Ignored(reason) | Outcome::Unavailable(reason) = &r.outcome {
        out.push_str(&format!("  ignored: {reason}\n"));
    }
    // A FLAKY scenario says what failed before it passed, and where that attempt's artifacts are.
    for a in &r.earlier_attempts {
        let first = a.failures.first().map(|f| one_line(f, CAUSE_CHARS)).unwrap_or_default();
        out.push_str(&format!(
            "  attempt {} {} in {}: {first}\n",
            a.number,
            a.status,
            secs(a.wall)
        ));
        if let Some(dir) = &a.artifacts {
            out.push_str(&format!("    its artifacts: {}\n", dir.display()));
        }
    }
    if !r.phases.is_empty() {
        let phases: Vec<String> = r.phases.iter().map(|(n, d)| format!("{n} {}", secs(*d))).collect();
        out.push_str(&format!("  phases: {}\n", phases.join(" | ")));
    }
    out
}

/// The whole report: every node's milestones, every check, every note (`report.txt`, JUnit).
pub fn full(r: &ScenarioReport) -> String {
    let mut out = head(r);
    for n in &r.nodes {
        out.push_str(&format!("  node {} ({}, {})\n", n.node_name, n.instance_id, n.ip));
        let milestones = [
            (n.up_label(), n.container_up, ""),
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
        if let Some(line) = cpu_profile_line(n) {
            out.push_str(&format!("    {line}\n"));
        }
    }
    for line in r.aggregate() {
        out.push_str(&format!("  nodes: {line}\n"));
    }
    let passed = r.checks.iter().filter(|c| c.passed).count();
    out.push_str(&format!("  checks: {passed}/{} passed\n", r.checks.len()));
    for c in &r.checks {
        out.push_str(&format!("  {}\n", check_line(c).replace('\n', "\n          ")));
    }
    if let Outcome::Error { message, hint } = &r.outcome {
        out.push_str(&format!("  error: {message}\n  hint: {hint}\n"));
    }
    for n in &r.notes {
        out.push_str(&format!("  note: {n}\n"));
    }
    if let Some(a) = &r.artifacts {
        out.push_str(&format!("  artifacts: {}\n", a.display()));
    }
    out
}

/// One check, passed or not, with what was expected and what was found: `PASS name: expected X, got Y`.
pub fn check_line(c: &Check) -> String {
    format!("{:<5} {}: expected {}, got {}", c.mark(), c.name, c.expected, c.actual)
}

/// Which of a report's waits a line names.
type WaitOf = fn(&ScenarioReport) -> Duration;

/// A summary table of several scenarios.
pub fn summary(reports: &[ScenarioReport]) -> String {
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
    // Part of the walls above, named apart: in a cold run it is most of them.
    let waited: [(&str, WaitOf); 2] = [
        ("shared builds", |r| r.waited_for_builds),
        ("room (other scenarios running)", |r| r.waited_for_room),
    ];
    for (what, of) in waited {
        let waits: Vec<String> = reports
            .iter()
            .filter(|r| of(r) >= WAITED)
            .map(|r| format!("{} {}", r.name, secs(of(r))))
            .collect();
        if !waits.is_empty() {
            out.push_str(&format!("of those walls, waiting for {what}: {}\n", waits.join(", ")));
        }
    }
    let count = |w: &str| reports.iter().filter(|r| r.status_word() == w).count();
    let flaky = match count("FLAKY") {
        0 => String::new(),
        n => format!(", {n} flaky"),
    };
    out.push_str(&format!(
        "{} passed, {} failed, {} ignored, {} errors{flaky}\n",
        count("PASSED"),
        count("FAILED"),
        count("IGNORED"),
        count("ERROR")
    ));
    // A flaky scenario's first failure, as a failure's cause is quoted below: a retry must not hide it.
    for r in reports.iter().filter(|r| r.flaky()) {
        let tries = r.earlier_attempts.len() + 1;
        let first = r.earlier_attempts.first().and_then(|a| a.failures.first());
        let first = first.map(|f| one_line(f, CAUSE_CHARS)).unwrap_or_default();
        out.push_str(&format!("  {}: FLAKY (passed on attempt {tries}): {first}\n", r.name));
    }
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

/// From how many nodes a scenario's console report is brief ([`brief`]).
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

/// Less waiting for shared builds than this is not named.
const WAITED: Duration = Duration::from_millis(10);

/// ` (X of it waiting for shared builds, Y of it waiting for room)` after a wall that includes such waiting, else
/// nothing: the wall stays whole and the waiting is named beside it, never taken out of it.
pub fn waited_note(r: &ScenarioReport) -> String {
    let mut waits = Vec::new();
    if r.waited_for_builds >= WAITED {
        waits.push(format!("{} of it waiting for shared builds", secs(r.waited_for_builds)));
    }
    if r.waited_for_room >= WAITED {
        waits.push(format!("{} of it waiting for room", secs(r.waited_for_room)));
    }
    match waits.is_empty() {
        true => String::new(),
        false => format!(" ({})", waits.join(", ")),
    }
}

/// Nodes a console timeline lists ([`node_timeline`]); `timeline.svg` draws more.
const TIMELINE_NODES: usize = 10;

/// Each node's milestones on the scenario's clock (seconds from the start of its pipeline), one line each, for a
/// failed scenario on the console: `worker  up 2.40s │ bootstrap 2.40–4.30s │ CSR 4.40s │ registered 4.80s │
/// Ready –`. Empty without nodes.
pub fn node_timeline(r: &ScenarioReport) -> String {
    if r.nodes.is_empty() {
        return String::new();
    }
    let width = r
        .nodes
        .iter()
        .take(TIMELINE_NODES)
        .map(|n| n.node_name.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::from("  timeline (seconds from the scenario's start):\n");
    let at = |d: Option<Duration>| d.map(secs).unwrap_or_else(|| "–".into());
    for n in r.nodes.iter().take(TIMELINE_NODES) {
        let p = n.placed();
        let mut parts = vec![
            format!("up {}", at(p.up.map(|(_, e)| e))),
            match p.bootstrap {
                Some((from, to)) => format!("bootstrap {:.2}–{}", from.as_secs_f64(), secs(to)),
                None => "bootstrap –".into(),
            },
            format!("CSR {}", at(p.client_csr)),
            format!("registered {}", at(p.registered)),
            format!("Ready {}", at(p.ready)),
        ];
        // The serving cert only where it was reached: not every scenario waits for it.
        if let Some(live) = p.serving_live {
            parts.push(format!("serving cert {}", secs(live)));
        }
        out.push_str(&format!("    {:<width$}  {}\n", n.node_name, parts.join(" │ ")));
    }
    if r.nodes.len() > TIMELINE_NODES {
        out.push_str(&format!(
            "    … {} more nodes in report.txt and timeline.svg\n",
            r.nodes.len() - TIMELINE_NODES
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::report::NodeTimeline;
    use std::path::PathBuf;

    use super::super::{sample_names, sample_report as report};

    #[test]
    fn every_check_is_listed_with_expected_and_actual() {
        let [labels, capacity_pods, cloud_init] = sample_names();
        let text = full(&report());
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("  checks: 2/3 passed"))
            .unwrap();
        assert_eq!(
            lines[at + 1..at + 5],
            [
                format!("  PASS  {labels}: expected {{team: a}}, got {{team: a, zone: x}}"),
                format!("  FAIL  {capacity_pods}: expected 29, got 110"),
                format!("  XFAIL {cloud_init}: expected to fail (failingChecks), i.e. not: done, got error"),
                "          stage init: boom".to_string(),
            ],
            "{text}"
        );
        assert_eq!(
            report().failure_lines(),
            vec![format!("{capacity_pods}: expected 29, got 110")]
        );
    }

    #[test]
    fn a_passed_scenario_lists_its_checks_too() {
        let mut r = ScenarioReport::new("ok", PathBuf::from("scenarios/ok.yaml"));
        r.checks = vec![Check::new("node-a/ready", true, "True", "True")];
        let text = full(&r);
        assert!(
            text.contains("  checks: 1/1 passed\n  PASS  node-a/ready: expected True, got True\n"),
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
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("report.txt");
        std::fs::write(&file, "").unwrap();
        r.report_file = Some(file.clone());
        let brief = brief(&r);
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
            brief.contains(&format!("  full report: {}\n", file.display())),
            "{brief}"
        );
        let whole = full(&r);
        assert!(
            whole.lines().count() > 300,
            "the full report keeps every node, check and note"
        );
        // Below the threshold, the console shows the whole report.
        r.nodes.truncate(BRIEF_FROM_NODES - 1);
        assert_eq!(super::brief(&r), full(&r));
    }

    #[test]
    fn the_summary_ends_with_each_failures_cause() {
        let mut err = ScenarioReport::new("broken", PathBuf::from("scenarios/broken.yaml"));
        err.outcome = Outcome::Error {
            message: format!("node x: container failed to start:\n{}", "y".repeat(400)),
            hint: "see the engine".into(),
        };
        let mut ok = ScenarioReport::new("ok", PathBuf::from("scenarios/ok.yaml"));
        ok.checks = vec![Check::new("node-a/ready", true, "True", "True")];
        let table = summary(&[ok, report(), err]);
        let [_, capacity_pods, _] = sample_names();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[4], "1 passed, 1 failed, 0 ignored, 1 errors", "{table}");
        assert_eq!(
            lines[5],
            format!("  demo: {capacity_pods}: expected 29, got 110"),
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
    fn waiting_for_shared_builds_is_named_beside_the_wall() {
        let mut r = ScenarioReport::new("al2023-karpenter", PathBuf::from("k.yaml"));
        r.wall = Duration::from_millis(751_670);
        r.waited_for_builds = Duration::from_millis(741_500);
        assert!(
            full(&r).starts_with(
                "scenario al2023-karpenter: PASSED in 751.67s (741.50s of it waiting for shared builds)\n"
            ),
            "{}",
            full(&r)
        );
        let table = summary(&[r.clone()]);
        assert!(
            table.contains("\nof those walls, waiting for shared builds: al2023-karpenter 741.50s\n"),
            "{table}"
        );
        r.waited_for_builds = Duration::from_millis(2);
        assert!(full(&r).starts_with("scenario al2023-karpenter: PASSED in 751.67s\n"));
        assert!(!summary(&[r.clone()]).contains("waiting"));
        r.waited_for_room = Duration::from_millis(140_000);
        assert!(full(&r).starts_with("scenario al2023-karpenter: PASSED in 751.67s (140.00s of it waiting for room)\n"));
        assert!(summary(&[r])
            .contains("\nof those walls, waiting for room (other scenarios running): al2023-karpenter 140.00s\n"));
    }

    #[test]
    fn a_failed_scenarios_timeline_puts_its_nodes_on_one_clock() {
        let s = Duration::from_millis;
        let mut r = report();
        assert_eq!(node_timeline(&r), "", "no nodes, no timeline");
        r.nodes = vec![
            NodeTimeline {
                node_name: "worker".into(),
                boot_at: Some(s(100)),
                container_up: Some(s(2_300)),
                kubelet_at: Some(s(4_300)),
                bootstrap: Some(s(1_900)),
                client_csr_issued: Some(s(100)),
                registered: Some(s(500)),
                ..Default::default()
            },
            NodeTimeline {
                node_name: "w2".into(),
                boot_at: Some(s(100)),
                ..Default::default()
            },
        ];
        assert_eq!(
            node_timeline(&r),
            "  timeline (seconds from the scenario's start):\n    \
             worker  up 2.40s │ bootstrap 2.40–4.30s │ CSR 4.40s │ registered 4.80s │ Ready –\n    \
             w2      up – │ bootstrap – │ CSR – │ registered – │ Ready –\n"
        );
    }
}
