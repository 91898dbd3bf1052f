//! A `nodejoin run` session, from the files given to the exit code (nextest's runner and its `finish()`): the
//! scenarios loaded as trials on one provider, the decision that the provider is required and can run, the
//! environment started (signal handlers first), the reporters assembled, the run, the reports ended even when a
//! signal cuts it short, and the exit code. The CLI only parses its flags into a [`RunRequest`] and resolves the
//! settings, which it passes in.
use crate::cluster::Provider;
use crate::reporter::{Format, ReporterBuilder};
use crate::run::events::Event;
use crate::run::report::ScenarioReport;
use crate::run::trial::Trial;
use crate::run::verdict::{Required, Verdict};
use crate::run::{Environment, LazyEnvironment, Outcome};
use crate::scenario::{Defaults, Scenario};
use crate::select::rerun::{self, Record};
use crate::select::{Listed, Selection};
use crate::settings::Settings;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::runtime::Runtime;

pub mod exit;

/// Kept under their old names for the library's callers; see [`exit`].
pub const EXIT_CODES: &str = exit::TEXT;
pub const EXIT_FAILED: u8 = exit::TEST_RUN_FAILED;
pub const EXIT_BAD_INPUT: u8 = exit::SETUP_ERROR;

/// What `nodejoin run` was asked.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// Files or directories (default: scenarios/).
    pub paths: Vec<PathBuf>,
    pub reporters: ReporterBuilder,
    /// Which trials run (`-E`, `--partition`).
    pub selection: Selection,
    /// Only what failed in the last run of the same selection (`--rerun-failed`).
    pub rerun_failed: bool,
}

/// Prints `e` with its hint, the CLI's form of a failure; the exit code of bad input or setup.
pub fn fail(e: &crate::Error) -> u8 {
    eprintln!("error: {e}\n  hint: {}", e.hint());
    exit::SETUP_ERROR
}

/// [`fail`] for a scenario file that cannot be loaded: the trials cannot be listed.
pub fn fail_listing(e: &crate::Error) -> u8 {
    fail(e);
    exit::TEST_LIST_CREATION_FAILED
}

/// The run's environment (signal handlers installed first: a signal at any point removes what the run has
/// created so far), started now so start-up errors come before any output.
pub fn start_environment(
    rt: &Arc<Runtime>,
    settings: Arc<Settings>,
) -> Result<(Arc<LazyEnvironment>, Arc<Environment>), u8> {
    let lazy = LazyEnvironment::new(rt.clone(), settings).map_err(|e| {
        eprintln!("error: cannot install signal handlers: {e}");
        EXIT_BAD_INPUT
    })?;
    match lazy.get() {
        Ok(env) => Ok((lazy, env)),
        Err(message) => {
            eprintln!("error: {message}");
            let _ = lazy.finish();
            Err(EXIT_BAD_INPUT)
        }
    }
}

/// Runs `request`; the exit code.
pub fn run(rt: Arc<Runtime>, settings: Arc<Settings>, request: RunRequest) -> u8 {
    let json = request.reporters.format == Format::Json;
    let (code, reported) = run_session(rt, settings, request);
    // `--format json` always ends with run_finished, even when the run stopped before its reporters existed.
    if json && !reported {
        println!("{}", crate::reporter::json::aborted_line());
    }
    code
}

