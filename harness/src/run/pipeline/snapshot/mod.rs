//! `snapshot` (asked for by `nodejoin compare`): what each node shows once the checks are made, normalised for
//! its identity: the Node as the API server has it now, the kubelet's `/configz` and command line, the files the
//! bootstrap wrote, its calls and programs, its timings, and the scenario's check outcomes.
use super::{Action, Context, Timed};
use crate::assert::files::Identity;
use crate::compare::snapshot::{flatten_json, CheckOutcome, NodeFields, NodeSnapshot, ScenarioSnapshot};
use crate::error::Result;
use crate::run::env::{Environment, SharedCluster};
use crate::run::node::RunningNode;
use crate::run::timeline::NodeTimeline;
use crate::scenario::expect::Expect;
use crate::scenario::model::CsrExpectation;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;

pub(crate) const ACTION: Action = Action {
    name: "snapshot",
    applies: wanted,
    timed: Timed::Whole,
    run,
};

/// Files beyond the ones the determinism checks compare that tell what a bootstrap configured.
const MORE_FILES: &[&str] = &[
    "/var/lib/kubelet/bootstrap-kubeconfig",
    "/etc/eksctl/kubelet.env",
    "/etc/kubernetes/kubelet/config.d/40-eksctl.conf",
    "/etc/eks/image-credential-provider/config.json",
];

fn wanted(cx: &Context<'_>) -> bool {
    cx.trial.snapshot && cx.cluster.is_some()
}

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let cluster = cx.cluster("snapshot")?;
        let mut snap = ScenarioSnapshot {
            scenario: cx.sc.name.clone(),
            ..Default::default()
        };
        let mut per_group: BTreeMap<&str, usize> = BTreeMap::new();
        let mut owners = Vec::new();
        for n in &cx.nodes {
            let index = per_group.entry(n.group.name.as_str()).or_default();
            let key = format!("{}-{index}", n.group.name);
            *index += 1;
            let id = identity(&cx.announced.cluster_vars, n);
            snap.nodes.insert(key.clone(), node(cx.env, &cluster, n, &id).await);
            owners.push((n.node_name.clone(), n.instance.instance_id.clone(), key, id));
        }
        for c in &cx.report.checks {
            // A node's checks are named after its node name or instance id: named after its key instead.
            let owner = owners.iter().find(|(name, iid, _, _)| {
                c.name.starts_with(&format!("{name}/")) || c.name.starts_with(&format!("{iid}/"))
            });
            let (name, actual) = match owner {
                Some((_, _, key, id)) => {
                    let rest = c.name.split_once('/').map(|(_, r)| r).unwrap_or_default();
                    (format!("{key}/{}", id.normalise(rest)), id.normalise(&c.actual))
                }
                None => (c.name.clone(), c.actual.clone()),
            };
            let mut unique = name.clone();
            let mut i = 2;
            while snap.checks.contains_key(&unique) {
                unique = format!("{name} #{i}");
                i += 1;
            }
            snap.checks.insert(
                unique,
                CheckOutcome {
                    mark: c.mark().to_string(),
                    actual,
                },
            );
        }
        cx.report.snapshot = Some(snap);
        Ok(())
    })
}

/// The instance's identity (id, address, names, MAC) and the cluster's (name, endpoint, CA, bootstrap token).
fn identity(cluster_vars: &BTreeMap<String, String>, n: &RunningNode) -> Identity {
    use base64::Engine;
    let var = |k: &str| cluster_vars.get(k).map(String::as_str).unwrap_or_default();
    let ca_pem = base64::engine::general_purpose::STANDARD
        .decode(var("cluster.caBase64"))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .unwrap_or_default();
    let token = var("bootstrapToken");
    Identity::of(
        &n.instance.instance_id,
        &n.instance.private_ip.to_string(),
        &n.instance.private_dns_name(),
        &n.instance.mac,
    )
    .with(ca_pem.trim_end(), "{{cluster.caPem}}")
    .with(var("cluster.caBase64"), "{{cluster.caBase64}}")
    .with(var("cluster.endpoint"), "{{cluster.endpoint}}")
    .with(var("cluster.name"), "{{cluster.name}}")
    .with(token, "{{bootstrapToken}}")
    .with(token.split('.').next().unwrap_or_default(), "{{bootstrapTokenId}}")
}

async fn node(env: &Environment, cluster: &SharedCluster, n: &RunningNode, id: &Identity) -> NodeSnapshot {
    let api: kube::Api<Node> = kube::Api::all(cluster.client.clone());
    let now = api
        .get_opt(&n.node_name)
        .await
        .ok()
        .flatten()
        .or_else(|| n.node.clone());
    let mut s = NodeSnapshot {
        node: fields(now.as_ref(), id),
        ..Default::default()
    };
    if now.is_some() {
        if let Ok(v) = crate::run::pipeline::assertions::node::configz(cluster, &n.node_name).await {
            let mut flat = BTreeMap::new();
            flatten_json(&v, "", &mut flat);
            s.configz = flat.into_iter().map(|(k, v)| (k, id.normalise(&v))).collect();
        }
    }
    s.kubelet_args = kubelet_args(n).await.iter().map(|a| id.normalise(a)).collect();
    let mut files = crate::run::pipeline::assertions::files::read_outputs(&n.machine).await;
    for f in MORE_FILES {
        if let Some(content) = n.machine.read_file(f).await {
            files.insert(f.to_string(), content);
        }
    }
    s.files = files.into_iter().map(|(k, v)| (k, id.normalise(&v))).collect();
    for c in env.calls.of(&n.instance.instance_id) {
        *s.calls
            .entry(id.normalise(&format!("{} -> {}", c.key(), c.status)))
            .or_default() += 1;
    }
    if let Some(crate::assert::executables::Trace::Read(t)) = &n.executables {
        s.programs = t.ran.clone();
    }
    s.timings = awaited_timings(&n.timeline, n.expect());
    s
}

