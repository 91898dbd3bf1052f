//! A node group's own image (`image:`): an overlay, a local tag, amazon-eks-ami as a path or a pinned commit, or
//! amazon-eks-ami with an overlay over it (a custom AMI: the EKS AMI plus a Packer layer).
use serde::Deserialize;

/// A node group's own image: `tag`, `overlay` or `amazonEksAmi`, or `amazonEksAmi` with `overlay` (a custom AMI).
#[derive(Debug, Clone, Deserialize, Default, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupImage {
    /// A directory (relative to the scenario file) laid out like the root filesystem, copied over our node image as
    /// one more layer (what `nodejoin image build --overlay DIR` builds). When it holds `etc/eks/bootstrap.sh`,
    /// that script is the node's bootstrap. With `amazonEksAmi` it is laid over the AL2023 image built from that
    /// checkout instead, as a custom AMI's provisioners are over the EKS AMI.
    #[serde(default)]
    pub overlay: Option<String>,
    /// A local image of the user's (it must follow the node image contract, docs/src/user-guide/your-bootstrap.md); it brings its own
    /// `/etc/eks/bootstrap.sh` unless `bootstrap.script` names one.
    #[serde(default)]
    pub tag: Option<String>,
    /// amazon-eks-ami: a checkout (relative to the scenario file; or its `nodeadm/` directory, or a `.tar.gz` of
    /// a checkout), or `{ git: URL, rev: COMMIT }` fetched once and cached. nodeadm is built from it and the AL2023
    /// AMI's runtime files and units are laid out as the AMI build does. `nodejoin run --eks-ami` (or its
    /// variable) names another for every group that has one. Where it is absent or cannot be fetched the scenario
    /// is not run (reported ignored with the fix, never passed).
    #[serde(default)]
    pub amazon_eks_ami: Option<AmazonEksAmi>,
}

/// `image.amazonEksAmi`: a tree on this host, or a commit of a git repository.
#[derive(Debug, Clone, PartialEq, Eq, schemars::JsonSchema)]
#[serde(untagged)]
pub enum AmazonEksAmi {
    /// A checkout, its `nodeadm/`, or a `.tar.gz` of one (relative to the scenario file).
    Path(String),
    /// A commit fetched once (depth 1) into nodejoin's cache.
    Git(GitPin),
}

/// `{ git, rev }`: which repository and which commit of it.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitPin {
    /// The repository: an https://, http:// or git:// URL (e.g. https://github.com/awslabs/amazon-eks-ami).
    pub git: String,
    /// A full commit id (40 hex digits), so what is tested never moves (quote one made of digits only).
    pub rev: String,
    /// Where the commit is kept once fetched (set by the loader).
    #[serde(skip)]
    #[schemars(skip)]
    pub checkout: String,
    /// Why it could not be fetched, once that was tried: the scenario is then ignored with it.
    #[serde(skip)]
    #[schemars(skip)]
    pub unavailable: Option<String>,
}

impl AmazonEksAmi {
    /// Why group `group` cannot run here: its checkout is absent, or its pinned commit could not be fetched.
    pub fn absent(&self, group: &str) -> Option<String> {
        match self {
            AmazonEksAmi::Path(path) => (!std::path::Path::new(path).exists()).then(|| {
                format!(
                    "node group {group}: the amazon-eks-ami checkout {path} is absent (clone one there, or name one \
                     with {ENV_EKS_AMI} or `nodejoin run --eks-ami`)"
                )
            }),
            AmazonEksAmi::Git(pin) => pin.unavailable.as_ref().map(|why| {
                format!(
                    "node group {group}: amazon-eks-ami {} could not be fetched from {}: {why} (name a checkout or a \
                     .tar.gz of one with {ENV_EKS_AMI} or `nodejoin run --eks-ami`, or run where it can be fetched)",
                    pin.rev, pin.git
                )
            }),
        }
    }
}

/// A string is a path, a mapping a pin: each read by its own rules, so a mistake in a pin is named as such (an
/// untagged enum would only say that nothing matched).
impl<'de> Deserialize<'de> for AmazonEksAmi {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = AmazonEksAmi;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a path, or { git: URL, rev: COMMIT }")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
                Ok(AmazonEksAmi::Path(v.to_string()))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> std::result::Result<Self::Value, A::Error> {
                GitPin::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(AmazonEksAmi::Git)
            }
        }
        d.deserialize_any(Either)
    }
}

