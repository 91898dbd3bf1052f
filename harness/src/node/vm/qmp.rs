//! QEMU's machine protocol (QMP) on a machine's own socket: how the harness presses its power button. An
//! instance stopped by EC2 gets an ACPI shutdown, and its systemd stops its units and writes its journal out; a
//! disk read after such a stop ([`super::reader`]) holds what the machine logged to its end.
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// How long one QMP exchange may take (QEMU answers at once, even under TCG).
const EXCHANGE: Duration = Duration::from_secs(10);

/// Sends the machine an ACPI power-button press (`system_powerdown`); what the guest does with it is its own
/// affair (systemd-logind powers off). An error says why the press could not be made.
pub async fn press_power_button(socket: &Path) -> std::result::Result<(), String> {
    tokio::time::timeout(EXCHANGE, async {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| format!("QMP socket {}: {e}", socket.display()))?;
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read).lines();
        // The greeting, then capabilities negotiation, then the command; each answer is one JSON line (events may
        // come between, and are skipped).
        next_answer(&mut lines, "QMP").await?;
        for command in ["qmp_capabilities", "system_powerdown"] {
            write
                .write_all(format!("{{\"execute\":\"{command}\"}}\n").as_bytes())
                .await
                .map_err(|e| format!("QMP {command}: {e}"))?;
            let answer = next_answer(&mut lines, "return").await?;
            if answer.get("error").is_some() {
                return Err(format!("QMP {command}: {answer}"));
            }
        }
        Ok(())
    })
    .await
    .map_err(|_| format!("QMP did not answer within {}s", EXCHANGE.as_secs()))?
}

/// The next line holding `key` (or an `error`), skipping events.
async fn next_answer<R: tokio::io::AsyncBufRead + Unpin>(
    lines: &mut tokio::io::Lines<R>,
    key: &str,
) -> std::result::Result<serde_json::Value, String> {
    loop {
        let line = lines
            .next_line()
            .await
            .map_err(|e| format!("QMP: {e}"))?
            .ok_or("QMP closed the connection")?;
        let v: serde_json::Value = serde_json::from_str(&line).map_err(|e| format!("QMP said {line:?}: {e}"))?;
        if v.get(key).is_some() || v.get("error").is_some() {
            return Ok(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A QMP server as QEMU speaks it: greeting, answers, an event between.
    #[tokio::test]
    async fn the_power_button_is_pressed_after_capabilities() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let (r, mut w) = s.into_split();
            let mut lines = BufReader::new(r).lines();
            w.write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n")
                .await
                .unwrap();
            let mut got = Vec::new();
            while let Ok(Some(l)) = lines.next_line().await {
                got.push(l);
                w.write_all(b"{\"event\": \"X\"}\n{\"return\": {}}\n").await.unwrap();
            }
            got
        });
        super::press_power_button(&path).await.unwrap();
        let got = server.await.unwrap();
        assert_eq!(
            got,
            [
                "{\"execute\":\"qmp_capabilities\"}",
                "{\"execute\":\"system_powerdown\"}"
            ]
        );
        let gone = dir.path().join("none.sock");
        assert!(super::press_power_button(&gone)
            .await
            .unwrap_err()
            .contains("none.sock"));
    }
}
