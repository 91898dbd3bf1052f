//! One side of `nodejoin compare`: which version of the bootstrap the scenarios run with. A side replaces what
//! the scenarios name (their script, overlay, image or user-data file) or takes the scenarios, and every file
//! they refer to, from a git revision of the user's repository (paths are relative to the scenario file, so a
//! worktree at another revision brings its own script, overlay and user data along).
use crate::scenario::model::{GroupImage, Scenario};
use std::path::{Path, PathBuf};

/// A version of the bootstrap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variant {
    /// The scenarios as they are written, in the working tree.
    AsWritten,
    /// `script:FILE`: every node group's harness-run bootstrap is FILE.
    Script(PathBuf),
    /// `overlay:DIR`: every harness-run node group gets DIR over the node image (its `etc/eks/bootstrap.sh`, if
    /// any, is the bootstrap).
    Overlay(PathBuf),
    /// `image:TAG`: every harness-run node group runs in this local image.
    Image(String),
    /// `user-data:FILE`: every node group whose user data is a file gets FILE instead.
    UserData(PathBuf),
    /// `eks-ami:PATH`: every node group built from an amazon-eks-ami checkout (`image.amazonEksAmi`) is built
    /// from PATH instead (a checkout, its `nodeadm/`, or a `.tar.gz` of one).
    EksAmi(PathBuf),
    /// `git:REV`: the scenarios and everything they refer to, as of REV.
    Git(String),
}

/// What `--base`/`--head` accept, for errors and help.
pub const FORMS: &str =
    "script:FILE, overlay:DIR, image:TAG, user-data:FILE, eks-ami:PATH, git:REV, a file (script) or \
     directory (overlay), or `as-written`";

impl Variant {
    /// Parses a side; paths are taken relative to the current directory and must exist.
    pub fn parse(s: &str) -> Result<Self, String> {
        let path = |p: &str, dir: bool| -> Result<PathBuf, String> {
            let abs = std::path::absolute(p).map_err(|e| format!("{p}: {e}"))?;
            let ok = if dir { abs.is_dir() } else { abs.is_file() };
            if ok {
                Ok(abs)
            } else {
                Err(format!(
                    "{}: no such {}",
                    abs.display(),
                    if dir { "directory" } else { "file" }
                ))
            }
        };
        match s.split_once(':') {
            Some(("script", p)) => path(p, false).map(Variant::Script),
            Some(("overlay", p)) => path(p, true).map(Variant::Overlay),
            Some(("user-data", p)) => path(p, false).map(Variant::UserData),
            Some(("eks-ami", p)) => {
                let abs = std::path::absolute(p).map_err(|e| format!("{p}: {e}"))?;
                if abs.exists() {
                    Ok(Variant::EksAmi(abs))
                } else {
                    Err(format!("{}: no such checkout", abs.display()))
                }
            }
            Some(("image", t)) if !t.trim().is_empty() => Ok(Variant::Image(t.trim().to_string())),
            Some(("git", r)) if !r.trim().is_empty() => Ok(Variant::Git(r.trim().to_string())),
            _ if s == "as-written" || s.is_empty() => Ok(Variant::AsWritten),
            _ if Path::new(s).is_file() => path(s, false).map(Variant::Script),
            _ if Path::new(s).is_dir() => path(s, true).map(Variant::Overlay),
            _ => Err(format!("'{s}' is none of {FORMS}")),
        }
    }

    /// One line for the report: `script /repo/new.sh`.
    pub fn describe(&self) -> String {
        match self {
            Variant::AsWritten => "the scenarios as written".into(),
            Variant::Script(p) => format!("script {}", p.display()),
            Variant::Overlay(p) => format!("overlay {}", p.display()),
            Variant::Image(t) => format!("image {t}"),
            Variant::UserData(p) => format!("user data {}", p.display()),
            Variant::EksAmi(p) => format!("amazon-eks-ami {}", p.display()),
            Variant::Git(r) => format!("git revision {r}"),
        }
    }

