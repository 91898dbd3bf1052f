//! The node image, built locally with no registry: a debootstrap rootfs imported as a base image, then a small
//! `docker build` on top adding the kubelet of the chosen version, the Go tools (nodeadm, aws-iam-authenticator,
//! crictl), the pause image and our unit files.
//! Both images are tagged by a hash of their inputs, so they are rebuilt only when an input changes.
use crate::assets::tools::NodeTools;
use crate::assets::K8sAssets;
use crate::error::{Error, Result};
use crate::progress::Steps;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokio::process::Command;

/// Tags of the images a run uses.
#[derive(Debug, Clone)]
pub struct NodeImage {
    /// `nodejoin-node:<version>-<hash>`.
    pub tag: String,
    pub base: String,
}

impl NodeImage {
    pub fn repository(&self) -> &str {
        self.tag.split_once(':').map(|(r, _)| r).unwrap_or(&self.tag)
    }
    pub fn version(&self) -> &str {
        self.tag.split_once(':').map(|(_, t)| t).unwrap_or("latest")
    }
}

/// Use this image (a local tag) instead of building ours; it must follow the node image contract (README).
pub const ENV_IMAGE: &str = "NODEJOIN_NODE_IMAGE";

/// A user-supplied node image, checked to exist locally; `source` says where it was named.
pub async fn user_supplied(docker: &testcontainers::bollard::Docker, tag: &str, source: &str) -> Result<NodeImage> {
    if !exists(docker, tag).await {
        return Err(image_err(format!(
            "{source} {tag} is not a local image (docker image ls); build it with `nodejoin image build --overlay DIR --tag {tag}` or `docker build`"
        )));
    }
    Ok(NodeImage {
        tag: tag.to_string(),
        base: "(user supplied)".into(),
    })
}

fn recipe_dir() -> PathBuf {
    crate::paths::fixtures_dir().join("node-image")
}

pub(crate) fn image_err(e: impl std::fmt::Display) -> Error {
    Error::Image(e.to_string())
}

/// Hashes a file or a directory tree: the relative path, mode and content of every file, in sorted order.
/// Directories count only through their files, so an empty directory (which git cannot carry) does not
/// change the hash between a work tree and a fresh clone.
pub(crate) fn hash_path(h: &mut Sha256, path: &Path) -> Result<()> {
    hash_path_skipping(h, path, &|_| false)
}

/// [`hash_path`] leaving out the entries whose path relative to `path` `skip` says (build output, VCS data).
pub(crate) fn hash_path_skipping(h: &mut Sha256, path: &Path, skip: &dyn Fn(&Path) -> bool) -> Result<()> {
    hash_tree(h, path, Path::new(""), skip)
}

fn hash_tree(h: &mut Sha256, path: &Path, rel: &Path, skip: &dyn Fn(&Path) -> bool) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(link) = absolute_link(path)? {
        // The link itself, as the image carries it (its target may not exist on this host).
        h.update(rel.to_string_lossy().as_bytes());
        h.update(b" -> ");
        h.update(link.to_string_lossy().as_bytes());
        return Ok(());
    }
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| Error::io(path, e))?
            .flatten()
            .map(|e| e.file_name())
            .collect();
        entries.sort();
        for name in entries {
            let child = rel.join(&name);
            if !skip(&child) {
                hash_tree(h, &path.join(&name), &child, skip)?;
            }
        }
    } else if meta.is_file() {
        h.update(rel.to_string_lossy().as_bytes());
        h.update(meta.permissions().mode().to_le_bytes());
        let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        std::io::copy(&mut f, h).map_err(|e| Error::io(path, e))?;
    } else {
        // Reading a FIFO would block for ever, a device is not content: neither belongs in an image's inputs.
        return Err(image_err(format!(
            "{}: neither a directory, a regular file nor a symlink (an image layer cannot carry it)",
            path.display()
        )));
    }
    Ok(())
}

/// SHA-256 of a large file, remembered in `<file>.sha256` next to it (with the size and mtime it was computed
/// for), so the 80+ MB kubelet is not re-read on every run.
pub(crate) fn file_digest(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let stamp = format!("{} {mtime}", meta.len());
    let sidecar = path.with_extension("sha256");
    if let Ok(text) = std::fs::read_to_string(&sidecar) {
        if let Some((digest, recorded)) = text.trim().split_once(' ') {
            if recorded == stamp && digest.len() == 64 {
                return Ok(digest.to_string());
            }
        }
    }
    let mut h = Sha256::new();
    let mut f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    std::io::copy(&mut f, &mut h).map_err(|e| Error::io(path, e))?;
    let digest = hex::encode(h.finalize());
    // Best effort: a read-only assets directory just means hashing again next time.
    let _ = std::fs::write(&sidecar, format!("{digest} {stamp}\n"));
    Ok(digest)
}