/// The milestones the scenario's wait decided on, in seconds. One it did not wait for (a serving CSR under
/// `servingCsr: any`) may land just before or just after the wait ends, so its presence would differ between two
/// runs of the same bootstrap.
fn awaited_timings(t: &NodeTimeline, e: &Expect) -> BTreeMap<String, f64> {
    let issued = |c: CsrExpectation| c == CsrExpectation::Issued;
    [
        ("container up", t.container_up, true),
        ("bootstrap done", t.bootstrap, true),
        ("client CSR issued", t.client_csr_issued, issued(e.client_csr)),
        ("Node registered", t.registered, true),
        ("Ready", t.ready, e.joins),
        ("serving CSR issued", t.serving_csr_issued, issued(e.serving_csr)),
        ("serving cert live", t.serving_cert_live, e.serving_cert),
    ]
    .into_iter()
    .filter_map(|(name, d, awaited)| Some((name.to_string(), d.filter(|_| awaited)?.as_secs_f64())))
    .collect()
}

fn fields(node: Option<&Node>, id: &Identity) -> NodeFields {
    let Some(node) = node else {
        return NodeFields::default();
    };
    let quantities = |m: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>| {
        m.map(|m| m.iter().map(|(k, q)| (k.clone(), q.0.clone())).collect())
            .unwrap_or_default()
    };
    let spec = node.spec.as_ref();
    let status = node.status.as_ref();
    NodeFields {
        registered: true,
        labels: node
            .metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), id.normalise(v)))
            .collect(),
        // The Node is read again after the wait: a controller's transient taint can be back on it by then, and
        // it says nothing about the bootstrap (a node that never gets Ready shows in `Ready` and the checks).
        taints: spec
            .and_then(|s| s.taints.as_ref())
            .map(|ts| {
                ts.iter()
                    .filter(|t| !crate::assert::node::is_transient_taint(&t.key))
                    .map(|t| match &t.value {
                        Some(v) => format!("{}={v}:{}", t.key, t.effect),
                        None => format!("{}:{}", t.key, t.effect),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        capacity: quantities(status.and_then(|s| s.capacity.as_ref())),
        allocatable: quantities(status.and_then(|s| s.allocatable.as_ref())),
        provider_id: spec.and_then(|s| s.provider_id.as_ref()).map(|p| id.normalise(p)),
    }
}

/// The running kubelet's argv, the program as its file name (empty when no kubelet runs).
async fn kubelet_args(n: &RunningNode) -> Vec<String> {
    let script = "p=$(systemctl show -p MainPID --value kubelet.service); [ \"${p:-0}\" -gt 0 ] && tr '\\0' '\\n' < /proc/$p/cmdline";
    match n.machine.exec(&["sh", "-c", script], &[]).await {
        Ok(out) if out.exit_code == 0 => out
            .stdout
            .lines()
            .enumerate()
            .map(|(i, a)| {
                if i == 0 {
                    a.rsplit('/').next().unwrap_or(a).to_string()
                } else {
                    a.to_string()
                }
            })
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn expect(yaml: &str) -> Expect {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    #[test]
    fn only_the_milestones_waited_for_are_kept() {
        let s = Duration::from_secs;
        let t = NodeTimeline {
            container_up: Some(s(5)),
            bootstrap: Some(s(3)),
            client_csr_issued: Some(s(1)),
            registered: Some(s(2)),
            ready: Some(s(4)),
            serving_csr_issued: Some(s(6)),
            serving_cert_live: Some(s(7)),
            ..Default::default()
        };
        let default: Vec<_> = awaited_timings(&t, &expect("{}")).into_keys().collect();
        assert_eq!(default, ["Node registered", "Ready", "bootstrap done", "container up"]);
        let strict = awaited_timings(
            &t,
            &expect("{clientCsr: issued, servingCsr: issued, servingCert: true}"),
        );
        assert_eq!(strict.len(), 7);
        assert_eq!(strict["serving CSR issued"], 6.0);
        // A milestone waited for but never reached stays absent, so its loss shows as a difference.
        let unreached = NodeTimeline {
            serving_csr_issued: None,
            ..t
        };
        assert!(!awaited_timings(&unreached, &expect("{servingCsr: issued}")).contains_key("serving CSR issued"));
    }

    #[test]
    fn controllers_transient_taints_are_not_compared() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "n" },
            "spec": { "taints": [
                { "key": "dedicated", "value": "payments", "effect": "NoSchedule" },
                { "key": "node.kubernetes.io/not-ready", "effect": "NoExecute" },
                { "key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule" }
            ] }
        }))
        .unwrap();
        let id = Identity::of("i-1", "10.0.0.1", "ip-10-0-0-1.ec2.internal", "02:00:00:00:00:01");
        assert_eq!(fields(Some(&node), &id).taints, ["dedicated=payments:NoSchedule"]);
    }
}
