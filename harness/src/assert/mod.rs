//! Assertions on what the cluster sees, each producing a `Check` with expected and actual values.
pub mod audit;
pub mod calls;
pub mod cloud_init;
pub mod containerd;
pub mod csr;
pub mod executables;
pub mod files;
pub mod host_kernel;
pub mod local_storage;
pub mod node;
pub mod nodeadm;
pub mod provenance;
pub mod registry;
pub mod serving;

/// One assertion's outcome.
#[derive(Debug, Clone)]
pub struct Check {
    /// `node-name/what`, e.g. `ip-172-18-0-2.../labels`.
    pub name: String,
    pub passed: bool,
    pub expected: String,
    pub actual: String,
    /// A check the scenario expects to fail (`failingChecks`): `passed` then means it did fail.
    pub xfail: bool,
}

impl Check {
    /// What the check's result is called: `PASS`, `FAIL`, or `XFAIL` for a check that failed as the scenario
    /// said it would (`failingChecks`; one of those that passed instead is a `FAIL`).
    pub fn mark(&self) -> &'static str {
        match (self.passed, self.xfail) {
            (true, false) => "PASS",
            (true, true) => "XFAIL",
            (false, _) => "FAIL",
        }
    }

    pub fn new(name: impl Into<String>, passed: bool, expected: impl Into<String>, actual: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            passed,
            expected: expected.into(),
            actual: actual.into(),
            xfail: false,
        }
    }
}

/// Turns the checks of a group (its nodes' and its own, named `<owner>/<what>`) listed in `failing_checks`
/// around: each must have failed (it then passes, marked as an expected failure, its findings kept); one that
/// passed, or a pattern no check matches, fails.
pub fn expect_failures(checks: &mut Vec<Check>, owners: &[String], failing_checks: &[String]) {
    let unmatched = turn_around(checks, owners, failing_checks);
    no_such_checks(checks, owners, &unmatched);
}

/// [`expect_failures`] without judging the patterns no check matched, which it returns: the checks of steps
/// after the join come later ([`no_such_checks`] then).
pub fn turn_around(checks: &mut [Check], owners: &[String], failing_checks: &[String]) -> Vec<String> {
    let mut unmatched = Vec::new();
    for pattern in failing_checks {
        let mut matched = false;
        for c in checks.iter_mut() {
            let Some(what) = owned_name(c, owners) else { continue };
            if !crate::fakes::calls::glob(pattern, what) {
                continue;
            }
            matched = true;
            // A check several patterns name is turned around once: twice would make a passing check read as
            // an expected failure.
            if c.xfail {
                continue;
            }
            c.expected = format!("to fail (failingChecks), i.e. not: {}", c.expected);
            c.passed = !c.passed;
            c.xfail = true;
        }
        if !matched {
            unmatched.push(pattern.clone());
        }
    }
    unmatched
}

/// A failed check for each of `patterns` that still matches no check of `owners` in `checks`.
pub fn no_such_checks(checks: &mut Vec<Check>, owners: &[String], patterns: &[String]) {
    let node = owners.first().cloned().unwrap_or_default();
    for pattern in patterns {
        let matched = checks
            .iter()
            .any(|c| owned_name(c, owners).is_some_and(|what| crate::fakes::calls::glob(pattern, what)));
        if !matched {
            checks.push(Check::new(
                registry::FAILING_CHECKS.on_with(&node, pattern),
                false,
                "a check of this name that fails",
                "no such check ran",
            ));
        }
    }
}

/// A check's name after its owner (`<owner>/<what>`), if one of `owners` owns it.
fn owned_name<'c>(c: &'c Check, owners: &[String]) -> Option<&'c str> {
    owners
        .iter()
        .find_map(|o| c.name.strip_prefix(o.as_str()).and_then(|r| r.strip_prefix('/')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_patterns_turn_a_check_around_once() {
        let owners = vec!["n1".to_string()];
        let mut checks = vec![Check::new("n1/registered", true, "a Node", "a Node")];
        expect_failures(&mut checks, &owners, &["registered".into(), "regist*".into()]);
        assert!(checks[0].xfail);
        assert!(
            !checks[0].passed,
            "a check that passed, expected to fail, fails whatever patterns name it"
        );
        let mut checks = vec![Check::new("n1/registered", false, "a Node", "none")];
        expect_failures(&mut checks, &owners, &["registered".into(), "*".into()]);
        assert!(checks[0].passed, "a check that failed as expected passes once");
    }

    #[test]
    fn a_pattern_for_a_later_step_is_judged_once_the_step_ran() {
        let owners = vec!["n1".to_string(), "group".to_string()];
        let patterns = ["node deleted after terminate".to_string()];
        let mut checks = vec![Check::new("n1/registered", true, "a Node", "a Node")];
        assert_eq!(turn_around(&mut checks, &owners, &patterns), patterns.to_vec());
        let mut step = vec![Check::new(
            "n1/node deleted after terminate",
            false,
            "gone",
            "still there",
        )];
        assert!(turn_around(&mut step, &owners, &patterns).is_empty());
        assert!(step[0].passed && step[0].xfail);
        checks.extend(step);
        no_such_checks(&mut checks, &owners, &patterns);
        assert_eq!(checks.len(), 2, "matched by the step's check: nothing added");
        no_such_checks(&mut checks, &owners, &["ready after reboot".to_string()]);
        assert!(!checks[2].passed && checks[2].actual == "no such check ran");
    }
}
