//! nodejoin: an end-to-end test harness for Kubernetes worker-node bootstrap, EKS first.
//!
//! Layers, bottom up. A module uses only the modules listed before it; `tests/layers.rs` reads this list and
//! every `crate::` path outside tests, so it stays true (and no two files of it use each other, but a module and
//! its own children):
//! - `untrusted`, `settings`, `error`, `process`, `deadline`, `paths`, `progress`, `redact`: bounded reads of files
//!   a repository names, settings (every variable, read once), errors, child processes, time limits, folders,
//!   progress lines;
//! - `pki`, `userdata`, `aws`, `eks`: derivations without I/O of their own: certificates, user-data formats,
//!   SigV4 and IAM credentials, what EKS computes (tokens, aws-auth, access entries, DNS, max pods, the VPC);
//! - `fakes`: the in-process AWS and EKS endpoints nodes call (they know nothing of Docker or Kubernetes);
//! - `docker`, `sysctl`, `hostnet`, `reaper`, `signals`, `host`: what a run owns on the host (containers, kernel
//!   parameters, VM nodes' taps and rules), and how it is given back;
//! - `assets`, `node`, `cluster`: Kubernetes binaries, node images and containers, control-plane providers;
//! - `scenario`: the file format (it names providers, node images and containerd lines);
//! - `controllers`, `assert`: what a cluster needs beside its control plane (CSR approval, cloud-node), and the
//!   checks on what it saw;
//! - `compare`: snapshots of what a bootstrap did, and their differences;
//! - `run`, `reporter`, `select`: running scenarios, reporting their events, and choosing which run (filters,
//!   partitions, reruns);
//! - `session`: a `nodejoin run` from its request to its exit code (reporters, signals, verdicts);
//! - `mutate`, `doctor`, `init`, `libtest`: commands built on the rest (`libtest`: scenarios as cargo-test
//!   trials).
pub mod assert;
pub mod assets;
pub mod aws;
pub mod cluster;
pub mod compare;
pub mod controllers;
pub mod deadline;
pub mod docker;
pub mod doctor;
pub mod eks;
pub mod error;
pub mod fakes;
pub mod host;
pub mod hostnet;
pub mod init;
pub mod libtest;
pub mod mutate;
pub mod node;
pub mod paths;
pub mod pki;
pub mod process;
pub mod progress;
pub mod reaper;
pub mod redact;
pub mod reporter;
pub mod run;
pub mod scenario;
pub mod select;
pub mod session;
pub mod settings;
pub mod signals;
pub mod sysctl;
pub mod untrusted;
pub mod userdata;

pub use error::{Error, Result};

/// Installs the ring crypto provider for rustls once per process (several crates link rustls).
pub fn init_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Logging for the CLI and the trials: `RUST_LOG` wins, else warnings only (the CLI and the reporters say what matters themselves).
pub fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        // kube-client logs every non-2xx answer at ERROR (an API server's 503 while it starts, a 404 on a delete);
        // the harness handles those itself and says what matters.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,nodejoin=warn,kube_client::client::builder=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
