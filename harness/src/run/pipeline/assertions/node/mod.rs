//! Turning what was observed of one node into checks against its expectations: the bootstrap's exit, the
//! registration, readiness, the CSRs and the evidence here; then each check on the registered Node, one file
//! each, run in the order the checks registry (`assertions::registry::CHECKS`) lists them. A new Node check is a
//! file implementing [`NodeCheck`] (its definition, keys included, inside) plus one entry in that registry, and
//! its row in the book's checks page (a test says so).
pub(crate) mod capacity_pods;
pub(crate) mod cluster_dns;
pub(crate) mod kubelet_enabled;
pub(crate) mod kubelet_version;
pub(crate) mod labels;
pub(crate) mod labels_exactly;
pub(crate) mod provider_id;
pub(crate) mod serving_cert;
pub(crate) mod taints;
pub(crate) mod through_exec;
pub(crate) mod through_logs;
pub(crate) mod through_port_forward;

use crate::assert::provenance::Provenance;
use crate::assert::registry::{
    CheckDef, BOOTSTRAP_EXIT, CLIENT_CSR, EVIDENCE, NOT_REGISTERED, READY, REGISTERED, SERVING_CSR,
};
use crate::assert::{self, Check};
use crate::run::env::SharedCluster;
use crate::run::node::RunningNode;
use crate::run::report::ScenarioReport;
use crate::scenario::model::{CsrExpectation, ExitExpectation, Expect};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};

/// What a check on a registered Node is given: the node as it ran, its Node object, who set each field, its
/// resolved expectation, and its cluster.
pub(crate) struct NodeFacts<'a> {
    pub n: &'a RunningNode,
    pub node: &'a Node,
    pub who: Provenance,
    pub expect: &'a Expect,
    pub cluster: &'a SharedCluster,
    /// The `podRuns` pod, while it runs (the checks through the API server act on it).
    pub pod: Option<&'a str>,
}

impl NodeFacts<'_> {
    /// The node's name, as its checks are named.
    pub fn name(&self) -> &str {
        &self.n.node_name
    }
}

/// What a Node check found.
pub(crate) enum Finding {
    Check(Check),
    /// Not checked, and why (a note in the report).
    Note(String),
    /// The node's expectation does not ask for it.
    NotAsked,
}

/// A check on a registered Node.
pub(crate) trait NodeCheck: Sync {
    /// Its definition (name, form, when, proves, keys), defined beside its code.
    fn def(&self) -> &'static CheckDef;
    fn check<'a>(&'a self, facts: &'a NodeFacts<'a>) -> BoxFuture<'a, Finding>;
}

/// One request through the API server to the node's kubelet, when the expectation names `action`: a check that
/// passes on the kubelet's answer and quotes the API server's refusal. Without a running pod there is nothing to
/// act on: a note (the `pod runs` check says why).
async fn through_apiserver<'a>(
    f: &'a NodeFacts<'a>,
    action: crate::scenario::model::ApiServerAction,
    def: &'static CheckDef,
    request: impl FnOnce(&'a kube::Client, &'a str) -> BoxFuture<'a, std::result::Result<String, String>>,
) -> Finding {
    if !f.expect.through_api_server.contains(&action) {
        return Finding::NotAsked;
    }
    let Some(pod) = f.pod else {
        return Finding::Note(format!("{} not checked: the podRuns pod is not running", def.name));
    };
    let (passed, actual) = match request(&f.cluster.client, pod).await {
        Ok(answer) => (true, answer),
        Err(refusal) => (false, refusal),
    };
    Finding::Check(Check::new(
        def.on(f.name()),
        passed,
        "the kubelet's answer, through the API server (cluster CA verifying :10250)",
        actual,
    ))
}

/// "set by the kubelet", for the expected side of a check.
pub(crate) fn describe_set_by(s: crate::scenario::expect::SetBy) -> &'static str {
    use crate::scenario::expect::SetBy;
    match s {
        SetBy::Kubelet => "set by the kubelet",
        SetBy::CloudController => "set by the cloud-node controller",
        SetBy::Any => "set by anyone",
    }
}

