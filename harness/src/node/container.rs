//! A node container: systemd as PID 1 in the node image, started through testcontainers with the flags that
//! replace `--privileged` on hosts without CAP_SYS_RESOURCE (the recipe is written up in fixtures/node-image/ and the book), labelled with the
//! run id, removed when dropped.
use super::image::NodeImage;
use super::privileges;
use super::seed::seed_archive;
pub use super::seed::NodeFile;
use crate::docker::Docker;
use crate::docker::{self, ExecOutput, RunNetwork};
use crate::error::{Error, Result};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};
use testcontainers::core::CgroupnsMode;
use testcontainers::runners::AsyncRunner;
use testcontainers::CopyTargetOptions;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};

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
    /// A host directory for its journal, bound at [`super::journal::MOUNT`].
    pub journal: Option<super::journal::HostJournal>,
}

/// Where the archive of the harness's files goes; the node image's entrypoint unpacks it over `/`.
const SEED_PATH: &str = "/etc/nodejoin/seed.tar";
/// The label by which an image says its entrypoint unpacks [`SEED_PATH`] (ours sets it, images built on ours
/// inherit it).
const SEED_LABEL: &str = "io.nodejoin.entrypoint-unpacks-seed";
/// How long past its own deadline the in-node systemd probe may take before the exec is abandoned.
const SYSTEMD_GRACE: Duration = Duration::from_secs(10);
/// Our entrypoint: an image built on ours that replaces it gets its files one by one.
const ENTRYPOINT: &str = "/usr/local/bin/nodejoin-entrypoint";

/// Whether `image` starts from our entrypoint and that entrypoint unpacks a seed archive.
async fn unpacks_seed(docker: &Docker, image: &str) -> bool {
    let Ok(inspected) = docker.inspect_image(image).await else {
        return false;
    };
    let Some(config) = inspected.config else {
        return false;
    };
    let labelled = config
        .labels
        .as_ref()
        .is_some_and(|l| l.get(SEED_LABEL).map(String::as_str) == Some("1"));
    labelled && config.entrypoint.as_deref() == Some(&[ENTRYPOINT.to_string()][..])
}

/// What runs the node: a container (the default runtime) or a VM (`runtime: vm`).
enum Backend {
    Container(Option<Box<ContainerAsync<GenericImage>>>),
    Vm(Box<super::vm::VmNode>),
}

/// A running node, whatever runs it; the pipeline asks the same of both.
pub struct NodeContainer {
    pub name: String,
    pub id: String,
    pub ip: Ipv4Addr,
    /// The MAC address of its interface on the run network (IMDS reports it, as EC2 reports the ENI's).
    pub mac: Option<String>,
    /// The image it runs (`repository:tag`).
    pub image: String,
    docker: Docker,
    backend: Backend,
    /// Dropped after the container (field order).
    journal: Option<super::journal::HostJournal>,
}

impl NodeContainer {
    pub async fn start(docker: &Docker, spec: NodeSpec<'_>) -> Result<Self> {
        let name = spec.container_name.clone();
        let image = GenericImage::new(spec.image.repository(), spec.image.version());
        let journal_bind = spec
            .journal
            .as_ref()
            .map(|j| format!("{}:{}", j.dir().display(), super::journal::MOUNT));
        let mut request = image
            .with_container_name(&name)
            .with_hostname(&spec.hostname)
            .with_network(&spec.network.name)
            .with_labels(docker::run_labels(spec.run_id))
            .with_label("io.nodejoin.node", &name)
            .with_cap_add("ALL")
            // A profile of what no node needs (node::privileges): Docker's default would refuse what systemd,
            // containerd and runc do (mount, namespaces).
            .with_security_opt(format!("seccomp={}", privileges::seccomp_profile()))
            .with_security_opt("apparmor=unconfined")
            .with_cgroupns_mode(CgroupnsMode::Private)
            .with_startup_timeout(Duration::from_secs(60))
            .with_host_config_modifier(move |hc| {
                // No more than a node needs (node::privileges): Docker's masks, /proc/sys read-only but for net/,
                // Docker's device rules plus the kernel log.
                privileges::restrict(hc);
                hc.tmpfs = Some([("/run".to_string(), String::new()), ("/tmp".to_string(), String::new())].into());
                hc.binds
                    .get_or_insert_with(Vec::new)
                    .push("/lib/modules:/lib/modules:ro".to_string());
                if let Some(dir) = &journal_bind {
                    hc.binds.get_or_insert_with(Vec::new).push(dir.clone());
                }
            });
        for cap in privileges::dropped_capabilities() {
            request = request.with_cap_drop(cap);
        }
        for (k, v) in spec.env {
            request = request.with_env_var(k, v);
        }
        if unpacks_seed(docker, &spec.image.tag).await {
            // One upload for all the files, unpacked by the entrypoint before systemd starts: each upload costs
            // the engine about 0.14 s of CPU, a third of a node's start with five files.
            let seed = seed_archive(&spec.files).map_err(|e| Error::node(&name, format!("seed archive: {e}")))?;
            request = request.with_copy_to(CopyTargetOptions::new(SEED_PATH).with_mode(0o600), seed);
        } else {
            for f in spec.files {
                request = request.with_copy_to(CopyTargetOptions::new(f.path).with_mode(f.mode), f.content);
            }
        }
        let container = request
            .start()
            .await
            .map_err(|e| Error::node(&name, format!("container start: {e}")))?;
        let id = container.id().to_string();
        let (ip, mac) = docker::container_address(docker, &id, &spec.network.name).await?;
        Ok(Self {
            name,
            id,
            ip,
            mac,
            image: format!("{}:{}", spec.image.repository(), spec.image.version()),
            docker: docker.clone(),
            backend: Backend::Container(Some(Box::new(container))),
            journal: spec.journal,
        })
    }

