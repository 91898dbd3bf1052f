//! Facts about EKS worker nodes that the harness derives expectations from.
pub mod dns;
pub mod max_pods;