/// Compares what the cluster saw with the expectations of one node; `node_checks` are the checks on its Node, as
/// the registry lists them (handed in: the registry names this module's checks, so this module cannot name it).
/// `running_pod` is the `podRuns` pod while it still runs.
pub(crate) async fn check_node(
    cluster: &SharedCluster,
    n: &RunningNode,
    report: &mut ScenarioReport,
    audit: &[assert::audit::Event],
    pod: Option<Check>,
    running_pod: Option<&str>,
    node_checks: impl Iterator<Item = &'static dyn NodeCheck>,
) {
    let e = n.expect().clone();
    let name = n.node_name.clone();
    if let Some((stop, after)) = &n.stopped {
        report.checks.push(Check::new(
            stop.check.on(&name),
            false,
            stop.expected.clone(),
            stop.cause.clone(),
        ));
        report.notes.push(format!(
            "{name}: stopped waiting {} after the bootstrap finished (of {} allowed): {} failed",
            crate::run::report::secs(*after),
            humantime::format_duration(e.within),
            stop.check.name
        ));
    }
    let exit = n.bootstrap.as_ref().map(|b| b.exit_code);
    let exit_expectation = match (e.bootstrap_exit, e.joins) {
        // Seen from outside, a bootstrap has no exit to judge, unless the harness learnt why it could not go on.
        _ if !n.machine.sees_inside() && n.bootstrap_error.is_none() => {
            report.notes.push(format!(
                "{name}: bootstrap exit not checked: no guest agent; its join is judged by the cluster"
            ));
            ExitExpectation::Any
        }
        (ExitExpectation::Any, true) => ExitExpectation::Success,
        (x, _) => x,
    };
    let exit_actual = match (&n.bootstrap_error, exit) {
        (Some(err), _) => err.clone(),
        (None, Some(code)) => format!("exit {code}"),
        (None, None) => "not run".into(),
    };
    match exit_expectation {
        ExitExpectation::Success => {
            let tail = n
                .bootstrap
                .as_ref()
                .map(|b| crate::run::pipeline::observe::failfast::quote_cause(&b.stderr))
                .unwrap_or_default();
            // A failed user-data part is named by itself (which part, its exit code, its last lines), not by
            // cloud-init's `Runparts: 1 failures (part-001)`.
            let actual = match n.cloud_init.as_ref().and_then(|c| c.failed_parts_cause()) {
                Some(cause) => format!("{exit_actual}: {cause}"),
                None => format!("{exit_actual} {tail}").trim().to_string(),
            };
            report.checks.push(Check::new(
                BOOTSTRAP_EXIT.on(&name),
                exit == Some(0) && n.bootstrap_error.is_none(),
                "exit 0",
                actual,
            ));
        }
        ExitExpectation::Failure => {
            report.checks.push(Check::new(
                BOOTSTRAP_EXIT.on(&name),
                exit.is_some_and(|x| x != 0),
                "non-zero exit",
                exit_actual,
            ));
        }
        ExitExpectation::Any => {}
    }
    if !e.joins {
        report.checks.push(Check::new(
            NOT_REGISTERED.on(&name),
            n.node.is_none() && n.registered_as.is_none(),
            format!("no Node {name} within {}", humantime::format_duration(e.within)),
            match (&n.timeline.registered, &n.registered_as) {
                (Some(d), _) => format!("registered after {}", crate::run::report::secs(*d)),
                (None, Some(other)) => format!("registered under another name: '{other}'"),
                (None, None) => "not registered".into(),
            },
        ));
        disk_evidence_checks(report, &name, &e, n).await;
        return;
    }
    let Some(node) = &n.node else {
        if let Some(other) = &n.registered_as {
            report.checks.push(Check::new(
                REGISTERED.on(&name),
                false,
                format!("a Node named {name}"),
                format!(
                    "this instance registered as '{other}' (kubelet --hostname-override or the bootstrap's node name)"
                ),
            ));
            return;
        }
        let names = match names_of_nodes(cluster).await {
            n if n.is_empty() => "none".to_string(),
            n => n.join(", "),
        };
        let waited = match &n.stopped {
            Some((stop, after)) => format!(
                "not registered when the harness stopped waiting after {} ({} failed); nodes in the cluster: {names}",
                crate::run::report::secs(*after),
                stop.check.name
            ),
            None => format!("nodes in the cluster: {names}"),
        };
        // Why the kubelet did not get there, in its own words (x509, Unauthorized, connection refused...).
        let mut cause =
            match crate::run::pipeline::observe::journal::last_error(&n.machine.journal(Some("kubelet")).await) {
                Some(line) => format!("; the kubelet's last error: {line}"),
                None => String::new(),
            };
        // A failed user-data part comes first: it is why the bootstrap never got as far.
        if let Some(part) = n.cloud_init.as_ref().and_then(|c| c.failed_parts_cause()) {
            cause = format!("; {part}{cause}");
        }
        report.checks.push(Check::new(
            REGISTERED.on(&name),
            false,
            format!("a Node named {name} within {}", humantime::format_duration(e.within)),
            format!("{waited}{cause}"),
        ));
        return;
    };
    report
        .checks
        .push(Check::new(REGISTERED.on(&name), true, name.clone(), name.clone()));
    report.checks.push(Check::new(
        READY.on(&name),
        n.timeline.ready.is_some(),
        format!("Ready within {}", humantime::format_duration(e.within)),
        n.timeline
            .ready
            .map(|d| format!("Ready after {}", crate::run::report::secs(d)))
            .unwrap_or_else(|| "not Ready".into()),
    ));
    let created = assert::audit::node_created(audit, &name, n.instance.launch_time);
    let facts = NodeFacts {
        n,
        node,
        who: Provenance::of(node, created),
        expect: &e,
        cluster,
        pod: running_pod,
    };
    for check in node_checks {
        match check.check(&facts).await {
            Finding::Check(c) => report.checks.push(c),
            Finding::Note(note) => report.notes.push(format!("{name}: {note}")),
            Finding::NotAsked => {}
        }
    }
    csr_check(report, CLIENT_CSR.on(&name), e.client_csr, &n.client_csr);
    csr_check(report, SERVING_CSR.on(&name), e.serving_csr, &n.serving_csr);
    disk_evidence_checks(report, &name, &e, n).await;
    // Run by the caller (before evidence is gathered for the last time) when the scenario asks for it.
    report.checks.extend(pod);
}

