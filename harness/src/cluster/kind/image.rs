//! The kind node image, built with no registry (`nodejoin image build --kind`): our debootstrap base, kubeadm,
//! kubelet and kubectl of one Kubernetes version, and the control-plane images kubeadm deploys (kube-apiserver,
//! kube-controller-manager, kube-scheduler, kube-proxy, etcd, coredns, pause), each assembled locally FROM scratch
//! around a binary we built, preloaded into containerd under the registry.k8s.io name kubeadm asks for. The recipe
//! is `fixtures/kind-image/`. Tagged `nodejoin-kind-node:<version>-<hash of every input>` and, for the kind
//! provider, `nodejoin-kind-node:<version>`; rebuilt only when an input changes.
use crate::assets::kubeadm::KubeadmBinaries;
use crate::assets::tools::COREDNS;
use crate::assets::K8sAssets;
use crate::error::{Error, Result};
use crate::node::image::{self, image_err};
use crate::progress::Steps;
use crate::settings::Settings;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use tokio::process::Command;

pub const REPOSITORY: &str = "nodejoin-kind-node";

/// The tag the kind provider looks for: the newest build for `version`.
pub fn local_tag(version: &str) -> String {
    format!("{REPOSITORY}:{version}")
}

/// A built kind node image.
#[derive(Debug, Clone)]
pub struct KindImage {
    /// `nodejoin-kind-node:<version>-<hash>`.
    pub tag: String,
    /// `nodejoin-kind-node:<version>`.
    pub alias: String,
    /// The images preloaded into its containerd, as kubeadm names them.
    pub images: Vec<String>,
}

fn recipe_dir(settings: &Settings) -> PathBuf {
    crate::paths::fixtures_dir(settings).join("kind-image")
}

/// One control-plane image kubeadm deploys: the last path segment of its repository names the component
/// (`registry.k8s.io/coredns/coredns:v1.14.2` → `coredns`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentImage {
    pub component: String,
    pub reference: String,
}

impl ComponentImage {
    pub fn tag(&self) -> &str {
        self.reference.rsplit_once(':').map(|(_, t)| t).unwrap_or("")
    }
}

/// Parses `kubeadm config images list` output; every component we build must be there exactly once.
pub fn parse_image_list(text: &str) -> std::result::Result<Vec<ComponentImage>, String> {
    let images: Vec<ComponentImage> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|reference| {
            let repo = reference.rsplit_once(':').map(|(r, _)| r).unwrap_or(reference);
            ComponentImage {
                component: repo.rsplit('/').next().unwrap_or(repo).to_string(),
                reference: reference.to_string(),
            }
        })
        .collect();
    for want in COMPONENTS {
        match images.iter().filter(|i| i.component == want).count() {
            1 => {}
            0 => return Err(format!("kubeadm lists no {want} image in:\n{text}")),
            _ => return Err(format!("kubeadm lists more than one {want} image in:\n{text}")),
        }
    }
    if let Some(other) = images.iter().find(|i| !COMPONENTS.contains(&i.component.as_str())) {
        return Err(format!(
            "kubeadm lists an image nodejoin cannot build: {}",
            other.reference
        ));
    }
    Ok(images)
}

/// Marks the intermediate images of a build, pruned when it ends.
const BUILD_LABEL: &str = "io.nodejoin.build=kind-node";

/// The script that gathers kube-proxy's iptables tooling (in the recipe directory).
const PROXY_TOOLS: &str = "kube-proxy-tools.sh";

/// Every image kubeadm deploys, in the order they are built.
const COMPONENTS: [&str; 7] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kube-proxy",
    "etcd",
    "coredns",
    "pause",
];

/// Where each component's binary goes in its image and what the image runs by default. kubeadm's static pods
/// and the kube-proxy DaemonSet name their command (found on PATH); CoreDNS and pause run their entrypoint.
fn layout(component: &str) -> (&'static str, Option<&'static str>) {
    match component {
        "coredns" => ("/coredns", Some("/coredns")),
        "pause" => ("/pause", Some("/pause")),
        _ => ("/usr/local/bin/", None),
    }
}

