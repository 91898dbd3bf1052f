//! A folder of scenarios as cargo-test trials (libtest-mimic): one per scenario file and provider, named
//! `provider/v1.MINOR/scenario` as `nodejoin list` names them, so `cargo test` and `cargo nextest run` list,
//! filter and partition each (`cargo test --test scenarios -- local/`, `cargo nextest run -E 'test(/k3s\//)'
//! --partition hash:1/2`); the providers setting limits the providers. A user's repository runs its own folder
//! with one small test file calling [`main`] (the book's "from your repository" page). Trials in one process
//! share the environment and one control plane per (provider, version, service CIDR); everything is torn down
//! after the last trial, and a container or network of the run left behind fails the process.
//!
//! Skips are decided when trials are listed, by cheap probes (is the provider's image present, is a failed pull
//! remembered, is the kind CLI there), so `--list` and nextest see them as ignored; the reasons are printed once
//! on stderr. A provider in `NODEJOIN_REQUIRE_PROVIDERS` never skips: it fetches what it lacks at run time and its
//! trials fail when it cannot run. An ignored trial run anyway (`--include-ignored`) fails if it cannot run.
use crate::cluster::Availability;
use crate::run::trials::{self, Plan};
use crate::run::LazyEnvironment;
use crate::scenario::model::{Provider, Scenario};
use libtest_mimic::{Arguments, Failed, Trial};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What every trial of the process shares.
struct Shared {
    env: Arc<LazyEnvironment>,
    required: Vec<Provider>,
    /// The scenarios taken on more than one Kubernetes version (their reports are named `name@v1.MINOR`).
    several_versions: std::collections::BTreeSet<String>,
    /// The list-time probe of each (provider, Kubernetes version) the trials use.
    availability: BTreeMap<(&'static str, String), Availability>,
    /// Parts of names whose trials are listed as ignored (the skip-trials setting).
    skip: Vec<String>,
    /// What each trial cost the last time it ran here: the longest start first; noted again as they end.
    costs: Arc<std::sync::Mutex<crate::run::driver::costs::Costs>>,
}

impl Shared {
    /// Whether the skip-trials setting leaves `name` out (listed as ignored; `--include-ignored` runs it).
    fn skipped(&self, name: &str) -> bool {
        self.skip.iter().any(|part| name.contains(part.as_str()))
    }
}

/// A trial that runs `trial`; `strict` makes a scenario that could not run a failure rather than a skip.
fn runner(shared: &Shared, trial: crate::run::trial::Trial, strict: bool) -> impl FnOnce() -> TrialResult {
    let lazy = shared.env.clone();
    let costs = shared.costs.clone();
    move || {
        let env = lazy.get().map_err(Failed::from)?;
        let files = crate::run::events::EventSink::to(vec![Box::new(crate::reporter::text::ReportFiles)]);
        let report = lazy
            .runtime()
            .block_on(crate::run::scenario::run_observed(&env, &trial, &files));
        println!("{}", crate::reporter::text::full(&report));
        if let Ok(mut costs) = costs.lock() {
            costs.note_one(&trial, &report);
        }
        crate::run::verdict::verdict(&report.outcome, || report.failure_lines(), strict)
    }
}

type TrialResult = Result<libtest_mimic::Completion, Failed>;

/// The trials of one scenario file: one per provider it runs on, or one failing trial if the file is invalid.
fn trials_of(
    file: PathBuf,
    loaded: crate::Result<Scenario>,
    enabled: &[Provider],
    shared: &Shared,
) -> Vec<(Trial, std::time::Duration)> {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let scenario = match loaded {
        Ok(s) => s,
        Err(e) => {
            let message = format!("{e}\n  hint: {}", e.hint());
            return vec![(
                Trial::test(format!("invalid/{stem}"), move || Err(Failed::from(message))),
                std::time::Duration::ZERO,
            )];
        }
    };
    trials::providers_for(&scenario, enabled)
        .into_iter()
        .map(|provider| {
            let scenario = scenario.clone();
            let version = scenario.cluster.kubernetes_version.clone();
            let name = trials::name(provider, &version, &scenario.name);
            let unsupported = scenario.not_applicable();
            let availability = shared
                .availability
                .get(&(provider.as_str(), version))
                .cloned()
                .unwrap_or(Availability::Ready);
            let required = shared.required.contains(&provider);
            let mut run = crate::run::trial::Trial::new(&file, scenario, provider);
            run.one_of_several_versions = shared.several_versions.contains(&run.scenario.name);
            let expected = shared.costs.lock().map(|c| c.expected(&run)).unwrap_or_default();
            let trial = match trials::plan(provider, unsupported.clone(), &availability, required) {
                Plan::Run => Trial::ignorable_test(name, runner(shared, run, required)),
                Plan::Fail(why) => Trial::test(name, move || Err(Failed::from(why))),
                // Run anyway (`--include-ignored`): a version it does not apply to fails at once; an unavailable
                // provider is tried for real, and fails if it cannot run.
                Plan::Ignore(_) => match unsupported {
                    Some(why) => Trial::test(name, move || {
                        Err(Failed::from(format!("does not apply, so it cannot pass: {why}")))
                    }),
                    None => Trial::ignorable_test(name, runner(shared, run, true)),
                }
                .with_ignored_flag(true),
            };
            // No libtest "kind": nextest would list `[local] local/...` and hash that, and `nodejoin run
            // --partition` must split the very names nextest splits (the provider leads the name already).
            // The skip-trials setting ignores whatever the plan made of the trial, as it says.
            let trial = if shared.skipped(trial.name()) {
                trial.with_ignored_flag(true)
            } else {
                trial
            };
            (trial, expected)
        })
        .collect()
}

/// Probes each (provider, version) once, without pulling or building anything; says on stderr, once, why
/// trials are ignored or failing.
fn probe_all(
    settings: &crate::settings::Settings,
    rt: &tokio::runtime::Runtime,
    pairs: impl IntoIterator<Item = (Provider, String)>,
    required: &[Provider],
) -> BTreeMap<(&'static str, String), Availability> {
    let pairs: Vec<(Provider, String)> = pairs.into_iter().collect();
    let docker = if pairs.iter().any(|(p, _)| *p != Provider::LOCAL) {
        rt.block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(10), crate::docker::connect())
                .await
                .ok()
                .and_then(Result::ok)
        })
    } else {
        None
    };
    let mut out = BTreeMap::new();
    for (provider, version) in pairs {
        let key = (provider.as_str(), version.clone());
        if out.contains_key(&key) {
            continue;
        }
        let availability = rt.block_on(provider.get().probe(settings, &version, docker.as_ref()));
        match trials::plan(provider, None, &availability, required.contains(&provider)) {
            Plan::Run => {}
            Plan::Ignore(why) => eprintln!("[nodejoin] {} {version} trials are ignored: {why}", provider.as_str()),
            Plan::Fail(why) => eprintln!("[nodejoin] {} {version} trials fail: {why}", provider.as_str()),
        }
        out.insert(key, availability);
    }
    out
}

