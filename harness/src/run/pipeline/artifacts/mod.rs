//! `artifacts`: a failed or negative scenario (or any, with the keep-artifacts setting) keeps the control plane's
//! and each node's logs, files and evidence under the run directory.
pub(crate) mod collect;
use super::{Action, Context, Timed};
use crate::error::Result;
use crate::run::node::{bootstrap_text, calls_text, imds_text};
use futures::future::BoxFuture;
use futures::StreamExt;

/// How many nodes' artifacts are collected at once.
const COLLECT_AT_ONCE: usize = 2;

pub(crate) const ACTION: Action = Action {
    name: "artifacts",
    applies: wanted,
    timed: Timed::Whole,
    run,
};

fn wanted(cx: &Context<'_>) -> bool {
    let failed = cx.report.checks.iter().any(|c| !c.passed);
    let negative = cx
        .nodes
        .iter()
        .any(|n| !n.expect().joins || !n.expect().evidence.is_empty());
    cx.cluster.is_some() && (failed || negative || cx.env.settings.keep_artifacts)
}

fn run<'c, 'a>(cx: &'c mut Context<'a>) -> BoxFuture<'c, Result<()>> {
    Box::pin(async move {
        let env = cx.env;
        let Some(cluster) = cx.cluster.clone() else {
            return Ok(());
        };
        // The report's name: a scenario run on several Kubernetes versions keeps each version's apart.
        let dir = env.run_dir.join(&cx.report.name);
        collect::collect_cluster(&dir, &cluster);
        // Two nodes at a time: a machine observed from outside is shut down and its disk read by a reader machine
        // (one vCPU under TCG), which need not wait for the previous one's.
        let collecting: Vec<_> = cx
            .nodes
            .iter()
            .map(|n| {
                let (dir, cluster) = (&dir, &cluster);
                async move {
                    let logs = collect::HarnessLogs {
                        bootstrap: bootstrap_text(n),
                        imds: imds_text(env, n),
                        authenticator: env.authenticator.decision_lines(&n.instance.instance_id),
                        calls: calls_text(env, n),
                    };
                    collect::collect_node(&dir.join(&n.node_name), n, &logs, cluster)
                        .await
                        .map(|note| format!("{}: {note}", n.node_name))
                }
            })
            .collect();
        let collected: Vec<Option<String>> = futures::stream::iter(collecting)
            .buffered(COLLECT_AT_ONCE)
            .collect()
            .await;
        cx.report.notes.extend(collected.into_iter().flatten());
        cx.report.artifacts = Some(dir);
        Ok(())
    })
}