/// The Dockerfile of one component image, FROM scratch around its static binary `file`. kube-proxy's also carries
/// iptables and conntrack with their libraries, gathered from the `base` image by `kube-proxy-tools.sh`.
pub fn component_dockerfile(component: &str, file: &str, base: &str) -> String {
    let (dest, entrypoint) = layout(component);
    let dest = if dest.ends_with('/') {
        format!("{dest}{file}")
    } else {
        dest.to_string()
    };
    let mut text = String::new();
    if component == "kube-proxy" {
        text.push_str(&format!(
            "FROM {base} AS tools\nLABEL {BUILD_LABEL}\nCOPY {PROXY_TOOLS} /{PROXY_TOOLS}\nRUN sh /{PROXY_TOOLS} /out\n"
        ));
    }
    text.push_str("FROM scratch\n");
    if component == "kube-proxy" {
        text.push_str("COPY --from=tools /out/ /\n");
    }
    text.push_str(&format!(
        "COPY {file} {dest}\nENV PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
    ));
    if let Some(e) = entrypoint {
        text.push_str(&format!("ENTRYPOINT [\"{e}\"]\n"));
    }
    text
}

/// What the image is built from.
struct Inputs {
    assets: K8sAssets,
    kubeadm: KubeadmBinaries,
    images: Vec<ComponentImage>,
    coredns: PathBuf,
    base: String,
}

impl Inputs {
    async fn resolve(settings: &Settings, version: &str) -> Result<Self> {
        let assets = crate::assets::resolve(settings, version).await?;
        let kubeadm = crate::assets::kubeadm::resolve(settings, version).await?;
        let images = kubeadm_images(&kubeadm.path("kubeadm"), version).await?;
        let coredns_version = images
            .iter()
            .find(|i| i.component == "coredns")
            .map(|i| i.tag().to_string())
            .unwrap_or_else(|| COREDNS.default_version.to_string());
        let coredns = COREDNS.resolve_version(settings, &coredns_version).await?;
        Ok(Self {
            assets,
            kubeadm,
            images,
            coredns,
            base: image::base_tag(settings)?,
        })
    }

    /// The binary a component image carries (`None` for pause, compiled from our pause.c).
    fn binary(&self, component: &str) -> Option<PathBuf> {
        match component {
            "kube-apiserver" => Some(self.assets.kube_apiserver.clone()),
            "kube-controller-manager" => Some(self.assets.kube_controller_manager.clone()),
            "etcd" => Some(self.assets.etcd.clone()),
            "coredns" => Some(self.coredns.clone()),
            "kube-scheduler" | "kube-proxy" => Some(self.kubeadm.path(component)),
            _ => None,
        }
    }

