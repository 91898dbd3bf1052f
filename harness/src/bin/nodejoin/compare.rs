//! `nodejoin compare`: the scenarios run once per side (`--base`, `--head`), each node snapshotted before
//! teardown, and the snapshots compared (`nodejoin::compare`).
use nodejoin::compare::diff::{self, Thresholds};
use nodejoin::compare::render;
use nodejoin::compare::snapshot::ScenarioSnapshot;
use nodejoin::compare::variant::{Variant, Worktree, FORMS};
use nodejoin::run::events::{Event, EventSink, Reporter};
use nodejoin::run::report::ScenarioReport;
use nodejoin::run::trial::Trial;
use nodejoin::scenario::model::{Provider, Scenario};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::runtime::Runtime;

pub const EXIT_CODES: &str = "Exit codes (cargo-nextest's, as `nodejoin run`):
  0    no check that passed on the base fails on the head (differences or not)
  2    the command line is wrong
  94   a filter expression does not parse
  96   setup: a side that does not exist or applies to nothing, Docker
  100  the head breaks a check (or a scenario that passed on the base fails on the head), or the run left
       objects behind
  104  a scenario file cannot be loaded
  110  the --markdown file could not be written";

#[derive(clap::Args)]
pub struct Args {
    /// Scenario files or directories (default: scenarios/).
    scenarios: Vec<PathBuf>,
    #[command(flatten)]
    select: crate::cli::SelectArgs,
    /// The version compared against (default: the scenarios as written).
    #[arg(long, default_value = "as-written")]
    base: String,
    /// The version under review (default: the scenarios as written).
    #[arg(long, default_value = "as-written")]
    head: String,
    /// Output on stdout.
    #[arg(long, default_value = "text", value_parser = ["text", "json", "markdown"])]
    format: String,
    /// Also write the comparison as Markdown here (a pull request's summary).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// A timing differs only when it moved by more than this and by more than half its base value.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    timing_threshold: std::time::Duration,
    /// Cluster provider.
    #[arg(long, default_value = "local", value_parser = clap::builder::PossibleValuesParser::new(nodejoin::cluster::names()))]
    provider: String,
    /// How many scenarios of a side run at once (default: NODEJOIN_JOBS, the profile's `jobs`, else as `run`).
    #[arg(short = 'j', long)]
    jobs: Option<usize>,
}

/// One side, loaded: its scenarios (renamed `<side>-<name>` so both sides' artifacts stay apart) and the
/// worktree it came from (kept until the side has run).
struct Side {
    label: &'static str,
    variant: Variant,
    scenarios: Vec<Trial>,
    worktree: Option<Worktree>,
}

pub fn main(rt: Arc<Runtime>, settings: &Arc<nodejoin::settings::Settings>, args: Args) -> u8 {
    let provider = Provider::parse(&args.provider).unwrap_or_default();
    let selection = match args.select.selection() {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut sides = Vec::new();
    for (label, text) in [("base", &args.base), ("head", &args.head)] {
        match load_side(settings, label, text, &args.scenarios, provider, &selection) {
            Ok(side) => sides.push(side),
            Err(code) => return code,
        }
    }
    let (lazy, env) = match nodejoin::session::start_environment(&rt, settings.clone()) {
        Ok(started) => started,
        Err(code) => return code,
    };
    eprintln!(
        "[nodejoin] compare run {}: artifacts under {}",
        env.run_id,
        env.run_dir.display()
    );
    let jobs = args
        .jobs
        .or(settings.jobs)
        .unwrap_or_else(|| nodejoin::run::runner::default_jobs(settings))
        .max(1);
    for side in &sides {
        eprintln!("[nodejoin] {}: {}", side.label, side.variant.describe());
    }
    // Both sides in one run, interleaved scenario by scenario: each pair runs under the same load, so their
    // timings compare fairly (their names, and so their clusters and containers, differ by the side).
    let mut all = Vec::new();
    for i in 0..sides.iter().map(|s| s.scenarios.len()).max().unwrap_or(0) {
        for side in &sides {
            if let Some(sc) = side.scenarios.get(i) {
                all.push(sc.clone());
            }
        }
    }
    // Images first (an overlay is built once, in seconds): built while the other side's nodes boot, it would
    // slow them down and show up as a timing difference.
    for t in &all {
        if let Err(e) = rt.block_on(images(&env, &t.scenario)) {
            drop(env);
            let _ = lazy.finish();
            return nodejoin::session::fail(&e);
        }
    }
    let events = EventSink::to(vec![
        Box::new(nodejoin::reporter::text::ReportFiles),
        Box::new(Progress),
    ]);
    let reports = rt.block_on(nodejoin::run::runner::run_all(&env, &all, jobs, &events));
    let snapshots: Vec<Vec<ScenarioSnapshot>> = sides
        .iter()
        .map(|side| {
            let prefix = format!("{}-", side.label);
            reports
                .iter()
                .filter(|r| r.name.starts_with(&prefix))
                .map(|r| snapshot_of(side, r))
                .collect()
        })
        .collect();
    drop(env);
    let leftovers = lazy.finish();
    drop(sides);
    let thresholds = Thresholds {
        timing_abs: args.timing_threshold,
        ..Thresholds::default()
    };
    let comparison = diff::compare(&snapshots[0], &snapshots[1], &thresholds);
    let shown = match args.format.as_str() {
        "json" => render::json(&comparison),
        "markdown" => render::markdown(&comparison),
        _ => render::text(&comparison),
    };
    println!("{shown}");
    if let Some(path) = &args.markdown {
        if let Err(e) = std::fs::write(path, render::markdown(&comparison)) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return nodejoin::session::exit::WRITE_OUTPUT_ERROR;
        }
    }
    if !leftovers.is_empty() {
        eprintln!("error: objects left behind: {}", leftovers.join(", "));
        return nodejoin::session::exit::TEST_RUN_FAILED;
    }
    if comparison.broken() {
        nodejoin::session::exit::TEST_RUN_FAILED
    } else {
        nodejoin::session::exit::OK
    }
}

