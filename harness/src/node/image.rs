//! The node image, built locally with no registry: a debootstrap rootfs imported as a base image, then a small
//! `docker build` on top adding the kubelet of the chosen version, the Go tools (nodeadm, aws-iam-authenticator,
//! crictl), the pause image and our unit files.
//! Both images are tagged by a hash of their inputs, so they are rebuilt only when an input changes.
pub(crate) use super::inputs::{copy_tree, file_digest, hash_path, hash_path_skipping};
use crate::assets::kubelet::Kubelet;
use crate::assets::tools::NodeTools;
use crate::error::{Error, Result};
use crate::progress::Steps;
use crate::settings::Settings;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
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

/// Use this image (a local tag) instead of building ours; it must follow the node image contract (docs/src/user-guide/your-bootstrap.md).
pub const ENV_IMAGE: &str = crate::settings::var::NODE_IMAGE;

/// A user-supplied node image, checked to exist locally; `source` says where it was named.
pub async fn user_supplied(docker: &crate::docker::Docker, tag: &str, source: &str) -> Result<NodeImage> {
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

/// The node image for `kubelet` on containerd `line`: the user's (the node image setting, checked to exist), else
/// ours, built when missing.
pub async fn for_kubelet(
    settings: &Settings,
    docker: &crate::docker::Docker,
    kubelet: &Kubelet,
    line: crate::assets::tools::ContainerdLine,
) -> Result<NodeImage> {
    match &settings.node_image {
        Some(tag) => user_supplied(docker, tag, ENV_IMAGE).await,
        _ => ensure(settings, docker, kubelet, &NodeTools::resolve(settings, line).await?).await,
    }
}

fn recipe_dir(settings: &Settings) -> PathBuf {
    crate::paths::fixtures_dir(settings).join("node-image")
}

pub(crate) fn image_err(e: impl std::fmt::Display) -> Error {
    Error::Image(e.to_string())
}

/// Use this local image as the node base instead of the debootstrap one (e.g. built from
/// `fixtures/node-image/registry/Dockerfile` on a machine with a registry). Give it a new tag when it changes.
pub const ENV_BASE_IMAGE: &str = crate::settings::var::BASE_IMAGE;

/// The base image's tag: the base image setting, or `nodejoin-base:<hash of the debootstrap recipe>`.
pub(crate) fn base_tag(settings: &Settings) -> Result<String> {
    match &settings.base_image {
        Some(tag) => Ok(tag.clone()),
        None => debootstrap_base_tag(settings, settings.debian_suite.as_deref().unwrap_or_default()),
    }
}

/// The Debian suite the debootstrap base is built from (default bookworm); naming one, even bookworm, makes a
/// base and node image of their own (a side build, like [`ENV_BASE_IMAGE`]: it prunes nothing of ours).
pub const ENV_DEBIAN_SUITE: &str = crate::settings::var::DEBIAN_SUITE;

/// `nodejoin-base:<hash of the debootstrap recipe and the suite named>` (`suite` empty: the default).
pub fn debootstrap_base_tag(settings: &Settings, suite: &str) -> Result<String> {
    let dir = recipe_dir(settings);
    let mut base = Sha256::new();
    for input in ["rootfs.sh", "packages.txt", "finish-rootfs.sh"] {
        hash_path(settings, &mut base, &dir.join(input))?;
    }
    base.update(suite.as_bytes());
    Ok(format!("nodejoin-base:{}", &hex::encode(base.finalize())[..12]))
}

/// A build on another base than the default debootstrap one (the user's base image, or a Debian suite named):
/// it leaves the default builds alone.
fn side_build(settings: &Settings) -> bool {
    settings.base_image.is_some() || settings.debian_suite.is_some()
}

/// The tags the current recipe, kubelet and Go tools produce.
pub fn expected(settings: &Settings, kubelet: &Kubelet, tools: &NodeTools) -> Result<NodeImage> {
    let dir = recipe_dir(settings);
    let base_tag = base_tag(settings)?;
    let mut node = Sha256::new();
    node.update(base_tag.as_bytes());
    for input in ["Dockerfile", "files", "pause.c", "sysfs.c"] {
        hash_path(settings, &mut node, &dir.join(input))?;
    }
    node.update(file_digest(&kubelet.path)?.as_bytes());
    for (name, bin) in tools.binaries() {
        node.update(name.as_bytes());
        node.update(file_digest(&bin)?.as_bytes());
    }
    Ok(NodeImage {
        tag: format!(
            "nodejoin-node:{}-containerd{}-{}",
            kubelet.version,
            tools.containerd_line.as_str(),
            &hex::encode(node.finalize())[..12]
        ),
        base: base_tag,
    })
}

/// Is `tag` present in the local engine?
pub async fn exists(docker: &crate::docker::Docker, tag: &str) -> bool {
    docker.inspect_image(tag).await.is_ok()
}

pub(crate) async fn run(cmd: &mut Command, what: &str) -> Result<()> {
    // Marked: a `docker build` left running by a killed nodejoin is found and stopped by the next start-up.
    crate::process::mark(cmd);
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

/// Makes sure the node image for `kubelet` exists, building what is missing.
pub async fn ensure(
    settings: &Settings,
    docker: &crate::docker::Docker,
    kubelet: &Kubelet,
    tools: &NodeTools,
) -> Result<NodeImage> {
    let image = expected(settings, kubelet, tools)?;
    if exists(docker, &image.tag).await {
        return Ok(image);
    }
    let _lock = image_lock(settings).await?;
    if exists(docker, &image.tag).await {
        return Ok(image);
    }
    let work = work_dir(settings, "image")?;
    ensure_base(settings, docker, &image.base, work.path()).await?;
    build_node(settings, docker, &image, kubelet, tools, work.path()).await?;
    Ok(image)
}

/// Makes sure the base image `tag` exists, building it with debootstrap in `work` (ours) or failing with what to
/// do (a user's base image setting).
pub(crate) async fn ensure_base(
    settings: &Settings,
    docker: &crate::docker::Docker,
    tag: &str,
    work: &Path,
) -> Result<()> {
    if exists(docker, tag).await {
        return Ok(());
    }
    if settings.base_image.is_some() {
        return Err(image_err(format!(
            "{ENV_BASE_IMAGE}={tag} is not a local image (build it from fixtures/node-image/registry/Dockerfile)"
        )));
    }
    build_base(settings, docker, tag, work).await
}

/// Starts building nodejoin's Debian base image in the background when it is missing, so its debootstrap (mostly a
/// wait on the network and the disk: measured here, a cold run's CPU was 62–68% busy during it) overlaps the first
/// Go builds instead of following them. Whoever needs it next takes the image lock and finds it built, or builds it
/// again, saying why, if this failed. Nothing when a node image or a base image of the user's is set, and nothing
/// while a node image built over this base is still there (none may need it).
pub fn prewarm_base(settings: &Arc<Settings>, docker: &crate::docker::Docker) -> Option<tokio::task::JoinHandle<()>> {
    if settings.node_image.is_some() || settings.base_image.is_some() {
        return None;
    }
    let tag = base_tag(settings).ok()?;
    let (docker, settings) = (docker.clone(), Arc::clone(settings));
    Some(tokio::spawn(async move {
        let settings = settings.as_ref();
        let built_over = [("label", format!("{BASE_LABEL}={tag}"))];
        if exists(&docker, &tag).await || crate::docker::any_image(&docker, &built_over).await {
            return;
        }
        let Ok(_lock) = image_lock(settings).await else { return };
        let Ok(work) = work_dir(settings, "image") else { return };
        if let Err(e) = ensure_base(settings, &docker, &tag, work.path()).await {
            eprintln!("[nodejoin] node base image {tag}, built ahead of need, failed: {e}");
        }
    }))
}

/// A bootstrap author's files over a node image: `dir` is laid out like the root filesystem (for example
/// `etc/eks/bootstrap.sh`, `usr/bin/nodeadm`) and becomes one more layer, so the suite runs against their branch
/// without a registry. Tagged `tag`, or `nodejoin-overlay:<hash of the base and the files>`; rebuilt only when
/// either changes. Earlier builds from the same directory are pruned.
pub async fn ensure_overlay(
    settings: &Settings,
    docker: &crate::docker::Docker,
    base: &NodeImage,
    dir: &Path,
    tag: Option<&str>,
) -> Result<NodeImage> {
    let dir = std::fs::canonicalize(dir).map_err(|e| Error::io(dir, e))?;
    if !dir.is_dir() {
        return Err(image_err(format!("overlay {} is not a directory", dir.display())));
    }
    let (tree, base_tag, owned) = (dir.clone(), base.tag.clone(), settings.clone());
    let hash = super::inputs::off_runtime(move || overlay_hash(&owned, &base_tag, &tree)).await?;
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
    let _lock = image_lock(settings).await?;
    let steps = Steps::new(&format!("overlay image {} from {}", image.tag, dir.display()), 2);
    let work = work_dir(settings, "overlay")?;
    steps.step(0, "build context");
    let (tree, context, owned) = (dir.clone(), work.path().join("overlay"), settings.clone());
    super::inputs::off_runtime(move || copy_tree(&owned, &tree, &context)).await?;
    std::fs::write(
        work.path().join("Dockerfile"),
        format!("FROM {}\nCOPY overlay/ /\n", base.tag),
    )
    .map_err(|e| Error::io(work.path(), e))?;
    steps.step(1, "docker build");
    let dir_label = dir.display().to_string();
    let labels = [
        (OVERLAY_HASH_LABEL, hash.clone()),
        (OVERLAY_DIR_LABEL, dir_label.clone()),
    ];
    docker_build(settings, docker, &image.tag, "overlay", &labels, &[], work.path()).await?;
    steps.finish("built");
    // Earlier default-tagged builds of this directory (a user's own tag is left alone). The directory's path
    // goes to the engine as a filter value, never through a shell.
    if !crate::sysctl::other_processes_run(settings) {
        let Ok(docker) = crate::docker::connect().await else {
            return Ok(image);
        };
        let filters = [
            ("label", format!("{OVERLAY_DIR_LABEL}={dir_label}")),
            ("reference", "nodejoin-overlay".to_string()),
        ];
        crate::docker::remove_images_except(&docker, &filters, &image.tag).await;
    }
    Ok(image)
}

const OVERLAY_HASH_LABEL: &str = "io.nodejoin.overlay-hash";

/// What an overlay image is tagged by: the base's tag (itself a hash of what the base was built from, an
/// amazon-eks-ami checkout for a custom AMI) and the overlay's files, so a change to either rebuilds it.
pub(crate) fn overlay_hash(settings: &Settings, base_tag: &str, dir: &Path) -> Result<String> {
    let mut h = Sha256::new();
    h.update(base_tag.as_bytes());
    hash_path(settings, &mut h, dir)?;
    Ok(hex::encode(h.finalize())[..12].to_string())
}

/// A build of `ctx` (the classic builder: no registry, no BuildKit frontend image to pull) tagged `tag` and
/// labelled `io.nodejoin.image=<kind>` plus `labels`, through the Docker API.
pub(crate) async fn docker_build(
    settings: &Settings,
    docker: &crate::docker::Docker,
    tag: &str,
    kind: &str,
    labels: &[(&str, String)],
    build_args: &[(&str, String)],
    ctx: &Path,
) -> Result<()> {
    let mut all = vec![("io.nodejoin.image", kind.to_string())];
    all.extend(labels.iter().cloned());
    crate::docker::images::build(settings, docker, ctx, tag, &all, build_args).await
}

/// Whether the image at `tag` was built from inputs hashing to `hash` (its `label` says so).
pub(crate) async fn built_from(docker: &crate::docker::Docker, tag: &str, label: &str, hash: &str) -> bool {
    let current = docker
        .inspect_image(tag)
        .await
        .ok()
        .and_then(|i| i.config?.labels?.get(label).cloned());
    current.as_deref() == Some(hash)
}

/// The lock that serialises image builds across processes (they share tags and the engine's build cache).
pub(crate) async fn image_lock(settings: &Settings) -> Result<crate::paths::CacheLock> {
    crate::paths::CacheLock::acquire(settings, "image")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))
}
const OVERLAY_DIR_LABEL: &str = "io.nodejoin.overlay-dir";

