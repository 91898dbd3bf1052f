//! What the container-based providers (k3s, kind) share: a control plane reached through a kubeconfig Docker
//! mapped to the host, nodes that reach it by container name, client certificates from its own CA, and the
//! run directory with the webhook config and audit policy mounted into it. Each provider supplies only how its
//! containers are watched and removed.
use crate::cluster::{ControlPlane, ProviderContext};
use crate::error::{Error, Result};
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The provider-specific part: is it still running, and how it goes away.
pub trait Containers: Send + Sync {
    /// Why the control plane's container is not running, or `None` while it is.
    fn stopped(&self) -> Option<String>;
    /// Saves its logs into `dir` and removes it.
    fn remove(self: Box<Self>, dir: PathBuf) -> BoxFuture<'static, ()>;
}

pub struct ContainerControlPlane {
    /// The API server as nodes reach it (by container name on the run network).
    pub endpoint: String,
    /// The API server as the harness reaches it (the mapped host port).
    pub admin_server: String,
    pub ca_pem: String,
    /// The CA the API server trusts for client certificates.
    pub client_ca: crate::pki::Ca,
    pub client: kube::Client,
    pub kubeconfig: PathBuf,
    pub dir: PathBuf,
    pub timings: Vec<(String, Duration)>,
    pub containers: Option<Box<dyn Containers>>,
}

/// A started control plane before the harness has connected to it.
pub struct Started {
    pub component: &'static str,
    pub endpoint: String,
    pub admin_server: String,
    pub ca_pem: String,
    pub client_ca: crate::pki::Ca,
    /// The admin kubeconfig, pointed at `admin_server`.
    pub kubeconfig: PathBuf,
    pub dir: PathBuf,
    pub timings: Vec<(String, Duration)>,
    pub containers: Box<dyn Containers>,
}

impl Started {
    /// Connects, waits until the controller manager signs CSRs, and applies the node bootstrap RBAC; on failure
    /// the containers are removed.
    pub async fn connect(self) -> Result<ContainerControlPlane> {
        let Started {
            component,
            endpoint,
            admin_server,
            ca_pem,
            client_ca,
            kubeconfig,
            dir,
            mut timings,
            containers,
        } = self;
        let t0 = std::time::Instant::now();
        let ready = async {
            let client = crate::cluster::kubeconfig::client_from_kubeconfig(&kubeconfig).await?;
            if !crate::cluster::objects::wait_for_csr_signing(&client, Duration::from_secs(60)).await? {
                return Err(Error::ControlPlane {
                    component: component.into(),
                    message: "its controller manager signed no CSR within 60s".into(),
                });
            }
            crate::cluster::objects::apply_node_bootstrap_rbac(&client).await?;
            Ok(client)
        }
        .await;
        let client = match ready {
            Ok(c) => c,
            Err(e) => {
                containers.remove(dir).await;
                return Err(e);
            }
        };
        timings.push(("CSR signing + RBAC".into(), t0.elapsed()));
        Ok(ContainerControlPlane {
            endpoint,
            admin_server,
            ca_pem,
            client_ca,
            client,
            kubeconfig,
            dir,
            timings,
            containers: Some(containers),
        })
    }
}

/// A provider's `create`: its start, boxed as the control plane every provider returns.
pub fn boxed<'a>(
    start: impl std::future::Future<Output = Result<ContainerControlPlane>> + Send + 'a,
) -> BoxFuture<'a, Result<Box<dyn ControlPlane>>> {
    Box::pin(async move { Ok(Box::new(start.await?) as Box<dyn ControlPlane>) })
}

/// Writes the audit policy and the token webhook's kubeconfig into the control plane's directory (mounted into
/// the container at `/nodejoin`).
pub fn prepare_dir(ctx: &ProviderContext<'_>) -> Result<PathBuf> {
    let dir = ctx.dir.clone();
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let policy = dir.join("audit-policy.yaml");
    std::fs::write(&policy, crate::cluster::common::apiserver::AUDIT_POLICY).map_err(|e| Error::io(&policy, e))?;
    if let Some(w) = &ctx.token_webhook {
        crate::cluster::common::apiserver::write_webhook_config(&dir, w)?;
    }
    Ok(dir)
}

impl ControlPlane for ContainerControlPlane {
    fn endpoint(&self) -> &str {
        &self.endpoint
    }
    fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
    fn client(&self) -> kube::Client {
        self.client.clone()
    }
    fn client_as<'a>(&'a self, user: &'a str, groups: &'a [&'a str]) -> BoxFuture<'a, Result<kube::Client>> {
        Box::pin(async move {
            crate::cluster::client_with_cert(
                &self.client_ca,
                &self.admin_server,
                &self.ca_pem,
                &self.dir,
                user,
                groups,
            )
            .await
        })
    }
    fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }
    fn logs_dir(&self) -> &Path {
        &self.dir
    }
    fn timings(&self) -> &[(String, Duration)] {
        &self.timings
    }
    fn failed_component(&mut self) -> Option<String> {
        self.containers.as_ref().and_then(|c| c.stopped())
    }
    fn memory(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    fn stop(mut self: Box<Self>) -> BoxFuture<'static, ()> {
        let containers = self.containers.take();
        let dir = self.dir.clone();
        Box::pin(async move {
            if let Some(c) = containers {
                c.remove(dir).await;
            }
        })
    }
}
