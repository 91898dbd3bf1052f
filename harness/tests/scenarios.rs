//! One libtest-mimic trial per scenario file and provider, named `provider/v1.MINOR/scenario`, so `cargo test`
//! and `cargo nextest run` list and filter each (`cargo test --test scenarios -- local/`,
//! `cargo nextest run -E 'test(/^k3s\//)'`); `NODEJOIN_PROVIDERS=local` limits the providers. Trials in one process share the environment and one
//! control plane per (provider, version, service CIDR); everything is torn down after the last trial, and a
//! container or network of the run left behind fails the process. A scenario whose provider cannot run on
//! this machine is reported as ignored, with the reason. SIGINT, SIGTERM and SIGHUP clean up the run before exiting.
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use nodejoin::run::{Environment, Outcome};
use nodejoin::scenario::model::Provider;
use nodejoin::scenario::trials;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::OnceCell;

type SharedEnv = OnceCell<std::result::Result<Arc<Environment>, String>>;

/// The trials of one scenario file: one per provider it runs on, or one failing trial if the file is invalid.
fn trials(file: PathBuf, enabled: &[Provider], rt: Arc<tokio::runtime::Runtime>, env: Arc<SharedEnv>) -> Vec<Trial> {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let scenario = match nodejoin::scenario::load_file(&file) {
        Ok(s) => s,
        Err(e) => {
            let message = format!("{e}\n  hint: {}", e.hint());
            return vec![Trial::test(format!("invalid/{stem}"), move || {
                Err(Failed::from(message))
            })];
        }
    };
    trials::providers_for(&scenario, enabled)
        .into_iter()
        .map(|provider| {
            let mut scenario = scenario.clone();
            scenario.cluster.provider = provider;
            let name = trials::name(provider, &scenario.cluster.kubernetes_version, &stem);
            let (rt, env, file) = (rt.clone(), env.clone(), file.clone());
            Trial::ignorable_test(name, move || {
                let env = rt
                    .block_on(env.get_or_init(|| async {
                        Environment::start()
                            .await
                            .map_err(|e| format!("{e}\n  hint: {}", e.hint()))
                    }))
                    .clone()
                    .map_err(Failed::from)?;
                let report = rt.block_on(nodejoin::run::scenario::run(&env, &scenario, &file));
                println!("{}", report.render());
                match report.outcome {
                    Outcome::Passed => Ok(Completion::Completed),
                    Outcome::Ignored(reason) => Ok(Completion::ignored_with(reason)),
                    _ => Err(Failed::from(report.failure_lines().join("\n"))),
                }
            })
            .with_kind(provider.as_str())
        })
        .collect()
}

fn main() {
    nodejoin::init_crypto();
    nodejoin::init_tracing();
    let args = Arguments::from_args();
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("cannot start a tokio runtime: {e}");
            std::process::exit(101);
        }
    };
    let files = match nodejoin::scenario::discover(&[nodejoin::paths::workspace_root().join("scenarios")]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(101);
        }
    };
    let env: Arc<SharedEnv> = Arc::new(OnceCell::new());
    // SIGINT, SIGTERM, SIGHUP: destructors will not run, so this run's processes and containers are removed
    // before exiting.
    let for_signal = env.clone();
    let run_id: nodejoin::signals::RunIdSource = Arc::new(move || match for_signal.get() {
        Some(Ok(env)) => Some(env.run_id.clone()),
        _ => None,
    });
    {
        let _in_runtime = rt.enter();
        if let Err(e) = nodejoin::signals::exit_on_termination(run_id) {
            eprintln!("cannot install signal handlers: {e}");
            std::process::exit(101);
        }
    }
    let enabled = match trials::enabled(std::env::var(trials::ENV_PROVIDERS).ok().as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(101);
        }
    };
    let all = files
        .into_iter()
        .flat_map(|f| trials(f, &enabled, rt.clone(), env.clone()))
        .collect();
    let conclusion = libtest_mimic::run(&args, all);
    // The signal task holds a reference; the environment is shut down through the cell either way.
    if let Some(Ok(env)) = env.get().cloned() {
        let leftovers = rt.block_on(env.shutdown());
        rt.block_on(nodejoin::signals::wait_if_terminating());
        if !leftovers.is_empty() {
            eprintln!("error: the run left objects behind: {leftovers:?}");
            std::process::exit(1);
        }
    }
    rt.block_on(nodejoin::signals::wait_if_terminating());
    conclusion.exit();
}