    /// A VM node (made; [`NodeContainer::power_on`] starts it), as the pipeline sees nodes; `image` names what
    /// it boots (the node image its disk was made from, or the user's disk).
    pub fn from_vm(docker: &Docker, vm: super::vm::VmNode, image: String) -> Self {
        Self {
            name: vm.name.clone(),
            id: vm.name.clone(),
            ip: vm.ip,
            mac: Some(vm.mac.clone()),
            image,
            docker: docker.clone(),
            backend: Backend::Vm(Box::new(vm)),
            journal: None,
        }
    }

    /// A machine's serial console as far as it is kept; nothing for a container.
    pub fn console_text(&self) -> String {
        match &self.backend {
            Backend::Vm(vm) => vm.console_text(),
            Backend::Container(_) => String::new(),
        }
    }

    /// Whether the harness can see inside the node (a container, a machine with a guest agent): its files, its
    /// journal, the reports of what ran in it.
    pub fn sees_inside(&self) -> bool {
        match &self.backend {
            Backend::Vm(vm) => vm.sees_inside(),
            Backend::Container(_) => true,
        }
    }

    /// Whether the node is a machine (runtime `vm`).
    pub fn is_vm(&self) -> bool {
        matches!(self.backend, Backend::Vm(_))
    }

    /// Starts a machine made but not started; nothing for a container (started when made).
    pub fn power_on(&self) -> Result<()> {
        match &self.backend {
            Backend::Vm(vm) => vm.power_on(),
            Backend::Container(_) => Ok(()),
        }
    }

    /// Whether the node runs (a machine not yet started does not).
    pub fn powered(&self) -> bool {
        match &self.backend {
            Backend::Vm(vm) => vm.powered(),
            Backend::Container(_) => true,
        }
    }

    /// What runs the node: `container`, or `vm (kvm)` / `vm (tcg)` with the accelerator.
    pub fn runtime(&self) -> String {
        match &self.backend {
            Backend::Container(_) => "container".into(),
            Backend::Vm(vm) => format!("vm ({})", vm.accel.name()),
        }
    }

    /// Waits until systemd has finished booting (`running` or `degraded`).
    pub async fn wait_systemd(&self, timeout: Duration) -> Result<Duration> {
        let start = Instant::now();
        if let Backend::Vm(vm) = &self.backend {
            // A machine is up once its systemd has started the agent. Its boot transaction goes on, as on an
            // instance: cloud-init and nodeadm are in it, so "running" would mean the bootstrap is over.
            return vm.wait_agent(timeout).await.map_err(|why| {
                Error::node(
                    &self.name,
                    format!(
                        "the machine did not boot within {} ({why})",
                        humantime::format_duration(timeout)
                    ),
                )
            });
        }
        // One exec that polls inside the node, rather than one exec per look: a `docker exec` costs the engine
        // about 0.1 s of CPU and a boot took five or six of them, where `systemctl` in a loop costs milliseconds.
        // (`is-system-running --wait` would do, but it also waits for units the harness itself starts later,
        // such as cloud-init's.) The loop keeps its own deadline so it can say the last state it saw.
        let script = format!(
            "end=$(( $(date +%s) + {secs} )); while :; do s=$(systemctl is-system-running 2>&1); \
             case \"$s\" in running|degraded) exit 0;; esac; \
             [ \"$(date +%s)\" -ge \"$end\" ] && break; sleep 0.05; done; echo \"$s\"; exit 1",
            secs = timeout.as_secs().max(1)
        );
        // The exec's own bound, a little past the loop's, catches an engine that stops answering.
        let why = match self
            .exec_within(&["sh", "-c", &script], &[], timeout + SYSTEMD_GRACE)
            .await
        {
            Ok(out) if out.exit_code == 0 => return Ok(start.elapsed()),
            Ok(out) => match out.stdout.trim() {
                "" => format!("systemd never answered: {}", out.stderr.trim()),
                state => format!("last state: {state}"),
            },
            Err(e) => format!("the probe got no answer: {e}"),
        };
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
        match &self.backend {
            Backend::Container(_) => docker::exec(&self.docker, &self.id, &self.name, cmd, env, None, deadline).await,
            Backend::Vm(vm) => vm.exec_within(cmd, env, deadline).await,
        }
    }

