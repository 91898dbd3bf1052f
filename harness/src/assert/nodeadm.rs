//! What the node's nodeadm reported: the outcome of its two phases (`nodeadm-config.service`, `nodeadm init
//! --skip run`; `nodeadm-run.service`, `nodeadm init --skip config`) and the errors in its own log (zap JSON
//! lines in the journal), so a scenario can quote nodeadm's message when it refuses a NodeConfig.
use super::Check;
use crate::scenario::model::NodeadmExpectation;

/// The systemd units that run nodeadm in the node image, in order.
pub const UNITS: [&str; 2] = ["nodeadm-config.service", "nodeadm-run.service"];

/// One phase's unit as systemd left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    pub unit: String,
    /// `ActiveState` (`active` once a oneshot with RemainAfterExit succeeded).
    pub state: String,
    /// `Result` (`success`, `exit-code`, ...).
    pub result: String,
}

impl Phase {
    pub fn succeeded(&self) -> bool {
        self.state == "active" && self.result == "success"
    }
}

/// nodeadm's own account of one boot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeadmReport {
    pub phases: Vec<Phase>,
    /// `msg: error` of every error/fatal line nodeadm logged.
    pub errors: Vec<String>,
    /// How many lines it logged.
    pub lines: usize,
}

impl NodeadmReport {
    /// Builds the report from `systemctl show -p Id,ActiveState,Result` blocks and the units' journal.
    pub fn parse(show: &str, journal: &str) -> Self {
        let mut phases = Vec::new();
        for block in show.split("\n\n") {
            let field = |k: &str| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix(k).and_then(|r| r.strip_prefix('=')))
                    .unwrap_or_default()
                    .to_string()
            };
            let unit = field("Id");
            if !unit.is_empty() {
                phases.push(Phase {
                    unit,
                    state: field("ActiveState"),
                    result: field("Result"),
                });
            }
        }
        let mut errors = Vec::new();
        let mut lines = 0;
        for line in journal.lines().filter(|l| !l.trim().is_empty()) {
            lines += 1;
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if matches!(v["level"].as_str(), Some("error" | "fatal" | "panic")) {
                let msg = v["msg"].as_str().unwrap_or_default();
                errors.push(match v["error"].as_str() {
                    Some(e) => format!("{msg}: {e}"),
                    None => msg.to_string(),
                });
            }
        }
        NodeadmReport { phases, errors, lines }
    }

    pub fn succeeded(&self) -> bool {
        self.phases.len() == UNITS.len() && self.phases.iter().all(Phase::succeeded)
    }

    /// One line for the report.
    pub fn summary(&self) -> String {
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|p| {
                let name = p.unit.trim_end_matches(".service");
                if p.succeeded() {
                    format!("{name} ok")
                } else {
                    format!("{name} {}/{}", p.state, p.result)
                }
            })
            .collect();
        let mut s = format!("nodeadm: {} ({} log lines)", phases.join(", "), self.lines);
        if let Some(e) = self.errors.first() {
            s.push_str(&format!("; error: {e}"));
        }
        s
    }
}

/// The check on nodeadm's outcome.
pub fn check(node: &str, r: &NodeadmReport, want: NodeadmExpectation) -> Check {
    let ok = r.succeeded();
    let passed = match want {
        NodeadmExpectation::Succeeded => ok,
        NodeadmExpectation::Failed => !ok,
    };
    Check::new(
        format!("{node}/nodeadm"),
        passed,
        format!("{want:?}").to_lowercase(),
        if ok {
            "succeeded".to_string()
        } else {
            match r.errors.first() {
                Some(e) => format!("failed: {e}"),
                None => format!("failed ({})", r.summary()),
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOW_OK: &str = "Id=nodeadm-config.service\nActiveState=active\nResult=success\n\nId=nodeadm-run.service\nActiveState=active\nResult=success\n";

    #[test]
    fn successful_phases() {
        let journal = "{\"level\":\"info\",\"ts\":1.0,\"msg\":\"Checking user is root..\"}\n\n{\"level\":\"info\",\"msg\":\"Daemon is running\",\"name\":\"kubelet\"}\n";
        let r = NodeadmReport::parse(SHOW_OK, journal);
        assert!(r.succeeded());
        assert_eq!(r.lines, 2);
        assert!(r.errors.is_empty());
        assert_eq!(r.summary(), "nodeadm: nodeadm-config ok, nodeadm-run ok (2 log lines)");
        assert!(check("n", &r, NodeadmExpectation::Succeeded).passed);
        assert!(!check("n", &r, NodeadmExpectation::Failed).passed);
    }

    #[test]
    fn a_refused_config_is_quoted() {
        let show = "Id=nodeadm-config.service\nActiveState=failed\nResult=exit-code\n\nId=nodeadm-run.service\nActiveState=inactive\nResult=success\n";
        let journal = "{\"level\":\"info\",\"msg\":\"Validating configuration..\"}\n{\"level\":\"fatal\",\"ts\":1.0,\"caller\":\"nodeadm/main.go:40\",\"msg\":\"Command failed\",\"error\":\"CIDR is missing in cluster configuration\"}\nnot json\n";
        let r = NodeadmReport::parse(show, journal);
        assert!(!r.succeeded());
        assert_eq!(
            r.errors,
            vec!["Command failed: CIDR is missing in cluster configuration"]
        );
        let c = check("n", &r, NodeadmExpectation::Succeeded);
        assert!(!c.passed);
        assert!(c.actual.contains("CIDR is missing"), "{}", c.actual);
        assert!(r.summary().contains("nodeadm-config failed/exit-code"));
        assert!(check("n", &r, NodeadmExpectation::Failed).passed);
    }

    #[test]
    fn units_that_never_loaded_do_not_count_as_success() {
        assert!(!NodeadmReport::parse("", "").succeeded());
        let one = "Id=nodeadm-config.service\nActiveState=active\nResult=success\n";
        assert!(!NodeadmReport::parse(one, "").succeeded());
    }
}
