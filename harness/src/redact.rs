//! Secrets out of a finished run's artifacts. The artifacts are for people and CI uploads (the action uploads
//! them with `if: always()`), but a run writes its CA and component keys, kubeconfigs with client keys, and
//! collects bootstrap kubeconfigs holding tokens. Once the run is over (its control planes and nodes gone) they
//! serve no one, so each is redacted in place: the file stays, saying what was there.
use std::path::Path;

/// What replaces a secret value or block.
pub const REDACTED: &str = "<redacted by nodejoin>";

/// Keys in YAML/JSON texts whose values are secrets (kubeconfigs, kubelet and bootstrap files).
const SECRET_KEYS: &[&str] = &["client-key-data", "token", "password", "\"token\"", "secret-access-key"];

/// Redacts every file below `dir`; returns how many changed.
pub fn redact_tree(dir: &Path) -> usize {
    let mut changed = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in entries.flatten() {
        let Ok(kind) = e.file_type() else { continue };
        let path = e.path();
        if kind.is_dir() {
            changed += redact_tree(&path);
        } else if kind.is_file() && redact_file(&path) {
            changed += 1;
        }
    }
    changed
}

fn redact_file(path: &Path) -> bool {
    // Logs can be large; secrets live in small files (keys, kubeconfigs, configs).
    if std::fs::metadata(path).map(|m| m.len() > 4 << 20).unwrap_or(true) {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let redacted = redact_text(&text);
    if redacted == text {
        return false;
    }
    crate::paths::write_private(path, redacted.as_bytes()).is_ok()
}

/// The text with private-key PEM blocks and the values of secret keys replaced.
pub fn redact_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_key = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with("-----BEGIN") && trimmed.contains("PRIVATE KEY") {
            in_key = true;
            out.push_str(REDACTED);
            out.push('\n');
            continue;
        }
        if in_key {
            if trimmed.starts_with("-----END") {
                in_key = false;
            }
            continue;
        }
        out.push_str(&redact_line(line));
    }
    out
}

/// `key: value` / `"key": "value"` with a secret key: the value replaced, the rest of the line kept.
fn redact_line(line: &str) -> String {
    let body = line.trim_start();
    for key in SECRET_KEYS {
        let Some(rest) = body.strip_prefix(key) else {
            continue;
        };
        let rest_trim = rest.trim_start();
        if let Some(value) = rest_trim.strip_prefix(':') {
            if value.trim().is_empty() {
                return line.to_string();
            }
            let indent = &line[..line.len() - body.len()];
            let comma = if value.trim_end().ends_with(',') { "," } else { "" };
            let newline = if line.ends_with('\n') { "\n" } else { "" };
            let quote = if key.starts_with('"') { "\"" } else { "" };
            return format!("{indent}{key}: {quote}{REDACTED}{quote}{comma}{newline}");
        }
    }
    line.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_tokens_are_redacted_and_the_rest_kept() {
        let text = "apiVersion: v1\nusers:\n- name: a\n  user:\n    client-certificate-data: Q0VSVA==\n    client-key-data: S0VZ\n    token: abcdef.0123456789abcdef\n";
        let r = redact_text(text);
        assert!(r.contains("client-certificate-data: Q0VSVA=="), "{r}");
        assert!(!r.contains("S0VZ") && !r.contains("0123456789abcdef"), "{r}");
        assert!(r.contains("    client-key-data: <redacted by nodejoin>\n"), "{r}");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\ntail\n";
        let r = redact_text(pem);
        assert!(
            r.contains("MIIB") && !r.contains("MHcC") && r.ends_with("tail\n"),
            "{r}"
        );
        let json = "{\n  \"token\": \"k8s-aws-v1.abc\",\n  \"x\": 1\n}\n";
        let r = redact_text(json);
        assert!(!r.contains("k8s-aws-v1.abc") && r.contains("\"x\": 1"), "{r}");
        assert_eq!(redact_text("tokens are fine in prose\n"), "tokens are fine in prose\n");
    }

    #[test]
    fn a_tree_is_redacted_in_place() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("control-plane-1/pki")).unwrap();
        let key = dir.path().join("control-plane-1/pki/ca.key");
        std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\nSECRET\n-----END PRIVATE KEY-----\n").unwrap();
        std::fs::write(dir.path().join("report.txt"), "PASS\n").unwrap();
        assert_eq!(redact_tree(dir.path()), 1);
        assert!(!std::fs::read_to_string(&key).unwrap().contains("SECRET"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("report.txt")).unwrap(),
            "PASS\n"
        );
    }
}
