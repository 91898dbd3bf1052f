//! What a scenario's outcome means for whoever asked for it, decided in one place: `nodejoin run` turns the
//! verdicts into its exit code, the scenario trials into libtest-mimic results.
use crate::run::trials::ENV_REQUIRE;
use crate::run::Outcome;

/// A scenario's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// It did not run, and that is allowed: why.
    Skipped(String),
    /// It did not run, and it was required to (the required providers setting, `--provider`, an ignored trial run
    /// anyway): why it did not.
    NotRun(String),
    /// It failed or erred: its failure lines.
    Failed(Vec<String>),
}

/// What a caller requires to run rather than be skipped.
#[derive(Debug, Clone, Copy, Default)]
pub struct Required {
    /// The provider: one that cannot run here is a verdict of its own, not a skip.
    pub provider: bool,
    /// The scenario itself: one that does not apply (a Kubernetes version outside its range, an absent
    /// checkout) is not a skip either.
    pub scenario: bool,
}

impl Verdict {
    pub fn of(outcome: &Outcome, failure_lines: impl FnOnce() -> Vec<String>, required: Required) -> Self {
        match outcome {
            Outcome::Passed => Self::Passed,
            Outcome::Unavailable(why) if required.provider => Self::NotRun(why.clone()),
            Outcome::Ignored(why) if required.scenario => Self::NotRun(why.clone()),
            Outcome::Ignored(why) | Outcome::Unavailable(why) => Self::Skipped(why.clone()),
            Outcome::Failed | Outcome::Error { .. } => Self::Failed(failure_lines()),
        }
    }
}

/// A trial's result from its scenario's outcome. `strict` (the provider is required, or the trial was listed
/// ignored and is run anyway) makes a scenario that could not run a failure: under nextest, where each trial
/// is its own process, an ignored-at-run-time trial exits 0 and reads as passed.
pub fn verdict(
    outcome: &Outcome,
    failure_lines: impl FnOnce() -> Vec<String>,
    strict: bool,
) -> Result<libtest_mimic::Completion, libtest_mimic::Failed> {
    use libtest_mimic::{Completion, Failed};
    let required = Required {
        provider: strict,
        scenario: strict,
    };
    match Verdict::of(outcome, failure_lines, required) {
        Verdict::Passed => Ok(Completion::Completed),
        Verdict::NotRun(why) => Err(Failed::from(format!(
            "did not run, and it was required to ({ENV_REQUIRE}, or run as an ignored trial): {why}"
        ))),
        Verdict::Skipped(why) => {
            eprintln!(
                "[nodejoin] skipped at run time (a runner that runs each trial in its own process reports this as passed; {ENV_REQUIRE} makes it a failure): {why}"
            );
            Ok(Completion::ignored_with(why))
        }
        Verdict::Failed(lines) => Err(Failed::from(lines.join("\n"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scenario_that_did_not_run_fails_when_strict() {
        use libtest_mimic::Completion;
        let lines = || vec!["x: expected a, got b".to_string()];
        let failure = |r: Result<Completion, libtest_mimic::Failed>| format!("{:?}", r.err().expect("a failure"));
        assert!(matches!(
            verdict(&Outcome::Passed, lines, true),
            Ok(Completion::Completed)
        ));
        let unavailable = Outcome::Unavailable("provider k3s: no image".into());
        let e = failure(verdict(&unavailable, lines, true));
        assert!(
            e.contains("did not run, and it was required to") && e.contains("provider k3s: no image"),
            "{e}"
        );
        assert!(matches!(
            verdict(&unavailable, lines, false),
            Ok(Completion::Ignored { reason: Some(r) }) if r == "provider k3s: no image"
        ));
        assert!(verdict(&Outcome::Ignored("needs 1.35".into()), lines, true).is_err());
        let e = failure(verdict(&Outcome::Failed, lines, false));
        assert!(e.contains("x: expected a, got b"), "{e}");
    }

    /// `nodejoin run` requires the provider only: a scenario for another Kubernetes version stays a skip.
    #[test]
    fn a_run_requires_its_provider_not_every_scenario() {
        let run = Required {
            provider: true,
            scenario: false,
        };
        let lines = Vec::new;
        assert_eq!(
            Verdict::of(&Outcome::Unavailable("no image".into()), lines, run),
            Verdict::NotRun("no image".into())
        );
        assert_eq!(
            Verdict::of(&Outcome::Ignored("needs 1.35".into()), lines, run),
            Verdict::Skipped("needs 1.35".into())
        );
        let error = Outcome::Error {
            message: "m".into(),
            hint: "h".into(),
        };
        assert!(matches!(Verdict::of(&error, || vec!["m".into()], run), Verdict::Failed(l) if l == ["m"]));
    }
}
