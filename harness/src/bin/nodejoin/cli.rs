//! The command line: clap's definitions, and what a command gives the settings ([`Cli::flags`]): each flag a
//! setting has is passed under its row's key, and the settings resolve it with the variables and the profile.
use crate::{compare, image, init};
use clap::{Parser, Subcommand};
use nodejoin::reporter::Format;
use nodejoin::session;
use nodejoin::settings::{self, Flags};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "nodejoin",
    version,
    about = "End-to-end tests for Kubernetes worker-node bootstrap (EKS first)",
    after_help = settings::help()
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// A directory outside a scenario's repository that its paths (script, golden, user data, overlay,
    /// amazon-eks-ami) may lead into; repeatable (also NODEJOIN_ALLOW_PATHS, colon-separated).
    #[arg(long = "allow-path", global = true, value_name = "DIR")]
    pub allow_path: Vec<PathBuf>,
    /// A nodejoin checkout whose fixtures/ and kind-config/ (build scripts, the kind docker shim: they run as
    /// root) replace the copy built into this binary; for nodejoin's own development (also NODEJOIN_FIXTURES,
    /// naming its fixtures/). Never found from the working directory.
    #[arg(long = "dev-checkout", global = true, value_name = "DIR")]
    pub dev_checkout: Option<PathBuf>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Resolve Kubernetes binaries (env dir, cache, official download, or Go-module build).
    Assets {
        /// The Kubernetes version (vMAJOR.MINOR.PATCH).
        #[arg(long, default_value = nodejoin::assets::DEFAULT_VERSION)]
        version: String,
    },
    /// Node image commands.
    Image {
        #[command(subcommand)]
        command: image::ImageCommand,
    },
    /// Print a key for a CI cache of the Kubernetes binaries, tools, node images and Go build cache: it changes
    /// exactly when what they depend on does (nodejoin's files, tool and Kubernetes versions, the containerd
    /// line, the --eks-ami tree, the scenario files given).
    CacheKey {
        /// Scenario files or directories (default: scenarios/).
        scenarios: Vec<PathBuf>,
    },
    /// Check prerequisites and say how to fix what is missing.
    Doctor {
        /// The Kubernetes version whose binaries are looked for (vMAJOR.MINOR.PATCH).
        #[arg(long, default_value = nodejoin::assets::DEFAULT_VERSION)]
        version: String,
    },
    /// Run scenarios (files or directories, searched recursively; default: scenarios/).
    #[command(after_help = format!("{}\n\n{}", session::EXIT_CODES, settings::help()))]
    Run(RunArgs),
    /// List the trials a run with the same options would take (`provider/v1.MINOR/scenario`), after the filter,
    /// partition and rerun: their files, tags, versions, and why one would be ignored.
    List(ListArgs),
    /// Run the same scenarios against two versions of a bootstrap and show what differs on the node: Node
    /// fields, the kubelet's /configz and command line, files written, AWS/IMDS calls, programs run, timings and
    /// check outcomes. A side is script:FILE, overlay:DIR, image:TAG, user-data:FILE, eks-ami:PATH, git:REV (the scenarios and
    /// what they refer to at that revision), a file (script) or directory (overlay); left out, the scenarios
    /// as written.
    #[command(after_help = compare::EXIT_CODES)]
    Compare(compare::Args),
    /// Write a starter nodejoin/ folder (a scenario for your bootstrap script or image overlay, a README) and a
    /// GitHub workflow into a repository.
    Init(init::Args),
    /// Remove what killed runs left behind (processes, containers, networks).
    Reap,
    /// Print the JSON Schema of scenario files (editors use it for completion and checks: a scenario's first
    /// line `# yaml-language-server: $schema=nodejoin.schema.json` names a copy beside it).
    Schema,
    /// Run the mutation catalogue: deliberate regressions planted in the reference bootstrap and user-data
    /// generators, each against the scenario that must catch it. Exit 0 only when every one is caught.
    Mutate {
        /// Only these mutations (default: all).
        #[arg(long = "only")]
        only: Vec<String>,
        /// List the catalogue and exit.
        #[arg(long)]
        list: bool,
        /// Where the catchers' scenario files are.
        #[arg(long, default_value = "scenarios")]
        scenarios: PathBuf,
    },
}

