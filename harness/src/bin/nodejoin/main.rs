//! The `nodejoin` CLI: parses its command line into the settings and a request, and hands it to the library
//! (`nodejoin::session` runs scenarios, `compare`, `mutate`, `doctor`, `init` the rest).
mod compare;
mod image;
mod init;

use clap::{Parser, Subcommand};
use nodejoin::assets::tools::ContainerdLine;
use nodejoin::reporter::{Format, ReporterBuilder};
use nodejoin::session::{self, RunRequest};
use nodejoin::settings::{self, var, Settings};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(
    name = "nodejoin",
    version,
    about = "End-to-end tests for Kubernetes worker-node bootstrap (EKS first)",
    after_help = settings::help()
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// A directory outside a scenario's repository that its paths (script, golden, user data, overlay,
    /// amazon-eks-ami) may lead into; repeatable (also NODEJOIN_ALLOW_PATHS, colon-separated).
    #[arg(long = "allow-path", global = true, value_name = "DIR")]
    allow_path: Vec<PathBuf>,
    /// A nodejoin checkout whose fixtures/ and kind-config/ (build scripts, the kind docker shim: they run as
    /// root) replace the copy built into this binary; for nodejoin's own development (also NODEJOIN_FIXTURES,
    /// naming its fixtures/). Never found from the working directory.
    #[arg(long = "dev-checkout", global = true, value_name = "DIR")]
    dev_checkout: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Command {
    /// Resolve Kubernetes binaries (env dir, cache, official download, or Go-module build).
    Assets {
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
        #[arg(long, default_value = nodejoin::assets::DEFAULT_VERSION)]
        version: String,
    },
    /// Run scenarios (files or directories, searched recursively; default: scenarios/).
    #[command(after_help = format!("{}\n\n{}", session::EXIT_CODES, settings::help()))]
    Run(RunArgs),
    /// List the trials a run would take (`provider/v1.MINOR/scenario`), after the filter and partition: their
    /// files, tags, versions, and why one would be ignored.
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
    #[arg(short = 'E', long = "filterset", value_name = "EXPR")]
    filters: Vec<nodejoin::select::Filter>,
    /// Run one shard: count:K/N or hash:K/N, split as nextest splits the same trial names.
    #[arg(long, value_name = "KIND:K/N")]
    partition: Option<nodejoin::select::Partition>,
}

impl SelectArgs {
    fn selection(&self) -> nodejoin::select::Selection {
        let filter = match self.filters.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => {
                let any: Vec<String> = many.iter().map(|f| format!("({f})")).collect();
                any.join(" | ").parse().ok()
            }
        };
        nodejoin::select::Selection {
            filter,
            partition: self.partition,
            only: None,
        }
    }
}

#[derive(clap::Args)]
struct ListArgs {
    scenarios: Vec<PathBuf>,
    #[command(flatten)]
    select: SelectArgs,
    /// The provider whose trials to list (default: the profile's, else local).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(nodejoin::cluster::names()))]
    provider: Option<String>,
    /// text, or json (an array: name, scenario, file, provider, providers, kubernetesVersion,
    /// kubernetesVersions, tags, ignored).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
    /// The profile of .config/nodejoin.toml (default: default).
    #[arg(long, env = var::PROFILE)]
    profile: Option<String>,
    /// The Kubernetes version of scenarios that name none; several (comma-separated or repeated) make trials
    /// for each.
    #[arg(long, env = var::K8S_VERSION, value_name = "VERSION", value_delimiter = ',')]
    kubernetes_version: Vec<String>,
}

