//! Assertions on what the cluster sees, each producing a `Check` with expected and actual values.
pub mod audit;
pub mod calls;
pub mod cloud_init;
pub mod csr;
pub mod executables;
pub mod files;
pub mod node;
pub mod nodeadm;
pub mod provenance;
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
    pub fn new(name: impl Into<String>, passed: bool, expected: impl Into<String>, actual: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            passed,
            expected: expected.into(),
            actual: actual.into(),
            xfail: false,
        }
    }

    /// Compares two displayable values for equality.
    pub fn eq<T: PartialEq + std::fmt::Debug>(name: impl Into<String>, expected: T, actual: T) -> Self {
        let passed = expected == actual;
        Self::new(name, passed, format!("{expected:?}"), format!("{actual:?}"))
    }
}