/// Which trials: nextest's filter and partition options.
#[derive(clap::Args, Clone)]
pub struct SelectArgs {
    /// A filter expression, as nextest's filtersets: test(NAME), scenario(GLOB), file(GLOB), tag(TAG),
    /// provider(P), version(V); and, or, not, |, &, !, -, parentheses. Matchers: =exact, ~contains, /regex/,
    /// #glob. Repeated: any of them.
    /// A filter that does not parse exits 94, as nextest's.
    #[arg(short = 'E', long = "filterset", value_name = "EXPR")]
    pub filters: Vec<String>,
    /// Run one shard: count:K/N or hash:K/N, split as nextest splits the same trial names.
    #[arg(long, value_name = "KIND:K/N")]
    pub partition: Option<nodejoin::select::Partition>,
}

impl SelectArgs {
    /// The selection; a filter that does not parse is said, and its exit code (94) returned.
    pub fn selection(&self) -> Result<nodejoin::select::Selection, u8> {
        let mut parsed = Vec::new();
        for text in &self.filters {
            match text.parse::<nodejoin::select::Filter>() {
                Ok(f) => parsed.push(f),
                Err(e) => {
                    eprintln!("error: -E '{text}': {e}");
                    eprintln!("  hint: see `nodejoin run --help` for the filter language");
                    return Err(session::exit::INVALID_FILTER_EXPRESSION);
                }
            }
        }
        let filter = match parsed.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => {
                let any: Vec<String> = many.iter().map(|f| format!("({f})")).collect();
                any.join(" | ").parse().ok()
            }
        };
        Ok(nodejoin::select::Selection {
            filter,
            partition: self.partition,
            only: None,
        })
    }
}

/// The options that decide which trials a run takes and how they are named, shared by `run` and `list` (nextest's
/// list takes every selection option its run takes).
#[derive(clap::Args)]
pub struct TrialArgs {
    /// Files or directories (searched recursively; default: scenarios/).
    pub scenarios: Vec<PathBuf>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Only what failed in the last run of the same partition (its record is in the artifacts directory).
    #[arg(long)]
    pub rerun_failed: bool,
    /// The profile of .config/nodejoin.toml (found from the working directory upwards; default: default).
    #[arg(long)]
    pub profile: Option<String>,
    /// Cluster provider: local (embedded processes, the default), k3s or kind (containers). A provider named
    /// here must run: if it cannot, the run fails (exit 100).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(nodejoin::cluster::names()))]
    pub provider: Option<String>,
    /// The Kubernetes version of scenarios that name none (default: the built-in one); several
    /// (comma-separated or repeated) make trials for each, named provider/v1.MINOR/scenario.
    #[arg(long, value_name = "VERSION", value_delimiter = ',')]
    pub kubernetes_version: Vec<String>,
    /// Build every node group that names an amazon-eks-ami checkout (`image.amazonEksAmi`) from this one
    /// instead: a checkout, its nodeadm/ directory, or a .tar.gz of one.
    #[arg(long, value_name = "PATH")]
    pub eks_ami: Option<PathBuf>,
    /// The containerd line of node groups that name none: 2.2 (what the EKS AMI ships, the default), 1.7, or
    /// the lines ahead of the AMI, 2.3 and 2.4.
    #[arg(long, value_parser = ["2.2", "1.7", "2.3", "2.4"])]
    pub containerd: Option<String>,
    /// Confined mode: every node must be a machine that cannot reach this host's kernel (`runtime: vm`); a
    /// scenario with container nodes is refused, with the reason (exit 104). For code you do not vouch for (a
    /// fork's pull request). Also NODEJOIN_CONFINED=true or a profile's `confined = true`.
    #[arg(long)]
    pub confined: bool,
}

impl TrialArgs {
    /// The settings these give, by row key.
    fn flags(&self, flags: &mut Flags) -> Result<(), String> {
        if let Some(path) = self.eks_ami.as_ref().filter(|p| !p.exists()) {
            return Err(format!(
                "--eks-ami {}: no such checkout (name an amazon-eks-ami checkout, its nodeadm/ directory, \
                 or a .tar.gz of one)",
                path.display()
            ));
        }
        flags
            .set_some("profile", self.profile.as_ref())
            .set_some("provider", self.provider.as_ref())
            .set_some("confined", self.confined.then_some("true"))
            .set_some("containerd", self.containerd.as_ref())
            .set_some("eks-ami", self.eks_ami.as_ref().map(|p| p.display()))
            .set("kubernetes-version", self.kubernetes_version.iter().cloned());
        Ok(())
    }
}

