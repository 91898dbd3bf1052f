//! JSON lines (`nodejoin run --format json`): one object per event on stdout, `"event"` naming it, durations in
//! seconds; a finished scenario carries its outcome, checks, phases and per-node timeline.
use crate::run::events::{Event, Reporter};
use crate::run::report::{NodeTimeline, Outcome, ScenarioReport};
use serde_json::{json, Value};
use std::io::Write;

/// The version of the lines' format, in every line (`"formatVersion"`): raised when a field is removed or changes
/// meaning; a field added keeps it. A tool checks it before it reads the rest.
pub const FORMAT_VERSION: u32 = 1;

/// Writes to `out` (stdout for the CLI; a buffer in tests).
pub struct JsonLines<W: Write + Send> {
    out: W,
}

impl<W: Write + Send> JsonLines<W> {
    pub fn new(out: W) -> Self {
        Self { out }
    }
}

impl<W: Write + Send> Reporter for JsonLines<W> {
    fn on(&mut self, event: &Event) {
        let mut line = to_json(event);
        line["formatVersion"] = json!(FORMAT_VERSION);
        let _ = writeln!(self.out, "{line}");
        let _ = self.out.flush();
    }
}

/// The `run_finished` line of a run that ended before its reporters existed (no scenario files, the provider
/// unavailable, the environment failed to start): its JSON still ends with one; the cause is on stderr.
pub fn aborted_line() -> Value {
    json!({
        "event": "run_finished", "formatVersion": FORMAT_VERSION, "aborted": true, "wall": 0.0,
        "passed": 0, "failed": 0, "errors": 0, "ignored": 0, "leftovers": [], "cancelled": Value::Null,
        "message": "the run ended before any scenario ran (the cause is on stderr)",
    })
}

fn opt_secs(d: Option<std::time::Duration>) -> Value {
    d.map(|d| json!(d.as_secs_f64())).unwrap_or(Value::Null)
}

fn node_json(n: &NodeTimeline) -> Value {
    json!({
        "node": n.node_name, "instanceId": n.instance_id, "ip": n.ip,
        "containerUp": opt_secs(n.container_up), "bootstrapDone": opt_secs(n.bootstrap),
        "clientCsrIssued": opt_secs(n.client_csr_issued), "registered": opt_secs(n.registered),
        "ready": opt_secs(n.ready), "servingCsrIssued": opt_secs(n.serving_csr_issued),
        "servingCertLive": opt_secs(n.serving_cert_live), "cpu": opt_secs(n.cpu),
        "cpuProfile": cpu_profile_json(n),
    })
}

