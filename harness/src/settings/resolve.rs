//! The settings resolved once, from every source in one order: a flag, else its `NODEJOIN_*` variable, else the
//! profile of `.config/nodejoin.toml`, else unset (the consumer's default). The CLI, the cargo-test trials and
//! `compare` all resolve through [`resolve`], so a profile means the same to each.
use super::config::{self, Config};
use super::rows::{Row, ROWS};
use super::{var, Settings, PREFIX, TOOLS};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a setting's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Flag,
    Variable,
    Profile,
}

/// What a command line gave, by row key (`jobs`, `allow-path`); repeated or listed values in order.
#[derive(Debug, Clone, Default)]
pub struct Flags(BTreeMap<&'static str, Vec<String>>);

impl Flags {
    /// Gives `key` these values (none: nothing is given). A key no row takes is a harness bug, refused at resolve.
    pub fn set(&mut self, key: &'static str, values: impl IntoIterator<Item = impl Into<String>>) -> &mut Self {
        let values: Vec<String> = values.into_iter().map(Into::into).collect();
        if !values.is_empty() {
            self.0.entry(key).or_default().extend(values);
        }
        self
    }

    /// Gives `key` a value if there is one.
    pub fn set_some(&mut self, key: &'static str, value: Option<impl ToString>) -> &mut Self {
        self.set(key, value.map(|v| v.to_string()))
    }
}

/// The settings of this process: `flags` over its environment over the profile found from its working directory.
pub fn from_process(flags: &Flags) -> Result<Settings, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    resolve(
        flags,
        |k| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned()),
        &cwd,
    )
}

/// The settings `flags`, the variables `lookup` gives and the profile found from `cwd` upwards make. A variable
/// set to the empty string counts as unset, as an empty flag does.
pub fn resolve(flags: &Flags, lookup: impl Fn(&str) -> Option<String>, cwd: &Path) -> Result<Settings, String> {
    let get = |k: &str| lookup(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    if let Some(key) = flags.0.keys().find(|k| super::rows::find(k).is_none_or(|r| !r.flag)) {
        return Err(format!(
            "the command line gave `{key}`, which no setting takes from a flag (a harness bug)"
        ));
    }
    let from_flag = flag_values(flags, "profile").and_then(|v| v.last().cloned());
    let asked = match &from_flag {
        Some(name) => Some(format!("--profile {name}")),
        None => get(var::PROFILE).map(|name| format!("{}={name}", var::PROFILE)),
    };
    let profile_name = from_flag.or_else(|| get(var::PROFILE));
    let (profile, root) = profile(cwd, profile_name.as_deref(), asked.as_deref())?;
    let mut settings = Settings::default();
    for row in ROWS {
        let Some((source, values)) = given(row, flags, &get, &profile, &root) else {
            continue;
        };
        (row.set)(&mut settings, values).map_err(|e| format!("{}: {e}", named(row, source)))?;
        settings.sources.insert(row.key, source);
    }
    if profile.is_some() || profile_name.is_some() {
        settings.profile = Some(profile_name.unwrap_or_else(|| config::DEFAULT_PROFILE.to_string()));
    }
    // The caller's own amazon-eks-ami checkout is the caller's to read; a profile's is held to the repository.
    if matches!(settings.source("eks-ami"), Some(Source::Flag | Source::Variable)) {
        settings.allow_paths.extend(settings.eks_ami.clone());
    }
    for tool in TOOLS {
        if let Some(bin) = get(&format!("{PREFIX}{tool}")) {
            settings.tool_bins.insert(tool, PathBuf::from(bin));
        }
        if let Some(v) = get(&format!("{PREFIX}{tool}_VERSION")) {
            settings.tool_versions.insert(tool, v);
        }
    }
    Ok(settings)
}

fn flag_values<'a>(flags: &'a Flags, key: &str) -> Option<&'a Vec<String>> {
    flags.0.get(key).filter(|v| v.iter().any(|x| !x.trim().is_empty()))
}

/// How an error names where a row's value came from.
fn named(row: &Row, source: Source) -> String {
    match (source, row.var) {
        (Source::Flag, _) => format!("--{}", row.key),
        (Source::Variable, Some(v)) => v.to_string(),
        _ => format!("the profile's {}", row.key),
    }
}

/// The profile found from `cwd` upwards, with the folder its relative paths are taken from; none without a file,
/// unless a profile other than the default was asked for.
fn profile(cwd: &Path, named: Option<&str>, asked: Option<&str>) -> Result<(Option<config::Profile>, PathBuf), String> {
    let name = named.unwrap_or(config::DEFAULT_PROFILE);
    let Some(path) = config::find(cwd) else {
        if name != config::DEFAULT_PROFILE {
            return Err(format!(
                "{}: no {} in {} or above",
                asked.unwrap_or(name),
                config::FILE,
                cwd.display()
            ));
        }
        return Ok((None, PathBuf::new()));
    };
    let file = Config::read(&path)?;
    Ok((Some(file.profile(name)?), file.root()))
}

/// A row's values and their source, by precedence; `None` when nothing gives it.
fn given(
    row: &Row,
    flags: &Flags,
    get: &impl Fn(&str) -> Option<String>,
    profile: &Option<config::Profile>,
    root: &Path,
) -> Option<(Source, Vec<String>)> {
    let cut = |text: String| -> Vec<String> {
        match row.list {
            Some(sep) => text
                .split(sep)
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .map(String::from)
                .collect(),
            None => vec![text],
        }
    };
    let flag: Vec<String> = flag_values(flags, row.key)
        .into_iter()
        .flatten()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .flat_map(cut)
        .collect();
    let variable: Vec<String> = row.var.and_then(get).map(cut).unwrap_or_default();
    if row.merge && !(flag.is_empty() && variable.is_empty()) {
        let source = if flag.is_empty() {
            Source::Variable
        } else {
            Source::Flag
        };
        return Some((source, variable.into_iter().chain(flag).collect()));
    }
    if !flag.is_empty() {
        return Some((Source::Flag, flag));
    }
    if !variable.is_empty() {
        return Some((Source::Variable, variable));
    }
    let values = row.profile.iter().find_map(|k| profile.as_ref()?.get(*k))?;
    let values: Vec<String> = values
        .iter()
        .map(|v| match row.path && Path::new(v).is_relative() {
            true => root.join(v).display().to_string(),
            false => v.clone(),
        })
        .collect();
    (!values.is_empty()).then_some((Source::Profile, values))
}

#[cfg(test)]
mod tests;
