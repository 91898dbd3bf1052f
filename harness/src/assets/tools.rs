//! The Go programs the node image carries besides the kubelet, each built from a Go module and cached like the
//! Kubernetes binaries: an explicit binary (the tool's setting), the cache, or a Go build through
//! `fixtures/<dir>/build.sh`.
//! - nodeadm, the AL2023 bootstrap, unmodified from its module (`/usr/bin/nodeadm`, as on AL2023);
//! - aws-iam-authenticator, the AL2 AMI's token client (`/usr/bin/aws-iam-authenticator`, as on AL2);
//! - crictl: our own CRI client (fixtures/cri-client) for the subset of crictl the AMI's scripts call, because
//!   cri-tools is not on the Go module proxy this project's machines reach;
//! - containerd and runc at the versions the current EKS AMI ships (fixtures/runtime-build): a distribution's
//!   packages lag years behind (Debian bookworm has containerd 1.6, which no current AMI runs).
use crate::error::{Error, Result};
use crate::settings::Settings;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// One Go program and where it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoTool {
    /// The binary's name, in the cache and in the node image (`/usr/bin/<name>`).
    pub name: &'static str,
    /// `fixtures/<build_dir>/build.sh [MODULE PACKAGE] VERSION OUT_DIR` builds it (`go-install`: the module's
    /// own command, unmodified; else a build of our own sources).
    pub build_dir: &'static str,
    /// The Go module it is built from.
    pub module: &'static str,
    /// The command's import path within the module (`go install PACKAGE@VERSION`).
    pub package: &'static str,
    /// The module version built by default; empty for our own sources (versioned by their hash).
    pub default_version: &'static str,
    /// Its key among the settings' tools (`settings::TOOLS`): the binary to use as-is, and the module version to
    /// build instead of the default.
    pub setting: &'static str,
    /// Whether a module version may be asked for (our own sources are versioned by their hash).
    pub versioned: bool,
    /// How many `step N/M` lines its build script prints.
    pub steps: u64,
    /// The build script's arguments before VERSION, when they are not `MODULE PACKAGE`.
    pub build_args: &'static [&'static str],
}

/// nodeadm has no semver tags, only pseudo-versions; this is the newest one the Go module proxy serves as
/// `@latest` (a branch query such as `@main` is refused by the proxy this project's CI uses).
pub const NODEADM: GoTool = GoTool {
    name: "nodeadm",
    build_dir: "go-install",
    module: "github.com/awslabs/amazon-eks-ami/nodeadm",
    package: "github.com/awslabs/amazon-eks-ami/nodeadm/cmd/nodeadm",
    default_version: "v0.0.0-20240229193347-cfab22a10647",
    setting: "NODEADM",
    versioned: true,
    steps: 2,
    build_args: &[],
};

/// The token client of the AL2 AMI's kubeconfig (`aws-iam-authenticator token -i CLUSTER --region R`); v0.6.13 is
/// the newest version the Go module proxy serves here.
pub const AWS_IAM_AUTHENTICATOR: GoTool = GoTool {
    name: "aws-iam-authenticator",
    build_dir: "go-install",
    module: "sigs.k8s.io/aws-iam-authenticator",
    package: "sigs.k8s.io/aws-iam-authenticator/cmd/aws-iam-authenticator",
    default_version: "v0.6.13",
    setting: "AWS_IAM_AUTHENTICATOR",
    versioned: true,
    steps: 2,
    build_args: &[],
};

/// Our own CRI client (fixtures/cri-client), versioned by the hash of its sources.
pub const CRICTL: GoTool = GoTool {
    name: "crictl",
    build_dir: "cri-client",
    module: "nodejoin.local/crictl (fixtures/cri-client)",
    package: "",
    default_version: "",
    setting: "CRICTL",
    versioned: false,
    steps: 2,
    build_args: &[],
};

/// CoreDNS for the kind node image's preloaded coredns image, unmodified from its module. The version built is the
/// one kubeadm of the image's Kubernetes version deploys (`kubeadm config images list`); this default is v1.36's.
pub const COREDNS: GoTool = GoTool {
    name: "coredns",
    build_dir: "go-install",
    module: "github.com/coredns/coredns",
    package: "github.com/coredns/coredns",
    default_version: "v1.14.2",
    setting: "COREDNS",
    versioned: true,
    steps: 2,
    build_args: &[],
};

