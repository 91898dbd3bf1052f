//! `nodejoin image`: build the node image (or the kind node image, or an overlay), or every image a set of
//! scenarios uses.
use clap::Subcommand;
use nodejoin::session::fail;
use std::path::PathBuf;

#[derive(Subcommand)]
pub(crate) enum ImageCommand {
    /// Build the node image for a Kubernetes version (no registry needed).
    Build {
        /// The Kubernetes version whose kubelet the image carries (vMAJOR.MINOR.PATCH).
        #[arg(long, default_value = nodejoin::assets::DEFAULT_VERSION)]
        version: String,
        /// Also build a layer with this directory's files over the node image (laid out like the root
        /// filesystem, e.g. etc/eks/bootstrap.sh): your bootstrap branch, without a registry.
        #[arg(long)]
        overlay: Option<PathBuf>,
        /// Tag for the overlay image (default nodejoin-overlay:<hash>).
        #[arg(long, requires = "overlay")]
        tag: Option<String>,
        /// Build the kind node image instead (nodejoin-kind-node:<version>): kubeadm, kubelet, kubectl and the
        /// control-plane images, all from Go modules, for the kind provider on machines without kindest/node.
        #[arg(long, conflicts_with_all = ["overlay", "tag"])]
        kind: bool,
    },
    /// Make a CA to serve AWS's names under in DIR, unless DIR holds one (ca.pem, ca-key.pem), for
    /// NODEJOIN_ENDPOINTS_CA: a disk of your own trusts it (add ca.pem to its trust anchors when you build it).
    EndpointsCa {
        /// The directory the CA is kept in (created if missing).
        dir: PathBuf,
    },
    /// Write a disk shaped as an exported image, bootable under UEFI and BIOS (GPT; an EFI system partition with
    /// systemd-boot, syslinux, the kernel and its initramfs; the root) from nodejoin's VM disk of a node group's
    /// image: to try `disk:` of a VM group with, or to start an image of your own from.
    ExportDisk {
        /// The scenario whose node group's image is exported.
        scenario: PathBuf,
        /// The node group (default: the scenario's first).
        #[arg(long)]
        group: Option<String>,
        /// Where the disk is written.
        #[arg(long)]
        out: PathBuf,
        /// The disk's format: qcow2, or raw (a plain image, as `dd` writes it).
        #[arg(long, default_value = "qcow2", value_parser = ["raw", "qcow2"])]
        format: String,
        /// A CA certificate (PEM) to add to the disk's trust anchors, e.g. NODEJOIN_ENDPOINTS_CA's ca.pem.
        #[arg(long)]
        trust: Option<PathBuf>,
    },
    /// Build (or find) every node image the scenarios use, and print their tags, one per line: what a host
    /// that cannot build images (a VM with no network) must be given, e.g. with `docker save`.
    Prepare {
        /// Scenario files or directories (default: scenarios/).
        scenarios: Vec<PathBuf>,
    },
}

