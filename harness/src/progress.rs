//! Progress for long steps (builds, downloads, image creation, waits): a bar on a terminal, plain lines
//! otherwise (CI logs), so every long step is visible either way.
use indicatif::{ProgressBar, ProgressStyle};
use std::time::Duration;

pub struct Steps {
    bar: ProgressBar,
    title: String,
}

impl Steps {
    pub fn new(title: &str, total: u64) -> Self {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix} [{bar:20}] {pos}/{len} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(title.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        if bar.is_hidden() {
            eprintln!("[nodejoin] {title}: started");
        }
        Self {
            bar,
            title: title.to_string(),
        }
    }

    /// Moves to step `n` with a message.
    pub fn step(&self, n: u64, msg: &str) {
        self.bar.set_position(n);
        self.bar.set_message(msg.to_string());
        if self.bar.is_hidden() {
            eprintln!(
                "[nodejoin] {}: {msg} ({n}/{})",
                self.title,
                self.bar.length().unwrap_or(0)
            );
        }
    }

    pub fn finish(&self, msg: &str) {
        self.bar.finish_and_clear();
        eprintln!("[nodejoin] {}: {msg} in {:.1?}", self.title, self.bar.elapsed());
    }
}

/// Runs a command, feeding each `step N/M text` line it prints into `steps`; returns its output tail on failure.
/// After `deadline` the command and everything it started are killed and that is the failure.
pub async fn run_with_steps(
    cmd: &mut tokio::process::Command,
    steps: &Steps,
    log: &std::path::Path,
    deadline: Duration,
) -> Result<(), String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    // Marked: if this process is killed mid-build, the reaper finds the build (and what it started) by the mark.
    crate::process::mark(cmd);
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let pid = child.id();
    let mut out = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut err = BufReader::new(child.stderr.take().ok_or("no stderr")?).lines();
    let mut file = tokio::fs::File::create(log)
        .await
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let mut tail: std::collections::VecDeque<String> = Default::default();
    let finished = tokio::time::timeout(deadline, async {
        let (mut out_done, mut err_done) = (false, false);
        while !(out_done && err_done) {
            let line = tokio::select! {
                l = out.next_line(), if !out_done => match l { Ok(Some(l)) => l, _ => { out_done = true; continue } },
                l = err.next_line(), if !err_done => match l { Ok(Some(l)) => l, _ => { err_done = true; continue } },
            };
            let _ = file.write_all(format!("{line}\n").as_bytes()).await;
            if let Some(rest) = line.strip_prefix("step ") {
                if let Some((frac, msg)) = rest.split_once(' ') {
                    let n = frac.split('/').next().and_then(|n| n.parse().ok()).unwrap_or(0);
                    steps.step(n, msg);
                }
            }
            tail.push_back(line);
            if tail.len() > 20 {
                tail.pop_front();
            }
        }
        child.wait().await.map_err(|e| e.to_string())
    })
    .await;
    let last = || Vec::from(tail.clone()).join("\n");
    match finished {
        Ok(Ok(status)) if status.success() => Ok(()),
        Ok(Ok(status)) => Err(format!("{status}; last output:\n{}", last())),
        Ok(Err(e)) => Err(e),
        Err(_) => {
            if let Some(pid) = pid {
                crate::process::kill_tree(pid);
            }
            Err(format!(
                "did not finish within {} (killed); last output:\n{}",
                humantime::format_duration(deadline),
                last()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_command_past_its_deadline_is_killed_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let steps = Steps::new("a build that hangs", 1);
        let start = std::time::Instant::now();
        let err = run_with_steps(
            tokio::process::Command::new("bash").args(["-c", "echo 'step 1/1 compiling'; sleep 300"]),
            &steps,
            &dir.path().join("build.log"),
            Duration::from_millis(500),
        )
        .await
        .unwrap_err();
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(err.starts_with("did not finish within 500ms (killed)"), "{err}");
        assert!(err.contains("step 1/1 compiling"), "the output so far is kept: {err}");
    }
}