#[derive(clap::Args)]
struct RunArgs {
    scenarios: Vec<PathBuf>,
    #[command(flatten)]
    select: SelectArgs,
    /// Run a failed scenario again up to N times; one that passes on a later attempt is FLAKY (it passes the
    /// run unless the profile's flaky-result is fail).
    #[arg(long, env = var::RETRIES, value_name = "N")]
    retries: Option<u32>,
    /// Run only what failed in the last run of the same partition (its record is in the artifacts directory).
    #[arg(long)]
    rerun_failed: bool,
    /// The profile of .config/nodejoin.toml (found from the working directory upwards; default: default).
    #[arg(long, env = var::PROFILE)]
    profile: Option<String>,
    /// Write JUnit XML here (default: target/nodejoin/<run>/junit.xml).
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Cluster provider: local (embedded processes, the default), k3s or kind (containers). A provider named
    /// here must run: if it cannot, the exit code is 4.
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(nodejoin::cluster::names()))]
    provider: Option<String>,
    /// How many scenarios run at once (default: 2 per core up to 8, as memory allows).
    #[arg(short = 'j', long, env = var::JOBS)]
    jobs: Option<usize>,
    /// Console output: human (progress, reports, summary) or json (one JSON object per event on stdout).
    #[arg(long, value_enum, default_value_t = Format::Human)]
    format: Format,
    /// Also write a Markdown summary here (for a pull request, or GitHub's $GITHUB_STEP_SUMMARY).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// The Kubernetes version of scenarios that name none (default: the built-in one); several
    /// (comma-separated or repeated) make trials for each, named provider/v1.MINOR/scenario.
    #[arg(long, env = var::K8S_VERSION, value_name = "VERSION", value_delimiter = ',')]
    kubernetes_version: Vec<String>,
    /// Build every node group that names an amazon-eks-ami checkout (`image.amazonEksAmi`) from this one
    /// instead: a checkout, its nodeadm/ directory, or a .tar.gz of one.
    #[arg(long, env = var::EKS_AMI, value_name = "PATH")]
    eks_ami: Option<PathBuf>,
    /// The containerd line of node groups that name none: 2.2 (what the EKS AMI ships, the default), 1.7, or
    /// the lines ahead of the AMI, 2.3 and 2.4.
    #[arg(long, env = var::CONTAINERD_LINE, value_parser = ["2.2", "1.7", "2.3", "2.4"])]
    containerd: Option<String>,
}

fn main() -> ExitCode {
    nodejoin::init_crypto();
    nodejoin::init_tracing();
    let cli = Cli::parse();
    // The settings, read once: the environment's, with this command's flags over them; installed before
    // anything reads them.
    let mut settings = Settings::from_env();
    let profile = match &cli.command {
        Command::Run(args) => args.profile.clone(),
        Command::List(args) => args.profile.clone(),
        _ => None,
    };
    if let Err(e) = with_profile(&mut settings, profile.as_deref()) {
        eprintln!("error: {e}");
        eprintln!("  hint: see the book's page on running from your repository for the file's keys");
        return ExitCode::from(session::EXIT_BAD_INPUT);
    }
    settings.allow_paths.extend(cli.allow_path.iter().cloned());
    if let Some(dir) = &cli.dev_checkout {
        if !dir.join("fixtures/bootstrap/bootstrap.sh").is_file() || !dir.join("kind-config").is_dir() {
            eprintln!("error: --dev-checkout {}: not a nodejoin checkout", dir.display());
            eprintln!("  hint: name the folder holding fixtures/ and kind-config/");
            return ExitCode::from(session::EXIT_BAD_INPUT);
        }
        settings.fixtures = Some(dir.join("fixtures"));
    }
    if let Command::List(args) = &cli.command {
        settings.set_versions(args.kubernetes_version.clone());
    }
    if let Command::Run(args) = &cli.command {
        if let Some(path) = &args.eks_ami {
            if !path.exists() {
                eprintln!("error: --eks-ami {}: no such checkout", path.display());
                eprintln!("  hint: name an amazon-eks-ami checkout, its nodeadm/ directory, or a .tar.gz of one");
                return ExitCode::from(session::EXIT_BAD_INPUT);
            }
        }
        // The caller's own checkout is the caller's to read (a profile's is held to the repository).
        settings.allow_paths.extend(args.eks_ami.iter().cloned());
        settings.eks_ami = args.eks_ami.clone().or(settings.eks_ami);
        settings.containerd_line = args.containerd.clone().or(settings.containerd_line);
        settings.set_versions(args.kubernetes_version.clone());
        settings.jobs = args.jobs.or(settings.jobs);
    }
    if settings::install(settings).is_err() {
        eprintln!("error: the settings were read before the command line was parsed (a harness bug)");
        return ExitCode::from(session::EXIT_BAD_INPUT);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("error: cannot start a tokio runtime: {e}");
            return ExitCode::from(session::EXIT_BAD_INPUT);
        }
    };
    let code = match cli.command {
        Command::Run(args) => session::run(
            rt,
            RunRequest {
                paths: args.scenarios,
                provider: args.provider.as_deref().and_then(nodejoin::cluster::Provider::parse),
                jobs: args.jobs,
                reporters: ReporterBuilder {
                    format: args.format,
                    junit: args.junit,
                    markdown: args.markdown,
                    annotations: settings::get().github_actions,
                },
                selection: args.select.selection(),
                retries: args.retries,
                rerun_failed: args.rerun_failed,
            },
        ),
        Command::List(args) => session::list(
            args.scenarios,
            args.provider.as_deref().and_then(nodejoin::cluster::Provider::parse),
            &args.select.selection(),
            args.format == "json",
        ),
        Command::Compare(args) => compare::main(rt, args),
        Command::Init(args) => init::main(args),
        Command::Schema => {
            print!("{}", nodejoin::scenario::schema::text());
            0
        }
        Command::Mutate { only, list, scenarios } => nodejoin::mutate::command(rt, &only, list, &scenarios),
        Command::Image { command } => rt.block_on(image::main(command)),
        Command::Assets { version } => rt.block_on(assets(&version)),
        Command::Doctor { version } => rt.block_on(doctor(&version)),
        Command::CacheKey { mut scenarios } => {
            if scenarios.is_empty() {
                scenarios.push(PathBuf::from("scenarios"));
            }
            match nodejoin::run::env::cache_key::cache_key(&scenarios) {
                Ok(key) => {
                    println!("{key}");
                    0
                }
                Err(e) => nodejoin::session::fail(&e),
            }
        }
        Command::Reap => rt.block_on(reap()),
    };
    ExitCode::from(code)
}

