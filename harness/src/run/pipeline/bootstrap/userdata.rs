//! The user-data side of a bootstrap: building the node's user data (a file or a generator), serving it from the
//! fake IMDS, starting the node's own cloud-init and reading back what it and nodeadm reported.
use crate::assert::cloud_init::CloudInitReport;
use crate::assert::nodeadm::{self as nodeadm_report, NodeadmReport};
use crate::docker::ExecOutput;
use crate::error::{Error, Result};
use crate::fakes::instances::Instance;
use crate::node::machine::NodeMachine;
use crate::scenario::model::{NodeGroup, Scenario, UserDataSpec};
use crate::scenario::template::render;
use crate::userdata::generate::ClusterFacts;
use std::collections::BTreeMap;
use std::time::Duration;

/// The bytes IMDS serves for `spec` of `group` in `sc`, and a one-line description of their format.
pub fn build(
    settings: &crate::settings::Settings,
    (sc, group): (&Scenario, &NodeGroup),
    spec: &UserDataSpec,
    instance: &Instance,
    vars: &BTreeMap<String, String>,
    printed: Option<Vec<u8>>,
    patch: Option<&crate::scenario::patch::TextPatch>,
) -> std::result::Result<(Vec<u8>, String), String> {
    let r = |t: &str| render(t, vars);
    let var = |k: &str| vars.get(k).cloned().unwrap_or_default();
    let facts = ClusterFacts {
        name: var("cluster.name"),
        endpoint: var("cluster.endpoint"),
        ca_base64: var("cluster.caBase64"),
        dns_ip: var("cluster.dnsIp"),
        region: sc.cluster.region.clone(),
        service_cidr: var("cluster.serviceIpv4Cidr"),
    };
    let (served, api_form): (Vec<u8>, Option<Vec<u8>>) = if let Some(file) = &spec.file {
        let f = spec.file_user_data(file, &sc.roots, r).map_err(|e| e.to_string())?;
        (f.served, f.api_form)
    } else if let Some(printed) = printed {
        // What the user's generator printed (`userData.command`): as IMDS serves it, or the RunInstances form.
        match spec.encoding {
            Some(crate::scenario::user_data::FileEncoding::Base64) => {
                let served = crate::userdata::from_api(&printed).map_err(|e| format!("userData.command: {e}"))?;
                (served, Some(printed))
            }
            _ => (printed, None),
        }
    } else if let Some(g) = &spec.generator {
        let input = crate::scenario::flavors::GenerateInput {
            settings,
            facts: &facts,
            group: crate::scenario::flavors::GroupFacts {
                name: &group.name,
                instance_type: &group.instance_type,
                instance_type_info: group.instance_type_info,
                lifecycle: group.lifecycle,
            },
            ami_id: &instance.ami_id,
            vars,
        };
        let generated = g.generate(&input)?;
        (generated.served, generated.api_form)
    } else {
        return Err(format!(
            "userData needs one of file, command, {}",
            crate::scenario::flavors::KEYS.join(", ")
        ));
    };
    let served = match patch {
        Some(patch) => {
            let text = std::str::from_utf8(&served).map_err(|_| "mutation: the user data is not text".to_string())?;
            patch
                .apply(text)
                .map_err(|e| format!("mutation of the user data: {e}"))?
                .into_bytes()
        }
        None => served,
    };
    let describe = |bytes: &[u8]| match crate::userdata::format::detect(bytes) {
        Ok(p) => p.to_string(),
        Err(e) => format!("unreadable ({e})"),
    };
    if served.len() > crate::scenario::user_data::MAX_USER_DATA {
        return Err(format!(
            "the user data is {} bytes as EC2 keeps it (what IMDS serves); EC2 refuses user data over {} bytes (16 KB)",
            served.len(),
            crate::scenario::user_data::MAX_USER_DATA
        ));
    }
    let description = match &api_form {
        Some(api) => format!("{} bytes, given to EC2 as {}", served.len(), describe(api)),
        None => format!("{} bytes, {}", served.len(), describe(&served)),
    };
    Ok((served, description))
}