impl AmazonEksAmi {
    /// Where the tree is on this host (a pinned commit: its place in the cache, there once fetched).
    pub fn path(&self) -> &std::path::Path {
        match self {
            Self::Path(p) => std::path::Path::new(p),
            Self::Git(pin) => std::path::Path::new(&pin.checkout),
        }
    }

    /// Fetches a pinned commit that is not in the cache yet (once per run; a path is left as it is). A failure is
    /// kept as the reason the scenario does not apply here.
    pub fn fetch(&mut self) {
        if let Self::Git(pin) = self {
            if pin.checkout.is_empty() {
                pin.unavailable = Some("no cache directory to fetch the pinned commit into".into());
            } else if pin.unavailable.is_none() && !std::path::Path::new(&pin.checkout).join(".git").is_dir() {
                if let Err(why) =
                    crate::node::eks_ami_git::ensure(std::path::Path::new(&pin.checkout), &pin.git, &pin.rev)
                {
                    pin.unavailable = Some(why);
                }
            }
        }
    }
}

/// Names the amazon-eks-ami checkout every node group with `image.amazonEksAmi` uses instead of its own.
pub const ENV_EKS_AMI: &str = crate::settings::var::EKS_AMI;

impl GroupImage {
    /// What the group's image is made from: its tag, else its amazon-eks-ami checkout (with the overlay over it,
    /// if one is given), else its overlay (the loader checked the combination); `None` for none.
    pub fn source(&self) -> Option<crate::node::group_image::GroupSource<'_>> {
        use crate::node::group_image::GroupSource;
        if let Some(tag) = &self.tag {
            return Some(GroupSource::Tag(tag));
        }
        if let Some(source) = &self.amazon_eks_ami {
            return Some(GroupSource::AmazonEksAmi {
                checkout: source.path(),
                overlay: self.overlay.as_deref().map(std::path::Path::new),
            });
        }
        self.overlay
            .as_deref()
            .map(|dir| GroupSource::Overlay(std::path::Path::new(dir)))
    }
}

#[cfg(test)]
mod tests {
    /// Parsed with a cache directory, where pinned commits are kept.
    fn p(text: &str) -> crate::Result<crate::scenario::Scenario> {
        let defaults = crate::scenario::Defaults {
            cache_dir: Some(crate::paths::cache_dir(&crate::settings::for_tests())),
            ..Default::default()
        };
        crate::scenario::load::parse_with(text, &crate::paths::workspace_root().join("test.yaml"), &defaults)
    }

    #[test]
    fn amazon_eks_ami_is_a_path_or_a_pinned_commit() {
        use crate::scenario::model::AmazonEksAmi;
        let rev = "81fec2e895854f599974fe4d3d72f61c0a9aaffa";
        let with = |v: &str| {
            p(&format!(
                "nodes:\n  - name: a\n    image:\n      amazonEksAmi: {v}\n    userData: {{ nodeadm: {{}} }}\n\
                 cluster: {{ auth: iam }}\n"
            ))
        };
        let s = with(&format!(
            "{{ git: https://github.com/awslabs/amazon-eks-ami, rev: {rev} }}"
        ))
        .unwrap();
        let Some(AmazonEksAmi::Git(pin)) = s.nodes[0].image.as_ref().and_then(|i| i.amazon_eks_ami.clone()) else {
            panic!("not a pin: {:?}", s.nodes[0].image);
        };
        assert_eq!(pin.rev, rev);
        assert!(pin.checkout.ends_with(&format!("eks-ami/{rev}")), "{}", pin.checkout);
        assert_eq!(s.not_applicable(), None, "not fetched yet is not a reason to ignore it");
        let refused = [
            (
                format!("{{ git: https://x/y, revision: {rev} }}"),
                "unknown field `revision`",
            ),
            ("{ git: https://x/y, rev: main }".to_string(), "full commit id"),
            (
                format!("{{ git: 'ext::sh -c id', rev: {rev} }}"),
                "https://, http:// or git://",
            ),
            (
                format!("{{ git: /srv/amazon-eks-ami, rev: {rev} }}"),
                "https://, http:// or git://",
            ),
            ("[a, b]".to_string(), "a path, or { git: URL, rev: COMMIT }"),
        ];
        for (value, why) in refused {
            let e = with(&value).unwrap_err().to_string();
            // The line of the key (`image:` for a rule, `amazonEksAmi:` for its shape).
            assert!(
                e.contains(why) && (e.contains(":3:") || e.contains(":4:")),
                "{value}: {e}"
            );
        }
        // The run's checkout replaces a pin as it replaces a path: nothing is fetched.
        let defaults = crate::scenario::Defaults {
            eks_ami: Some(std::path::PathBuf::from("/srv/eks-ami")),
            ..Default::default()
        };
        let text = format!(
            "nodes:\n  - name: a\n    image: {{ amazonEksAmi: {{ git: https://x/y, rev: {rev} }} }}\n    \
             userData: {{ nodeadm: {{}} }}\ncluster: {{ auth: iam }}\n"
        );
        let s = crate::scenario::load::parse_with(&text, &crate::paths::workspace_root().join("t.yaml"), &defaults)
            .unwrap();
        let source = s.nodes[0]
            .image
            .as_ref()
            .and_then(|i| i.amazon_eks_ami.as_ref())
            .unwrap();
        assert_eq!(source, &AmazonEksAmi::Path("/srv/eks-ami".into()));
    }

