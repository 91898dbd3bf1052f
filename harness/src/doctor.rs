//! `nodejoin doctor`: what this machine has and lacks for each part of a run, and how to fix it.
use crate::assets;

/// One prerequisite.
pub struct Finding {
    pub what: String,
    pub ok: bool,
    pub detail: String,
    pub fix: String,
    /// Needed only by an optional part (the k3s and kind providers): missing, it makes trials ignored, not
    /// the machine unfit.
    pub optional: bool,
}

pub async fn check(settings: &crate::settings::Settings, version: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut add = |what: &str, ok: bool, detail: String, fix: &str| {
        out.push(Finding {
            what: what.into(),
            ok,
            detail,
            fix: fix.into(),
            optional: false,
        });
    };
    let share = crate::paths::fixtures_dir(settings);
    let (source, sound) = crate::paths::share_source(settings);
    add(
        "nodejoin's own files (fixtures, kind config)",
        sound && share.join("bootstrap/bootstrap.sh").is_file(),
        source,
        &format!(
            "set {} to a nodejoin checkout's fixtures/, or reinstall nodejoin",
            crate::settings::var::FIXTURES
        ),
    );
    // Not a defect of this machine but what every container node is (docs/src/design/node-privileges.md): said
    // here so nobody takes a node for a sandbox.
    add(
        "node containers' confinement",
        true,
        "as strong as kind's privileged node: a node's root can mount a fresh procfs and write the host's kernel \
         parameters; run only bootstrap code you would run as root here, else confined mode (`run --confined`: \
         VM nodes only)"
            .into(),
        "",
    );
    // What a VM machine (the confined kind) is held by on this host.
    add(
        "VM machines' confinement",
        true,
        format!(
            "a kernel of their own (a fresh procfs reaches only it); {}",
            crate::node::vm::sandbox::confinement().said
        ),
        "",
    );
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
    let found = assets::find(settings, version);
    add(
        &format!("Kubernetes {version} binaries"),
        found.is_some(),
        match &found {
            Some(a) => format!("{} ({})", a.dir.display(), a.source),
            None => format!(
                "not in {} and {} unset",
                assets::cache_dir(settings, version).display(),
                assets::ENV_DIR
            ),
        },
        "nodejoin assets --version <v>  (downloads, or builds from Go modules: needs `go`)",
    );
    for tool in assets::tools::ALL {
        let found = tool.find(settings);
        add(
            &format!("{} {}", tool.name, tool.version(settings)),
            found.is_some(),
            match &found {
                Some(p) => p.display().to_string(),
                None => tool.missing_detail(settings),
            },
            &match assets::releases::asset(tool.name) {
                Some(a) => format!(
                    "nodejoin assets  (downloads {} from {}, checksum verified; else builds it from {}: needs `go`)",
                    tool.name,
                    assets::releases::urls(
                        a,
                        &assets::releases::base_url(settings),
                        &tool.version(settings),
                        assets::releases::arch()
                    )
                    .0,
                    tool.module
                ),
                None => format!(
                    "nodejoin assets  (builds {} from {}: needs `go`; it publishes no release binaries)",
                    tool.name, tool.module
                ),
            },
        );
    }
    let tools = assets::tools::NodeTools::find(settings, settings.containerd());
    let image_present = match (&docker, &found, &tools) {
        (Ok(d), Some(a), Some(n)) => match crate::node::image::expected(settings, &a.kubelet_binary(), n) {
            Ok(img) => {
                let present = crate::node::image::exists(d, &img.tag).await;
                add("node image", present, img.tag.clone(), "nodejoin image build");
                present
            }
            Err(e) => {
                add("node image recipe", false, e.to_string(), "check fixtures/node-image/");
                false
            }
        },
        _ => false,
    };
    // Build tools count as missing only when what they build is missing.
    let need = |needed: bool, have: bool, why: &str| -> (bool, String) {
        match (have, needed) {
            (true, _) => (true, "present".into()),
            (false, true) => (false, format!("needed: {why}")),
            (false, false) => (true, format!("absent, not needed now ({why})")),
        }
    };
    let (ok, detail) = need(
        found.is_none() || tools.is_none(),
        assets::which("go").is_some(),
        "Kubernetes binaries or the node image's Go tools are not cached",
    );
    let detail = match (ok, assets::local_go_version()) {
        (true, Some(v)) => format!(
            "{detail}: {v}, builds run with GOTOOLCHAIN={}{}",
            assets::toolchain_setting(Some(&v)),
            if assets::toolchain_setting(Some(&v)).starts_with("local") {
                String::new()
            } else {
                format!(
                    " (older than {}: fetched through the Go module proxy once)",
                    assets::MIN_GO
                )
            }
        ),
        _ => detail,
    };
    add(
        "go (Kubernetes build)",
        ok,
        detail,
        "install Go (any version: an older one fetches go1.26 itself)",
    );
    for tool in ["debootstrap", "tar", "gcc"] {
        let (ok, detail) = need(
            !image_present,
            assets::which(tool).is_some(),
            "the node image is not built",
        );
        add(tool, ok, detail, &format!("apt-get install {tool}"));
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let (ok, detail) = need(!image_present, root, "debootstrap needs root to build the node image");
    add("root", ok, detail, "run as root (or in a CI job with sudo)");
    let cgroup2 = std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    add(
        "cgroup v2",
        true,
        if cgroup2 {
            "unified hierarchy".into()
        } else {
            "cgroup v1: node images add --fail-cgroupv1=false to the kubelet (a host adaptation each report names)"
                .into()
        },
        "",
    );
    // The container providers, each by its own cheap probe (images looked up locally only, nothing pulled or
    // built), as the registry lists them.
    if let Ok(d) = &docker {
        for r in crate::cluster::REGISTRY.iter().filter(|r| r.name != "local") {
            let provider = r.provider;
            let (ok, detail, fix) = match provider.probe(settings, version, Some(d)).await {
                crate::cluster::Availability::Ready => (true, "ready".to_string(), String::new()),
                crate::cluster::Availability::Fetchable(what) => (
                    false,
                    format!(
                        "not ready: its trials are ignored unless {}={} (then fetched)",
                        crate::settings::var::REQUIRE_PROVIDERS,
                        r.name
                    ),
                    what,
                ),
                crate::cluster::Availability::Unavailable(why) => {
                    (false, format!("{} trials are reported ignored", r.name), why)
                }
            };
            out.push(Finding {
                what: format!("{} provider", r.name),
                ok,
                detail,
                fix,
                optional: true,
            });
        }
        let vm_missing = crate::host::missing_vm_packages();
        out.push(Finding {
            what: "VM nodes (runtime: vm)".into(),
            ok: vm_missing.is_empty() && std::path::Path::new("/dev/net/tun").exists(),
            detail: if vm_missing.is_empty() {
                let kvm = if std::path::Path::new("/dev/kvm").exists() {
                    "/dev/kvm present: KVM if it boots a stock kernel (probed once), else TCG"
                } else {
                    "no /dev/kvm: TCG (software emulation, minutes per node)"
                };
                format!("QEMU, qemu-img and mkfs.ext4 found; {kvm}")
            } else {
                missing_detail(&vm_missing, "installed when a scenario has a VM node")
            },
            fix: apt_fix(&vm_missing),
            optional: true,
        });
        let own_missing = crate::host::missing_own_disk_packages();
        out.push(Finding {
            what: "VM nodes booting your own disk, image export-disk".into(),
            ok: own_missing.is_empty(),
            detail: if own_missing.is_empty() {
                "UEFI firmware (OVMF), mkfs.vfat, mcopy, syslinux, sfdisk and systemd-boot found".into()
            } else {
                missing_detail(&own_missing, "installed when first needed")
            },
            fix: apt_fix(&own_missing),
            optional: true,
        });
        let kind_cli = crate::cluster::kind::find_kind(settings);
        out.push(Finding {
            what: "kind CLI".into(),
            ok: kind_cli.is_some(),
            detail: kind_cli
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "absent: built from sigs.k8s.io/kind when a kind trial runs (needs go)".into()),
            fix: format!("go install sigs.k8s.io/kind@{}", crate::cluster::kind::KIND_VERSION),
            optional: true,
        });
    }
    out
}

/// "missing: pkg (why), …" for packages `host` lists as missing, and when they are installed.
fn missing_detail(missing: &[(&str, &str)], when: &str) -> String {
    let why: Vec<String> = missing.iter().map(|(n, w)| format!("{n} ({w})")).collect();
    format!("missing: {} ({when})", why.join(", "))
}

/// The apt-get command that installs `missing`.
fn apt_fix(missing: &[(&str, &str)]) -> String {
    let names: Vec<&str> = missing.iter().map(|(n, _)| *n).collect();
    format!("apt-get install {}", names.join(" "))
}
