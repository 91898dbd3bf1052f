//! What the node's cloud-init reported: per-stage errors from `/run/cloud-init/status.json`, WARNING lines and
//! the modules that ran from `/var/log/cloud-init.log`, and checks against a scenario's expectations.
pub mod parts;
use super::Check;
use crate::scenario::model::{CloudInitExpectation, CloudInitStatus};

/// cloud-init's own account of one boot.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CloudInitReport {
    /// The datasource it settled on (e.g. `DataSourceEc2 [...]`); empty if none.
    pub datasource: String,
    /// `stage: message` for every error any stage recorded.
    pub errors: Vec<String>,
    /// WARNING lines of its log, without the timestamp prefix.
    pub warnings: Vec<String>,
    /// Modules it ran, in order.
    pub modules: Vec<String>,
    /// Stages that finished.
    pub finished_stages: Vec<String>,
    /// Each failed user-data script, which part, how it ended and its last lines ([`parts::failed_parts`]):
    /// `errors` says only `Runparts: 1 failures (part-001)`.
    pub failed_parts: Vec<String>,
}

/// Whether a stage recorded an error in `status.json`: what makes `cloud-init status` exit 1 (a missing file, a
/// cloud-init that never ran, is not an error there).
pub fn stages_failed(status_json: Option<&str>) -> bool {
    let Some(v) = status_json.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok()) else {
        return false;
    };
    v["v1"].as_object().is_some_and(|stages| {
        stages
            .values()
            .any(|info| info["errors"].as_array().is_some_and(|e| !e.is_empty()))
    })
}

impl CloudInitReport {
    /// Builds the report from `status.json` (may be missing when cloud-init never started) and the log.
    pub fn parse(status_json: Option<&str>, log: &str) -> Self {
        let mut r = CloudInitReport::default();
        let parsed = status_json.and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok());
        if parsed.is_none() {
            r.errors.push(
                "cloud-init recorded no status (/run/cloud-init/status.json missing or unreadable): it did not run"
                    .into(),
            );
        }
        if let Some(v) = parsed {
            let v1 = &v["v1"];
            r.datasource = v1["datasource"].as_str().unwrap_or_default().to_string();
            if let Some(stages) = v1.as_object() {
                for (stage, info) in stages {
                    if !info.is_object() {
                        continue;
                    }
                    for e in info["errors"].as_array().into_iter().flatten() {
                        let text = e.as_str().map(str::to_string).unwrap_or_else(|| e.to_string());
                        r.errors.push(format!("{stage}: {text}"));
                    }
                    if !info["finished"].is_null() {
                        r.finished_stages.push(stage.clone());
                    }
                }
            }
        }
        // The fallback datasource means cloud-init found no instance data at all: on EC2 that is never a
        // success, whatever the stages say (no EC2 datasource in the image, or IMDS out of its reach).
        if r.datasource.starts_with("DataSourceNone") {
            let searched = log
                .lines()
                .filter(|l| l.contains("Searching for") && l.contains("data source in"))
                .filter_map(|l| {
                    l.split_once("Searching for")
                        .map(|(_, rest)| format!("searching for{rest}"))
                })
                .collect::<Vec<_>>()
                .join("; ");
            r.errors.push(format!(
                "init: cloud-init found no datasource but its fallback (DataSourceNone): the instance's user data \
                 was never read{}",
                if searched.is_empty() {
                    String::new()
                } else {
                    format!(" (its log: {searched})")
                }
            ));
        }
        for line in log.lines() {
            if let Some(i) = line.find("[WARNING]: ") {
                r.warnings.push(line[i + "[WARNING]: ".len()..].trim().to_string());
            }
            if let Some(rest) = line.split("Running module ").nth(1) {
                if let Some(name) = rest.split_whitespace().next() {
                    r.modules.push(name.to_string());
                }
            }
        }
        r
    }

    /// Adds ds-identify's verdict (`/run/cloud-init/ds-identify.log`, written by cloud-init's generator at boot) to
    /// the error of a cloud-init that never ran: on a machine, ds-identify is what decides that it does not.
    pub fn with_ds_identify(mut self, ds_identify_log: &str) -> Self {
        let verdict = ds_identify_log.lines().rev().map(str::trim).find(|l| {
            l.starts_with("No ds found") || l.starts_with("Found ") || l.starts_with("single entry in datasource_list")
        });
        let Some(verdict) = verdict else { return self };
        if let Some(e) = self.errors.iter_mut().find(|e| e.contains("recorded no status")) {
            e.push_str(&format!("; ds-identify at boot: {verdict}"));
        }
        self
    }

    /// Whether cloud-init finished without errors (what `cloud-init status` calls `done`).
    pub fn status(&self) -> CloudInitStatus {
        if self.errors.is_empty() {
            CloudInitStatus::Done
        } else {
            CloudInitStatus::Error
        }
    }

    /// cloud-init's errors, then what each failed part said: the cause, wherever a check quotes cloud-init.
    pub fn error_lines(&self) -> Vec<String> {
        self.errors.iter().chain(&self.failed_parts).cloned().collect()
    }

    /// The failed parts in one line, when a user-data script failed: the first cause of a node that did not join.
    pub fn failed_parts_cause(&self) -> Option<String> {
        (!self.failed_parts.is_empty()).then(|| format!("the user data failed: {}", self.failed_parts.join("; ")))
    }

    /// One line for the report.
    pub fn summary(&self) -> String {
        format!(
            "cloud-init {}: datasource {}, {} module(s) ran, {} error(s), {} warning(s)",
            if self.errors.is_empty() { "done" } else { "error" },
            if self.datasource.is_empty() {
                "none"
            } else {
                &self.datasource
            },
            self.modules.len(),
            self.errors.len(),
            self.warnings.len()
        )
    }
}

