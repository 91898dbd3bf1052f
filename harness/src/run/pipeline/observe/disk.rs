//! What a machine without a guest agent left on its disk, read once it is shut down
//! ([`crate::node::vm::reader`]): the evidence from its logs, cloud-init's and nodeadm's reports, and the files a
//! scenario expects. The harness cannot look inside it while it runs, so these are its last checks.
use super::journal::first_line;
use crate::assert::cloud_init::CloudInitReport;
use crate::assert::nodeadm::NodeadmReport;
use crate::node::vm::reader::DiskLogs;
use crate::run::node::RunningNode;
use crate::scenario::model::EvidenceSource;

/// Where cloud-init keeps its status across boots (`/run/cloud-init/status.json` links to it, and `/run` is gone
/// once the machine is off).
pub(crate) const CLOUD_INIT_STATUS: &str = "/var/lib/cloud/data/status.json";

/// What one machine's disk said after its shutdown: how it went down and its logs, or why it could not be read.
pub(crate) type Reading = std::result::Result<(String, DiskLogs), String>;

/// Whether `n` is a machine observed from outside only, whose inside is read from its disk after its shutdown.
pub(crate) fn read_from_disk(n: &RunningNode) -> bool {
    n.machine.capabilities.read_after_shutdown()
}

/// Whether evidence from `source` on `n` is judged from the machine's disk after its shutdown: the logs inside a
/// machine without a guest agent (the kubelet's and nodeadm's journal, cloud-init's logs).
pub(crate) fn judged_after_shutdown(n: &RunningNode, source: EvidenceSource) -> bool {
    read_from_disk(n)
        && matches!(
            source,
            EvidenceSource::Kubelet | EvidenceSource::CloudInit | EvidenceSource::Nodeadm
        )
}

/// Whether `n`'s cloud-init or nodeadm report is read from its disk (the scenario asks for either).
pub(crate) fn reports_from_disk(n: &RunningNode) -> bool {
    read_from_disk(n) && (n.expect().cloud_init.is_some() || n.expect().nodeadm.is_some())
}

/// The files `n`'s disk is read for: those its expectation names, and cloud-init's status. Every reading of one
/// machine asks for the same ones (the first reading is the only one).
pub(crate) fn wanted(n: &RunningNode) -> Vec<String> {
    let mut files: Vec<String> = n.expect().files.iter().map(|f| f.path.clone()).collect();
    files.push(CLOUD_INIT_STATUS.into());
    files.dedup();
    files
}

/// `n`'s disk as read after its shutdown (the machine is shut down for it); `None` for a node read inside.
pub(crate) async fn reading(n: &RunningNode) -> Option<Reading> {
    n.machine.logs_after_shutdown(&wanted(n)).await
}

/// [`reading`]'s logs alone, or why the disk could not be read (the sentence a note or check quotes).
pub(crate) async fn logs(n: &RunningNode) -> Option<std::result::Result<DiskLogs, String>> {
    reading(n).await.map(|r| r.map(|(_, logs)| logs).map_err(unreadable))
}

/// Why a machine's disk gave nothing after its shutdown, as the report says it.
pub(crate) fn unreadable(e: String) -> String {
    format!("its disk could not be read after its shutdown: {e}")
}

/// Whether a machine read from its disk has shown, on its console, that cloud-init finished (its final message,
/// `Cloud-init v. … finished at …`), where a scenario asks for what cloud-init leaves: its report, or files the user
/// data's scripts write. Until then its disk is not read; other nodes are not held.
pub(crate) fn bootstrap_over(n: &RunningNode) -> bool {
    let asks = n.expect().cloud_init.is_some() || !n.expect().files.is_empty();
    if !read_from_disk(n) || n.group.user_data.is_none() || !asks {
        return true;
    }
    finished_on_console(&n.machine.console_text())
}

/// cloud-init's final message on a console.
fn finished_on_console(console: &str) -> bool {
    console
        .lines()
        .any(|l| l.contains("Cloud-init v. ") && l.contains(" finished at "))
}