/// Lays the profile of the repository's `.config/nodejoin.toml` (if there is one) under `settings`.
fn with_profile(settings: &mut Settings, named: Option<&str>) -> Result<(), String> {
    use settings::config::{self, Config};
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    let name = named.unwrap_or(config::DEFAULT_PROFILE);
    let Some(path) = config::find(&cwd) else {
        if name != config::DEFAULT_PROFILE {
            return Err(format!(
                "--profile {name}: no {} in {} or above",
                config::FILE,
                cwd.display()
            ));
        }
        return Ok(());
    };
    let file = Config::read(&path)?;
    file.profile(name)?.under(&file, settings);
    settings.profile = Some(name.to_string());
    Ok(())
}

async fn assets(version: &str) -> u8 {
    let result = async {
        let a = nodejoin::assets::resolve(version).await?;
        let tools = nodejoin::assets::tools::NodeTools::resolve(ContainerdLine::from_settings()).await?;
        Ok::<_, nodejoin::Error>((a, tools))
    }
    .await;
    match result {
        Ok((a, tools)) => {
            println!(
                "Kubernetes {} binaries in {} (source: {})",
                a.version,
                a.dir.display(),
                a.source
            );
            for (name, bin) in tools.binaries() {
                println!("{name} at {}", bin.display());
            }
            0
        }
        Err(e) => session::fail(&e),
    }
}

async fn doctor(version: &str) -> u8 {
    let findings = nodejoin::doctor::check(version).await;
    let mut ok = true;
    for f in &findings {
        let tag = match (f.ok, f.optional) {
            (true, _) => "ok  ",
            (false, true) => "opt ",
            (false, false) => "MISS",
        };
        println!("{tag} {:<32} {}", f.what, f.detail);
        if !f.ok {
            ok &= f.optional;
            println!("     fix: {}", f.fix);
        }
    }
    u8::from(!ok)
}

async fn reap() -> u8 {
    let docker = nodejoin::docker::connect().await.ok();
    let r = nodejoin::reaper::reap_stale(docker.as_ref()).await;
    println!(
        "reaped {} processes and {} Docker objects from {} runs",
        r.processes,
        r.docker_objects,
        r.runs.len()
    );
    0
}
