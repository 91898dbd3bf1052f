//! Requests the API server serves by calling the node's kubelet on :10250, made as `kubectl exec`, `logs` and
//! `port-forward` make them, on the `podRuns` pod. The API server dials the kubelet verifying its serving
//! certificate against `--kubelet-certificate-authority` (the cluster CA, as on EKS), so each answer is the API
//! server's verdict on that certificate; a refusal is returned in the API server's own words. Every call is
//! bounded by [`TIMEOUT`].
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, LogParams};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one request may take: an answer from a kubelet on the run network takes well under a second.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The pod's container (`observe::pod`'s manifest).
const CONTAINER: &str = "pause";

/// The port forwarded to: nothing listens there in a pause pod, so the kubelet's answer is the runtime's
/// `connection refused`, dialled from inside the pod's network namespace.
pub const PORT: u16 = 80;

/// How long the kubelet's error may trail the end of a forwarded connection.
const ERROR_AFTER_CLOSE: Duration = Duration::from_secs(2);

/// What the API server said, without kube's wrapping (`ApiError: … (Status {…})`).
pub(crate) fn said(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => format!("the API server said: {} ({})", status.message, status.code),
        other => other.to_string(),
    }
}

/// `Err(what)` once [`TIMEOUT`] has passed.
async fn bounded<T>(what: &str, f: impl std::future::Future<Output = Result<T, String>>) -> Result<T, String> {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .unwrap_or_else(|_| Err(format!("{what}: no answer within {TIMEOUT:?}")))
}

/// `kubectl exec -it <pod> -- /pause`, then Ctrl-C: the kubelet starts the process in the container, the
/// terminal the runtime gave it turns our `^C` into SIGINT, on which pause exits 0 (the image has no other
/// program). Ok: the exit status the kubelet returned, with the time it took.
pub async fn exec(client: &kube::Client, pod: &str) -> Result<String, String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    bounded("exec", async {
        let ap = AttachParams::interactive_tty().container(CONTAINER);
        let mut attached = api.exec(pod, ["/pause"], &ap).await.map_err(|e| said(&e))?;
        let status = attached.take_status().ok_or("exec: no status channel")?;
        let mut stdout = attached.stdout();
        // The terminal echoes `^C`: read so the stream never fills.
        let drain = tokio::spawn(async move {
            let mut out = Vec::new();
            if let Some(s) = stdout.as_mut() {
                let _ = s.read_to_end(&mut out).await;
            }
            out
        });
        let mut stdin = attached.stdin().ok_or("exec: no stdin")?;
        // Pause installs its SIGINT handler as it starts; a ^C before that ends it by the signal (exit 130),
        // which is as much the kubelet's answer, but a pause makes the ordinary ending the usual one.
        tokio::time::sleep(Duration::from_millis(200)).await;
        stdin
            .write_all(b"\x03")
            .await
            .map_err(|e| format!("exec: writing ^C: {e}"))?;
        let status = status.await;
        drop(stdin);
        attached.abort();
        drain.abort();
        match status {
            Some(s) if s.status.as_deref() == Some("Success") => Ok(format!(
                "/pause started in the container and exited 0 on ^C after {:.2}s",
                start.elapsed().as_secs_f64()
            )),
            // The kubelet's report of our process ended by our ^C before its handler was in place.
            Some(s) if killed_by_our_interrupt(&s) => Ok(format!(
                "/pause started in the container and was ended by ^C (exit 130) after {:.2}s",
                start.elapsed().as_secs_f64()
            )),
            // The exec's status, relayed by the API server: its refusal to reach the kubelet, or the kubelet's
            // report of another ending.
            Some(s) => Err(format!(
                "the exec's status: {}{}",
                s.message.unwrap_or_default(),
                s.reason.map(|r| format!(" ({r})")).unwrap_or_default()
            )),
            None => Err("exec: the stream closed without a status".into()),
        }
    })
    .await
}

