//! A node container: systemd as PID 1 in the node image, started through testcontainers with the flags that
//! replace `--privileged` on hosts without CAP_SYS_RESOURCE (the recipe is written up in fixtures/node-image/ and README.md), labelled with the
//! run id, removed when dropped.
use super::image::NodeImage;
use crate::docker::{self, ExecOutput, RunNetwork};
use crate::error::{Error, Result};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};
use testcontainers::bollard::models::DeviceMapping;
use testcontainers::bollard::Docker;
use testcontainers::core::CgroupnsMode;
use testcontainers::runners::AsyncRunner;
use testcontainers::CopyTargetOptions;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

/// A file placed in the container before it starts.
pub struct NodeFile {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// What to start.
pub struct NodeSpec<'a> {
    pub container_name: String,
    pub hostname: String,
    pub image: &'a NodeImage,
    pub network: &'a RunNetwork,
    pub run_id: &'a str,
    pub files: Vec<NodeFile>,
    /// Environment of the entrypoint (PID 1), e.g. the instance's DMI identity.
    pub env: Vec<(String, String)>,
}

pub struct NodeContainer {
    pub name: String,
    pub id: String,
    pub ip: Ipv4Addr,
    docker: Docker,
    container: Option<ContainerAsync<GenericImage>>,
}

impl NodeContainer {
    pub async fn start(docker: &Docker, spec: NodeSpec<'_>) -> Result<Self> {
        let name = spec.container_name.clone();
        let image = GenericImage::new(spec.image.repository(), spec.image.version());
        let mut request = image
            .with_container_name(&name)
            .with_hostname(&spec.hostname)
            .with_network(&spec.network.name)
            .with_labels(docker::run_labels(spec.run_id))
            .with_label("io.nodejoin.node", &name)
            .with_cap_add("ALL")
            .with_cap_drop("SYS_RESOURCE")
            .with_security_opt("seccomp=unconfined")
            .with_security_opt("apparmor=unconfined")
            .with_cgroupns_mode(CgroupnsMode::Private)
            .with_startup_timeout(Duration::from_secs(60))
            .with_host_config_modifier(|hc| {
                // `--security-opt systempaths=unconfined` of the docker CLI: nothing masked or read-only in /proc, /sys.
                hc.masked_paths = Some(vec![]);
                hc.readonly_paths = Some(vec![]);
                hc.device_cgroup_rules = Some(vec!["a *:* rwm".to_string()]);
                hc.devices = Some(vec![DeviceMapping {
                    path_on_host: Some("/dev/kmsg".into()),
                    path_in_container: Some("/dev/kmsg".into()),
                    cgroup_permissions: Some("rwm".into()),
                }]);
                hc.tmpfs = Some([("/run".to_string(), String::new()), ("/tmp".to_string(), String::new())].into());
                hc.binds
                    .get_or_insert_with(Vec::new)
                    .push("/lib/modules:/lib/modules:ro".to_string());
            });
        for (k, v) in spec.env {
            request = request.with_env_var(k, v);
        }
        for f in spec.files {
            request = request.with_copy_to(CopyTargetOptions::new(f.path).with_mode(f.mode), f.content);
        }
        let container = request
            .start()
            .await
            .map_err(|e| Error::node(&name, format!("container start: {e}")))?;
        let id = container.id().to_string();
        let ip = docker::container_ip(docker, &id, &spec.network.name).await?;
        Ok(Self {
            name,
            id,
            ip,
            docker: docker.clone(),
            container: Some(container),
        })
    }