fn exit_with(message: impl std::fmt::Display) -> ! {
    eprintln!("{message}");
    std::process::exit(101);
}

/// Runs the scenarios under `dir` (searched recursively; the scenarios setting names another) as libtest
/// trials, with libtest's command line, and exits with its verdict.
pub fn main(dir: &Path) -> ! {
    crate::init_crypto();
    crate::init_tracing();
    // The settings resolved as the CLI resolves them (variables over the profile found from the working
    // directory, e.g. NODEJOIN_PROFILE=ci), and passed to everything that reads them.
    let settings = Arc::new(
        crate::settings::resolve::from_process(&crate::settings::Flags::default())
            .unwrap_or_else(|e| exit_with(format!("error: {e}"))),
    );
    let mut args = Arguments::from_args();
    // Several trials at once, like `nodejoin run -j` (`--test-threads`, RUST_TEST_THREADS or NODEJOIN_JOBS).
    args.test_threads
        .get_or_insert_with(|| crate::run::runner::trial_threads(&settings));
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => exit_with(format!("cannot start a tokio runtime: {e}")),
    };
    // A fresh machine: README's test command prepares the host itself (missing packages, the Docker engine)
    // before the cheap probes decide what can run; listing alone changes nothing.
    if !args.list {
        if let Err(e) = rt.block_on(crate::host::prepare(&settings)) {
            eprintln!("[nodejoin] host not ready: {e}\n  hint: {}", e.hint());
        }
    }
    let dir = settings.scenarios.clone().unwrap_or_else(|| dir.to_path_buf());
    let files = crate::scenario::discover(&[dir]).unwrap_or_else(|e| exit_with(e));
    let enabled = trials::enabled(settings.providers.as_deref()).unwrap_or_else(|e| exit_with(e));
    let required = trials::required(settings.require_providers.as_deref(), &enabled).unwrap_or_else(|e| exit_with(e));
    // SIGINT, SIGTERM, SIGHUP: destructors will not run, so this run's processes and containers are removed
    // before exiting.
    let env = LazyEnvironment::new(rt.clone(), settings.clone())
        .unwrap_or_else(|e| exit_with(format!("cannot install signal handlers: {e}")));
    // Each file on each Kubernetes version the settings name; a scenario that names its own is loaded once.
    let mut loaded: Vec<(PathBuf, crate::Result<Scenario>)> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (pass, version) in settings.versions().into_iter().enumerate() {
        let defaults = crate::scenario::Defaults::from_settings(&crate::settings::Settings {
            kubernetes_version: version,
            ..settings.as_ref().clone()
        })
        .unwrap_or_else(|e| exit_with(e));
        let these: Vec<(PathBuf, crate::Result<Scenario>)> = files
            .iter()
            .map(|f| {
                (
                    f.clone(),
                    crate::scenario::load_file(f, &defaults).map(Scenario::fetched),
                )
            })
            .collect();
        if pass == 0 {
            let ok = these.iter().filter_map(|(f, s)| Some((f.as_path(), s.as_ref().ok()?)));
            crate::scenario::unique_scenarios(ok).unwrap_or_else(|e| exit_with(e));
        }
        for (f, s) in these {
            let version = s
                .as_ref()
                .map(|s| s.cluster.kubernetes_version.clone())
                .unwrap_or_default();
            if seen.insert((f.clone(), version)) {
                loaded.push((f, s));
            }
        }
    }
    let pairs = loaded.iter().filter_map(|(_, s)| s.as_ref().ok()).flat_map(|s| {
        trials::providers_for(s, &enabled)
            .into_iter()
            .map(|p| (p, s.cluster.kubernetes_version.clone()))
    });
    let availability = probe_all(&settings, &rt, pairs, &required);
    let several_versions = trials::on_several_versions(
        loaded
            .iter()
            .filter_map(|(_, s)| s.as_ref().ok())
            .map(|s| s.name.as_str()),
    );
    let costs_file = crate::run::driver::costs::Costs::path(&settings);
    let shared = Shared {
        costs: Arc::new(std::sync::Mutex::new(crate::run::driver::costs::Costs::load(
            &costs_file,
        ))),
        several_versions,
        env: env.clone(),
        required,
        availability,
        skip: settings.skip_trials.clone(),
    };
    // The longest first (by what each cost the last time it ran here, `run::driver::costs`), as `nodejoin run`
    // orders them (one at a time, in the order found): libtest starts them in this order.
    let mut all: Vec<(Trial, std::time::Duration)> = loaded
        .into_iter()
        .flat_map(|(f, s)| trials_of(f, s, &enabled, &shared))
        .collect();
    if args.test_threads.is_some_and(|n| n > 1) {
        all.sort_by_key(|(_, cost)| std::cmp::Reverse(*cost));
    }
    let all: Vec<Trial> = all.into_iter().map(|(t, _)| t).collect();
    let left_out = all.iter().filter(|t| shared.skipped(t.name())).count();
    if left_out > 0 {
        eprintln!(
            "[nodejoin] {left_out} trials are ignored: their names contain one of {}={}",
            crate::settings::var::SKIP_TRIALS,
            shared.skip.join(",")
        );
    }
    let conclusion = libtest_mimic::run(&args, all);
    if !args.list {
        if let Ok(costs) = shared.costs.lock() {
            costs.save(&costs_file);
        }
    }
    let leftovers = env.finish();
    if !leftovers.is_empty() {
        eprintln!("error: the run left objects behind: {leftovers:?}");
        std::process::exit(1);
    }
    conclusion.exit();
}
