//! Declarative scenarios (`scenarios/*.yaml`): the cluster, the nodes and how they bootstrap, and what the
//! cluster must see afterwards.
pub mod after;
pub mod confine;
pub mod discover;
mod durations;
pub mod expect;
pub mod flavors;
pub mod group_image;
mod iam_rules;
mod instance;
pub mod load;
pub mod model;
pub mod names;
pub use crate::eks::network;
mod nonempty;
mod own_disk;
pub mod patch;
pub mod position;
mod provider;
pub mod relative;
mod rules;
mod runtime;
pub mod schema;
mod step_rules;
pub mod template;
pub mod user_command;
pub mod user_data;
mod versions;

pub use discover::discover;
pub use load::{load_file, Defaults};
pub use model::Scenario;
pub use names::unique_scenarios;
