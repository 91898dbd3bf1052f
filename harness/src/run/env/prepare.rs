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
pub async fn images_for(docker: &crate::docker::Docker, paths: &[PathBuf]) -> Result<Vec<Prepared>> {
    let mut out = Vec::new();
    let defaults = crate::scenario::Defaults::from_settings(crate::settings::get())?;
    for file in crate::scenario::load::discover(paths)? {
        let sc = crate::scenario::load::load_file(&file, &defaults)?;
        let mut prepared = Prepared {
            scenario: sc.name.clone(),
            images: Vec::new(),
            not_applicable: sc.not_applicable(),
        };
        if prepared.not_applicable.is_none() {
            let k8s = assets::resolve(&sc.cluster.kubernetes_version).await?;
            for g in &sc.nodes {
                let base = image::for_assets(docker, &k8s, g.containerd_line()).await?;
                let own = match g.image.as_ref().and_then(|i| i.source()) {
                    Some(source) => Some(crate::node::group_image::for_group(docker, &base, source).await?),
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
