//! `bootstrap`: every node's bootstrap runs at once (the harness's call of the script, or cloud-init with the
//! node's user data), with the cluster's placeholders filled in.
pub(crate) mod command;
pub(crate) mod node;
pub(crate) mod trust;
pub(crate) mod userdata;
use super::{Action, Context, Timed};
use crate::error::{Error, Result};
use futures::future::BoxFuture;

pub(crate) const ACTION: Action = Action {
    name: crate::run::timeline::PHASE_BOOTSTRAP,
    applies: super::always,
    timed: Timed::Whole,
    run,
};

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let (env, trial) = (cx.env, cx.trial);
        let Some(token) = cx.announced.token.as_ref() else {
            return Err(Error::Pipeline("bootstrap ran before the cluster was announced".into()));
        };
        let vars = &cx.announced.cluster_vars;
        let cluster = cx.cluster.clone();
        let bootstraps = futures::future::join_all(
            cx.nodes
                .iter_mut()
                .map(|n| node::run_bootstrap(env, trial, n, vars, token)),
        );
        // A control plane that dies while the nodes bootstrap ends the scenario now, naming the component,
        // instead of after every bootstrap has waited out its own timeouts against a dead API server.
        let died = async {
            let Some(cluster) = cluster else {
                return std::future::pending().await;
            };
            loop {
                tokio::time::sleep(LIVENESS_EVERY).await;
                if let Some(dead) = cluster.control_plane.lock().await.failed_component() {
                    return dead;
                }
            }
        };
        tokio::select! {
            results = bootstraps => results.into_iter().collect::<Result<Vec<()>>>().map(|_| ()),
            dead = died => Err(Error::ControlPlane {
                component: "control plane".into(),
                message: format!("died while the nodes bootstrapped: {dead}"),
            }),
        }
    })
}

/// How often the control plane is asked whether it still runs while the nodes bootstrap.
const LIVENESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
