//! What the providers share: the API server's flags, the container control plane kind and k3s run, provider
//! images (an override, a remembered failed pull), kubeconfigs, and the objects a scenario creates in any cluster.
pub mod apiserver;
pub mod container;
pub mod images;
pub mod kubeconfig;
pub mod objects;
