//! One libtest-mimic trial per scenario file, so `cargo test` and `cargo nextest run` list and filter each
//! scenario (`cargo test --test scenarios -- basic`). Trials in one process share the environment and one
//! control plane per (provider, version, service CIDR); everything is torn down after the last trial, and a
//! leak of any container or network of the run fails the process.
use libtest_mimic::{Arguments, Failed, Trial};
use nodejoin::run::{Environment, Outcome};
use std::sync::Arc;
use tokio::sync::OnceCell;

struct Shared {
    rt: tokio::runtime::Runtime,
    env: OnceCell<std::result::Result<Arc<Environment>, String>>,
}

impl Shared {
    fn env(&self) -> std::result::Result<Arc<Environment>, String> {
        self.rt.block_on(async {
            self.env
                .get_or_init(|| async {
                    Environment::start()
                        .await
                        .map_err(|e| format!("{e}\n  hint: {}", e.hint()))
                })
                .await
                .clone()
        })
    }
}

fn main() {
    nodejoin::init_crypto();
    nodejoin::init_tracing();
    let args = Arguments::from_args();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start a tokio runtime: {e}");
            std::process::exit(101);
        }
    };
    let shared = Arc::new(Shared {
        rt,
        env: OnceCell::new(),
    });
    let dir = nodejoin::paths::workspace_root().join("scenarios");
    let files = match nodejoin::scenario::discover(&[dir]) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(101);
        }
    };
    let mut trials = Vec::new();
    for file in files {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_default();
        let parsed = nodejoin::scenario::load_file(&file);
        let kind = parsed
            .as_ref()
            .map(|s| s.cluster.provider.as_str())
            .unwrap_or("local")
            .to_string();
        let ignored = match &parsed {
            Ok(s) if s.cluster.provider != nodejoin::scenario::model::Provider::Local => {
                Some(format!(
                    "provider {} is not available here (issue 5)",
                    s.cluster.provider.as_str()
                ))
            }
            _ => None,
        };
        let shared = shared.clone();
        let trial = Trial::test(format!("scenarios::{stem}"), move || {
            let scenario =
                parsed.map_err(|e| Failed::from(format!("{e}\n  hint: {}", e.hint())))?;
            let env = shared.env().map_err(Failed::from)?;
            let report = shared
                .rt
                .block_on(nodejoin::run::scenario::run(&env, &scenario, &file));
            println!("{}", report.render());
            match report.outcome {
                Outcome::Passed => Ok(()),
                Outcome::Ignored(reason) => {
                    Err(Failed::from(format!("ignored at run time: {reason}")))
                }
                _ => Err(Failed::from(report.failure_lines().join("\n"))),
            }
        })
        .with_kind(kind);
        trials.push(match ignored {
            Some(reason) => trial.with_ignored_flag(true).with_kind(reason),
            None => trial,
        });
    }
    let conclusion = libtest_mimic::run(&args, trials);
    let mut leaked = Vec::new();
    if let Some(Ok(env)) = Arc::try_unwrap(shared)
        .ok()
        .and_then(|s| {
            let Shared { rt, env } = s;
            env.into_inner().map(|e| (rt, e))
        })
        .map(|(rt, e)| {
            if let Ok(env) = &e {
                leaked = rt.block_on(env.clone().shutdown());
            }
            e
        })
    {
        drop(env);
    }
    if !leaked.is_empty() {
        eprintln!("error: the run left objects behind: {leaked:?}");
        std::process::exit(1);
    }
    conclusion.exit();
}
