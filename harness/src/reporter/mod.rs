//! Reporters: what a run's events become. The human renderer (live progress for the scenarios running at once,
//! each scenario's report when it ends, the summary table), JSON lines for tools (`--format json`), JUnit XML
//! for CI, and a Markdown summary for pull requests (`--markdown`). They only consume `run::events::Event`s; the runner knows none of them.
pub mod human;
pub mod json;
pub mod junit;
pub mod markdown;

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
