//! The `nodejoin` CLI: provision assets and the node image, check the machine, run scenarios, compare two
//! versions of a bootstrap, scaffold a user's repository.
mod compare;
mod image;
mod init;

use clap::{Parser, Subcommand};
use nodejoin::assets::tools::ContainerdLine;
use nodejoin::reporter::{self, Format};
use nodejoin::run::events::{Event, EventSink, Reporter};
use nodejoin::run::{report, Environment, LazyEnvironment};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use tokio::runtime::Runtime;

#[derive(Parser)]
#[command(
    name = "nodejoin",
    version,
    about = "End-to-end tests for Kubernetes worker-node bootstrap (EKS first)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    /// Check prerequisites and say how to fix what is missing.
    Doctor {
        #[arg(long, default_value = nodejoin::assets::DEFAULT_VERSION)]
        version: String,
    },
    /// Run scenarios (files or directories; default: scenarios/).
    #[command(after_help = EXIT_CODES)]
    Run {
        scenarios: Vec<PathBuf>,
        /// Write JUnit XML here (default: target/nodejoin/<run>/junit.xml).
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Cluster provider: local (embedded processes, the default), k3s or kind (containers). A provider
        /// named here must run: if it cannot, the exit code is 4.
        #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(nodejoin::cluster::names()))]
        provider: Option<String>,
        /// How many scenarios run at once (default: NODEJOIN_JOBS, else 2 per core up to 8, as memory allows).
        #[arg(short = 'j', long)]
        jobs: Option<usize>,
        /// Console output: human (progress, reports, summary) or json (one JSON object per event on stdout).
        #[arg(long, default_value = "human", value_parser = ["human", "json"])]
        format: String,
        /// Also write a Markdown summary here (for a pull request, or GitHub's $GITHUB_STEP_SUMMARY).
        #[arg(long)]
        markdown: Option<PathBuf>,
        /// Build every node group that names an amazon-eks-ami checkout (`image.amazonEksAmi`) from this one
        /// instead: a checkout, its nodeadm/ directory, or a .tar.gz of one (sets NODEJOIN_EKS_AMI).
        #[arg(long, value_name = "PATH")]
        eks_ami: Option<PathBuf>,
        /// The containerd line of node groups that name none: 2.2 (what the EKS AMI ships, the default) or 1.7
        /// (sets NODEJOIN_CONTAINERD_LINE).
        #[arg(long, value_parser = ["2.2", "1.7"])]
        containerd: Option<String>,
    },
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

/// `nodejoin run`'s exit codes (also in the book: docs/src/reference/cli.md); a skip is never a success.
const EXIT_CODES: &str = "Exit codes:
  0    every scenario that ran passed, and at least one ran
  1    a scenario failed, or the run left objects behind
  2    bad input or setup (invalid scenario, Docker unreachable, missing binaries)
  3    a given directory holds no scenario files
  4    the provider cannot run here, and was asked for (--provider, NODEJOIN_REQUIRE_PROVIDERS)
  5    nothing ran: every scenario was skipped (its providers) or ignored (its Kubernetes versions)
  129, 130, 143  ended by SIGHUP, SIGINT or SIGTERM, after removing the run's processes and containers";

/// See `EXIT_CODES`.
const EXIT_NO_SCENARIOS: u8 = 3;
const EXIT_PROVIDER_UNAVAILABLE: u8 = 4;
const EXIT_NOTHING_RAN: u8 = 5;

pub(crate) fn fail(e: &nodejoin::Error) -> ExitCode {
    eprintln!("error: {e}\n  hint: {}", e.hint());
    ExitCode::from(2)
}

fn main() -> ExitCode {
    nodejoin::init_crypto();
    nodejoin::init_tracing();
    let cli = Cli::parse();
    // Read where scenarios are loaded and images chosen: set while this is the process's only thread.
    if let Command::Run {
        eks_ami, containerd, ..
    } = &cli.command
    {
        if let Some(path) = eks_ami {
            if !path.exists() {
                eprintln!("error: --eks-ami {}: no such checkout", path.display());
                eprintln!("  hint: name an amazon-eks-ami checkout, its nodeadm/ directory, or a .tar.gz of one");
                return ExitCode::from(2);
            }
            std::env::set_var(nodejoin::scenario::model::ENV_EKS_AMI, path);
        }
        if let Some(line) = containerd {
            std::env::set_var(nodejoin::assets::tools::ENV_LINE, line);
        }
    }
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("error: cannot start a tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.command {
        // These two share the test harness's environment handling (start on first use, clean up on signals,
        // shut down at the end): `LazyEnvironment`, driven from this thread.
        Command::Run {
            scenarios,
            junit,
            provider,
            jobs,
            format,
            markdown,
            ..
        } => {
            let format = nodejoin::reporter::Format::parse(&format).unwrap_or_default();
            let out = RunOutputs {
                junit,
                markdown,
                format,
            };
            run(rt, scenarios, out, provider.as_deref(), jobs)
        }
        Command::Compare(args) => compare::main(rt, args),
        Command::Init(args) => init::main(args),
        Command::Schema => {
            print!("{}", nodejoin::scenario::schema::text());
            ExitCode::SUCCESS
        }
        Command::Mutate { only, list, scenarios } => mutate(rt, &only, list, &scenarios),
        command => rt.block_on(other(command)),
    }
}

