//! Settings: every `NODEJOIN_*` variable, read once into one struct (testcontainers' `core/env/config.rs` is the
//! model). The CLI fills it from its flags over the environment and installs it before anything reads it; the
//! cargo-test trials take it from the environment. It is the only place a variable's name is written: the rest
//! of the harness reads fields, `--help` and the book's command-line page list [`VARIABLES`].
pub mod config;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

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
    pub const HOST_SETUP: &str = "NODEJOIN_HOST_SETUP";
    pub const KIND_IMAGE: &str = "NODEJOIN_KIND_IMAGE";
    pub const KIND_RESTRICTED: &str = "NODEJOIN_KIND_RESTRICTED";
    pub const K3S_IMAGE: &str = "NODEJOIN_K3S_IMAGE";
    pub const PROFILE: &str = "NODEJOIN_PROFILE";
    pub const SCENARIOS: &str = "NODEJOIN_SCENARIOS";
    pub const RETRIES: &str = "NODEJOIN_RETRIES";
    /// Set by GitHub Actions on its runners: failures become annotations on the pull request.
    pub const GITHUB_ACTIONS: &str = "GITHUB_ACTIONS";
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

/// Every setting a user may give, with what it does: `--help` and the book's command-line page list these.
pub const VARIABLES: &[(&str, &str)] = &[
    (
        var::K8S_VERSION,
        "Kubernetes version of scenarios that name none, or several, comma-separated (`run --kubernetes-version`)",
    ),
    (
        var::PROVIDERS,
        "providers the cargo-test trials are made for (comma-separated; default all)",
    ),
    (
        var::REQUIRE_PROVIDERS,
        "providers that must run: a trial that cannot is a failure, not a skip",
    ),
    (
        var::SKIP_TRIALS,
        "cargo-test trials listed as ignored: those whose name contains one of these (comma-separated, e.g. `local/`)",
    ),
    (var::JOBS, "scenarios run at once (`run --jobs`)"),
    (
        var::SCENARIOS,
        "the folder the cargo-test trials are made from (default: the test's own)",
    ),
    (
        var::PROFILE,
        "the profile of .config/nodejoin.toml a run uses (`run --profile`; default: default)",
    ),
    (
        var::RETRIES,
        "runs of a failed scenario again before it counts as failed (`run --retries`)",
    ),
    (
        var::CONTAINERD_LINE,
        "containerd line of node groups that name none: 2.2, 1.7, 2.3 or 2.4 (`run --containerd`)",
    ),
    (
        var::EKS_AMI,
        "amazon-eks-ami checkout for every group naming one (`run --eks-ami`)",
    ),
    (
        var::ALLOW_PATHS,
        "directories outside a scenario's repository its paths may lead into (colon-separated; `--allow-path`)",
    ),
    (
        var::ARTIFACTS_DIR,
        "where runs write reports and artifacts (default target/nodejoin)",
    ),
    (
        var::KEEP_ARTIFACTS,
        "keep every scenario's artifacts, not only failed and negative ones",
    ),
    (
        var::CACHE_DIR,
        "the cache of binaries and builds (default ~/.cache/nodejoin)",
    ),
    (
        var::FIXTURES,
        "a nodejoin checkout's fixtures/ to use instead of the files built into the binary",
    ),
    (
        var::K8S_ASSETS,
        "a directory holding etcd, kube-apiserver, kube-controller-manager and kubelet",
    ),
    (var::K8S_RELEASE_URL, "mirror of Kubernetes' release downloads"),
    (var::ETCD_RELEASE_URL, "mirror of etcd's release downloads"),
    (
        var::GITHUB_RELEASE_URL,
        "mirror of github.com's release downloads (containerd, runc, aws-iam-authenticator)",
    ),
    (
        "NODEJOIN_<TOOL>",
        "a binary to use for a node tool (NODEADM, AWS_IAM_AUTHENTICATOR, CRICTL, COREDNS, CONTAINERD, RUNC)",
    ),
    (
        "NODEJOIN_<TOOL>_VERSION",
        "the Go module version a node tool is built at",
    ),
    (var::NODE_IMAGE, "a node image of the user's for every scenario"),
    (var::BASE_IMAGE, "the base image the node image is built on"),
    (
        var::DEBIAN_SUITE,
        "the Debian suite the base image is bootstrapped from",
    ),
    (var::BOOT_CONCURRENCY, "node containers started at once"),
    (
        var::VM_ACCEL,
        "how VM nodes run: auto (KVM where it boots a stock kernel, else TCG), kvm or tcg",
    ),
    (
        var::ENDPOINTS_CA,
        "a directory with the CA (ca.pem, ca-key.pem) AWS's names are served under, which a disk of your own trusts",
    ),
    (
        var::HOST_SETUP,
        "never: do not install packages or start Docker, only report what is missing",
    ),
    (var::KIND_IMAGE, "the kind node image"),
    (
        var::KIND_RESTRICTED,
        "how kind's --privileged is replaced: always, never or sometimes",
    ),
    (var::K3S_IMAGE, "the k3s image"),
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
    pub containerd_line: Option<String>,
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
    /// False under `NODEJOIN_HOST_SETUP=never`.
    pub host_setup: bool,
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
    /// Under GitHub Actions (`GITHUB_ACTIONS=true`): failures are also written as annotations.
    pub github_actions: bool,
}