/// Use this local image as the node base instead of the debootstrap one (e.g. built from
/// `fixtures/node-image/registry/Dockerfile` on a machine with a registry). Give it a new tag when it changes.
pub const ENV_BASE_IMAGE: &str = "NODEJOIN_BASE_IMAGE";

/// The base image's tag: `NODEJOIN_BASE_IMAGE`, or `nodejoin-base:<hash of the debootstrap recipe>`.
pub(crate) fn base_tag() -> Result<String> {
    let dir = recipe_dir();
    Ok(match std::env::var(ENV_BASE_IMAGE) {
        Ok(tag) if !tag.trim().is_empty() => tag.trim().to_string(),
        _ => {
            let mut base = Sha256::new();
            for input in ["rootfs.sh", "packages.txt", "finish-rootfs.sh"] {
                hash_path(&mut base, &dir.join(input))?;
            }
            base.update(std::env::var("NODEJOIN_DEBIAN_SUITE").unwrap_or_default().as_bytes());
            format!("nodejoin-base:{}", &hex::encode(base.finalize())[..12])
        }
    })
}

/// The tags the current recipe, kubelet and Go tools produce.
pub fn expected(assets: &K8sAssets, tools: &NodeTools) -> Result<NodeImage> {
    let dir = recipe_dir();
    let base_tag = base_tag()?;
    let mut node = Sha256::new();
    node.update(base_tag.as_bytes());
    for input in ["Dockerfile", "files", "pause.c"] {
        hash_path(&mut node, &dir.join(input))?;
    }
    node.update(file_digest(&assets.kubelet)?.as_bytes());
    for (name, bin) in tools.binaries() {
        node.update(name.as_bytes());
        node.update(file_digest(&bin)?.as_bytes());
    }
    Ok(NodeImage {
        tag: format!(
            "nodejoin-node:{}-containerd{}-{}",
            assets.version,
            tools.containerd_line.as_str(),
            &hex::encode(node.finalize())[..12]
        ),
        base: base_tag,
    })
}

/// Is `tag` present in the local engine?
pub async fn exists(docker: &testcontainers::bollard::Docker, tag: &str) -> bool {
    docker.inspect_image(tag).await.is_ok()
}

pub(crate) async fn run(cmd: &mut Command, what: &str) -> Result<()> {
    let out = crate::deadline::output(cmd, what, crate::deadline::IMAGE_BUILD)
        .await
        .map_err(|e| image_err(e.to_string()))?;
    if out.status.success() {
        Ok(())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let output = stderr.lines().chain(stdout.lines()).collect::<Vec<_>>().join("\n");
        Err(image_err(format!(
            "{what} failed ({}): {}",
            out.status,
            crate::process::last_lines(&output, 8, " | ")
        )))
    }
}

/// Makes sure the node image for `assets` exists, building what is missing.
pub async fn ensure(
    docker: &testcontainers::bollard::Docker,
    assets: &K8sAssets,
    tools: &NodeTools,
) -> Result<NodeImage> {
    let image = expected(assets, tools)?;
    if exists(docker, &image.tag).await {
        return Ok(image);
    }
    let _lock = image_lock().await?;
    if exists(docker, &image.tag).await {
        return Ok(image);
    }
    let work = tempfile::Builder::new()
        .prefix("nodejoin-image-")
        .tempdir_in(scratch_dir()?)
        .map_err(image_err)?;
    ensure_base(docker, &image.base, work.path()).await?;
    build_node(&image, assets, tools, work.path()).await?;
    Ok(image)
}

/// Makes sure the base image `tag` exists, building it with debootstrap in `work` (ours) or failing with what to
/// do (a user's `NODEJOIN_BASE_IMAGE`).
pub(crate) async fn ensure_base(docker: &testcontainers::bollard::Docker, tag: &str, work: &Path) -> Result<()> {
    if exists(docker, tag).await {
        return Ok(());
    }
    if std::env::var(ENV_BASE_IMAGE).is_ok_and(|t| !t.trim().is_empty()) {
        return Err(image_err(format!(
            "{ENV_BASE_IMAGE}={tag} is not a local image (build it from fixtures/node-image/registry/Dockerfile)"
        )));
    }
    build_base(tag, work).await
}

