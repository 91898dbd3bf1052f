//! What a scenario may read on the host. nodejoin runs as root in whatever repository it is handed, so the paths
//! a scenario names (bootstrap script, golden files, user-data file, overlay, amazon-eks-ami checkout) are held to
//! the scenario's own repository, outside its `.git/`, plus the directories the caller allows (`--allow-path`,
//! `NODEJOIN_ALLOW_PATHS`, and the caller's own `--eks-ami`). A path is judged by where it really leads (links
//! resolved), and a file is judged again once it is open (through `/proc/self/fd`), so a link swapped in between
//! leads nowhere else. Files are read only if regular, and only up to a cap: `/dev/zero` or a FIFO never ends.
use std::path::{Component, Path, PathBuf};

/// The directories a scenario's paths may lead into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roots {
    /// The scenario's repository (the nearest directory above its file holding `.git`), else the file's own
    /// directory; empty for a scenario made in code, which is held to nothing (it names only the caller's paths).
    repo: PathBuf,
    /// The caller's: each made canonical.
    allowed: Vec<PathBuf>,
}

/// The largest bootstrap script or golden file read (a user-data file has its own cap, near EC2's limit).
pub const MAX_FILE: u64 = 4 << 20;

/// How a refused path is let in, for hints.
pub const ALLOW_HINT: &str = "a scenario reads only files in its own repository: allow another directory with \
`--allow-path DIR` or NODEJOIN_ALLOW_PATHS (colon-separated)";

impl Roots {
    /// The roots of a scenario file in `dir`: its repository and the caller's allowed directories (`allow`).
    pub fn of_dir(dir: &Path, allow: &[PathBuf]) -> Self {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let repo = dir
            .ancestors()
            .find(|d| d.join(".git").exists())
            .unwrap_or(&dir)
            .to_path_buf();
        let allowed = allow
            .iter()
            .cloned()
            .chain(std::iter::once(project_test_data()))
            .filter_map(|p| std::fs::canonicalize(p).ok())
            .collect();
        Self { repo, allowed }
    }

    /// The scenario's repository, for messages and the overlay's link boundary.
    pub fn repo(&self) -> &Path {
        &self.repo
    }

    /// Lets the caller's `path` in too (a side of `compare`, a script `mutate` plants).
    pub fn allow(&mut self, path: &Path) {
        if let Ok(p) = std::fs::canonicalize(path) {
            self.allowed.push(p);
        }
    }

    /// Whether a scenario is held to anything (one made in code is not).
    fn confines(&self) -> bool {
        !self.repo.as_os_str().is_empty()
    }