/// Provisions what `sc`'s node groups boot from (cached by the environment for its run).
async fn images(env: &nodejoin::run::Environment, sc: &Scenario) -> nodejoin::Result<()> {
    let assets = env.assets(&sc.cluster.kubernetes_version).await?;
    for g in &sc.nodes {
        let mut waited = std::time::Duration::ZERO;
        let kubelet = env.group_kubelet_timed(&assets, g, &mut waited).await?;
        let image = env.image(&kubelet, g.containerd_line()).await?;
        env.group_image(&image, g.image.as_ref()).await?;
    }
    Ok(())
}

fn load_side(
    settings: &nodejoin::settings::Settings,
    label: &'static str,
    text: &str,
    paths: &[PathBuf],
    provider: Provider,
    selection: &nodejoin::select::Selection,
) -> Result<Side, u8> {
    let bad =
        |message: String| nodejoin::session::fail(&nodejoin::Error::Compare(format!("--{label} {text}: {message}")));
    let variant = Variant::parse(text).map_err(|m| bad(format!("{m} (a side is {FORMS})")))?;
    let paths = if paths.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        paths.to_vec()
    };
    let (worktree, paths) = match &variant {
        Variant::Git(rev) => {
            let (wt, mapped) = Worktree::checkout(settings, rev, &paths).map_err(bad)?;
            (Some(wt), mapped)
        }
        _ => (None, paths),
    };
    let (_, loaded) = nodejoin::session::load_trials(settings, paths, provider)?;
    let loaded = selection.apply(loaded);
    if loaded.iter().any(|t| t.one_of_several_versions) {
        return Err(bad(format!(
            "compare takes one Kubernetes version: {} names several",
            nodejoin::settings::var::K8S_VERSION
        )));
    }
    let mut scenarios = Vec::new();
    for mut trial in loaded {
        variant.apply(&mut trial.scenario).map_err(&bad)?;
        trial.scenario.name = format!("{label}-{}", trial.scenario.name);
        scenarios.push(trial.snapshotted());
    }
    if scenarios.is_empty() {
        return Err(bad("no scenario to run".into()));
    }
    Ok(Side {
        label,
        variant,
        scenarios,
        worktree,
    })
}

/// The scenario's snapshot under its own name, with the outcome of its run. A scenario that never got to its
/// checks has none: it shows as its outcome alone. Paths inside a worktree read as the repository's.
fn snapshot_of(side: &Side, r: &ScenarioReport) -> ScenarioSnapshot {
    let name = r
        .name
        .strip_prefix(&format!("{}-", side.label))
        .unwrap_or(&r.name)
        .to_string();
    let mut s = r.snapshot.clone().unwrap_or_default();
    s.scenario = name;
    s.outcome = r.status_word().to_string();
    if let Some(wt) = &side.worktree {
        let (from, to) = (wt.root().display().to_string(), wt.repo().display().to_string());
        s.checks = s
            .checks
            .into_iter()
            .map(|(k, mut c)| {
                c.actual = c.actual.replace(&from, &to);
                (k.replace(&from, &to), c)
            })
            .collect();
    }
    s
}

/// One line per finished scenario on stderr (stdout is the comparison), named `base-<scenario>` or
/// `head-<scenario>`.
struct Progress;

impl Reporter for Progress {
    fn on(&mut self, event: &Event) {
        if let Event::ScenarioFinished { report } = event {
            eprintln!(
                "[nodejoin] {} {} in {}",
                report.name,
                report.status_word(),
                nodejoin::run::report::secs(report.wall)
            );
            for line in report.failure_lines() {
                eprintln!("[nodejoin]   {line}");
            }
        }
    }
}
