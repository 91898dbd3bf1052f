//! `.config/nodejoin.toml`: a repository's settings, in profiles (nextest's `.config/nextest.toml`). Found from
//! the working directory upwards; `[profile.default]` applies to every run, another profile (`--profile ci`,
//! `NODEJOIN_PROFILE`) is laid over it. A flag or a variable outranks the file; a relative path in it is taken
//! from the folder that holds `.config/`.
//!
//! ```toml
//! [profile.default]
//! kubernetes-version = "v1.36.3"
//! [profile.ci]
//! kubernetes-versions = ["v1.35.4", "v1.36.3"]
//! retries = 2
//! jobs = 2
//! ```
use super::Settings;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the file is, under a repository's root.
pub const FILE: &str = ".config/nodejoin.toml";
/// The profile every run starts from.
pub const DEFAULT_PROFILE: &str = "default";

/// One profile: each key optional, as in the file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Profile {
    pub provider: Option<String>,
    pub jobs: Option<usize>,
    pub kubernetes_version: Option<String>,
    /// Trials for each of these versions (scenarios that name none).
    pub kubernetes_versions: Option<Vec<String>>,
    pub containerd: Option<String>,
    pub eks_ami: Option<PathBuf>,
    pub retries: Option<u32>,
    /// `pass` (the default: a FLAKY scenario does not fail the run) or `fail`.
    pub flaky_result: Option<FlakyResult>,
    pub artifacts_dir: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FlakyResult {
    Pass,
    Fail,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    profile: BTreeMap<String, Profile>,
}

/// A config file, read.
#[derive(Debug, Clone)]
pub struct Config {
    pub path: PathBuf,
    profiles: BTreeMap<String, Profile>,
}

/// The first `.config/nodejoin.toml` from `dir` upwards.
pub fn find(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().map(|d| d.join(FILE)).find(|f| f.is_file())
}

impl Config {
    /// Reads `path`; an error names the file, and the line of a bad key.
    pub fn read(path: &Path) -> Result<Self, String> {
        // Read as a scenario's files are: a regular file (not a link to /dev/zero or a FIFO) of at most 1 MiB.
        let text = crate::untrusted::open_regular(path)
            .and_then(|f| crate::untrusted::read_capped(f, 1 << 20))
            .map_err(|e| format!("{}: {e}", path.display()))
            .and_then(|b| String::from_utf8(b).map_err(|_| format!("{}: not UTF-8 text", path.display())))?;
        Self::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Self, String> {
        let file: File = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
                .map(|l| format!(":{l}"))
                .unwrap_or_default();
            format!("{}{line}: {}", path.display(), e.message())
        })?;
        // A repository's file says where its artifacts go only inside the repository: nodejoin writes them as
        // root (a caller's NODEJOIN_ARTIFACTS_DIR may name any place).
        for (name, p) in &file.profile {
            if let Some(dir) = &p.artifacts_dir {
                if !dir.components().all(|c| matches!(c, std::path::Component::Normal(_))) {
                    return Err(format!(
                        "{}: profile {name}: artifacts-dir {} must be a relative path inside the repository, \
                         without `..` (set NODEJOIN_ARTIFACTS_DIR to write elsewhere)",
                        path.display(),
                        dir.display()
                    ));
                }
            }
        }
        Ok(Self {
            path: path.to_path_buf(),
            profiles: file.profile,
        })
    }

    /// `name` laid over `default`; a profile the file does not define is an error, but `default`.
    pub fn profile(&self, name: &str) -> Result<Profile, String> {
        let base = self.profiles.get(DEFAULT_PROFILE).cloned().unwrap_or_default();
        if name == DEFAULT_PROFILE {
            return Ok(base);
        }
        let Some(p) = self.profiles.get(name) else {
            let known: Vec<&str> = self.profiles.keys().map(String::as_str).collect();
            return Err(format!(
                "{}: no profile '{name}' (it defines: {})",
                self.path.display(),
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ));
        };
        Ok(Profile {
            provider: p.provider.clone().or(base.provider),
            jobs: p.jobs.or(base.jobs),
            kubernetes_version: p.kubernetes_version.clone().or(base.kubernetes_version),
            kubernetes_versions: p.kubernetes_versions.clone().or(base.kubernetes_versions),
            containerd: p.containerd.clone().or(base.containerd),
            eks_ami: p.eks_ami.clone().or(base.eks_ami),
            retries: p.retries.or(base.retries),
            flaky_result: p.flaky_result.or(base.flaky_result),
            artifacts_dir: p.artifacts_dir.clone().or(base.artifacts_dir),
        })
    }

    /// The folder relative paths in the file are taken from: the one holding `.config/`.
    fn root(&self) -> PathBuf {
        self.path
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default()
    }
}

