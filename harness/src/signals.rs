//! SIGINT (Ctrl-C), SIGTERM (`kill`, CI cancelling a job) and SIGHUP (the terminal closed) all end a run the
//! same way: destructors will not run, so this run's processes, containers, network and host sysctls are
//! removed by `reaper::emergency_cleanup`, and the process exits with 128 + the signal's number, as a shell
//! reports a process killed by it. The CLI and the scenario trials share this, so neither can forget one.
use crate::settings::Settings;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

/// A signal that ends a run early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    Interrupt,
    Terminate,
    Hangup,
}

impl Termination {
    pub const ALL: [Termination; 3] = [Termination::Interrupt, Termination::Terminate, Termination::Hangup];

    pub fn number(self) -> i32 {
        match self {
            Termination::Interrupt => libc::SIGINT,
            Termination::Terminate => libc::SIGTERM,
            Termination::Hangup => libc::SIGHUP,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Termination::Interrupt => "SIGINT",
            Termination::Terminate => "SIGTERM",
            Termination::Hangup => "SIGHUP",
        }
    }

    /// 130, 143 or 129: what a shell reports for a process this signal ended.
    pub fn exit_code(self) -> i32 {
        128 + self.number()
    }
}

static TERMINATING: AtomicBool = AtomicBool::new(false);

/// What must still happen when a signal ends the process, after its clean-up: reports ended with what finished.
type Finisher = Box<dyn FnOnce(&'static str) + Send>;
static BEFORE_EXIT: std::sync::Mutex<Vec<Finisher>> = std::sync::Mutex::new(Vec::new());

/// Runs `finish` (given the signal's name) when a termination signal ends the process, before it exits.
pub fn before_exit(finish: Finisher) {
    if let Ok(mut f) = BEFORE_EXIT.lock() {
        f.push(finish);
    }
}

/// The run an environment of this process is starting, published before it creates anything, so a signal
/// during start-up cleans up what it has created so far.
static STARTING: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Called by `Environment::start` with its run id before it creates the run's network, fakes or files.
pub fn starting(run_id: &str) {
    if let Ok(mut s) = STARTING.lock() {
        *s = Some(run_id.to_string());
    }
}

fn starting_run() -> Option<String> {
    STARTING.lock().ok().and_then(|s| s.clone())
}

/// Whether a termination signal has arrived (its clean-up is running, or done).
pub fn terminating() -> bool {
    TERMINATING.load(Ordering::SeqCst)
}

/// For the main flow, before it exits on its own: while a signal's clean-up runs it never returns (that task
/// exits the process, bounded by `deadline::CLEANUP`), so the clean-up is not cut short and the exit code is
/// the signal's, not the failures the clean-up caused.
pub async fn wait_if_terminating() {
    if terminating() {
        std::future::pending::<()>().await;
    }
}

/// Which run to clean up, if it has started yet (the scenario trials start their environment lazily).
pub type RunIdSource = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Installs handlers for SIGINT, SIGTERM and SIGHUP now (so none is missed once this returns) and spawns the
/// task that, on the first of them, cleans up the run `run_id` names and exits with `exit_code()`. Must be
/// called inside a tokio runtime.
pub fn exit_on_termination(settings: Arc<Settings>, run_id: RunIdSource) -> std::io::Result<()> {
    let mut streams = Vec::new();
    for t in Termination::ALL {
        streams.push((t, signal(SignalKind::from_raw(t.number()))?));
    }
    tokio::spawn(async move {
        let waits = streams.iter_mut().map(|(t, s)| {
            let t = *t;
            Box::pin(async move {
                s.recv().await;
                t
            })
        });
        let (signal, _, _) = futures::future::select_all(waits).await;
        TERMINATING.store(true, Ordering::SeqCst);
        // A closed terminal makes stderr fail: never let a message stop the clean-up (eprintln! would panic).
        let say = |text: String| {
            let _ = writeln!(std::io::stderr(), "{text}");
        };
        match run_id().or_else(starting_run) {
            Some(run) => {
                say(format!(
                    "\n{}: removing run {run}'s processes, containers and network",
                    signal.name()
                ));
                let cleanup = crate::reaper::emergency_cleanup(&settings, &run);
                if tokio::time::timeout(crate::deadline::CLEANUP, cleanup).await.is_err() {
                    say(format!(
                        "clean-up of run {run} did not finish within {}; `nodejoin reap` removes the rest",
                        humantime::format_duration(crate::deadline::CLEANUP)
                    ));
                }
            }
            None => say(format!("\n{}: no run started yet", signal.name())),
        }
        // Builds under way and work directories (a compare worktree among them) go too.
        crate::reaper::leave_own_work(&settings);
        let finishers = BEFORE_EXIT
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default();
        for finish in finishers {
            finish(signal.name());
        }
        std::process::exit(signal.exit_code());
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_shell_convention() {
        let codes: Vec<(&str, i32)> = Termination::ALL.iter().map(|t| (t.name(), t.exit_code())).collect();
        assert_eq!(codes, [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)]);
    }
}
