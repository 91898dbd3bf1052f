//! `nodejoin mutate`: list the catalogue, or run the mutations asked for on one environment and say which were
//! caught (exit 0 only when every one was).
use std::path::Path;
use std::sync::Arc;
use tokio::runtime::Runtime;

/// Runs `nodejoin mutate`; the exit code.
pub fn command(
    rt: Arc<Runtime>,
    settings: Arc<crate::settings::Settings>,
    only: &[String],
    list: bool,
    scenarios: &Path,
) -> u8 {
    let selected = match super::select(only) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}\n  hint: `nodejoin mutate --list` names every mutation");
            return crate::session::EXIT_BAD_INPUT;
        }
    };
    if list {
        for m in &selected {
            let catchers: Vec<String> = m
                .caught_by
                .iter()
                .map(|c| format!("{} ({})", c.scenario, c.check_name()))
                .collect();
            println!("{:<24} {}; caught by {}", m.name, m.regression, catchers.join(", "));
        }
        return 0;
    }
    let scratch = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: cannot create a scratch directory: {e}");
            return crate::session::EXIT_BAD_INPUT;
        }
    };
    let (lazy, env) = match crate::session::start_environment(&rt, settings) {
        Ok(started) => started,
        Err(code) => return code,
    };
    let mut results = Vec::new();
    let mut ignored = 0;
    let controls = super::Controls::default();
    for m in &selected {
        if let Some(why) = super::not_applicable(&env.settings, m, scenarios) {
            // Neither caught nor survived: its scenario cannot run here.
            println!("IGNORED   {:<24} {why}", m.name);
            ignored += 1;
            continue;
        }
        let r = rt.block_on(super::run(&env, &controls, m, scenarios, scratch.path()));
        println!("{}", r.line());
        results.push(r);
    }
    drop(env);
    let leftovers = lazy.finish();
    println!("\n{}", super::summary(&results));
    if ignored > 0 {
        println!("{ignored} ignored: their scenarios cannot run here (said above)");
    }
    if !leftovers.is_empty() {
        eprintln!("error: objects left behind: {}", leftovers.join(", "));
        return crate::session::EXIT_FAILED;
    }
    if results.iter().all(|r| r.caught()) {
        0
    } else {
        crate::session::EXIT_FAILED
    }
}