/// The session; also whether its reporters were given the run's end (they always are, once they exist).
fn run_session(rt: Arc<Runtime>, settings: Arc<Settings>, request: RunRequest) -> (u8, bool) {
    let provider = match chosen_provider(&settings) {
        Ok(p) => p,
        Err(code) => return (code, false),
    };
    // A provider named on the command line must run.
    let named = settings.source("provider") == Some(crate::settings::Source::Flag);
    let enabled = Provider::all();
    let required = match crate::run::trials::required(settings.require_providers.as_deref(), &enabled) {
        Ok(r) => named || r.contains(&provider),
        Err(e) => {
            eprintln!("error: {e}");
            return (EXIT_BAD_INPUT, false);
        }
    };
    let record_at = rerun::path(
        &crate::paths::artifacts_root(&settings),
        request.selection.partition.as_ref(),
    );
    let selection = match with_rerun(&settings, &request.selection, request.rerun_failed) {
        Ok(s) => s,
        Err(code) => return (code, false),
    };
    let (files, trials) = match load_trials(&settings, request.paths, provider) {
        Ok(loaded) => loaded,
        Err(code) => return (code, false),
    };
    let trials = match select(trials, &selection) {
        Ok(t) => t,
        Err(why) => return (exit::nothing_ran(settings.no_tests, &why), false),
    };
    // Scenarios that exclude this Kubernetes version are reported ignored; if that is all of them, nothing runs.
    let applicable: Vec<&Scenario> = trials
        .iter()
        .map(|t| &t.scenario)
        .filter(|s| s.not_applicable().is_none())
        .collect();
    if applicable.is_empty() {
        for t in &trials {
            if let Some(why) = t.scenario.not_applicable() {
                eprintln!("[nodejoin] ignoring {}: {why}", t.file.display());
            }
        }
        let why = format!(
            "nothing to run: all {} scenario file(s) were skipped or ignored on provider {}",
            files.len(),
            provider.as_str()
        );
        return (exit::nothing_ran(settings.no_tests, &why), false);
    }
    if required {
        match rt.block_on(provider_unavailable(&settings, provider, &applicable)) {
            Ok(None) => {}
            Ok(Some(why)) => {
                eprintln!("error: provider {} cannot run here: {why}", provider.as_str());
                let e = crate::Error::ProviderUnavailable {
                    provider: provider.as_str().into(),
                    reason: why,
                };
                eprintln!("  hint: {}", e.hint());
                return (exit::TEST_RUN_FAILED, false);
            }
            Err(e) => return (fail(&e), false),
        }
    }
    let (lazy, env) = match start_environment(&rt, settings.clone()) {
        Ok(started) => started,
        Err(code) => return (code, false),
    };
    let fakes: Vec<String> = env.fake_urls().iter().map(|(n, u)| format!("{n} {u}")).collect();
    eprintln!("[nodejoin] run {}: fakes {}", env.run_id, fakes.join(", "));
    let jobs = settings
        .jobs
        .unwrap_or_else(|| crate::run::runner::default_jobs(&settings))
        .max(1);
    let reporters = Arc::new(request.reporters.build(&env.run_id, &env.run_dir));
    let started = std::time::Instant::now();
    let host_busy = crate::host::busy_cpu_time();
    end_reports_on_signal(&reporters, &trials, started, (record_at.clone(), env.run_id.clone()));
    reporters.sink.emit(Event::RunStarted {
        run_id: env.run_id.clone(),
        artifacts: env.run_dir.clone(),
        scenarios: trials.len(),
        jobs,
    });
    let retries = settings.retries.unwrap_or(0);
    // The base image every node image is built over, built beside the first builds (it waits on the network).
    let needs_node_image = trials.iter().any(|t| t.scenario.nodes.iter().any(|g| g.disk.is_none()));
    let prewarm = needs_node_image
        .then(|| rt.block_on(async { crate::node::image::prewarm_base(&env.settings, &env.docker) }))
        .flatten();
    let reports = rt.block_on(crate::run::runner::run_all_retried(
        &env,
        &trials,
        jobs,
        retries,
        &reporters.sink,
    ));
    write_record(&record_at, &env.run_id, &reports);
    if let Some(prewarm) = prewarm {
        prewarm.abort();
    }
    drop(env);
    let leftovers = lazy.finish();
    reporters.sink.emit(Event::RunFinished {
        reports: Arc::new(reports.clone()),
        wall: started.elapsed(),
        leftovers: leftovers.clone(),
        cancelled: None,
        host_cpu: host_busy
            .zip(crate::host::busy_cpu_time())
            .map(|(a, b)| b.saturating_sub(a)),
    });
    if !leftovers.is_empty() {
        eprintln!("error: objects left behind: {}", leftovers.join(", "));
        return (EXIT_FAILED, true);
    }
    if reporters.write_failed() {
        eprintln!("error: a report could not be written (see above)");
        eprintln!("  hint: check the --junit/--markdown paths: their directory must exist and be writable");
        return (exit::WRITE_OUTPUT_ERROR, true);
    }
    (exit_code(&reports, required, &settings), true)
}

