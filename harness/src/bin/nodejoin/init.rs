//! `nodejoin init [DIR]`: the starter files for a user's repository (see `nodejoin::init`).
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// The repository to write into.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// Your bootstrap script (installed in the node as /etc/eks/bootstrap.sh); left out, the scenario runs
    /// nodejoin's reference bootstrap until you point it at yours.
    #[arg(long, conflicts_with = "overlay")]
    script: Option<PathBuf>,
    /// A directory laid out like the node's root file system (your AMI's files, e.g. etc/eks/bootstrap.sh),
    /// layered over the node image.
    #[arg(long)]
    overlay: Option<PathBuf>,
    /// The action the workflow uses.
    #[arg(long, default_value = nodejoin::init::DEFAULT_ACTION)]
    action: String,
    /// Overwrite files that exist (otherwise nothing is written when one does).
    #[arg(long)]
    force: bool,
}

pub fn main(args: Args) -> u8 {
    let opts = nodejoin::init::InitOptions {
        dir: args.dir,
        script: args.script,
        overlay: args.overlay,
        action: args.action,
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
