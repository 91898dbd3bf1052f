//! Durations in scenario files, written like `60s`, `2m`, `1500ms` (humantime).
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// Durations written like `60s`, `2m`, `1500ms`.
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    humantime::parse_duration(&s)
        .map_err(|e| serde::de::Error::custom(format!("'{s}' is not a duration like 60s: {e}")))
}

/// The longest wait a scenario may ask for (`within`, `afterReadyWindow`).
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

/// A wait: a duration over 0 and at most [`MAX_WAIT`] (a zero window passes at once and proves nothing).
pub fn wait<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let w = duration(d)?;
    if w.is_zero() || w > MAX_WAIT {
        return Err(serde::de::Error::custom(format!(
            "'{}' must be over 0s and at most 1h",
            humantime::format_duration(w)
        )));
    }
    Ok(w)
}

/// An optional [`wait`].
pub fn opt_wait<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    wait(d).map(Some)
}

/// `cluster.certificateLifetime`: long enough for a kubelet to use a certificate before it renews it, short
/// enough to be a test setting.
pub fn opt_certificate_lifetime<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let w = duration(d)?;
    if w < Duration::from_secs(60) || w > Duration::from_secs(24 * 3600) {
        return Err(serde::de::Error::custom(format!(
            "certificateLifetime '{}' must be 1m to 24h",
            humantime::format_duration(w)
        )));
    }
    Ok(Some(w))
}

/// An optional delay (`latency`, `creatingFor`): at most [`MAX_WAIT`], so it cannot outlast every deadline.
pub fn opt_delay<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let w = duration(d)?;
    if w > MAX_WAIT {
        return Err(serde::de::Error::custom(format!(
            "'{}' must be at most 1h",
            humantime::format_duration(w)
        )));
    }
    Ok(Some(w))
}

/// The longest credential lifetime a role's session can have (IAM's maximum session duration).
pub const MAX_CREDENTIAL_LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// `imds.credentialLifetime`: over 0 and at most 12h (an IAM role session's maximum), so an expiry is a time.
pub fn opt_credential_lifetime<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let l = duration(d)?;
    if l.is_zero() || l > MAX_CREDENTIAL_LIFETIME {
        return Err(serde::de::Error::custom(format!(
            "'{}' must be over 0s and at most 12h (an IAM role session's longest)",
            humantime::format_duration(l)
        )));
    }
    Ok(Some(l))
}

#[cfg(test)]
mod tests {
    use crate::error::Error;

    const NODE: &str = "nodes:\n  - name: a\n    bootstrap:\n      args: [\"x\"]\n    expect:\n";

    fn load(expect: &str) -> crate::error::Result<crate::scenario::model::Scenario> {
        let text = format!("{NODE}{expect}");
        crate::scenario::load::parse(&text, &crate::paths::workspace_root().join("test.yaml"))
    }

    /// Expectations that would check nothing are refused when the file is loaded, with their line.
    #[test]
    fn expectations_that_prove_nothing_are_refused_with_their_line() {
        for (expect, line, says) in [
            ("      within: 0s\n", 6, "over 0s"),
            ("      within: 2h\n", 6, "at most 1h"),
            (
                "      calls: { noneAfterReady: [\"imds *\"], afterReadyWindow: 0s }\n",
                6,
                "over 0s",
            ),
            (
                "      evidence: [{ source: kubelet, contains: \"\" }]\n",
                6,
                "empty text",
            ),
            (
                "      files:\n        - path: /etc/x\n          contains: [\"a\", \"\"]\n",
                7,
                "empty text",
            ),
        ] {
            match load(expect) {
                Err(Error::ScenarioParse { line: l, message, .. }) => {
                    assert_eq!(l, line, "{expect}: {message}");
                    assert!(message.contains(says), "{expect}: {message}");
                }
                other => panic!("{expect}: expected a parse error, got {other:?}"),
            }
        }
        let err = load("      calls: {}\n").unwrap_err().to_string();
        assert!(err.contains("sets no rule"), "{err}");
        assert!(load("      within: 90s\n      files: [{ path: /etc/x }]\n").is_ok());
    }

    /// A credential lifetime past an IAM session's 12h (or zero) is refused at load, with its line, instead of
    /// overflowing the expiry inside IMDS.
    #[test]
    fn credential_lifetimes_are_bounded() {
        let text = |l: &str| {
            format!(
                "nodes:\n  - name: a\n    bootstrap:\n      args: [\"x\"]\n    imds:\n      credentialLifetime: {l}\n"
            )
        };
        let parse = |t: &str| crate::scenario::load::parse(t, &crate::paths::workspace_root().join("test.yaml"));
        for bad in ["0s", "13h", "100000000years"] {
            match parse(&text(bad)) {
                Err(Error::ScenarioParse { line, message, .. }) => {
                    assert_eq!(line, 6, "{bad}: {message}");
                    assert!(
                        message.contains("12h") || message.contains("duration"),
                        "{bad}: {message}"
                    );
                }
                other => panic!("{bad}: expected a parse error, got {other:?}"),
            }
        }
        assert!(parse(&text("6h")).is_ok());
    }
}
