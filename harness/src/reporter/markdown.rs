//! A Markdown summary of a run (`nodejoin run --markdown FILE`), for a pull request or GitHub's job summary
//! (`$GITHUB_STEP_SUMMARY`): a verdict line, a table of the scenarios (each one's own time apart from what it
//! waited for), the picture inline (`gantt`), the slowest nodes, and each failure's checks.
use super::gantt::cell;
use crate::run::events::{Event, Reporter};
use crate::run::report::{secs, ScenarioReport};
use std::path::PathBuf;

pub struct Markdown {
    path: PathBuf,
    failures: super::WriteFailures,
    /// Name each picture as a file of the uploaded artifact, not a link (a job summary's links to a runner's
    /// files are dead).
    in_artifact: bool,
}

impl Markdown {
    pub fn new(path: PathBuf, failures: super::WriteFailures, in_artifact: bool) -> Self {
        Self {
            path,
            failures,
            in_artifact,
        }
    }
}

impl Reporter for Markdown {
    fn on(&mut self, event: &Event) {
        let Event::RunFinished {
            reports,
            wall,
            leftovers,
            ..
        } = event
        else {
            return;
        };
        let mut md = render(reports, *wall, leftovers);
        // Each scenario's picture, linked from where this file is (`reporter::picture`).
        md.push_str(&super::picture::markdown_links(
            reports,
            self.path.parent(),
            !self.in_artifact,
        ));
        if let Err(e) = super::write_whole(&self.path, md.as_bytes(), &self.failures) {
            eprintln!("error: cannot write {}: {e}", self.path.display());
        }
    }
}

/// The summary. Its symbol follows the exit code: ✅ only when something passed, nothing failed or erred and
/// the run left nothing behind.
pub fn render(reports: &[ScenarioReport], wall: std::time::Duration, leftovers: &[String]) -> String {
    let count = |w: &str| reports.iter().filter(|r| r.status_word() == w).count();
    let (passed, failed, errors, flaky) = (count("PASSED"), count("FAILED"), count("ERROR"), count("FLAKY"));
    let green = passed + flaky > 0 && failed + errors == 0 && leftovers.is_empty();
    let mut out = String::from("### nodejoin\n\n");
    let flaky_count = if flaky > 0 {
        format!(", {flaky} flaky")
    } else {
        String::new()
    };
    out.push_str(&format!(
        "{} {passed} passed, {failed} failed, {} ignored, {errors} errors{flaky_count} in {}\n\n",
        if green { "✅" } else { "❌" },
        count("IGNORED"),
        secs(wall)
    ));
    if !leftovers.is_empty() {
        out.push_str(&format!(
            "The run left these behind: {}\n\n",
            cell(&leftovers.join(", "))
        ));
    }
    out.push_str("| scenario | result | own time | waited for room, builds | checks |\n|---|---|---|---|---|\n");
    for r in reports {
        let passed = r.checks.iter().filter(|c| c.passed).count();
        out.push_str(&format!(
            "| {} | {} | {} | {}, {} | {passed}/{} |\n",
            cell(&r.name),
            r.status_word(),
            secs(super::gantt::own_time(r)),
            secs(r.waited_for_room),
            secs(r.waited_for_builds),
            r.checks.len()
        ));
    }
    let chart = super::gantt::chart(reports);
    if !chart.is_empty() {
        out.push('\n');
        out.push_str(&chart);
    }
    out.push_str(&super::gantt::slowest_nodes(reports));
    for r in reports.iter().filter(|r| !r.failure_lines().is_empty()) {
        out.push_str(&format!("\n<details><summary>{} failed</summary>\n\n", cell(&r.name)));
        for line in r.failure_lines() {
            out.push_str(&format!("- `{}`\n", line.replace('`', "'").replace('\n', " ")));
        }
        out.push_str("\n</details>\n");
    }
    // A flaky scenario passed, but what failed first is what a reviewer must see.
    for r in reports.iter().filter(|r| r.flaky()) {
        let tries = r.earlier_attempts.len() + 1;
        out.push_str(&format!(
            "\n<details><summary>{} flaky: passed on attempt {tries}</summary>\n\n",
            cell(&r.name)
        ));
        for a in &r.earlier_attempts {
            for line in &a.failures {
                out.push_str(&format!(
                    "- attempt {}: `{}`\n",
                    a.number,
                    line.replace('`', "'").replace('\n', " ")
                ));
            }
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
        let md = render(&[ok.clone(), bad], std::time::Duration::from_secs(3), &[]);
        assert!(md.starts_with("### nodejoin\n\n❌ 1 passed, 1 failed"), "{md}");
        assert!(md.contains("| basic | PASSED | 0.00s | 0.00s, 0.00s | 1/1 |"), "{md}");
        assert!(md.contains("| a\\|b | FAILED |"), "{md}");
        assert!(md.contains("- `n/labels: expected team=a, got nothing`"), "{md}");
    }

    #[test]
    fn the_symbol_matches_the_exit_code() {
        let mut ok = ScenarioReport::new("basic", "basic.yaml".into());
        ok.checks.push(Check::new("n/registered", true, "n", "n"));
        let wall = std::time::Duration::from_secs(1);
        assert!(render(&[ok.clone()], wall, &[]).contains("✅"));
        let left = render(&[ok], wall, &["container nodejoin-x".to_string()]);
        assert!(left.contains("❌") && left.contains("container nodejoin-x"), "{left}");
        let mut ignored = ScenarioReport::new("k3s", "k3s.yaml".into());
        ignored.outcome = crate::run::Outcome::Ignored("no k3s image".into());
        assert!(render(&[ignored], wall, &[]).contains("❌"), "nothing passed");
    }
}
