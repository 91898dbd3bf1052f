//! The typed values of settings that are more than a string: parsed once, where the settings are resolved, so a
//! bad one is refused there with its source named, never read again as text.

/// The containerd line a node runs: what the AMI ships today (2.2), the 1.7 line nodeadm still supports (its own
/// tests cover both; its config template and `containerd config migrate` path differ between them), or the next
/// lines no AMI ships yet (2.3, 2.4): the canary for "will the next containerd break our nodes?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize, schemars::JsonSchema)]
pub enum ContainerdLine {
    #[default]
    #[serde(rename = "2.2")]
    V2_2,
    #[serde(rename = "1.7")]
    V1_7,
    #[serde(rename = "2.3")]
    V2_3,
    #[serde(rename = "2.4")]
    V2_4,
}

impl ContainerdLine {
    /// Every line, in the order `--containerd` lists them.
    pub const ALL: [Self; 4] = [Self::V2_2, Self::V1_7, Self::V2_3, Self::V2_4];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2_2 => "2.2",
            Self::V1_7 => "1.7",
            Self::V2_3 => "2.3",
            Self::V2_4 => "2.4",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == s.trim())
    }

    /// Whether an AMI ships it today; the others are the canary.
    pub fn shipped(self) -> bool {
        matches!(self, Self::V2_2 | Self::V1_7)
    }

    /// The lines' names, as a message lists them (`2.2, 1.7, 2.3 or 2.4`).
    pub fn known() -> String {
        let names: Vec<&str> = Self::ALL.iter().map(|l| l.as_str()).collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        }
    }
}

impl std::str::FromStr for ContainerdLine {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s).ok_or_else(|| format!("containerd line '{s}' is unknown (known: {})", Self::known()))
    }
}

impl std::fmt::Display for ContainerdLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a FLAKY scenario fails the run (a profile's `flaky-result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlakyResult {
    /// A scenario that passed on a later attempt passes the run (nextest's default).
    #[default]
    Pass,
    Fail,
}

impl std::str::FromStr for FlakyResult {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "pass" => Ok(Self::Pass),
            "fail" => Ok(Self::Fail),
            other => Err(format!("flaky-result '{other}' is unknown (known: pass, fail)")),
        }
    }
}

/// What a run in which nothing ran exits with (`--no-tests`, as cargo-nextest's): `fail` (exit 4, the default,
/// as nextest's), `warn` (0, said on stderr) or `pass` (0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NoTests {
    #[default]
    Fail,
    Warn,
    Pass,
}

impl std::str::FromStr for NoTests {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "fail" => Ok(Self::Fail),
            "warn" => Ok(Self::Warn),
            "pass" => Ok(Self::Pass),
            other => Err(format!("no-tests '{other}' is unknown (known: fail, warn, pass)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_parses_from_its_name_only() {
        for line in ContainerdLine::ALL {
            assert_eq!(line.as_str().parse::<ContainerdLine>(), Ok(line));
        }
        let e = "2.5".parse::<ContainerdLine>().unwrap_err();
        assert_eq!(e, "containerd line '2.5' is unknown (known: 2.2, 1.7, 2.3 or 2.4)");
        assert!("fail".parse::<FlakyResult>().is_ok() && "maybe".parse::<FlakyResult>().is_err());
        assert_eq!("warn".parse::<NoTests>(), Ok(NoTests::Warn));
        assert_eq!(
            "".parse::<NoTests>(),
            Err("no-tests '' is unknown (known: fail, warn, pass)".into())
        );
    }
}