/// The check for one CSR expectation.
pub(crate) fn csr_check(
    report: &mut ScenarioReport,
    name: String,
    expect: CsrExpectation,
    state: &Option<assert::csr::CsrState>,
) {
    let (passed, wanted) = match expect {
        CsrExpectation::Issued => (state.as_ref().is_some_and(|c| c.issued), "issued"),
        CsrExpectation::Pending => (state.as_ref().is_some_and(|c| !c.issued), "created, never issued"),
        CsrExpectation::None => (state.is_none(), "none"),
        CsrExpectation::Any => return,
    };
    let actual = match state {
        Some(c) => format!(
            "{} ({}, {})",
            c.name.as_deref().unwrap_or("?"),
            if c.approved { "approved" } else { "not approved" },
            if c.issued { "issued" } else { "not issued" }
        ),
        None => "no CSR".into(),
    };
    report.checks.push(Check::new(name, passed, wanted, actual));
}

/// [`evidence_checks`], with the evidence judged from a machine's disk after its shutdown looked for there: the
/// node's last checks, after every one that needs it running.
async fn disk_evidence_checks(report: &mut ScenarioReport, name: &str, e: &Expect, n: &RunningNode) {
    let (found, failed) = crate::run::pipeline::observe::disk::evidence_after_shutdown(n).await;
    if let Some(why) = failed {
        report.notes.push(format!("{name}: {why}"));
    }
    evidence_checks(report, name, e, &found);
}

/// One check per expected piece of evidence, quoting the line found.
pub(crate) fn evidence_checks(report: &mut ScenarioReport, node: &str, e: &Expect, found: &[Option<String>]) {
    for (ev, line) in e.evidence.iter().zip(found) {
        report.checks.push(Check::new(
            EVIDENCE.on_with(node, format!("{} log", format!("{:?}", ev.source).to_lowercase())),
            line.is_some(),
            format!("a line containing \"{}\"", ev.contains),
            line.clone()
                .map(|l| format!("\"{l}\""))
                .unwrap_or_else(|| "no such line".into()),
        ));
        if let Some(l) = line {
            report.notes.push(format!(
                "{node}: {} evidence: \"{l}\"",
                format!("{:?}", ev.source).to_lowercase()
            ));
        }
    }
}

pub(crate) async fn names_of_nodes(cluster: &SharedCluster) -> Vec<String> {
    let api: Api<Node> = Api::all(cluster.client.clone());
    api.list(&ListParams::default())
        .await
        .map(|l| l.items.into_iter().filter_map(|n| n.metadata.name).collect())
        .unwrap_or_default()
}

/// The kubelet's live config (`/configz`), through the API server's node proxy.
pub(crate) async fn configz(cluster: &SharedCluster, node: &str) -> std::result::Result<serde_json::Value, String> {
    let req = http::Request::get(format!("/api/v1/nodes/{node}/proxy/configz"))
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    // Bounded: the client retries the node proxy's 503 (a kubelet whose TLS the API server refuses) for minutes.
    let text = tokio::time::timeout(CONFIGZ_WITHIN, cluster.client.request_text(req))
        .await
        .map_err(|_| {
            format!(
                "configz: the API server's node proxy gave no answer within {}s (it answers 503 while it cannot \
                 reach the kubelet; see the checks through the API server for its words)",
                CONFIGZ_WITHIN.as_secs()
            )
        })?
        .map_err(|e| format!("configz: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("configz: {e}"))
}

/// How long `/configz` through the node proxy may take.
const CONFIGZ_WITHIN: std::time::Duration = std::time::Duration::from_secs(15);

/// The kubelet's live `clusterDNS`, from `/configz`.
pub(crate) async fn configz_cluster_dns(
    cluster: &SharedCluster,
    node: &str,
) -> std::result::Result<Vec<String>, String> {
    let v = configz(cluster, node).await?;
    let dns = v["kubeletconfig"]["clusterDNS"]
        .as_array()
        .ok_or("configz has no kubeletconfig.clusterDNS")?;
    Ok(dns.iter().filter_map(|d| d.as_str().map(str::to_string)).collect())
}
