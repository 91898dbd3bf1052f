//! `artifacts`: a failed or negative scenario (or any, with the keep-artifacts setting) keeps the control plane's
//! and each node's logs, files and evidence under the run directory.
pub(crate) mod collect;
use super::{Action, Context};
use crate::error::Result;
use crate::run::node::{bootstrap_text, calls_text, imds_text};
use futures::future::BoxFuture;

pub(crate) const ACTION: Action = Action {
    name: "artifacts",
    applies: wanted,
    wait: false,
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
        for n in &cx.nodes {
            let logs = collect::HarnessLogs {
                bootstrap: bootstrap_text(n),
                imds: imds_text(env, n),
                authenticator: crate::run::pipeline::assertions::iam::decision_lines(env, &n.instance.instance_id),
                calls: calls_text(env, n),
            };
            let note = collect::collect_node(
                &dir.join(&n.node_name),
                &n.container,
                &n.instance,
                &n.node_name,
                &logs,
                &cluster,
                n.node.is_some(),
            )
            .await;
            if let Some(note) = note {
                cx.report.notes.push(format!("{}: {note}", n.node_name));
            }
        }
        cx.report.artifacts = Some(dir);
        Ok(())
    })
}
