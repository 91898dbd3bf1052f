//! One scenario, as a pipeline of small named actions (kind's "actions" style): provision, start the control
//! plane, start nodes, run the bootstrap, observe the join, assert, collect artifacts, tear down.
use super::artifacts;
use super::boot::{boot_node, run_bootstrap};
use super::env::{Environment, SharedCluster};
use super::node::{bootstrap_text, calls_text, imds_text, RunningNode};
use super::node_checks::check_node;
use super::observe::observe;
use super::report::{Outcome, ScenarioReport};
use crate::assert;
use crate::cluster::objects::{self, BootstrapToken};
use crate::cluster::ClusterSpec;
use crate::error::{Error, Result};
use crate::fakes::authenticator::Announcement;
use crate::fakes::eks::ClusterRecord;
use crate::scenario::model::{AuthMode, Scenario};
use crate::scenario::template::render;
use base64::Engine;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Runs one scenario and never panics: every failure ends up in the report.
pub async fn run(env: &Environment, scenario: &Scenario, file: &Path) -> ScenarioReport {
    let start = Instant::now();
    let mut report = ScenarioReport::new(&scenario.name, file.to_path_buf());
    if let Some(reason) = scenario
        .cluster
        .kubernetes_versions
        .as_ref()
        .and_then(|v| v.unsupported(&scenario.cluster.kubernetes_version))
    {
        report.outcome = Outcome::Ignored(reason);
        return report;
    }
    // One provider's trial of a scenario at a time: the trials of one scenario on several providers share its node
    // container names and its cluster name (the fake EKS's record, the token webhook's cluster), so two at once
    // would collide.
    let _one_at_a_time = env.scenario_lock(&scenario.name).await;
    let mut owned = None;
    let result = run_inner(env, scenario, &mut report, &mut owned).await;
    if let Some(spec) = owned {
        env.release(&spec).await;
    }
    if let Err(e) = result {
        // Whatever failed while a Ctrl-C clean-up was killing the run failed because of it.
        let e = if crate::reaper::interrupted() {
            Error::Interrupted
        } else {
            e
        };
        report.outcome = match e {
            Error::ProviderUnavailable { provider, reason } => {
                Outcome::Unavailable(format!("provider {provider}: {reason}"))
            }
            e => Outcome::Error {
                hint: e.hint().to_string(),
                message: e.to_string(),
            },
        };
    } else if report.checks.iter().any(|c| !c.passed) {
        report.outcome = Outcome::Failed;
    }
    report.wall = start.elapsed();
    let dir = env.run_dir.join(&scenario.name);
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("report.txt"),
        format!("{}{}", report.render(), report.call_log),
    );
    report
}

fn phase(report: &mut ScenarioReport, name: &str, since: Instant) -> Instant {
    report.phases.push((name.to_string(), since.elapsed()));
    Instant::now()
}

