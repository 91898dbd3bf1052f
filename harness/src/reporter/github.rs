//! GitHub Actions annotations (under `GITHUB_ACTIONS=true`): one `::error` per failed check, on the line of the
//! scenario key that asked for it (the check registry's `keys`, found in the check's node group), titled
//! `trial / node / check`, saying what was expected and what the cluster showed; a `::warning` for a FLAKY
//! scenario. Paths are relative to the checkout's root (`GITHUB_WORKSPACE`), which GitHub resolves them from,
//! whatever directory the run was started in.
use crate::run::events::{Event, Reporter};
use crate::run::report::{Outcome, ScenarioReport};

/// Annotations written per run at most: GitHub shows only the first few of a step, and a run of many failures
/// must not bury its own log in them (the reports keep every failure).
const MAX_PER_RUN: usize = 50;
/// How much of a check's detail an annotation quotes (the report has it all).
const MESSAGE_CHARS: usize = 1000;
/// The most of a scenario file read to find a key's line.
const SCENARIO_BYTES: u64 = 1 << 20;

/// Writes annotations to stdout, or stderr when stdout carries JSON lines (the runner reads both).
pub struct Annotations {
    to_stderr: bool,
    root: std::path::PathBuf,
    written: usize,
}

impl Annotations {
    /// Annotations naming files from `root`.
    pub fn new(to_stderr: bool, root: std::path::PathBuf) -> Self {
        Self {
            to_stderr,
            root,
            written: 0,
        }
    }
}

impl Reporter for Annotations {
    fn on(&mut self, event: &Event) {
        let Event::ScenarioFinished { report } = event else {
            return;
        };
        for line in annotations(report, &self.root) {
            self.written += 1;
            if self.written > MAX_PER_RUN {
                continue;
            }
            if self.to_stderr {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        }
    }
}

/// A workflow command's message: `%`, CR and LF escaped, so nothing a node said can start a command line.
fn data(s: &str) -> String {
    let cut: String = s.chars().take(MESSAGE_CHARS).collect();
    cut.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// A workflow command's property value: also `:` and `,`.
fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The annotations of one finished scenario, naming its file from `root`.
pub fn annotations(r: &ScenarioReport, root: &std::path::Path) -> Vec<String> {
    let file = crate::paths::relative_to(&r.file, Some(root));
    let text = read_bounded(&r.file);
    let trial = r.trial_name();
    let command = |level: &str, line: usize, title: &str, message: &str| {
        format!(
            "::{level} file={},line={line},title={}::{}",
            property(&file),
            property(title),
            data(message)
        )
    };
    let mut out = Vec::new();
    match &r.outcome {
        Outcome::Failed => {
            for c in r.checks.iter().filter(|c| !c.passed) {
                let name = r.stable_name(&c.name);
                let line = line_of(r, &text, &c.name);
                let message = format!("expected {}, got {}", c.expected, c.actual);
                out.push(command(
                    "error",
                    line,
                    &format!("{trial} / {}", name.replacen('/', " / ", 1)),
                    &message,
                ));
            }
        }
        Outcome::Error { message, hint } => {
            out.push(command("error", 1, trial, &format!("{message} (hint: {hint})")));
        }
        Outcome::Passed if r.flaky() => {
            let first = r.earlier_attempts.first();
            let check = first.and_then(|a| a.failed_checks.first());
            let line = check.map_or(1, |c| line_of(r, &text, c));
            let cause = first.and_then(|a| a.failures.first()).cloned().unwrap_or_default();
            let tries = r.earlier_attempts.len() + 1;
            out.push(command(
                "warning",
                line,
                &format!("{trial} FLAKY"),
                &format!("passed on attempt {tries}; attempt 1 failed: {cause}"),
            ));
        }
        _ => {}
    }
    out
}

fn read_bounded(file: &std::path::Path) -> String {
    use std::io::Read;
    let mut text = String::new();
    if let Ok(f) = std::fs::File::open(file) {
        let _ = f.take(SCENARIO_BYTES).read_to_string(&mut text);
    }
    text
}

/// The line a failed check points at: the first key that asks for it written in its node's group, else the
/// line naming the group, else the file's first line.
fn line_of(r: &ScenarioReport, text: &str, check: &str) -> usize {
    let Some((who, what)) = check.split_once('/') else {
        return 1;
    };
    // A node (by DNS name or stable label), else a group named directly.
    let group = r
        .nodes
        .iter()
        .find(|n| n.node_name == who || n.label == who)
        .map_or(who, |n| n.group.as_str());
    let def = crate::run::pipeline::assertions::registry::all_checks()
        .into_iter()
        .filter(|d| what == d.name || what.starts_with(&format!("{} ", d.name)))
        .max_by_key(|d| d.name.len());
    let keys = def.map_or(&[][..], |d| d.keys);
    crate::scenario::position::key_line(text, group, keys).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::assert::Check;

    const SCENARIO: &str = "description: x\nnodes:\n  - name: worker\n    bootstrap: { args: [x] }\n    expect:\n      within: 60s\n      labels: { team: a }\n      capacityPods: 29\n";

    fn report(dir: &std::path::Path) -> ScenarioReport {
        let file = dir.join("s.yaml");
        std::fs::write(&file, SCENARIO).unwrap();
        let mut r = ScenarioReport::new("s", file);
        r.trial = "local/v1.36/s".into();
        r.nodes.push(crate::run::report::NodeTimeline {
            node_name: "ip-10-0-0-1.ec2.internal".into(),
            label: "worker-0".into(),
            group: "worker".into(),
            ..Default::default()
        });
        r
    }

    #[test]
    fn a_failed_check_points_at_the_key_that_asked_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = report(dir.path());
        r.outcome = Outcome::Failed;
        r.checks = vec![
            Check::new("ip-10-0-0-1.ec2.internal/labels", false, "{team: a}", "{}"),
            Check::new(
                "ip-10-0-0-1.ec2.internal/capacity.pods",
                false,
                "29",
                "110, set by kubelet",
            ),
            Check::new(
                "ip-10-0-0-1.ec2.internal/ready",
                false,
                "Ready within 60s",
                "not Ready\nafter: 60s",
            ),
            Check::new("ip-10-0-0-1.ec2.internal/taints", true, "[]", "[]"),
        ];
        let a = annotations(&r, dir.path());
        assert_eq!(a.len(), 3, "{a:?}");
        assert!(a[0].starts_with("::error file=s.yaml,"), "{}", a[0]);
        assert!(
            a[0].ends_with("s.yaml,line=7,title=local/v1.36/s / worker-0 / labels::expected {team: a}, got {}"),
            "{}",
            a[0]
        );
        assert!(
            a[1].contains(",line=8,") && a[1].ends_with("::expected 29, got 110, set by kubelet"),
            "{}",
            a[1]
        );
        assert!(
            a[2].contains(",line=6,") && a[2].ends_with("got not Ready%0Aafter: 60s"),
            "{}",
            a[2]
        );
    }

    /// GitHub resolves an annotation's file from the checkout's root: a run started in a subdirectory (the
    /// action's `working-directory`) still names it from there.
    #[test]
    fn a_file_is_named_from_the_checkouts_root() {
        let root = tempfile::tempdir().unwrap();
        let sub = root.path().join("nodejoin/scenarios");
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("s.yaml"), SCENARIO).unwrap();
        let from_root = |f: &std::path::Path| crate::paths::relative_to(f, Some(root.path()));
        assert_eq!(from_root(&sub.join("s.yaml")), "nodejoin/scenarios/s.yaml");
        let elsewhere = tempfile::tempdir().unwrap();
        let outside = elsewhere.path().join("x.yaml");
        assert_eq!(from_root(&outside), outside.display().to_string(), "outside: as given");
    }

