//! The node images an environment provisions for its scenarios: each group's kubelet (the control plane's, or
//! its own version's alone), the node image made with it on a containerd line, and a group's own image over that;
//! each built once per process.
use super::{lock_waiting, Environment};
use crate::assets::{self, kubelet::Kubelet, K8sAssets};
use crate::error::Result;
use crate::node::image::{self, NodeImage};

impl Environment {
    /// The node image for `kubelet` on containerd `line` (built once per process when missing).
    pub async fn image(&self, kubelet: &Kubelet, line: assets::tools::ContainerdLine) -> Result<NodeImage> {
        let mut waited = std::time::Duration::ZERO;
        self.image_timed(kubelet, line, &mut waited).await
    }

    /// The kubelet `group` runs: the control plane's (`assets`), or its own version's alone (`kubeletVersion`,
    /// provisioned once per process), adding to `waited` the time blocked on another scenario's build.
    pub async fn group_kubelet_timed(
        &self,
        assets: &K8sAssets,
        group: &crate::scenario::model::NodeGroup,
        waited: &mut std::time::Duration,
    ) -> Result<Kubelet> {
        self.kubelet_timed(assets, group.kubelet_version.as_deref(), waited)
            .await
    }

    /// The kubelet of `version` (the control plane's, `assets`, when `None` or the same), provisioned once per
    /// process: a group's own (`kubeletVersion`) or the one an `upgrade` step installs.
    pub async fn kubelet_timed(
        &self,
        assets: &K8sAssets,
        version: Option<&str>,
        waited: &mut std::time::Duration,
    ) -> Result<Kubelet> {
        let Some(v) = version.filter(|v| *v != assets.version) else {
            return Ok(assets.kubelet_binary());
        };
        let mut cache = lock_waiting(&self.kubelets, waited).await;
        if let Some(k) = cache.get(v) {
            return Ok(k.clone());
        }
        let k = assets::kubelet::resolve(&self.settings, v).await?;
        cache.insert(v.to_string(), k.clone());
        Ok(k)
    }

    /// [`Self::image`], adding to `waited` the time spent blocked on another scenario's build.
    pub async fn image_timed(
        &self,
        kubelet: &Kubelet,
        line: assets::tools::ContainerdLine,
        waited: &mut std::time::Duration,
    ) -> Result<NodeImage> {
        let key = format!("{} containerd {}", kubelet.version, line.as_str());
        let mut cache = lock_waiting(&self.images, waited).await;
        if let Some(i) = cache.get(&key) {
            return Ok(i.clone());
        }
        let i = image::for_kubelet(&self.settings, &self.docker, kubelet, line).await?;
        cache.insert(key, i.clone());
        Ok(i)
    }

    /// The image a node group runs: its own (an overlay over `base`, an AL2023 layer from an amazon-eks-ami
    /// checkout, or a user's tag checked to exist; built once per process), else `base`.
    pub async fn group_image(
        &self,
        base: &NodeImage,
        group: Option<&crate::scenario::model::GroupImage>,
    ) -> Result<NodeImage> {
        let mut waited = std::time::Duration::ZERO;
        self.group_image_timed(base, group, &mut waited).await
    }

    /// [`Self::group_image`], adding to `waited` the time spent blocked on another scenario's build.
    pub async fn group_image_timed(
        &self,
        base: &NodeImage,
        group: Option<&crate::scenario::model::GroupImage>,
        waited: &mut std::time::Duration,
    ) -> Result<NodeImage> {
        let Some((g, source)) = group.and_then(|g| Some((g, g.source()?))) else {
            return Ok(base.clone());
        };
        let key = format!("{}+{:?}", base.tag, g);
        let mut cache = lock_waiting(&self.images, waited).await;
        if let Some(i) = cache.get(&key) {
            return Ok(i.clone());
        }
        let i = crate::node::group_image::for_group(&self.settings, &self.docker, base, source).await?;
        cache.insert(key, i.clone());
        Ok(i)
    }
}
