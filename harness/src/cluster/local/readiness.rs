//! How the local provider's processes are waited for: etcd's and kube-apiserver's probes, with the probe's last
//! answer (and /readyz's failing checks) in a timeout's message, and kube-controller-manager's readiness checked
//! in the background while nodes boot.
use crate::error::{Error, Result};
use crate::pki::ClusterPki;
use crate::process::Supervised;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long kube-controller-manager has to get healthy, and then to sign a certificate.
pub(super) const KCM_READY_WITHIN: Duration = crate::deadline::CONTROL_PLANE_START;

/// Whether kube-controller-manager got healthy and signs certificates, checked in the background: nothing a
/// node does before its kubelet asks for a certificate needs it, so a scenario's bootstrap runs while it starts
/// (about 0.8 s of each control plane's start-up off a scenario's path). A failure reads as a failed component,
/// which ends a scenario's wait with the cause.
pub(super) struct KcmCheck {
    /// Why the check failed, once it has.
    failure: Arc<std::sync::Mutex<Option<String>>>,
    task: tokio::task::AbortHandle,
}

impl KcmCheck {
    pub(super) fn start(http: reqwest::Client, healthz: String, client: kube::Client, timeout: Duration) -> Self {
        let failure = Arc::new(std::sync::Mutex::new(None));
        let slot = failure.clone();
        let task = tokio::spawn(async move {
            let started = Instant::now();
            match kcm_ready(&http, &healthz, &client, timeout).await {
                Ok(()) => tracing::debug!(
                    "kube-controller-manager ready {:.2}s after its start",
                    started.elapsed().as_secs_f64()
                ),
                Err(e) => {
                    tracing::warn!("{e}");
                    if let Ok(mut f) = slot.lock() {
                        *f = Some(e);
                    }
                }
            }
        });
        Self {
            failure,
            task: task.abort_handle(),
        }
    }

    /// The check's failure, if it failed.
    pub(super) fn failure(&self) -> Option<String> {
        self.failure.lock().ok()?.clone()
    }
}

impl Drop for KcmCheck {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits for kcm's /healthz, then for it to sign a certificate (its CSR signer is what a join needs). The error
/// names the component at fault: an API server that stops answering mid-check is not kcm's failure.
async fn kcm_ready(
    http: &reqwest::Client,
    healthz: &str,
    client: &kube::Client,
    timeout: Duration,
) -> std::result::Result<(), String> {
    // No process to watch here: the caller's `failed_component` reports kcm exiting.
    wait_http_ok("kube-controller-manager", &mut [], timeout, http, healthz)
        .await
        .map_err(|_| {
            format!(
                "kube-controller-manager was not healthy {}s after its start (see kube-controller-manager.log)",
                timeout.as_secs()
            )
        })?;
    match crate::cluster::objects::wait_for_csr_signing(client, timeout).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(format!(
            "kube-controller-manager does not sign certificates {}s after it got healthy (see kube-controller-manager.log)",
            timeout.as_secs()
        )),
        Err(e) => Err(signing_check_failed(&e)),
    }
}

/// Why the signing check could not finish: the API server's answer, or its silence (no answer at all is the
/// API server's failure, which the verdict must name rather than kcm).
fn signing_check_failed(e: &Error) -> String {
    match e {
        Error::Kube(kube::Error::Api(status)) => {
            format!("kube-controller-manager could not be checked for signing certificates: the API server answered {status}")
        }
        Error::Kube(other) => format!(
            "kube-apiserver did not answer while kube-controller-manager's certificate signing was checked ({other})"
        ),
        other => format!("kube-controller-manager could not be checked for signing certificates: {other}"),
    }
}

pub(super) fn cp_err(component: &str, message: impl Into<String>) -> Error {
    Error::ControlPlane {
        component: component.to_string(),
        message: message.into(),
    }
}

/// etcd's probe: trusting etcd's CA only and presenting the API server's etcd client certificate.
pub(super) fn etcd_client(pki: &ClusterPki) -> Result<reqwest::Client> {
    let identity = reqwest::Identity::from_pem(
        format!(
            "{}{}",
            pki.apiserver_etcd_client.cert_pem, pki.apiserver_etcd_client.key_pem
        )
        .as_bytes(),
    )
    .map_err(|e| cp_err("etcd", format!("client identity: {e}")))?;
    reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .add_root_certificate(
            reqwest::Certificate::from_pem(pki.etcd_ca.0.cert_pem.as_bytes())
                .map_err(|e| cp_err("etcd", e.to_string()))?,
        )
        .tls_built_in_root_certs(false)
        .identity(identity)
        .build()
        .map_err(|e| cp_err("etcd", e.to_string()))
}

