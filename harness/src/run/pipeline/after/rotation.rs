//! `do: wait-for-rotation`: nothing is done to the node; its kubelet renews its certificates by itself at 70-90 %
//! of their lifetime (`cluster.certificateLifetime`), through new CSRs the cluster's approvers must accept again.
//! Expected: a renewed client certificate (a node that holds one), a second serving CSR approved for the node's
//! own names only, and the new serving certificate live on :10250. A renewal the approver refuses is decided as
//! soon as it has stayed pending a while, quoting the CSR and the approver's reason.
use super::csrs::{csr_check, csr_names, new_csrs, refusal};
use crate::assert::csr::CsrState;
use crate::assert::registry::{self as def, CheckDef};
use crate::assert::Check;
use crate::run::env::SharedCluster;
use crate::run::node::RunningNode;
use crate::scenario::after::Step;
use crate::scenario::expect::CsrExpectation;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long a renewal may stay pending before its refusal is the verdict (an approver decides in milliseconds).
const PENDING_DECIDED: Duration = Duration::from_secs(15);
/// How often the CSRs and :10250 are looked at.
const LOOK_EVERY: Duration = Duration::from_secs(2);
/// The kubelet's port.
const KUBELET_PORT: u16 = 10250;

pub(super) async fn run(
    sc: &crate::scenario::Scenario,
    cluster: &SharedCluster,
    n: &mut RunningNode,
    step: &Step,
) -> (Vec<Check>, Vec<String>) {
    let action = step.action.name();
    let node = n.node_name.clone();
    let name = |d: &CheckDef| d.on_with(&node, action);
    let within = step.within(sc.cluster.certificate_lifetime);
    // A node that got a client certificate at its join holds one to renew.
    let holds_client_cert = n.client_csr.as_ref().is_some_and(|c| c.issued);
    let (want_client, want_serving) = (step.client_csr(holds_client_cert), step.serving_csr());
    let ip = IpAddr::V4(n.instance.private_ip);
    let before = csr_names(cluster, &node);
    let serial_before = live_serial(ip, &cluster.ca_pem).await.ok().map(|(_, s)| s);
    let t0 = Instant::now();
    let mut milestones: Vec<String> = Vec::new();
    let mut pending_since: Option<(String, Instant)> = None;
    let (mut clients, mut servings): (Vec<CsrState>, Vec<CsrState>);
    let mut live: Result<(Vec<u8>, String), String>;
    let decided = loop {
        (clients, servings) = new_csrs(cluster, &node, &before, None);
        live = live_serial(ip, &cluster.ca_pem).await;
        let client_done = want_client != CsrExpectation::Issued || clients.iter().any(|c| c.issued);
        let serving_done = want_serving != CsrExpectation::Issued || servings.iter().any(|c| c.issued);
        let served_new = want_serving != CsrExpectation::Issued
            || live
                .as_ref()
                .is_ok_and(|(_, s)| Some(s.as_str()) != serial_before.as_deref());
        for (what, done) in [("client CSR issued", client_done), ("serving CSR issued", serving_done)] {
            if done && !milestones.iter().any(|m| m.starts_with(what)) {
                milestones.push(format!("{what} after {:.0}s", t0.elapsed().as_secs_f64()));
            }
        }
        if client_done && serving_done && served_new {
            milestones.push(format!(
                "new serving certificate live after {:.0}s",
                t0.elapsed().as_secs_f64()
            ));
            break None;
        }
        // A renewal pending longer than an approver takes is refused: decided now, not at `within`.
        let pending = clients.iter().chain(&servings).find(|c| !c.approved && !c.issued);
        match (pending.and_then(|c| c.name.clone()), &pending_since) {
            (Some(csr), Some((seen, since))) if *seen == csr && since.elapsed() >= PENDING_DECIDED => {
                let why = refusal(cluster, &csr).unwrap_or_else(|| "no approver decided on it".into());
                break Some(format!(
                    "{csr} pending for {}s after the kubelet asked to renew: {why}",
                    PENDING_DECIDED.as_secs()
                ));
            }
            (Some(csr), Some((seen, _))) if *seen == csr => {}
            (Some(csr), _) => pending_since = Some((csr, Instant::now())),
            (None, _) => pending_since = None,
        }
        if t0.elapsed() >= within {
            break Some(format!(
                "no renewal within {} (so far: {})",
                humantime::format_duration(within),
                if milestones.is_empty() {
                    "nothing".to_string()
                } else {
                    milestones.join(", ")
                }
            ));
        }
        tokio::time::sleep(LOOK_EVERY).await;
    };
    let mut checks = Vec::new();
    checks.extend(csr_check(name(&def::CLIENT_CSR_AFTER), want_client, &clients, cluster));
    checks.extend(csr_check(
        name(&def::SERVING_CSR_AFTER),
        want_serving,
        &servings,
        cluster,
    ));
    if want_serving == CsrExpectation::Issued {
        let expected_cert = crate::assert::serving::ServingCert {
            subject_cn: format!("system:node:{node}"),
            subject_o: vec!["system:nodes".into()],
            dns_names: vec![n.instance.private_dns_name()],
            ips: vec![ip],
        };
        let expected = format!(
            "a renewed certificate on :{KUBELET_PORT} (serial other than {}), {expected_cert}, chained to the \
             cluster CA",
            serial_before.as_deref().unwrap_or("none read before")
        );
        let (passed, actual) = match &live {
            Ok((der, serial)) => {
                let seen = crate::assert::serving::describe(der);
                let renewed = Some(serial.as_str()) != serial_before.as_deref();
                let names_right = seen.as_ref().is_ok_and(|c| *c == expected_cert);
                let said = seen.map(|c| c.to_string()).unwrap_or_else(|e| e);
                (renewed && names_right, format!("serial {serial}, {said}"))
            }
            Err(e) => (false, format!("no CA-verified TLS on :{KUBELET_PORT} ({e})")),
        };
        let actual = match (&decided, passed) {
            (Some(why), false) => format!("{actual}; {why}"),
            _ => actual,
        };
        checks.push(Check::new(name(&def::SERVING_CERT_AFTER), passed, expected, actual));
    }
    let mut notes = vec![format!(
        "{node}: {action}: {}{}",
        if milestones.is_empty() {
            "nothing renewed".to_string()
        } else {
            milestones.join(", ")
        },
        decided.map(|d| format!("; {d}")).unwrap_or_default()
    )];
    if let Some(lifetime) = sc.cluster.certificate_lifetime {
        notes.push(format!(
            "{node}: {action}: certificates signed for {} (cluster.certificateLifetime)",
            humantime::format_duration(lifetime)
        ));
    }
    (checks, notes)
}

/// The certificate :10250 serves now (verified against the cluster CA) and its serial.
async fn live_serial(ip: IpAddr, ca_pem: &str) -> Result<(Vec<u8>, String), String> {
    let der = crate::assert::serving::probe_leaf(ip, KUBELET_PORT, ca_pem).await?;
    let serial = crate::assert::serving::serial(&der)?;
    Ok((der, serial))
}