    /// Puts this version into `sc`; an error when it applies to none of its node groups (comparing would show
    /// nothing but the same run twice).
    pub fn apply(&self, sc: &mut Scenario) -> Result<(), String> {
        // A side named on the command line is the caller's to read, wherever it is.
        if let Variant::Script(p) | Variant::Overlay(p) | Variant::UserData(p) | Variant::EksAmi(p) = self {
            sc.roots.allow(p);
        }
        let mut applied = 0;
        for g in &mut sc.nodes {
            let harness_run = g.user_data.is_none();
            match self {
                Variant::AsWritten | Variant::Git(_) => applied += 1,
                Variant::Script(p) if harness_run => {
                    g.bootstrap.script = Some(p.to_string_lossy().into_owned());
                    applied += 1;
                }
                Variant::Overlay(p) if harness_run => {
                    g.image = Some(GroupImage {
                        overlay: Some(p.to_string_lossy().into_owned()),
                        ..Default::default()
                    });
                    g.bootstrap.script = None;
                    applied += 1;
                }
                Variant::Image(t) if harness_run => {
                    g.image = Some(GroupImage {
                        tag: Some(t.clone()),
                        ..Default::default()
                    });
                    g.bootstrap.script = None;
                    applied += 1;
                }
                Variant::UserData(p) => {
                    if let Some(ud) = g.user_data.as_mut().filter(|u| u.file.is_some()) {
                        ud.file = Some(p.to_string_lossy().into_owned());
                        applied += 1;
                    }
                }
                Variant::EksAmi(p) => {
                    if let Some(img) = g.image.as_mut().filter(|i| i.amazon_eks_ami.is_some()) {
                        img.amazon_eks_ami = Some(crate::scenario::model::AmazonEksAmi::Path(
                            p.to_string_lossy().into_owned(),
                        ));
                        applied += 1;
                    }
                }
                _ => {}
            }
        }
        if applied == 0 {
            return Err(format!(
                "{} applies to none of scenario {}'s node groups ({})",
                self.describe(),
                sc.name,
                match self {
                    Variant::UserData(_) => "none has a userData.file",
                    Variant::EksAmi(_) => "none has an image.amazonEksAmi",
                    _ => "they all boot from user data",
                }
            ));
        }
        Ok(())
    }
}

/// A git worktree of the user's repository at a revision, removed when dropped.
pub struct Worktree {
    repo: PathBuf,
    dir: tempfile::TempDir,
}

impl Worktree {
    /// Checks `rev` out into a temporary worktree of the repository holding `paths`, and maps each path into it.
    pub fn checkout(
        settings: &crate::settings::Settings,
        rev: &str,
        paths: &[PathBuf],
    ) -> Result<(Self, Vec<PathBuf>), String> {
        let first = paths.first().ok_or("no scenario paths")?;
        let abs_first = std::path::absolute(first).map_err(|e| e.to_string())?;
        let start = if abs_first.is_dir() {
            abs_first.clone()
        } else {
            abs_first.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        let top = git(&start, &["rev-parse", "--show-toplevel"])?;
        let repo = PathBuf::from(top.trim());
        let repo = std::fs::canonicalize(&repo).unwrap_or(repo);
        // A work directory named after this process, with the repository it belongs to written first: however
        // this process ends, the next start-up (or a signal's exit) removes it and prunes its registration.
        let scratch = crate::paths::scratch_root(settings);
        std::fs::create_dir_all(&scratch).map_err(|e| format!("{}: {e}", scratch.display()))?;
        let dir = tempfile::Builder::new()
            .prefix(&crate::paths::owned_prefix("compare"))
            .tempdir_in(&scratch)
            .map_err(|e| format!("a directory for the worktree: {e}"))?;
        let marker = dir.path().join(crate::reaper::WORKTREE_REPO_FILE);
        std::fs::write(&marker, repo.to_string_lossy().as_bytes()).map_err(|e| format!("{}: {e}", marker.display()))?;
        let wt = dir.path().join("tree");
        let wt_arg = wt.to_string_lossy().into_owned();
        git(&repo, &["worktree", "add", "--detach", "--quiet", &wt_arg, rev])
            .map_err(|e| format!("git revision {rev}: {e}"))?;
        let tree = Worktree {
            repo: repo.clone(),
            dir,
        };
        let mut mapped = Vec::new();
        for p in paths {
            let abs = std::path::absolute(p).map_err(|e| e.to_string())?;
            let abs = std::fs::canonicalize(&abs).unwrap_or(abs);
            let rel = abs
                .strip_prefix(&repo)
                .map_err(|_| format!("{} is outside the git repository {}", abs.display(), repo.display()))?;
            let there = wt.join(rel);
            if !there.exists() {
                return Err(format!("{} does not exist at git revision {rev}", rel.display()));
            }
            mapped.push(there);
        }
        Ok((tree, mapped))
    }

    /// The worktree's root (what `{{repo}}` stands for in its reports).
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("tree")
    }