/// Does the overlay directory provide its own `/etc/eks/bootstrap.sh` (then the harness does not put ours there)?
pub fn overlay_has_bootstrap(dir: &Path) -> bool {
    dir.join("etc/eks/bootstrap.sh").is_file()
}

pub(crate) fn scratch_dir(settings: &Settings) -> Result<PathBuf> {
    let dir = crate::paths::scratch_root(settings);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

/// A build's work directory in `<cache>/tmp`, named after this process's identity so the reaper removes it
/// (unmounting what a killed build left mounted in it) once this process is gone.
pub(crate) fn work_dir(settings: &Settings, what: &str) -> Result<WorkDir> {
    tempfile::Builder::new()
        .prefix(&crate::paths::owned_prefix(what))
        .tempdir_in(scratch_dir(settings)?)
        .map(WorkDir)
        .map_err(image_err)
}

/// A build's work directory, removed when dropped with whatever a step left mounted in it unmounted first (a
/// rootfs script stopped by its deadline leaves its chroot's /proc mounted; removing the files under it would
/// fail and keep the directory).
pub(crate) struct WorkDir(tempfile::TempDir);

impl WorkDir {
    pub(crate) fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        crate::reaper::unmount_below(self.0.path());
    }
}

async fn build_base(settings: &Settings, docker: &crate::docker::Docker, tag: &str, work: &Path) -> Result<()> {
    for tool in ["debootstrap", "tar"] {
        if crate::assets::which(tool).is_none() {
            return Err(image_err(format!("`{tool}` is not installed (apt-get install {tool})")));
        }
    }
    let rootfs = work.join("rootfs");
    let steps = Steps::new(&format!("node base image {tag}"), 6);
    let log = work.join("rootfs.log");
    let mut cmd = Command::new("bash");
    cmd.arg(recipe_dir(settings).join("rootfs.sh")).arg(&rootfs);
    // finish-rootfs.sh runs `python3 -m pip` as root: from our own work directory, with no PYTHON* path of the
    // caller's and the working directory kept off Python's path, so a `pip.py` in the repository runs nowhere.
    cmd.current_dir(work)
        .env("PYTHONSAFEPATH", "1")
        .env_remove("PYTHONPATH")
        .env_remove("PYTHONHOME")
        .env_remove("PYTHONSTARTUP");
    if let Err(e) = crate::progress::run_with_steps(&mut cmd, &steps, &log, crate::deadline::IMAGE_BUILD).await {
        // Keep the log: the work dir is about to be deleted.
        let kept = scratch_dir(settings)?.join("rootfs-failed.log");
        let _ = std::fs::copy(&log, &kept);
        return Err(image_err(format!("rootfs.sh: {e} (log: {})", kept.display())));
    }
    steps.step(5, "docker import");
    crate::docker::images::import_tree(docker, &rootfs, ".", &[], tag).await?;
    let _ = std::fs::remove_dir_all(&rootfs);
    steps.finish("imported");
    Ok(())
}

