//! `podRunsAgain`: a pod bound to the node before a step, found running again after it. The same pod (its UID),
//! its container started after the step began: a pod object that merely survived in the API while nothing ran it
//! does not count.
use crate::run::pipeline::observe::pod::{delete, not_running};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use std::time::{Duration, Instant};

/// The pod placed before a step.
pub(super) struct Survivor {
    pub name: String,
    pub uid: String,
    /// When its container started (seconds since the epoch), with its restarts then.
    pub started: Option<(i64, i32)>,
}

fn api(client: &kube::Client) -> Api<Pod> {
    Api::namespaced(client.clone(), "default")
}

/// When the pod's container last started, in seconds since the epoch, while it runs.
fn running_since(pod: &Pod) -> Option<i64> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") {
        return None;
    }
    status
        .container_statuses
        .iter()
        .flatten()
        .find_map(|cs| cs.state.as_ref()?.running.as_ref()?.started_at.as_ref())
        .map(|t| t.0.as_second())
}

/// The `podRuns` probe pod, placed on `node` and running, kept as the pod from before the step; why not otherwise.
pub(super) async fn place(client: &kube::Client, node: &str) -> Result<Survivor, String> {
    let probe = crate::run::pipeline::observe::pod::check(client, node).await;
    let Some(name) = probe.running else {
        return Err(format!("the pod did not run before the step: {}", probe.check.actual));
    };
    match api(client).get(&name).await {
        Ok(p) => Ok(Survivor {
            name,
            started: running_since(&p).map(|t| (t, restarts(&p))),
            uid: p.metadata.uid.unwrap_or_default(),
        }),
        Err(e) => {
            delete(client, &name).await;
            Err(format!("reading the pod placed before the step: {e}"))
        }
    }
}

/// What one look at the pod from before says.
enum Look {
    Decided(Result<String, String>),
    /// Not yet: what it shows now (quoted if the wait runs out).
    Waiting(String),
}

/// Looks at the same pod (its UID) every half second until `judge` decides, at most `within` (then `Err` with
/// `timed_out` and what it showed last); a pod replaced under its name is decided at once.
async fn watch(
    client: &kube::Client,
    s: &Survivor,
    within: Duration,
    timed_out: &str,
    judge: impl Fn(Result<Pod, kube::Error>) -> Look,
) -> Result<String, String> {
    let start = Instant::now();
    loop {
        let last = match api(client).get(&s.name).await {
            Ok(p) if p.metadata.uid.as_deref() != Some(s.uid.as_str()) => {
                return Err(format!(
                    "the pod was replaced (uid {}, was {})",
                    p.metadata.uid.unwrap_or_default(),
                    s.uid
                ))
            }
            got => match judge(got) {
                Look::Decided(verdict) => return verdict,
                Look::Waiting(now) => now,
            },
        };
        if start.elapsed() >= within {
            return Err(format!("{timed_out} {}s: {last}", within.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits until the same pod runs again with its container started at `since` (seconds since the epoch) or
/// later, at most `within`: what was seen, or why not.
pub(super) async fn again(client: &kube::Client, s: &Survivor, since: i64, within: Duration) -> Result<String, String> {
    watch(client, s, within, "not running again within", |got| match got {
        Ok(p) => match running_since(&p) {
            Some(t) if t >= since => Look::Decided(Ok(format!(
                "the same pod Running again, its container started {}s after the step began ({} restarts)",
                t - since,
                restarts(&p)
            ))),
            Some(_) => Look::Waiting("Running, but its container started before the step (not restarted yet)".into()),
            None => Look::Waiting(not_running(&p)),
        },
        Err(e) => Look::Waiting(format!("reading the pod: {e}")),
    })
    .await
}

/// The restarts of the pod's containers.
fn restarts(pod: &Pod) -> i32 {
    pod.status
        .iter()
        .flat_map(|st| st.container_statuses.iter().flatten())
        .map(|cs| cs.restart_count)
        .sum()
}

/// Whether the same pod still runs the container it ran before the step (not restarted), looked at for
/// `within`: a change is decided at once, a pod not running is waited for.
pub(super) async fn kept(client: &kube::Client, s: &Survivor, within: Duration) -> Result<String, String> {
    let Some((started, restarts_before)) = s.started else {
        return Err("its container was not seen running before the step".into());
    };
    watch(client, s, within, "not running after", |got| match got {
        Ok(p) => match running_since(&p) {
            Some(t) if t == started => Look::Decided(Ok(format!(
                "the same pod (uid {}) Running, its container the one started before the step ({} restarts)",
                s.uid,
                restarts(&p)
            ))),
            Some(t) => Look::Decided(Err(format!(
                "the pod's container was restarted: started {}s after the one from before ({} restarts, \
                 {restarts_before} before)",
                t - started,
                restarts(&p)
            ))),
            None => Look::Waiting(not_running(&p)),
        },
        Err(kube::Error::Api(e)) if e.code == 404 => Look::Decided(Err("the pod is gone".into())),
        Err(e) => Look::Waiting(format!("reading the pod: {e}")),
    })
    .await
}

/// Deletes the pod (its node may be gone: not waited for).
pub(super) async fn remove(client: &kube::Client, s: &Survivor) {
    delete(client, &s.name).await;
}
