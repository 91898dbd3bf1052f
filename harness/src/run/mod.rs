//! Running scenarios: the shared environment of a process (network, fakes, control planes), the per-scenario
//! pipeline of small named actions, and the reports.
mod actions;
pub mod artifacts;
mod boot;
mod clusters;
pub mod env;
pub mod events;
pub mod failfast;
pub mod files;
pub mod iam;
mod journal;
pub mod lazy;
mod node;
mod node_checks;
mod observe;
pub mod pod;
pub mod prepare;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod timeline;
pub mod trial;
pub mod trials;
pub mod userdata;
pub mod verdict;

pub use env::Environment;
pub use lazy::LazyEnvironment;
pub use report::{Outcome, ScenarioReport};
