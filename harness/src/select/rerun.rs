//! The record `--rerun-failed` reads: each run's verdicts by trial name, kept in the artifacts directory
//! (`last-run.json`, or `last-run-<partition>.json` for a shard, so the shards of one CI job keep their own).
//! Written whole when a run ends, however it ends, so a run cut short still leaves what it decided.
use super::Partition;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A run's verdicts, by trial name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub run_id: String,
    /// Failed, errored, or cancelled: what `--rerun-failed` runs again.
    pub failed: Vec<String>,
    /// Passed, or passed on a retry (flaky).
    pub passed: Vec<String>,
}

/// Where the record of runs over `partition` is kept under `artifacts`.
pub fn path(artifacts: &Path, partition: Option<&Partition>) -> PathBuf {
    match partition {
        None => artifacts.join("last-run.json"),
        Some(p) => artifacts.join(format!("last-run-{}.json", p.to_string().replace([':', '/'], "-"))),
    }
}

impl Record {
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        crate::paths::write_atomically(path, &json, 0o644)
    }

    /// The record at `path`; a missing one says which run would have written it.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read(path).map_err(|e| {
            format!(
                "--rerun-failed: no record of a last run at {} ({e}); run without it first",
                path.display()
            )
        })?;
        // A record is ours, but the directory may have been shared: bound what is read.
        if text.len() > 16 << 20 {
            return Err(format!(
                "--rerun-failed: {} is over 16 MiB: not a record",
                path.display()
            ));
        }
        serde_json::from_slice(&text).map_err(|e| format!("--rerun-failed: {} is not a record: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_shards_keep_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let p: Partition = "count:2/3".parse().unwrap();
        assert_eq!(path(dir.path(), Some(&p)), dir.path().join("last-run-count-2-3.json"));
        let r = Record {
            run_id: "run-1".into(),
            failed: vec!["local/v1.36/a".into()],
            passed: vec!["local/v1.36/b".into()],
        };
        let at = path(dir.path(), None);
        r.write(&at).unwrap();
        assert_eq!(Record::read(&at).unwrap(), r);
        let missing = Record::read(&dir.path().join("none.json")).unwrap_err();
        assert!(missing.contains("run without it first"), "{missing}");
        std::fs::write(&at, "{").unwrap();
        assert!(Record::read(&at).unwrap_err().contains("not a record"));
    }
}
