//! A node container: systemd as PID 1 in the node image, started through testcontainers with the flags that
//! replace `--privileged` on hosts without CAP_SYS_RESOURCE (the recipe is written up in fixtures/node-image/ and the book), labelled with the
//! run id, removed when dropped.
use super::{Capabilities, Identity, Machine, NodeMachine, CONTAINER};
use crate::docker::Docker;
use crate::docker::{self, ExecOutput, RunNetwork};
use crate::error::{Error, Result};
use crate::node::image::NodeImage;
use crate::node::privileges;
use crate::node::seed::seed_archive;
pub use crate::node::seed::NodeFile;
use futures::future::BoxFuture;
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
    /// A host directory for its journal, bound at [`crate::node::journal::MOUNT`].
    pub journal: Option<crate::node::journal::HostJournal>,
    /// `/var` kept across a restart as an instance's disk is (`after: reboot`), instead of the entrypoint's tmpfs,
    /// which a restart empties ([`crate::node::kept_var`]).
    pub kept_var: Option<crate::node::kept_var::KeptVar>,
}

/// Where the archive of the harness's files goes; the node image's entrypoint unpacks it over `/`.
const SEED_PATH: &str = "/etc/nodejoin/seed.tar";
/// The label by which an image says its entrypoint unpacks [`SEED_PATH`] (ours sets it, images built on ours
/// inherit it).
const SEED_LABEL: &str = "io.nodejoin.entrypoint-unpacks-seed";
/// How long past its own deadline the in-node systemd probe may take before the exec is abandoned.
const SYSTEMD_GRACE: Duration = Duration::from_secs(10);
/// How long systemd may take to shut the node down at a restart before the engine kills it.
const RESTART_STOP_WITHIN: Duration = Duration::from_secs(30);
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

/// A node container: removed when dropped (testcontainers' guard), or now by [`Machine::remove`].
struct ContainerMachine {
    docker: Docker,
    id: String,
    name: String,
    /// The run network, where its address must stay the same across a restart.
    network: String,
    ip: std::net::Ipv4Addr,
    mac: Option<String>,
    container: Box<ContainerAsync<GenericImage>>,
    /// Its cgroup on the host (`cpuacct`'s on cgroup v1), where its units' CPU is read ([`crate::node::cpu`]).
    cgroup: Option<std::path::PathBuf>,
    /// Dropped after the container (field order).
    _kept_var: Option<crate::node::kept_var::KeptVar>,
}

