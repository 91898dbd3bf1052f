//! Nodes: the image they run, the containers (or VMs, `vm`) that run it, and the host state they touch.
pub mod capacity;
pub mod container;
pub mod dmi;
pub mod eks_ami;
pub mod eks_ami_git;
pub mod group_image;
pub mod image;
pub mod inputs;
pub mod journal;
pub mod privileges;
pub mod seed;
pub mod vm;

/// Where a node records what nodejoin's image changed for the host rather than for the bootstrap, one line each
/// (written by the node image's kubelet wrapper; read into the scenario report).
pub const HOST_ADAPTATIONS: &str = "/run/nodejoin/host-adaptations";
