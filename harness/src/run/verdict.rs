//! How a scenario's outcome becomes a test trial's result (libtest-mimic), for the scenario trials.
use super::Outcome;
use crate::scenario::trials::ENV_REQUIRE;

/// A trial's result from its scenario's outcome. `strict` (the provider is required, or the trial was listed
/// ignored and is run anyway) makes a scenario that could not run a failure: under nextest, where each trial
/// is its own process, an ignored-at-run-time trial exits 0 and reads as passed.
pub fn verdict(
    outcome: &Outcome,
    failure_lines: impl FnOnce() -> Vec<String>,
    strict: bool,
) -> Result<libtest_mimic::Completion, libtest_mimic::Failed> {
    use libtest_mimic::{Completion, Failed};
    match outcome {
        Outcome::Passed => Ok(Completion::Completed),
        Outcome::Ignored(why) | Outcome::Unavailable(why) if strict => Err(Failed::from(format!(
            "did not run, and it was required to ({ENV_REQUIRE}, or run as an ignored trial): {why}"
        ))),
        Outcome::Ignored(why) | Outcome::Unavailable(why) => {
            eprintln!(
                "[nodejoin] skipped at run time (a runner that runs each trial in its own process reports this as passed; {ENV_REQUIRE} makes it a failure): {why}"
            );
            Ok(Completion::ignored_with(why))
        }
        Outcome::Failed | Outcome::Error { .. } => Err(Failed::from(failure_lines().join("\n"))),
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
}
