//! An amazon-eks-ami checkout as a node image: nodeadm built from its `nodeadm/`, and the AL2023 AMI's runtime
//! files (`templates/al2023/runtime`) laid out as the AMI build lays them out, over nodejoin's node image. This is
//! the regression-suite use: a pull request to amazon-eks-ami, or a fork, runs nodejoin against its own working
//! tree, unmodified.
use super::image::{copy_tree, hash_path_skipping, image_err, run, NodeImage, NODEADM_LABEL};
use crate::error::{Error, Result};
use crate::settings::Settings;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokio::process::Command;

/// nodeadm's module path, which identifies a checkout's `nodeadm/` directory by its go.mod.
const NODEADM_MODULE: &str = "module github.com/awslabs/amazon-eks-ami/nodeadm";

/// Where a checkout's parts are.
#[derive(Debug, Clone)]
pub struct Checkout {
    /// What the user named: a checkout, its `nodeadm/` directory, or a `.tar.gz` of a checkout.
    pub given: PathBuf,
    /// The checkout's `nodeadm/`.
    pub nodeadm: PathBuf,
    /// `templates/al2023/runtime`, when the checkout has it (not when only `nodeadm/` was named).
    pub runtime: Option<PathBuf>,
    /// The commit the tree was checked out at and whether nodeadm's or the runtime's files differ from it.
    pub git: Option<(String, bool)>,
}

/// Does `dir` hold nodeadm's module?
fn is_nodeadm_dir(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("go.mod")).is_ok_and(|m| m.lines().any(|l| l.trim() == NODEADM_MODULE))
}

/// Does `path` look like what `image.amazonEksAmi` takes: a checkout (with `nodeadm/`), its `nodeadm/`, or a
/// `.tar.gz` of one (an archive is only looked into when it is opened)?
pub fn looks_like_checkout(path: &Path) -> bool {
    (path.is_file() && path.to_string_lossy().ends_with(".tar.gz"))
        || is_nodeadm_dir(path)
        || is_nodeadm_dir(&path.join("nodeadm"))
}

/// The checkout's root inside `dir`: `dir` itself or its one top-level directory (an archive's `name/`).
fn find_root(dir: &Path) -> Option<PathBuf> {
    if is_nodeadm_dir(&dir.join("nodeadm")) {
        return Some(dir.to_path_buf());
    }
    let subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    match subdirs.as_slice() {
        [one] if is_nodeadm_dir(&one.join("nodeadm")) => Some(one.clone()),
        _ => None,
    }
}

fn not_a_checkout(path: &Path) -> Error {
    image_err(format!(
        "{} is neither an amazon-eks-ami checkout (with nodeadm/go.mod), its nodeadm/ directory, nor a .tar.gz of a \
         checkout",
        path.display()
    ))
}

