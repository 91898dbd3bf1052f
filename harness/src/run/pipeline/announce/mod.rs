//! `announce cluster`: the fake EKS learns the cluster as DescribeCluster will report it, the token webhook which
//! cluster name tokens for this control plane carry, IAM scenarios get their role mappings, and the scenario gets
//! a bootstrap token and the placeholders its bootstrap arguments may use.
pub(crate) mod roles;
use super::{Action, Context, Timed};
use crate::cluster::objects;
use crate::error::{Error, Result};
use crate::fakes::authenticator::Announcement;
use crate::fakes::eks::ClusterRecord;
use crate::run::env::{Environment, SharedCluster};
use crate::scenario::model::{AuthMode, Scenario};
use base64::Engine;
use futures::future::BoxFuture;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub(crate) const ACTION: Action = Action {
    name: "cluster announced",
    applies: super::always,
    timed: Timed::Whole,
    run,
};

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let (env, sc) = (cx.env, cx.sc);
        let cluster = cx.cluster("announce")?;
        let cluster_name = sc.cluster_name();
        let (record, served) = announce(env, sc, &cluster, &cluster_name)?;
        cx.held.served = Some(served);
        if sc.cluster.auth == AuthMode::Iam {
            let notes = crate::run::pipeline::announce::roles::map_node_roles(sc, &cluster, &record).await?;
            cx.report.notes.extend(notes);
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
        cx.announced.cluster_vars = BTreeMap::from([
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
            ("run.attempt".to_string(), cx.trial.attempt.to_string()),
            ("proxy.url".to_string(), env.proxy_url.clone()),
        ]);
        cx.announced.token = Some(token);
        Ok(())
    })
}

/// Tells the fake EKS about the cluster, and the token webhook which cluster name tokens for this control plane
/// carry, for as long as the returned announcement lives.
fn announce(
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
        id: crate::process::random_hex(32).to_uppercase(),
        created: SystemTime::now(),
        creating_for_calls: std::sync::atomic::AtomicU32::new(sc.cluster.creating_for_calls),
        creating_for: sc.cluster.creating_for,
        first_described: Default::default(),
        authentication_mode: sc.cluster.authentication_mode,
        access_entries: std::sync::RwLock::new(Vec::new()),
    });
    Ok((record, served))
}
