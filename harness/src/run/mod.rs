//! Running scenarios, in three rooms: the shared environment of a process (`env`: network, fakes, control
//! planes), the driver (`driver`: trials, the runner, verdicts) and the per-scenario pipeline (`pipeline`: one
//! folder per step, named as the report shows its phases); with what they share: the node while it runs, the
//! events reporters consume, and the report.
pub mod cost;
pub mod driver;
pub mod env;
pub mod events;
mod node;
pub mod pipeline;
pub mod report;
pub mod timeline;
pub mod trial;

pub use driver::{runner, scenario, trials, verdict};
pub use env::{lazy, prepare, Environment};
pub use lazy::LazyEnvironment;
pub use report::{Outcome, ScenarioReport};