/// Starts a node container.
pub async fn start(docker: &Docker, spec: NodeSpec<'_>) -> Result<NodeMachine> {
    let name = spec.container_name.clone();
    let image = GenericImage::new(spec.image.repository(), spec.image.version());
    let journal_bind = spec
        .journal
        .as_ref()
        .map(|j| format!("{}:{}", j.dir().display(), crate::node::journal::MOUNT));
    let kept_bind = spec.kept_var.as_ref().map(|k| k.bind());
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
            if let Some(bind) = &kept_bind {
                hc.binds.get_or_insert_with(Vec::new).push(bind.clone());
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
    let cgroup = docker::init_pid(docker, &id)
        .await
        .and_then(|pid| crate::node::cpu::container_root(pid, &id));
    let machine = ContainerMachine {
        docker: docker.clone(),
        id: id.clone(),
        name: name.clone(),
        network: spec.network.name.clone(),
        ip,
        mac: mac.clone(),
        container: Box::new(container),
        cgroup,
        _kept_var: spec.kept_var,
    };
    Ok(NodeMachine::new(
        Identity {
            name,
            id,
            ip,
            mac,
            image: format!("{}:{}", spec.image.repository(), spec.image.version()),
        },
        Capabilities::of(&CONTAINER, false),
        docker,
        Box::new(machine),
        spec.journal,
    ))
}

impl ContainerMachine {
    /// Runs `cmd` in the node, in the cgroup of nodejoin's own work ([`crate::node::cpu::EXEC_CGROUP`]).
    async fn exec(&self, cmd: &[&str], env: &[String], deadline: Duration) -> Result<ExecOutput> {
        let run = crate::node::cpu::exec_wrapper(crate::node::cpu::EXEC_CGROUP, cmd);
        let exec = docker::exec_unbounded(&self.docker, &self.id, &run, env, None);
        crate::deadline::within(docker::exec_what(cmd, &self.name), deadline, exec).await
    }

    /// Waits until systemd has finished booting (`running` or `degraded`).
    async fn wait_systemd(&self, timeout: Duration) -> std::result::Result<Duration, String> {
        let start = Instant::now();
        // One exec that polls inside the node, rather than one exec per look: a `docker exec` costs the engine
        // about 0.1 s of CPU and a boot took five or six of them, where `systemctl` in a loop costs milliseconds.
        // (`is-system-running --wait` would do, but it also waits for units the harness itself starts later,
        // such as cloud-init's.) The loop keeps its own deadline so it can say the last state it saw.
        // Every 0.1 s, its clock read by the shell itself (/proc/uptime): each look costs two processes in the
        // node (systemctl, sleep), which are nodejoin's share of the node's CPU.
        let script = format!(
            "read t _ < /proc/uptime; end=$(( ${{t%.*}} + {secs} )); while :; do s=$(systemctl is-system-running 2>&1); \
             case \"$s\" in running|degraded) exit 0;; esac; \
             read t _ < /proc/uptime; [ \"${{t%.*}}\" -ge \"$end\" ] && break; sleep 0.1; done; echo \"$s\"; exit 1",
            secs = timeout.as_secs().max(1)
        );
        // The exec's own bound, a little past the loop's, catches an engine that stops answering.
        let why = match self.exec(&["sh", "-c", &script], &[], timeout + SYSTEMD_GRACE).await {
            Ok(out) if out.exit_code == 0 => return Ok(start.elapsed()),
            Ok(out) => match out.stdout.trim() {
                "" => format!("systemd never answered: {}", out.stderr.trim()),
                state => format!("last state: {state}"),
            },
            Err(e) => format!("the probe got no answer: {e}"),
        };
        Err(format!(
            "systemd did not finish booting within {} ({why})",
            humantime::format_duration(timeout)
        ))
    }

    /// Restarts the container (systemd stops on the image's stop signal, as at an instance's shutdown): its
    /// filesystem kept, `/run` and `/tmp` (tmpfs) empty again, at the address it had ([`docker::restart_at`]).
    /// An engine that gives it another all the same has made it something an instance never is: that is an
    /// error, not a reboot.
    async fn restart(&self) -> Result<()> {
        docker::restart_at(
            &self.docker,
            &self.id,
            &self.network,
            self.ip,
            self.mac.as_deref(),
            RESTART_STOP_WITHIN,
        )
        .await
        .map_err(|e| Error::node(&self.name, format!("restarting the node container: {e}")))?;
        let (ip, _) = docker::container_address(&self.docker, &self.id, &self.network).await?;
        if ip != self.ip {
            return Err(Error::node(
                &self.name,
                format!(
                    "the engine gave the restarted node container another address ({ip}, was {}): an instance keeps \
                     its private IP across a reboot",
                    self.ip
                ),
            ));
        }
        Ok(())
    }

    /// A file's bytes, through the Docker archive API.
    async fn download(&self, path: &str) -> std::result::Result<Vec<u8>, String> {
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

    /// Why the container is no longer running, if it is not: its exit code, an OOM kill, the engine's error,
    /// and the last lines it printed. `None` while it runs, or when the engine cannot say.
    async fn stopped(&self) -> Option<String> {
        let state = self.docker.inspect_container(&self.id, None).await.ok()?.state?;
        if state.running == Some(true) {
            return None;
        }
        Some(format!(
            "the node container is {}",
            docker::stopped_state(&self.docker, &self.id, state).await
        ))
    }
}

impl Machine for ContainerMachine {
    fn label(&self) -> String {
        CONTAINER.name.into()
    }

    fn power_on(&self) -> Result<()> {
        Ok(())
    }

    fn powered(&self) -> bool {
        true
    }

    fn wait_booted(&self, timeout: Duration) -> BoxFuture<'_, std::result::Result<Duration, String>> {
        Box::pin(self.wait_systemd(timeout))
    }

    fn exec_within<'a>(
        &'a self,
        cmd: &'a [&'a str],
        env: &'a [String],
        deadline: Duration,
    ) -> BoxFuture<'a, Result<ExecOutput>> {
        Box::pin(self.exec(cmd, env, deadline))
    }

    fn read_bytes<'a>(&'a self, path: &'a str) -> BoxFuture<'a, std::result::Result<Vec<u8>, String>> {
        Box::pin(self.download(path))
    }

    fn console_text(&self) -> String {
        String::new()
    }

    fn console(&self, lines: usize) -> BoxFuture<'_, String> {
        Box::pin(docker::logs(&self.docker, &self.id, lines))
    }

    fn cpu_time(&self) -> BoxFuture<'_, Option<Duration>> {
        Box::pin(docker::cpu_time(&self.docker, &self.id))
    }

    fn cpu_reading(&self) -> BoxFuture<'_, Option<crate::node::cpu::Reading>> {
        Box::pin(std::future::ready(
            self.cgroup.as_deref().and_then(crate::node::cpu::Reading::read),
        ))
    }

    fn exited(&self) -> BoxFuture<'_, Option<String>> {
        Box::pin(self.stopped())
    }

    fn logs_after_shutdown<'a>(
        &'a self,
        _docker: &'a Docker,
        _files: &'a [String],
    ) -> BoxFuture<'a, Option<std::result::Result<(String, crate::node::vm::reader::DiskLogs), String>>> {
        Box::pin(std::future::ready(None))
    }

    fn reboot(&self) -> BoxFuture<'_, Result<()>> {
        Box::pin(self.restart())
    }

    /// The image's stop signal (systemd's shutdown), then KILL past [`RESTART_STOP_WITHIN`].
    fn shut_down(&self) -> BoxFuture<'_, Result<String>> {
        Box::pin(async move {
            use testcontainers::bollard::query_parameters::StopContainerOptionsBuilder;
            let t0 = std::time::Instant::now();
            let options = StopContainerOptionsBuilder::new()
                .t(RESTART_STOP_WITHIN.as_secs() as i32)
                .build();
            self.docker
                .stop_container(&self.id, Some(options))
                .await
                .map_err(|e| Error::node(&self.name, format!("stopping the node container: {e}")))?;
            Ok(format!(
                "the container stopped {:.1}s after its stop signal (systemd's shutdown)",
                t0.elapsed().as_secs_f64()
            ))
        })
    }

    /// `systemctl poweroff`, which goes through systemd-logind (it tells the kubelet and waits for its inhibitor
    /// lock), then systemd powers off and the container ends.
    fn power_off(&self, within: Duration) -> BoxFuture<'_, Result<String>> {
        Box::pin(async move {
            let t0 = std::time::Instant::now();
            // The command returns once logind has taken the request; the container may be gone before its output
            // is: an error then is the shutdown itself, and the wait below says whether it happened.
            let asked = self
                .exec(&["systemctl", "poweroff"], &[], Duration::from_secs(15))
                .await;
            if let Ok(out) = &asked {
                if out.exit_code != 0 && self.stopped().await.is_none() {
                    return Err(Error::node(
                        &self.name,
                        format!(
                            "`systemctl poweroff` exited {}: {}",
                            out.exit_code,
                            crate::process::last_lines(&out.stderr, 3, " | ")
                        ),
                    ));
                }
            }
            loop {
                if let Some(how) = self.stopped().await {
                    return Ok(format!(
                        "powered off {:.1}s after `systemctl poweroff` ({how})",
                        t0.elapsed().as_secs_f64()
                    ));
                }
                if t0.elapsed() >= within {
                    return Err(Error::node(
                        &self.name,
                        format!(
                            "still running {}s after `systemctl poweroff`{}",
                            within.as_secs(),
                            asked.err().map(|e| format!(" ({e})")).unwrap_or_default()
                        ),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    }

    /// One tar through the engine's archive call, unpacked at `/` (onto the container's own filesystem: a tmpfs
    /// mounted inside, `/run` or `/tmp`, would hide it).
    fn install_file<'a>(&'a self, file: &'a NodeFile) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            use testcontainers::bollard::query_parameters::UploadToContainerOptionsBuilder;
            let tar = seed_archive(std::slice::from_ref(file))
                .map_err(|e| Error::node(&self.name, format!("archiving {}: {e}", file.path)))?;
            let options = UploadToContainerOptionsBuilder::new().path("/").build();
            self.docker
                .upload_to_container(&self.id, Some(options), testcontainers::bollard::body_full(tar.into()))
                .await
                .map_err(|e| Error::node(&self.name, format!("copying {} into the node: {e}", file.path)))
        })
    }

    fn remove(self: Box<Self>) -> BoxFuture<'static, ()> {
        Box::pin(async move {
            let this = *self;
            if let Err(e) = this.container.rm().await {
                tracing::warn!(node = %this.name, "removing container: {e}");
            }
        })
    }
}