/// The node's evidence, with what is judged after its shutdown looked for in its logs read from its disk (the
/// machine is shut down for it: the checks that need it running come first). A reading that failed is said in
/// the second value.
pub(crate) async fn evidence_after_shutdown(n: &RunningNode) -> (Vec<Option<String>>, Option<String>) {
    let mut found = n.evidence.clone();
    let pending: Vec<usize> = n
        .expect()
        .evidence
        .iter()
        .enumerate()
        .filter(|(i, ev)| found[*i].is_none() && judged_after_shutdown(n, ev.source))
        .map(|(i, _)| i)
        .collect();
    if pending.is_empty() {
        return (found, None);
    }
    let logs = match logs(n).await {
        Some(Ok(logs)) => logs,
        Some(Err(why)) => return (found, Some(why)),
        None => return (found, None),
    };
    let cloud_init: String = logs
        .files
        .iter()
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .collect::<Vec<_>>()
        .join("\n");
    for i in pending {
        let ev = &n.expect().evidence[i];
        let text = match ev.source {
            EvidenceSource::Kubelet => &logs.kubelet,
            EvidenceSource::Nodeadm => &logs.nodeadm,
            _ => &cloud_init,
        };
        found[i] = first_line(text, &ev.contains);
    }
    (found, None)
}

/// cloud-init's report as its disk kept it: its status (from [`CLOUD_INIT_STATUS`]), its log, and for a failed
/// part the final stage's journal. A machine shut down before cloud-init's final stage ended did not finish it:
/// that is an error, as `cloud-init status` would say `running`.
pub(crate) fn cloud_init_report(logs: &DiskLogs) -> CloudInitReport {
    let log = logs.cloud_init_log("cloud-init.log");
    let status = logs.file(CLOUD_INIT_STATUS);
    let mut r = CloudInitReport::parse(status.as_deref(), &log);
    if status.is_some() && !r.finished_stages.iter().any(|s| s == "modules-final") {
        r.errors.push(format!(
            "cloud-init's final stage had not finished when the machine was shut down (stages finished: {})",
            if r.finished_stages.is_empty() {
                "none".to_string()
            } else {
                r.finished_stages.join(", ")
            }
        ));
    }
    if !r.errors.is_empty() {
        let output = logs.cloud_init_log("cloud-init-output.log");
        r.failed_parts = crate::assert::cloud_init::parts::failed_parts(&log, &logs.cloud_final, &output, &r.errors);
    }
    r
}

/// nodeadm's report as its disk's journal kept it.
pub(crate) fn nodeadm_report(logs: &DiskLogs) -> NodeadmReport {
    NodeadmReport::from_journal(&logs.nodeadm_entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_init_is_over_when_its_final_message_is_on_the_console() {
        let done = "[   41.2] cloud-init[701]: Cloud-init v. 22.2.2 finished at Sat, 28 Nov 2026 16:24:31 +0000. \
                    Datasource DataSourceEc2Local.  Up 41.05 seconds";
        assert!(finished_on_console(&format!("boot\n{done}\n")));
        assert!(!finished_on_console(
            "cloud-init[315]: Cloud-init v. 22.4.2 running 'init-local' at Sat, 28 Nov 2026. Up 14.53 seconds."
        ));
    }

    #[test]
    fn a_status_kept_on_the_disk_makes_the_report_and_an_unfinished_final_stage_is_an_error() {
        let stage = |finished: bool| serde_json::json!({"start": 1.0, "finished": if finished { serde_json::json!(2.0) } else { serde_json::Value::Null }, "errors": []});
        let status = |final_done: bool| {
            serde_json::json!({"v1": {"datasource": "DataSourceEc2Local", "init-local": stage(true), "init": stage(true),
                "modules-config": stage(true), "modules-final": stage(final_done), "stage": null}})
            .to_string()
        };
        let logs = |status: Option<String>| {
            DiskLogs {
            files: vec![(
                "cloud-init.log".into(),
                b"2026-11-28 16:24:30,100 - modules.py[DEBUG]: Running module scripts-user (<module>) with frequency once-per-instance\n".to_vec(),
            )],
            asked: vec![(CLOUD_INIT_STATUS.into(), status.map(String::into_bytes))],
            ..Default::default()
        }
        };
        let done = cloud_init_report(&logs(Some(status(true))));
        assert!(done.errors.is_empty(), "{:?}", done.errors);
        assert_eq!(done.modules, vec!["scripts-user".to_string()]);
        assert_eq!(done.datasource, "DataSourceEc2Local");
        let cut = cloud_init_report(&logs(Some(status(false))));
        assert!(
            cut.errors
                .iter()
                .any(|e| e.contains("final stage had not finished") && e.contains("modules-config")),
            "{:?}",
            cut.errors
        );
        let none = cloud_init_report(&logs(None));
        assert!(
            none.errors.iter().any(|e| e.contains("recorded no status")),
            "{:?}",
            none.errors
        );
    }
}
