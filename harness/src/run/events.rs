//! What a run tells its reporters, as it happens (nextest keeps its runner apart from its reporters the same way):
//! the runner and the scenario pipeline emit events; the human renderer, the JSON-lines writer and the JUnit
//! writer (`crate::reporter`) consume them.
use super::report::ScenarioReport;
use crate::assert::Check;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub enum Event {
    RunStarted {
        run_id: String,
        artifacts: std::path::PathBuf,
        scenarios: usize,
        jobs: usize,
    },
    ScenarioStarted {
        scenario: String,
        provider: String,
    },
    PhaseStarted {
        scenario: String,
        phase: String,
    },
    PhaseDone {
        scenario: String,
        phase: String,
        took: Duration,
    },
    CheckDone {
        scenario: String,
        check: Check,
    },
    /// An attempt failed and the scenario will run again (`--retries`); `report` is that attempt's.
    AttemptFailed {
        report: Arc<ScenarioReport>,
        attempt: u32,
        /// Attempts allowed in all.
        of: u32,
    },
    ScenarioFinished {
        report: Arc<ScenarioReport>,
    },
    RunFinished {
        reports: Arc<Vec<ScenarioReport>>,
        wall: Duration,
        /// What the run left behind (containers, networks, processes), if anything.
        leftovers: Vec<String>,
        /// The signal that cut the run short (`SIGTERM`...): the scenarios that had not finished are in
        /// `reports` as errors saying so.
        cancelled: Option<&'static str>,
        /// The host's busy CPU time while the run lasted (`crate::run::cost`).
        host_cpu: Option<Duration>,
    },
}

/// Keeps every finished scenario's report, for a run that must end its reports early (a termination signal).
#[derive(Clone, Default)]
pub struct Finished(Arc<Mutex<Vec<ScenarioReport>>>);

impl Finished {
    /// The reports so far.
    pub fn reports(&self) -> Vec<ScenarioReport> {
        self.0.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Reporter for Finished {
    fn on(&mut self, event: &Event) {
        if let Event::ScenarioFinished { report } = event {
            if let Ok(mut r) = self.0.lock() {
                r.push(ScenarioReport::clone(report));
            }
        }
    }
}

/// Consumes events; called in order, one event at a time.
pub trait Reporter: Send {
    fn on(&mut self, event: &Event);
}

/// Where events go: the reporters of a run, or nowhere (a trial under libtest, which prints its report itself).
#[derive(Clone, Default)]
pub struct EventSink(Option<Arc<Mutex<Reporters>>>);

type Reporters = Vec<Box<dyn Reporter>>;

impl EventSink {
    pub fn none() -> Self {
        Self(None)
    }

    pub fn to(reporters: Vec<Box<dyn Reporter>>) -> Self {
        Self(Some(Arc::new(Mutex::new(reporters))))
    }

    pub fn emit(&self, event: Event) {
        if let Some(reporters) = &self.0 {
            let mut reporters = reporters.lock().unwrap_or_else(|p| p.into_inner());
            for r in reporters.iter_mut() {
                r.on(&event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(Arc<Mutex<Vec<String>>>);
    impl Reporter for Count {
        fn on(&mut self, event: &Event) {
            if let Event::PhaseDone { phase, .. } = event {
                self.0.lock().unwrap_or_else(|p| p.into_inner()).push(phase.clone());
            }
        }
    }

    #[test]
    fn every_reporter_sees_every_event_in_order() {
        let (a, b) = (Arc::new(Mutex::new(vec![])), Arc::new(Mutex::new(vec![])));
        let sink = EventSink::to(vec![Box::new(Count(a.clone())), Box::new(Count(b.clone()))]);
        for phase in ["provision", "bootstrap"] {
            sink.emit(Event::PhaseDone {
                scenario: "s".into(),
                phase: phase.into(),
                took: Duration::ZERO,
            });
        }
        EventSink::none().emit(Event::PhaseStarted {
            scenario: "s".into(),
            phase: "ignored".into(),
        });
        for seen in [a, b] {
            assert_eq!(
                *seen.lock().unwrap_or_else(|p| p.into_inner()),
                ["provision", "bootstrap"]
            );
        }
    }
}