/// Compiles the pause program statically into `<work>/pause-root/pause`.
pub(crate) async fn compile_pause(settings: &Settings, work: &Path) -> Result<PathBuf> {
    let root = work.join("pause-root");
    std::fs::create_dir_all(&root).map_err(|e| Error::io(&root, e))?;
    compile_static(settings, "pause.c", &root.join("pause")).await?;
    Ok(root.join("pause"))
}

/// Compiles one of the recipe's C programs (`source`) statically into `out`.
async fn compile_static(settings: &Settings, source: &str, out: &Path) -> Result<()> {
    let cc = ["cc", "gcc"]
        .into_iter()
        .find(|c| crate::assets::which(c).is_some())
        .ok_or_else(|| image_err("no C compiler (apt-get install gcc libc6-dev)"))?;
    run(
        Command::new(cc)
            .args(["-static", "-O2", "-o"])
            .arg(out)
            .arg(recipe_dir(settings).join(source)),
        &format!("compile {source}"),
    )
    .await
}

/// The tag the pause image is saved under in the node image (containerd's sandbox image).
const PAUSE_TAG: &str = "nodejoin.local/pause:3.10";

/// Compiles the pause program and saves it as a `docker save` archive tagged `nodejoin.local/pause:3.10` (the
/// sandbox image containerd is configured with; a name of our own, so no image of the host's is retagged or
/// removed).
async fn build_pause(settings: &Settings, docker: &crate::docker::Docker, work: &Path) -> Result<PathBuf> {
    let root = compile_pause(settings, work)
        .await?
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let tmp_tag = format!("nodejoin-pause-build:{}", crate::process::random_hex(8));
    let out = work.join("pause.tar");
    use crate::docker::images;
    images::import_tree(docker, &root, "pause", &["ENTRYPOINT [\"/pause\"]"], &tmp_tag).await?;
    let saved = async {
        images::tag(docker, &tmp_tag, PAUSE_TAG).await?;
        images::save(docker, &[PAUSE_TAG], &out).await
    }
    .await;
    images::remove(docker, &[&tmp_tag, PAUSE_TAG]).await;
    saved.map(|()| out)
}

