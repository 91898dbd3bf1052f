//! What each scenario cost the last time it ran on this host, so that a run starts the longest first and packs
//! the rest around them (a run's wall then approaches its longest scenario instead of a long one starting last).
//! A scenario's cost is its own time: its wall less what it waited for room and for shared builds. Kept in the
//! cache (one small JSON file, replaced whole); a scenario never run here is estimated from what it asks for.
use crate::run::report::ScenarioReport;
use crate::run::trial::Trial;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The file's name in the cache directory.
const FILE: &str = "scenario-costs.json";
/// At most this much of the file is read, and this many scenarios kept: it is a hint, never an input to trust.
const MAX_BYTES: u64 = 1 << 20;
const MAX_ENTRIES: usize = 4096;

/// The costs kept, by trial name (`provider/v1.MINOR/scenario`), in seconds.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Costs {
    seconds: BTreeMap<String, f64>,
}

impl Costs {
    /// Where the costs of runs on this host are kept.
    pub fn path(settings: &crate::settings::Settings) -> PathBuf {
        crate::paths::cache_dir(settings).join(FILE)
    }

    /// The costs kept at `path`; none when the file is missing, too large or not ours.
    pub fn load(path: &Path) -> Costs {
        use std::io::Read;
        let mut text = String::new();
        let read = std::fs::File::open(path).and_then(|f| f.take(MAX_BYTES).read_to_string(&mut text));
        let seconds: BTreeMap<String, f64> = match read {
            Ok(_) => serde_json::from_str(&text).unwrap_or_default(),
            Err(_) => BTreeMap::new(),
        };
        Costs {
            seconds: seconds
                .into_iter()
                .filter(|(_, s)| s.is_finite() && *s >= 0.0)
                .take(MAX_ENTRIES)
                .collect(),
        }
    }

    /// What `trial` is expected to cost: its last own time here, else an estimate from what it asks for.
    pub fn expected(&self, trial: &Trial) -> Duration {
        match self.seconds.get(&trial.test_name()) {
            Some(s) => Duration::from_secs_f64(*s),
            None => estimate(&trial.scenario),
        }
    }

    /// Notes each finished scenario's own time (ignored: skipped, cancelled and errored ones say nothing).
    pub fn note(&mut self, trials: &[Trial], reports: &[ScenarioReport]) {
        for (t, r) in trials.iter().zip(reports) {
            self.note_one(t, r);
        }
    }

    /// Notes one finished scenario's own time.
    pub fn note_one(&mut self, trial: &Trial, r: &ScenarioReport) {
        use crate::run::report::Outcome;
        if matches!(r.outcome, Outcome::Passed | Outcome::Failed) {
            let own = r.wall.saturating_sub(r.waited_for_room + r.waited_for_builds);
            self.seconds.insert(trial.test_name(), own.as_secs_f64());
        }
        while self.seconds.len() > MAX_ENTRIES {
            self.seconds.pop_first();
        }
    }

    /// Writes the costs to `path` whole (a temporary file renamed over it: a run beside this one reads either
    /// file, never half of one). A failure only loses the hint.
    pub fn save(&self, path: &Path) {
        let Ok(text) = serde_json::to_string(&self.seconds) else {
            return;
        };
        let tmp = path.with_extension(format!("json.{}", std::process::id()));
        if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// A scenario never run here: a control plane and a few seconds, then its nodes (user data run by cloud-init costs
/// more than a script the harness calls; an AL2023 image more again), its steps after the join (a reboot about
/// 20 s, a rotation the certificates' lifetime) and an IAM scenario's control plane of its own.
fn estimate(sc: &crate::scenario::model::Scenario) -> Duration {
    let mut secs = 10.0;
    if sc.cluster.auth == crate::scenario::model::AuthMode::Iam {
        secs += 3.0;
    }
    for g in &sc.nodes {
        let per_node = match (&g.user_data, &g.image) {
            (Some(_), Some(i)) if i.amazon_eks_ami.is_some() => 8.0,
            (Some(_), _) => 6.0,
            _ => 3.0,
        };
        // Nodes beyond the first few share the host's cores.
        secs += per_node + f64::from(g.count.saturating_sub(1)) * per_node / 2.0;
        for step in &g.after {
            secs += match step.action {
                crate::scenario::after::Action::Reboot => 20.0,
                crate::scenario::after::Action::Terminate => 60.0,
                crate::scenario::after::Action::Cordon | crate::scenario::after::Action::Uncordon => 2.0,
                crate::scenario::after::Action::Upgrade => 20.0,
                crate::scenario::after::Action::Drain => 15.0,
                crate::scenario::after::Action::Shutdown => 10.0,
                crate::scenario::after::Action::WaitForRotation => {
                    sc.cluster.certificate_lifetime.map(|d| d.as_secs_f64()).unwrap_or(60.0)
                }
            };
        }
    }
    Duration::from_secs_f64(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_file_is_read_back_and_junk_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        let mut c = Costs::default();
        c.seconds.insert("local/v1.36/a".into(), 12.5);
        c.save(&path);
        assert_eq!(Costs::load(&path), c);
        std::fs::write(&path, "not json").unwrap();
        assert_eq!(Costs::load(&path), Costs::default());
        std::fs::write(&path, r#"{"x": -1.0, "y": 3.0}"#).unwrap();
        assert_eq!(Costs::load(&path).seconds.len(), 1, "a negative cost is dropped");
        assert_eq!(Costs::load(&dir.path().join("missing")), Costs::default());
    }
}