    fn node_binaries(&self) -> [(&'static str, PathBuf); 3] {
        [
            ("kubeadm", self.kubeadm.path("kubeadm")),
            ("kubectl", self.kubeadm.path("kubectl")),
            ("kubelet", self.assets.kubelet.clone()),
        ]
    }

    fn tag(&self, settings: &Settings) -> Result<String> {
        let mut h = Sha256::new();
        h.update(self.base.as_bytes());
        image::hash_path(settings, &mut h, &recipe_dir(settings))?;
        image::hash_path(
            settings,
            &mut h,
            &crate::paths::fixtures_dir(settings).join("node-image").join("pause.c"),
        )?;
        for i in &self.images {
            h.update(i.reference.as_bytes());
            if let Some(bin) = self.binary(&i.component) {
                h.update(image::file_digest(&bin)?.as_bytes());
            }
        }
        for (name, bin) in self.node_binaries() {
            h.update(name.as_bytes());
            h.update(image::file_digest(&bin)?.as_bytes());
        }
        Ok(format!(
            "{REPOSITORY}:{}-{}",
            self.assets.version,
            &hex::encode(h.finalize())[..12]
        ))
    }
}

/// `kubeadm config images list --kubernetes-version V`: the images kubeadm of this version deploys.
async fn kubeadm_images(kubeadm: &Path, version: &str) -> Result<Vec<ComponentImage>> {
    let out = crate::deadline::output(
        Command::new(kubeadm).args(["config", "images", "list", "--kubernetes-version", version]),
        "kubeadm config images list",
        crate::deadline::TOOL_PROBE,
    )
    .await
    .map_err(|e| image_err(e.to_string()))?;
    if !out.status.success() {
        return Err(image_err(format!(
            "kubeadm config images list: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    parse_image_list(&String::from_utf8_lossy(&out.stdout)).map_err(image_err)
}

/// Makes sure the kind node image for `version` exists (building what is missing: binaries, base image,
/// component images, the node image) and that `nodejoin-kind-node:<version>` names it.
pub async fn ensure(settings: &Settings, docker: &crate::docker::Docker, version: &str) -> Result<KindImage> {
    let inputs = Inputs::resolve(settings, version).await?;
    let image = KindImage {
        tag: inputs.tag(settings)?,
        alias: local_tag(version),
        images: inputs.images.iter().map(|i| i.reference.clone()).collect(),
    };
    if !image::exists(docker, &image.tag).await {
        let _lock = crate::paths::CacheLock::acquire(settings, "image")
            .await
            .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
        if !image::exists(docker, &image.tag).await {
            build(settings, docker, &inputs, &image).await?;
        }
    }
    crate::docker::images::tag(docker, &image.tag, &image.alias).await?;
    prune_superseded(settings, &image).await;
    Ok(image)
}

async fn build(settings: &Settings, docker: &crate::docker::Docker, inputs: &Inputs, image: &KindImage) -> Result<()> {
    let work = image::work_dir(settings, "kind-image")?;
    image::ensure_base(settings, docker, &inputs.base, work.path()).await?;
    let total = COMPONENTS.len() as u64 + 2;
    let steps = Steps::new(&format!("kind node image {}", image.tag), total);
    let ctx = work.path().join("context");
    std::fs::create_dir_all(ctx.join("bin")).map_err(|e| Error::io(&ctx, e))?;
    let suffix = crate::process::random_hex(6);
    let mut built = Vec::new();
    let result = async {
        for (n, i) in inputs.images.iter().enumerate() {
            steps.step(n as u64, &format!("image {}", i.reference));
            let build_ref = format!("nodejoin-kind-build/{}:{suffix}", i.component);
            component_image(
                settings,
                docker,
                inputs,
                i,
                &build_ref,
                &work.path().join("images").join(&i.component),
            )
            .await?;
            built.push((build_ref, i.reference.clone()));
        }
        steps.step(COMPONENTS.len() as u64, "docker save");
        let list: String = built.iter().map(|(from, to)| format!("{from} {to}\n")).collect();
        std::fs::write(ctx.join("images.list"), list).map_err(|e| Error::io(&ctx, e))?;
        let names: Vec<&str> = built.iter().map(|(from, _)| from.as_str()).collect();
        crate::docker::images::save(docker, &names, &ctx.join("images.tar")).await
    }
    .await;
    // The temporary names and intermediate stages go whatever happened; the images live on in the archive.
    let names: Vec<&str> = built.iter().map(|(from, _)| from.as_str()).collect();
    crate::docker::images::remove(docker, &names).await;
    crate::docker::images::prune_labelled(docker, BUILD_LABEL).await;
    result?;
    steps.step(total - 1, "docker build + preload");
    let stage = format!("nodejoin-kind-build/node:{suffix}");
    image::copy_tree(settings, &recipe_dir(settings).join("files"), &ctx.join("files"))?;
    std::fs::copy(recipe_dir(settings).join("Dockerfile"), ctx.join("Dockerfile")).map_err(|e| Error::io(&ctx, e))?;
    for (name, bin) in inputs.node_binaries() {
        std::fs::copy(&bin, ctx.join("bin").join(name)).map_err(|e| Error::io(&bin, e))?;
    }
    let sandbox = inputs
        .images
        .iter()
        .find(|i| i.component == "pause")
        .map(|i| i.reference.clone())
        .unwrap_or_default();
    let args = [
        ("BASE", inputs.base.clone()),
        ("KUBERNETES_VERSION", inputs.assets.version.clone()),
        ("SANDBOX_IMAGE", sandbox),
    ];
    image::docker_build(settings, docker, &stage, "kind-node", &[], &args, &ctx).await?;
    let preloaded = preload(docker, &stage, &ctx, &image.tag).await;
    crate::docker::images::remove(docker, &[&stage]).await;
    preloaded?;
    steps.finish("built");
    Ok(())
}

/// Loads the control-plane images into containerd's store in a container of `stage` and commits it as `tag`:
/// the archive is mounted, not copied into a layer, so the image holds the images once.
async fn preload(docker: &crate::docker::Docker, stage: &str, ctx: &Path, tag: &str) -> Result<()> {
    let archive = ctx.join("images.tar");
    let run = crate::docker::images::CommitRun {
        image: stage,
        entrypoint: vec!["/kind/bin/preload-images".into()],
        cmd: vec!["/preload/images.tar".into(), "/kind/images/images.list".into()],
        binds: vec![format!("{}:/preload/images.tar:ro", archive.display())],
        labels: std::collections::HashMap::from([("io.nodejoin.image".to_string(), "kind-preload".to_string())]),
        changes: "ENTRYPOINT [\"/usr/local/bin/entrypoint\"]\nCMD []",
    };
    crate::docker::images::run_and_commit(docker, run, tag).await
}

/// Builds one component image FROM scratch in `dir`, tagged `build_ref`.
async fn component_image(
    settings: &Settings,
    docker: &crate::docker::Docker,
    inputs: &Inputs,
    i: &ComponentImage,
    build_ref: &str,
    dir: &Path,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let bin = match inputs.binary(&i.component) {
        Some(bin) => bin,
        None => image::compile_pause(settings, dir).await?,
    };
    let file = bin
        .file_name()
        .map(|f| f.to_string_lossy().to_string())
        .unwrap_or_else(|| i.component.clone());
    if bin.parent() != Some(dir) {
        std::fs::copy(&bin, dir.join(&file)).map_err(|e| Error::io(&bin, e))?;
    }
    if i.component == "kube-proxy" {
        let tools = recipe_dir(settings).join(PROXY_TOOLS);
        std::fs::copy(&tools, dir.join(PROXY_TOOLS)).map_err(|e| Error::io(&tools, e))?;
    }
    std::fs::write(
        dir.join("Dockerfile"),
        component_dockerfile(&i.component, &file, &inputs.base),
    )
    .map_err(|e| Error::io(dir, e))?;
    crate::docker::images::build(settings, docker, dir, build_ref, &[], &[]).await
}

/// Removes earlier builds for the same version (best effort; an image still used by a container stays).
async fn prune_superseded(settings: &Settings, image: &KindImage) {
    let version = image.alias.rsplit_once(':').map(|(_, v)| v).unwrap_or_default();
    image::prune_builds(settings, REPOSITORY, version, &image.tag).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const V136: &str = "registry.k8s.io/kube-apiserver:v1.36.3
registry.k8s.io/kube-controller-manager:v1.36.3
registry.k8s.io/kube-scheduler:v1.36.3
registry.k8s.io/kube-proxy:v1.36.3
registry.k8s.io/coredns/coredns:v1.14.2
registry.k8s.io/pause:3.10.2
registry.k8s.io/etcd:3.6.8-0
";

    #[test]
    fn kubeadm_image_list_names_each_component_once() {
        let images = parse_image_list(V136).unwrap();
        assert_eq!(images.len(), 7);
        let coredns = images.iter().find(|i| i.component == "coredns").unwrap();
        assert_eq!(coredns.reference, "registry.k8s.io/coredns/coredns:v1.14.2");
        assert_eq!(coredns.tag(), "v1.14.2");
        let etcd = images.iter().find(|i| i.component == "etcd").unwrap();
        assert_eq!(etcd.tag(), "3.6.8-0");
    }

    #[test]
    fn a_missing_or_unknown_image_is_refused() {
        let without_pause: String = V136
            .lines()
            .filter(|l| !l.contains("pause"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert!(parse_image_list(&without_pause).unwrap_err().contains("no pause image"));
        let extra = format!("{V136}registry.k8s.io/something-new:v1\n");
        assert!(parse_image_list(&extra).unwrap_err().contains("something-new"));
        let twice = format!("{V136}registry.k8s.io/pause:3.9\n");
        assert!(parse_image_list(&twice).unwrap_err().contains("more than one pause"));
    }

    #[test]
    fn component_images_put_binaries_where_kubeadm_runs_them() {
        let apiserver = component_dockerfile("kube-apiserver", "kube-apiserver", "base:1");
        assert!(apiserver.starts_with("FROM scratch\n"));
        assert!(apiserver.contains("COPY kube-apiserver /usr/local/bin/kube-apiserver\n"));
        assert!(apiserver.contains("ENV PATH=/usr/local/bin"));
        assert!(
            !apiserver.contains("ENTRYPOINT"),
            "kubeadm's manifest names the command"
        );
        let coredns = component_dockerfile("coredns", "coredns", "base:1");
        assert!(coredns.contains("COPY coredns /coredns\n"));
        assert!(coredns.contains("ENTRYPOINT [\"/coredns\"]"));
        assert!(component_dockerfile("pause", "pause", "base:1").contains("ENTRYPOINT [\"/pause\"]"));
        let proxy = component_dockerfile("kube-proxy", "kube-proxy", "base:1");
        assert!(proxy.starts_with("FROM base:1 AS tools\n"), "{proxy}");
        assert!(proxy.contains("FROM scratch\nCOPY --from=tools /out/ /\n"), "{proxy}");
        assert!(proxy.contains("COPY kube-proxy /usr/local/bin/kube-proxy\n"));
    }
}
