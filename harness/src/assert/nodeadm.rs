//! What the node's nodeadm reported: the outcome of its two phases (`nodeadm-config.service`, `nodeadm init
//! --skip run`; `nodeadm-run.service`, `nodeadm init --skip config`) and the errors in its own log (zap JSON
//! lines in the journal), so a scenario can quote nodeadm's message when it refuses a NodeConfig.
use super::Check;
use crate::scenario::model::NodeadmExpectation;

/// The systemd units that run nodeadm in the node image, in order (ours, or the AL2023 AMI's of the same names).
pub const UNITS: [&str; 2] = ["nodeadm-config.service", "nodeadm-run.service"];

/// The AL2023 AMI's unit that runs before them (`nodeadm-internal boot-hook`), started where the image has it and
/// then a phase of its own.
pub const BOOT_HOOK: &str = "nodeadm-boot-hook.service";

/// The properties [`NodeadmReport::parse`] reads (`systemctl show -p ...`).
pub const SHOW_PROPERTIES: &str = "Id,LoadState,ActiveState,Result";

/// One phase's unit as systemd left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Phase {
    pub unit: String,
    /// `ActiveState` (`active` once a oneshot with RemainAfterExit succeeded).
    pub state: String,
    /// `Result` (`success`, `exit-code`, ...).
    pub result: String,
    /// Whether its command was started at all (a oneshot that never ran is also inactive with `success`).
    pub ran: bool,
}

impl Phase {
    /// Ran and succeeded: `active` (our units keep RemainAfterExit) or `inactive` after running (the AMI's
    /// oneshots do not).
    pub fn succeeded(&self) -> bool {
        self.result == "success" && (self.state == "active" || (self.state == "inactive" && self.ran))
    }
}

/// nodeadm's own account of one boot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeadmReport {
    pub phases: Vec<Phase>,
    /// `msg: error` of every error/fatal line nodeadm logged.
    pub errors: Vec<String>,
    /// `msg: error` of the warnings and errors before its last error that carry an error of their own (a part
    /// it could not decode, a provider that failed): what explains a last error such as "no config in chain".
    pub earlier: Vec<String>,
    /// How many lines it logged.
    pub lines: usize,
}

impl NodeadmReport {
    /// Builds the report from `systemctl show -p` [`SHOW_PROPERTIES`] blocks and the units' journal.
    pub fn parse(show: &str, journal: &str) -> Self {
        Self::parse_with_jobs(show, journal, "")
    }

