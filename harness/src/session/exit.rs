//! The exit codes of `nodejoin run`, `list`, `compare` and `mutate`: cargo-nextest's (`NextestExitCode`), so a
//! script written for `cargo nextest run` reads nodejoin's the same way; and the decision of a run in which
//! nothing ran (`--no-tests`, as nextest's).
use crate::settings::NoTests;

/// Every scenario that ran passed (and, unless `--no-tests` says otherwise, at least one ran).
pub const OK: u8 = 0;
/// clap's own: the command line itself is wrong (an unknown flag, a value clap refuses).
pub const USAGE: u8 = 2;
/// Nothing ran: no scenario file, the filter, partition or rerun selected none, or every one was skipped (its
/// providers) or ignored (its Kubernetes versions). Only with `--no-tests=fail`, the default.
pub const NO_TESTS_RUN: u8 = 4;
/// A filter expression (`-E`, a profile's `default-filter`) does not parse.
pub const INVALID_FILTER_EXPRESSION: u8 = 94;
/// Setup: bad settings or profile, Docker unreachable, binaries that cannot be provisioned, a run record that
/// cannot be read.
pub const SETUP_ERROR: u8 = 96;
/// A scenario failed, a required provider could not run, or the run left objects behind.
pub const TEST_RUN_FAILED: u8 = 100;
/// A scenario file cannot be loaded (invalid, refused, two of one name): the trials cannot be listed.
pub const TEST_LIST_CREATION_FAILED: u8 = 104;
/// A report (JUnit, Markdown) could not be written.
pub const WRITE_OUTPUT_ERROR: u8 = 110;

/// `nodejoin run`'s exit codes (also in the book: docs/src/reference/cli.md); a skip is never a success.
pub const TEXT: &str = "Exit codes (cargo-nextest's):
  0    every scenario that ran passed, and at least one ran (or --no-tests is warn or pass)
  2    the command line is wrong (an unknown flag or value)
  4    nothing ran: no scenario files, the filter, partition or rerun selected none, or every scenario was
       skipped (its providers) or ignored (its Kubernetes versions); with --no-tests=fail, the default
  94   a filter expression does not parse
  96   setup: bad settings or profile, Docker unreachable, binaries that cannot be provisioned
  100  a scenario failed, a provider asked for (--provider, the required providers setting) cannot run here,
       or the run left objects behind
  104  a scenario file cannot be loaded (invalid, refused in confined mode, a name used twice)
  110  a report (--junit, --markdown) could not be written
  129, 130, 143  ended by SIGHUP, SIGINT or SIGTERM, after removing the run's processes and containers";

/// The exit code of a run in which nothing ran, said on stderr as `--no-tests` asks (`why`: what was found).
pub fn nothing_ran(policy: NoTests, why: &str) -> u8 {
    match policy {
        NoTests::Fail => {
            eprintln!("error: {why}");
            eprintln!("  hint: `nodejoin list` with the same options shows what a run takes; --no-tests=warn or pass lets an empty run succeed");
            NO_TESTS_RUN
        }
        NoTests::Warn => {
            eprintln!("warning: {why}");
            OK
        }
        NoTests::Pass => OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values of cargo-nextest's `NextestExitCode` these stand for (nextest-metadata's exit_codes.rs).
    #[test]
    fn the_codes_are_nextests() {
        assert_eq!(
            [
                NO_TESTS_RUN,
                INVALID_FILTER_EXPRESSION,
                SETUP_ERROR,
                TEST_RUN_FAILED,
                TEST_LIST_CREATION_FAILED,
                WRITE_OUTPUT_ERROR
            ],
            [4, 94, 96, 100, 104, 110]
        );
        for code in ["0 ", "2 ", "4 ", "94 ", "96 ", "100 ", "104 ", "110 "] {
            assert!(TEXT.contains(&format!("\n  {code}")), "{code} undocumented");
        }
    }

    #[test]
    fn an_empty_run_is_decided_by_the_policy() {
        assert_eq!(nothing_ran(NoTests::Fail, "none"), NO_TESTS_RUN);
        assert_eq!(nothing_ran(NoTests::Warn, "none"), OK);
        assert_eq!(nothing_ran(NoTests::Pass, "none"), OK);
    }
}
