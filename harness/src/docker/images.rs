//! Image work through the Docker API (the one road to the engine; no `docker` CLI): classic-builder builds of a
//! context directory, imports of a root file system streamed from `tar`, tags, removals, prunes, `docker save`
//! archives, a container run whose result is committed (the kind node image's preload), and a file read out of
//! an image. Each call is bounded by `deadline::IMAGE_BUILD` and fails with the engine's own words.
use super::Docker;
use crate::error::{Error, Result};
use crate::settings::Settings;
use futures::{StreamExt, TryStreamExt};
use std::collections::HashMap;
use std::path::Path;
use testcontainers::bollard::query_parameters::{
    BuildImageOptionsBuilder, BuilderVersion, CommitContainerOptionsBuilder, CreateContainerOptionsBuilder,
    CreateImageOptionsBuilder, DownloadFromContainerOptionsBuilder, PruneImagesOptionsBuilder,
    RemoveContainerOptionsBuilder, RemoveImageOptionsBuilder, TagImageOptionsBuilder, WaitContainerOptionsBuilder,
};

fn err(what: &str) -> impl Fn(testcontainers::bollard::errors::Error) -> Error + '_ {
    move |e| Error::Image(format!("{what}: {e}"))
}

/// Bounds `work` by the image-build deadline.
async fn bounded<T>(what: &str, work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    tokio::time::timeout(crate::deadline::IMAGE_BUILD, work)
        .await
        .map_err(|_| {
            Error::Image(format!(
                "{what}: not done after {}",
                humantime::format_duration(crate::deadline::IMAGE_BUILD)
            ))
        })?
}

