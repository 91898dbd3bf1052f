//! A node's journal kept where it outlives the node: journald writes to /run/log/journal (the drop-in below keeps
//! it there), and that directory is a host directory bound into the container. A node that dies (killed,
//! OOM-killed) takes its /run and /var tmpfs with it, but its last journal lines stay readable, for its verdict
//! and its artifacts. The node wrote that directory, so the host reads it as untrusted: only a real directory named
//! as journald names one (a machine id, 32 hex digits, not a link), rendered by journalctl in a throwaway container
//! that sees nothing else of the host ([`render`]), never by root's journalctl on the host.
use super::seed::NodeFile;
use crate::docker::Docker;
use crate::settings::Settings;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
    /// What [`render`] needs: the base image's tag, and how to build it again if it was pruned.
    settings: Arc<Settings>,
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
    pub fn create(settings: Arc<Settings>, run_id: &str, container: &str) -> std::io::Result<Self> {
        Ok(Self {
            dir: ScratchDir::create(run_id, "journal", container)?,
            settings,
        })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The journal of `unit` (all of it for `None`), its last `lines` (at most [`MOST_LINES`]), as `journalctl`
    /// prints it, rendered in a throwaway container ([`render`]).
    pub async fn read(&self, docker: &Docker, unit: Option<&str>, lines: Option<usize>) -> Result<String, String> {
        let machine = machine_dir(self.dir.path()).ok_or_else(|| {
            format!(
                "no journal in {}: journald's directory (a machine id, not a link) is not there",
                self.dir.path().display()
            )
        })?;
        let n = lines.unwrap_or(MOST_LINES).min(MOST_LINES).to_string();
        let mut args = vec!["-n", n.as_str()];
        if let Some(u) = unit {
            args.extend(["-u", u]);
        }
        render(&self.settings, docker, &machine, &machine, "short-precise", &args)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The most lines a host journal is read to.
pub const MOST_LINES: usize = 50_000;

/// journald writes into a directory named after the machine id; `journalctl --directory` reads one level. Only a
/// real directory so named is taken: a node may have planted a link there (to the host's own journal) before it died.
fn machine_dir(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .find(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.len() == 32
                && name.bytes().all(|b| b.is_ascii_hexdigit())
                && e.file_type().is_ok_and(|t| t.is_dir() && !t.is_symlink())
        })
        .map(|e| e.path())
}

/// journalctl's `output` of the journal in `journal` (under `mount`, bound read-only at the same path), `args`
/// after it, in a throwaway container of nodejoin's base image: no network, no capabilities, a read-only root, at
/// most 32 MiB printed. A link the journal's writer planted resolves in that container, to nothing of the host's.
pub async fn render(
    settings: &Settings,
    docker: &Docker,
    mount: &Path,
    journal: &Path,
    output: &str,
    args: &[&str],
) -> crate::error::Result<String> {
    use crate::error::Error;
    let journal = journal.display().to_string();
    let mut cmd: Vec<String> = ["journalctl", "-D", &journal, "--no-pager", "-q", "-o", output]
        .iter()
        .map(|s| s.to_string())
        .collect();
    cmd.extend(args.iter().map(|s| s.to_string()));
    // The base image has the journalctl this runs. Nothing else may have needed it in this run (a disk of the
    // user's, every node image already built), and it may have been pruned since: built again if missing.
    let base = crate::node::image::base_tag(settings)?;
    if !crate::node::image::exists(docker, &base).await {
        let _lock = crate::node::image::image_lock(settings).await?;
        let work = crate::node::image::work_dir(settings, "reader-base")?;
        crate::node::image::ensure_base(settings, docker, &base, work.path()).await?;
    }
    let (out, stdout) = crate::docker::oneshot::run(
        docker,
        crate::docker::oneshot::OneShot {
            kind: "journal",
            image: &base,
            cmd,
            env: Vec::new(),
            read_only: vec![mount.display().to_string()],
            hidden: Vec::new(),
            working_dir: "/".into(),
            labels: [("io.nodejoin.vm-reader".to_string(), "journalctl".to_string())].into(),
            timeout: Duration::from_secs(120),
            max_stdout: 32 << 20,
        },
    )
    .await?;
    if out.exit_code != 0 && stdout.is_empty() {
        return Err(Error::Image(format!(
            "journalctl failed ({}): {}",
            out.exit_code,
            out.stderr.trim()
        )));
    }
    Ok(String::from_utf8_lossy(&stdout).into_owned())
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
        let settings = std::sync::Arc::new(crate::settings::for_tests());
        let j = super::HostJournal::create(settings.clone(), "testrun-0", "node-a").unwrap();
        let dir = j.dir().to_path_buf();
        assert!(dir.is_dir());
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        assert!(name.starts_with(&crate::reaper::scratch_prefix("testrun-0")), "{name}");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        let again = super::HostJournal::create(settings, "testrun-0", "node-a").unwrap();
        assert_ne!(again.dir(), dir, "never a name known in advance");
        drop(again);
        drop(j);
        assert!(!dir.exists());
    }

    #[test]
    fn only_a_real_directory_named_as_journald_names_one_is_read() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(super::machine_dir(d.path()), None);
        // What a node could plant before it died: a link to the host's journal, a directory of another name.
        let host = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(host.path(), d.path().join("0123456789abcdef0123456789abcdef")).unwrap();
        std::os::unix::fs::symlink(host.path(), d.path().join("0")).unwrap();
        std::fs::create_dir(d.path().join("not-a-machine-id")).unwrap();
        assert_eq!(
            super::machine_dir(d.path()),
            None,
            "a link or an odd name is never taken"
        );
        let real = d.path().join("fedcba9876543210fedcba9876543210");
        std::fs::create_dir(&real).unwrap();
        assert_eq!(super::machine_dir(d.path()), Some(real));
    }
}
