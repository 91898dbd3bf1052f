//! The harness's way into a VM node of its own disk: QEMU's guest agent (`qemu-guest-agent` in the node image,
//! started by udev when the virtio-serial port appears), spoken over the port's host end, a Unix socket. A
//! command runs as `guest-exec` under coreutils' `timeout` (the agent cannot kill what it started), its output
//! collected by `guest-exec-status`. One request at a time on the socket; execs overlap.
use crate::docker::ExecOutput;
use crate::error::{Error, Result};
use base64::Engine;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::sync::Mutex;

/// The PATH a command gets (the agent gives a command only the environment it is sent).
const PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// How long one request may wait for its answer.
const REQUEST: Duration = Duration::from_secs(20);
/// What [`Agent::read_file`] keeps of a file at most, and asks for at a time.
const MAX_FILE: usize = 16 << 20;
const FILE_CHUNK: usize = 1 << 20;
/// The longest answer line read from the agent: an exec's output at its cap ([`crate::docker::EXEC_OUTPUT_CAP`],
/// as a container's), base64 in JSON, and room for the rest. The guest writes the answers; a longer one is an
/// error, and nothing past the cap is read into memory.
const ANSWER_CAP: u64 = (crate::docker::EXEC_OUTPUT_CAP as u64) * 4 / 3 + (1 << 20);

pub struct Agent {
    node: String,
    socket: PathBuf,
    conn: Mutex<Option<BufReader<UnixStream>>>,
}

impl Agent {
    pub fn new(node: &str, socket: PathBuf) -> Self {
        Self {
            node: node.to_string(),
            socket,
            conn: Mutex::new(None),
        }
    }

    fn err(&self, m: impl Into<String>) -> Error {
        Error::node(&self.node, m.into())
    }

    /// One request and its answer's `return`; the connection is made (and synchronised) on first use and
    /// dropped once broken, so the next request starts clean.
    async fn request(&self, execute: &str, arguments: Value) -> Result<Value> {
        self.request_or_refusal(execute, arguments)
            .await?
            .map_err(|e| self.err(format!("guest agent, {execute}: {e}")))
    }

    /// Like [`Agent::request`], with the agent's refusal (its `error` answer: the inner error) apart from a
    /// broken connection (the outer one, after which the connection is dropped).
    async fn request_or_refusal(&self, execute: &str, arguments: Value) -> Result<std::result::Result<Value, String>> {
        let mut guard = self.conn.lock().await;
        let answer = tokio::time::timeout(REQUEST, async {
            if guard.is_none() {
                *guard = Some(self.connect().await?);
            }
            let conn = guard.as_mut().ok_or_else(|| self.err("guest agent: no connection"))?;
            let line = json!({ "execute": execute, "arguments": arguments }).to_string() + "\n";
            conn.get_mut()
                .write_all(line.as_bytes())
                .await
                .map_err(|e| self.err(format!("guest agent: {e}")))?;
            read_answer(conn)
                .await
                .map_err(|e| self.err(format!("guest agent, {execute}: {e}")))
        })
        .await
        .unwrap_or_else(|_| Err(self.err(format!("guest agent: no answer to {execute} within {REQUEST:?}"))));
        if answer.is_err() {
            *guard = None;
        }
        answer
    }

    /// Connects and synchronises: `guest-sync-delimited` makes the agent drop what an earlier client left half
    /// sent and mark its answer with 0xFF, so the answer to this id is found whatever came before it.
    async fn connect(&self) -> Result<BufReader<UnixStream>> {
        let stream = UnixStream::connect(&self.socket)
            .await
            .map_err(|e| self.err(format!("guest agent socket {}: {e}", self.socket.display())))?;
        let mut conn = BufReader::new(stream);
        let id: u32 = rand::random::<u32>() & 0x7fff_ffff;
        let mut sync = vec![0xff_u8];
        sync.extend(
            json!({"execute": "guest-sync-delimited", "arguments": {"id": id}})
                .to_string()
                .bytes(),
        );
        sync.push(b'\n');
        conn.get_mut()
            .write_all(&sync)
            .await
            .map_err(|e| self.err(format!("guest agent: {e}")))?;
        // The agent answers the 0xFF itself with a parse error, then the sync.
        for _ in 0..16 {
            let answer = read_answer(&mut conn)
                .await
                .map_err(|e| self.err(format!("guest agent sync: {e}")))?;
            if answer.is_ok_and(|v| v.as_u64() == Some(u64::from(id))) {
                return Ok(conn);
            }
        }
        Err(self.err("guest agent: no answer to its sync"))
    }

    /// Drops the connection (a rebooted guest's agent is another), so the next request connects and syncs anew.
    pub async fn disconnect(&self) {
        *self.conn.lock().await = None;
    }

    /// Whether the agent answers (the guest is up far enough to run commands).
    pub async fn ping(&self) -> bool {
        self.request("guest-ping", json!({})).await.is_ok()
    }

