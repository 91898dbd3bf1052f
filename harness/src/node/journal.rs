//! A node's journal kept where it outlives the node: journald writes to /run/log/journal (the drop-in below keeps
//! it there), and that directory is a host directory bound into the container. A node that dies (killed,
//! OOM-killed) takes its /run and /var tmpfs with it, but its last journal lines stay readable, for its verdict
//! and its artifacts, with the host's journalctl.
use super::seed::NodeFile;
use std::path::{Path, PathBuf};

/// Where journald keeps a volatile journal inside the node; the host directory is bound here.
pub const MOUNT: &str = "/run/log/journal";

/// A drop-in that keeps the journal in [`MOUNT`], named to sort after any other (an image of the user's may ask
/// for persistent storage, which here would land on the node's /var tmpfs and die with it).
pub fn drop_in() -> NodeFile {
    NodeFile {
        path: "/etc/systemd/journald.conf.d/zz-nodejoin-journal.conf".into(),
        content: b"# nodejoin: the journal stays in /run/log/journal, a host directory that outlives the node\n\
                   [Journal]\nStorage=volatile\n"
            .to_vec(),
        mode: 0o644,
    }
}

/// The host directory holding one node's journal; removed when dropped (after the container, which the node
/// container drops first). A killed run's are removed by the reaper: they are scratch directories of the run.
pub struct HostJournal {
    dir: ScratchDir,
}

/// A scratch directory of a run for one node (its journal, its kept `/var`), removed when dropped; a killed run's
/// are removed by the reaper with the run's others.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// A fresh one for `what` of node container `container` of run `run_id`.
    pub fn create(run_id: &str, what: &str, container: &str) -> std::io::Result<Self> {
        // A run being stopped by a signal exits without dropping its directories; its clean-up removes what exists
        // by then.
        if crate::reaper::interrupted() {
            return Err(std::io::Error::other("the run is being stopped"));
        }
        // Made here, new, 0700, with a random suffix (as etcd's data): in a shared /dev/shm a predictable name
        // could be taken first, or be a link another local user planted.
        use std::os::unix::fs::PermissionsExt;
        Ok(Self(
            tempfile::Builder::new()
                .prefix(&format!("{}{what}-{container}-", crate::reaper::scratch_prefix(run_id)))
                .permissions(std::fs::Permissions::from_mode(0o700))
                .tempdir_in(crate::reaper::scratch_dir())?
                .keep(),
        ))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl HostJournal {
    /// A fresh directory for the node container `container` of run `run_id`.
    pub fn create(run_id: &str, container: &str) -> std::io::Result<Self> {
        Ok(Self {
            dir: ScratchDir::create(run_id, "journal", container)?,
        })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The journal of `unit` (all of it for `None`), its last `lines` if given, as `journalctl` prints it.
    pub async fn read(&self, unit: Option<&str>, lines: Option<usize>) -> Result<String, String> {
        let mut cmd = tokio::process::Command::new("journalctl");
        cmd.arg("--directory")
            .arg(self.machine_dir())
            .args(["--no-pager", "-o", "short-precise"]);
        if let Some(u) = unit {
            cmd.args(["-u", u]);
        }
        if let Some(n) = lines {
            cmd.args(["-n", &n.to_string()]);
        }
        let out = crate::deadline::output(&mut cmd, "journalctl", crate::deadline::TOOL_PROBE)
            .await
            .map_err(|e| format!("the host's journalctl cannot read it ({e}); install systemd's journalctl"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("journalctl: {}", String::from_utf8_lossy(&out.stderr).trim()))
        }
    }

    /// journald writes into a directory named after the machine id; `journalctl --directory` reads one level.
    fn machine_dir(&self) -> PathBuf {
        std::fs::read_dir(self.dir.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .find(|p| p.is_dir())
            .unwrap_or_else(|| self.dir.path().to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_drop_in_sorts_after_the_images_own_and_keeps_the_journal_volatile() {
        let d = super::drop_in();
        let name = d.path.rsplit('/').next().unwrap();
        for other in ["nodejoin.conf", "99-anything.conf", "override.conf"] {
            assert!(name > other, "{name} sorts before {other}");
        }
        assert!(String::from_utf8_lossy(&d.content).contains("\nStorage=volatile\n"));
    }

    #[test]
    fn a_host_journal_is_a_scratch_directory_of_its_run_and_goes_when_dropped() {
        let j = super::HostJournal::create("testrun-0", "node-a").unwrap();
        let dir = j.dir().to_path_buf();
        assert!(dir.is_dir());
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        assert!(name.starts_with(&crate::reaper::scratch_prefix("testrun-0")), "{name}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let again = super::HostJournal::create("testrun-0", "node-a").unwrap();
        assert_ne!(again.dir(), dir, "never a name known in advance");
        drop(again);
        drop(j);
        assert!(!dir.exists());
    }
}