/// An HTTP client for readiness probes: trusting `ca`, or (without one) accepting any certificate, which is
/// only used for kcm's self-signed health port.
pub(super) fn probe_client(component: &str, ca: Option<&str>) -> Result<reqwest::Client> {
    let builder = reqwest::Client::builder().timeout(Duration::from_secs(2));
    let builder = match ca {
        Some(pem) => builder.add_root_certificate(
            reqwest::Certificate::from_pem(pem.as_bytes()).map_err(|e| cp_err(component, e.to_string()))?,
        ),
        None => builder.danger_accept_invalid_certs(true),
    };
    builder.build().map_err(|e| cp_err(component, e.to_string()))
}

/// Waits until `url` answers 2xx.
pub(super) async fn wait_http_ok(
    component: &str,
    processes: &mut [Supervised],
    timeout: Duration,
    client: &reqwest::Client,
    url: &str,
) -> Result<()> {
    wait_ready(component, processes, timeout, || async {
        match client.get(url).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            Ok(r) => {
                let status = r.status();
                let body = r.text().await.unwrap_or_default();
                Err(format!("{url} answered {status}{}", failing_checks(&body)))
            }
            Err(e) => {
                // reqwest's own message names the URL; the cause (refused, TLS, timeout) is in its sources.
                let mut message = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(cause) = source {
                    message = format!("{message}: {cause}");
                    source = cause.source();
                }
                Err(message)
            }
        }
    })
    .await
}

/// The checks a /readyz or /healthz body lists as failing (`[-]poststarthook/rbac/bootstrap-roles failed: …`),
/// as `: failing a, b`; empty when it lists none.
fn failing_checks(body: &str) -> String {
    let failing: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("[-]"))
        .map(|l| l.split_once(' ').map_or(l, |(name, _)| name))
        .collect();
    if failing.is_empty() {
        String::new()
    } else {
        format!(": failing {}", failing.join(", "))
    }
}

/// Polls `probe` until it succeeds; fails early (with the log tail) when the process exits, and at the deadline
/// with the probe's last answer and the log tail.
async fn wait_ready<F, Fut>(component: &str, processes: &mut [Supervised], timeout: Duration, probe: F) -> Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        let last = match probe().await {
            Ok(()) => return Ok(()),
            Err(answer) => answer,
        };
        if let Some(p) = processes.iter_mut().find(|p| p.name == component) {
            if let Some(status) = p.exited() {
                return Err(cp_err(
                    component,
                    format!(
                        "exited ({status}) before it was ready; last log lines:\n{}",
                        p.log_tail(15)
                    ),
                ));
            }
        }
        if Instant::now() > deadline {
            let tail = processes
                .iter()
                .find(|p| p.name == component)
                .map(|p| p.log_tail(15))
                .unwrap_or_default();
            return Err(cp_err(
                component,
                format!(
                    "not ready after {} (last probe: {last}); last log lines:\n{tail}",
                    humantime::format_duration(timeout)
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readyz_bodies_name_their_failing_checks() {
        let body = "[+]ping ok\n[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n\
                    [-]etcd failed: reason withheld\nreadyz check failed\n";
        assert_eq!(
            failing_checks(body),
            ": failing poststarthook/rbac/bootstrap-roles, etcd"
        );
        assert_eq!(failing_checks("ok"), "");
    }

    #[tokio::test]
    async fn a_controller_manager_that_never_gets_healthy_reads_as_failed() {
        let http = probe_client("kube-controller-manager", None).unwrap();
        let client = kube::Client::try_from(kube::Config::new("https://127.0.0.1:1".parse().unwrap())).unwrap();
        let check = KcmCheck::start(
            http,
            "https://127.0.0.1:1/healthz".into(),
            client,
            Duration::from_millis(300),
        );
        assert_eq!(check.failure(), None, "still being checked is not a failure");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let failure = check.failure().unwrap_or_default();
        assert!(failure.contains("kube-controller-manager was not healthy"), "{failure}");
    }

    #[tokio::test]
    async fn an_api_server_that_does_not_answer_the_signing_check_is_named() {
        let client = kube::Client::try_from(kube::Config::new("https://127.0.0.1:1".parse().unwrap())).unwrap();
        let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
        let e = Error::from(api.get("n").await.unwrap_err());
        let why = signing_check_failed(&e);
        assert!(why.starts_with("kube-apiserver did not answer"), "{why}");
        let status = kube::core::Status::failure("forbidden", "Forbidden").with_code(403);
        let why = signing_check_failed(&Error::Kube(kube::Error::Api(status.into())));
        assert!(why.contains("kube-controller-manager could not be checked"), "{why}");
        assert!(why.contains("403") || why.contains("forbidden"), "{why}");
    }
}