/// A bootstrap author's files over a node image: `dir` is laid out like the root filesystem (for example
/// `etc/eks/bootstrap.sh`, `usr/bin/nodeadm`) and becomes one more layer, so the suite runs against their branch
/// without a registry. Tagged `tag`, or `nodejoin-overlay:<hash of the base and the files>`; rebuilt only when
/// either changes. Earlier builds from the same directory are pruned.
pub async fn ensure_overlay(
    docker: &testcontainers::bollard::Docker,
    base: &NodeImage,
    dir: &Path,
    tag: Option<&str>,
) -> Result<NodeImage> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    if !dir.is_dir() {
        return Err(image_err(format!("overlay {} is not a directory", dir.display())));
    }
    let mut h = Sha256::new();
    h.update(base.tag.as_bytes());
    hash_path(&mut h, &dir)?;
    let hash = hex::encode(h.finalize())[..12].to_string();
    let image = NodeImage {
        tag: tag
            .map(str::to_string)
            .unwrap_or_else(|| format!("nodejoin-overlay:{hash}")),
        base: base.tag.clone(),
    };
    // A tag of the user's may hold another build: the hash label says whether it is this one.
    if built_from(docker, &image.tag, OVERLAY_HASH_LABEL, &hash).await {
        return Ok(image);
    }
    let _lock = image_lock().await?;
    let steps = Steps::new(&format!("overlay image {} from {}", image.tag, dir.display()), 2);
    let work = tempfile::Builder::new()
        .prefix("nodejoin-overlay-")
        .tempdir_in(scratch_dir()?)
        .map_err(image_err)?;
    steps.step(0, "build context");
    copy_tree(&dir, &work.path().join("overlay"))?;
    std::fs::write(
        work.path().join("Dockerfile"),
        format!("FROM {}\nCOPY overlay/ /\n", base.tag),
    )
    .map_err(|e| Error::io(work.path(), e))?;
    steps.step(1, "docker build");
    let dir_label = dir.display().to_string();
    run(
        Command::new("docker")
            .env("DOCKER_BUILDKIT", "0")
            .args(["build", "-q", "--force-rm", "-t", &image.tag])
            .args(["--label", "io.nodejoin.image=overlay"])
            .arg("--label")
            .arg(format!("{OVERLAY_HASH_LABEL}={hash}"))
            .arg("--label")
            .arg(format!("{OVERLAY_DIR_LABEL}={dir_label}"))
            .arg(work.path()),
        "docker build (overlay)",
    )
    .await?;
    steps.finish("built");
    // Earlier default-tagged builds of this directory (a user's own tag is left alone).
    let script = format!(
        "docker image ls -q --filter 'label={OVERLAY_DIR_LABEL}={dir_label}' --filter 'reference=nodejoin-overlay' | sort -u | \
         grep -v \"$(docker image inspect -f '{{{{.Id}}}}' '{}' | cut -c8-19)\" | xargs -r docker rmi >/dev/null 2>&1 || true",
        image.tag
    );
    let _ = crate::deadline::output(
        Command::new("bash").args(["-c", &script]),
        "pruning superseded images",
        crate::deadline::DOCKER_CLI,
    )
    .await;
    Ok(image)
}

const OVERLAY_HASH_LABEL: &str = "io.nodejoin.overlay-hash";

/// Whether the image at `tag` was built from inputs hashing to `hash` (its `label` says so).
pub(crate) async fn built_from(docker: &testcontainers::bollard::Docker, tag: &str, label: &str, hash: &str) -> bool {
    let current = docker
        .inspect_image(tag)
        .await
        .ok()
        .and_then(|i| i.config?.labels?.get(label).cloned());
    current.as_deref() == Some(hash)
}

/// The lock that serialises image builds across processes (they share tags and the engine's build cache).
pub(crate) async fn image_lock() -> Result<crate::paths::CacheLock> {
    crate::paths::CacheLock::acquire("image")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(), e))
}
const OVERLAY_DIR_LABEL: &str = "io.nodejoin.overlay-dir";