/// `selection`, narrowed to what failed in the last run of the same partition when `rerun_failed`; the exit
/// code when there is nothing to run again (0) or no record to read.
fn with_rerun(settings: &Settings, selection: &Selection, rerun_failed: bool) -> Result<Selection, u8> {
    let mut selection = selection.clone();
    if !rerun_failed {
        return Ok(selection);
    }
    let at = rerun::path(&crate::paths::artifacts_root(settings), selection.partition.as_ref());
    match Record::read(&at) {
        Ok(r) if r.failed.is_empty() => {
            eprintln!("[nodejoin] nothing to rerun: run {} had no failures", r.run_id);
            Err(exit::OK)
        }
        Ok(r) => {
            eprintln!(
                "[nodejoin] rerunning {} trial(s) that failed in run {}",
                r.failed.len(),
                r.run_id
            );
            selection.only = Some(r.failed);
            Ok(selection)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Err(exit::SETUP_ERROR)
        }
    }
}

/// The provider the settings name (`--provider`, a profile's), else the default.
fn chosen_provider(settings: &crate::settings::Settings) -> Result<Provider, u8> {
    match settings.provider.as_deref() {
        None => Ok(Provider::default()),
        Some(name) => Provider::parse(name).ok_or_else(|| {
            eprintln!(
                "error: the provider '{name}' is unknown (known: {})",
                crate::cluster::names().join(", ")
            );
            EXIT_BAD_INPUT
        }),
    }
}

/// The trials `selection` keeps; why, when it keeps none of several.
fn select(trials: Vec<Trial>, selection: &Selection) -> Result<Vec<Trial>, String> {
    if !selection.narrows() {
        return Ok(trials);
    }
    let before = trials.len();
    let kept = selection.apply(trials);
    if kept.is_empty() {
        return Err(format!(
            "nothing to run: the selection (filter, partition or rerun) kept none of the {before} scenario(s)"
        ));
    }
    eprintln!("[nodejoin] selected {} of {before} scenario(s)", kept.len());
    Ok(kept)
}

/// Keeps the run's verdicts for `--rerun-failed`; a record that cannot be written is said, not fatal.
fn write_record(at: &std::path::Path, run_id: &str, reports: &[ScenarioReport]) {
    let name = |r: &ScenarioReport| r.trial_name().to_string();
    let record = Record {
        run_id: run_id.to_string(),
        failed: reports
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Failed | Outcome::Error { .. }))
            .map(name)
            .collect(),
        passed: reports.iter().filter(|r| r.passed()).map(name).collect(),
    };
    if let Err(e) = record.write(at) {
        eprintln!("warning: cannot keep the run's record at {}: {e}", at.display());
    }
}

/// `nodejoin list`: the trials a run with the same paths, settings and selection (`--rerun-failed` too) would
/// take, as text or JSON.
pub fn list(settings: &Settings, paths: Vec<PathBuf>, selection: &Selection, rerun_failed: bool, json: bool) -> u8 {
    let provider = match chosen_provider(settings) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let selection = &match with_rerun(settings, selection, rerun_failed) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (_, trials) = match load_trials(settings, paths, provider) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let listed: Vec<Listed> = selection.apply(trials).iter().map(Listed::of).collect();
    if json {
        match serde_json::to_string_pretty(&listed) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("error: {e}");
                return EXIT_BAD_INPUT;
            }
        }
    } else {
        for l in &listed {
            println!("{}", l.line());
        }
        eprintln!("{} trial(s)", listed.len());
    }
    0
}