/// The top-level names a `.dockerignore` of simple patterns (`name`, `*.ext`) excludes, as the CLI would.
fn ignored(context: &Path) -> Vec<String> {
    std::fs::read_to_string(context.join(".dockerignore"))
        .map(|t| {
            t.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn is_ignored(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_prefix('*') {
        Some(suffix) => name.ends_with(suffix),
        None => name == p.trim_end_matches('/'),
    })
}

/// `context` as a tar file (symlinks kept as links; what `.dockerignore` names left out), built off the async
/// runtime, in a work directory of this process's under `<cache>/tmp` (removed when dropped; the reaper removes it
/// if the process is killed). Returns the directory and the file.
async fn context_tar(settings: &Settings, context: &Path) -> Result<(tempfile::TempDir, std::path::PathBuf)> {
    let context = context.to_path_buf();
    let scratch = crate::paths::scratch_root(settings);
    tokio::task::spawn_blocking(move || {
        std::fs::create_dir_all(&scratch).map_err(|e| Error::io(&scratch, e))?;
        let dir = tempfile::Builder::new()
            .prefix(&crate::paths::owned_prefix("context"))
            .tempdir_in(&scratch)
            .map_err(|e| Error::io(&scratch, e))?;
        let path = dir.path().join("context.tar");
        let file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut tar = tar::Builder::new(file);
        tar.follow_symlinks(false);
        let skip = ignored(&context);
        let entries = std::fs::read_dir(&context).map_err(|e| Error::io(&context, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(&context, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_ignored(&name, &skip) {
                continue;
            }
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| Error::io(&path, e))?;
            let added = if kind.is_dir() {
                tar.append_dir_all(&name, &path)
            } else {
                tar.append_path_with_name(&path, &name)
            };
            added.map_err(|e| Error::io(&path, e))?;
        }
        tar.finish().map_err(|e| Error::io(&context, e))?;
        Ok((dir, path))
    })
    .await
    .map_err(|e| Error::Image(format!("build context: {e}")))?
}

/// Builds `context` with the classic builder (no registry, no BuildKit frontend image to pull), tagged `tag`,
/// with `labels` and `build_args`.
pub async fn build(
    settings: &Settings,
    docker: &Docker,
    context: &Path,
    tag: &str,
    labels: &[(&str, String)],
    build_args: &[(&str, String)],
) -> Result<()> {
    build_stage(settings, docker, context, tag, None, labels, build_args).await
}

/// [`build`] up to the stage `target` (`FROM … AS target`) when one is named: a stage another build shares, had
/// alone.
pub async fn build_stage(
    settings: &Settings,
    docker: &Docker,
    context: &Path,
    tag: &str,
    target: Option<&str>,
    labels: &[(&str, String)],
    build_args: &[(&str, String)],
) -> Result<()> {
    let what = format!("build of {tag}");
    bounded(&what, async {
        let (_work, tar) = context_tar(settings, context).await?;
        let labels: HashMap<&str, &str> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let args: HashMap<&str, &str> = build_args.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let options = BuildImageOptionsBuilder::new()
            .t(tag)
            .target(target.unwrap_or_default())
            // Not quiet: a failed step's own output is quoted in the error.
            .q(false)
            .rm(true)
            .forcerm(true)
            .labels(&labels)
            .buildargs(&args)
            .version(BuilderVersion::BuilderV1)
            .build();
        let file = tokio::fs::File::open(&tar).await.map_err(|e| Error::io(&tar, e))?;
        let body = testcontainers::bollard::body_try_stream(tokio_util::io::ReaderStream::new(file));
        let mut stream = docker.build_image(options, None, Some(body));
        let mut said = String::new();
        let failed = |e: String, said: &str| {
            let tail = crate::process::last_lines(said, 6, " | ");
            Error::Image(format!("{what} failed: {e} (after: {tail})"))
        };
        while let Some(item) = stream.next().await {
            // bollard turns the engine's error message into an `Err`; either way the build's last lines go with it.
            let info = item.map_err(|e| failed(e.to_string(), &said))?;
            if let Some(line) = info.stream {
                said.push_str(&line);
            }
            if let Some(e) = info.error_detail.and_then(|d| d.message) {
                return Err(failed(e, &said));
            }
        }
        Ok(())
    })
    .await
}

/// Imports the root file system that `tar -C dir -c what` writes as image `tag`, with Dockerfile `changes`
/// (`ENTRYPOINT [...]`). GNU tar makes the archive (device nodes, hard links and set-id bits as they are) and
/// its output is streamed to the engine; no shell, so the paths may hold any character.
pub async fn import_tree(docker: &Docker, dir: &Path, what: &str, changes: &[&str], tag: &str) -> Result<()> {
    let label = format!("import of {tag}");
    bounded(&label, async {
        let mut cmd = tokio::process::Command::new("tar");
        cmd.arg("-C")
            .arg(dir)
            .args(["-c", what])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        crate::process::mark(&mut cmd);
        let mut tar = cmd.spawn().map_err(|e| Error::Image(format!("tar: {e}")))?;
        let out = tar
            .stdout
            .take()
            .ok_or_else(|| Error::Image("tar: no output pipe".into()))?;
        let body = testcontainers::bollard::body_try_stream(tokio_util::io::ReaderStream::new(out));
        let (repo, version) = tag.rsplit_once(':').unwrap_or((tag, "latest"));
        let options = CreateImageOptionsBuilder::new()
            .from_src("-")
            .repo(repo)
            .tag(version)
            .changes(changes.iter().map(|c| c.to_string()).collect())
            .build();
        let imported: Result<()> = async {
            let mut stream = docker.create_image(Some(options), Some(body), None);
            while let Some(item) = stream.next().await {
                let info = item.map_err(err(&label))?;
                if let Some(e) = info.error_detail.and_then(|d| d.message) {
                    return Err(Error::Image(format!("{label} failed: {e}")));
                }
            }
            Ok(())
        }
        .await;
        let tarred = tar
            .wait_with_output()
            .await
            .map_err(|e| Error::Image(format!("tar: {e}")))?;
        if !tarred.status.success() {
            return Err(Error::Image(format!(
                "tar -C {} -c {what} failed ({}): {}",
                dir.display(),
                tarred.status,
                String::from_utf8_lossy(&tarred.stderr).trim()
            )));
        }
        imported
    })
    .await
}

/// Tags `source` as `target` (`repo:tag`).
pub async fn tag(docker: &Docker, source: &str, target: &str) -> Result<()> {
    let (repo, version) = target.rsplit_once(':').unwrap_or((target, "latest"));
    let options = TagImageOptionsBuilder::new().repo(repo).tag(version).build();
    docker
        .tag_image(source, Some(options))
        .await
        .map_err(err(&format!("tag {source} as {target}")))
}

/// Removes `images` (untagging a name that others share), best effort: one still used by a container stays.
pub async fn remove(docker: &Docker, images: &[&str]) {
    for image in images {
        let options = RemoveImageOptionsBuilder::new().build();
        if let Err(e) = docker.remove_image(image, Some(options), None).await {
            tracing::debug!(image, "not removed: {e}");
        }
    }
}

/// Removes the dangling images labelled `label` (a build's intermediate stages), best effort.
pub async fn prune_labelled(docker: &Docker, label: &str) {
    let filters = HashMap::from([("label", vec![label])]);
    let options = PruneImagesOptionsBuilder::new().filters(&filters).build();
    if let Err(e) = docker.prune_images(Some(options)).await {
        tracing::debug!(label, "prune: {e}");
    }
}

/// Writes `images` to `out` as one `docker save` archive.
pub async fn save(docker: &Docker, images: &[&str], out: &Path) -> Result<()> {
    let what = format!("save of {}", images.join(", "));
    bounded(&what, async {
        let mut file = tokio::fs::File::create(out).await.map_err(|e| Error::io(out, e))?;
        let mut stream = docker.export_images(images);
        while let Some(chunk) = stream.try_next().await.map_err(err(&what))? {
            tokio::io::AsyncWriteExt::write_all(&mut file, &chunk)
                .await
                .map_err(|e| Error::io(out, e))?;
        }
        tokio::io::AsyncWriteExt::flush(&mut file)
            .await
            .map_err(|e| Error::io(out, e))
    })
    .await
}

/// What [`run_and_commit`] runs.
pub struct CommitRun<'a> {
    pub image: &'a str,
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `host:container[:ro]` bind mounts.
    pub binds: Vec<String>,
    pub labels: HashMap<String, String>,
    /// Dockerfile instructions applied to the committed image.
    pub changes: &'a str,
}

/// Runs `run` in a new container to its end and commits the container as `tag` when it exited 0; the container
/// goes either way.
pub async fn run_and_commit(docker: &Docker, run: CommitRun<'_>, tag: &str) -> Result<()> {
    use testcontainers::bollard::models::{ContainerCreateBody, HostConfig};
    let what = format!("run and commit of {tag}");
    let name = format!("nodejoin-commit-{}", crate::process::random_hex(6));
    let body = ContainerCreateBody {
        image: Some(run.image.to_string()),
        entrypoint: Some(run.entrypoint),
        cmd: Some(run.cmd),
        labels: Some(run.labels),
        host_config: Some(HostConfig {
            binds: Some(run.binds),
            ..Default::default()
        }),
        ..Default::default()
    };
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    docker.create_container(Some(options), body).await.map_err(err(&what))?;
    let result = bounded(&what, async {
        docker.start_container(&name, None).await.map_err(err(&what))?;
        let waited = docker
            .wait_container(&name, Some(WaitContainerOptionsBuilder::new().build()))
            .try_collect::<Vec<_>>()
            .await;
        let code = match waited {
            Ok(w) => w.last().map(|r| r.status_code).unwrap_or(0),
            // bollard reports a non-zero exit as an error carrying the code.
            Err(testcontainers::bollard::errors::Error::DockerContainerWaitError { code, .. }) => code,
            Err(e) => return Err(err(&what)(e)),
        };
        if code != 0 {
            let logs = super::logs(docker, &name, 8).await;
            return Err(Error::Image(format!(
                "{what}: the container exited {code}: {}",
                crate::process::last_lines(&logs, 8, " | ")
            )));
        }
        let (repo, version) = tag.rsplit_once(':').unwrap_or((tag, "latest"));
        let options = CommitContainerOptionsBuilder::new()
            .container(&name)
            .repo(repo)
            .tag(version)
            .changes(run.changes)
            .build();
        docker
            .commit_container(options, testcontainers::bollard::models::ContainerConfig::default())
            .await
            .map_err(err(&what))?;
        Ok(())
    })
    .await;
    let remove = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
    let _ = docker.remove_container(&name, Some(remove)).await;
    result
}

/// The file at `path` in `image`, read from a container created (never started) from it and labelled with
/// `labels`, which goes at once.
pub async fn read_file(docker: &Docker, image: &str, path: &str, labels: HashMap<String, String>) -> Result<Vec<u8>> {
    use testcontainers::bollard::models::ContainerCreateBody;
    let what = format!("read {path} from {image}");
    let body = ContainerCreateBody {
        image: Some(image.to_string()),
        labels: Some(labels),
        network_disabled: Some(true),
        ..Default::default()
    };
    let created = docker
        .create_container(
            None::<testcontainers::bollard::query_parameters::CreateContainerOptions>,
            body,
        )
        .await
        .map_err(err(&what))?;
    let read = bounded(&what, async {
        let options = DownloadFromContainerOptionsBuilder::new().path(path).build();
        let archive: Vec<u8> = docker
            .download_from_container(&created.id, Some(options))
            .try_fold(Vec::new(), |mut acc, chunk| async move {
                acc.extend_from_slice(&chunk);
                Ok(acc)
            })
            .await
            .map_err(err(&what))?;
        let mut tar = tar::Archive::new(&archive[..]);
        let mut entries = tar.entries().map_err(|e| Error::Image(format!("{what}: {e}")))?;
        let mut entry = entries
            .next()
            .ok_or_else(|| Error::Image(format!("{what}: empty archive")))?
            .map_err(|e| Error::Image(format!("{what}: {e}")))?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut entry, &mut bytes).map_err(|e| Error::Image(format!("{what}: {e}")))?;
        Ok(bytes)
    })
    .await;
    let remove = RemoveContainerOptionsBuilder::new().force(true).v(true).build();
    let _ = docker.remove_container(&created.id, Some(remove)).await;
    read
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerignore_patterns_leave_out_what_the_cli_would() {
        let p = vec!["rootfs".to_string(), "pause-root/".to_string(), "*.log".to_string()];
        assert!(is_ignored("rootfs", &p) && is_ignored("pause-root", &p) && is_ignored("build.log", &p));
        assert!(!is_ignored("Dockerfile", &p) && !is_ignored("rootfs2", &p));
    }

    #[tokio::test]
    async fn a_context_tar_holds_the_files_and_keeps_links_as_links() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = dir.path().join("ctx");
        std::fs::create_dir_all(ctx.join("files/etc")).unwrap();
        std::fs::write(ctx.join("Dockerfile"), "FROM scratch\n").unwrap();
        std::fs::write(ctx.join("files/etc/a"), "a").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", ctx.join("files/etc/link")).unwrap();
        std::fs::create_dir_all(ctx.join("rootfs")).unwrap();
        std::fs::write(ctx.join(".dockerignore"), "rootfs\n").unwrap();
        let (_work, tar) = context_tar(&crate::settings::for_tests(), &ctx).await.unwrap();
        let mut archive = tar::Archive::new(std::fs::File::open(&tar).unwrap());
        let mut names = Vec::new();
        for e in archive.entries().unwrap() {
            let e = e.unwrap();
            let kind = e.header().entry_type();
            names.push((e.path().unwrap().display().to_string(), kind.is_symlink()));
        }
        assert!(names.contains(&("Dockerfile".into(), false)));
        assert!(names.contains(&("files/etc/a".into(), false)));
        assert!(
            names.contains(&("files/etc/link".into(), true)),
            "a link stays a link: {names:?}"
        );
        assert!(!names.iter().any(|(n, _)| n.starts_with("rootfs")), "{names:?}");
    }
}