/// Does the overlay directory provide its own `/etc/eks/bootstrap.sh` (then the harness does not put ours there)?
pub fn overlay_has_bootstrap(dir: &Path) -> bool {
    dir.join("etc/eks/bootstrap.sh").is_file()
}

pub(crate) fn scratch_dir() -> Result<PathBuf> {
    let dir = crate::paths::cache_dir().join("tmp");
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

async fn build_base(tag: &str, work: &Path) -> Result<()> {
    for tool in ["debootstrap", "docker", "tar"] {
        if crate::assets::which(tool).is_none() {
            return Err(image_err(format!("`{tool}` is not installed (apt-get install {tool})")));
        }
    }
    let rootfs = work.join("rootfs");
    let steps = Steps::new(&format!("node base image {tag}"), 6);
    let log = work.join("rootfs.log");
    let mut cmd = Command::new("bash");
    cmd.arg(recipe_dir().join("rootfs.sh")).arg(&rootfs);
    if let Err(e) = crate::progress::run_with_steps(&mut cmd, &steps, &log, crate::deadline::IMAGE_BUILD).await {
        // Keep the log: the work dir is about to be deleted.
        let kept = scratch_dir()?.join("rootfs-failed.log");
        let _ = std::fs::copy(&log, &kept);
        return Err(image_err(format!("rootfs.sh: {e} (log: {})", kept.display())));
    }
    steps.step(5, "docker import");
    let script = format!("tar -C '{}' -c . | docker import - '{tag}'", rootfs.display());
    run(
        Command::new("bash").args(["-o", "pipefail", "-c", &script]),
        "docker import",
    )
    .await?;
    let _ = std::fs::remove_dir_all(&rootfs);
    steps.finish("imported");
    Ok(())
}

/// Compiles the pause program statically into `<work>/pause-root/pause`.
pub(crate) async fn compile_pause(work: &Path) -> Result<PathBuf> {
    let cc = ["cc", "gcc"]
        .into_iter()
        .find(|c| crate::assets::which(c).is_some())
        .ok_or_else(|| image_err("no C compiler (apt-get install gcc libc6-dev)"))?;
    let root = work.join("pause-root");
    std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
    run(
        Command::new(cc)
            .args(["-static", "-O2", "-o"])
            .arg(root.join("pause"))
            .arg(recipe_dir().join("pause.c")),
        "compile pause.c",
    )
    .await?;
    Ok(root.join("pause"))
}

/// Compiles the pause program and saves it as a `docker save` archive tagged `nodejoin.local/pause:3.10` (the
/// sandbox image containerd is configured with; a name of our own, so no image of the host's is retagged or
/// removed).
async fn build_pause(work: &Path) -> Result<PathBuf> {
    let root = compile_pause(work)
        .await?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let tmp_tag = format!("nodejoin-pause-build:{}", crate::fakes::random_hex(8));
    let script = format!(
        "set -e; tar -C '{root}' -c pause | docker import --change 'ENTRYPOINT [\"/pause\"]' - '{tmp_tag}' >/dev/null; \
         docker tag '{tmp_tag}' nodejoin.local/pause:3.10; docker save -o '{out}' nodejoin.local/pause:3.10; \
         docker rmi '{tmp_tag}' nodejoin.local/pause:3.10 >/dev/null",
        root = root.display(),
        out = work.join("pause.tar").display()
    );
    run(
        Command::new("bash").args(["-o", "pipefail", "-c", &script]),
        "pause image",
    )
    .await?;
    Ok(work.join("pause.tar"))
}

/// An absolute symlink in an overlay names a path in the image (`/dev/null` masks a unit; `/usr/lib/...` is the
/// image's file), so it is kept as a link and never resolved on the host. A relative one is how a repository
/// shares a file between its trees (`../../bootstrap/eni-limits.txt`), and is followed, as before.
fn absolute_link(path: &Path) -> Result<Option<PathBuf>> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.file_type().is_symlink() {
        return Ok(None);
    }
    let link = std::fs::read_link(path).map_err(|e| Error::io(path, e))?;
    Ok(link.is_absolute().then_some(link))
}

