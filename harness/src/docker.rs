//! Thin helpers over the Docker API (bollard, as re-exported by testcontainers so both agree on one version):
//! connecting with a clear error, run labels, per-run networks, exec with captured output, and image work
//! (`images`). Every Docker call of the harness goes through here; the `docker` CLI is run by nothing of ours.
use crate::error::{Error, Result};
use futures::StreamExt;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use testcontainers::bollard::exec::{CreateExecOptions, StartExecResults};
use testcontainers::bollard::models::{ContainerSummary, Network};
use testcontainers::bollard::query_parameters::{
    ListContainersOptionsBuilder, ListImagesOptionsBuilder, ListNetworksOptionsBuilder, RemoveContainerOptionsBuilder,
    RemoveImageOptionsBuilder,
};
pub use testcontainers::bollard::Docker;

pub mod images;
mod network;
pub mod oneshot;
pub use network::{create_network, restart_at, RunNetwork};

/// Label every object of a run carries: its run id.
pub const RUN_LABEL: &str = "io.nodejoin.run";
/// Label with the PID of the process that owns the object; a dead owner means the object can be reaped.
pub const OWNER_LABEL: &str = "io.nodejoin.owner-pid";

/// Connects to the local engine and checks it answers.
pub async fn connect() -> Result<Docker> {
    let docker = Docker::connect_with_local_defaults().map_err(|e| Error::DockerUnavailable(e.to_string()))?;
    docker
        .ping()
        .await
        .map_err(|e| Error::DockerUnavailable(e.to_string()))?;
    Ok(docker)
}

/// Label with the owner's boot id and PID namespace: an owner PID means something only there, so runs of other
/// hosts or containers sharing this Docker engine are never reaped by us.
pub const OWNER_NS_LABEL: &str = "io.nodejoin.owner-ns";

/// `<boot id>/<pid namespace>` of this process.
pub fn owner_namespace() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    format!("{}/{ns}", boot.trim())
}

pub fn run_labels(run_id: &str) -> HashMap<String, String> {
    HashMap::from([
        (RUN_LABEL.to_string(), run_id.to_string()),
        (OWNER_LABEL.to_string(), crate::process::Identity::own().label()),
        (OWNER_NS_LABEL.to_string(), owner_namespace()),
    ])
}

fn docker_err(context: &str) -> impl Fn(testcontainers::bollard::errors::Error) -> Error + '_ {
    move |e| Error::Docker(format!("{context}: {e}"))
}

/// The container's IPv4 address and MAC address on `network`.
/// A running container's init process, as the host numbers it.
pub async fn init_pid(docker: &Docker, container: &str) -> Option<i64> {
    let inspect = docker.inspect_container(container, None).await.ok()?;
    inspect.state?.pid.filter(|p| *p > 0)
}

pub async fn container_address(docker: &Docker, container: &str, network: &str) -> Result<(Ipv4Addr, Option<String>)> {
    let inspect = docker
        .inspect_container(container, None)
        .await
        .map_err(docker_err("inspect container"))?;
    let endpoint = inspect
        .network_settings
        .and_then(|n| n.networks)
        .and_then(|mut n| n.remove(network));
    let mac = endpoint
        .as_ref()
        .and_then(|e| e.mac_address.clone())
        .filter(|m| !m.is_empty())
        .map(|m| m.to_ascii_lowercase());
    let ip = endpoint.and_then(|e| e.ip_address).and_then(|ip| ip.parse().ok());
    let Some(ip) = ip else {
        // Most often the container has already exited (its entrypoint failed): say so, with its own last words.
        let state = inspect.state.unwrap_or_default();
        let why = format!(
            "container {container} has no address on {network}: it is {}",
            stopped_state(docker, container, state).await
        );
        return Err(Error::Docker(why));
    };
    Ok((ip, mac))
}

/// How a container that is not running ended: `exited (exit code 137, OOMKilled: the kernel killed it for
/// memory): <engine error>; its last output: <console lines>`.
pub async fn stopped_state(
    docker: &Docker,
    container: &str,
    state: testcontainers::bollard::models::ContainerState,
) -> String {
    let mut why = format!(
        "{} (exit code {}",
        state
            .status
            .map(|s| s.to_string())
            .unwrap_or_else(|| "not running".into()),
        state.exit_code.unwrap_or(-1)
    );
    if state.oom_killed == Some(true) {
        why.push_str(", OOMKilled: the kernel killed it for memory");
    }
    why.push(')');
    if let Some(e) = state.error.filter(|e| !e.is_empty()) {
        why.push_str(&format!(": {e}"));
    }
    let tail = log_tail(docker, container, 3).await;
    if !tail.is_empty() {
        why.push_str(&format!("; its last output: {tail}"));
    }
    why
}