    /// [`parse`](Self::parse), with the units' journal as JSON (`journalctl -o json
    /// -u UNIT...`): a oneshot without RemainAfterExit (the AMI's) is unloaded once it has run, and then shows as
    /// inactive with no trace of having run; its start job's `JOB_RESULT=done` is that trace.
    pub fn parse_with_jobs(show: &str, journal: &str, jobs: &str) -> Self {
        let started: std::collections::BTreeSet<String> = jobs
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["JOB_TYPE"] == "start" && v["JOB_RESULT"] == "done")
            .filter_map(|v| v["UNIT"].as_str().map(str::to_string))
            .collect();
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
            // A unit the image does not have (the AMI's boot hook in nodejoin's own image) is no phase.
            if !unit.is_empty() && field("LoadState") != "not-found" {
                phases.push(Phase {
                    ran: started.contains(&unit),
                    unit,
                    state: field("ActiveState"),
                    result: field("Result"),
                });
            }
        }
        Self::with_log(phases, journal)
    }

    /// The report from the units' journal alone (`journalctl -o json -u UNIT...`), as read from a stopped machine's
    /// disk, where no unit's state can be asked for: each phase's outcome is its last start job's (`JOB_RESULT`,
    /// with the unit's `UNIT_RESULT` where it failed). A phase of [`UNITS`] with no start job did not run; a boot
    /// hook with none is taken to be absent from the image.
    pub fn from_journal(entries: &str) -> Self {
        let entries: Vec<serde_json::Value> = entries
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .collect();
        let mut phases = Vec::new();
        for unit in std::iter::once(BOOT_HOOK).chain(UNITS) {
            let of_unit = |v: &&serde_json::Value| v["UNIT"] == unit;
            let job = entries
                .iter()
                .filter(of_unit)
                .rfind(|v| v["JOB_TYPE"] == "start" && v["JOB_RESULT"].is_string())
                .and_then(|v| v["JOB_RESULT"].as_str());
            // systemd's "Starting …" entry: a start job that ended has its result logged, one cut by the
            // shutdown has none.
            let started = entries.iter().filter(of_unit).any(|v| v["JOB_TYPE"] == "start");
            let unit_result = entries
                .iter()
                .filter(of_unit)
                .filter_map(|v| v["UNIT_RESULT"].as_str())
                .next_back();
            let (state, result) = match job {
                Some("done") => ("inactive", "success".to_string()),
                Some(other) => ("failed", unit_result.unwrap_or(other).to_string()),
                // Still starting when the machine was shut down (nodeadm retrying a call, waiting on a unit).
                None if started => (
                    "activating",
                    match unit_result {
                        Some(r) => format!("unfinished at shutdown ({r})"),
                        None => "unfinished at shutdown".to_string(),
                    },
                ),
                None if unit == BOOT_HOOK => continue,
                None => ("inactive", "never started".to_string()),
            };
            phases.push(Phase {
                unit: unit.to_string(),
                state: state.into(),
                result,
                ran: started,
            });
        }
        let journal = messages(&entries.iter().map(|v| v.to_string()).collect::<Vec<_>>().join("\n"));
        Self::with_log(phases, &journal)
    }

    /// The report of `phases`, with the errors and the line count of nodeadm's log (`journal`, one message a line).
    fn with_log(phases: Vec<Phase>, journal: &str) -> Self {
        // Every warning and error, in order: (level, message, whether it carries an error of its own).
        let mut entries = Vec::new();
        let mut lines = 0;
        for line in journal.lines().filter(|l| !l.trim().is_empty()) {
            lines += 1;
            entries.extend(entry_of(line));
        }
        let errors: Vec<String> = entries
            .iter()
            .filter(|(level, ..)| *level == "error")
            .map(|(_, e, _)| e.clone())
            .collect();
        let last = entries.iter().rposition(|(level, ..)| *level == "error");
        let mut earlier: Vec<String> = Vec::new();
        for (_, e, caused) in &entries[..last.unwrap_or(0)] {
            if *caused && Some(e) != errors.last() && !earlier.contains(e) {
                earlier.push(e.clone());
            }
        }
        NodeadmReport {
            phases,
            errors,
            earlier,
            lines,
        }
    }

    /// Its last error, with the earlier warning or error nearest before it that carries an error of its own (what
    /// explains it; the ones before are routine on a first boot, such as no cached config yet), as a verdict
    /// quotes it: `Command failed: no config in chain (after: Encountered error in config provider: failed to
    /// decode node config, ...)`.
    pub fn cause(&self) -> Option<String> {
        let last = self.errors.last()?;
        Some(match self.earlier.last() {
            None => last.clone(),
            Some(why) => format!("{last} (after: {why})"),
        })
    }

    /// Both of nodeadm's phases ran and succeeded, and so did the boot hook where the image has one.
    pub fn succeeded(&self) -> bool {
        UNITS.iter().all(|u| self.phases.iter().any(|p| p.unit == *u)) && self.phases.iter().all(Phase::succeeded)
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
        if let Some(e) = self.cause() {
            s.push_str(&format!("; error: {e}"));
        }
        s
    }
}

/// The messages of journal entries given as `journalctl -o json` lines, one a line, as `journalctl -o cat` prints
/// them (a message journald stored as bytes is decoded lossily).
pub fn messages(entries: &str) -> String {
    let mut out = String::new();
    for v in entries
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
    {
        let message = match &v["MESSAGE"] {
            serde_json::Value::String(m) => m.clone(),
            serde_json::Value::Array(bytes) => {
                let bytes: Vec<u8> = bytes.iter().filter_map(|b| b.as_u64().map(|b| b as u8)).collect();
                String::from_utf8_lossy(&bytes).into_owned()
            }
            _ => continue,
        };
        out.push_str(&message);
        out.push('\n');
    }
    out
}

/// The level (`warn` or `error` for error, fatal and panic) and message (`msg: error`) of a warning or error line
/// of nodeadm's log, and whether it carries an error field of its own (zap.Error), in either of the encodings
/// nodeadm's zap logger has used: one JSON object a line (2024), or console lines (`fatal cli/main.go:35 Command
/// failed {"error": "..."}`, current).
fn entry_of(line: &str) -> Option<(&'static str, String, bool)> {
    let line = line.trim();
    let (level, msg, fields) = match serde_json::from_str::<serde_json::Value>(line) {
        Ok(v) if v.is_object() => (
            v["level"].as_str()?.to_string(),
            v["msg"].as_str().unwrap_or_default().to_string(),
            v,
        ),
        _ => {
            let (level, rest) = line.split_once(' ')?;
            // The caller (`cli/main.go:35`), then the message and an optional JSON object of fields.
            let (_, rest) = rest.split_once(' ')?;
            let (msg, fields) = match rest.find(" {") {
                Some(i) => match serde_json::from_str::<serde_json::Value>(&rest[i + 1..]) {
                    Ok(v) => (rest[..i].to_string(), v),
                    Err(_) => (rest.to_string(), serde_json::Value::Null),
                },
                None => (rest.to_string(), serde_json::Value::Null),
            };
            (level.to_string(), msg, fields)
        }
    };
    let level = match level.as_str() {
        "error" | "fatal" | "panic" | "dpanic" => "error",
        "warn" | "warning" => "warn",
        _ => return None,
    };
    let message = |e: &str| crate::fakes::capped::clip(&format!("{msg}: {e}"), 400);
    Some(match fields["error"].as_str() {
        Some(e) => (level, message(e), true),
        None => (level, msg, false),
    })
}