    /// Runs `cmd` with `env` (plus a PATH), for at most `deadline`, then `Error::Timeout`; stdout as bytes.
    pub async fn exec_bytes(&self, cmd: &[&str], env: &[String], deadline: Duration) -> Result<(i64, Vec<u8>, String)> {
        let secs = deadline.as_secs().max(1).to_string();
        let mut args: Vec<&str> = vec!["-s", "KILL", &secs];
        args.extend_from_slice(cmd);
        let mut envs: Vec<String> = vec![PATH.to_string()];
        envs.extend(env.iter().cloned());
        let started = self
            .request(
                "guest-exec",
                json!({"path": "/usr/bin/timeout", "arg": args, "env": envs, "capture-output": true}),
            )
            .await?;
        let pid = started["pid"]
            .as_i64()
            .ok_or_else(|| self.err(format!("guest-exec gave no pid: {started}")))?;
        let t0 = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            let status = self.request("guest-exec-status", json!({ "pid": pid })).await?;
            if status["exited"].as_bool() == Some(true) {
                let decode = |k: &str| {
                    status[k]
                        .as_str()
                        .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
                        .unwrap_or_default()
                };
                let code = status["exitcode"]
                    .as_i64()
                    .or_else(|| status["signal"].as_i64().map(|s| 128 + s));
                let code = code.unwrap_or(-1);
                if code == 137 && t0.elapsed() >= deadline {
                    return Err(Error::Timeout {
                        what: format!("`{}` in node {}", crate::docker::short_command(cmd), self.node),
                        after: deadline,
                    });
                }
                return Ok((
                    code,
                    decode("out-data"),
                    String::from_utf8_lossy(&decode("err-data")).into_owned(),
                ));
            }
            if t0.elapsed() > deadline + Duration::from_secs(10) {
                return Err(Error::Timeout {
                    what: format!("`{}` in node {}", crate::docker::short_command(cmd), self.node),
                    after: deadline,
                });
            }
            tokio::time::sleep(pause).await;
            // Each look is a request the guest's agent answers (and logs): a long command is looked at less often.
            let most = if t0.elapsed() > Duration::from_secs(10) {
                2000
            } else {
                500
            };
            pause = (pause * 2).min(Duration::from_millis(most));
        }
    }

    /// A file's bytes through the agent's own file calls: no process in the guest (each one costs a fork and an
    /// exec, emulated under TCG). At most [`MAX_FILE`] bytes are kept. The inner error is the agent's word on
    /// the file (`failed to open file ...: No such file or directory`); the outer, the connection's.
    pub async fn read_file(&self, path: &str) -> Result<std::result::Result<Vec<u8>, String>> {
        let handle = match self
            .request_or_refusal("guest-file-open", json!({"path": path, "mode": "r"}))
            .await?
        {
            Ok(h) => h,
            Err(refused) => return Ok(Err(refused)),
        };
        let handle = handle
            .as_i64()
            .ok_or_else(|| self.err(format!("guest-file-open gave no handle: {handle}")))?;
        let mut out = Vec::new();
        let read = loop {
            let chunk = match self
                .request_or_refusal("guest-file-read", json!({"handle": handle, "count": FILE_CHUNK}))
                .await
            {
                Ok(Ok(c)) => c,
                Ok(Err(refused)) => break Ok(Err(refused)),
                Err(e) => break Err(e),
            };
            let bytes = chunk["buf-b64"]
                .as_str()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .unwrap_or_default();
            let room = MAX_FILE.saturating_sub(out.len());
            out.extend_from_slice(&bytes[..bytes.len().min(room)]);
            if chunk["eof"].as_bool() != Some(false) || bytes.is_empty() || out.len() >= MAX_FILE {
                break Ok(Ok(std::mem::take(&mut out)));
            }
        };
        // The handle is the agent's until closed; a failed close is the connection's, reported by the next call.
        let _ = self
            .request_or_refusal("guest-file-close", json!({ "handle": handle }))
            .await;
        read
    }

    pub async fn exec(&self, cmd: &[&str], env: &[String], deadline: Duration) -> Result<ExecOutput> {
        let (exit_code, stdout, stderr) = self.exec_bytes(cmd, env, deadline).await?;
        Ok(ExecOutput {
            exit_code,
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr,
        })
    }
}

/// The next answer: its `return`, or its `error` as text (inner); the outer error is the connection's.
async fn read_answer(
    conn: &mut BufReader<UnixStream>,
) -> std::result::Result<std::result::Result<Value, String>, String> {
    read_answer_within(conn, ANSWER_CAP).await
}

/// [`read_answer`], each line at most `cap` bytes.
async fn read_answer_within<R: AsyncBufRead + Unpin>(
    conn: &mut R,
    cap: u64,
) -> std::result::Result<std::result::Result<Value, String>, String> {
    loop {
        let mut raw = Vec::new();
        let n = (&mut *conn)
            .take(cap)
            .read_until(b'\n', &mut raw)
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the agent closed the connection".into());
        }
        if n as u64 >= cap && raw.last() != Some(&b'\n') {
            return Err(format!(
                "the agent's answer is longer than {cap} bytes: not read further (the connection is dropped)"
            ));
        }
        let text = String::from_utf8_lossy(&raw);
        let text = text.trim_start_matches('\u{fffd}').trim();
        if text.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(text).map_err(|e| format!("{e}: {text}"))?;
        if let Some(r) = v.get("return") {
            return Ok(Ok(r.clone()));
        }
        if let Some(e) = v.get("error") {
            return Ok(Err(e["desc"].as_str().unwrap_or("error").to_string()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::read_answer_within;

    #[tokio::test]
    async fn an_answer_past_the_cap_is_an_error_and_is_not_read_whole() {
        let mut ok: &[u8] = b"{\"return\": 7}\n";
        assert_eq!(read_answer_within(&mut ok, 64).await, Ok(Ok(serde_json::json!(7))));
        // What a guest that never ends its line sends: only the cap's worth is read.
        let flood = vec![b'x'; 1 << 20];
        let mut r: &[u8] = &flood;
        let e = read_answer_within(&mut r, 4096).await.unwrap_err();
        assert!(e.contains("longer than 4096 bytes"), "{e}");
        assert_eq!(r.len(), (1 << 20) - 4096, "read past the cap");
        let mut err: &[u8] = b"{\"error\": {\"desc\": \"no such file\"}}\n";
        assert_eq!(read_answer_within(&mut err, 64).await, Ok(Err("no such file".into())));
    }
}
