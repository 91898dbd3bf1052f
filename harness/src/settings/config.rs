//! `.config/nodejoin.toml`: a repository's settings, in profiles (nextest's `.config/nextest.toml`). Found from
//! the working directory upwards; `[profile.default]` applies to every run, another profile (`--profile ci`,
//! `NODEJOIN_PROFILE`) is laid over it. A flag or a variable outranks the file; a relative path in it is taken
//! from the folder that holds `.config/`. Its keys are the profile keys of the settings' rows
//! ([`super::rows::ROWS`]): a key no row has is refused with its line.
//!
//! ```toml
//! [profile.default]
//! kubernetes-version = "v1.36.3"
//! [profile.ci]
//! kubernetes-versions = ["v1.35.4", "v1.36.3"]
//! retries = 2
//! jobs = 2
//! ```
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the file is, under a repository's root.
pub const FILE: &str = ".config/nodejoin.toml";
/// The profile every run starts from.
pub const DEFAULT_PROFILE: &str = "default";

/// One profile: its keys' values, each as text (a list's items one by one).
pub type Profile = BTreeMap<String, Vec<String>>;

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

/// `path:line` of the byte `at` of `text`.
fn at_line(path: &Path, text: &str, at: usize) -> String {
    let line = text[..at.min(text.len())].matches('\n').count() + 1;
    format!("{}:{line}", path.display())
}

/// A value as the rows take it: text, a number or a boolean as text, a list item by item.
fn texts(value: &toml::Value) -> Option<Vec<String>> {
    match value {
        toml::Value::String(s) => Some(vec![s.clone()]),
        toml::Value::Integer(n) => Some(vec![n.to_string()]),
        toml::Value::Boolean(b) => Some(vec![b.to_string()]),
        toml::Value::Array(items) => items
            .iter()
            .map(|i| texts(i).and_then(|t| t.into_iter().next()))
            .collect(),
        _ => None,
    }
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
        type Spanned = toml::Spanned<toml::Value>;
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            profile: BTreeMap<String, BTreeMap<toml::Spanned<String>, Spanned>>,
        }
        let file: File = toml::from_str(text).map_err(|e| {
            let at = e.span().map(|s| at_line(path, text, s.start));
            format!("{}: {}", at.unwrap_or_else(|| path.display().to_string()), e.message())
        })?;
        let known: Vec<&str> = super::rows::profile_keys().collect();
        let mut profiles = BTreeMap::new();
        for (name, keys) in file.profile {
            let mut profile = Profile::new();
            for (key, value) in keys {
                let at = at_line(path, text, key.span().start);
                let key = key.into_inner();
                let Some(row) = super::rows::of_profile_key(&key) else {
                    return Err(format!(
                        "{at}: profile {name}: unknown key `{key}` (known: {})",
                        known.join(", ")
                    ));
                };
                let Some(values) = texts(value.get_ref()) else {
                    return Err(format!(
                        "{at}: profile {name}: {key}: expected text, a number or a list of them"
                    ));
                };
                let inside = |d: &String| {
                    Path::new(d)
                        .components()
                        .all(|c| matches!(c, std::path::Component::Normal(_)))
                };
                if row.inside_repository && !values.iter().all(inside) {
                    return Err(format!(
                        "{at}: profile {name}: {key} {} must be a relative path inside the repository, \
                         without `..` (set {} to write elsewhere)",
                        values.join(","),
                        row.var.unwrap_or("its variable")
                    ));
                }
                profile.insert(key, values);
            }
            profiles.insert(name, profile);
        }
        Ok(Self {
            path: path.to_path_buf(),
            profiles,
        })
    }

    /// `name` laid over `default`, key by key; a profile the file does not define is an error, but `default`.
    pub fn profile(&self, name: &str) -> Result<Profile, String> {
        let mut merged = self.profiles.get(DEFAULT_PROFILE).cloned().unwrap_or_default();
        if name == DEFAULT_PROFILE {
            return Ok(merged);
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
        merged.extend(p.clone());
        Ok(merged)
    }

    /// The folder relative paths in the file are taken from: the one holding `.config/`.
    pub fn root(&self) -> PathBuf {
        self.path
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default()
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
        let get = |p: &Profile, k: &str| p.get(k).map(|v| v.join(","));
        assert_eq!(get(&ci, "retries").as_deref(), Some("2"));
        assert_eq!(get(&ci, "jobs").as_deref(), Some("2"), "the profile's own value wins");
        assert_eq!(
            get(&ci, "kubernetes-version").as_deref(),
            Some("v1.35.4"),
            "default's fills the rest"
        );
        let default = c.profile("default").unwrap();
        assert_eq!(get(&default, "retries"), None);
        let e = c.profile("nightly").unwrap_err();
        assert!(e.contains("no profile 'nightly' (it defines: ci, default)"), "{e}");
        // An empty file still has the default profile.
        let empty = Config::parse("", Path::new("/r/.config/nodejoin.toml")).unwrap();
        assert_eq!(empty.profile("default").unwrap(), Profile::default());
        assert_eq!(c.root(), PathBuf::from("/repo"));
    }

    #[test]
    fn a_bad_key_names_the_file_and_line() {
        let e = Config::parse(
            "[profile.ci]\nretries = 1\nretry = 2\n",
            Path::new("/r/.config/nodejoin.toml"),
        )
        .unwrap_err();
        assert!(
            e.starts_with("/r/.config/nodejoin.toml:3: ") && e.contains("`retry`"),
            "{e}"
        );
        let e = Config::parse("[profile.ci]\njobs = { a = 1 }\n", Path::new("/r/x.toml")).unwrap_err();
        assert!(e.contains(":2: ") && e.contains("jobs"), "{e}");
        let e = Config::parse("[profile.ci\n", Path::new("/r/x.toml")).unwrap_err();
        assert!(e.starts_with("/r/x.toml:1: "), "{e}");
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
