//! The mutation catalogue as test trials, one per deliberate regression (`mutation/<name>`): each passes only
//! when the scenario the catalogue names fails on the check it names. The process prints `N/M caught` at the
//! end. `NODEJOIN_MUTATIONS=a,b` limits the run; `nodejoin mutate` runs the same catalogue from the CLI.
use libtest_mimic::{Arguments, Failed, Trial};
use nodejoin::mutate::{self, MutationResult, Verdict};
use nodejoin::run::LazyEnvironment;
use std::sync::{Arc, Mutex};

fn main() {
    nodejoin::init_crypto();
    nodejoin::init_tracing();
    let settings = match nodejoin::settings::resolve::from_process(&nodejoin::settings::Flags::default()) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(101);
        }
    };
    let mut args = Arguments::from_args();
    // Several trials at once, like `nodejoin run -j` (`--test-threads`, RUST_TEST_THREADS or NODEJOIN_JOBS).
    args.test_threads
        .get_or_insert_with(|| nodejoin::run::runner::trial_threads(&settings));
    let only: Vec<String> = std::env::var("NODEJOIN_MUTATIONS")
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect();
    let selected = match mutate::select(&only) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("NODEJOIN_MUTATIONS: {e}");
            std::process::exit(101);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("cannot start a tokio runtime: {e}");
            std::process::exit(101);
        }
    };
    let scratch = match tempfile::tempdir() {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprintln!("cannot create a scratch directory: {e}");
            std::process::exit(101);
        }
    };
    let scenarios = nodejoin::paths::workspace_root().join("scenarios");
    let env = match LazyEnvironment::new(rt, settings.clone()) {
        Ok(env) => env,
        Err(e) => {
            eprintln!("cannot install signal handlers: {e}");
            std::process::exit(101);
        }
    };
    let results: Arc<Mutex<Vec<MutationResult>>> = Arc::default();
    let controls: Arc<mutate::Controls> = Arc::default();
    // The longest first, by what their scenarios cost the last time they ran here (as the scenario trials and
    // `nodejoin run` start them), so the slowest mutation does not start last and hold the run's tail.
    let costs = nodejoin::run::driver::costs::Costs::load(&nodejoin::run::driver::costs::Costs::path(&settings));
    let mut planned: Vec<_> = selected
        .into_iter()
        .map(|m| (mutate::plan(&settings, &costs, &m, &scenarios), m))
        .collect();
    planned.sort_by_key(|(plan, _)| std::cmp::Reverse(plan.expected));
    let trials = planned
        .into_iter()
        .map(|(plan, m)| {
            let (lazy, scratch, scenarios, results) =
                (env.clone(), scratch.clone(), scenarios.clone(), results.clone());
            let controls = controls.clone();
            let ignored = plan.not_applicable;
            if let Some(why) = &ignored {
                eprintln!("mutation/{} ignored: {why}", m.name);
            }
            Trial::test(format!("mutation/{}", m.name), move || {
                let env = lazy.get().map_err(Failed::from)?;
                let r = lazy
                    .runtime()
                    .block_on(mutate::run(&env, &controls, &m, &scenarios, scratch.path()));
                println!("{}: {}", m.regression, r.line());
                let verdict = r.verdict.clone();
                if let Ok(mut all) = results.lock() {
                    all.push(r);
                }
                match verdict {
                    Verdict::Caught { failed, .. } => {
                        for f in failed {
                            println!("  failed check: {f}");
                        }
                        Ok(())
                    }
                    Verdict::Survived { tried } => Err(Failed::from(format!(
                        "mutation {} survived ({}): {}",
                        m.name,
                        m.regression,
                        tried.join("; ")
                    ))),
                    Verdict::Broken(why) => Err(Failed::from(format!("mutation {} could not run: {why}", m.name))),
                }
            })
            .with_kind("mutation")
            .with_ignored_flag(ignored.is_some())
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Ok(all) = results.lock() {
        if !all.is_empty() {
            println!("\n{}", mutate::summary(&all));
        }
    }
    let leftovers = env.finish();
    if !leftovers.is_empty() {
        eprintln!("error: the run left objects behind: {leftovers:?}");
        std::process::exit(1);
    }
    conclusion.exit();
}
