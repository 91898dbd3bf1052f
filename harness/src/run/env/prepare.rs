//! What a set of scenarios needs built before it runs: every node image its groups use and the image each is built
//! over. `nodejoin image prepare` builds them and names them, so a host that cannot build images itself (a VM
//! with no network, a CI job that loads a saved cache) can be given exactly these.
use crate::assets;
use crate::error::Result;
use crate::node::image::{self, NodeImage};
use std::path::PathBuf;

/// One scenario file's images, or why it would not run (then nothing was built for it).
#[derive(Debug, Clone)]
pub struct Prepared {
    pub scenario: String,
    pub images: Vec<NodeImage>,
    pub not_applicable: Option<String>,
}

/// Builds (or finds) the node images the scenarios in `paths` (files or directories) use.
pub async fn images_for(
    settings: &crate::settings::Settings,
    docker: &crate::docker::Docker,
    paths: &[PathBuf],
) -> Result<Vec<Prepared>> {
    let mut out = Vec::new();
    let defaults = crate::scenario::Defaults::from_settings(settings)?;
    for file in crate::scenario::discover(paths)? {
        let sc = crate::scenario::load::load_file(&file, &defaults)?.fetched();
        let mut prepared = Prepared {
            scenario: sc.name.clone(),
            images: Vec::new(),
            not_applicable: sc.not_applicable(),
        };
        if prepared.not_applicable.is_none() {
            let k8s = assets::resolve(settings, &sc.cluster.kubernetes_version).await?;
            // A group that boots a disk of its own has no node image.
            for g in sc.nodes.iter().filter(|g| g.disk.is_none()) {
                let kubelet = assets::kubelet::for_group(settings, &k8s, g.kubelet_version.as_deref()).await?;
                let base = image::for_kubelet(settings, docker, &kubelet, g.containerd_line()).await?;
                let own = match g.image.as_ref().and_then(|i| i.source()) {
                    Some(source) => Some(crate::node::group_image::for_group(settings, docker, &base, source).await?),
                    None => None,
                };
                for i in std::iter::once(base).chain(own) {
                    if !prepared.images.iter().any(|p| p.tag == i.tag) {
                        prepared.images.push(i);
                    }
                }
            }
        }
        out.push(prepared);
    }
    Ok(out)
}

/// The node image of group `group` of the scenario in `file` (its first group when none is named): its base and
/// the group's own layer, built when missing.
pub async fn group_image(
    settings: &crate::settings::Settings,
    docker: &crate::docker::Docker,
    file: &std::path::Path,
    group: Option<&str>,
) -> Result<NodeImage> {
    let defaults = crate::scenario::Defaults::from_settings(settings)?;
    let sc = crate::scenario::load::load_file(file, &defaults)?.fetched();
    let not_found = || {
        let names: Vec<&str> = sc.nodes.iter().map(|g| g.name.as_str()).collect();
        crate::error::Error::Image(format!(
            "{}: no node group {:?} (it has {})",
            file.display(),
            group.unwrap_or_default(),
            names.join(", ")
        ))
    };
    let g = match group {
        Some(name) => sc.nodes.iter().find(|g| g.name == name).ok_or_else(not_found)?,
        None => sc.nodes.first().ok_or_else(not_found)?,
    };
    if let Some(why) = sc.not_applicable() {
        return Err(crate::error::Error::Image(format!("{}: {why}", file.display())));
    }
    if g.disk.is_some() {
        return Err(crate::error::Error::Image(format!(
            "{}: node group {} boots a disk of its own, not a node image",
            file.display(),
            g.name
        )));
    }
    let k8s = assets::resolve(settings, &sc.cluster.kubernetes_version).await?;
    let kubelet = assets::kubelet::for_group(settings, &k8s, g.kubelet_version.as_deref()).await?;
    let base = image::for_kubelet(settings, docker, &kubelet, g.containerd_line()).await?;
    match g.image.as_ref().and_then(|i| i.source()) {
        Some(source) => crate::node::group_image::for_group(settings, docker, &base, source).await,
        None => Ok(base),
    }
}