/// A termination signal ends the process from its handler: the reports still end, with what finished and the
/// rest as cancelled (`run_finished` last on stdout, JUnit and Markdown written).
fn end_reports_on_signal(
    reporters: &Arc<crate::reporter::Reporters>,
    trials: &[Trial],
    started: std::time::Instant,
    record: (PathBuf, String),
) {
    let reporters = reporters.clone();
    let all: Vec<(String, String, PathBuf)> = trials
        .iter()
        .map(|t| (t.report_name(), crate::select::name(t), t.file.clone()))
        .collect();
    crate::signals::before_exit(Box::new(move |signal| {
        let mut reports = reporters.finished();
        for (name, trial, file) in all {
            if !reports.iter().any(|r| r.name == name) {
                let mut r = ScenarioReport::new(&name, file);
                r.trial = trial;
                r.outcome = Outcome::Error {
                    message: format!("cancelled by {signal} before it finished"),
                    hint: "the run was stopped; run it again".into(),
                };
                reports.push(r);
            }
        }
        write_record(&record.0, &record.1, &reports);
        reporters.sink.emit(Event::RunFinished {
            reports: Arc::new(reports),
            wall: started.elapsed(),
            leftovers: Vec::new(),
            cancelled: Some(signal),
            host_cpu: None,
        });
    }));
}

/// The scenario files under `paths` (default: scenarios/), loaded with the settings' defaults as trials on
/// `provider`, one per Kubernetes version the settings name (a scenario that names its own version is one
/// trial); those that run only on other providers are skipped with a line on stderr. Also returns every file
/// found. An error has been printed; its exit code is returned (a file that cannot be loaded, a directory with
/// none: the list cannot be made, as of a test binary nextest cannot list).
pub fn load_trials(
    settings: &Settings,
    paths: Vec<PathBuf>,
    provider: Provider,
) -> Result<(Vec<PathBuf>, Vec<Trial>), u8> {
    let paths = if paths.is_empty() {
        vec![PathBuf::from("scenarios")]
    } else {
        paths
    };
    let mut files = Vec::new();
    for p in &paths {
        match crate::scenario::discover(std::slice::from_ref(p)) {
            Ok(found) if found.is_empty() => {
                // A directory named that holds none is a mistake said, not an empty run.
                eprintln!("error: {} holds no scenario files (*.yaml, *.yml)", p.display());
                return Err(exit::TEST_LIST_CREATION_FAILED);
            }
            Ok(found) => files.extend(found),
            Err(e) => return Err(fail_listing(&e)),
        }
    }
    let mut trials: Vec<Trial> = Vec::new();
    for (i, version) in settings.versions().into_iter().enumerate() {
        let defaults = Defaults::from_settings(&crate::settings::Settings {
            kubernetes_version: version,
            ..settings.clone()
        })
        .map_err(|e| fail(&e))?;
        let mut these = Vec::new();
        for f in &files {
            let s = crate::scenario::load_file(f, &defaults)
                .map_err(|e| fail_listing(&e))?
                .fetched();
            if !s.cluster.providers.is_empty() && !s.cluster.providers.contains(&provider) {
                if i == 0 {
                    let only: Vec<&str> = s.cluster.providers.iter().map(|p| p.as_str()).collect();
                    eprintln!(
                        "[nodejoin] skipping {}: it runs only on {}",
                        f.display(),
                        only.join(", ")
                    );
                }
                continue;
            }
            these.push(Trial::new(f, s, provider));
        }
        crate::scenario::unique_scenarios(these.iter().map(|t| (t.file.as_path(), &t.scenario)))
            .map_err(|e| fail_listing(&e))?;
        // A scenario that names its version is the same trial on every pass.
        for t in these {
            let name = t.test_name();
            let seen = trials.iter().any(|o| o.test_name() == name);
            if !seen {
                trials.push(t);
            }
        }
    }
    mark_several_versions(&mut trials);
    Ok((files, trials))
}

/// Marks the trials of a scenario taken on more than one version, so their reports and artifacts stay apart.
fn mark_several_versions(trials: &mut [Trial]) {
    let several = crate::run::trials::on_several_versions(trials.iter().map(|t| t.scenario.name.as_str()));
    for t in trials.iter_mut() {
        t.one_of_several_versions = several.contains(&t.scenario.name);
    }
}

