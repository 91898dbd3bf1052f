//! A VM node's serial console, bounded: the machine writes to it as much as it likes (a kernel or unit that
//! prints without end), so the file is cut to its last part whenever it grows past [`MAX`].
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most the console file may hold before it is cut.
pub const MAX: u64 = 8 * 1024 * 1024;
/// What is kept of it when cut: its end.
const KEEP: u64 = 1024 * 1024;
const EVERY: Duration = Duration::from_secs(2);

/// Watches a console file; stops when dropped.
pub struct Cap {
    task: tokio::task::JoinHandle<()>,
}

impl Cap {
    pub fn start(path: PathBuf) -> Self {
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(EVERY).await;
                let p = path.clone();
                let _ = tokio::task::spawn_blocking(move || cut(&p, MAX, KEEP)).await;
            }
        });
        Self { task }
    }
}

impl Drop for Cap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// When `path` holds more than `max` bytes, keeps its last `keep` after a line saying how much went.
fn cut(path: &Path, max: u64, keep: u64) -> std::io::Result<bool> {
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let len = f.metadata()?.len();
    if len <= max {
        return Ok(false);
    }
    f.seek(SeekFrom::Start(len - keep))?;
    let mut tail = Vec::with_capacity(keep as usize);
    Read::by_ref(&mut f).take(keep).read_to_end(&mut tail)?;
    f.set_len(0)?;
    f.seek(SeekFrom::Start(0))?;
    writeln!(f, "[nodejoin: the console's first {} bytes were cut]", len - keep)?;
    f.write_all(&tail)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_console_past_its_bound_keeps_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("console.log");
        std::fs::write(&p, "a".repeat(100) + &"z".repeat(10)).unwrap();
        assert!(!cut(&p, 200, 10).unwrap());
        assert!(cut(&p, 50, 10).unwrap());
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "[nodejoin: the console's first 100 bytes were cut]\nzzzzzzzzzz");
    }
}
