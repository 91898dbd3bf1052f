//! Typed errors. Each variant says what failed and carries enough context (scenario, node, file, line) for the
//! CLI to print one line plus a hint.
use std::path::PathBuf;

/// Anything that can go wrong in the harness.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("scenario {file}:{line}:{column}: {message}")]
    ScenarioParse {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },

    #[error("scenario {file}: {message}")]
    ScenarioInvalid { file: PathBuf, message: String },

    /// Reading or writing a file failed; the source says which (a full disk reads "No space left on device").
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("Kubernetes {version} binaries unavailable; tried: {tried}")]
    AssetsUnavailable { version: String, tried: String },

    #[error("{tool} {version} is not available; tried: {tried}")]
    ToolUnavailable {
        tool: &'static str,
        version: String,
        tried: String,
        /// The variable naming a binary to use instead.
        env_bin: String,
    },

    #[error("node image: {0}")]
    Image(String),

    #[error("Docker is not reachable: {0}")]
    DockerUnavailable(String),

    #[error("docker: {0}")]
    Docker(String),

    #[error("control plane ({component}): {message}")]
    ControlPlane { component: String, message: String },

    #[error("PKI: {0}")]
    Pki(String),

    #[error("fake {service}: {message}")]
    Fake { service: &'static str, message: String },

    /// A VM node's kernel, disk, network or QEMU could not be set up.
    #[error("VM node: {0}")]
    Vm(String),

    #[error("node {node}: {message}")]
    Node { node: String, message: String },

    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),

    #[error("provider {provider} unavailable: {reason}")]
    ProviderUnavailable { provider: String, reason: String },

    #[error("interrupted")]
    Interrupted,

    #[error("mutation {mutation}: {message}")]
    Mutation { mutation: String, message: String },

    #[error("nodejoin init: {0}")]
    Init(String),

    #[error("nodejoin compare: {0}")]
    Compare(String),

    #[error("{what} did not finish within {}", humantime::format_duration(*after))]
    Timeout {
        /// What was waited for, e.g. "`journalctl -u kubelet` in node nodejoin-...-a-1".
        what: String,
        after: std::time::Duration,
    },

    #[error("{what}: {message}")]
    Process { what: String, message: String },

    /// A step of the scenario pipeline found what an earlier step should have made missing (a harness bug).
    #[error("scenario pipeline: {0}")]
    Pipeline(String),

    /// The host lacks something nodejoin cannot set up by itself (Docker engine, a package, root).
    #[error("host: {what}; to fix it: {fix}")]
    Host { what: String, fix: String },
}

/// Hints that name a setting's variable (`settings` is the one place its name is written).
static ASSETS_HINT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "run `nodejoin assets` (needs Go and the Go module proxy, or internet), or set {} to a directory with etcd, \
         kube-apiserver, kube-controller-manager and kubelet",
        crate::settings::var::K8S_ASSETS
    )
});
static PROVIDER_HINT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "`nodejoin doctor` says how to get what the provider needs; `{}=local` or `nodejoin run --provider local` \
         runs without it",
        crate::settings::var::PROVIDERS
    )
});

impl Error {
    /// A one-line hint for the CLI: what to do about this error.
    pub fn hint(&self) -> &'static str {
        match self {
            Error::ScenarioParse { .. } | Error::ScenarioInvalid { .. } => {
                "fix the scenario file; docs/src/reference/scenario-format.md lists every field"
            }
            Error::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::StorageFull => "the disk is full: free space (docker system prune, an old run's target/nodejoin) and run again",
                std::io::ErrorKind::PermissionDenied => "check the file's permissions and who runs nodejoin",
                std::io::ErrorKind::NotFound => "check the path exists",
                _ => "check the path exists and is readable and writable",
            },
            Error::AssetsUnavailable { .. } => &ASSETS_HINT,
            Error::ToolUnavailable { .. } => {
                "run `nodejoin assets` (builds nodeadm, aws-iam-authenticator and our crictl with Go from the Go module proxy), or set the variable the error names to a binary"
            }
            Error::Image(_) => "run `nodejoin image build` (needs root, debootstrap and Docker); `nodejoin doctor` checks prerequisites",
            Error::Vm(_) => "a VM node needs root, qemu-system-x86, qemu-utils and e2fsprogs (`nodejoin doctor` checks them), and its disk's first build Debian's package archive",
            Error::DockerUnavailable(_) => "start the Docker engine (`dockerd &` or `systemctl start docker`) and check `docker info`",
            Error::Docker(_) => "see `docker info` and the Docker daemon log",
            Error::ControlPlane { .. } => "see the control-plane logs under target/nodejoin/<run>/control-plane-<n>/",
            Error::Pki(_) | Error::Fake { .. } => "this is a harness bug; please report it with the run directory",
            Error::Node { .. } => "see target/nodejoin/<run>/<scenario>/ (report.txt; node journals when they could be collected)",
            Error::Kube(_) => "is the control plane still running? see its logs under target/nodejoin/<run>/control-plane-<n>/",
            Error::ProviderUnavailable { .. } => &PROVIDER_HINT,
            Error::Interrupted => "the run was interrupted; everything it started has been removed",
            Error::Mutation { .. } => {
                "the catalogue (harness/src/mutate/catalogue.rs) no longer matches the reference bootstrap or the scenario: update its anchor text or catchers"
            }
            Error::Init(_) => "`nodejoin init --help`: give paths inside the repository; --force overwrites files",
            Error::Compare(_) => "`nodejoin compare --help`: a side is script:FILE, overlay:DIR, image:TAG, user-data:FILE or git:REV",
            Error::Timeout { .. } => "the deadline is generous, so something hangs: see the logs under target/nodejoin/<run>/ and `docker ps`; `nodejoin reap` removes what a killed run left",
            Error::Process { .. } => "check the program is installed and on PATH (`nodejoin doctor`)",
            Error::Pipeline(_) => "a harness bug: please report it with the run's report.txt",
            Error::Host { .. } => "`nodejoin doctor` lists what is missing and the command that fixes it",
        }
    }

    /// An error about one node (named by its container or Node name).
    pub(crate) fn node(node: &str, message: impl Into<String>) -> Self {
        Error::Node {
            node: node.to_string(),
            message: message.into(),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A write that fails for a full disk says so, and its hint is about space, not about reading a path.
    #[test]
    fn a_full_disk_is_named_as_such() {
        let e = Error::io("/x/junit.xml", std::io::Error::from(std::io::ErrorKind::StorageFull));
        assert!(!e.to_string().contains("cannot read"), "{e}");
        assert!(e.hint().contains("disk is full"), "{}", e.hint());
        let e = Error::io("/x", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(e.hint().contains("exists"));
    }
}