#[derive(clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub trials: TrialArgs,
    /// human (a trial a line), or json (an array: name, scenario, file, provider, providers,
    /// kubernetesVersion, kubernetesVersions, tags, ignored).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
}

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub trials: TrialArgs,
    /// Run a failed scenario again up to N times; one that passes on a later attempt is FLAKY (it passes the
    /// run unless the profile's flaky-result is fail).
    #[arg(long, value_name = "N")]
    pub retries: Option<u32>,
    /// What a run in which nothing ran exits with: fail (4, the default), warn (0, said) or pass (0), as
    /// cargo-nextest's --no-tests. Also NODEJOIN_NO_TESTS or a profile's `no-tests`.
    #[arg(long, value_name = "fail|warn|pass", value_parser = ["fail", "warn", "pass"])]
    pub no_tests: Option<String>,
    /// Write JUnit XML here (default: target/nodejoin/<run>/junit.xml).
    #[arg(long)]
    pub junit: Option<PathBuf>,
    /// How many scenarios run at once (default: 2 per core up to 8, as memory allows).
    #[arg(short = 'j', long)]
    pub jobs: Option<usize>,
    /// Console output: human (progress, reports, summary) or json (one JSON object per event on stdout, each
    /// with its formatVersion).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Also write a Markdown summary here (for a pull request, or GitHub's $GITHUB_STEP_SUMMARY).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
}

impl Cli {
    /// The settings this command line gives, by row key; an error is bad input, said as one line.
    pub fn flags(&self) -> Result<Flags, String> {
        let mut flags = Flags::default();
        flags.set("allow-path", self.allow_path.iter().map(|p| p.display().to_string()));
        if let Some(dir) = &self.dev_checkout {
            if !dir.join("fixtures/bootstrap/bootstrap.sh").is_file() || !dir.join("kind-config").is_dir() {
                return Err(format!(
                    "--dev-checkout {}: not a nodejoin checkout (name the folder holding fixtures/ and kind-config/)",
                    dir.display()
                ));
            }
            flags.set("fixtures", [dir.join("fixtures").display().to_string()]);
        }
        match &self.command {
            Command::List(args) => args.trials.flags(&mut flags)?,
            Command::Run(args) => {
                args.trials.flags(&mut flags)?;
                flags
                    .set_some("jobs", args.jobs)
                    .set_some("retries", args.retries)
                    .set_some("no-tests", args.no_tests.as_ref());
            }
            _ => {}
        }
        Ok(flags)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `--help` describes every command and option, and the book's command-line page lists every flag of the
    /// commands a user types most (its table and sections are what the book claims `--help` has).
    #[test]
    fn help_describes_every_option_and_the_book_lists_the_flags() {
        let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/src/reference/cli.md"))
            .unwrap_or_default();
        let mut cli = Cli::command();
        cli.build();
        let mut undescribed = Vec::new();
        let mut unlisted = Vec::new();
        fn visit(c: &clap::Command, path: &str, page: &str, undescribed: &mut Vec<String>, unlisted: &mut Vec<String>) {
            if c.get_about().is_none() && !path.is_empty() {
                undescribed.push(format!("nodejoin{path}"));
            }
            for a in c.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(
                    a.get_action(),
                    clap::ArgAction::Help | clap::ArgAction::HelpLong | clap::ArgAction::Version
                ) {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    undescribed.push(format!("nodejoin{path} {id}"));
                }
                let listed = ["run", "list", "init", "compare"]
                    .iter()
                    .any(|n| path == format!(" {n}"));
                if let (true, Some(long)) = (listed, a.get_long()) {
                    if !a.is_global_set() && !page.contains(&format!("--{long}")) {
                        unlisted.push(format!("nodejoin{path} --{long}"));
                    }
                }
            }
            for sub in c.get_subcommands() {
                visit(sub, &format!("{path} {}", sub.get_name()), page, undescribed, unlisted);
            }
        }
        visit(&cli, "", &page, &mut undescribed, &mut unlisted);
        assert!(undescribed.is_empty(), "without help text: {undescribed:#?}");
        assert!(unlisted.is_empty(), "not on docs/src/reference/cli.md: {unlisted:#?}");
    }
}