impl Checkout {
    /// Finds the parts of the checkout at `path` (unpacking an archive into the cache once).
    pub async fn open(settings: &Settings, path: &Path) -> Result<Self> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        let dir = if meta.is_file() {
            unpack(settings, path).await?
        } else {
            path.to_path_buf()
        };
        let (nodeadm, runtime, root) = if is_nodeadm_dir(&dir) {
            (dir.clone(), None, None)
        } else {
            let root = find_root(&dir).ok_or_else(|| not_a_checkout(path))?;
            let runtime = root.join("templates/al2023/runtime");
            (root.join("nodeadm"), runtime.is_dir().then_some(runtime), Some(root))
        };
        let git = match (&root, meta.is_file()) {
            (Some(root), false) => git_state(root).await,
            _ => None,
        };
        Ok(Self {
            given: path.to_path_buf(),
            nodeadm,
            runtime,
            git,
        })
    }

    /// A hash of nodeadm's sources (what its binaries are cached by), without build output.
    pub fn nodeadm_hash(&self, settings: &Settings) -> Result<String> {
        let mut h = Sha256::new();
        hash_path_skipping(settings, &mut h, &self.nodeadm, &|rel| {
            rel.starts_with("_bin") || rel.starts_with(".git") || rel.starts_with("vendor/.cache")
        })?;
        Ok(hex::encode(h.finalize())[..12].to_string())
    }

    /// One line for reports: where it came from, which commit, and whether the tree was changed.
    pub fn describe(&self) -> String {
        let git = match &self.git {
            Some((commit, true)) => format!("git {}, with uncommitted changes", short(commit)),
            Some((commit, false)) => format!("git {}", short(commit)),
            None => "no git metadata".into(),
        };
        format!("{} ({git})", self.given.display())
    }
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// `git rev-parse HEAD` and whether nodeadm/ or the AL2023 template differ from it; `None` outside git.
async fn git_state(root: &Path) -> Option<(String, bool)> {
    let git = |args: &[&str]| {
        let mut c = Command::from(crate::process::git());
        c.arg("-C").arg(root).args(args);
        c
    };
    let head = crate::deadline::output(
        &mut git(&["rev-parse", "HEAD"]),
        "git rev-parse",
        crate::deadline::TOOL_PROBE,
    )
    .await
    .ok()
    .filter(|o| o.status.success())?;
    let commit = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let status = crate::deadline::output(
        &mut git(&["status", "--porcelain", "--", "nodeadm", "templates/al2023"]),
        "git status",
        crate::deadline::TOOL_PROBE,
    )
    .await
    .ok()?;
    Some((commit, !status.stdout.is_empty()))
}

