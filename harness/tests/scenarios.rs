//! One libtest-mimic trial per scenario file, so `cargo test` and `cargo nextest run` list and filter each
//! scenario (`cargo test --test scenarios -- basic`). Trials in one process share the environment and one
//! control plane per (provider, version, service CIDR); everything is torn down after the last trial, and a
//! container or network of the run left behind fails the process. A scenario whose provider cannot run on
//! this machine is reported as ignored, with the reason.
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use nodejoin::run::{Environment, Outcome};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::OnceCell;

type SharedEnv = OnceCell<std::result::Result<Arc<Environment>, String>>;

fn trial(file: PathBuf, rt: Arc<tokio::runtime::Runtime>, env: Arc<SharedEnv>) -> Trial {
    let stem = file
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_default();
    let parsed = nodejoin::scenario::load_file(&file);
    let kind = parsed
        .as_ref()
        .map(|s| s.cluster.provider.as_str())
        .unwrap_or("invalid")
        .to_string();
    Trial::ignorable_test(format!("scenarios::{stem}"), move || {
        let scenario = parsed.map_err(|e| Failed::from(format!("{e}\n  hint: {}", e.hint())))?;
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
    .with_kind(kind)
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
    // Ctrl-C: destructors will not run, so remove this run's processes and containers before exiting.
    let for_signal = env.clone();
    rt.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            if let Some(Ok(env)) = for_signal.get() {
                eprintln!("\ninterrupted: removing run {}'s processes and containers", env.run_id);
                nodejoin::reaper::emergency_cleanup(&env.run_id).await;
            }
            std::process::exit(130);
        }
    });
    let trials = files.into_iter().map(|f| trial(f, rt.clone(), env.clone())).collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // The signal task holds a reference; the environment is shut down through the cell either way.
    if let Some(Ok(env)) = env.get().cloned() {
        let leftovers = rt.block_on(env.shutdown());
        if !leftovers.is_empty() {
            eprintln!("error: the run left objects behind: {leftovers:?}");
            std::process::exit(1);
        }
    }
    conclusion.exit();
}