/// containerd (`containerd`, `containerd-shim-runc-v2`, `ctr`), unmodified from its module at the version the
/// current EKS AMI ships (release v20260714: 2.2.4 on every AL2023 AMI type). The version depends on the node
/// group's containerd line ([`ContainerdLine`]); its binary setting names a directory holding the three.
pub const CONTAINERD: GoTool = GoTool {
    name: "containerd",
    build_dir: "runtime-build",
    module: "github.com/containerd/containerd/v2",
    package: "",
    default_version: "v2.2.4",
    setting: "CONTAINERD",
    versioned: true,
    steps: 2,
    build_args: &["containerd"],
};

/// runc at the version the current EKS AMI ships with containerd 2.2 (1.3.5), seccomp included.
pub const RUNC: GoTool = GoTool {
    name: "runc",
    build_dir: "runtime-build",
    module: "github.com/opencontainers/runc",
    package: "",
    default_version: "v1.3.5",
    setting: "RUNC",
    versioned: true,
    steps: 2,
    build_args: &["runc"],
};

/// Every tool the node image carries, in the order the image lists them.
pub const ALL: [GoTool; 5] = [NODEADM, AWS_IAM_AUTHENTICATOR, CRICTL, CONTAINERD, RUNC];

pub use crate::settings::ContainerdLine;

/// The containerd module version built for `line`: for 2.2 and 1.7 the newest the AMI's CHANGELOG names, for the
/// lines ahead of the AMI the newest patch release the Go module proxy serves (2026-11).
pub fn containerd_version(settings: &Settings, line: ContainerdLine) -> String {
    match line {
        ContainerdLine::V2_2 => CONTAINERD.version(settings),
        ContainerdLine::V1_7 => "v1.7.29".to_string(),
        ContainerdLine::V2_3 => "v2.3.7".to_string(),
        ContainerdLine::V2_4 => "v2.4.2".to_string(),
    }
}

/// The resolved binaries the node image is built with.
#[derive(Debug, Clone)]
pub struct NodeTools {
    pub nodeadm: PathBuf,
    pub aws_iam_authenticator: PathBuf,
    pub crictl: PathBuf,
    /// The directory holding `containerd`, `containerd-shim-runc-v2` and `ctr`.
    pub containerd: PathBuf,
    pub runc: PathBuf,
    pub containerd_line: ContainerdLine,
}

/// containerd's binaries, as named in its build directory (the node image puts `containerd` behind its wrapper, in
/// `/usr/libexec/nodejoin/`, and the other two in `/usr/bin/`).
pub const CONTAINERD_BINARIES: [&str; 3] = ["containerd", "containerd-shim-runc-v2", "ctr"];

impl NodeTools {
    /// `(name in the build context, binary)` pairs.
    pub fn binaries(&self) -> Vec<(&'static str, PathBuf)> {
        let mut all = vec![
            (NODEADM.name, self.nodeadm.clone()),
            (AWS_IAM_AUTHENTICATOR.name, self.aws_iam_authenticator.clone()),
            (CRICTL.name, self.crictl.clone()),
            (RUNC.name, self.runc.clone()),
        ];
        all.extend(CONTAINERD_BINARIES.map(|b| (b, self.containerd.join(b))));
        all
    }

    /// Resolves every tool for nodes on `line`, building the missing ones.
    pub async fn resolve(settings: &Settings, line: ContainerdLine) -> Result<Self> {
        let containerd = CONTAINERD
            .resolve_version(settings, &containerd_version(settings, line))
            .await?;
        Ok(Self {
            nodeadm: NODEADM.resolve(settings).await?,
            aws_iam_authenticator: AWS_IAM_AUTHENTICATOR.resolve(settings).await?,
            crictl: CRICTL.resolve(settings).await?,
            containerd: containerd.parent().map(Path::to_path_buf).unwrap_or_default(),
            runc: RUNC.resolve(settings).await?,
            containerd_line: line,
        })
    }