/// The exit code of a finished run, from each scenario's verdict (`run::verdict`, as the trials decide theirs):
/// failures first (a required provider that could not run is one), then a run in which nothing ran (as the
/// settings' `no-tests` says).
pub fn exit_code(reports: &[ScenarioReport], required: bool, settings: &Settings) -> u8 {
    let required = Required {
        provider: required,
        scenario: false,
    };
    let verdicts: Vec<(&str, Verdict)> = reports
        .iter()
        .map(|r| (r.name.as_str(), Verdict::of(&r.outcome, || r.failure_lines(), required)))
        .collect();
    if verdicts.iter().any(|(_, v)| matches!(v, Verdict::Failed(_))) {
        return EXIT_FAILED;
    }
    if let Some(r) = reports.iter().find(|r| settings.flaky_fails && r.flaky()) {
        eprintln!("error: {} is FLAKY, and the profile's flaky-result is fail", r.name);
        return EXIT_FAILED;
    }
    if let Some((name, _)) = verdicts.iter().find(|(_, v)| matches!(v, Verdict::NotRun(_))) {
        eprintln!("error: {name}: the provider cannot run here, and it was asked for");
        return EXIT_FAILED;
    }
    if !verdicts.iter().any(|(_, v)| *v == Verdict::Passed) {
        return exit::nothing_ran(settings.no_tests, "nothing ran: every scenario was skipped or ignored");
    }
    exit::OK
}

/// Why `provider` cannot run one of `scenarios` here (the full check: it may pull the provider's image), if it
/// cannot; each Kubernetes version is checked once.
async fn provider_unavailable(
    settings: &Settings,
    provider: Provider,
    scenarios: &[&Scenario],
) -> crate::Result<Option<String>> {
    let p = provider.get();
    let docker = crate::docker::connect().await?;
    let mut checked = std::collections::BTreeSet::new();
    for s in scenarios {
        if !checked.insert(s.cluster.kubernetes_version.clone()) {
            continue;
        }
        let spec = crate::cluster::ClusterSpec {
            provider,
            version: s.cluster.kubernetes_version.clone(),
            service_cidr: s.cluster.service_cidr(),
            iam_lane: None,
            certificate_lifetime: s.cluster.certificate_lifetime,
        };
        if let Some(why) = p.unavailable(settings, &spec, &docker).await {
            return Ok(Some(why));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_outranks_a_provider_that_did_not_run_which_outranks_nothing_run() {
        let report = |name: &str, outcome: Outcome| {
            let mut r = ScenarioReport::new(name, PathBuf::from(format!("{name}.yaml")));
            r.outcome = outcome;
            r
        };
        let skipped = || Outcome::Unavailable("kind cannot run here".into());
        let s = Settings::default();
        assert_eq!(exit_code(&[report("a", Outcome::Passed)], false, &s), 0);
        assert_eq!(exit_code(&[report("a", skipped())], false, &s), exit::NO_TESTS_RUN);
        let lenient = Settings {
            no_tests: crate::settings::NoTests::Pass,
            ..Settings::default()
        };
        assert_eq!(exit_code(&[report("a", skipped())], false, &lenient), 0);
        assert_eq!(
            exit_code(&[report("a", skipped()), report("b", Outcome::Passed)], true, &lenient),
            exit::TEST_RUN_FAILED,
            "a required provider that cannot run fails the run"
        );
        assert_eq!(
            exit_code(&[report("a", skipped()), report("b", Outcome::Failed)], true, &s),
            exit::TEST_RUN_FAILED
        );
    }

    /// A FLAKY scenario passes the run unless the profile's flaky-result is fail.
    #[test]
    fn a_flaky_scenario_fails_the_run_only_when_the_profile_says() {
        let mut flaky = ScenarioReport::new("f", PathBuf::from("f.yaml"));
        flaky.earlier_attempts.push(crate::run::report::Attempt {
            number: 1,
            status: "FAILED",
            failures: vec!["n/ready: expected Ready, got NotReady".into()],
            failed_checks: vec!["n/ready".into()],
            wall: std::time::Duration::from_secs(1),
            artifacts: None,
        });
        assert!(flaky.flaky() && flaky.status_word() == "FLAKY");
        assert_eq!(exit_code(std::slice::from_ref(&flaky), false, &Settings::default()), 0);
        let strict = Settings {
            flaky_fails: true,
            ..Settings::default()
        };
        assert_eq!(exit_code(&[flaky], false, &strict), EXIT_FAILED);
    }
}
