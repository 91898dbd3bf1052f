//! Facts about EKS worker nodes that the harness derives expectations from.
pub mod aws_auth;
pub mod dns;
pub mod identity;
pub mod instance_sizes;
pub mod instance_store;
pub mod max_pods;
pub mod network;
pub mod token;
