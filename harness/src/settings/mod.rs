//! Settings: every flag, `NODEJOIN_*` variable and profile key, resolved once into one typed value
//! (testcontainers' `core/env/config.rs` is the model). One table says what each setting is ([`rows::ROWS`]) and
//! one function resolves them all ([`resolve::resolve`]: flag > variable > profile > default); the CLI, the
//! cargo-test trials and `compare` call it. It is the only place a variable's name is written: the rest of the
//! harness reads fields, and `--help` and the book's command-line page list the rows. No global holds the
//! value: its resolver passes it down (`&Settings`, or an `Arc` in `run::Environment`).
pub mod config;
pub mod resolve;
pub mod rows;
pub mod values;

pub use resolve::{Flags, Source};
pub use values::{ContainerdLine, FlakyResult, NoTests};

use std::collections::BTreeMap;
use std::path::PathBuf;

/// The prefix of every variable, and of the tool overrides (`NODEJOIN_<TOOL>`, `NODEJOIN_<TOOL>_VERSION`).
const PREFIX: &str = "NODEJOIN_";

/// The names of the variables, for the few places that must write one out (a hint, a child's environment).
pub mod var {
    pub const CACHE_DIR: &str = "NODEJOIN_CACHE_DIR";
    pub const FIXTURES: &str = "NODEJOIN_FIXTURES";
    pub const ARTIFACTS_DIR: &str = "NODEJOIN_ARTIFACTS_DIR";
    pub const K8S_VERSION: &str = "NODEJOIN_K8S_VERSION";
    pub const K8S_ASSETS: &str = "NODEJOIN_K8S_ASSETS";
    pub const K8S_RELEASE_URL: &str = "NODEJOIN_K8S_RELEASE_URL";
    pub const ETCD_RELEASE_URL: &str = "NODEJOIN_ETCD_RELEASE_URL";
    pub const GITHUB_RELEASE_URL: &str = "NODEJOIN_GITHUB_RELEASE_URL";
    pub const CONTAINERD_LINE: &str = "NODEJOIN_CONTAINERD_LINE";
    pub const NODE_IMAGE: &str = "NODEJOIN_NODE_IMAGE";
    pub const BASE_IMAGE: &str = "NODEJOIN_BASE_IMAGE";
    pub const DEBIAN_SUITE: &str = "NODEJOIN_DEBIAN_SUITE";
    pub const EKS_AMI: &str = "NODEJOIN_EKS_AMI";
    pub const ALLOW_PATHS: &str = "NODEJOIN_ALLOW_PATHS";
    pub const JOBS: &str = "NODEJOIN_JOBS";
    pub const PROVIDERS: &str = "NODEJOIN_PROVIDERS";
    pub const REQUIRE_PROVIDERS: &str = "NODEJOIN_REQUIRE_PROVIDERS";
    pub const SKIP_TRIALS: &str = "NODEJOIN_SKIP_TRIALS";
    pub const BOOT_CONCURRENCY: &str = "NODEJOIN_BOOT_CONCURRENCY";
    pub const VM_ACCEL: &str = "NODEJOIN_VM_ACCEL";
    pub const ENDPOINTS_CA: &str = "NODEJOIN_ENDPOINTS_CA";
    pub const KEEP_ARTIFACTS: &str = "NODEJOIN_KEEP_ARTIFACTS";
    pub const CONFINED: &str = "NODEJOIN_CONFINED";
    pub const HOST_SETUP: &str = "NODEJOIN_HOST_SETUP";
    pub const KIND_IMAGE: &str = "NODEJOIN_KIND_IMAGE";
    pub const KIND_RESTRICTED: &str = "NODEJOIN_KIND_RESTRICTED";
    pub const K3S_IMAGE: &str = "NODEJOIN_K3S_IMAGE";
    pub const PROFILE: &str = "NODEJOIN_PROFILE";
    pub const SCENARIOS: &str = "NODEJOIN_SCENARIOS";
    pub const RETRIES: &str = "NODEJOIN_RETRIES";
    pub const NO_TESTS: &str = "NODEJOIN_NO_TESTS";
    /// Set by GitHub Actions on its runners: failures become annotations on the pull request.
    pub const GITHUB_ACTIONS: &str = "GITHUB_ACTIONS";
    pub const GITHUB_WORKSPACE: &str = "GITHUB_WORKSPACE";
    /// Set by the harness on its own children (`process::OWNER_ENV`): not a setting.
    pub const OWNER: &str = "NODEJOIN_OWNER";
    /// What a node and the kind docker shim are told (their environment, `/etc/nodejoin/node.env`): not settings.
    pub const NODE_IMDS: &str = "NODEJOIN_IMDS";
    pub const NODE_STS_ENDPOINT: &str = "NODEJOIN_STS_ENDPOINT";
    pub const NODE_DMI_PREFIX: &str = "NODEJOIN_DMI_";
    pub const NODE_HYPERVISOR_UUID: &str = "NODEJOIN_HYPERVISOR_UUID";
    pub const SHIM_REAL_DOCKER: &str = "NODEJOIN_REAL_DOCKER";
    pub const SHIM_LABELS: &str = "NODEJOIN_LABELS";
    pub const SHIM_SWAP_PRIVILEGED: &str = "NODEJOIN_SWAP_PRIVILEGED";
    pub const SHIM_CAP_DROP: &str = "NODEJOIN_CAP_DROP";
    pub const SHIM_DEVICES: &str = "NODEJOIN_DEVICES";
    pub const SHIM_SECCOMP: &str = "NODEJOIN_SECCOMP";
}