    #[test]
    fn nothing_a_node_says_can_start_a_command_of_its_own() {
        assert_eq!(data("a\n::set-env name=x::y\r%"), "a%0A::set-env name=x::y%0D%25");
        assert_eq!(property("a:b,c"), "a%3Ab%2Cc");
        assert_eq!(data(&"x".repeat(5000)).len(), MESSAGE_CHARS);
    }

    #[test]
    fn a_flaky_scenario_is_a_warning_and_an_error_is_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = report(dir.path());
        r.earlier_attempts.push(crate::run::report::Attempt {
            number: 1,
            status: "FAILED",
            failures: vec!["worker-0/labels: expected {team: a}, got {}".into()],
            failed_checks: vec!["worker-0/labels".into()],
            wall: std::time::Duration::from_secs(2),
            artifacts: None,
        });
        let a = annotations(&r, dir.path());
        assert_eq!(a.len(), 1);
        assert!(
            a[0].starts_with("::warning ") && a[0].contains(",line=7,title=local/v1.36/s FLAKY::passed on attempt 2"),
            "{}",
            a[0]
        );
        let mut e = report(dir.path());
        e.outcome = Outcome::Error {
            message: "Docker unreachable".into(),
            hint: "start it".into(),
        };
        assert!(annotations(&e, dir.path())[0]
            .ends_with(",line=1,title=local/v1.36/s::Docker unreachable (hint: start it)"));
        assert!(
            annotations(&report(dir.path()), dir.path()).is_empty(),
            "a plain pass says nothing"
        );
    }

    /// Every registered check names the scenario keys that ask for it, and each is a key of the scenario format.
    #[test]
    fn every_check_points_at_keys_of_the_format() {
        let schema = crate::scenario::schema::text();
        for def in crate::run::pipeline::assertions::registry::all_checks() {
            let keys = def.keys;
            assert!(
                !keys.is_empty() || def.name == "node container",
                "{} names no key",
                def.name
            );
            for k in keys {
                assert!(
                    schema.contains(&format!("\"{k}\"")),
                    "{}: {k} is not a scenario key",
                    def.name
                );
            }
        }
    }
}