pub(crate) async fn main(settings: &nodejoin::settings::Settings, command: ImageCommand) -> u8 {
    match command {
        ImageCommand::Build {
            version, kind: true, ..
        } => {
            let result = async {
                let docker = nodejoin::host::prepare(settings).await?;
                let image = nodejoin::cluster::kind::image::ensure(settings, &docker, &version).await?;
                // The other thing the kind provider needs, so a provisioned machine lists kind trials as ready.
                let kind = nodejoin::cluster::kind::ensure_kind(settings).await?;
                Ok::<_, nodejoin::Error>((image, kind))
            }
            .await;
            match result {
                Ok((img, kind)) => {
                    println!("kind node image {} (tagged {})", img.alias, img.tag);
                    println!("  kind CLI {}", kind.display());
                    for i in &img.images {
                        println!("  preloaded {i}");
                    }
                    println!(
                        "  the kind provider uses it for {version} (or {}={})",
                        nodejoin::settings::var::KIND_IMAGE,
                        img.alias
                    );
                    0
                }
                Err(e) => fail(&e),
            }
        }
        ImageCommand::Build {
            version, overlay, tag, ..
        } => {
            let result = async {
                let assets = nodejoin::assets::resolve(settings, &version).await?;
                let tools = nodejoin::assets::tools::NodeTools::resolve(settings, settings.containerd()).await?;
                let docker = nodejoin::host::prepare(settings).await?;
                let node = nodejoin::node::image::ensure(settings, &docker, &assets.kubelet_binary(), &tools).await?;
                let over = match &overlay {
                    Some(dir) => Some(
                        nodejoin::node::image::ensure_overlay(settings, &docker, &node, dir, tag.as_deref()).await?,
                    ),
                    None => None,
                };
                Ok::<_, nodejoin::Error>((node, over))
            }
            .await;
            match result {
                Ok((img, over)) => {
                    println!("node image {} (base {})", img.tag, img.base);
                    if let Some(o) = over {
                        println!("overlay image {} (over {})", o.tag, o.base);
                        println!(
                            "  use it: {}={} for every scenario, or `image: {{ tag: {} }}` in a node group",
                            nodejoin::settings::var::NODE_IMAGE,
                            o.tag,
                            o.tag
                        );
                    }
                    0
                }
                Err(e) => fail(&e),
            }
        }
        ImageCommand::EndpointsCa { dir } => match nodejoin::pki::Ca::create_in(&dir, "nodejoin AWS endpoints CA") {
            Ok(made) => {
                let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
                let cert = dir.join(nodejoin::pki::keep::CERT_FILE);
                println!("{}", cert.display());
                eprintln!(
                    "{} CA in {}: add {} to your image's trust anchors, and run with {}={}",
                    if made { "a new" } else { "the" },
                    dir.display(),
                    cert.display(),
                    nodejoin::settings::var::ENDPOINTS_CA,
                    dir.display()
                );
                0
            }
            Err(e) => fail(&e),
        },
        ImageCommand::ExportDisk {
            scenario,
            group,
            out,
            format,
            trust,
        } => {
            let result = async {
                let trust = match &trust {
                    Some(path) => {
                        let pem = std::fs::read_to_string(path)
                            .map_err(|e| nodejoin::Error::Image(format!("--trust {}: {e}", path.display())))?;
                        nodejoin::pki::pem_to_der(&pem)?;
                        Some(pem)
                    }
                    None => None,
                };
                let docker = nodejoin::host::prepare(settings).await?;
                let image = nodejoin::run::prepare::group_image(settings, &docker, &scenario, group.as_deref()).await?;
                nodejoin::host::ensure_vm_packages(settings).await?;
                nodejoin::host::ensure_export_packages(settings).await?;
                let (disk, kernel) = nodejoin::node::vm::disk::ensure(settings, &docker, &image).await?;
                nodejoin::node::vm::export::write(&disk, &kernel, trust.as_deref(), &out, &format).await?;
                Ok::<_, nodejoin::Error>(image)
            }
            .await;
            match result {
                Ok(image) => {
                    println!("{}", out.display());
                    eprintln!(
                        "{} ({format}) from {}: boot it with `runtime: vm` and `disk: {{ path: …, format: {format} }}`",
                        out.display(),
                        image.tag
                    );
                    0
                }
                Err(e) => fail(&e),
            }
        }
        ImageCommand::Prepare { mut scenarios } => {
            if scenarios.is_empty() {
                scenarios.push(PathBuf::from("scenarios"));
            }
            let result = async {
                let docker = nodejoin::host::prepare(settings).await?;
                nodejoin::run::prepare::images_for(settings, &docker, &scenarios).await
            }
            .await;
            match result {
                Ok(prepared) => {
                    let mut printed = std::collections::HashSet::new();
                    for p in &prepared {
                        match &p.not_applicable {
                            Some(why) => eprintln!("{}: not run here ({why}): no image", p.scenario),
                            None => {
                                let tags: Vec<&str> = p.images.iter().map(|i| i.tag.as_str()).collect();
                                eprintln!("{}: {}", p.scenario, tags.join(", "));
                            }
                        }
                        for i in &p.images {
                            if printed.insert(i.tag.clone()) {
                                println!("{}", i.tag);
                            }
                        }
                    }
                    0
                }
                Err(e) => fail(&e),
            }
        }
    }
}
