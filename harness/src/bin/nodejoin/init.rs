//! `nodejoin init [DIR]`: the starter files for a user's repository (see `nodejoin::init`).
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The repository to write into.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Your bootstrap script (installed in the node as /etc/eks/bootstrap.sh); left out, the scenario runs
    /// nodejoin's reference bootstrap until you point it at yours.
    #[arg(long, conflicts_with_all = ["overlay", "user_data", "eks_ami"])]
    script: Option<PathBuf>,
    /// A directory laid out like the node's root file system (your AMI's files, e.g. etc/eks/bootstrap.sh),
    /// layered over the node image.
    #[arg(long, conflicts_with_all = ["user_data", "eks_ami"])]
    overlay: Option<PathBuf>,
    /// User data a producer rendered for your cluster (Karpenter's, Terraform's, eksctl's output saved to a
    /// file): served to the node as it is, its API server endpoint and CA pointed at the run's.
    #[arg(long)]
    user_data: Option<PathBuf>,
    /// An amazon-eks-ami tree (`.` in a fork of it): the node runs its nodeadm and AL2023 runtime files.
    #[arg(long)]
    eks_ami: Option<PathBuf>,
    /// The producer that writes your nodes' user data: karpenter, eksctl, capa (Cluster API), eks-managed, or
    /// terraform (a renderer script the scenario runs, to point at your module); the node runs the AL2023 AMI's
    /// nodeadm (of --eks-ami when given).
    #[arg(long, conflicts_with_all = ["script", "overlay", "user_data"],
          value_parser = clap::builder::PossibleValuesParser::new(["karpenter", "eksctl", "capa", "eks-managed", "terraform"]))]
    producer: Option<String>,
    /// The action the workflow uses (default: nodejoin's, pinned by the commit a release binary was built from;
    /// else at this version's tag, which init says to pin).
    #[arg(long)]
    action: Option<String>,
    /// Overwrite files that exist (otherwise nothing is written when one does).
    #[arg(long)]
    force: bool,
}

pub fn main(args: Args) -> u8 {
    let opts = nodejoin::init::InitOptions {
        dir: args.dir,
        script: args.script,
        overlay: args.overlay,
        user_data: args.user_data,
        eks_ami: args.eks_ami,
        producer: args.producer.as_deref().and_then(nodejoin::init::Producer::parse),
        action: args.action.unwrap_or_else(nodejoin::init::default_action),
        force: args.force,
    };
    match nodejoin::init::scaffold(&opts) {
        Ok(done) => {
            for p in &done.written {
                println!("wrote {}", p.display());
            }
            for n in &done.notes {
                println!("note: {n}");
            }
            println!(
                "next: nodejoin run {}",
                opts.dir
                    .join(nodejoin::init::SCENARIO)
                    .parent()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            );
            0
        }
        Err(e) => nodejoin::session::fail(&e),
    }
}
