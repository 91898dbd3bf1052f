//! A node group's own image (a scenario's `image`): a user's tag, the AL2023 layer built from an amazon-eks-ami
//! checkout, or an overlay over the base node image.
use std::path::Path;

/// What a node group's own image is made from (a scenario's `image`, which names exactly one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSource<'a> {
    /// A user's local image, checked to exist.
    Tag(&'a str),
    /// The AL2023 layer built from an amazon-eks-ami checkout (or its nodeadm/ directory, or a .tar.gz of one).
    AmazonEksAmi(&'a Path),
    /// A directory laid out like the root file system, copied over `base`.
    Overlay(&'a Path),
}

/// The image a node group with its own `image` runs: a user's tag (checked to exist), the AL2023 layer built from
/// an amazon-eks-ami checkout, or an overlay directory over `base`.
pub async fn for_group(
    settings: &crate::settings::Settings,
    docker: &crate::docker::Docker,
    base: &super::image::NodeImage,
    source: GroupSource<'_>,
) -> crate::error::Result<super::image::NodeImage> {
    match source {
        GroupSource::Tag(tag) => super::image::user_supplied(docker, tag, "image.tag").await,
        GroupSource::AmazonEksAmi(path) => {
            let checkout = super::eks_ami::Checkout::open(settings, path).await?;
            super::eks_ami::ensure_image(settings, docker, base, &checkout).await
        }
        GroupSource::Overlay(dir) => super::image::ensure_overlay(settings, docker, base, dir, None).await,
    }
}