/// Where a node's CPU went (seconds by part, whole and phase by phase), or null when it could not be read.
fn cpu_profile_json(n: &NodeTimeline) -> Value {
    use crate::node::cpu::{Part, Profile};
    let parts = |p: &Profile| -> Value {
        Part::ALL
            .iter()
            .map(|part| (part.name().to_string(), json!(p.get(*part).as_secs_f64())))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    let Some(whole) = n.cpu_parts() else {
        return Value::Null;
    };
    json!({
        "parts": parts(&whole),
        "realParts": whole.real().as_secs_f64(),
        "ratioToRealParts": whole.ratio(),
        "nodejoinShare": whole.nodejoin_share(),
        "phases": n.cpu_profile.iter().map(|(phase, p)| json!({"phase": phase, "parts": parts(p)})).collect::<Vec<_>>(),
        "top": n.cpu_top.iter().map(|(cgroup, part, d)| json!({"cgroup": cgroup, "part": part.name(), "seconds": d.as_secs_f64()})).collect::<Vec<_>>(),
    })
}

/// A finished scenario as JSON.
pub fn report_json(r: &ScenarioReport) -> Value {
    let (outcome, reason) = match &r.outcome {
        Outcome::Passed if r.flaky() => ("flaky", None),
        Outcome::Passed => ("passed", None),
        Outcome::Failed => ("failed", None),
        Outcome::Ignored(why) => ("ignored", Some(why.clone())),
        Outcome::Unavailable(why) => ("unavailable", Some(why.clone())),
        Outcome::Error { message, hint } => ("error", Some(format!("{message} (hint: {hint})"))),
    };
    json!({
        "scenario": r.name, "file": r.file, "outcome": outcome, "reason": reason,
        "wall": r.wall.as_secs_f64(),
        // Part of `wall`, blocked on builds other scenarios had started.
        "waitedForBuilds": r.waited_for_builds.as_secs_f64(),
        "waitedForRoom": r.waited_for_room.as_secs_f64(),
        "phases": r.phases.iter().map(|(n, d)| json!({"phase": n, "took": d.as_secs_f64()})).collect::<Vec<_>>(),
        "checks": r.checks.iter().map(check_json).collect::<Vec<_>>(),
        "nodes": r.nodes.iter().map(node_json).collect::<Vec<_>>(),
        "failures": r.failure_lines(),
        "notes": r.notes,
        "aggregate": r.aggregate(),
        "calls": r.call_count,
        "controlPlaneRssKib": r.control_plane_rss.iter().map(|(n, k)| json!({"process": n, "kib": k})).collect::<Vec<_>>(),
        "artifacts": r.artifacts,
        "attempt": r.earlier_attempts.len() + 1,
        "earlierAttempts": r.earlier_attempts.iter().map(|a| json!({
            "attempt": a.number, "outcome": a.status.to_ascii_lowercase(), "wall": a.wall.as_secs_f64(),
            "failures": a.failures, "artifacts": a.artifacts,
        })).collect::<Vec<_>>(),
    })
}

fn check_json(c: &crate::assert::Check) -> Value {
    json!({"check": c.name, "passed": c.passed, "expected": c.expected, "actual": c.actual, "expectedFailure": c.xfail})
}

pub fn to_json(event: &Event) -> Value {
    match event {
        Event::RunStarted {
            run_id,
            artifacts,
            scenarios,
            jobs,
        } => {
            json!({"event": "run_started", "runId": run_id, "artifacts": artifacts, "scenarios": scenarios, "jobs": jobs})
        }
        Event::ScenarioStarted { scenario, provider } => {
            json!({"event": "scenario_started", "scenario": scenario, "provider": provider})
        }
        Event::PhaseStarted { scenario, phase } => {
            json!({"event": "phase_started", "scenario": scenario, "phase": phase})
        }
        Event::PhaseDone { scenario, phase, took } => {
            json!({"event": "phase_done", "scenario": scenario, "phase": phase, "took": took.as_secs_f64()})
        }
        Event::CheckDone { scenario, check } => {
            let mut v = check_json(check);
            v["event"] = json!("check");
            v["scenario"] = json!(scenario);
            v
        }
        Event::ScenarioFinished { report } => {
            let mut v = report_json(report);
            v["event"] = json!("scenario_finished");
            v
        }
        Event::AttemptFailed { report, attempt, of } => {
            let mut v = report_json(report);
            v["event"] = json!("attempt_failed");
            v["attempt"] = json!(attempt);
            v["attempts"] = json!(of);
            v
        }
        Event::RunFinished {
            reports,
            wall,
            leftovers,
            cancelled,
            host_cpu,
        } => {
            let count = |f: fn(&Outcome) -> bool| reports.iter().filter(|r| f(&r.outcome)).count();
            let flaky = reports.iter().filter(|r| r.flaky()).count();
            json!({
                "event": "run_finished", "wall": wall.as_secs_f64(),
                "passed": count(|o| matches!(o, Outcome::Passed)) - flaky,
                "flaky": flaky,
                "failed": count(|o| matches!(o, Outcome::Failed)),
                "errors": count(|o| matches!(o, Outcome::Error { .. })),
                "ignored": count(|o| matches!(o, Outcome::Ignored(_) | Outcome::Unavailable(_))),
                "leftovers": leftovers,
                "cancelled": cancelled,
                "harnessPeakRssMib": crate::host::own_peak_rss_mib(),
                "harnessCpuSeconds": crate::host::own_cpu_time().map(|d| d.as_secs_f64()),
                "cost": crate::run::cost::RunCost::of(reports, *wall, *host_cpu).json(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn one_parseable_line_per_event() {
        let mut report = ScenarioReport::new("basic", "scenarios/basic.yaml".into());
        report
            .checks
            .push(crate::assert::Check::new("n/ready", false, "Ready", "NotReady"));
        report.outcome = Outcome::Failed;
        let mut out = Vec::new();
        {
            let mut r = JsonLines::new(&mut out);
            r.on(&Event::PhaseDone {
                scenario: "basic".into(),
                phase: "bootstrap".into(),
                took: Duration::from_millis(1500),
            });
            r.on(&Event::ScenarioFinished {
                report: Arc::new(report.clone()),
            });
            r.on(&Event::RunFinished {
                reports: Arc::new(vec![report]),
                wall: Duration::from_secs(3),
                leftovers: vec![],
                host_cpu: None,
                cancelled: None,
            });
        }
        let text = String::from_utf8(out).unwrap_or_default();
        let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0]["event"], "phase_done");
        assert_eq!(lines[0]["took"], 1.5);
        assert_eq!(lines[1]["outcome"], "failed");
        assert_eq!(lines[1]["failures"][0], "n/ready: expected Ready, got NotReady");
        assert_eq!(lines[2]["failed"], 1);
        assert_eq!(lines[2]["passed"], 0);
        assert!(lines.iter().all(|l| l["formatVersion"] == FORMAT_VERSION), "{text}");
        assert_eq!(aborted_line()["formatVersion"], FORMAT_VERSION);
    }
}