    /// Waits until systemd has finished booting (`running` or `degraded`).
    pub async fn wait_systemd(&self, timeout: Duration) -> Result<Duration> {
        let start = Instant::now();
        // What systemd last said, and why the last probe got no answer (if it did not): the final probe is cut
        // short by the deadline, so its error alone would hide the state that explains the failure.
        let mut state: Option<String> = None;
        let mut probe_error: Option<String> = None;
        // Probes back off from 100 ms to 1 s: 50 nodes polling every 100 ms were 500 docker execs a second, which
        // starved the machine. (`is-system-running --wait` would need one exec, but it also waits for units the
        // harness itself starts later, such as cloud-init's.)
        let mut pause = Duration::from_millis(100);
        while start.elapsed() < timeout {
            // Each probe gets what is left of the deadline, so a hung exec cannot stretch it.
            let left = timeout.saturating_sub(start.elapsed());
            match self.exec_within(&["systemctl", "is-system-running"], &[], left).await {
                Ok(out) => {
                    let answer = out.stdout.trim().to_string();
                    if answer == "running" || answer == "degraded" {
                        return Ok(start.elapsed());
                    }
                    state = Some(answer);
                    probe_error = None;
                }
                Err(e) => probe_error = Some(e.to_string()),
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 3 / 2).min(Duration::from_secs(1));
        }
        let mut why = match state {
            Some(s) => format!("last state: {s}"),
            None => "systemd never answered".to_string(),
        };
        if let Some(e) = probe_error {
            why.push_str(&format!("; last probe: {e}"));
        }
        Err(Error::node(
            &self.name,
            format!(
                "systemd did not finish booting within {} ({why})",
                humantime::format_duration(timeout)
            ),
        ))
    }

    /// A short command (bounded by `deadline::NODE_EXEC`): probes, file reads, journals.
    pub async fn exec(&self, cmd: &[&str], env: &[String]) -> Result<ExecOutput> {
        self.exec_within(cmd, env, crate::deadline::NODE_EXEC).await
    }

    /// A command that may run as long as `deadline` (a bootstrap, cloud-init), then an `Error::Timeout`.
    pub async fn exec_within(&self, cmd: &[&str], env: &[String], deadline: Duration) -> Result<ExecOutput> {
        docker::exec(&self.docker, &self.id, &self.name, cmd, env, None, deadline).await
    }

    /// A file's content, or `None` when it cannot be read.
    pub async fn read_file(&self, path: &str) -> Option<String> {
        let out = self.exec(&["cat", path], &[]).await.ok()?;
        (out.exit_code == 0).then_some(out.stdout)
    }

    /// A file's bytes, through the Docker archive API (binary-safe, unlike `cat` through exec).
    pub async fn read_bytes(&self, path: &str) -> std::result::Result<Vec<u8>, String> {
        use futures::TryStreamExt;
        use std::io::Read;
        use testcontainers::bollard::query_parameters::DownloadFromContainerOptionsBuilder;
        let options = DownloadFromContainerOptionsBuilder::new().path(path).build();
        let download = self
            .docker
            .download_from_container(&self.id, Some(options))
            .try_collect();
        let chunks: Vec<_> = tokio::time::timeout(crate::deadline::NODE_EXEC, download)
            .await
            .map_err(|_| {
                format!(
                    "{path}: the download from {} did not finish within {}",
                    self.name,
                    humantime::format_duration(crate::deadline::NODE_EXEC)
                )
            })?
            .map_err(|e| format!("{path}: {e}"))?;
        let archive = chunks.concat();
        let mut tar = tar::Archive::new(&archive[..]);
        let mut entries = tar.entries().map_err(|e| format!("{path}: {e}"))?;
        let mut entry = entries
            .next()
            .ok_or_else(|| format!("{path}: empty archive"))?
            .map_err(|e| format!("{path}: {e}"))?;
        let mut data = Vec::new();
        entry.read_to_end(&mut data).map_err(|e| format!("{path}: {e}"))?;
        Ok(data)
    }

    /// The journal of a unit (or the whole journal for `None`).
    pub async fn journal(&self, unit: Option<&str>) -> String {
        let mut cmd = vec!["journalctl", "--no-pager", "-o", "short-precise"];
        if let Some(u) = unit {
            cmd.extend(["-u", u]);
        }
        self.exec(&cmd, &[])
            .await
            .map(|o| o.stdout)
            .unwrap_or_else(|e| format!("(journal unavailable: {e})"))
    }

    /// Removes the container now.
    pub async fn remove(mut self) {
        if let Some(c) = self.container.take() {
            if let Err(e) = c.rm().await {
                tracing::warn!(node = %self.name, "removing container: {e}");
            }
        }
    }
}