impl Settings {
    /// The settings the process environment gives.
    pub fn from_env() -> Self {
        Self::from_lookup(|k| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned()))
    }

    /// The settings `lookup` gives (a variable set to the empty string counts as unset).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |k: &str| lookup(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let path = |k: &str| get(k).map(PathBuf::from);
        let number = |k: &str| get(k).and_then(|v| v.trim().parse::<usize>().ok());
        let versions = list(get(var::K8S_VERSION));
        let mut tool_bins = BTreeMap::new();
        let mut tool_versions = BTreeMap::new();
        for tool in TOOLS {
            if let Some(bin) = path(&format!("{PREFIX}{tool}")) {
                tool_bins.insert(tool, bin);
            }
            if let Some(v) = get(&format!("{PREFIX}{tool}_VERSION")) {
                tool_versions.insert(tool, v);
            }
        }
        Self {
            cache_dir: path(var::CACHE_DIR),
            fixtures: path(var::FIXTURES),
            artifacts_dir: path(var::ARTIFACTS_DIR),
            kubernetes_version: versions.first().cloned(),
            kubernetes_versions: if versions.len() > 1 { versions } else { Vec::new() },
            k8s_assets: path(var::K8S_ASSETS),
            k8s_release_url: get(var::K8S_RELEASE_URL),
            etcd_release_url: get(var::ETCD_RELEASE_URL),
            github_release_url: get(var::GITHUB_RELEASE_URL),
            tool_bins,
            tool_versions,
            containerd_line: get(var::CONTAINERD_LINE),
            node_image: get(var::NODE_IMAGE),
            base_image: get(var::BASE_IMAGE),
            debian_suite: get(var::DEBIAN_SUITE),
            eks_ami: path(var::EKS_AMI),
            allow_paths: get(var::ALLOW_PATHS)
                .into_iter()
                .flat_map(|v| v.split(':').map(str::to_string).collect::<Vec<_>>())
                .filter(|p| !p.trim().is_empty())
                .map(PathBuf::from)
                .chain(path(var::EKS_AMI))
                .collect(),
            jobs: number(var::JOBS),
            providers: get(var::PROVIDERS),
            require_providers: get(var::REQUIRE_PROVIDERS),
            skip_trials: list(get(var::SKIP_TRIALS)),
            boot_concurrency: number(var::BOOT_CONCURRENCY),
            vm_accel: get(var::VM_ACCEL),
            endpoints_ca: path(var::ENDPOINTS_CA),
            // Set at all (even empty) keeps them, as before.
            keep_artifacts: lookup(var::KEEP_ARTIFACTS).is_some(),
            host_setup: get(var::HOST_SETUP).is_none_or(|v| v != "never"),
            kind_image: get(var::KIND_IMAGE),
            kind_restricted: get(var::KIND_RESTRICTED),
            k3s_image: get(var::K3S_IMAGE),
            profile: get(var::PROFILE),
            scenarios: path(var::SCENARIOS),
            retries: get(var::RETRIES).and_then(|v| v.parse().ok()),
            provider: None,
            flaky_fails: false,
            github_actions: get(var::GITHUB_ACTIONS).is_some_and(|v| v == "true"),
        }
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