/// cloud-init's (and nodeadm's) results in a node after they have run.
pub struct CloudInitRun {
    /// 0 when cloud-init's stages reported no error (what `cloud-init status` says with its exit code, read from
    /// the same status.json without starting Python in the node), else 1, or 1 when nodeadm failed; the output
    /// log (and nodeadm's) as stdout.
    pub output: ExecOutput,
    pub report: CloudInitReport,
    pub nodeadm: Option<NodeadmReport>,
}

/// Starts cloud-init's boot stages in a booted node container (the image keeps it disabled until the harness has
/// put the user data in IMDS), or for a machine waits for those its boot started, and waits for them to finish,
/// at most `within`. With `nodeadm`, the image's two nodeadm
/// units run in the same systemd transaction, ordered around cloud-init's stages as on an AL2023 AMI (config
/// before the user's scripts, run after them).
/// `reboots`: the node reboots later (`after: reboot`); on a container its first boot is the harness's (the user
/// data is served only once the node's address is known), so the units the AMI build enables at boot (nodeadm's)
/// are enabled once they have run, and its next boots are systemd's own.
pub async fn run_cloud_init(
    node: &NodeMachine,
    within: Duration,
    nodeadm: bool,
    reboots: bool,
) -> Result<CloudInitRun> {
    let mut units = "cloud-init-local.service cloud-init.service cloud-config.service cloud-final.service".to_string();
    if nodeadm {
        for u in nodeadm_report::UNITS {
            units.push(' ');
            units.push_str(u);
        }
    }
    // The AL2023 AMI's boot hook, where the image has the AMI's units (it orders itself before nodeadm-config).
    let boot_hook = if nodeadm {
        format!(
            "[ -e /etc/systemd/system/{hook} ] && units=\"$units {hook}\"\n",
            hook = nodeadm_report::BOOT_HOOK
        )
    } else {
        String::new()
    };
    let enable = if reboots && nodeadm {
        "on=''; for u in $units; do grep -qs '^\\[Install\\]' /etc/systemd/system/$u && on=\"$on $u\"; done\n\
         [ -z \"$on\" ] || systemctl enable --quiet $on || echo \"nodejoin: systemctl enable$on failed\" >&2\n"
    } else {
        ""
    };
    let script = if node.capabilities.kind.own_kernel {
        // A machine started them at boot, as an instance does (or did not: its cloud-init may have found no
        // datasource): wait until no job of theirs is left, never start one. One transient unit ordered after
        // them all waits in systemd's queue until their jobs are done, at no cost in the machine; where it
        // cannot be started (no systemd-run), a look at the job queue every 2 s (0.5 s unless emulated: each
        // look is two processes there).
        let pattern = units
            .split(' ')
            .map(|u| u.replace('.', "\\."))
            .collect::<Vec<_>>()
            .join("|");
        format!(
            "units='{units}'\n\
{boot_hook}\
systemd-run --quiet --wait --collect --unit=nodejoin-bootstrap-wait -p \"After=$units\" true 2>/dev/null ||\n\
while systemctl list-jobs --no-legend 2>/dev/null | grep -Eq ' ({pattern}|{hook}) '; do sleep {every}; done\n",
            every = if node.emulated() { 2.0 } else { 0.5 },
            hook = nodeadm_report::BOOT_HOOK.replace('.', "\\.")
        )
    } else {
        format!(
            "rm -f /etc/cloud/cloud-init.disabled\n\
units='{units}'\n\
{boot_hook}\
systemctl start $units || true\n\
{enable}"
        )
    };
    let start = ["sh", "-c", script.as_str()];
    let mut exit_code = match node.exec_within(&start, &[], within).await {
        Ok(out) => out.exit_code,
        Err(Error::Timeout { after, .. }) => {
            return Err(Error::node(
                &node.name,
                format!("cloud-init did not finish within {}", humantime::format_duration(after)),
            ))
        }
        Err(e) => return Err(e),
    };
    let mut output_log = node
        .read_file("/var/log/cloud-init-output.log")
        .await
        .unwrap_or_default();
    let log = node.read_file("/var/log/cloud-init.log").await.unwrap_or_default();
    let status = node.read_file("/run/cloud-init/status.json").await;
    if exit_code == 0 && crate::assert::cloud_init::stages_failed(status.as_deref()) {
        exit_code = 1;
    }
    let mut report = CloudInitReport::parse(status.as_deref(), &log);
    if node.capabilities.kind.own_kernel {
        let ds_identify = node
            .read_file("/run/cloud-init/ds-identify.log")
            .await
            .unwrap_or_default();
        report = report.with_ds_identify(&ds_identify);
    }
    // cloud-init says only which part failed (`Runparts: 1 failures (part-001)`): which part, its exit code and
    // what it said last are the cause a bootstrap author needs, as a failed bootstrap script's stderr is.
    if !report.errors.is_empty() {
        let journal = final_stage_journal(node).await;
        report.failed_parts =
            crate::assert::cloud_init::parts::failed_parts(&log, &journal, &output_log, &report.errors);
    }
    let mut errors = report.error_lines();
    let said = crate::assert::cloud_init::user_data_output_tail(&output_log, 3);
    if !errors.is_empty() && report.failed_parts.is_empty() && !said.is_empty() {
        errors.push(format!("the user data's output ends: {said}"));
    }
    let nodeadm = if nodeadm {
        let (r, journal) = read_nodeadm(node).await?;
        output_log.push_str("\n--- nodeadm ---\n");
        output_log.push_str(&journal);
        if !r.succeeded() && exit_code == 0 {
            exit_code = 1;
        }
        // Its last error with the warning that explains it ("no config in chain" after a part it could not decode).
        let before_last = r.errors.len().saturating_sub(1);
        errors.extend(r.errors[..before_last].iter().map(|e| format!("nodeadm: {e}")));
        errors.extend(r.cause().map(|e| format!("nodeadm: {e}")));
        Some(r)
    } else {
        None
    };
    Ok(CloudInitRun {
        output: ExecOutput {
            exit_code,
            stdout: output_log,
            stderr: errors.join("\n"),
        },
        report,
        nodeadm,
    })
}