    /// Where `path` really leads, if that is inside the roots: the repository outside its `.git/`, or an allowed
    /// directory. `what` names the path in the error (`golden`, `image.overlay`).
    pub fn check(&self, path: &Path, what: &str) -> Result<PathBuf, String> {
        let real = std::fs::canonicalize(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
        self.judge(path, &real, what)?;
        Ok(real)
    }

    fn judge(&self, path: &Path, real: &Path, what: &str) -> Result<(), String> {
        if !self.confines() || self.allowed.iter().any(|a| real.starts_with(a)) {
            return Ok(());
        }
        let shown = if real == path {
            path.display().to_string()
        } else {
            format!("{} (it leads to {})", path.display(), real.display())
        };
        match real.strip_prefix(&self.repo) {
            Ok(inside) if inside.components().any(|c| c == Component::Normal(".git".as_ref())) => Err(format!(
                "{what} {shown} is inside the repository's .git/, which no scenario reads"
            )),
            Ok(_) => Ok(()),
            Err(_) => Err(format!(
                "{what} {shown} is outside the scenario's repository {} (the nearest directory above it holding \
                 .git, else its own); {ALLOW_HINT}",
                self.repo.display()
            )),
        }
    }

    /// Reads the regular file at `path`, inside the roots, of at most `cap` bytes.
    pub fn read(&self, path: &Path, what: &str, cap: u64) -> Result<Vec<u8>, String> {
        let fail = |e: std::io::Error| format!("{what} {}: {e}", path.display());
        let file = crate::untrusted::open_regular(path).map_err(fail)?;
        // Judged by what was opened, not by what the path said a moment before.
        let real = std::fs::read_link("/proc/self/fd/".to_string() + &fd_of(&file).to_string())
            .or_else(|_| std::fs::canonicalize(path))
            .map_err(fail)?;
        self.judge(path, &real, what)?;
        crate::untrusted::read_capped(file, cap).map_err(fail)
    }

    /// [`Self::read`] as UTF-8 text.
    pub fn read_text(&self, path: &Path, what: &str, cap: u64) -> Result<String, String> {
        String::from_utf8(self.read(path, what, cap)?).map_err(|_| format!("{what} {}: not UTF-8 text", path.display()))
    }
}

/// nodejoin's own test data (real bootstrap code nobody here wrote, such as an amazon-eks-ami snapshot), beside
/// the checkout this binary was built from: `../shared/upstream/`, where the bundled scenarios find it. Fixed when
/// the binary is built, never taken from the working directory: whoever can change that checkout can change the
/// binary itself.
///
/// Resolved lexically: the directory the binary was built in need not exist where it runs (a copy of the binary in
/// the cgroup v2 guest sees only the repository it runs and its `../shared`).
pub fn project_test_data() -> PathBuf {
    let mut out = PathBuf::new();
    for c in Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/upstream")
        .components()
    {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn fd_of(file: &std::fs::File) -> i32 {
    use std::os::fd::AsRawFd;
    file.as_raw_fd()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_test_data_path_needs_no_build_directory_to_exist() {
        let p = project_test_data();
        assert!(p.ends_with("shared/upstream"), "{}", p.display());
        assert!(
            p.components()
                .all(|c| !matches!(c, Component::ParentDir | Component::CurDir)),
            "{}",
            p.display()
        );
    }

    fn repo() -> (tempfile::TempDir, Roots) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(dir.path().join("nodejoin")).unwrap();
        std::fs::write(dir.path().join("golden.conf"), "ok\n").unwrap();
        let roots = Roots::of_dir(&dir.path().join("nodejoin"), &[]);
        (dir, roots)
    }

    #[test]
    fn the_repository_is_the_nearest_directory_with_git() {
        let (dir, roots) = repo();
        assert_eq!(roots.repo(), std::fs::canonicalize(dir.path()).unwrap());
        assert_eq!(
            roots
                .read_text(&dir.path().join("golden.conf"), "golden", MAX_FILE)
                .unwrap(),
            "ok\n"
        );
    }

    #[test]
    fn host_files_git_and_links_out_are_refused() {
        let (dir, roots) = repo();
        let err = roots.read(Path::new("/etc/passwd"), "golden", MAX_FILE).unwrap_err();
        assert!(
            err.contains("outside the scenario's repository") && err.contains("--allow-path"),
            "{err}"
        );
        let err = roots
            .read(&dir.path().join(".git/config"), "golden", MAX_FILE)
            .unwrap_err();
        assert!(err.contains(".git/"), "{err}");
        // A link in the repository to a host file is judged by where it leads.
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("nodejoin/passwd")).unwrap();
        let err = roots
            .read(&dir.path().join("nodejoin/passwd"), "golden", MAX_FILE)
            .unwrap_err();
        assert!(err.contains("it leads to /etc/passwd"), "{err}");
        let err = roots
            .check(&dir.path().join("nodejoin/passwd"), "image.overlay")
            .unwrap_err();
        assert!(err.contains("outside"), "{err}");
        // A directory the caller allows is let in.
        let mut allowed = roots.clone();
        allowed.allow(Path::new("/etc"));
        assert!(allowed.read(Path::new("/etc/passwd"), "golden", MAX_FILE).is_ok());
    }

    #[test]
    fn devices_fifos_and_large_files_are_not_read() {
        let (dir, mut roots) = repo();
        roots.allow(Path::new("/dev"));
        let err = roots.read(Path::new("/dev/zero"), "golden", MAX_FILE).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        let fifo = dir.path().join("pipe");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let err = roots.read(&fifo, "golden", MAX_FILE).unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::write(dir.path().join("big"), vec![b'x'; 2048]).unwrap();
        let err = roots.read(&dir.path().join("big"), "golden", 1024).unwrap_err();
        assert!(err.contains("larger than 1 KiB"), "{err}");
    }

    #[test]
    fn a_scenario_made_in_code_is_held_to_nothing() {
        assert!(Roots::default()
            .read(Path::new("/etc/passwd"), "golden", MAX_FILE)
            .is_ok());
    }
}