async fn other(command: Command) -> ExitCode {
    match command {
        Command::Assets { version } => {
            let result = async {
                let a = nodejoin::assets::resolve(&version).await?;
                let tools = nodejoin::assets::tools::NodeTools::resolve(ContainerdLine::from_env()).await?;
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
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e),
            }
        }
        Command::Image { command } => image::main(command).await,
        Command::Doctor { version } => {
            let findings = nodejoin::doctor::check(&version).await;
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
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Command::Reap => {
            let docker = nodejoin::docker::connect().await.ok();
            let r = nodejoin::reaper::reap_stale(docker.as_ref()).await;
            println!(
                "reaped {} processes and {} Docker objects from {} runs",
                r.processes,
                r.docker_objects,
                r.runs.len()
            );
            ExitCode::SUCCESS
        }
        Command::Run { .. } | Command::Mutate { .. } | Command::Compare(_) | Command::Init(_) | Command::Schema => {
            ExitCode::from(2)
        }
    }
}

/// The run's environment (signal handlers installed first: a signal at any point removes what the run has
/// created so far), started now so start-up errors come before any output.
pub(crate) fn start_environment(rt: &Arc<Runtime>) -> Result<(Arc<LazyEnvironment>, Arc<Environment>), ExitCode> {
    let lazy = LazyEnvironment::new(rt.clone()).map_err(|e| {
        eprintln!("error: cannot install signal handlers: {e}");
        ExitCode::from(2)
    })?;
    match lazy.get() {
        Ok(env) => Ok((lazy, env)),
        Err(message) => {
            eprintln!("error: {message}");
            let _ = lazy.finish();
            Err(ExitCode::from(2))
        }
    }
}

