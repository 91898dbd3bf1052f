//! QEMU's machine protocol (QMP) on a machine's own socket: how the harness presses its power button and its
//! Ctrl-Alt-Delete. An instance stopped by EC2 gets an ACPI shutdown, and its systemd stops its units and writes
//! its journal out; a disk read after such a stop ([`super::reader`]) holds what the machine logged to its end. An
//! instance rebooted by EC2 goes down gracefully and boots again on the same hardware ([`reboot`]).
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

/// How long one QMP exchange may take (QEMU answers at once, even under TCG).
const EXCHANGE: Duration = Duration::from_secs(10);

/// Sends the machine an ACPI power-button press (`system_powerdown`); what the guest does with it is its own
/// affair (systemd-logind powers off). An error says why the press could not be made.
pub async fn press_power_button(socket: &Path) -> std::result::Result<(), String> {
    tokio::time::timeout(EXCHANGE, async {
        let mut qmp = Session::open(socket).await?;
        qmp.execute("system_powerdown", None).await.map(drop)
    })
    .await
    .map_err(|_| format!("QMP did not answer within {}s", EXCHANGE.as_secs()))?
}

/// Ctrl-Alt-Delete, as QEMU's `send-key` names its keys.
const CTRL_ALT_DELETE: [&str; 3] = ["ctrl", "alt", "delete"];

/// Reboots the machine as EC2 reboots an instance: from outside, gracefully. QEMU runs with `-no-reboot` (a guest's
/// reboot or panic ends it, so a machine in a reboot loop stops); for this one reboot its action becomes a reset,
/// the guest gets Ctrl-Alt-Delete (its kernel hands it to systemd, which starts `ctrl-alt-del.target`, a reboot;
/// no guest agent is needed), and once QEMU has reset the machine (its `RESET` event), `started_again` waits for
/// the new boot's kernel: the firmware resets the machine once more on its way there (SeaBIOS does after a warm
/// reset), so only then is the action a shutdown again. The same QEMU process goes on: the disk, the tap and its
/// MAC, the console file are kept; memory is not. Returns how long the guest took to go down, or why it did not
/// reboot within `down_within` (the action is restored either way).
pub async fn reboot<F>(
    socket: &Path,
    down_within: Duration,
    started_again: impl FnOnce(Duration) -> F,
) -> std::result::Result<Duration, String>
where
    F: std::future::Future<Output = std::result::Result<(), String>>,
{
    let mut qmp = tokio::time::timeout(EXCHANGE, Session::open(socket))
        .await
        .map_err(|_| format!("QMP did not answer within {}s", EXCHANGE.as_secs()))??;
    qmp.exchange("set-action", Some(json!({"reboot": "reset"}))).await?;
    let t0 = Instant::now();
    let keys: Vec<Value> = CTRL_ALT_DELETE
        .iter()
        .map(|k| json!({"type": "qcode", "data": k}))
        .collect();
    let down = match qmp.exchange("send-key", Some(json!({ "keys": keys }))).await {
        Ok(_) => qmp.wait_reset(down_within).await.map(|()| t0.elapsed()),
        Err(e) => Err(e),
    };
    let down = match down {
        Ok(d) => started_again(d).await.map(|()| d),
        Err(e) => Err(e),
    };
    // A reset after this ends QEMU again, as `-no-reboot` has it.
    let restored = qmp.exchange("set-action", Some(json!({"reboot": "shutdown"}))).await;
    let down = down?;
    restored.map(|_| down)
}

/// One QMP connection, capabilities negotiated; the events it has read are kept for [`Session::wait_reset`].
struct Session {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    write: OwnedWriteHalf,
    events: Vec<Value>,
}

impl Session {
    /// Connects, reads the greeting and negotiates capabilities.
    async fn open(socket: &Path) -> std::result::Result<Self, String> {
        let stream = tokio::net::UnixStream::connect(socket)
            .await
            .map_err(|e| format!("QMP socket {}: {e}", socket.display()))?;
        let (read, write) = stream.into_split();
        let mut s = Self {
            lines: BufReader::new(read).lines(),
            write,
            events: Vec::new(),
        };
        s.next_answer("QMP").await?;
        s.execute("qmp_capabilities", None).await?;
        Ok(s)
    }

    /// `execute` within [`EXCHANGE`].
    async fn exchange(&mut self, command: &str, arguments: Option<Value>) -> std::result::Result<Value, String> {
        tokio::time::timeout(EXCHANGE, self.execute(command, arguments))
            .await
            .map_err(|_| format!("QMP did not answer {command} within {}s", EXCHANGE.as_secs()))?
    }

    /// Runs one command: its `return`, or its error as text.
    async fn execute(&mut self, command: &str, arguments: Option<Value>) -> std::result::Result<Value, String> {
        let mut request = json!({ "execute": command });
        if let Some(a) = arguments {
            request["arguments"] = a;
        }
        self.write
            .write_all(format!("{request}\n").as_bytes())
            .await
            .map_err(|e| format!("QMP {command}: {e}"))?;
        let answer = self.next_answer("return").await?;
        match answer.get("error") {
            Some(e) => Err(format!("QMP {command}: {e}")),
            None => Ok(answer["return"].clone()),
        }
    }