/// The tools whose binary (`NODEJOIN_<TOOL>`) and Go module version (`NODEJOIN_<TOOL>_VERSION`) can be given.
pub const TOOLS: [&str; 6] = [
    "NODEADM",
    "AWS_IAM_AUTHENTICATOR",
    "CRICTL",
    "COREDNS",
    "CONTAINERD",
    "RUNC",
];

/// The settings of a process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    pub cache_dir: Option<PathBuf>,
    pub fixtures: Option<PathBuf>,
    pub artifacts_dir: Option<PathBuf>,
    /// As given; checked where it is used (`scenario` refuses a malformed one with its name). The first of
    /// [`Settings::kubernetes_versions`] when there are several.
    pub kubernetes_version: Option<String>,
    /// The versions a run makes trials for when it is given more than one (`v1.35.4,v1.36.3`; a profile's
    /// `kubernetes-versions`); empty otherwise.
    pub kubernetes_versions: Vec<String>,
    pub k8s_assets: Option<PathBuf>,
    pub k8s_release_url: Option<String>,
    pub etcd_release_url: Option<String>,
    pub github_release_url: Option<String>,
    /// `NODEJOIN_<TOOL>`, by tool key ([`TOOLS`]).
    pub tool_bins: BTreeMap<&'static str, PathBuf>,
    /// `NODEJOIN_<TOOL>_VERSION`, by tool key.
    pub tool_versions: BTreeMap<&'static str, String>,
    pub containerd_line: Option<ContainerdLine>,
    pub node_image: Option<String>,
    pub base_image: Option<String>,
    pub debian_suite: Option<String>,
    pub eks_ami: Option<PathBuf>,
    /// Directories outside a scenario's repository its paths may lead into (`scenario::confine`): the caller's
    /// `NODEJOIN_ALLOW_PATHS` / `--allow-path`, and the caller's own amazon-eks-ami checkout. Never a
    /// repository's configuration file: what a repository allows itself is no bound.
    pub allow_paths: Vec<PathBuf>,
    pub jobs: Option<usize>,
    pub providers: Option<String>,
    pub require_providers: Option<String>,
    /// Parts of trial names whose trials are listed as ignored (`NODEJOIN_SKIP_TRIALS`): a CI step that has just
    /// run the same scenarios another way (`.ci/run`) leaves them out of `cargo test`, visibly.
    pub skip_trials: Vec<String>,
    pub boot_concurrency: Option<usize>,
    /// `NODEJOIN_VM_ACCEL`: `kvm`, `tcg`, or unset/`auto` (node::vm::qemu::accel decides).
    pub vm_accel: Option<String>,
    /// `NODEJOIN_ENDPOINTS_CA`: the directory of the CA a run serves AWS's names under, instead of a fresh one.
    pub endpoints_ca: Option<PathBuf>,
    pub keep_artifacts: bool,
    /// Confined mode (`--confined`, `NODEJOIN_CONFINED=true`, a profile's `confined = true`): every node must be a
    /// machine that cannot reach the host's kernel (`MachineKind::own_kernel`); a container node is refused when
    /// its scenario loads. For code nobody here vouches for (a pull request from a fork).
    pub confined: bool,
    /// `NODEJOIN_HOST_SETUP=never`: install nothing, start nothing, only say what is missing.
    pub no_host_setup: bool,
    pub kind_image: Option<String>,
    pub kind_restricted: Option<String>,
    pub k3s_image: Option<String>,
    pub profile: Option<String>,
    pub scenarios: Option<PathBuf>,
    pub retries: Option<u32>,
    /// The provider a run uses when none is named (a profile's `provider`).
    pub provider: Option<String>,
    /// Whether a FLAKY scenario fails the run (a profile's `flaky-result = "fail"`).
    pub flaky_fails: bool,
    /// What a run in which nothing ran exits with (`--no-tests`).
    pub no_tests: NoTests,
    /// Under GitHub Actions (`GITHUB_ACTIONS=true`): failures are also written as annotations.
    pub github_actions: bool,
    /// The checkout's root on a runner (`GITHUB_WORKSPACE`): annotations name files from there, whatever the
    /// working directory (the action's `working-directory`).
    pub github_workspace: Option<PathBuf>,
    /// Where each setting given came from, by row key (a provider named on the command line must run).
    pub sources: BTreeMap<&'static str, Source>,
}

