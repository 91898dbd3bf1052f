//! A Markdown summary of a run (`nodejoin run --markdown FILE`), for a pull request or GitHub's job summary
//! (`$GITHUB_STEP_SUMMARY`): a verdict line, a table of the scenarios, and each failure's checks.
use crate::run::events::{Event, Reporter};
use crate::run::report::{secs, ScenarioReport};
use std::path::PathBuf;

pub struct Markdown {
    path: PathBuf,
}

impl Markdown {
    pub fn new(path: PathBuf) -> Self {
        Self { path }
    }
}

impl Reporter for Markdown {
    fn on(&mut self, event: &Event) {
        let Event::RunFinished { reports, wall, .. } = event else {
            return;
        };
        if let Err(e) = std::fs::write(&self.path, render(reports, *wall)) {
            eprintln!("error: cannot write {}: {e}", self.path.display());
        }
    }
}

/// `|` and newlines would break a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub fn render(reports: &[ScenarioReport], wall: std::time::Duration) -> String {
    let count = |w: &str| reports.iter().filter(|r| r.status_word() == w).count();
    let (failed, errors) = (count("FAILED"), count("ERROR"));
    let mut out = String::from("### nodejoin\n\n");
    out.push_str(&format!(
        "{} {} passed, {failed} failed, {} ignored, {errors} errors in {}\n\n",
        if failed + errors == 0 { "✅" } else { "❌" },
        count("PASSED"),
        count("IGNORED"),
        secs(wall)
    ));
    out.push_str("| scenario | result | wall | checks |\n|---|---|---|---|\n");
    for r in reports {
        let passed = r.checks.iter().filter(|c| c.passed).count();
        out.push_str(&format!(
            "| {} | {} | {} | {passed}/{} |\n",
            cell(&r.name),
            r.status_word(),
            secs(r.wall),
            r.checks.len()
        ));
    }
    for r in reports.iter().filter(|r| !r.failure_lines().is_empty()) {
        out.push_str(&format!("\n<details><summary>{} failed</summary>\n\n", cell(&r.name)));
        for line in r.failure_lines() {
            out.push_str(&format!("- `{}`\n", line.replace('`', "'").replace('\n', " ")));
        }
        out.push_str("\n</details>\n");
    }
    for r in reports {
        if let crate::run::Outcome::Ignored(why) | crate::run::Outcome::Unavailable(why) = &r.outcome {
            out.push_str(&format!("\n- {} ignored: {}", cell(&r.name), cell(why)));
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assert::Check;

    #[test]
    fn a_failed_scenario_is_listed_with_its_failing_checks() {
        let mut ok = ScenarioReport::new("basic", "basic.yaml".into());
        ok.checks.push(Check::new("n/registered", true, "n", "n"));
        let mut bad = ScenarioReport::new("a|b", "b.yaml".into());
        bad.outcome = crate::run::Outcome::Failed;
        bad.checks.push(Check::new("n/labels", false, "team=a", "nothing"));
        let md = render(&[ok, bad], std::time::Duration::from_secs(3));
        assert!(md.starts_with("### nodejoin\n\n❌ 1 passed, 1 failed"), "{md}");
        assert!(md.contains("| basic | PASSED | 0.00s | 1/1 |"), "{md}");
        assert!(md.contains("| a\\|b | FAILED |"), "{md}");
        assert!(md.contains("- `n/labels: expected team=a, got nothing`"), "{md}");
    }
}
