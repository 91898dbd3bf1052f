//! `nodejoin cache-key`: one key for a CI cache of what runs download and build (Kubernetes binaries, the Go-built
//! tools, node images, Go's build cache), computed from what those depend on, so a cache is reused exactly while
//! they stay the same and a fresh one is saved once any changes: nodejoin's own files (the node-image recipe, the
//! Go build modules), each tool's version, the Kubernetes versions and containerd line asked for, the
//! amazon-eks-ami tree `--eks-ami` names, and the scenario files given (with what they name inside those paths).
use crate::assets::{self, tools};
use crate::error::Result;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// The key, `nodejoin-<arch>-<hash>`: the architecture first, since binaries and images are built for one.
pub fn cache_key(s: &crate::settings::Settings, scenarios: &[PathBuf]) -> Result<String> {
    let mut h = Sha256::new();
    let mut line = |k: &str, v: &str| h.update(format!("{k}={v}\n").as_bytes());
    line("format", "1");
    for (name, v) in tools_and_versions(s) {
        line(&name, &v);
    }
    for dir in ["fixtures", "kind-config"] {
        h.update(format!("share:{dir}\n").as_bytes());
        crate::node::inputs::hash_path(s, &mut h, &crate::paths::share_root(s).join(dir))?;
    }
    if let Some(ami) = &s.eks_ami {
        h.update(b"eks-ami\n");
        crate::node::inputs::hash_path_skipping(s, &mut h, ami, &|rel| rel.starts_with(".git"))?;
    }
    for p in scenarios {
        h.update(format!("scenarios:{}\n", p.display()).as_bytes());
        crate::node::inputs::hash_path_skipping(s, &mut h, p, &|rel| rel.starts_with(".git"))?;
    }
    let hex = hex::encode(h.finalize());
    Ok(format!("nodejoin-{}-{}", std::env::consts::ARCH, &hex[..24]))
}

/// The versions a run asked for and the tools' own, as `name=version` pairs in a fixed order.
fn tools_and_versions(s: &crate::settings::Settings) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut versions = s.kubernetes_versions.clone();
    versions.extend(s.kubernetes_version.clone());
    if versions.is_empty() {
        versions.push(assets::DEFAULT_VERSION.to_string());
    }
    versions.sort();
    versions.dedup();
    out.push(("kubernetes".into(), versions.join(",")));
    out.push((
        "containerd-line".into(),
        s.containerd_line.map(|l| l.as_str().to_string()).unwrap_or_default(),
    ));
    for t in tools::ALL {
        out.push((t.name.to_string(), t.version(s)));
    }
    for line in tools::ContainerdLine::ALL
        .into_iter()
        .filter(|l| *l != tools::ContainerdLine::V2_2)
    {
        out.push((
            format!("containerd-{}", line.as_str()),
            tools::containerd_version(s, line),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_follows_the_scenarios_content_and_nothing_else() {
        let settings = crate::settings::for_tests();
        let dir = tempfile::tempdir().unwrap();
        let sc = dir.path().join("scenarios");
        std::fs::create_dir_all(&sc).unwrap();
        std::fs::write(sc.join("a.yaml"), "description: a\n").unwrap();
        let first = cache_key(&settings, std::slice::from_ref(&sc)).unwrap();
        assert!(
            first.starts_with(&format!("nodejoin-{}-", std::env::consts::ARCH)),
            "{first}"
        );
        assert_eq!(
            first,
            cache_key(&settings, std::slice::from_ref(&sc)).unwrap(),
            "the same inputs, the same key"
        );
        std::fs::write(sc.join("a.yaml"), "description: b\n").unwrap();
        assert_ne!(
            first,
            cache_key(&settings, std::slice::from_ref(&sc)).unwrap(),
            "a changed scenario"
        );
        // A `.git` inside is not content.
        std::fs::write(sc.join("a.yaml"), "description: a\n").unwrap();
        std::fs::create_dir_all(sc.join(".git")).unwrap();
        std::fs::write(sc.join(".git/HEAD"), "ref: x\n").unwrap();
        assert_eq!(first, cache_key(&settings, std::slice::from_ref(&sc)).unwrap());
    }
}
