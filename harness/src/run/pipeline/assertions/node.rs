//! Turning what was observed of one node into checks against its expectations.
use crate::assert::provenance::{self, Provenance};
use crate::assert::{self, Check};
use crate::run::env::SharedCluster;
use crate::run::node::RunningNode;
use crate::run::report::ScenarioReport;
use crate::scenario::expect::SetBy;
use crate::scenario::model::{CsrExpectation, ExitExpectation, Expect};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;

/// Compares what the cluster saw with the expectations of one node.
pub(crate) async fn check_node(
    cluster: &SharedCluster,
    n: &RunningNode,
    report: &mut ScenarioReport,
    audit: &[assert::audit::Event],
    pod: Option<Check>,
) {
    let e = n.expect().clone();
    let name = n.node_name.clone();
    let c = |what: &str| format!("{name}/{what}");
    if let Some((stop, after)) = &n.stopped {
        report.checks.push(Check::new(
            c(stop.check),
            false,
            stop.expected.clone(),
            stop.cause.clone(),
        ));
        report.notes.push(format!(
            "{name}: stopped waiting {} after the bootstrap finished (of {} allowed): {} failed",
            crate::run::report::secs(*after),
            humantime::format_duration(e.within),
            stop.check
        ));
    }
    let exit = n.bootstrap.as_ref().map(|b| b.exit_code);
    let exit_expectation = match (e.bootstrap_exit, e.joins) {
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
            report.checks.push(Check::new(
                c("bootstrap exit"),
                exit == Some(0) && n.bootstrap_error.is_none(),
                "exit 0",
                format!("{exit_actual} {tail}").trim().to_string(),
            ));
        }
        ExitExpectation::Failure => {
            report.checks.push(Check::new(
                c("bootstrap exit"),
                exit.is_some_and(|x| x != 0),
                "non-zero exit",
                exit_actual,
            ));
        }
        ExitExpectation::Any => {}
    }
    if !e.joins {
        report.checks.push(Check::new(
            c("not registered"),
            n.node.is_none() && n.registered_as.is_none(),
            format!("no Node {name} within {}", humantime::format_duration(e.within)),
            match (&n.timeline.registered, &n.registered_as) {
                (Some(d), _) => format!("registered after {}", crate::run::report::secs(*d)),
                (None, Some(other)) => format!("registered under another name: '{other}'"),
                (None, None) => "not registered".into(),
            },
        ));
        evidence_checks(report, &name, &e, &n.evidence);
        return;
    }
    let Some(node) = &n.node else {
        if let Some(other) = &n.registered_as {
            report.checks.push(Check::new(
                c("registered"),
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
                stop.check
            ),
            None => format!("nodes in the cluster: {names}"),
        };
        // Why the kubelet did not get there, in its own words (x509, Unauthorized, connection refused...).
        let cause =
            match crate::run::pipeline::observe::journal::last_error(&n.container.journal(Some("kubelet")).await) {
                Some(line) => format!("; the kubelet's last error: {line}"),
                None => String::new(),
            };
        report.checks.push(Check::new(
            c("registered"),
            false,
            format!("a Node named {name} within {}", humantime::format_duration(e.within)),
            format!("{waited}{cause}"),
        ));
        return;
    };
    report
        .checks
        .push(Check::new(c("registered"), true, name.clone(), name.clone()));
    report.checks.push(Check::new(
        c("ready"),
        n.timeline.ready.is_some(),
        format!("Ready within {}", humantime::format_duration(e.within)),
        n.timeline
            .ready
            .map(|d| format!("Ready after {}", crate::run::report::secs(d)))
            .unwrap_or_else(|| "not Ready".into()),
    ));
    if n.nodeadm.is_some() {
        // nodeadm only starts the kubelet; AL2023 brings it back on every boot through nodeadm-run.service, a
        // unit of the AMI rather than of the user data.
        report.notes.push(format!(
            "{name}: kubelet enabled not checked: nodeadm starts the kubelet on every boot (nodeadm-run.service)"
        ));
    } else {
        report.checks.push(kubelet_enabled(n).await);
    }
    let created = assert::audit::node_created(audit, &name, n.instance.launch_time);
    let who = Provenance::of(node, created);
    field_checks(report, &name, &e, node, &who);
    csr_check(report, c("client CSR"), e.client_csr, &n.client_csr);
    csr_check(report, c("serving CSR"), e.serving_csr, &n.serving_csr);
    evidence_checks(report, &name, &e, &n.evidence);
    if e.serving_cert {
        let expected = assert::serving::ServingCert {
            subject_cn: format!("system:node:{name}"),
            subject_o: vec!["system:nodes".into()],
            dns_names: vec![n.instance.private_dns_name()],
            ips: vec![std::net::IpAddr::V4(n.instance.private_ip)],
        };
        let actual = match &n.serving {
            Some(cert) => cert.to_string(),
            None => format!("no CA-verified TLS on :10250 ({})", n.serving_error),
        };
        report.checks.push(Check::new(
            c("serving cert"),
            n.serving.as_ref() == Some(&expected),
            expected.to_string(),
            actual,
        ));
    }
    if let Some(dns) = &e.cluster_dns {
        let want = dns.clone();
        // A dead node's kubelet cannot answer: asking through the API server's proxy only waits out a timeout.
        let have = match &n.container_exit {
            Some(why) => Err(format!("not asked: {why}")),
            None => configz_cluster_dns(cluster, &name).await,
        };
        let passed = have.as_ref() == Ok(&want);
        let shown = match have {
            Ok(dns) if dns.is_empty() => "no clusterDNS".to_string(),
            Ok(dns) => dns.join(", "),
            Err(e) => e,
        };
        report
            .checks
            .push(Check::new(c("configz clusterDNS"), passed, want.join(", "), shown));
    }
    // Run by the caller (before evidence is gathered for the last time) when the scenario asks for it.
    report.checks.extend(pod);
}

