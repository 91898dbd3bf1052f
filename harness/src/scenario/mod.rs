//! Declarative scenarios (`scenarios/*.yaml`): the cluster, the nodes and how they bootstrap, and what the
//! cluster must see afterwards.
mod durations;
pub mod expect;
mod iam_rules;
pub mod load;
pub mod model;
mod names;
pub mod network;
mod nonempty;
pub mod patch;
mod position;
pub mod relative;
pub mod schema;
pub mod template;
pub mod trials;
pub mod user_data;

pub use load::{discover, load_file};
pub use model::Scenario;
pub use names::unique_scenarios;