/// Output of a command run in a container.
#[derive(Debug, Default, Clone)]
pub struct ExecOutput {
    pub exit_code: i64,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` in `container` with `env` and optional stdin, and collects its output; a command whose output
/// stream has not ended after `deadline` is an `Error::Timeout` naming it and `label` (the container's name).
/// The timeout ends the wait, not the command: it may go on in the container until the container is removed
/// (the scenario has failed by then, as its bootstrap or probe did not finish).
pub async fn exec(
    docker: &Docker,
    container: &str,
    label: &str,
    cmd: &[&str],
    env: &[String],
    stdin: Option<&[u8]>,
    deadline: std::time::Duration,
) -> Result<ExecOutput> {
    let what = exec_what(cmd, label);
    crate::deadline::within(what, deadline, exec_unbounded(docker, container, cmd, env, stdin)).await
}

/// How an exec of `cmd` in the container `label` is named in messages.
pub fn exec_what(cmd: &[&str], label: &str) -> String {
    format!("`{}` in container {label}", short_command(cmd))
}

/// The CPU time a container's processes have used so far (its cgroup's, every process inside included), from one
/// stats sample (no exec, nothing started in the container); `None` when the engine does not say.
pub async fn cpu_time(docker: &Docker, container: &str) -> Option<std::time::Duration> {
    use testcontainers::bollard::query_parameters::StatsOptionsBuilder;
    let options = StatsOptionsBuilder::default().stream(false).one_shot(true).build();
    let mut samples = Box::pin(docker.stats(container, Some(options)));
    let stats = tokio::time::timeout(crate::deadline::NODE_EXEC, samples.next())
        .await
        .ok()??
        .ok()?;
    let nanos = stats.cpu_stats?.cpu_usage?.total_usage?;
    (nanos > 0).then(|| std::time::Duration::from_nanos(nanos))
}

/// The last `lines` lines a container printed (its console: for a node, systemd's), joined by " / "; empty when
/// the engine has none or does not answer within a few seconds. Works on a stopped container.
pub async fn log_tail(docker: &Docker, container: &str, lines: usize) -> String {
    crate::process::last_lines(&logs(docker, container, lines).await, lines, " / ")
}

/// The last `lines` lines a container printed, as printed; empty when the engine has none or does not answer
/// within a few seconds. Works on a stopped container.
pub async fn logs(docker: &Docker, container: &str, lines: usize) -> String {
    use testcontainers::bollard::query_parameters::LogsOptionsBuilder;
    let options = LogsOptionsBuilder::new()
        .stdout(true)
        .stderr(true)
        .tail(&lines.to_string())
        .build();
    let collect = async {
        let mut out = String::new();
        let mut stream = Box::pin(docker.logs(container, Some(options)));
        while let Some(Ok(chunk)) = stream.next().await {
            out.push_str(&String::from_utf8_lossy(&chunk.into_bytes()));
        }
        out
    };
    tokio::time::timeout(crate::deadline::NODE_EXEC, collect)
        .await
        .unwrap_or_default()
}

/// A command for messages: its words, the whole line cut at 80 characters.
pub fn short_command(cmd: &[&str]) -> String {
    let line = cmd.join(" ");
    match line.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line,
    }
}

/// The most of a command's output (stdout and stderr together) kept from a container.
pub const EXEC_OUTPUT_CAP: usize = 32 << 20;

/// The largest char boundary of `s` at or below `at`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// [`exec`] without its deadline (the caller bounds it).
pub async fn exec_unbounded(
    docker: &Docker,
    container: &str,
    cmd: &[&str],
    env: &[String],
    stdin: Option<&[u8]>,
) -> Result<ExecOutput> {
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                cmd: Some(cmd.iter().map(|s| s.to_string()).collect()),
                env: Some(env.to_vec()),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                attach_stdin: Some(stdin.is_some()),
                ..Default::default()
            },
        )
        .await
        .map_err(docker_err("create exec"))?;
    let started = docker
        .start_exec(&created.id, None)
        .await
        .map_err(docker_err("start exec"))?;
    let mut out = ExecOutput::default();
    if let StartExecResults::Attached { mut output, mut input } = started {
        if let Some(data) = stdin {
            use tokio::io::AsyncWriteExt;
            input
                .write_all(data)
                .await
                .map_err(|e| Error::Docker(format!("exec stdin: {e}")))?;
            input
                .shutdown()
                .await
                .map_err(|e| Error::Docker(format!("exec stdin: {e}")))?;
        }
        drop(input);
        use testcontainers::bollard::container::LogOutput;
        while let Some(chunk) = output.next().await {
            match chunk.map_err(docker_err("exec output"))? {
                LogOutput::StdOut { message } | LogOutput::Console { message } => {
                    out.stdout.push_str(&String::from_utf8_lossy(&message))
                }
                LogOutput::StdErr { message } => out.stderr.push_str(&String::from_utf8_lossy(&message)),
                LogOutput::StdIn { .. } => {}
            }
            // What a command in a node prints is the node's to choose (`cat` of a log linked to /dev/zero): kept
            // up to a cap, the cut said, the stream dropped (the command then ends on a broken pipe).
            if out.stdout.len() + out.stderr.len() > EXEC_OUTPUT_CAP {
                out.stdout.truncate(floor_char_boundary(&out.stdout, EXEC_OUTPUT_CAP));
                out.stderr
                    .truncate(floor_char_boundary(&out.stderr, EXEC_OUTPUT_CAP - out.stdout.len()));
                out.stderr.push_str(&format!(
                    "\n[nodejoin: the output was cut at {} MiB]\n",
                    EXEC_OUTPUT_CAP >> 20
                ));
                break;
            }
        }
    }
    let inspect = docker
        .inspect_exec(&created.id)
        .await
        .map_err(docker_err("inspect exec"))?;
    out.exit_code = inspect.exit_code.unwrap_or(-1);
    Ok(out)
}

/// Containers (in any state) and networks matching a label selector (`key` or `key=value`).
async fn labelled(docker: &Docker, selector: &str) -> Result<(Vec<ContainerSummary>, Vec<Network>)> {
    let filters = HashMap::from([("label", vec![selector])]);
    let containers = docker
        .list_containers(Some(
            ListContainersOptionsBuilder::new().all(true).filters(&filters).build(),
        ))
        .await
        .map_err(docker_err("list containers"))?;
    let networks = docker
        .list_networks(Some(ListNetworksOptionsBuilder::new().filters(&filters).build()))
        .await
        .map_err(docker_err("list networks"))?;
    Ok((containers, networks))
}

/// Docker's filter form of `filters`: each key with its values.
fn by_key<'a>(filters: &'a [(&'a str, String)]) -> HashMap<&'a str, Vec<&'a str>> {
    let mut by_key: HashMap<&str, Vec<&str>> = HashMap::new();
    for (k, v) in filters {
        by_key.entry(k).or_default().push(v.as_str());
    }
    by_key
}

/// Whether some image matches every one of `filters` (as for [`remove_images_except`]); false when the engine
/// cannot say.
pub async fn any_image(docker: &Docker, filters: &[(&str, String)]) -> bool {
    docker
        .list_images(Some(ListImagesOptionsBuilder::new().filters(&by_key(filters)).build()))
        .await
        .is_ok_and(|images| !images.is_empty())
}

/// Removes the images that match every one of `filters` (Docker's image list filters, e.g. `reference` and
/// `label`), except `keep` (a tag or id): best effort, without force, so an image a container uses stays.
/// Filter values go to the engine as data, never through a shell. Returns how many were removed.
pub async fn remove_images_except(docker: &Docker, filters: &[(&str, String)], keep: &str) -> usize {
    let by_key = by_key(filters);
    let keep_id = docker.inspect_image(keep).await.ok().and_then(|i| i.id);
    let Ok(images) = docker
        .list_images(Some(ListImagesOptionsBuilder::new().filters(&by_key).build()))
        .await
    else {
        return 0;
    };
    let mut removed = 0;
    for image in images {
        if Some(&image.id) == keep_id.as_ref() {
            continue;
        }
        // By tag where it has some (an untagged id may be another tag's too), else by id.
        let names: Vec<String> = match image.repo_tags.iter().any(|t| t != "<none>:<none>") {
            true => image.repo_tags.clone(),
            false => vec![image.id.clone()],
        };
        for name in names.iter().filter(|n| n.as_str() != keep) {
            let opts = RemoveImageOptionsBuilder::new().force(false).noprune(false).build();
            if docker.remove_image(name, Some(opts), None).await.is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// Removes a container by force; if the engine cannot kill it, thaws its frozen cgroups and tries once more.
async fn remove_container_thawing(docker: &Docker, id: &str) -> bool {
    let opts = || Some(RemoveContainerOptionsBuilder::new().force(true).v(true).build());
    if docker.remove_container(id, opts()).await.is_ok() {
        return true;
    }
    if thaw_container(docker, id).await > 0 {
        tracing::warn!(id, "thawed frozen cgroups of a container the engine could not kill");
    }
    docker.remove_container(id, opts()).await.is_ok()
}

/// Thaws every frozen cgroup of a container. runc freezes a container's cgroup while it applies its limits (cgroup
/// v1); a runc killed in that window (a kind node torn down while one of its pods starts, seen in CI) leaves a task
/// frozen in uninterruptible sleep, and the engine then cannot kill the container ("did not receive an exit
/// event"). Returns how many cgroups were thawed.
pub async fn thaw_container(docker: &Docker, id: &str) -> usize {
    let Ok(c) = docker.inspect_container(id, None).await else {
        return 0;
    };
    let Some(pid) = c.state.and_then(|s| s.pid).filter(|p| *p > 0) else {
        return 0;
    };
    tokio::task::spawn_blocking(move || thaw_cgroups_of(pid))
        .await
        .unwrap_or(0)
}

/// The freezer cgroups (v1) or unified cgroups (v2) of process `pid` and below, thawed.
fn thaw_cgroups_of(pid: i64) -> usize {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return 0;
    };
    let mut thawed = 0;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (controllers, path) = (parts.nth(1).unwrap_or(""), parts.next().unwrap_or(""));
        let root = if controllers.split(',').any(|c| c == "freezer") {
            "/sys/fs/cgroup/freezer"
        } else if controllers.is_empty() {
            "/sys/fs/cgroup"
        } else {
            continue;
        };
        thawed += thaw_tree(&std::path::Path::new(root).join(path.trim_start_matches('/')));
    }
    thawed
}

/// Writes THAWED (v1 `freezer.state`) or 0 (v2 `cgroup.freeze`) where `dir` or a cgroup below it is frozen.
fn thaw_tree(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for (file, frozen, thawed) in [("freezer.state", "FROZEN", "THAWED"), ("cgroup.freeze", "1", "0")] {
        let f = dir.join(file);
        if std::fs::read_to_string(&f).is_ok_and(|s| s.trim() == frozen) && std::fs::write(&f, thawed).is_ok() {
            n += 1;
        }
    }
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            n += thaw_tree(&e.path());
        }
    }
    n
}

/// Removes every container and network carrying `label=value` (force, with anonymous volumes).
/// Returns how many objects were removed.
pub async fn remove_labelled(docker: &Docker, label: &str, value: Option<&str>) -> Result<usize> {
    let selector = match value {
        Some(v) => format!("{label}={v}"),
        None => label.to_string(),
    };
    let (containers, networks) = labelled(docker, &selector).await?;
    let mut removed = 0;
    // A container whose start was in flight when its owner died can refuse removal for a moment.
    for id in containers.into_iter().filter_map(|c| c.id) {
        let opts = || Some(RemoveContainerOptionsBuilder::new().force(true).v(true).build());
        let gone = remove_retrying("container", &id, || docker.remove_container(&id, opts())).await;
        removed += usize::from(gone || remove_container_thawing(docker, &id).await);
    }
    // The engine releases a removed container's endpoint a moment later; until then its network is in use (seen
    // in CI right after kind's node containers were removed).
    for id in networks.into_iter().filter_map(|n| n.id) {
        match detached_network_removal(docker, &id).await {
            Some(Ok(())) => removed += 1,
            // Retrying cannot help (and took 5 s at every start-up while the engine kept such a network).
            Some(Err(why)) => tracing::warn!(
                id,
                "network left to the engine: no container is attached, but it refuses removal ({why}); \
                 restarting the engine clears it, and `nodejoin reap` removes it then"
            ),
            None => removed += usize::from(remove_retrying("network", &id, || docker.remove_network(&id)).await),
        }
    }
    Ok(removed)
}

/// Calls `remove` until it succeeds (true) or the object is gone already, for up to 5 s; a refusal that lasts is
/// logged.
async fn remove_retrying<F, Fut>(what: &str, id: &str, mut remove: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), testcontainers::bollard::errors::Error>>,
{
    let mut last_error = None;
    for _ in 0..20 {
        match remove().await {
            Ok(()) => return true,
            Err(testcontainers::bollard::errors::Error::DockerResponseServerError { status_code: 404, .. }) => {
                return false
            }
            Err(e) => last_error = Some(e),
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    if let Some(e) = last_error {
        tracing::warn!(id, "could not remove {what}: {e}");
    }
    false
}

/// Containers and networks labelled with `run_id` (a provider's own containers too: each labels what it creates,
/// kind's nodes through its docker shim), by name (for leak checks).
pub async fn objects_of_run(docker: &Docker, run_id: &str) -> Result<Vec<String>> {
    let (containers, networks) = labelled(docker, &format!("{RUN_LABEL}={run_id}")).await?;
    let containers = containers
        .into_iter()
        .map(|c| format!("container {}", c.names.unwrap_or_default().join(",")));
    let networks = networks
        .into_iter()
        .map(|n| format!("network {}", n.name.unwrap_or_default()));
    Ok(containers.chain(networks).collect())
}

/// What a finished run left behind, for its leak check: [`objects_of_run`] without the networks the engine
/// refuses to remove only because it still counts an endpoint on them while no container is attached (a
/// bookkeeping fault of the engine, seen under load, that clears when it restarts). Those are warned about, not
/// counted: the run removed everything of its own.
pub async fn leaks_of_run(docker: &Docker, run_id: &str) -> Result<Vec<String>> {
    let mut leaks = Vec::new();
    for object in objects_of_run(docker, run_id).await? {
        let phantom = match object.strip_prefix("network ") {
            Some(name) => phantom_endpoints(docker, name).await,
            None => None,
        };
        match phantom {
            Some(why) => tracing::warn!(
                run = %run_id,
                "{object}: no container is attached, but the Docker engine refuses to remove it ({why}); \
                 restarting the engine clears it, and `nodejoin reap` removes it then"
            ),
            None => leaks.push(object),
        }
    }
    Ok(leaks)
}

/// The engine's refusal to remove `network` when it has no container attached and says it has active endpoints.
async fn phantom_endpoints(docker: &Docker, network: &str) -> Option<String> {
    detached_network_removal(docker, network).await?.err()
}

/// Removes `network` if no container is attached to it: `Some(Ok)` when removed, `Some(Err(why))` when the engine
/// still refuses because it counts endpoints no container holds (a bookkeeping fault of the engine, seen under
/// load, that clears when it restarts); `None` when containers are attached or it could not be looked at.
async fn detached_network_removal(docker: &Docker, network: &str) -> Option<std::result::Result<(), String>> {
    let inspected = docker.inspect_network(network, None).await.ok()?;
    if inspected.containers.as_ref().is_some_and(|c| !c.is_empty()) {
        return None;
    }
    match docker.remove_network(network).await {
        Ok(()) => Some(Ok(())),
        Err(e) if e.to_string().contains("active endpoints") => Some(Err(e.to_string())),
        Err(_) => None,
    }
}

/// Owner PIDs of every labelled object of this host and PID namespace, so start-up can reap those whose
/// owner died.
pub async fn owners(docker: &Docker) -> Result<Vec<(String, crate::process::Identity)>> {
    let here = owner_namespace();
    let (containers, networks) = labelled(docker, OWNER_LABEL).await?;
    let labels = containers
        .into_iter()
        .filter_map(|c| c.labels)
        .chain(networks.into_iter().filter_map(|n| n.labels));
    let mut out = Vec::new();
    for l in labels {
        let ours = l.get(OWNER_NS_LABEL).is_none_or(|ns| *ns == here);
        if let (true, Some(run), Some(pid)) = (
            ours,
            l.get(RUN_LABEL),
            l.get(OWNER_LABEL).and_then(|p| crate::process::Identity::parse(p)),
        ) {
            out.push((run.clone(), pid));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests;