async fn run_inner(
    env: &Environment,
    sc: &Scenario,
    report: &mut ScenarioReport,
    owned: &mut Option<ClusterSpec>,
) -> Result<()> {
    let provider = sc.cluster.provider.as_str();
    // Checked before provisioning anything (this may pull its image): a provider that cannot run here makes the
    // outcome Unavailable, with why; the caller decides whether that is a skip or a failure.
    let Some(p) = crate::cluster::provider(provider) else {
        return Err(Error::ProviderUnavailable {
            provider: provider.into(),
            reason: "unknown provider".into(),
        });
    };
    let probe = ClusterSpec {
        provider: provider.into(),
        version: sc.cluster.kubernetes_version.clone(),
        service_cidr: sc.cluster.service_cidr(),
        owner: None,
    };
    if let Some(reason) = p.unavailable(&probe, &env.docker).await {
        return Err(Error::ProviderUnavailable {
            provider: provider.into(),
            reason,
        });
    }
    let mut t = Instant::now();
    let assets = env.assets(&sc.cluster.kubernetes_version).await?;
    t = phase(report, "assets", t);
    let image = env.image(&assets).await?;
    // The EKS pause image under its ECR name, for AMI units and nodeadm alike (a user's image may not carry it).
    if let Err(e) = env.serve_sandbox_image(&image).await {
        report
            .notes
            .push(format!("the fake ECR registry serves no sandbox image: {e}"));
    }
    let mut group_images = Vec::new();
    for g in &sc.nodes {
        let img = env.group_image(&image, g.image.as_ref()).await?;
        if g.image.is_some() {
            report
                .notes
                .push(format!("node group {}: image {} (over {})", g.name, img.tag, img.base));
        }
        group_images.push(img);
    }
    t = phase(report, "node image", t);
    // aws-auth is cluster-wide: an IAM scenario gets a control plane of its own where that is cheap (local),
    // else the shared one to itself while it runs (taken before its instances launch, so the evidence filtered
    // by launch time is its own), starting without aws-auth.
    let iam = sc.cluster.auth == AuthMode::Iam;
    let own = iam && p.control_plane_per_iam_scenario();
    let spec = ClusterSpec {
        provider: provider.into(),
        version: assets.version.clone(),
        service_cidr: sc.cluster.service_cidr(),
        owner: own.then(|| sc.name.clone()),
    };
    if spec.owner.is_some() {
        *owned = Some(spec.clone());
    }
    let _lease = match iam && !own {
        true => {
            let lease = env.iam_lease(&spec).await;
            t = phase(
                report,
                "waited for the shared control plane (one IAM scenario at a time)",
                t,
            );
            Some(lease)
        }
        false => None,
    };
    // The control plane and the node containers start in parallel: a container needs no cluster until its
    // bootstrap runs.
    let boots = futures::future::join_all(
        sc.nodes
            .iter()
            .zip(&group_images)
            .flat_map(|(g, img)| (0..g.count).map(move |i| (g, img, i)))
            .map(|(g, img, i)| boot_node(env, sc, img, g, i)),
    );
    let (cluster, booted) = tokio::join!(env.cluster(&spec, Some(&assets)), boots);
    let mut nodes = Vec::new();
    let mut first_error = None;
    for b in booted {
        match b {
            Ok(n) => nodes.push(n),
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    let (cluster, created) = match (cluster, first_error) {
        (Ok(c), None) => c,
        (Err(e), _) | (Ok(_), Some(e)) => {
            remove_nodes(env, nodes).await;
            return Err(e);
        }
    };
    if created {
        report.phases.push(("control plane ready".into(), cluster.created_in));
        let steps: Vec<String> = cluster
            .step_timings
            .iter()
            .map(|(n, d)| format!("{n} {}", super::report::secs(*d)))
            .collect();
        report
            .notes
            .push(format!("control plane created: {}", steps.join(", ")));
    }
    report
        .phases
        .push(("control plane + nodes booted (in parallel)".into(), t.elapsed()));
    t = Instant::now();

    let cluster_name = sc.cluster_name();
    // The cluster name is served by this control plane's token webhook while `_served` lives: until this function
    // returns, whichever way.
    let prepared: Result<(BootstrapToken, BTreeMap<String, String>, Announcement)> = async {
        let (record, served) = announce_cluster(env, sc, &cluster, &cluster_name)?;
        if sc.cluster.auth == AuthMode::Iam {
            report
                .notes
                .extend(super::iam::map_node_roles(sc, &cluster, &record).await?);
        }
        let token = objects::create_bootstrap_token(
            &cluster.client,
            &format!("nodejoin scenario {}", sc.name),
            Duration::from_secs(3600),
        )
        .await?;
        let unrelated_ca = crate::pki::Ca::generate("unrelated-ca")?;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let dns_ip = crate::eks::dns::from_service_cidr(&ipnet::IpNet::V4(sc.cluster.service_cidr()));
        let vars = BTreeMap::from([
            ("cluster.name".to_string(), cluster_name.clone()),
            ("cluster.endpoint".to_string(), cluster.endpoint.clone()),
            ("cluster.caBase64".to_string(), b64(&cluster.ca_pem)),
            ("cluster.region".to_string(), sc.cluster.region.clone()),
            (
                "cluster.serviceIpv4Cidr".to_string(),
                sc.cluster.service_cidr().to_string(),
            ),
            ("cluster.dnsIp".to_string(), dns_ip.to_string()),
            ("bootstrapToken".to_string(), token.token()),
            ("unrelatedCaBase64".to_string(), b64(&unrelated_ca.0.cert_pem)),
        ]);
        Ok((token, vars, served))
    }
    .await;
    let (token, cluster_vars, _served) = match prepared {
        Ok(p) => p,
        Err(e) => {
            remove_nodes(env, nodes).await;
            return Err(e);
        }
    };
    let results = futures::future::join_all(
        nodes
            .iter_mut()
            .map(|n| run_bootstrap(env, sc, n, &cluster_vars, &token)),
    )
    .await;
    if let Some(e) = results.into_iter().find_map(Result::err) {
        teardown(env, &cluster, nodes, &token).await;
        return Err(e);
    }
    t = phase(report, "bootstrap", t);

    let died = observe(env, &cluster, &mut nodes).await;
    t = phase(report, "join observed", t);
    if let Some(component) = died {
        teardown(env, &cluster, nodes, &token).await;
        if crate::reaper::interrupted() {
            return Err(Error::Interrupted);
        }
        return Err(Error::ControlPlane {
            component: "control plane".into(),
            message: format!("{component}; logs in {}", cluster.logs_dir.display()),
        });
    }
    let memory = cluster.control_plane.lock().await.memory();
    if !memory.is_empty() {
        let rss: Vec<String> = memory
            .iter()
            .map(|(name, kib)| format!("{name} {} MiB", kib / 1024))
            .collect();
        report.notes.push(format!("control-plane RSS: {}", rss.join(", ")));
    }

    for n in nodes.iter_mut() {
        check_node(&cluster, n, report).await;
        let calls = env.calls.of(&n.instance.instance_id);
        report.call_log.push_str(&format!(
            "calls from {} ({}):\n{}\n",
            n.node_name,
            n.instance.instance_id,
            calls_text(env, n)
        ));
        report.notes.push(format!(
            "{}: {} calls to the fakes: {}",
            n.node_name,
            calls.len(),
            crate::assert::calls::summary(&calls)
        ));
        if let Some(want) = &n.expect().calls {
            let ready_at = n.timeline.ready.map(|d| n.kubelet_start + d);
            report.checks.extend(crate::assert::calls::checks(
                &n.node_name,
                &calls,
                want,
                n.booted,
                ready_at,
            ));
        }
        if n.group.user_data.is_some() {
            if let Some(note) = &n.user_data_note {
                report.notes.push(format!("{}: user data {note}", n.node_name));
            }
            if let Some(ci) = &n.cloud_init {
                report.notes.push(format!("{}: {}", n.node_name, ci.summary()));
            }
            if let Some(na) = &n.nodeadm {
                report.notes.push(format!("{}: {}", n.node_name, na.summary()));
            }
            report.checks.extend(super::userdata::checks(
                env,
                &n.group,
                &n.node_name,
                &n.instance.instance_id,
                n.cloud_init.as_ref(),
                n.nodeadm.as_ref(),
            ));
        }
        // Derived from what the tool did, so it holds for any nodeadm version; other nodes ask for it.
        let nodeadm_ok = n.nodeadm.as_ref().is_some_and(|r| r.succeeded()) && n.expect().joins;
        if nodeadm_ok || n.expect().sandbox_image {
            report
                .checks
                .push(super::userdata::sandbox_check(env, &n.container, &n.node_name, &n.instance.instance_id).await);
        }
        if sc.cluster.auth == AuthMode::Iam {
            if n.expect().joins {
                let vars = n.vars.clone();
                let render_var = |v: &str| render(v, &vars).unwrap_or_else(|e| e);
                let (checks, notes) =
                    super::iam::checks(env, &cluster, sc, &n.group, &n.instance, &n.node_name, &render_var);
                report.checks.extend(checks);
                report.notes.extend(notes);
            } else if let Some(d) = env.authenticator.decisions_for(&n.instance.instance_id).last() {
                report
                    .notes
                    .push(format!("{}: last token webhook decision: {}", n.node_name, d.line()));
            }
        }
        if n.expect().idempotent {
            match &n.invocation {
                Some((cmd, exec_env)) => report.checks.push(
                    super::files::idempotency(&n.node_name, &n.container, cmd, exec_env, n.expect().within).await,
                ),
                None => report.checks.push(assert::Check::new(
                    format!("{}/idempotent bootstrap", n.node_name),
                    false,
                    "a second run",
                    "the bootstrap never ran",
                )),
            }
        }
        if let Some(crate::assert::executables::Trace::Read(t)) = &n.executables {
            report.notes.push(format!(
                "{}: the bootstrap ran {}",
                n.node_name,
                crate::assert::executables::summary(&t.ran)
            ));
        }
        if let Some(want) = &n.expect().executables {
            report.checks.extend(crate::assert::executables::checks(
                &n.node_name,
                n.executables.as_ref(),
                want,
            ));
        }
        let files = n.expect().files.clone();
        report
            .checks
            .extend(super::files::expectations(&n.node_name, &n.container, &files, &n.vars).await);
        report.nodes.push(n.timeline.clone());
    }
    for g in &sc.nodes {
        let members: Vec<&RunningNode> = nodes.iter().filter(|n| n.group.name == g.name).collect();
        if g.expect.deterministic {
            let mut outputs = Vec::new();
            for n in &members {
                outputs.push((
                    n.node_name.clone(),
                    super::files::normalised_outputs(&n.container, &n.instance).await,
                ));
            }
            report.checks.push(crate::assert::files::determinism(&g.name, &outputs));
        }
        let mut prefixes: Vec<String> = members.iter().map(|n| n.node_name.clone()).collect();
        prefixes.push(g.name.clone());
        expect_failures(report, &prefixes, &g.expect.failing_checks);
    }
    t = phase(report, "assertions", t);

    let failed = report.checks.iter().any(|c| !c.passed);
    let negative = nodes
        .iter()
        .any(|n| !n.expect().joins || !n.expect().evidence.is_empty());
    if failed || negative || std::env::var_os("NODEJOIN_KEEP_ARTIFACTS").is_some() {
        let dir = env.run_dir.join(&sc.name);
        artifacts::collect_cluster(&dir, &cluster);
        for n in &nodes {
            let logs = artifacts::HarnessLogs {
                bootstrap: bootstrap_text(n),
                imds: imds_text(env, n),
                authenticator: super::iam::decision_lines(env, &n.instance.instance_id),
                calls: calls_text(env, n),
            };
            artifacts::collect_node(
                &dir.join(&n.node_name),
                &n.container,
                &n.instance,
                &n.node_name,
                &logs,
                &cluster,
            )
            .await;
        }
        report.artifacts = Some(dir);
        t = phase(report, "artifacts", t);
    }
    teardown(env, &cluster, nodes, &token).await;
    phase(report, "teardown", t);
    Ok(())
}

/// Tells the fake EKS about the cluster, as DescribeCluster will report it, and the token webhook which cluster
/// id tokens for this control plane carry, for as long as the returned announcement lives.
fn announce_cluster(
    env: &Environment,
    sc: &Scenario,
    cluster: &SharedCluster,
    name: &str,
) -> Result<(Arc<ClusterRecord>, Announcement)> {
    // A name another control plane's scenario uses now is refused; one an earlier scenario (say the same scenario
    // on another provider) used is taken over.
    if let Some(existing) = env.eks.get(name) {
        if existing.endpoint != cluster.endpoint && env.authenticator.served_elsewhere(&cluster.id, name) {
            return Err(Error::ScenarioInvalid {
                file: std::path::PathBuf::from(&sc.name),
                message: format!("EKS cluster name '{name}' is already used by another control plane in this run; give the scenario its own cluster.name"),
            });
        }
    }
    let version = sc
        .cluster
        .kubernetes_version
        .trim_start_matches('v')
        .rsplit_once('.')
        .map(|(mm, _)| mm.to_string())
        .unwrap_or_default();
    let served = env
        .authenticator
        .announce(&cluster.id, name)
        .map_err(|message| Error::Fake {
            service: "token-webhook",
            message,
        })?;
    let record = env.eks.put(ClusterRecord {
        name: name.to_string(),
        region: sc.cluster.region.clone(),
        account_id: sc.cluster.account_id.clone(),
        endpoint: cluster.endpoint.clone(),
        ca_base64: base64::engine::general_purpose::STANDARD.encode(&cluster.ca_pem),
        service_ipv4_cidr: sc.cluster.service_cidr().to_string(),
        vpc: crate::fakes::vpc::Vpc::new(name, &sc.cluster.network),
        version,
        id: crate::fakes::random_hex(32).to_uppercase(),
        created: SystemTime::now(),
        creating_for_calls: std::sync::atomic::AtomicU32::new(sc.cluster.creating_for_calls),
        creating_until: sc.cluster.creating_for.map(|d| SystemTime::now() + d),
        authentication_mode: sc.cluster.authentication_mode,
        access_entries: std::sync::RwLock::new(Vec::new()),
    });
    Ok((record, served))
}

/// Removes nodes that never got as far as a bootstrap (the control plane or a sibling failed to start).
async fn remove_nodes(env: &Environment, nodes: Vec<RunningNode>) {
    let removals = nodes.into_iter().map(|n| {
        env.instances.remove(std::net::IpAddr::V4(n.instance.private_ip));
        n.container.remove()
    });
    futures::future::join_all(removals).await;
}

/// Turns the checks of a group (its nodes' and its own) listed in `failing_checks` around: each must have failed (it then passes, marked as
/// an expected failure, its findings kept); one that passed, or a pattern no check matches, fails.
fn expect_failures(report: &mut ScenarioReport, owners: &[String], failing_checks: &[String]) {
    let node = owners.first().cloned().unwrap_or_default();
    for pattern in failing_checks {
        let mut matched = false;
        for c in report.checks.iter_mut() {
            let Some(what) = owners
                .iter()
                .find_map(|o| c.name.strip_prefix(o.as_str()).and_then(|r| r.strip_prefix('/')))
            else {
                continue;
            };
            if !crate::fakes::calls::glob(pattern, what) {
                continue;
            }
            matched = true;
            c.expected = format!("to fail (failingChecks), i.e. not: {}", c.expected);
            c.passed = !c.passed;
            c.xfail = true;
        }
        if !matched {
            report.checks.push(assert::Check::new(
                format!("{node}/failingChecks {pattern}"),
                false,
                "a check of this name that fails",
                "no such check ran",
            ));
        }
    }
}

/// Removes the scenario's containers, instances, Node and CSR objects and its token, so the shared control
/// plane is clean for the next scenario.
async fn teardown(env: &Environment, cluster: &SharedCluster, nodes: Vec<RunningNode>, token: &BootstrapToken) {
    let node_api: Api<Node> = Api::all(cluster.client.clone());
    let csr_api: Api<CertificateSigningRequest> = Api::all(cluster.client.clone());
    let csrs = csr_api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut removals = Vec::new();
    for n in nodes {
        env.instances.remove(std::net::IpAddr::V4(n.instance.private_ip));
        let _ = node_api.delete(&n.node_name, &Default::default()).await;
        for csr in &csrs {
            let mine = assert::csr::belongs_to(csr, &n.node_name);
            if let (true, Some(name)) = (mine, &csr.metadata.name) {
                let _ = csr_api.delete(name, &Default::default()).await;
            }
        }
        removals.push(n.container.remove());
    }
    futures::future::join_all(removals).await;
    objects::delete_bootstrap_token(&cluster.client, token).await;
}