/// Checks `report` against `e`, one check per expectation.
pub fn checks(node: &str, report: &CloudInitReport, e: &CloudInitExpectation) -> Vec<Check> {
    let mut out = vec![Check::new(
        super::registry::CLOUD_INIT_STATUS.on(node),
        report.status() == e.status,
        format!("{:?}", e.status).to_lowercase(),
        if report.errors.is_empty() {
            "done".to_string()
        } else {
            format!("error: {}", report.error_lines().join(" | "))
        },
    )];
    let contains = |def: &super::registry::CheckDef, what: &str, lines: &[String], wanted: &str| {
        let found = lines.iter().find(|l| l.contains(wanted));
        Check::new(
            def.on(node),
            found.is_some(),
            format!("a {what} line containing {wanted:?}"),
            found.cloned().unwrap_or_else(|| {
                if lines.is_empty() {
                    format!("no {what}s")
                } else {
                    format!("{} {what}(s), none matching: {}", lines.len(), lines.join(" | "))
                }
            }),
        )
    };
    let errors = report.error_lines();
    for w in &e.errors {
        out.push(contains(&super::registry::CLOUD_INIT_ERRORS, "error", &errors, w));
    }
    for w in &e.warnings {
        out.push(contains(
            &super::registry::CLOUD_INIT_WARNINGS,
            "warning",
            &report.warnings,
            w,
        ));
    }
    for m in &e.modules {
        out.push(Check::new(
            super::registry::CLOUD_INIT_MODULE.on_with(node, m),
            report.modules.iter().any(|x| x == m),
            "ran",
            if report.modules.is_empty() {
                "no modules ran".to_string()
            } else {
                format!("ran: {}", report.modules.join(", "))
            },
        ));
    }
    out
}

/// The last `lines` lines the user data itself printed, from `/var/log/cloud-init-output.log`: cloud-init's own
/// lines (its banner, `ci-info:` tables, `Failed to run module ...`, `Cloud-init v. ... finished`) left out, so
/// a failed part is quoted by what its script said, as a failed bootstrap script is by its stderr.
pub fn user_data_output_tail(output_log: &str, lines: usize) -> String {
    let said: Vec<&str> = output_log.lines().filter(|l| !is_cloud_inits_own(l)).collect();
    said[said.len().saturating_sub(lines)..].join(" / ")
}