/// How much of the final stage's journal is read: the node is untrusted and its scripts may print without end.
const FINAL_JOURNAL_BYTES: usize = 256 * 1024;

/// The journal of cloud-final.service, where the user data's scripts print, each line stamped (local time, as
/// cloud-init.log's): its last [`FINAL_JOURNAL_BYTES`].
async fn final_stage_journal(node: &NodeMachine) -> String {
    let cmd =
        format!("journalctl --no-pager -o short-iso-precise -u cloud-final.service | tail -c {FINAL_JOURNAL_BYTES}");
    node.exec(&["sh", "-c", &cmd], &[])
        .await
        .map(|o| o.stdout)
        .unwrap_or_default()
}

/// The journal of the node's nodeadm units and the AL2023 boot hook, as JSON entries (one a line): what nodeadm
/// logged, and systemd's own record of their start jobs.
async fn nodeadm_journal_json(node: &NodeMachine) -> String {
    let mut cmd = vec![
        "journalctl",
        "--no-pager",
        "-o",
        "json",
        "-u",
        nodeadm_report::BOOT_HOOK,
    ];
    for u in nodeadm_report::UNITS {
        cmd.extend(["-u", u]);
    }
    node.exec(&cmd, &[]).await.map(|o| o.stdout).unwrap_or_default()
}

/// The journal of the node's nodeadm units as text, one message a line (nodeadm logs to stderr).
pub async fn nodeadm_journal(node: &NodeMachine) -> String {
    nodeadm_report::messages(&nodeadm_journal_json(node).await)
}

/// nodeadm's report and its journal, from one read of the units' states and one of their journal.
async fn read_nodeadm(node: &NodeMachine) -> Result<(NodeadmReport, String)> {
    let mut cmd = vec![
        "systemctl",
        "show",
        "-p",
        nodeadm_report::SHOW_PROPERTIES,
        nodeadm_report::BOOT_HOOK,
    ];
    cmd.extend(nodeadm_report::UNITS);
    let show = node.exec(&cmd, &[]).await?.stdout;
    let entries = nodeadm_journal_json(node).await;
    let journal = nodeadm_report::messages(&entries);
    Ok((NodeadmReport::parse_with_jobs(&show, &journal, &entries), journal))
}