async fn build_node(
    settings: &Settings,
    docker: &crate::docker::Docker,
    image: &NodeImage,
    kubelet: &Kubelet,
    tools: &NodeTools,
    work: &Path,
) -> Result<()> {
    let steps = Steps::new(&format!("node image {}", image.tag), 3);
    steps.step(0, "pause image");
    build_pause(settings, docker, work).await?;
    steps.step(1, "build context");
    let ctx = work.to_path_buf();
    copy_tree(settings, &recipe_dir(settings).join("files"), &ctx.join("files"))?;
    compile_static(settings, "sysfs.c", &ctx.join("nodejoin-sysfs")).await?;
    std::fs::copy(recipe_dir(settings).join("Dockerfile"), ctx.join("Dockerfile")).map_err(|e| Error::io(&ctx, e))?;
    std::fs::copy(&kubelet.path, ctx.join("kubelet")).map_err(|e| Error::io(&kubelet.path, e))?;
    for (name, bin) in tools.binaries() {
        std::fs::copy(&bin, ctx.join(name)).map_err(|e| Error::io(&bin, e))?;
    }
    std::fs::write(ctx.join(".dockerignore"), "rootfs\npause-root\n*.log\n").map_err(|e| Error::io(&ctx, e))?;
    steps.step(2, "docker build");
    let labels = [
        (BASE_LABEL, image.base.clone()),
        (VERSIONS_LABEL, versions(settings, kubelet, tools)),
        (NODEADM_LABEL, nodeadm_source(settings, tools)),
    ];
    docker_build(
        settings,
        docker,
        &image.tag,
        "node",
        &labels,
        &[("BASE", image.base.clone())],
        &ctx,
    )
    .await?;
    steps.finish("built");
    // A build on a base of the user's (the base image setting) or a suite named is a side build: it leaves ours alone.
    if !side_build(settings) {
        prune_superseded(settings, image).await;
    }
    Ok(())
}

