//! JUnit XML for CI, written when the run finishes (to `--junit`, else `<artifacts>/junit.xml`).
use crate::run::events::{Event, Reporter};
use crate::run::report;
use std::path::PathBuf;

pub struct Junit {
    run_id: String,
    path: PathBuf,
    /// Where to say what happened (stderr for `--format json`, whose stdout is JSON only).
    to_stderr: bool,
}

impl Junit {
    pub fn new(run_id: &str, path: PathBuf, to_stderr: bool) -> Self {
        Self {
            run_id: run_id.to_string(),
            path,
            to_stderr,
        }
    }
}

impl Reporter for Junit {
    fn on(&mut self, event: &Event) {
        let Event::RunFinished { reports, .. } = event else {
            return;
        };
        let said = match report::junit(reports, &self.run_id) {
            Ok(xml) => match super::write_whole(&self.path, xml.as_bytes()) {
                Ok(()) => format!("JUnit report: {}", self.path.display()),
                Err(e) => format!("error: cannot write {}: {e}", self.path.display()),
            },
            Err(e) => format!("error: JUnit report: {e}"),
        };
        if self.to_stderr || said.starts_with("error") {
            eprintln!("{said}");
        } else {
            println!("{said}");
        }
    }
}