impl Profile {
    /// Fills what `settings` (from the environment) leaves unset; paths from `config`'s root.
    pub fn under(&self, config: &Config, settings: &mut Settings) {
        let root = config.root();
        let path = |p: &PathBuf| if p.is_absolute() { p.clone() } else { root.join(p) };
        settings.provider = settings.provider.take().or(self.provider.clone());
        settings.jobs = settings.jobs.or(self.jobs);
        if settings.kubernetes_version.is_none() {
            let versions = self.kubernetes_versions.clone().unwrap_or_default();
            settings.set_versions(versions);
            settings.kubernetes_version = settings.kubernetes_version.take().or(self.kubernetes_version.clone());
        }
        settings.containerd_line = settings.containerd_line.take().or(self.containerd.clone());
        settings.eks_ami = settings.eks_ami.take().or(self.eks_ami.as_ref().map(path));
        settings.retries = settings.retries.or(self.retries);
        settings.artifacts_dir = settings.artifacts_dir.take().or(self.artifacts_dir.as_ref().map(path));
        settings.flaky_fails = self.flaky_result == Some(FlakyResult::Fail);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = r#"
[profile.default]
kubernetes-version = "v1.35.4"
jobs = 4
eks-ami = "../amazon-eks-ami"

[profile.ci]
retries = 2
flaky-result = "fail"
jobs = 2
"#;

    #[test]
    fn a_repositorys_artifacts_dir_stays_inside_it() {
        for bad in ["/etc/cron.d", "../elsewhere", "out/../../x"] {
            let text = format!("[profile.default]\nartifacts-dir = \"{bad}\"\n");
            let err = Config::parse(&text, Path::new("/repo/.config/nodejoin.toml")).unwrap_err();
            assert!(err.contains("inside the repository"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_profile_is_laid_over_default() {
        let c = Config::parse(TEXT, Path::new("/repo/.config/nodejoin.toml")).unwrap();
        let ci = c.profile("ci").unwrap();
        assert_eq!(ci.retries, Some(2));
        assert_eq!(ci.jobs, Some(2), "the profile's own value wins");
        assert_eq!(
            ci.kubernetes_version.as_deref(),
            Some("v1.35.4"),
            "default's fills the rest"
        );
        let default = c.profile("default").unwrap();
        assert_eq!(default.retries, None);
        let e = c.profile("nightly").unwrap_err();
        assert!(e.contains("no profile 'nightly' (it defines: ci, default)"), "{e}");
        // An empty file still has the default profile.
        let empty = Config::parse("", Path::new("/r/.config/nodejoin.toml")).unwrap();
        assert_eq!(empty.profile("default").unwrap(), Profile::default());
    }

    #[test]
    fn the_environment_outranks_the_file_and_paths_are_from_the_repository() {
        let c = Config::parse(TEXT, Path::new("/repo/.config/nodejoin.toml")).unwrap();
        let mut s = Settings {
            jobs: Some(8),
            ..Default::default()
        };
        c.profile("ci").unwrap().under(&c, &mut s);
        assert_eq!(s.jobs, Some(8), "NODEJOIN_JOBS outranks the profile");
        assert_eq!(s.retries, Some(2));
        assert!(s.flaky_fails);
        assert_eq!(s.eks_ami, Some(PathBuf::from("/repo/../amazon-eks-ami")));
        let several = Config::parse(
            "[profile.default]\nkubernetes-versions = [\"v1.35.4\", \"v1.36.3\"]\n",
            Path::new("/r/.config/nodejoin.toml"),
        )
        .unwrap();
        let mut s = Settings::default();
        several.profile("default").unwrap().under(&several, &mut s);
        assert_eq!(s.versions(), [Some("v1.35.4".to_string()), Some("v1.36.3".to_string())]);
        let mut given = Settings {
            kubernetes_version: Some("v1.36.3".into()),
            ..Default::default()
        };
        several.profile("default").unwrap().under(&several, &mut given);
        assert_eq!(
            given.versions(),
            [Some("v1.36.3".to_string())],
            "a version given outranks the profile's list"
        );
    }

    #[test]
    fn a_bad_key_names_the_file_and_line() {
        let e = Config::parse(
            "[profile.ci]\nretries = 1\nretry = 2\n",
            Path::new("/r/.config/nodejoin.toml"),
        )
        .unwrap_err();
        assert!(
            e.starts_with("/r/.config/nodejoin.toml:3: ") && e.contains("retry"),
            "{e}"
        );
        let e = Config::parse("[profile.ci]\nflaky-result = \"maybe\"\n", Path::new("/r/x.toml")).unwrap_err();
        assert!(e.contains(":2: "), "{e}");
    }

    #[test]
    fn found_from_the_working_directory_upwards() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".config")).unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::fs::write(dir.path().join(FILE), "").unwrap();
        assert_eq!(find(&dir.path().join("a/b")), Some(dir.path().join(FILE)));
    }
}