impl Settings {
    /// Where the setting of row `key` came from; `None` when it was not given.
    pub fn source(&self, key: &str) -> Option<Source> {
        self.sources.get(key).copied()
    }

    /// The containerd line of node groups that name none: the setting (how `--containerd` and the CI matrix pick
    /// one), else 2.2.
    pub fn containerd(&self) -> ContainerdLine {
        self.containerd_line.unwrap_or_default()
    }

    /// The Kubernetes versions a run makes trials for: each of several, else the one given, else the default
    /// (`None`).
    pub fn versions(&self) -> Vec<Option<String>> {
        if self.kubernetes_versions.len() > 1 {
            self.kubernetes_versions.iter().cloned().map(Some).collect()
        } else {
            vec![self.kubernetes_version.clone()]
        }
    }

    /// Sets the versions from a list given (a flag, a profile): several, one, or none (unchanged).
    pub fn set_versions(&mut self, versions: Vec<String>) {
        // An empty item (a variable set to "" reaches a flag's list so) counts as unset, as everywhere.
        let versions: Vec<String> = versions
            .into_iter()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if let Some(first) = versions.first() {
            self.kubernetes_version = Some(first.clone());
            self.kubernetes_versions = if versions.len() > 1 { versions } else { Vec::new() };
        }
    }

    /// The variable that overrides `tool`'s binary, for messages.
    pub fn tool_bin_var(tool: &str) -> String {
        format!("{PREFIX}{tool}")
    }

    /// The variable that sets `tool`'s Go module version, for messages.
    pub fn tool_version_var(tool: &str) -> String {
        format!("{PREFIX}{tool}_VERSION")
    }
}

/// This process's environment's settings, for unit tests (a test that cannot resolve them gets the defaults).
#[cfg(test)]
pub(crate) fn for_tests() -> Settings {
    resolve::from_process(&Flags::default()).unwrap_or_default()
}

/// Every variable a user may set, with what it does: the rows', then the tool overrides.
pub fn variables() -> Vec<(&'static str, &'static str)> {
    rows::ROWS
        .iter()
        .filter_map(|r| Some((r.var?, r.help)))
        .chain([
            (
                "NODEJOIN_<TOOL>",
                "a binary to use for a node tool (NODEADM, AWS_IAM_AUTHENTICATOR, CRICTL, COREDNS, CONTAINERD, RUNC)",
            ),
            (
                "NODEJOIN_<TOOL>_VERSION",
                "the Go module version a node tool is built at",
            ),
        ])
        .collect()
}

/// `--help`'s list of the variables.
pub fn help() -> String {
    let mut text = String::from("Environment (each also in the book's command-line page):\n");
    for (name, what) in variables() {
        text.push_str(&format!("  {name:<27} {what}\n"));
    }
    text
}