/// `a, b` → `[a, b]`, empty items dropped.
fn list(value: Option<String>) -> Vec<String> {
    value
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// [`install`] came after the settings were read.
#[derive(Debug)]
pub struct AlreadyRead;

/// The process's settings: those [`install`]ed, else the environment's, read on first use.
pub fn get() -> &'static Settings {
    SETTINGS.get_or_init(Settings::from_env)
}

/// Makes `settings` the process's, before anything has read them (the CLI, once its flags are parsed). Refused
/// once they have been read: a process never sees two.
pub fn install(settings: Settings) -> Result<(), AlreadyRead> {
    SETTINGS.set(settings).map_err(|_| AlreadyRead)
}

/// `--help`'s list of the variables.
pub fn help() -> String {
    let mut text = String::from("Environment (each also in the book's command-line page):\n");
    for (name, what) in VARIABLES {
        text.push_str(&format!("  {name:<27} {what}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(pairs: &[(&str, &str)]) -> Settings {
        let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn each_variable_fills_its_field_and_empty_counts_as_unset() {
        let s = from(&[
            ("NODEJOIN_JOBS", "3"),
            ("NODEJOIN_K8S_VERSION", "v1.35.4"),
            ("NODEJOIN_CONTAINERD_LINE", ""),
            ("NODEJOIN_NODEADM", "/opt/nodeadm"),
            ("NODEJOIN_RUNC_VERSION", "v1.3.0"),
            ("NODEJOIN_HOST_SETUP", "never"),
            ("NODEJOIN_KEEP_ARTIFACTS", ""),
            ("NODEJOIN_SKIP_TRIALS", "local/, kind/v1.35/ ,"),
        ]);
        assert_eq!(s.jobs, Some(3));
        assert_eq!(s.skip_trials, ["local/", "kind/v1.35/"]);
        assert_eq!(s.kubernetes_version.as_deref(), Some("v1.35.4"));
        assert_eq!(s.versions(), [Some("v1.35.4".to_string())]);
        let mut given = Settings::default();
        given.set_versions(vec![String::new()]);
        assert_eq!(given.versions(), [None], "an empty item is no version");
        let two = from(&[("NODEJOIN_K8S_VERSION", "v1.35.4, v1.36.3")]);
        assert_eq!(two.kubernetes_version.as_deref(), Some("v1.35.4"));
        assert_eq!(
            two.versions(),
            [Some("v1.35.4".to_string()), Some("v1.36.3".to_string())]
        );
        assert_eq!(s.containerd_line, None);
        assert_eq!(s.tool_bins.get("NODEADM"), Some(&PathBuf::from("/opt/nodeadm")));
        assert_eq!(s.tool_versions.get("RUNC").map(String::as_str), Some("v1.3.0"));
        assert!(!s.host_setup);
        assert!(s.keep_artifacts);
        let none = from(&[]);
        assert!(none.host_setup && !none.keep_artifacts && none.jobs.is_none());
    }

    #[test]
    fn every_setting_is_listed_for_help() {
        let names: Vec<&str> = VARIABLES.iter().map(|(n, _)| *n).collect();
        for n in [
            var::CACHE_DIR,
            var::FIXTURES,
            var::ARTIFACTS_DIR,
            var::K8S_VERSION,
            var::K8S_ASSETS,
            var::K8S_RELEASE_URL,
            var::ETCD_RELEASE_URL,
            var::GITHUB_RELEASE_URL,
            var::CONTAINERD_LINE,
            var::NODE_IMAGE,
            var::BASE_IMAGE,
            var::DEBIAN_SUITE,
            var::EKS_AMI,
            var::JOBS,
            var::PROVIDERS,
            var::REQUIRE_PROVIDERS,
            var::BOOT_CONCURRENCY,
            var::VM_ACCEL,
            var::ENDPOINTS_CA,
            var::KEEP_ARTIFACTS,
            var::HOST_SETUP,
            var::KIND_IMAGE,
            var::KIND_RESTRICTED,
            var::K3S_IMAGE,
            var::PROFILE,
            var::RETRIES,
            var::SCENARIOS,
        ] {
            assert!(names.contains(&n), "{n} is missing from VARIABLES");
            assert!(help().contains(n));
        }
    }
}