/// The check on nodeadm's outcome.
pub fn check(node: &str, r: &NodeadmReport, want: NodeadmExpectation) -> Check {
    let ok = r.succeeded();
    let passed = match want {
        NodeadmExpectation::Succeeded => ok,
        NodeadmExpectation::Failed => !ok,
    };
    Check::new(
        super::registry::NODEADM.on(node),
        passed,
        format!("{want:?}").to_lowercase(),
        if ok {
            "succeeded".to_string()
        } else {
            match r.cause() {
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
    fn journal_messages_as_journalctl_cat_prints_them() {
        let entries = "{\"MESSAGE\":\"Starting nodeadm-run.service\",\"JOB_TYPE\":\"start\"}\n\
                       {\"MESSAGE\":[104,105]}\n{\"OTHER\":1}\nnot json\n";
        assert_eq!(messages(entries), "Starting nodeadm-run.service\nhi\n");
    }

    #[test]
    fn console_encoded_errors_are_quoted_too() {
        let journal = "info init/init.go:55 Checking user is root..\n\
                       fatal cli/main.go:35 Command failed {\"error\": \"could not find interface with MAC address \\\"02:aa\\\"\"}\n\
                       error kubelet/config.go:9 plain message without fields\n";
        let r = NodeadmReport::parse("", journal);
        assert_eq!(
            r.errors,
            vec![
                "Command failed: could not find interface with MAC address \"02:aa\"".to_string(),
                "plain message without fields".to_string()
            ]
        );
        assert_eq!(r.lines, 3);
    }

    #[test]
    fn the_amis_oneshots_succeed_inactive_once_they_ran() {
        let show = "Id=nodeadm-config.service\nActiveState=inactive\nResult=success\n\n\
                    Id=nodeadm-run.service\nActiveState=inactive\nResult=success\n";
        let job = |unit: &str, result: &str| {
            format!("{{\"UNIT\":\"{unit}\",\"JOB_TYPE\":\"start\",\"JOB_RESULT\":\"{result}\",\"MESSAGE\":\"x\"}}\n")
        };
        let both = format!(
            "{}{}",
            job("nodeadm-config.service", "done"),
            job("nodeadm-run.service", "done")
        );
        assert!(NodeadmReport::parse_with_jobs(show, "", &both).succeeded());
        assert!(!NodeadmReport::parse(show, "").succeeded(), "no trace of having run");
        let one = format!(
            "{}{}",
            job("nodeadm-config.service", "done"),
            job("nodeadm-run.service", "dependency")
        );
        assert!(!NodeadmReport::parse_with_jobs(show, "", &one).succeeded());
    }

    #[test]
    fn a_failed_boot_hook_fails_the_boot_and_an_absent_one_is_no_phase() {
        let ok = "Id=nodeadm-config.service\nActiveState=active\nResult=success\n\n\
                  Id=nodeadm-run.service\nActiveState=active\nResult=success\n";
        let absent =
            format!("Id=nodeadm-boot-hook.service\nLoadState=not-found\nActiveState=inactive\nResult=success\n\n{ok}");
        assert!(NodeadmReport::parse(&absent, "").succeeded());
        let failed =
            format!("Id=nodeadm-boot-hook.service\nLoadState=loaded\nActiveState=failed\nResult=exit-code\n\n{ok}");
        let r = NodeadmReport::parse(&failed, "");
        assert!(!r.succeeded());
        assert!(
            r.summary().contains("nodeadm-boot-hook failed/exit-code"),
            "{}",
            r.summary()
        );
    }

    #[test]
    fn units_that_never_loaded_do_not_count_as_success() {
        assert!(!NodeadmReport::parse("", "").succeeded());
        let one = "Id=nodeadm-config.service\nActiveState=active\nResult=success\n";
        assert!(!NodeadmReport::parse(one, "").succeeded());
    }

    #[test]
    fn a_stopped_machines_journal_alone_tells_each_phases_outcome() {
        let entry = |unit: &str, fields: &str| format!("{{\"UNIT\":\"{unit}\",\"MESSAGE\":\"m\"{fields}}}\n");
        let start =
            |unit: &str, result: &str| entry(unit, &format!(",\"JOB_TYPE\":\"start\",\"JOB_RESULT\":\"{result}\""));
        // At shutdown each unit is stopped: a stop job is no outcome of the boot.
        let stop = |unit: &str| entry(unit, ",\"JOB_TYPE\":\"stop\",\"JOB_RESULT\":\"done\"");
        let nodeadm_error = "{\"_SYSTEMD_UNIT\":\"nodeadm-config.service\",\"MESSAGE\":\"fatal cli/main.go:35 Command failed {\\\"error\\\": \\\"no cluster\\\"}\"}\n";
        let ok = format!(
            "{}{}{}{}",
            start("nodeadm-config.service", "done"),
            start("nodeadm-run.service", "done"),
            stop("nodeadm-config.service"),
            stop("nodeadm-run.service")
        );
        let r = NodeadmReport::from_journal(&ok);
        assert!(r.succeeded(), "{}", r.summary());
        assert_eq!(r.phases.len(), 2, "no boot hook in the journal: none in the image");
        let failed = format!(
            "{}{nodeadm_error}{}{}",
            start("nodeadm-config.service", "failed"),
            entry("nodeadm-config.service", ",\"UNIT_RESULT\":\"exit-code\""),
            start("nodeadm-run.service", "dependency")
        );
        let r = NodeadmReport::from_journal(&failed);
        assert!(!r.succeeded());
        assert!(
            r.summary().contains("nodeadm-config failed/exit-code"),
            "{}",
            r.summary()
        );
        assert_eq!(r.errors, vec!["Command failed: no cluster".to_string()]);
        // Shut down while nodeadm still retried: its start job has no result, its unit was killed; a phase never
        // started is no success.
        let starting = entry("nodeadm-config.service", ",\"JOB_TYPE\":\"start\"");
        let killed = entry("nodeadm-config.service", ",\"UNIT_RESULT\":\"signal\"");
        let cut = NodeadmReport::from_journal(&format!("{starting}{killed}{}", stop("nodeadm-config.service")));
        assert!(!cut.succeeded());
        assert!(
            cut.summary()
                .contains("nodeadm-config activating/unfinished at shutdown (signal)"),
            "{}",
            cut.summary()
        );
        assert!(
            cut.summary().contains("nodeadm-run inactive/never started"),
            "{}",
            cut.summary()
        );
        assert!(!NodeadmReport::from_journal("").succeeded());
    }

    /// Current nodeadm tolerates user data it cannot decode: a warning with the decoder's error, then "no config in
    /// chain". The verdict quotes the warning beside the last error; a warning without an error of its own, or an
    /// error repeated, explains nothing.
    #[test]
    fn a_last_error_is_quoted_with_the_warning_that_explains_it() {
        let journal = "info init/init.go:52 Checking user is root..\n\
            warn system/marker.go:30 cloud-init result file /run/cloud-init/result.json does not exist. Do not manually call nodeadm from user data\n\
            warn cli/config.go:25 failed to load cached config {\"error\": \"open /run/eks/nodeadm/config.json: no such file or directory\"}\n\
            warn configprovider/chain.go:30 Encountered error in config provider {\"error\": \"failed to decode node config, json: cannot unmarshal string into Go struct field KubeletOptions.spec.kubelet.flags of type []string\"}\n\
            fatal cli/main.go:35 Command failed {\"error\": \"no config in chain\"}\n";
        let show = "Id=nodeadm-config.service\nActiveState=failed\nResult=exit-code\n";
        let r = NodeadmReport::parse(show, journal);
        assert_eq!(r.errors, vec!["Command failed: no config in chain".to_string()]);
        assert_eq!(r.earlier.len(), 2, "{:?}", r.earlier);
        let c = check("n", &r, NodeadmExpectation::Succeeded);
        assert_eq!(
            c.actual,
            "failed: Command failed: no config in chain (after: Encountered error in config provider: failed to \
             decode node config, json: cannot unmarshal string into Go struct field KubeletOptions.spec.kubelet.flags \
             of type []string)"
        );
        // Alone, the last error is quoted as it is.
        let alone = NodeadmReport::parse(
            show,
            "fatal cli/main.go:35 Command failed {\"error\": \"no config in chain\"}\n",
        );
        assert_eq!(alone.cause().as_deref(), Some("Command failed: no config in chain"));
        // A node-fed line is bounded.
        let long = format!(
            "warn a.go:1 x {{\"error\": \"{}\"}}\nfatal b.go:2 y {{\"error\": \"z\"}}\n",
            "e".repeat(5000)
        );
        assert!(NodeadmReport::parse(show, &long).cause().is_some_and(|c| c.len() < 600));
    }

    #[test]
    fn the_stopped_machines_reader_renders_these_units() {
        let mut ours = vec![BOOT_HOOK];
        ours.extend(UNITS);
        assert_eq!(crate::node::vm::reader::NODEADM_UNITS.to_vec(), ours);
    }
}