    /// The next line holding `key` (or an `error`); events read on the way are kept.
    async fn next_answer(&mut self, key: &str) -> std::result::Result<Value, String> {
        loop {
            let v = self.next_line().await?;
            if v.get(key).is_some() || v.get("error").is_some() {
                return Ok(v);
            }
            if v.get("event").is_some() {
                self.events.push(v);
            }
        }
    }

    async fn next_line(&mut self) -> std::result::Result<Value, String> {
        let line = self
            .lines
            .next_line()
            .await
            .map_err(|e| format!("QMP: {e}"))?
            .ok_or("QMP closed the connection (QEMU ended)")?;
        serde_json::from_str(&line).map_err(|e| format!("QMP said {line:?}: {e}"))
    }

    /// Waits for QEMU's `RESET` event (a guest that rebooted), at most `within`; a `SHUTDOWN` first means the
    /// guest powered off instead.
    async fn wait_reset(&mut self, within: Duration) -> std::result::Result<(), String> {
        let t0 = Instant::now();
        loop {
            for e in self.events.drain(..) {
                match e["event"].as_str() {
                    Some("RESET") => return Ok(()),
                    Some("SHUTDOWN") => return Err(format!("the guest shut down instead of rebooting ({e})")),
                    _ => {}
                }
            }
            let left = within.saturating_sub(t0.elapsed());
            match tokio::time::timeout(left, self.next_line()).await {
                Ok(v) => self.events.push(v?),
                Err(_) => {
                    return Err(format!(
                        "the guest did not go down within {}s of Ctrl-Alt-Delete",
                        within.as_secs()
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A QMP server as QEMU speaks it: its greeting, an answer to each command with an event before it, and after
    /// `send-key` the events `after_keys`. Returns the commands it got.
    fn server(path: &Path, after_keys: &'static str) -> tokio::task::JoinHandle<Vec<String>> {
        let listener = tokio::net::UnixListener::bind(path).unwrap();
        tokio::spawn(async move {
            let (s, _) = listener.accept().await.unwrap();
            let (r, mut w) = s.into_split();
            let mut lines = BufReader::new(r).lines();
            w.write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n")
                .await
                .unwrap();
            let mut got = Vec::new();
            while let Ok(Some(l)) = lines.next_line().await {
                let keys = l.contains("send-key");
                got.push(l);
                w.write_all(b"{\"event\": \"X\"}\n{\"return\": {}}\n").await.unwrap();
                if keys {
                    w.write_all(after_keys.as_bytes()).await.unwrap();
                }
            }
            got
        })
    }

    #[tokio::test]
    async fn the_power_button_is_pressed_after_capabilities() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let server = server(&path, "");
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

    #[tokio::test]
    async fn a_reboot_resets_once_then_a_reset_ends_qemu_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let server = server(
            &path,
            "{\"event\": \"RESET\", \"data\": {\"guest\": true, \"reason\": \"guest-reset\"}}\n",
        );
        let started = std::sync::atomic::AtomicBool::new(false);
        super::reboot(&path, Duration::from_secs(5), |_| async {
            started.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
        .await
        .unwrap();
        assert!(
            started.into_inner(),
            "the new boot is waited for before the action is restored"
        );
        let got = server.await.unwrap();
        assert_eq!(
            got,
            [
                "{\"execute\":\"qmp_capabilities\"}",
                "{\"arguments\":{\"reboot\":\"reset\"},\"execute\":\"set-action\"}",
                "{\"arguments\":{\"keys\":[{\"data\":\"ctrl\",\"type\":\"qcode\"},{\"data\":\"alt\",\"type\":\"qcode\"},\
                 {\"data\":\"delete\",\"type\":\"qcode\"}]},\"execute\":\"send-key\"}",
                "{\"arguments\":{\"reboot\":\"shutdown\"},\"execute\":\"set-action\"}",
            ]
        );
    }

    #[tokio::test]
    async fn a_guest_that_stays_up_or_powers_off_is_no_reboot_and_the_action_is_restored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("up.sock");
        let server_up = server(&path, "");
        let why = super::reboot(&path, Duration::from_millis(200), |_| async { Ok(()) })
            .await
            .unwrap_err();
        assert!(why.contains("did not go down within"), "{why}");
        let got = server_up.await.unwrap();
        assert!(got.last().unwrap().contains("\"shutdown\""), "{got:?}");
        let path = dir.path().join("off.sock");
        let server_off = server(&path, "{\"event\": \"SHUTDOWN\", \"data\": {\"guest\": true}}\n");
        let why = super::reboot(&path, Duration::from_secs(5), |_| async { Ok(()) })
            .await
            .unwrap_err();
        assert!(why.contains("shut down instead of rebooting"), "{why}");
        assert!(server_off.await.unwrap().last().unwrap().contains("\"shutdown\""));
        let path = dir.path().join("stuck.sock");
        let server_stuck = server(&path, "{\"event\": \"RESET\", \"data\": {\"guest\": true}}\n");
        let why = super::reboot(&path, Duration::from_secs(5), |_| async {
            Err("no kernel".to_string())
        })
        .await
        .unwrap_err();
        assert_eq!(why, "no kernel");
        assert!(server_stuck.await.unwrap().last().unwrap().contains("\"shutdown\""));
    }
}