/// The image label naming the base a node image was built on.
/// The image label carrying where its nodeadm came from (the pinned module, a binary its setting names, or a checkout
/// built by `eks_ami`), so a report names what the node ran.
pub const NODEADM_LABEL: &str = "io.nodejoin.nodeadm";

pub const BASE_LABEL: &str = "io.nodejoin.base";

/// The image label naming the versions of the real parts a node image runs.
pub const VERSIONS_LABEL: &str = "io.nodejoin.versions";

/// `containerd v2.2.4, runc v1.3.5, kubelet v1.36.3`: what the image's binaries were built as.
fn versions(settings: &Settings, kubelet: &Kubelet, tools: &NodeTools) -> String {
    use crate::assets::tools::{CONTAINERD, RUNC};
    let given = |tool: &crate::assets::tools::GoTool| settings.tool_bins.get(tool.setting);
    let built = |tool: &crate::assets::tools::GoTool, version: String| match given(tool) {
        Some(p) => format!("{} from {}", tool.name, p.display()),
        None => format!("{} {version}", tool.name),
    };
    format!(
        "{}, {}, kubelet {}",
        built(
            &CONTAINERD,
            crate::assets::tools::containerd_version(settings, tools.containerd_line)
        ),
        built(&RUNC, RUNC.version(settings)),
        kubelet.version
    )
}

/// Where the image's nodeadm came from: the pinned module version, or the binary its setting names.
fn nodeadm_source(settings: &Settings, tools: &NodeTools) -> String {
    use crate::assets::tools::NODEADM;
    match NODEADM.given(settings) {
        true => format!("{} ({})", tools.nodeadm.display(), NODEADM.env_bin()),
        false => format!("module {}", NODEADM.version(settings)),
    }
}

/// One line naming what an image's nodes run (containerd, runc, kubelet, nodeadm), from its labels; `None` for
/// an image nodejoin did not build.
pub async fn describe(docker: &crate::docker::Docker, tag: &str) -> Option<String> {
    let labels = docker.inspect_image(tag).await.ok()?.config?.labels?;
    let versions = labels.get(VERSIONS_LABEL)?;
    Some(match labels.get(NODEADM_LABEL) {
        Some(n) => format!("{versions}, nodeadm {n}"),
        None => versions.clone(),
    })
}

/// Removes earlier builds of the node image for the same Kubernetes version and containerd line (best effort; an
/// image still used by a container stays).
async fn prune_superseded(settings: &Settings, image: &NodeImage) {
    let version = image.version().rsplit_once('-').map(|(v, _)| v).unwrap_or_default();
    prune_builds(settings, image.repository(), version, &image.tag).await;
}

/// Removes the tags `<repository>:<version>-*` other than `keep` (best effort; an image still used by a container
/// stays).
pub(crate) async fn prune_builds(settings: &Settings, repository: &str, version: &str, keep: &str) {
    // Another process's run may be about to start containers from an older build: nothing is pruned then.
    if crate::sysctl::other_processes_run(settings) {
        return;
    }
    if let Ok(docker) = crate::docker::connect().await {
        let filters = [("reference", format!("{repository}:{version}-*"))];
        crate::docker::remove_images_except(&docker, &filters, keep).await;
    }
}

#[cfg(test)]
mod tests;