    /// A file's content, or `None` when it cannot be read.
    pub async fn read_file(&self, path: &str) -> Option<String> {
        let out = self.exec(&["cat", path], &[]).await.ok()?;
        (out.exit_code == 0).then_some(out.stdout)
    }

    /// A file's bytes, through the Docker archive API (binary-safe, unlike `cat` through exec).
    pub async fn read_bytes(&self, path: &str) -> std::result::Result<Vec<u8>, String> {
        use futures::TryStreamExt;
        if let Backend::Vm(vm) = &self.backend {
            return vm.read_bytes(path).await;
        }
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

    /// The host directory its journal is kept in, which outlives the container ([`super::journal`]).
    pub fn journal_on_host(&self) -> Option<&super::journal::HostJournal> {
        self.journal.as_ref()
    }

    /// A machine observed from outside only: shut down, its logs read from its disk
    /// ([`super::vm::VmNode::logs_after_shutdown`]), with the `files` asked for; `None` for a node the harness
    /// reads inside.
    pub async fn logs_after_shutdown(
        &self,
        files: &[String],
    ) -> Option<std::result::Result<(String, super::vm::reader::DiskLogs), String>> {
        match &self.backend {
            Backend::Vm(vm) if !vm.sees_inside() => Some(vm.logs_after_shutdown(&self.docker, files).await),
            _ => None,
        }
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

    /// The last `lines` lines of the node's console (systemd's, as `docker logs` shows it); it outlives the
    /// container, unlike the journal.
    pub async fn console(&self, lines: usize) -> String {
        match &self.backend {
            Backend::Container(_) => docker::logs(&self.docker, &self.id, lines).await,
            Backend::Vm(vm) => vm.console(lines),
        }
    }

    /// The CPU time the node has used since it started (systemd, containerd, the kubelet, the bootstrap, pods).
    pub async fn cpu_time(&self) -> Option<Duration> {
        match &self.backend {
            Backend::Container(_) => docker::cpu_time(&self.docker, &self.id).await,
            Backend::Vm(vm) => vm.cpu_time(),
        }
    }

    /// Why the container is no longer running, if it is not: its exit code, an OOM kill, the engine's error,
    /// and the last lines it printed (systemd's console). `None` while it runs, or when the engine cannot say.
    pub async fn exited(&self) -> Option<String> {
        if let Backend::Vm(vm) = &self.backend {
            return vm.exited();
        }
        let state = self.docker.inspect_container(&self.id, None).await.ok()?.state?;
        if state.running == Some(true) {
            return None;
        }
        let why = format!(
            "the node container is {}",
            docker::stopped_state(&self.docker, &self.id, state).await
        );
        Some(why)
    }

    /// Removes the container now.
    pub async fn remove(self) {
        match self.backend {
            Backend::Container(Some(c)) => {
                if let Err(e) = c.rm().await {
                    tracing::warn!(node = %self.name, "removing container: {e}");
                }
            }
            Backend::Container(None) => {}
            Backend::Vm(vm) => vm.remove().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn seed_archive_holds_each_file_at_its_path_with_its_mode_owned_by_root() {
        let files = vec![
            NodeFile {
                path: "/etc/eks/bootstrap.sh".into(),
                content: b"#!/bin/sh\n".to_vec(),
                mode: 0o755,
            },
            NodeFile {
                path: "/etc/containerd/certs.d/602401143452.dkr.ecr.us-west-2.amazonaws.com/hosts.toml".into(),
                content: b"server = 'x'\n".to_vec(),
                mode: 0o644,
            },
        ];
        let bytes = seed_archive(&files).expect("archive");
        let mut archive = tar::Archive::new(&bytes[..]);
        let mut found = Vec::new();
        for entry in archive.entries().expect("entries") {
            let mut entry = entry.expect("entry");
            let header = entry.header().clone();
            let mut content = Vec::new();
            entry.read_to_end(&mut content).expect("read");
            found.push((
                entry.path().expect("path").display().to_string(),
                header.mode().expect("mode"),
                header.uid().expect("uid"),
                content,
            ));
        }
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].0, "etc/eks/bootstrap.sh");
        assert_eq!((found[0].1, found[0].2), (0o755, 0));
        assert_eq!(found[0].3, b"#!/bin/sh\n");
        assert!(found[1].0.ends_with("/hosts.toml") && found[1].0.starts_with("etc/containerd/certs.d/"));
        assert_eq!(found[1].1, 0o644);
    }
}