/// Labels, taints, capacity and providerID: each value, and who set it (the kubelet, so the bootstrap, unless
/// the scenario says the cloud controller does it, as on real EKS).
fn field_checks(report: &mut ScenarioReport, name: &str, e: &Expect, node: &Node, who: &Provenance) {
    let c = |what: &str| format!("{name}/{what}");
    let have = assert::node::labels(node);
    if !e.labels.is_empty() {
        let want = e.labels.clone();
        let mut wrong = assert::node::label_mismatches(&want, &have);
        let setters = label_setters(&want, &have, e, who, &mut wrong);
        report.checks.push(Check::new(
            c("labels"),
            wrong.is_empty(),
            format!("{} (subset)", label_list(&want)),
            if wrong.is_empty() {
                format!("all present ({})", setters.join("; "))
            } else {
                wrong.join(", ")
            },
        ));
    }
    if let Some(exact) = &e.labels_exactly {
        let want = exact.clone();
        let mut wrong = assert::node::label_mismatches(&want, &have);
        wrong.extend(
            have.iter()
                .filter(|(k, _)| !want.contains_key(*k))
                .map(|(k, v)| format!("unexpected {k}={v} ({})", provenance::describe(&who.label(k)))),
        );
        let setters = label_setters(&want, &have, e, who, &mut wrong);
        report.checks.push(Check::new(
            c("labels exactly"),
            wrong.is_empty(),
            format!("exactly {} labels: {}", want.len(), label_list(&want)),
            if wrong.is_empty() {
                format!("the same set ({})", setters.join("; "))
            } else {
                wrong.join(", ")
            },
        ));
    }
    if let Some(taints) = &e.taints {
        let mut want = taints.clone();
        want.sort();
        let have = assert::node::taints(node);
        let allowed = e.set_by.taints.unwrap_or(SetBy::Kubelet);
        let mut wrong_setter = Vec::new();
        let mut setters = Vec::new();
        for t in have.iter().filter(|t| want.contains(t)) {
            let by = who.taint(t);
            let one = assert::node::format_taints(std::slice::from_ref(t));
            if !provenance::satisfies(&by, allowed) {
                wrong_setter.push(format!(
                    "{one} {} (expected {})",
                    provenance::describe(&by),
                    describe_set_by(allowed)
                ));
            }
            setters.push(format!("{one} {}", provenance::describe(&by)));
        }
        let actual = assert::node::format_taints(&have);
        report.checks.push(Check::new(
            c("taints"),
            want == have && wrong_setter.is_empty(),
            assert::node::format_taints(&want),
            match (wrong_setter.is_empty(), setters.is_empty()) {
                (false, _) => format!("{actual}: {}", wrong_setter.join(", ")),
                (true, true) => actual,
                (true, false) => format!("{actual} ({})", setters.join("; ")),
            },
        ));
    }
    if let Some(pods) = e.capacity_pods {
        let have = assert::node::capacity_pods(node);
        let by = who.capacity("pods");
        let allowed = e.set_by.capacity_pods.unwrap_or(SetBy::Kubelet);
        report.checks.push(Check::new(
            c("capacity.pods"),
            have.as_deref() == Some(pods.to_string().as_str()) && provenance::satisfies(&by, allowed),
            format!("{pods}, {}", describe_set_by(allowed)),
            format!("{}, {}", have.as_deref().unwrap_or("none"), provenance::describe(&by)),
        ));
    }
    // Resolved with the node's values, the default included (`Expect::resolved`).
    let want_pid = e.provider_id.clone().unwrap_or_default();
    let have_pid = assert::node::provider_id(node);
    let by = who.provider_id();
    let allowed = e.set_by.provider_id.unwrap_or(SetBy::Kubelet);
    report.checks.push(Check::new(
        c("providerID"),
        have_pid.as_deref() == Some(want_pid.as_str()) && provenance::satisfies(&by, allowed),
        format!("{want_pid}, {}", describe_set_by(allowed)),
        format!(
            "{}, {}",
            have_pid.as_deref().unwrap_or("none"),
            provenance::describe(&by)
        ),
    ));
}

