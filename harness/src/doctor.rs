//! `nodejoin doctor`: what this machine has and lacks for each part of a run, and how to fix it.
use crate::assets;

/// One prerequisite.
pub struct Finding {
    pub what: String,
    pub ok: bool,
    pub detail: String,
    pub fix: String,
}

pub async fn check(version: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |what: &str, ok: bool, detail: String, fix: &str| {
        out.push(Finding {
            what: what.into(),
            ok,
            detail,
            fix: fix.into(),
        });
    };
    let docker = crate::docker::connect().await;
    add(
        "Docker engine",
        docker.is_ok(),
        match &docker {
            Ok(_) => "answers".into(),
            Err(e) => e.to_string(),
        },
        "apt-get install docker.io && (dockerd >/var/log/dockerd.log 2>&1 &)",
    );
    let found = assets::find(version);
    add(
        &format!("Kubernetes {version} binaries"),
        found.is_some(),
        match &found {
            Some(a) => format!("{} ({})", a.dir.display(), a.source),
            None => format!(
                "not in {} and {} unset",
                assets::cache_dir(version).display(),
                assets::ENV_DIR
            ),
        },
        "nodejoin assets --version <v>  (downloads, or builds from Go modules: needs `go`)",
    );
    add(
        "go (to build Kubernetes)",
        assets::which("go").is_some(),
        "needed only when binaries are not cached".into(),
        "install Go >= 1.26",
    );
    for tool in ["debootstrap", "tar", "gcc"] {
        add(
            tool,
            assets::which(tool).is_some(),
            "needed to build the node image".into(),
            &format!("apt-get install {tool}"),
        );
    }
    let root = unsafe { libc::geteuid() } == 0;
    add(
        "root",
        root,
        "debootstrap and node containers need root".into(),
        "run as root (or in a CI job with sudo)",
    );
    if let (Ok(d), Some(a)) = (&docker, &found) {
        match crate::node::image::expected(a) {
            Ok(img) => {
                let present = crate::node::image::exists(d, &img.tag).await;
                add("node image", present, img.tag.clone(), "nodejoin image build");
            }
            Err(e) => add("node image recipe", false, e.to_string(), "check fixtures/node-image/"),
        }
    }
    let cgroup2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    add(
        "cgroup v2",
        true,
        if cgroup2 {
            "unified hierarchy".into()
        } else {
            "cgroup v1: kubelet >= 1.35 needs failCgroupV1: false (our bootstrap sets it)".into()
        },
        "",
    );
    out
}