/// The kubelet's status for a process that ended by SIGINT: `NonZeroExitCode` with exit code 130.
fn killed_by_our_interrupt(s: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Status) -> bool {
    s.reason.as_deref() == Some("NonZeroExitCode")
        && s.details
            .iter()
            .flat_map(|d| d.causes.iter().flatten())
            .any(|c| c.reason.as_deref() == Some("ExitCode") && c.message.as_deref() == Some("130"))
}

/// `kubectl logs <pod>`: the container's log as the kubelet serves it (pause writes none: an empty log is
/// the kubelet's answer, which only a kubelet the API server reached gives). Ok: what was read.
pub async fn logs(client: &kube::Client, pod: &str) -> Result<String, String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    let start = Instant::now();
    bounded("logs", async {
        let lp = LogParams {
            container: Some(CONTAINER.into()),
            limit_bytes: Some(4096),
            ..LogParams::default()
        };
        let text = api.logs(pod, &lp).await.map_err(|e| said(&e))?;
        Ok(format!(
            "the kubelet served the container's log ({} bytes) after {:.2}s",
            text.len(),
            start.elapsed().as_secs_f64()
        ))
    })
    .await
}

/// `kubectl port-forward <pod> 80`, one connection: the API server upgrades only once the kubelet did, and the
/// kubelet dials the port inside the pod. Ok: the kubelet's word on that connection (bytes read, or why it could
/// not connect, such as `connection refused` where nothing listens, which still came from inside the pod).
pub async fn port_forward(client: &kube::Client, pod: &str) -> Result<String, String> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "default");
    bounded("port-forward", async {
        let mut pf = api.portforward(pod, &[PORT]).await.map_err(|e| said(&e))?;
        let mut error = Box::pin(pf.take_error(PORT).ok_or("port-forward: no error channel")?);
        let mut stream = pf.take_stream(PORT).ok_or("port-forward: no data stream")?;
        // The kubelet dials the pod's port when the first bytes come.
        let _ = stream.write_all(b"GET / HTTP/1.0\r\n\r\n").await;
        let mut buf = [0u8; 64];
        let kubelet_said = |e: Option<String>| match e {
            Some(e) => Ok(format!("the kubelet answered from the pod: {}", e.trim())),
            None => Err("port-forward: the stream ended without a word from the kubelet".to_string()),
        };
        let answer = tokio::select! {
            e = &mut error => kubelet_said(e),
            n = stream.read(&mut buf) => match n {
                Ok(n) if n > 0 => Ok(format!("{n} bytes from the pod's port {PORT}")),
                // The data stream ends before the kubelet's error arrives when it could not connect: wait for it.
                Ok(_) => match tokio::time::timeout(ERROR_AFTER_CLOSE, &mut error).await {
                    Ok(Some(e)) => kubelet_said(Some(e)),
                    _ => Ok(format!("the pod's port {PORT} accepted and closed the connection")),
                },
                Err(e) => Err(format!("port-forward: reading the pod's port {PORT}: {e}")),
            },
        };
        pf.abort();
        answer
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the kubelet's report of a SIGINT exit counts as our ^C; any other exit or refusal does not.
    #[test]
    fn an_interrupted_pause_is_the_kubelets_answer() {
        let status = |reason: &str, code: &str| {
            serde_json::from_value::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>(serde_json::json!({
                "status": "Failure", "reason": reason,
                "message": format!("command terminated with non-zero exit code: command terminated with exit code {code}"),
                "details": { "causes": [{ "reason": "ExitCode", "message": code }] }
            }))
            .unwrap()
        };
        assert!(killed_by_our_interrupt(&status("NonZeroExitCode", "130")));
        assert!(!killed_by_our_interrupt(&status("NonZeroExitCode", "1")));
        assert!(!killed_by_our_interrupt(&status("InternalError", "130")));
    }
}
