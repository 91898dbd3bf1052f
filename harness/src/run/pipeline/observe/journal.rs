//! Reading a node's systemd journal for the kubelet's own words: the fail-fast verdicts and the `registered`
//! check quote them, so a report says "x509: certificate signed by unknown authority" rather than "not there".

/// The message of a journal line (`Nov 23 09:30:01 host kubelet[123]: message` → `message`), at most 300
/// characters.
pub fn message(line: &str) -> String {
    let msg = line.split_once("]: ").map(|(_, m)| m).unwrap_or(line);
    msg.trim().chars().take(300).collect()
}

/// A klog line at level E (`E1123 12:25:31.496353 ...`).
pub fn is_klog_error(msg: &str) -> bool {
    let b = msg.as_bytes();
    b.len() > 5 && b[0] == b'E' && b[1..5].iter().all(u8::is_ascii_digit)
}

/// A klog line at any level (`I`, `W`, `E`, `F` and four digits).
fn is_klog(msg: &str) -> bool {
    let b = msg.as_bytes();
    b.len() > 5 && matches!(b[0], b'I' | b'W' | b'E' | b'F') && b[1..5].iter().all(u8::is_ascii_digit)
}

/// The first line of `text` containing `wanted`, trimmed, cut to 400 characters: the evidence quoted.
pub fn first_line(text: &str, wanted: &str) -> Option<String> {
    text.lines()
        .find(|l| l.contains(wanted))
        .map(|l| l.trim().chars().take(400).collect())
}

/// The kubelet's last error, in its own words: the last klog line at level E, or carrying a structured `err=`
/// at any level. Both count because the kubelet reports some failures only at level I: while it waits for the
/// API server before TLS bootstrapping (up to a minute) every refused handshake is `I... "Failed to connect to
/// apiserver" err="... x509: ..."`; its E line comes only once that wait is over.
pub fn last_error(journal: &str) -> Option<String> {
    journal
        .lines()
        .rev()
        .map(message)
        .filter(|m| !is_consequence(m))
        .find(|m| is_klog_error(m) || (is_klog(m) && (m.contains(" err=") || m.contains(" error="))))
}

/// Errors that only say the Node is not registered yet (a mirror pod, the eviction manager's stats), repeated
/// hundreds of times a minute while the cause (a refused handshake, a 401) is logged less often.
fn is_consequence(msg: &str) -> bool {
    msg.contains("because node is not registered yet")
        || msg.contains("failed to get node info: node")
        || (msg.contains("err=\"node \\\"") && msg.contains("not found"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_klog_error_of_a_journal_is_quoted() {
        let journal = "Nov 23 12:00:01 ip-1 kubelet[446]: I1123 12:00:01.1 446 server.go:1] starting\n\
Nov 23 12:00:02 ip-1 kubelet[446]: E1123 12:00:02.2 446 reflector.go:2] x509: certificate signed by unknown authority\n\
Nov 23 12:00:03 ip-1 kubelet[446]: W1123 12:00:03.3 446 x.go:3] a warning\n";
        assert_eq!(
            last_error(journal).unwrap(),
            "E1123 12:00:02.2 446 reflector.go:2] x509: certificate signed by unknown authority"
        );
        assert!(last_error("Nov 23 ip-1 kubelet[1]: Error is not a klog line\n").is_none());
        assert!(last_error("Nov 23 ip-1 kubelet[1]: I1123 12:00:01.1 1 a.go:1] \"all good\"\n").is_none());
    }

    #[test]
    fn not_being_registered_yet_is_no_cause() {
        let journal = "Nov 23 12:00:02 ip-1 kubelet[4]: E1123 12:00:02.2 4 kubelet.go:3516] \"Unable to register node with API server\" err=\"Post: x509: certificate signed by unknown authority\"\n\
Nov 23 12:00:03 ip-1 kubelet[4]: E1123 12:00:03.3 4 kubelet.go:3516] \"Unable to register mirror pod because node is not registered yet\" err=\"node \\\"ip-1\\\" not found\"\n\
Nov 23 12:00:04 ip-1 kubelet[4]: E1123 12:00:04.4 4 eviction_manager.go:297] \"Eviction manager: failed to get summary stats\" err=\"failed to get node info: node \\\"ip-1\\\" not found\"\n";
        assert!(
            last_error(journal).unwrap().contains("x509"),
            "{:?}",
            last_error(journal)
        );
    }

    #[test]
    fn an_info_line_with_an_error_counts_while_the_kubelet_waits_for_the_api_server() {
        // Before its one-minute wait for the API server ends, a kubelet given the wrong CA says so only at level I.
        let journal = "Nov 23 12:00:01 ip-1 kubelet[446]: I1123 12:00:01.1 446 server.go:1] starting\n\
Nov 23 12:00:02 ip-1 kubelet[446]: I1123 12:00:02.2 446 bootstrap.go:1] \"Failed to connect to apiserver\" err=\"Get \\\"https://172.30.0.1:6443/healthz\\\": tls: failed to verify certificate: x509: certificate signed by unknown authority\"\n\
Nov 23 12:00:03 ip-1 kubelet[446]: I1123 12:00:03.3 446 x.go:3] \"still waiting\"\n";
        let line = last_error(journal).unwrap();
        assert!(line.starts_with("I1123 12:00:02.2"), "{line}");
        assert!(line.contains("x509: certificate signed by unknown authority"), "{line}");
    }

    #[test]
    fn messages_lose_the_journal_prefix() {
        assert_eq!(
            message("Nov 23 09:30:01 host kubelet[123]: Error: unknown flag"),
            "Error: unknown flag"
        );
        assert!(is_klog_error("E1123 09:30:01 1 x.go:1] boom"));
        assert!(!is_klog_error("Error: boom"));
    }
}