/// Copies a tree into a build context: absolute symlinks stay symlinks (see [`absolute_link`]), relative ones are
/// followed, and anything that is neither a directory nor a regular file (a FIFO, a device, a socket) is refused
/// with its path.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| Error::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| Error::io(from, e))?.flatten() {
        let (source, target) = (entry.path(), to.join(entry.file_name()));
        if let Some(link) = absolute_link(&source)? {
            std::os::unix::fs::symlink(&link, &target).map_err(|e| Error::io(&target, e))?;
            continue;
        }
        let kind = std::fs::metadata(&source)
            .map_err(|e| Error::io(&source, e))?
            .file_type();
        if kind.is_dir() {
            copy_tree(&source, &target)?;
        } else if kind.is_file() {
            std::fs::copy(&source, &target).map_err(|e| Error::io(&source, e))?;
        } else {
            return Err(image_err(format!(
                "{}: neither a directory, a regular file nor a symlink (an image layer cannot carry it)",
                source.display()
            )));
        }
    }
    Ok(())
}

async fn build_node(image: &NodeImage, assets: &K8sAssets, tools: &NodeTools, work: &Path) -> Result<()> {
    let steps = Steps::new(&format!("node image {}", image.tag), 3);
    steps.step(0, "pause image");
    build_pause(work).await?;
    steps.step(1, "build context");
    let ctx = work.to_path_buf();
    copy_tree(&recipe_dir().join("files"), &ctx.join("files"))?;
    std::fs::copy(recipe_dir().join("Dockerfile"), ctx.join("Dockerfile")).map_err(|e| Error::io(&ctx, e))?;
    std::fs::copy(&assets.kubelet, ctx.join("kubelet")).map_err(|e| Error::io(&assets.kubelet, e))?;
    for (name, bin) in tools.binaries() {
        std::fs::copy(&bin, ctx.join(name)).map_err(|e| Error::io(&bin, e))?;
    }
    std::fs::write(ctx.join(".dockerignore"), "rootfs\npause-root\n*.log\n").map_err(|e| Error::io(&ctx, e))?;
    steps.step(2, "docker build");
    run(
        Command::new("docker")
            .env("DOCKER_BUILDKIT", "0")
            .args(["build", "-q", "--force-rm", "--build-arg"])
            .arg(format!("BASE={}", image.base))
            .args(["-t", &image.tag, "--label", "io.nodejoin.image=node"])
            .arg("--label")
            .arg(format!("{VERSIONS_LABEL}={}", versions(assets, tools)))
            .arg("--label")
            .arg(format!("{}={}", super::eks_ami::NODEADM_LABEL, nodeadm_source(tools)))
            .arg(&ctx),
        "docker build",
    )
    .await?;
    steps.finish("built");
    // A build on a base of the user's (NODEJOIN_BASE_IMAGE) is a side build: it leaves ours alone.
    if std::env::var(ENV_BASE_IMAGE).is_err() {
        prune_superseded(image).await;
    }
    Ok(())
}

/// The image label naming the versions of the real parts a node image runs.
pub const VERSIONS_LABEL: &str = "io.nodejoin.versions";

/// `containerd v2.2.4, runc v1.3.5, kubelet v1.36.3`: what the image's binaries were built as.
fn versions(assets: &K8sAssets, tools: &NodeTools) -> String {
    use crate::assets::tools::{CONTAINERD, RUNC};
    let built = |tool: &crate::assets::tools::GoTool, version: String| match std::env::var_os(tool.env_bin) {
        Some(p) => format!("{} from {}", tool.name, PathBuf::from(p).display()),
        None => format!("{} {version}", tool.name),
    };
    format!(
        "{}, {}, kubelet {}",
        built(&CONTAINERD, tools.containerd_line.version()),
        built(&RUNC, RUNC.version()),
        assets.version
    )
}

/// Where the image's nodeadm came from: the pinned module version, or `NODEJOIN_NODEADM`'s binary.
fn nodeadm_source(tools: &NodeTools) -> String {
    use crate::assets::tools::NODEADM;
    match std::env::var_os(NODEADM.env_bin) {
        Some(_) => format!("{} ({})", tools.nodeadm.display(), NODEADM.env_bin),
        None => format!("module {}", NODEADM.version()),
    }
}

/// One line naming what an image's nodes run (containerd, runc, kubelet, nodeadm), from its labels; `None` for
/// an image nodejoin did not build.
pub async fn describe(docker: &testcontainers::bollard::Docker, tag: &str) -> Option<String> {
    let labels = docker.inspect_image(tag).await.ok()?.config?.labels?;
    let versions = labels.get(VERSIONS_LABEL)?;
    Some(match labels.get(super::eks_ami::NODEADM_LABEL) {
        Some(n) => format!("{versions}, nodeadm {n}"),
        None => versions.clone(),
    })
}