fn mutate(rt: Arc<Runtime>, only: &[String], list: bool, scenarios: &std::path::Path) -> ExitCode {
    use nodejoin::mutate;
    let selected = match mutate::select(only) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}\n  hint: `nodejoin mutate --list` names every mutation");
            return ExitCode::from(2);
        }
    };
    if list {
        for m in &selected {
            let catchers: Vec<String> = m
                .caught_by
                .iter()
                .map(|c| format!("{} ({})", c.scenario, c.check))
                .collect();
            println!("{:<24} {}; caught by {}", m.name, m.regression, catchers.join(", "));
        }
        return ExitCode::SUCCESS;
    }
    let scratch = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a scratch directory: {e}");
            return ExitCode::from(2);
        }
    };
    let (lazy, env) = match start_environment(&rt) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let mut results = Vec::new();
    let controls = mutate::Controls::default();
    for m in &selected {
        let r = rt.block_on(mutate::run(&env, &controls, m, scenarios, scratch.path()));
        println!("{}", r.line());
        results.push(r);
    }
    drop(env);
    let leftovers = lazy.finish();
    println!("\n{}", mutate::summary(&results));
    if !leftovers.is_empty() {
        eprintln!("error: objects left behind: {}", leftovers.join(", "));
        return ExitCode::from(1);
    }
    if results.iter().all(|r| r.caught()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Where `nodejoin run` reports besides the console.
struct RunOutputs {
    junit: Option<PathBuf>,
    markdown: Option<PathBuf>,
    format: Format,
}

fn run(rt: Arc<Runtime>, paths: Vec<PathBuf>, out: RunOutputs, asked: Option<&str>, jobs: Option<usize>) -> ExitCode {
    let json = out.format == Format::Json;
    let code = run_scenarios(rt, paths, out, asked, jobs);
    // `--format json` always ends with run_finished, even when the run stopped before it began.
    if json && !reporter::json::ended() {
        println!("{}", reporter::json::aborted_line());
    }
    code
}

fn run_scenarios(
    rt: Arc<Runtime>,
    paths: Vec<PathBuf>,
    out: RunOutputs,
    asked: Option<&str>,
    jobs: Option<usize>,
) -> ExitCode {
    let RunOutputs {
        junit,
        markdown,
        format,
    } = out;
    use nodejoin::run::trials;
    use nodejoin::scenario::model::Provider;
    let provider = asked.and_then(Provider::parse).unwrap_or_default();
    let required = match trials::required(std::env::var(trials::ENV_REQUIRE).ok().as_deref(), &Provider::all()) {
        Ok(r) => asked.is_some() || r.contains(&provider),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let (files, scenarios) = match load_scenarios(paths, provider) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    // Scenarios that exclude this Kubernetes version are reported ignored; if that is all of them, nothing runs.
    let unsupported = |s: &nodejoin::scenario::model::Scenario| s.not_applicable();
    let applicable: Vec<&nodejoin::scenario::model::Scenario> = scenarios
        .iter()
        .map(|t| &t.scenario)
        .filter(|s| unsupported(s).is_none())
        .collect();
    if applicable.is_empty() {
        for t in &scenarios {
            if let Some(why) = unsupported(&t.scenario) {
                eprintln!("[nodejoin] ignoring {}: {why}", t.file.display());
            }
        }
        eprintln!(
            "error: nothing to run: all {} scenario file(s) were skipped or ignored on provider {}",
            files.len(),
            provider.as_str()
        );
        return ExitCode::from(EXIT_NOTHING_RAN);
    }
    if required {
        match rt.block_on(provider_unavailable(provider, &applicable)) {
            Ok(None) => {}
            Ok(Some(why)) => {
                eprintln!("error: provider {} cannot run here: {why}", provider.as_str());
                eprintln!(
                    "  hint: {}",
                    nodejoin::Error::ProviderUnavailable {
                        provider: provider.as_str().into(),
                        reason: why
                    }
                    .hint()
                );
                return ExitCode::from(EXIT_PROVIDER_UNAVAILABLE);
            }
            Err(e) => return fail(&e),
        }
    }
    let (lazy, env) = match start_environment(&rt) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let run_id = env.run_id.clone();
    let run_dir = env.run_dir.clone();
    let fakes: Vec<String> = env.fake_urls().iter().map(|(n, u)| format!("{n} {u}")).collect();
    eprintln!("[nodejoin] run {run_id}: fakes {}", fakes.join(", "));
    let jobs = jobs.unwrap_or_else(nodejoin::run::runner::default_jobs).max(1);
    let junit_path = junit.unwrap_or_else(|| run_dir.join("junit.xml"));
    // report.txt first: the console's brief report names it once it is written.
    let mut reporters: Vec<Box<dyn Reporter>> = vec![Box::new(reporter::text::ReportFiles)];
    reporters.push(match format {
        Format::Human => Box::new(reporter::human::Human::new()),
        Format::Json => Box::new(reporter::json::JsonLines::new(std::io::stdout())),
    });
    reporters.push(Box::new(reporter::junit::Junit::new(
        &run_id,
        junit_path,
        format == Format::Json,
    )));
    if let Some(md) = markdown {
        reporters.push(Box::new(reporter::markdown::Markdown::new(md)));
    }
    let finished = nodejoin::run::events::Finished::default();
    reporters.push(Box::new(finished.clone()));
    let events = EventSink::to(reporters);
    let started = std::time::Instant::now();
    // A termination signal ends the process from its handler: the reports still end, with what finished and the
    // rest as cancelled (`run_finished` last on stdout, JUnit and Markdown written).
    {
        let events = events.clone();
        let all: Vec<(String, PathBuf)> = scenarios
            .iter()
            .map(|t| (t.scenario.name.clone(), t.file.clone()))
            .collect();
        nodejoin::signals::before_exit(Box::new(move |signal| {
            let mut reports = finished.reports();
            for (name, file) in all {
                if !reports.iter().any(|r| r.name == name) {
                    let mut r = report::ScenarioReport::new(&name, file);
                    r.outcome = nodejoin::run::Outcome::Error {
                        message: format!("cancelled by {signal} before it finished"),
                        hint: "the run was stopped; run it again".into(),
                    };
                    reports.push(r);
                }
            }
            events.emit(Event::RunFinished {
                reports: Arc::new(reports),
                wall: started.elapsed(),
                leftovers: Vec::new(),
                cancelled: Some(signal),
            });
        }));
    }
    events.emit(Event::RunStarted {
        run_id: run_id.clone(),
        artifacts: run_dir.clone(),
        scenarios: scenarios.len(),
        jobs,
    });
    let reports = rt.block_on(nodejoin::run::runner::run_all(&env, &scenarios, jobs, &events));
    drop(env);
    let leftovers = lazy.finish();
    events.emit(Event::RunFinished {
        reports: Arc::new(reports.clone()),
        wall: started.elapsed(),
        leftovers: leftovers.clone(),
        cancelled: None,
    });
    if !leftovers.is_empty() {
        eprintln!("error: objects left behind: {}", leftovers.join(", "));
        return ExitCode::from(1);
    }
    if reporter::write_failed() {
        eprintln!("error: a report could not be written (see above)");
        eprintln!("  hint: check the --junit/--markdown paths: their directory must exist and be writable");
        return ExitCode::from(1);
    }
    verdict(&reports, required)
}

/// Scenarios loaded from files, each a trial on the provider asked for.
pub(crate) type Loaded = Vec<nodejoin::run::trial::Trial>;

/// The scenario files under `paths` (default: scenarios/), loaded for `provider`; those that run only on other
/// providers are skipped with a line on stderr. Also returns every file found.
pub(crate) fn load_scenarios(
    paths: Vec<PathBuf>,
    provider: nodejoin::scenario::model::Provider,
) -> Result<(Vec<PathBuf>, Loaded), ExitCode> {
    let paths = if paths.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        paths
    };
    let mut files = Vec::new();
    for p in &paths {
        match nodejoin::scenario::discover(std::slice::from_ref(p)) {
            Ok(found) if found.is_empty() => {
                eprintln!("error: {} holds no scenario files (*.yaml, *.yml)", p.display());
                return Err(ExitCode::from(EXIT_NO_SCENARIOS));
            }
            Ok(found) => files.extend(found),
            Err(e) => return Err(fail(&e)),
        }
    }
    let mut scenarios = Vec::new();
    for f in &files {
        match nodejoin::scenario::load_file(f) {
            Ok(s) => {
                if !s.cluster.providers.is_empty() && !s.cluster.providers.contains(&provider) {
                    eprintln!(
                        "[nodejoin] skipping {}: it runs only on {}",
                        f.display(),
                        s.cluster
                            .providers
                            .iter()
                            .map(|p| p.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    );
                    continue;
                }
                scenarios.push(nodejoin::run::trial::Trial::new(f, s, provider))
            }
            Err(e) => return Err(fail(&e)),
        }
    }
    if let Err(e) = nodejoin::scenario::unique_scenarios(scenarios.iter().map(|t| (t.file.as_path(), &t.scenario))) {
        return Err(fail(&e));
    }
    Ok((files, scenarios))
}

/// The exit code of a finished run, from each scenario's verdict (`run::verdict`, as the trials decide theirs):
/// failures first, then a required provider that could not run, then a run in which nothing ran.
fn verdict(reports: &[report::ScenarioReport], required: bool) -> ExitCode {
    use nodejoin::run::verdict::{Required, Verdict};
    let required = Required {
        provider: required,
        scenario: false,
    };
    let verdicts: Vec<(&str, Verdict)> = reports
        .iter()
        .map(|r| (r.name.as_str(), Verdict::of(&r.outcome, || r.failure_lines(), required)))
        .collect();
    if verdicts.iter().any(|(_, v)| matches!(v, Verdict::Failed(_))) {
        return ExitCode::from(1);
    }
    if let Some((name, _)) = verdicts.iter().find(|(_, v)| matches!(v, Verdict::NotRun(_))) {
        eprintln!("error: {name}: the provider cannot run here");
        return ExitCode::from(EXIT_PROVIDER_UNAVAILABLE);
    }
    if !verdicts.iter().any(|(_, v)| *v == Verdict::Passed) {
        eprintln!("error: nothing ran: every scenario was skipped or ignored");
        return ExitCode::from(EXIT_NOTHING_RAN);
    }
    ExitCode::SUCCESS
}

/// Why `provider` cannot run one of `scenarios` here (the full check: it may pull the provider's image), if it
/// cannot; each Kubernetes version is checked once.
async fn provider_unavailable(
    provider: nodejoin::scenario::model::Provider,
    scenarios: &[&nodejoin::scenario::model::Scenario],
) -> nodejoin::Result<Option<String>> {
    let p = provider.get();
    let docker = nodejoin::docker::connect().await?;
    let mut checked = std::collections::BTreeSet::new();
    for s in scenarios {
        if !checked.insert(s.cluster.kubernetes_version.clone()) {
            continue;
        }
        let spec = nodejoin::cluster::ClusterSpec {
            provider,
            version: s.cluster.kubernetes_version.clone(),
            service_cidr: s.cluster.service_cidr(),
            iam_lane: None,
        };
        if let Some(why) = p.unavailable(&spec, &docker).await {
            return Ok(Some(why));
        }
    }
    Ok(None)
}