    /// A custom AMI: amazon-eks-ami with an overlay over it. A tag is whole, so it takes neither; the run's
    /// checkout still replaces the group's, and an absent one still makes the scenario not apply.
    #[test]
    fn amazon_eks_ami_takes_an_overlay_and_a_tag_takes_neither() {
        use crate::node::group_image::GroupSource;
        use crate::scenario::model::AmazonEksAmi;
        let pin = "{ git: https://github.com/awslabs/amazon-eks-ami, rev: 81fec2e895854f599974fe4d3d72f61c0a9aaffa }";
        let with = |image: &str| {
            format!("nodes:\n  - name: a\n    image: {image}\n    userData: {{ nodeadm: {{}} }}\ncluster: {{ auth: iam }}\n")
        };
        let both = with(&format!("{{ amazonEksAmi: {pin}, overlay: fixtures/overlay-example }}"));
        let s = p(&both).unwrap();
        let image = s.nodes[0].image.as_ref().unwrap();
        let Some(GroupSource::AmazonEksAmi {
            checkout,
            overlay: Some(overlay),
        }) = image.source()
        else {
            panic!("not a custom AMI: {:?}", image.source());
        };
        assert!(
            checkout.ends_with("eks-ami/81fec2e895854f599974fe4d3d72f61c0a9aaffa"),
            "{}",
            checkout.display()
        );
        assert_eq!(overlay, crate::paths::workspace_root().join("fixtures/overlay-example"));
        for image in [
            "{ tag: my-node:dev, overlay: fixtures/overlay-example }".to_string(),
            format!("{{ tag: my-node:dev, amazonEksAmi: {pin} }}"),
            format!("{{ tag: my-node:dev, amazonEksAmi: {pin}, overlay: fixtures/overlay-example }}"),
        ] {
            let e = p(&with(&image)).unwrap_err().to_string();
            assert!(
                e.contains("image.tag names a whole image") && e.contains("test.yaml:3:"),
                "{image}: {e}"
            );
        }
        let e = p(&with(&format!("{{ amazonEksAmi: {pin}, overlay: no/such/dir }}")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("image.overlay") && e.contains("is not a directory"), "{e}");
        // The run's checkout replaces the group's and the overlay stays; an absent one is a reason, not an error.
        let defaults = crate::scenario::Defaults {
            eks_ami: Some(std::path::PathBuf::from("/nonexistent/amazon-eks-ami")),
            ..Default::default()
        };
        let s = crate::scenario::load::parse_with(&both, &crate::paths::workspace_root().join("test.yaml"), &defaults)
            .unwrap();
        let image = s.nodes[0].image.as_ref().unwrap();
        assert_eq!(
            image.amazon_eks_ami,
            Some(AmazonEksAmi::Path("/nonexistent/amazon-eks-ami".into()))
        );
        assert!(image.overlay.is_some());
        let why = s.not_applicable().unwrap_or_default();
        assert!(why.contains("/nonexistent/amazon-eks-ami is absent"), "{why}");
    }
}
