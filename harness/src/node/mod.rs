//! Nodes: the image they run, the machines that run it (`machine`: a container, a VM, the user's own disk), and the
//! host state they touch.
pub mod capacity;
pub mod cpu;
pub mod dmi;
pub mod eks_ami;
pub mod eks_ami_git;
pub mod group_image;
pub mod image;
pub mod inputs;
pub mod journal;
pub mod kept_var;
pub mod machine;
pub mod privileges;
pub mod seed;
pub mod vm;

/// Where a node records what nodejoin's image changed for the host rather than for the bootstrap, one line each
/// (written by the node image's kubelet wrapper; read into the scenario report).
pub const HOST_ADAPTATIONS: &str = "/run/nodejoin/host-adaptations";
