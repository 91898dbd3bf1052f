//! `bootstrap`: every node's bootstrap runs at once (the harness's call of the script, or cloud-init with the
//! node's user data), with the cluster's placeholders filled in.
use super::{Action, Context};
use crate::error::{Error, Result};
use futures::future::BoxFuture;

pub(super) const ACTION: Action = Action {
    name: crate::run::timeline::PHASE_BOOTSTRAP,
    applies: super::always,
    wait: false,
    run,
};

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let (env, sc) = (cx.env, cx.sc);
        let Some(token) = cx.token.as_ref() else {
            return Err(Error::Pipeline("bootstrap ran before the cluster was announced".into()));
        };
        let vars = &cx.cluster_vars;
        let results = futures::future::join_all(
            cx.nodes
                .iter_mut()
                .map(|n| crate::run::boot::run_bootstrap(env, sc, n, vars, token)),
        )
        .await;
        results.into_iter().collect::<Result<Vec<()>>>().map(|_| ())
    })
}