    /// Only what needs no work (environment and cache); `None` if any tool is missing.
    pub fn find(settings: &Settings, line: ContainerdLine) -> Option<Self> {
        let containerd = CONTAINERD.find_version(settings, &containerd_version(settings, line))?;
        Some(Self {
            nodeadm: NODEADM.find(settings)?,
            aws_iam_authenticator: AWS_IAM_AUTHENTICATOR.find(settings)?,
            crictl: CRICTL.find(settings)?,
            containerd: containerd.parent().map(Path::to_path_buf).unwrap_or_default(),
            runc: RUNC.find(settings)?,
            containerd_line: line,
        })
    }
}

impl GoTool {
    /// The version asked for: the environment, the default, or (our own sources) `src-<hash>`.
    pub fn version(&self, settings: &Settings) -> String {
        if let Some(v) = self
            .versioned
            .then(|| settings.tool_versions.get(self.setting))
            .flatten()
        {
            return v.clone();
        }
        if self.default_version.is_empty() {
            return format!("src-{}", self.source_hash(settings));
        }
        self.default_version.to_string()
    }

    /// A hash of our own sources' files (`*.go`, go.mod, go.sum, build.sh) in fixtures/<build_dir>.
    fn source_hash(&self, settings: &Settings) -> String {
        let dir = crate::paths::fixtures_dir(settings).join(self.build_dir);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.is_file()).collect())
            .unwrap_or_default();
        files.sort();
        let mut h = Sha256::new();
        for f in files {
            h.update(
                f.file_name()
                    .map(|n| n.to_string_lossy().to_string())
                    .unwrap_or_default(),
            );
            h.update(std::fs::read(&f).unwrap_or_default());
        }
        hex::encode(h.finalize())[..12].to_string()
    }

    /// `<cache>/<name>/<arch>/<version>/` (the older layout's, `<cache>/<name>/<version>/`, adopted first:
    /// `stamp::adopt`).
    pub fn cache_dir(&self, settings: &Settings, version: &str) -> PathBuf {
        let cache = crate::paths::cache_dir(settings);
        let dir = super::stamp::arch_dir(&cache, self.name).join(version);
        super::stamp::adopt(&cache.join(self.name).join(version), &dir, &[self.name]);
        dir
    }

    fn unavailable(&self, version: &str, tried: impl Into<String>) -> Error {
        Error::ToolUnavailable {
            tool: self.name,
            version: version.to_string(),
            tried: tried.into(),
            env_bin: self.env_bin(),
        }
    }

    /// Only the sources that need no work: the environment and the cache.
    pub fn find(&self, settings: &Settings) -> Option<PathBuf> {
        self.find_version(settings, &self.version(settings))
    }

    /// [`find`](Self::find) for `version`.
    pub fn find_version(&self, settings: &Settings, version: &str) -> Option<PathBuf> {
        if let Some(p) = self.env_binary(settings) {
            return super::is_executable(&p).then_some(p);
        }
        let dir = self.cache_dir(settings, version);
        super::stamp::matches(&dir, &[self.name]).then(|| dir.join(self.name))
    }

    /// The variable naming a binary to use as-is (for messages).
    pub fn env_bin(&self) -> String {
        crate::settings::Settings::tool_bin_var(self.setting)
    }

    /// Whether the settings name a binary of this tool.
    pub fn given(&self, settings: &Settings) -> bool {
        settings.tool_bins.contains_key(self.setting)
    }

    /// The binary the settings name (containerd's names the directory holding its three binaries).
    fn env_binary(&self, settings: &Settings) -> Option<PathBuf> {
        let p = settings.tool_bins.get(self.setting)?.clone();
        Some(if p.is_dir() { p.join(self.name) } else { p })
    }

    /// Where `find` looks, for doctor: "not in <cache> and <ENV> unset".
    pub fn missing_detail(&self, settings: &Settings) -> String {
        format!(
            "not in {} and {} unset",
            self.cache_dir(settings, &self.version(settings)).display(),
            self.env_bin()
        )
    }

    /// Resolves the binary, building it into the cache when needed.
    pub async fn resolve(&self, settings: &Settings) -> Result<PathBuf> {
        self.resolve_version(settings, &self.version(settings)).await
    }

    /// Resolves the binary of `version` (the environment's binary still wins), building it when needed.
    pub async fn resolve_version(&self, settings: &Settings, version: &str) -> Result<PathBuf> {
        let version = version.to_string();
        if let Some(p) = self.env_binary(settings) {
            return if super::is_executable(&p) {
                Ok(p)
            } else {
                Err(self.unavailable(
                    &version,
                    format!("{}={} (not an executable file)", self.env_bin(), p.display()),
                ))
            };
        }
        check_version(&version).map_err(|e| self.unavailable(&version, e))?;
        let cache = self.cache_dir(settings, &version);
        let bin = cache.join(self.name);
        // The cache is trusted only as its build left it (assets::stamp).
        if super::stamp::matches(&cache, &[self.name]) {
            return Ok(bin);
        }
        let _lock = crate::paths::CacheLock::acquire(settings, self.name)
            .await
            .map_err(|e| Error::io(crate::paths::cache_dir(settings), e))?;
        if super::stamp::matches(&cache, &[self.name]) {
            return Ok(bin);
        }
        let staging = cache.with_extension("partial");
        let _ = std::fs::remove_dir_all(&staging);
        std::fs::create_dir_all(&staging).map_err(|e| Error::io(&staging, e))?;
        // The official release binary where the tool publishes one (checksum checked), else the Go build.
        let downloaded = match super::releases::asset(self.name) {
            Some(_) => {
                let steps = crate::progress::Steps::new(&format!("download {} {version}", self.name), 1);
                let got =
                    super::releases::download(settings, self.name, &version, &staging, &CONTAINERD_BINARIES).await;
                steps.finish(if got.is_ok() {
                    "downloaded, checksum verified"
                } else {
                    "unavailable"
                });
                Some(got)
            }
            None => None,
        };
        if let Some(Ok(())) = downloaded {
            super::stamp::write(&staging, &[self.name]).map_err(|e| Error::io(&staging, e))?;
            let _ = std::fs::remove_dir_all(&cache);
            std::fs::rename(&staging, &cache).map_err(|e| Error::io(&cache, e))?;
            return Ok(bin);
        }
        let download_note = match &downloaded {
            Some(Err(e)) => {
                eprintln!(
                    "[nodejoin] {} {version}: official download unavailable ({e}); building from Go modules instead",
                    self.name
                );
                format!("official download ({e}); ")
            }
            _ => String::new(),
        };
        let title = format!("build {} {version} from Go modules", self.name);
        let args: Vec<&str> = if !self.build_args.is_empty() {
            self.build_args.to_vec()
        } else if self.package.is_empty() {
            Vec::new()
        } else {
            vec![self.module, self.package]
        };
        if let Err(e) = super::run_go_build_script(
            settings,
            self.build_dir,
            &title,
            self.steps,
            (&args, &[]),
            &version,
            &staging,
        )
        .await
        {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(self.unavailable(
                &version,
                format!(
                    "{} (unset); cache {} (empty); {download_note}Go module build ({e})",
                    self.env_bin(),
                    cache.display()
                ),
            ));
        }
        super::stamp::write(&staging, &[self.name]).map_err(|e| Error::io(&staging, e))?;
        let _ = std::fs::remove_dir_all(&cache);
        std::fs::rename(&staging, &cache).map_err(|e| Error::io(&cache, e))?;
        Ok(bin)
    }
}

/// A Go module version: `vMAJOR.MINOR.PATCH` with an optional pre-release such as a pseudo-version's
/// `-20240229193347-cfab22a10647`, or our `src-<hash>`; nothing that could escape the cache directory or the
/// shell.
pub fn check_version(version: &str) -> std::result::Result<(), String> {
    let ok = (version.starts_with('v') || version.starts_with("src-"))
        && version.len() < 80
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
        && !version.contains("..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{version}' is not a Go module version (like {})",
            NODEADM.default_version
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_checked() {
        assert!(check_version(NODEADM.default_version).is_ok());
        assert!(check_version("v1.2.3").is_ok());
        assert!(check_version("src-0123456789ab").is_ok());
        for bad in ["main", "v1/../../x", "v1;rm -rf", "", "1.2.3", "src-../x"] {
            assert!(check_version(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn our_own_sources_are_versioned_by_their_hash() {
        let settings = crate::settings::for_tests();
        let v = CRICTL.version(&settings);
        assert!(v.starts_with("src-") && v.len() == 16, "{v}");
        assert_eq!(v, CRICTL.version(&settings));
        assert_eq!(AWS_IAM_AUTHENTICATOR.version(&settings), "v0.6.13");
    }
}