/// Removes earlier builds of the node image for the same Kubernetes version and containerd line (best effort; an
/// image still used by a container stays).
async fn prune_superseded(image: &NodeImage) {
    let version = image.version().rsplit_once('-').map(|(v, _)| v).unwrap_or_default();
    prune_builds(image.repository(), version, &image.tag).await;
}

/// Removes the tags `<repository>:<version>-*` other than `keep` (best effort; an image still used by a container
/// stays).
pub(crate) async fn prune_builds(repository: &str, version: &str, keep: &str) {
    let script = format!(
        "docker image ls --format '{{{{.Repository}}}}:{{{{.Tag}}}}' --filter 'reference={repository}:{version}-*' | grep -vx '{keep}' | xargs -r docker rmi >/dev/null 2>&1 || true"
    );
    let _ = crate::deadline::output(
        Command::new("bash").args(["-c", &script]),
        "pruning superseded images",
        crate::deadline::DOCKER_CLI,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_hash_ignores_empty_directories_but_not_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        let hash = |p: &Path| {
            let mut h = Sha256::new();
            hash_path(&mut h, p).unwrap();
            hex::encode(h.finalize())
        };
        let before = hash(dir.path());
        std::fs::create_dir(dir.path().join("empty")).unwrap();
        assert_eq!(hash(dir.path()), before);
        std::fs::write(dir.path().join("empty").join("b"), b"").unwrap();
        assert_ne!(hash(dir.path()), before);
    }

    #[test]
    fn absolute_links_stay_links_relative_ones_are_followed_special_files_refused() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("overlay");
        std::fs::create_dir_all(src.join("etc/systemd/system")).unwrap();
        // A masked unit, and an absolute link that must not pick up the host's file.
        std::os::unix::fs::symlink("/dev/null", src.join("etc/systemd/system/update-motd.service")).unwrap();
        std::os::unix::fs::symlink("/etc/shadow", src.join("etc/secret")).unwrap();
        let out = dir.path().join("ctx");
        copy_tree(&src, &out).unwrap();
        let masked = out.join("etc/systemd/system/update-motd.service");
        assert!(std::fs::symlink_metadata(&masked).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_link(&masked).unwrap(), Path::new("/dev/null"));
        assert_eq!(
            std::fs::read_link(out.join("etc/secret")).unwrap(),
            Path::new("/etc/shadow")
        );
        // A relative link (a repository's shared file) is followed.
        std::fs::write(dir.path().join("shared.txt"), b"shared").unwrap();
        std::os::unix::fs::symlink("../../shared.txt", src.join("etc/shared.txt")).unwrap();
        let out2 = dir.path().join("ctx-relative");
        copy_tree(&src, &out2).unwrap();
        assert_eq!(std::fs::read(out2.join("etc/shared.txt")).unwrap(), b"shared");
        assert!(!std::fs::symlink_metadata(out2.join("etc/shared.txt"))
            .unwrap()
            .file_type()
            .is_symlink());
        let hash = |p: &Path| {
            let mut h = Sha256::new();
            hash_path(&mut h, p).map(|_| hex::encode(h.finalize()))
        };
        let before = hash(&src).unwrap();
        std::fs::remove_file(src.join("etc/secret")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", src.join("etc/secret")).unwrap();
        assert_ne!(hash(&src).unwrap(), before, "a link's target is part of the hash");
        let fifo = src.join("pipe");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = hash(&src).unwrap_err().to_string();
        assert!(err.contains("pipe") && err.contains("neither"), "{err}");
        let err = copy_tree(&src, &dir.path().join("ctx2")).unwrap_err().to_string();
        assert!(err.contains("pipe"), "{err}");
    }

    #[test]
    fn digest_is_cached_and_invalidated_by_changes() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("kubelet");
        std::fs::write(&f, b"one").unwrap();
        let a = file_digest(&f).unwrap();
        assert_eq!(a, hex::encode(Sha256::digest(b"one")));
        assert!(dir.path().join("kubelet.sha256").exists());
        assert_eq!(file_digest(&f).unwrap(), a);
        std::fs::write(&f, b"two!").unwrap();
        assert_eq!(file_digest(&f).unwrap(), hex::encode(Sha256::digest(b"two!")));
    }
}
