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

/// The longest line a redacted file may have.
const LONGEST_LINE: u64 = 16 << 20;

fn redact_file(path: &Path) -> bool {
    use std::io::{BufRead, Read, Write};
    // Read as a stream, a line at a time (a journal or a call log may be large, and a token may be in it); what
    // is not text (a binary, a journal file) is left as it is.
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut reader = std::io::BufReader::new(file);
    let dir = path.parent().unwrap_or(Path::new("."));
    let Ok(mut out) = tempfile::NamedTempFile::new_in(dir) else {
        return false;
    };
    let (mut changed, mut in_key, mut line) = (false, false, Vec::new());
    loop {
        line.clear();
        // A line longer than any a run writes is no text of ours (a file a node linked to /dev/zero): left alone.
        match reader.by_ref().take(LONGEST_LINE).read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(n) if n as u64 == LONGEST_LINE && !line.ends_with(b"\n") => return false,
            Ok(_) => {}
            Err(_) => return false,
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            return false;
        };
        let redacted = redact_one(text, &mut in_key);
        changed |= redacted != text;
        if out.write_all(redacted.as_bytes()).is_err() {
            return false;
        }
    }
    if !changed {
        return false;
    }
    use std::os::unix::fs::PermissionsExt;
    let _ = out.as_file().set_permissions(std::fs::Permissions::from_mode(0o600));
    out.persist(path).is_ok()
}

/// The text with private-key PEM blocks and the values of secret keys replaced.
pub fn redact_text(text: &str) -> String {
    let mut in_key = false;
    text.split_inclusive('\n')
        .map(|line| redact_one(line, &mut in_key))
        .collect()
}

/// One line, `in_key` saying whether it is inside a private-key PEM block (and updated).
fn redact_one(line: &str, in_key: &mut bool) -> String {
    let trimmed = line.trim();
    if trimmed.starts_with("-----BEGIN") && trimmed.contains("PRIVATE KEY") {
        *in_key = !trimmed.contains("-----END");
        return format!("{REDACTED}\n");
    }
    if *in_key {
        if trimmed.starts_with("-----END") {
            *in_key = false;
        }
        return String::new();
    }
    redact_inline(&redact_line(line))
}

/// Secrets wherever they sit in a line: a JSON member of a secret key (`{"token":"..."}` on one line), a flag
/// (`--token x`, `--token=x`), and the shapes of the tokens a run hands out (bootstrap tokens, EKS IAM tokens).
fn redact_inline(line: &str) -> String {
    use std::sync::LazyLock;
    static PATTERNS: LazyLock<Vec<(regex::Regex, &'static str)>> = LazyLock::new(|| {
        let re = |p: &str| regex::Regex::new(p).ok();
        [
            (
                re(r#"("(?:token|password|client-key-data|secret-access-key|SecretAccessKey|SessionToken|Token)"\s*:\s*)"[^"]*""#),
                "${1}\"<redacted by nodejoin>\"",
            ),
            (
                re(r"(--(?:token|bootstrap-token|password|secret-access-key)(?:=|\s+))[^\s'\x22]+"),
                "${1}<redacted by nodejoin>",
            ),
            (re(r"\bk8s-aws-v1\.[A-Za-z0-9_-]+"), "<redacted by nodejoin>"),
            (re(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b"), "<redacted by nodejoin>"),
        ]
        .into_iter()
        .filter_map(|(r, with)| Some((r?, with)))
        .collect()
    });
    let mut out = std::borrow::Cow::Borrowed(line);
    for (re, with) in PATTERNS.iter() {
        if let std::borrow::Cow::Owned(s) = re.replace_all(&out, *with) {
            out = std::borrow::Cow::Owned(s);
        }
    }
    out.into_owned()
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
    fn one_line_json_flags_and_token_shapes_are_redacted() {
        let r = redact_text("{\"token\":\"k8s-aws-v1.aHR0cHM6\",\"x\":1}\n");
        assert!(!r.contains("aHR0cHM6") && r.contains("\"x\":1"), "{r}");
        let r = redact_text("kubeadm join --token abcdef.0123456789abcdef --discovery x\n");
        assert!(
            !r.contains("0123456789abcdef") && r.contains("--token <redacted by nodejoin> --discovery x"),
            "{r}"
        );
        let r = redact_text("/etc/eks/bootstrap.sh demo --token=s3cr3t --b64-cluster-ca Q0E=\n");
        assert!(!r.contains("s3cr3t") && r.contains("--b64-cluster-ca Q0E="), "{r}");
        let r = redact_text("Authorization: Bearer k8s-aws-v1.aHR0cHM6Ly9zdHM\n");
        assert!(!r.contains("aHR0cHM6Ly9zdHM"), "{r}");
        let r = redact_text("{\"AccessKeyId\":\"ASIA0\",\"SecretAccessKey\":\"wJalr\",\"Token\":\"IQoJ\"}\n");
        assert!(
            !r.contains("wJalr") && !r.contains("IQoJ") && r.contains("ASIA0"),
            "{r}"
        );
        let kept = "ip-172-31-0-4.us-west-2.compute.internal Ready kubelet v1.36.3\n";
        assert_eq!(redact_text(kept), kept, "nothing else changes");
    }

    #[test]
    fn a_large_file_is_redacted_too() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("journal.txt");
        let mut text = "x".repeat(100).repeat(50_000);
        text.push_str("\nbootstrap token abcdef.0123456789abcdef\n");
        std::fs::write(&f, &text).unwrap();
        assert!(std::fs::metadata(&f).unwrap().len() > 4 << 20);
        assert_eq!(redact_tree(dir.path()), 1);
        assert!(!std::fs::read_to_string(&f).unwrap().contains("0123456789abcdef"));
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o600);
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