/// Whether a line of cloud-init's output stream is cloud-init's own (or empty), not the user data's.
fn is_cloud_inits_own(line: &str) -> bool {
    let l = line.trim();
    l.is_empty()
        || l.starts_with("Cloud-init v.")
        || l.starts_with("ci-info:")
        || l.starts_with("Generating public/private")
        || l.contains("Failed to run module")
        || l.contains("cc_scripts_user.py")
        || l.contains("[CLOUDINIT]")
        || l.starts_with("Traceback")
        || l.starts_with("util.py")
        || (l.get(23..26) == Some(" - ") && l.contains(".py["))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_error_fails_as_cloud_init_status_does() {
        let ok =
            r#"{"v1": {"datasource": "DataSourceEc2Local", "init": {"errors": [], "finished": 1.0}, "stage": null}}"#;
        let bad = r#"{"v1": {"init": {"errors": []}, "modules-final": {"errors": ["Runparts: 1 failures"]}}}"#;
        assert!(!stages_failed(Some(ok)));
        assert!(stages_failed(Some(bad)));
        assert!(!stages_failed(None), "a cloud-init that never ran is said elsewhere");
        assert!(!stages_failed(Some("not json")));
    }

    #[test]
    fn a_cloud_init_that_never_ran_says_what_ds_identify_decided() {
        let log = "[up 1.2s] ds-identify\nNo ds found [mode=search, notfound=disabled]. Disabled cloud-init [1]\n";
        let r = CloudInitReport::parse(None, "").with_ds_identify(log);
        let e = r.error_lines().join("\n");
        assert!(
            e.contains("it did not run; ds-identify at boot: No ds found [mode=search"),
            "{e}"
        );
        let ran = CloudInitReport::parse(Some(STATUS), "").with_ds_identify(log);
        assert!(ran.error_lines().iter().all(|e| !e.contains("ds-identify")));
    }

    #[test]
    fn the_fallback_datasource_is_an_error_quoting_what_was_searched() {
        let status = r#"{"v1": {"datasource": "DataSourceNone", "init": {"errors": [], "finished": 1.0}}}"#;
        let log = "2026-11-27 11:00:00,000 - __init__.py[DEBUG]: Searching for network data source in: \
                   ['DataSourceNoCloudNet', 'DataSourceNone']\n";
        let r = CloudInitReport::parse(Some(status), log);
        assert_eq!(r.status(), CloudInitStatus::Error);
        let e = r.error_lines().join("\n");
        assert!(e.contains("DataSourceNone"), "{e}");
        assert!(e.contains("['DataSourceNoCloudNet', 'DataSourceNone']"), "{e}");
    }

    const STATUS: &str = r#"{"v1": {"datasource": "DataSourceEc2 [...]",
      "init": {"errors": [], "finished": 1700000001.5, "start": 1700000000.1},
      "init-local": {"errors": [], "finished": 1700000000.0, "start": 1699999999.0},
      "modules-config": {"errors": [], "finished": 1700000002.0, "start": 1700000001.6},
      "modules-final": {"errors": ["('scripts_user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))"], "finished": 1700000003.0, "start": 1700000002.1},
      "stage": null}}"#;

    const LOG: &str = "2026-11-22 10:00:00,001 - stages.py[DEBUG]: Running module write-files (<module 'cloudinit.config.cc_write_files' from '/usr/lib/python3/dist-packages/cloudinit/config/cc_write_files.py'>) with frequency once-per-instance\n\
2026-11-22 10:00:00,002 - __init__.py[WARNING]: Unhandled non-multipart (text/x-not-multipart) userdata: 'b'hello''...'\n\
2026-11-22 10:00:01,000 - stages.py[DEBUG]: Running module scripts-user (<module 'cloudinit.config.cc_scripts_user'>) with frequency once-per-instance\n";

    #[test]
    fn parses_status_and_log() {
        let r = CloudInitReport::parse(Some(STATUS), LOG);
        assert_eq!(r.datasource, "DataSourceEc2 [...]");
        assert_eq!(r.errors.len(), 1);
        assert!(r.errors[0].starts_with("modules-final: ('scripts_user'"));
        assert_eq!(r.modules, vec!["write-files", "scripts-user"]);
        assert_eq!(r.warnings.len(), 1);
        assert!(r.warnings[0].starts_with("Unhandled non-multipart"));
        assert_eq!(r.status(), CloudInitStatus::Error);
        assert_eq!(r.finished_stages.len(), 4);
    }

    #[test]
    fn missing_or_garbled_status_is_empty_not_a_panic() {
        let r = CloudInitReport::parse(None, "");
        assert_eq!(r.status(), CloudInitStatus::Error);
        assert!(r.errors[0].contains("did not run"), "{r:?}");
        let r = CloudInitReport::parse(Some("{not json"), "garbage\n[WARNING]: x");
        assert_eq!(r.errors.len(), 1);
        assert_eq!(r.warnings, vec!["x".to_string()]);
    }

    #[test]
    fn checks_report_what_was_seen() {
        let r = CloudInitReport::parse(Some(STATUS), LOG);
        let e = CloudInitExpectation {
            status: CloudInitStatus::Error,
            errors: vec!["Runparts: 1 failures".into()],
            warnings: vec!["Unhandled non-multipart".into(), "never logged".into()],
            modules: vec!["scripts-user".into(), "runcmd".into()],
        };
        let c = checks("n", &r, &e);
        let passed: Vec<bool> = c.iter().map(|c| c.passed).collect();
        assert_eq!(passed, vec![true, true, true, false, true, false]);
        assert!(c[3].actual.contains("none matching"));
        assert!(c[5].actual.contains("write-files"));
    }

    #[test]
    fn the_user_datas_own_output_is_quoted_without_cloud_inits_lines() {
        let log = "Cloud-init v. 22.4.2 running 'modules:final' at Wed\n\
+ /etc/eks/bootstrap.sh demo --apiserver-endpoint https://x\n\
bootstrap: cannot reach https://x: connection refused\n\
2026-11-25 16:53:13,088 - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)\n\
Cloud-init v. 22.4.2 finished at Wed, 25 Nov 2026 16:53:13 +0000. Datasource DataSourceEc2Local.  Up 1.0 seconds\n\
ci-info: no authorized SSH keys fingerprints found for user debian.\n";
        assert_eq!(
            super::user_data_output_tail(log, 2),
            "+ /etc/eks/bootstrap.sh demo --apiserver-endpoint https://x / bootstrap: cannot reach https://x: connection refused"
        );
        assert_eq!(super::user_data_output_tail("Cloud-init v. 1 finished\n", 3), "");
    }
}