    /// The repository the worktree belongs to.
    pub fn repo(&self) -> &Path {
        &self.repo
    }
}

impl Drop for Worktree {
    fn drop(&mut self) {
        let root = self.root().to_string_lossy().into_owned();
        if let Err(e) = git(&self.repo, &["worktree", "remove", "--force", &root]) {
            tracing::warn!("removing the compare worktree {root}: {e}");
        }
        let _ = git(&self.repo, &["worktree", "prune"]);
    }
}

/// Runs git in `dir`; its stdout, or its stderr as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = crate::deadline::output_blocking(
        crate::process::git().arg("-C").arg(dir).args(args),
        &format!("git {}", args.join(" ")),
        crate::deadline::GIT,
    )
    .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(yaml: &str) -> Scenario {
        crate::scenario::load::parse(yaml, Path::new("/tmp/x.yaml")).unwrap()
    }

    const HARNESS_RUN: &str = "nodes:\n  - name: w\n    expect: { within: 30s }\n";

    #[test]
    fn sides_parse_by_prefix_and_by_what_the_path_is() {
        let f = tempfile::NamedTempFile::new().unwrap();
        let d = tempfile::tempdir().unwrap();
        let fp = f.path().to_string_lossy().into_owned();
        let dp = d.path().to_string_lossy().into_owned();
        assert_eq!(
            Variant::parse(&format!("script:{fp}")).unwrap(),
            Variant::Script(f.path().into())
        );
        assert_eq!(Variant::parse(&fp).unwrap(), Variant::Script(f.path().into()));
        assert_eq!(Variant::parse(&dp).unwrap(), Variant::Overlay(d.path().into()));
        assert_eq!(
            Variant::parse("image:my/node:1").unwrap(),
            Variant::Image("my/node:1".into())
        );
        assert_eq!(Variant::parse("git:main").unwrap(), Variant::Git("main".into()));
        assert_eq!(Variant::parse("as-written").unwrap(), Variant::AsWritten);
        assert!(Variant::parse("script:/nope/x.sh")
            .unwrap_err()
            .contains("no such file"));
        assert!(Variant::parse("overlay:/nope")
            .unwrap_err()
            .contains("no such directory"));
        assert!(Variant::parse("nonsense").unwrap_err().contains("script:FILE"));
    }

    #[test]
    fn a_script_replaces_the_bootstrap_and_an_overlay_the_image() {
        let mut sc = scenario(HARNESS_RUN);
        Variant::Script("/x/b.sh".into()).apply(&mut sc).unwrap();
        assert_eq!(sc.nodes[0].bootstrap.script.as_deref(), Some("/x/b.sh"));
        Variant::Overlay("/x/ami".into()).apply(&mut sc).unwrap();
        assert_eq!(sc.nodes[0].bootstrap.script, None);
        assert_eq!(sc.nodes[0].image.as_ref().unwrap().overlay.as_deref(), Some("/x/ami"));
        let err = Variant::UserData("/x/ud".into()).apply(&mut sc).unwrap_err();
        assert!(err.contains("userData.file"), "{err}");
    }

    #[test]
    fn a_git_revision_is_checked_out_with_the_files_the_scenarios_name() {
        let repo = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| git(repo.path(), args).unwrap();
        run(&["init", "--quiet"]);
        run(&["config", "user.email", "t@example.invalid"]);
        run(&["config", "user.name", "t"]);
        std::fs::create_dir_all(repo.path().join("nodejoin")).unwrap();
        std::fs::write(repo.path().join("nodejoin/a.yaml"), "old").unwrap();
        run(&["add", "."]);
        run(&["commit", "--quiet", "-m", "one"]);
        std::fs::write(repo.path().join("nodejoin/a.yaml"), "new").unwrap();
        let root;
        {
            let (wt, mapped) =
                Worktree::checkout(&crate::settings::for_tests(), "HEAD", &[repo.path().join("nodejoin")]).unwrap();
            root = wt.root();
            assert_eq!(std::fs::read_to_string(mapped[0].join("a.yaml")).unwrap(), "old");
            assert!(Worktree::checkout(
                &crate::settings::for_tests(),
                "no-such-rev",
                &[repo.path().join("nodejoin")]
            )
            .is_err());
        }
        assert!(!root.exists(), "the worktree is removed when dropped");
        assert!(!git(repo.path(), &["worktree", "list"])
            .unwrap()
            .contains("nodejoin-compare-"));
    }
}