/// The kubelet unit is enabled, not only started: a node whose bootstrap only started it loses its kubelet on
/// the first reboot (EKS AMIs' bootstrap and nodeadm enable it).
async fn kubelet_enabled(n: &RunningNode) -> Check {
    let asked = match &n.container_exit {
        Some(why) => Err(format!("not asked: {why}")),
        None => n
            .container
            .exec(&["systemctl", "is-enabled", "kubelet.service"], &[])
            .await
            .map_err(|e| format!("cannot ask systemd: {e}")),
    };
    let actual = match asked {
        Ok(out) => {
            let state = out.stdout.trim().to_string();
            if state.is_empty() {
                format!("exit {}: {}", out.exit_code, out.stderr.trim())
            } else {
                state
            }
        }
        Err(e) => e,
    };
    Check::new(
        format!("{}/kubelet enabled", n.node_name),
        actual == "enabled",
        "systemctl is-enabled kubelet.service: enabled",
        actual,
    )
}

/// Labels as `key=value` pairs, comma-separated, as kubectl's `--show-labels` shows them.
fn label_list(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Who set each wanted label the Node carries ("team set by kubelet"); a setter `expect.setBy` does not allow
/// is added to `wrong`.
fn label_setters(
    want: &BTreeMap<String, String>,
    have: &BTreeMap<String, String>,
    e: &Expect,
    who: &Provenance,
    wrong: &mut Vec<String>,
) -> Vec<String> {
    let mut setters = Vec::new();
    for key in want.keys().filter(|k| have.contains_key(*k)) {
        let by = who.label(key);
        let allowed = e.set_by.label(key);
        if !provenance::satisfies(&by, allowed) {
            wrong.push(format!(
                "{key} {} (expected {})",
                provenance::describe(&by),
                describe_set_by(allowed)
            ));
        }
        setters.push(format!("{key} {}", provenance::describe(&by)));
    }
    setters
}

/// "set by the kubelet", for the expected side of a check.
fn describe_set_by(s: SetBy) -> &'static str {
    match s {
        SetBy::Kubelet => "set by the kubelet",
        SetBy::CloudController => "set by the cloud-node controller",
        SetBy::Any => "set by anyone",
    }
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

/// One check per expected piece of evidence, quoting the line found.
pub(crate) fn evidence_checks(report: &mut ScenarioReport, node: &str, e: &Expect, found: &[Option<String>]) {
    for (ev, line) in e.evidence.iter().zip(found) {
        report.checks.push(Check::new(
            format!("{node}/evidence in {} log", format!("{:?}", ev.source).to_lowercase()),
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
    let text = cluster
        .client
        .request_text(req)
        .await
        .map_err(|e| format!("configz: {e}"))?;
    serde_json::from_str(&text).map_err(|e| format!("configz: {e}"))
}

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
