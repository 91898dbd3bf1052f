//! A throwaway container that runs one program to its end and hands back what it printed: how a user's own
//! user-data generator runs (`userData.command`). It is the node's image, without network, capabilities or a
//! writable root, its memory, processes, time and output bounded, the user's directory read-only; it goes as soon
//! as it has ended, and it carries the run's labels so the reaper finds it if nodejoin dies first.
use super::{Docker, ExecOutput};
use crate::error::{Error, Result};
use futures::StreamExt;
use std::collections::HashMap;
use std::time::Duration;
use testcontainers::bollard::container::LogOutput;
use testcontainers::bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder,
    WaitContainerOptionsBuilder,
};

/// What [`run`] runs.
pub struct OneShot<'a> {
    /// What it is, in its container's name (`nodejoin-<kind>-<random>`): `generator`, `journal`.
    pub kind: &'static str,
    pub image: &'a str,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    /// Host directories mounted read-only at the same path.
    pub read_only: Vec<String>,
    /// Paths inside those directories hidden behind an empty file system (a repository's `.git`).
    pub hidden: Vec<String>,
    pub working_dir: String,
    pub labels: HashMap<String, String>,
    pub timeout: Duration,
    /// The most standard output kept; more is an error.
    pub max_stdout: usize,
}

/// Runs `o` to its end: its exit code, standard output (at most `max_stdout` bytes, else an error) and the end
/// of its standard error. A program still running after `timeout` is killed and reported.
pub async fn run(docker: &Docker, o: OneShot<'_>) -> Result<(ExecOutput, Vec<u8>)> {
    use testcontainers::bollard::models::{ContainerCreateBody, HostConfig};
    let what = format!("`{}` in a container of {}", o.cmd.join(" "), o.image);
    let err = |e: testcontainers::bollard::errors::Error| Error::Image(format!("{what}: {e}"));
    let name = format!("nodejoin-{}-{}", o.kind, crate::process::random_hex(6));
    let mut tmpfs: HashMap<String, String> = o.hidden.iter().map(|p| (p.clone(), "ro,size=4k".to_string())).collect();
    tmpfs.insert("/tmp".into(), "rw,size=64m".into());
    let body = ContainerCreateBody {
        image: Some(o.image.to_string()),
        // The node image's entrypoint is systemd; the generator is the only process.
        entrypoint: Some(o.cmd.clone()),
        cmd: Some(Vec::new()),
        env: Some(o.env.clone()),
        working_dir: Some(o.working_dir.clone()),
        labels: Some(o.labels.clone()),
        network_disabled: Some(true),
        host_config: Some(HostConfig {
            binds: Some(o.read_only.iter().map(|d| format!("{d}:{d}:ro")).collect()),
            tmpfs: Some(tmpfs),
            network_mode: Some("none".into()),
            readonly_rootfs: Some(true),
            cap_drop: Some(vec!["ALL".into()]),
            security_opt: Some(vec!["no-new-privileges".into()]),
            memory: Some(512 << 20),
            pids_limit: Some(256),
            // What it prints is read through the attach alone, and bounded there; no log driver keeps a copy
            // (Docker's json-file log would grow with whatever the program writes, uncapped, until removal).
            log_config: Some(testcontainers::bollard::models::HostConfigLogConfig {
                typ: Some("none".into()),
                config: None,
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    docker.create_container(Some(options), body).await.map_err(err)?;
    // Removed however this ends: here, or by the guard when a caller stops waiting (a dropped future).
    let mut guard = Removal {
        docker: docker.clone(),
        name: name.clone(),
    };
    let result = async {
        // Attached before it starts, so every byte it prints arrives as printed (no log driver in between).
        let attach = AttachContainerOptionsBuilder::new()
            .stdout(true)
            .stderr(true)
            .stream(true)
            .build();
        let mut attached = docker.attach_container(&name, Some(attach)).await.map_err(err)?;
        docker.start_container(&name, None).await.map_err(err)?;
        let read = async {
            let (mut out, mut errs) = (Vec::new(), Vec::new());
            while let Some(Ok(chunk)) = attached.output.next().await {
                match chunk {
                    LogOutput::StdOut { message } => out.extend_from_slice(&message),
                    LogOutput::StdErr { message } if errs.len() < 64 << 10 => errs.extend_from_slice(&message),
                    _ => {}
                }
                if out.len() > o.max_stdout {
                    break;
                }
            }
            (out, errs)
        };
        let (stdout, stderr) = tokio::time::timeout(o.timeout, read)
            .await
            .map_err(|_| Error::Timeout {
                what: what.clone(),
                after: o.timeout,
            })?;
        if stdout.len() > o.max_stdout {
            return Err(Error::Image(format!(
                "{what}: printed more than {} bytes",
                o.max_stdout
            )));
        }
        let wait = docker
            .wait_container(&name, Some(WaitContainerOptionsBuilder::new().build()))
            .collect::<Vec<_>>();
        let exit_code = match tokio::time::timeout(crate::deadline::NODE_EXEC, wait).await {
            Err(_) => {
                return Err(Error::Timeout {
                    what: what.clone(),
                    after: crate::deadline::NODE_EXEC,
                })
            }
            Ok(results) => match results.into_iter().last() {
                Some(Ok(r)) => r.status_code,
                // bollard reports a non-zero exit as an error carrying the code.
                Some(Err(testcontainers::bollard::errors::Error::DockerContainerWaitError { code, .. })) => code,
                Some(Err(e)) => return Err(err(e)),
                None => 0,
            },
        };
        Ok((
            ExecOutput {
                exit_code,
                stdout: String::new(),
                stderr: String::from_utf8_lossy(&stderr).into_owned(),
            },
            stdout,
        ))
    }
    .await;
    let remove = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
    let _ = docker.remove_container(&name, Some(remove)).await;
    guard.name.clear();
    result
}

/// Removes a one-shot container (unless its name was cleared, as it is once removed) when dropped, from a task of the runtime (a drop cannot wait).
struct Removal {
    docker: Docker,
    name: String,
}

impl Drop for Removal {
    fn drop(&mut self) {
        let (docker, name) = (self.docker.clone(), std::mem::take(&mut self.name));
        if name.is_empty() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let remove = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
                let _ = docker.remove_container(&name, Some(remove)).await;
            });
        }
    }
}
