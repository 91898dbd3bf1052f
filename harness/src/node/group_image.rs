//! A node group's own image (a scenario's `image`): a user's tag, the AL2023 layer built from an amazon-eks-ami
//! checkout (with an overlay over it: a custom AMI), or an overlay over the base node image.
use std::path::Path;

/// What a node group's own image is made from (a scenario's `image`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupSource<'a> {
    /// A user's local image, checked to exist.
    Tag(&'a str),
    /// The AL2023 layer built from an amazon-eks-ami checkout (or its nodeadm/ directory, or a .tar.gz of one),
    /// with `overlay` over it when given: a custom AMI is the EKS AMI plus its provisioners' layer.
    AmazonEksAmi {
        checkout: &'a Path,
        overlay: Option<&'a Path>,
    },
    /// A directory laid out like the root file system, copied over `base`.
    Overlay(&'a Path),
}

/// The image a node group with its own `image` runs: a user's tag (checked to exist), the AL2023 layer built from
/// an amazon-eks-ami checkout (and an overlay over that, tagged by a hash of the AL2023 image's tag, itself a hash
/// of the checkout, and the overlay's files: either changing rebuilds it), or an overlay directory over `base`.
pub async fn for_group(
    settings: &crate::settings::Settings,
    docker: &crate::docker::Docker,
    base: &super::image::NodeImage,
    source: GroupSource<'_>,
) -> crate::error::Result<super::image::NodeImage> {
    match source {
        GroupSource::Tag(tag) => super::image::user_supplied(docker, tag, "image.tag").await,
        GroupSource::AmazonEksAmi { checkout, overlay } => {
            let checkout = super::eks_ami::Checkout::open(settings, checkout).await?;
            let al2023 = super::eks_ami::ensure_image(settings, docker, base, &checkout).await?;
            match overlay {
                Some(dir) => super::image::ensure_overlay(settings, docker, &al2023, dir, None).await,
                None => Ok(al2023),
            }
        }
        GroupSource::Overlay(dir) => super::image::ensure_overlay(settings, docker, base, dir, None).await,
    }
}

#[cfg(test)]
mod tests {
    /// A custom AMI's image is tagged by the AL2023 image's tag (a hash of the checkout) and the overlay's files:
    /// changing either changes the tag, so the image is rebuilt then and only then.
    #[tokio::test]
    async fn a_custom_ami_is_rebuilt_when_its_checkout_or_its_overlay_changes() {
        let t = tempfile::tempdir().unwrap();
        let settings = &crate::settings::for_tests();
        let (ami, overlay) = (t.path().join("amazon-eks-ami"), t.path().join("layer"));
        std::fs::create_dir_all(ami.join("nodeadm")).unwrap();
        std::fs::write(
            ami.join("nodeadm/go.mod"),
            "module github.com/awslabs/amazon-eks-ami/nodeadm\n",
        )
        .unwrap();
        std::fs::create_dir_all(ami.join("templates/al2023/runtime/rootfs/etc")).unwrap();
        std::fs::create_dir_all(overlay.join("etc/systemd/system")).unwrap();
        std::fs::write(overlay.join("etc/systemd/system/agent.service"), "[Service]\n").unwrap();
        let tag = || async {
            let checkout = super::super::eks_ami::Checkout::open(settings, &ami).await.unwrap();
            let al2023 = super::super::eks_ami::image_hash(settings, "nodejoin-node:v1.36.3-x", &checkout).unwrap();
            let base = format!("{}:{al2023}", super::super::eks_ami::AL2023_REPOSITORY);
            super::super::image::overlay_hash(settings, &base, &overlay).unwrap()
        };
        let first = tag().await;
        assert_eq!(tag().await, first, "nothing changed, nothing is rebuilt");
        std::fs::write(
            overlay.join("etc/systemd/system/agent.service"),
            "[Service]\nType=oneshot\n",
        )
        .unwrap();
        let second = tag().await;
        assert_ne!(second, first, "the overlay changed");
        std::fs::write(ami.join("templates/al2023/runtime/rootfs/etc/motd"), "hi").unwrap();
        assert_ne!(tag().await, second, "the checkout's runtime files changed");
    }
}
