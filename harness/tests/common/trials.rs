//! What the trials running `nodejoin run --format json` on the amazon-eks-ami snapshot share.
use libtest_mimic::Failed;
use serde_json::Value;
use std::path::PathBuf;

/// The amazon-eks-ami snapshot kept beside the project as test data (absent in a user's clone: trials needing it
/// are ignored with that reason).
pub fn eks_ami_snapshot() -> PathBuf {
    super::root().join("../shared/upstream/amazon-eks-ami-81fec2e8.tar.gz")
}

/// A trial's failure with `what` unless `ok`.
pub fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if ok {
        Ok(())
    } else {
        Err(what().into())
    }
}

/// The events of `nodejoin run --format json` (one JSON object per line of its standard output).
pub struct Events(pub Vec<Value>);

impl Events {
    pub fn parse(stdout: &str) -> Self {
        Events(stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
    }

    /// Every check that failed.
    pub fn failed_checks(&self) -> Vec<&Value> {
        self.0
            .iter()
            .filter(|v| v["event"] == "check" && v["passed"] == false)
            .collect()
    }

    /// How many scenarios finished passed with at least `min_checks` checks: an ignored scenario also leaves the
    /// exit code 0, so a zero exit alone proves nothing ran.
    pub fn passed_with(&self, min_checks: usize) -> usize {
        self.0
            .iter()
            .filter(|v| v["event"] == "scenario_finished" && v["outcome"] == "passed")
            .filter(|v| v["checks"].as_array().is_some_and(|c| c.len() >= min_checks))
            .count()
    }
}
