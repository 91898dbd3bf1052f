//! The providers against their real tools, as far as this machine allows: the kind CLI (built from its Go module
//! when missing) must accept the config we render from kind-config/cluster.yaml, getting as far as pulling the
//! node image, and must refuse a broken one, so the check can fail. (k3s has no CLI to ask; its trials are
//! reported ignored when its image cannot be had.)
use nodejoin::cluster::{kind, ClusterSpec};
use std::process::Command;

fn create(kind_bin: &std::path::Path, config: &str, name: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kind.yaml");
    std::fs::write(&file, config).unwrap();
    let out = Command::new(kind_bin)
        .args(["create", "cluster", "--name", name, "--config"])
        .arg(&file)
        .arg("--kubeconfig")
        .arg(dir.path().join("kubeconfig"))
        .output()
        .expect("run kind");
    let _ = Command::new(kind_bin)
        .args(["delete", "cluster", "--name", name])
        .output();
    assert!(
        !out.status.success(),
        "kind cannot have created a cluster from an image that does not exist"
    );
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[tokio::test]
async fn kind_cli_accepts_the_rendered_config() {
    let kind_bin = kind::ensure_kind(
        &nodejoin::settings::resolve::from_process(&nodejoin::settings::Flags::default())
            .expect("the settings resolve"),
    )
    .await
    .expect("the kind CLI (PATH, cache, or Go build)");
    let template = std::fs::read_to_string(nodejoin::paths::workspace_root().join("kind-config/cluster.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let name = format!("nj-cfgcheck-{}", std::process::id());
    let image = "nodejoin.invalid/kind-node:never";
    for version in ["v1.36.3", "v1.30.4"] {
        let spec = ClusterSpec {
            provider: nodejoin::cluster::Provider::KIND,
            version: version.into(),
            service_cidr: "10.100.0.0/16".parse().unwrap(),
            iam_lane: None,
            certificate_lifetime: None,
        };
        let config = kind::render_config(&template, &name, &spec, image, dir.path(), true);
        let err = create(&kind_bin, &config, &name);
        assert!(
            err.contains(&format!("failed to pull image \"{image}\"")),
            "kind refused the config before pulling the node image ({version}):\n{err}"
        );
        if version == "v1.36.3" {
            let broken = config.replace("disableDefaultCNI", "disableDefaultCNIx");
            let err = create(&kind_bin, &broken, &name);
            assert!(err.contains("unable to decode config"), "{err}");
        }
    }
}
