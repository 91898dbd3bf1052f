//! Reporters: what a run's events become. The human renderer (live progress for the scenarios running at once,
//! each scenario's report when it ends, the summary table), JSON lines for tools (`--format json`), JUnit XML
//! for CI, and a Markdown summary for pull requests (`--markdown`). They only consume `run::events::Event`s; the runner knows none of them.
pub mod human;
pub mod json;
pub mod junit;
pub mod markdown;

/// Writes a report whole or not at all: a temporary file beside it, renamed over it (a full disk or a kill mid-way
/// leaves the old report or none, never a truncated one).
pub fn write_whole(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map(|_| ()).map_err(|e| e.error)
}

/// The console format of `nodejoin run`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Progress on stderr, reports and the summary on stdout.
    #[default]
    Human,
    /// One JSON object per event on stdout, nothing else there.
    Json,
}

impl Format {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "human" => Some(Self::Human),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reports_are_written_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("junit.xml");
        super::write_whole(&f, b"<testsuites/>").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"<testsuites/>");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary left");
        assert!(super::write_whole(&dir.path().join("missing/junit.xml"), b"x").is_err());
    }
}
