//! Which trials a run takes, with nextest's meanings: a filter expression (`-E`, [`filter`]) first, then a
//! shard of what it kept (`--partition`, [`partition`]), then, for `--rerun-failed`, only what failed last time.
//! `nodejoin run`, `list` and `compare` select alike, so `list` shows exactly what `run` would run.
pub mod filter;
pub mod partition;
pub mod rerun;

use crate::run::trial::Trial;
pub use filter::{Candidate, Filter};
pub use partition::Partition;
use serde::Serialize;

/// What the user asked to select.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub filter: Option<Filter>,
    pub partition: Option<Partition>,
    /// Only these trial names (the failures `--rerun-failed` read from the last run's record).
    pub only: Option<Vec<String>>,
}

/// A trial's name as cargo and nextest list it: `provider/v1.MINOR/scenario`.
pub fn name(t: &Trial) -> String {
    t.test_name()
}

impl Selection {
    /// Whether anything narrows the trials.
    pub fn narrows(&self) -> bool {
        self.filter.is_some() || self.partition.is_some() || self.only.is_some()
    }

    /// The trials selected from `all`, in their order.
    pub fn apply(&self, all: Vec<Trial>) -> Vec<Trial> {
        let names: Vec<String> = all.iter().map(name).collect();
        let files: Vec<String> = all.iter().map(|t| crate::paths::relative_to_cwd(&t.file)).collect();
        let mut keep: Vec<bool> = all
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let c = Candidate {
                    name: &names[i],
                    scenario: &t.scenario.name,
                    file: &files[i],
                    provider: t.provider.as_str(),
                    version: &t.scenario.cluster.kubernetes_version,
                    tags: &t.scenario.tags,
                };
                self.filter.as_ref().is_none_or(|f| f.matches(&c))
            })
            .collect();
        if let Some(p) = &self.partition {
            let kept: Vec<usize> = (0..all.len()).filter(|&i| keep[i]).collect();
            let dealt: Vec<(&str, bool)> = kept
                .iter()
                .map(|&i| (names[i].as_str(), all[i].scenario.not_applicable().is_some()))
                .collect();
            for (j, k) in p.keeps(&dealt).into_iter().enumerate() {
                keep[kept[j]] = k;
            }
        }
        if let Some(only) = &self.only {
            for (i, n) in names.iter().enumerate() {
                keep[i] &= only.contains(n);
            }
        }
        all.into_iter().zip(keep).filter(|(_, k)| *k).map(|(t, _)| t).collect()
    }
}

/// One line of `nodejoin list`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    /// `provider/v1.MINOR/scenario`: what filters, partitions, JUnit and nextest name.
    pub name: String,
    pub scenario: String,
    pub file: String,
    pub provider: String,
    /// The providers the scenario may run on (empty: every one).
    pub providers: Vec<String>,
    pub kubernetes_version: String,
    /// The minor versions the scenario applies to, as written (`1.33..1.35`), when it says.
    pub kubernetes_versions: Option<String>,
    pub tags: Vec<String>,
    /// Why it would be reported ignored instead of run.
    pub ignored: Option<String>,
}

impl Listed {
    pub fn of(t: &Trial) -> Self {
        let s = &t.scenario;
        let range = s.cluster.kubernetes_versions.as_ref().map(|v| {
            let show = |m: Option<(u32, u32)>| m.map(|(a, b)| format!("{a}.{b}")).unwrap_or_default();
            format!("{}..{}", show(v.min), show(v.max))
        });
        Self {
            name: name(t),
            scenario: s.name.clone(),
            file: crate::paths::relative_to_cwd(&t.file),
            provider: t.provider.as_str().into(),
            providers: s.cluster.providers.iter().map(|p| p.as_str().to_string()).collect(),
            kubernetes_version: s.cluster.kubernetes_version.clone(),
            kubernetes_versions: range,
            tags: s.tags.clone(),
            ignored: s.not_applicable(),
        }
    }

    /// Its line in `nodejoin list`'s text.
    pub fn line(&self) -> String {
        let mut line = self.name.clone();
        if !self.tags.is_empty() {
            line.push_str(&format!("  [{}]", self.tags.join(", ")));
        }
        line.push_str(&format!("  {}", self.file));
        if let Some(why) = &self.ignored {
            line.push_str(&format!("  (ignored: {why})"));
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::Provider;

    fn trial(name: &str, tags: &str) -> Trial {
        let yaml = format!("name: {name}\ntags: [{tags}]\nnodes:\n  - name: a\n    bootstrap: {{ args: [x] }}\n");
        let file = std::path::PathBuf::from(format!("/repo/scenarios/{name}.yaml"));
        let s = crate::scenario::load::parse(&yaml, &file).unwrap();
        Trial::new(&file, s, Provider::LOCAL)
    }

    fn names(ts: &[Trial]) -> Vec<String> {
        ts.iter().map(|t| t.scenario.name.clone()).collect()
    }

    #[test]
    fn the_filter_comes_before_the_partition() {
        let all: Vec<Trial> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|n| trial(n, if *n == "b" { "slow" } else { "" }))
            .collect();
        let fast = Selection {
            filter: Some("!tag(slow)".parse().unwrap()),
            ..Default::default()
        };
        assert_eq!(names(&fast.apply(all.clone())), ["a", "c", "d", "e"]);
        let first = Selection {
            partition: Some("count:1/2".parse().unwrap()),
            ..fast.clone()
        };
        // Dealt among a, c, d, e only: a and d.
        assert_eq!(names(&first.apply(all.clone())), ["a", "d"]);
        let rerun = Selection {
            only: Some(vec!["local/v1.36/c".into()]),
            ..Default::default()
        };
        assert_eq!(names(&rerun.apply(all)), ["c"]);
    }

    #[test]
    fn a_listed_trial_says_what_a_filter_sees() {
        let l = Listed::of(&trial("x", "al2023, karpenter"));
        assert_eq!(l.name, "local/v1.36/x");
        assert_eq!(l.tags, ["al2023", "karpenter"]);
        assert!(
            l.line().starts_with("local/v1.36/x  [al2023, karpenter]  "),
            "{}",
            l.line()
        );
        assert!(l.ignored.is_none());
        let bad = "name: y\ntags: [\"a b\"]\nnodes:\n  - name: a\n    bootstrap: { args: [x] }\n";
        let e = crate::scenario::load::parse(bad, std::path::Path::new("/repo/y.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("tag 'a b'"), "{e}");
    }
}
