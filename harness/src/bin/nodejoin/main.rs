//! The `nodejoin` CLI: parses its command line ([`cli`]), resolves the settings once (flags over variables over
//! the profile) and hands them with the request to the library (`nodejoin::session` runs scenarios, `compare`,
//! `mutate`, `doctor`, `init` the rest).
mod cli;
mod commands;
mod compare;
mod image;
mod init;

use clap::Parser;
use cli::{Cli, Command};
use nodejoin::reporter::ReporterBuilder;
use nodejoin::session::{self, RunRequest};
use nodejoin::settings;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    nodejoin::init_crypto();
    nodejoin::init_tracing();
    let cli = Cli::parse();
    // The settings, resolved once: this command's flags over the environment over the profile; passed down to
    // whatever reads them.
    let resolved = cli.flags().and_then(|flags| settings::resolve::from_process(&flags));
    let settings = match resolved {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            eprintln!(
                "  hint: see `nodejoin run --help` for the flags and variables, and the book's \"From your \
                 repository\" page for the profile keys"
            );
            return ExitCode::from(session::EXIT_BAD_INPUT);
        }
    };
    // Annotations name files from the checkout's root (GITHUB_WORKSPACE), else from where the run started.
    let annotations = settings.github_actions.then(|| {
        settings
            .github_workspace
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default()
    });
    let settings = Arc::new(settings);
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => Arc::new(rt),
        Err(e) => {
            eprintln!("error: cannot start a tokio runtime: {e}");
            return ExitCode::from(session::EXIT_BAD_INPUT);
        }
    };
    let code = match cli.command {
        Command::Run(args) => match args.trials.select.selection() {
            Ok(selection) => session::run(
                rt,
                settings,
                RunRequest {
                    paths: args.trials.scenarios,
                    reporters: ReporterBuilder {
                        format: args.format,
                        junit: args.junit,
                        markdown: args.markdown,
                        annotations,
                    },
                    selection,
                    rerun_failed: args.trials.rerun_failed,
                },
            ),
            Err(code) => code,
        },
        Command::List(args) => match args.trials.select.selection() {
            Ok(selection) => session::list(
                &settings,
                args.trials.scenarios,
                &selection,
                args.trials.rerun_failed,
                args.format == nodejoin::reporter::Format::Json,
            ),
            Err(code) => code,
        },
        Command::Compare(args) => compare::main(rt, &settings, args),
        Command::Init(args) => init::main(args),
        Command::Schema => {
            print!("{}", nodejoin::scenario::schema::text());
            0
        }
        Command::Mutate { only, list, scenarios } => nodejoin::mutate::command(rt, settings, &only, list, &scenarios),
        Command::Image { command } => rt.block_on(image::main(&settings, command)),
        Command::Assets { version } => rt.block_on(commands::assets(&settings, &version)),
        Command::Doctor { version } => rt.block_on(commands::doctor(&settings, &version)),
        Command::CacheKey { mut scenarios } => {
            if scenarios.is_empty() {
                scenarios.push(PathBuf::from("scenarios"));
            }
            match nodejoin::run::env::cache_key::cache_key(&settings, &scenarios) {
                Ok(key) => {
                    println!("{key}");
                    0
                }
                Err(e) => nodejoin::session::fail(&e),
            }
        }
        Command::Reap => rt.block_on(commands::reap(&settings)),
    };
    ExitCode::from(code)
}
