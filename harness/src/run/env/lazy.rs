//! The environment the trials of one test process share (scenario trials, mutation trials): started by the
//! first trial that needs it, cleaned up on SIGINT, SIGTERM or SIGHUP, shut down after the last trial.
use crate::run::Environment;
use std::sync::Arc;
use tokio::runtime::Runtime;
use tokio::sync::OnceCell;

pub struct LazyEnvironment {
    rt: Arc<Runtime>,
    settings: Arc<crate::settings::Settings>,
    cell: OnceCell<std::result::Result<Arc<Environment>, String>>,
}

impl LazyEnvironment {
    /// Also installs the termination handlers, which clean up whatever run has started by then.
    pub fn new(rt: Arc<Runtime>, settings: Arc<crate::settings::Settings>) -> std::io::Result<Arc<Self>> {
        let this = Arc::new(Self {
            rt,
            settings: settings.clone(),
            cell: OnceCell::new(),
        });
        let for_signal = this.clone();
        let run_id: crate::signals::RunIdSource = Arc::new(move || match for_signal.cell.get() {
            Some(Ok(env)) => Some(env.run_id.clone()),
            _ => None,
        });
        let _in_runtime = this.rt.enter();
        crate::signals::exit_on_termination(settings, run_id)?;
        Ok(this)
    }

    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// The environment, started on first use; its start-up error (with the hint) for every trial otherwise.
    pub fn get(&self) -> std::result::Result<Arc<Environment>, String> {
        self.rt
            .block_on(self.cell.get_or_init(|| async {
                Environment::start(self.settings.clone())
                    .await
                    .map_err(|e| format!("{e}\n  hint: {}", e.hint()))
            }))
            .clone()
    }

    /// Shuts the environment down if it started, and waits out a termination's clean-up; what the run left.
    pub fn finish(&self) -> Vec<String> {
        let leftovers = match self.cell.get().cloned() {
            Some(Ok(env)) => self.rt.block_on(env.shutdown()),
            _ => Vec::new(),
        };
        self.rt.block_on(crate::signals::wait_if_terminating());
        leftovers
    }
}