/// Unpacks a checkout archive into `<cache>/eks-ami-src/<digest>/` once.
async fn unpack(settings: &Settings, archive: &Path) -> Result<PathBuf> {
    let digest = super::image::file_digest(archive)?;
    let dir = crate::paths::cache_dir(settings)
        .join("eks-ami-src")
        .join(&digest[..16]);
    if dir.join(".complete").exists() {
        return Ok(dir);
    }
    let _lock = crate::paths::CacheLock::acquire(settings, "eks-ami-src")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
    if dir.join(".complete").exists() {
        return Ok(dir);
    }
    let staging = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    run(
        Command::new("tar")
            .arg("-xf")
            .arg(archive)
            .arg("-C")
            .arg(&staging)
            .arg("--no-same-owner"),
        &format!("unpacking {}", archive.display()),
    )
    .await?;
    std::fs::write(staging.join(".complete"), b"").map_err(|e| Error::io(&staging, e))?;
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&staging, &dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

/// nodeadm and nodeadm-internal built from the checkout, cached by the hash of nodeadm's sources: a second run
/// of the same tree builds nothing.
pub async fn build_nodeadm(settings: &Settings, checkout: &Checkout) -> Result<PathBuf> {
    let hash = checkout.nodeadm_hash(settings)?;
    let dir = crate::paths::cache_dir(settings).join("nodeadm-src").join(&hash);
    let ready = |d: &Path| {
        crate::assets::is_executable(&d.join("nodeadm")) && crate::assets::is_executable(&d.join("nodeadm-internal"))
    };
    if ready(&dir) {
        return Ok(dir);
    }
    let _lock = crate::paths::CacheLock::acquire(settings, "nodeadm-src")
        .await
        .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
    if ready(&dir) {
        return Ok(dir);
    }
    let staging = dir.with_extension("partial");
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
    let source = checkout.nodeadm.display().to_string();
    let title = format!("build nodeadm from {source}");
    // The script's arguments are NODEADM_DIR OUT_DIR (the shared runner passes the first as "VERSION").
    if let Err(e) =
        crate::assets::run_go_build_script(settings, "nodeadm-build", &title, 2, (&[], &[]), &source, &staging).await
    {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(Error::ToolUnavailable {
            tool: "nodeadm",
            version: format!("from {source}"),
            tried: format!("Go build of the checkout ({e})"),
            env_bin: crate::assets::tools::NODEADM.env_bin(),
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&staging, &dir).map_err(|e| Error::io(&dir, e))?;
    Ok(dir)
}

const HASH_LABEL: &str = "io.nodejoin.eks-ami-hash";

/// How the runtime files are laid out (see [`ensure_image`]); part of the image's hash, so a change rebuilds it.
const RUNTIME_RECIPE: &str = "COPY rootfs/ /\nCOPY bin/ /usr/bin/\n\
     RUN chmod -R a+x /usr/bin/nodeadm /usr/bin/nodeadm-internal && mkdir -p /etc/eks/nodeadm.d \
     && kubelet --version > /etc/eks/kubelet-version.txt \
     && containerd --version > /etc/eks/containerd-version.txt \
     && systemctl enable systemd-networkd.service \
     && rm -f /etc/systemd/system/systemd-logind.service \
     && sed -e '/^After=multi-user.target$/d' -e '/^Before=apt-daily.service$/d' \
        /lib/systemd/system/cloud-final.service > /etc/systemd/system/cloud-final.service \
     && sed -e '/^Before=sysinit.target$/d' -e '/^Conflicts=shutdown.target$/d' \
        /lib/systemd/system/cloud-init.service > /etc/systemd/system/cloud-init.service\n";

/// The repository of the AL2023 images built from checkouts (tagged by [`image_hash`]).
pub(crate) const AL2023_REPOSITORY: &str = "nodejoin-al2023";

/// What the AL2023 image of `checkout` over `base_tag` is tagged by: the base, nodeadm's sources and the runtime
/// files, so a change to any rebuilds it (and the overlay of a custom AMI over it, tagged by this tag).
pub(crate) fn image_hash(settings: &Settings, base_tag: &str, checkout: &Checkout) -> Result<String> {
    let mut h = Sha256::new();
    h.update(base_tag.as_bytes());
    h.update(checkout.nodeadm_hash(settings)?.as_bytes());
    if let Some(runtime) = &checkout.runtime {
        h.update(RUNTIME_RECIPE.as_bytes());
        hash_path_skipping(settings, &mut h, runtime, &|_| false)?;
    }
    Ok(hex::encode(h.finalize())[..12].to_string())
}

/// The node image of `checkout` over `base`: the checkout's nodeadm, and (for a whole checkout) the AL2023
/// runtime files as the AMI build copies them (`rootfs/*` onto `/`, `bin/*` into `/usr/bin`), with what its
/// provisioners leave that nodeadm relies on (`/etc/eks/nodeadm.d/`, `/etc/eks/kubelet-version.txt`,
/// `/etc/eks/containerd-version.txt`), and systemd-networkd running as on AL2023 (the boot hook waits for it to
/// have configured the primary interface), systemd-logind too (our base image masks it; the kubelet's graceful
/// node shutdown, which nodeadm turns on for 1.34+, takes its inhibitor lock there). The AMI's units (kubelet.service, nodeadm-config.service, ...) replace
/// ours of the same name. cloud-init's network and final stages are ordered as on Amazon Linux (cloud-init's
/// units for its `amazon` variant), not as Debian orders them: the final stage not after multi-user.target (the
/// AMI's nodeadm-run.service, wanted by multi-user.target and ordered after cloud-final, would close a cycle),
/// the network stage not before sysinit.target (the AMI's nodeadm-config.service, after basic.target by default
/// and before cloud-init.service, would close another). systemd breaks a cycle at each boot the AMI's units run
/// by dropping one job, not always the same: nodeadm's config or run phase, or a custom AMI's own unit ordered
/// before them, missing after a reboot now and then. Tagged by a hash of the base and the files; rebuilt only
/// when either changes.
pub async fn ensure_image(
    settings: &Settings,
    docker: &crate::docker::Docker,
    base: &NodeImage,
    checkout: &Checkout,
) -> Result<NodeImage> {
    let bins = build_nodeadm(settings, checkout).await?;
    let (inputs, base_tag, owned) = (checkout.clone(), base.tag.clone(), settings.clone());
    let hash = super::inputs::off_runtime(move || image_hash(&owned, &base_tag, &inputs)).await?;
    let image = NodeImage {
        tag: format!("{AL2023_REPOSITORY}:{hash}"),
        base: base.tag.clone(),
    };
    if super::image::built_from(docker, &image.tag, HASH_LABEL, &hash).await {
        return Ok(image);
    }
    let _lock = super::image::image_lock(settings).await?;
    let steps = crate::progress::Steps::new(&format!("AL2023 image {} from {}", image.tag, checkout.describe()), 2);
    let work = super::image::work_dir(settings, "al2023")?;
    steps.step(0, "build context");
    let ctx = work.path();
    for b in ["nodeadm", "nodeadm-internal"] {
        std::fs::copy(bins.join(b), ctx.join(b)).map_err(|e| Error::io(bins.join(b), e))?;
    }
    let mut dockerfile = format!("FROM {}\nCOPY nodeadm nodeadm-internal /usr/bin/\n", base.tag);
    if let Some(runtime) = &checkout.runtime {
        for part in ["rootfs", "bin"] {
            let from = runtime.join(part);
            if from.is_dir() {
                let (to, owned) = (ctx.join(part), settings.clone());
                super::inputs::off_runtime(move || copy_tree(&owned, &from, &to)).await?;
            } else {
                std::fs::create_dir_all(ctx.join(part)).map_err(|e| Error::io(ctx, e))?;
            }
        }
        dockerfile.push_str(RUNTIME_RECIPE);
    } else {
        dockerfile.push_str("RUN chmod a+x /usr/bin/nodeadm /usr/bin/nodeadm-internal\n");
    }
    std::fs::write(ctx.join("Dockerfile"), dockerfile).map_err(|e| Error::io(ctx, e))?;
    steps.step(1, "docker build");
    let labels = [
        (HASH_LABEL, hash.clone()),
        (NODEADM_LABEL, format!("built from {}", checkout.describe())),
    ];
    super::image::docker_build(settings, docker, &image.tag, "al2023", &labels, &[], ctx).await?;
    steps.finish("built");
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout_in(dir: &Path) {
        std::fs::create_dir_all(dir.join("nodeadm")).unwrap();
        std::fs::write(dir.join("nodeadm/go.mod"), format!("{NODEADM_MODULE}\n\ngo 1.26\n")).unwrap();
        std::fs::create_dir_all(dir.join("templates/al2023/runtime/rootfs/etc")).unwrap();
    }

    #[tokio::test]
    async fn a_checkout_its_nodeadm_dir_or_neither() {
        let t = tempfile::tempdir().unwrap();
        let settings = &crate::settings::for_tests();
        checkout_in(t.path());
        let whole = Checkout::open(settings, t.path()).await.unwrap();
        assert_eq!(whole.nodeadm, t.path().join("nodeadm"));
        assert_eq!(whole.runtime, Some(t.path().join("templates/al2023/runtime")));
        let only = Checkout::open(settings, &t.path().join("nodeadm")).await.unwrap();
        assert_eq!(only.runtime, None);
        let err = Checkout::open(settings, &t.path().join("templates"))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("neither an amazon-eks-ami checkout"), "{err}");
        assert!(Checkout::open(settings, &t.path().join("missing")).await.is_err());
    }

    #[test]
    fn a_checkout_in_one_top_directory_is_found() {
        let t = tempfile::tempdir().unwrap();
        checkout_in(&t.path().join("amazon-eks-ami"));
        assert_eq!(find_root(t.path()), Some(t.path().join("amazon-eks-ami")));
    }

    #[tokio::test]
    async fn the_source_hash_ignores_build_output_but_not_sources() {
        let t = tempfile::tempdir().unwrap();
        let settings = &crate::settings::for_tests();
        checkout_in(t.path());
        let c = Checkout::open(settings, t.path()).await.unwrap();
        let before = c.nodeadm_hash(settings).unwrap();
        std::fs::create_dir_all(t.path().join("nodeadm/_bin")).unwrap();
        std::fs::write(t.path().join("nodeadm/_bin/nodeadm"), b"binary").unwrap();
        assert_eq!(c.nodeadm_hash(settings).unwrap(), before);
        std::fs::write(t.path().join("nodeadm/main.go"), b"package main").unwrap();
        assert_ne!(c.nodeadm_hash(settings).unwrap(), before);
    }
}
