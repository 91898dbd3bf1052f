//! `nodejoin init`: a starter `nodejoin/` folder for a user's repository and a GitHub workflow that runs it
//! through nodejoin's action, for each kind of user: a bootstrap script (`--script`), an image's files
//! (`--overlay`), user data a producer rendered (`--user-data`: Karpenter's, Terraform's, eksctl's output saved to
//! a file), a producer's flavor (`--producer karpenter|eksctl|capa|eks-managed|terraform`: `producers`) and a fork
//! of amazon-eks-ami (`--eks-ami`). What it writes passes as written; nodes join with IAM, as EKS nodes do. The
//! texts are in `text`.
use crate::error::{Error, Result};
use std::path::{Component, Path, PathBuf};

pub mod producers;
mod text;

pub use producers::Producer;

/// The action the generated workflow uses (`uses:`): this repository pinned by the commit a release binary was
/// built from (`# vX.Y.Z` beside it), else at this version's tag, or `main` for a build between releases, which
/// `scaffold` notes is not pinned; `--action` overrides it (a fork, a commit).
pub fn default_action() -> String {
    match env!("NODEJOIN_ACTION_COMMIT") {
        "" => format!("{}@{}", repository_slug(), text::release_ref()),
        commit => format!("{}@{commit} # {}", repository_slug(), text::release_ref()),
    }
}

/// Whether `action` names a commit (`owner/name@<40 hex>`), as a workflow should (zizmor: unpinned-uses).
pub fn pinned(action: &str) -> bool {
    let r#ref = action.split('#').next().unwrap_or_default().trim();
    r#ref
        .rsplit_once('@')
        .is_some_and(|(_, r)| r.len() == 40 && r.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `owner/name` of nodejoin's repository (Cargo.toml's `repository`).
pub fn repository_slug() -> &'static str {
    env!("CARGO_PKG_REPOSITORY")
        .trim_start_matches("https://github.com/")
        .trim_end_matches('/')
}

/// What to scaffold.
#[derive(Debug, Clone, Default)]
pub struct InitOptions {
    /// The repository to write into.
    pub dir: PathBuf,
    /// The user's bootstrap script (a path in the repository), installed as /etc/eks/bootstrap.sh.
    pub script: Option<PathBuf>,
    /// A directory laid out like the node's root file system (e.g. `etc/eks/bootstrap.sh`), layered over the
    /// node image.
    pub overlay: Option<PathBuf>,
    /// User data a producer rendered for a real cluster, run as the node's user data (its endpoint and CA
    /// become the run's).
    pub user_data: Option<PathBuf>,
    /// An amazon-eks-ami tree (the repository itself, for a fork) whose nodeadm and AL2023 files the node runs.
    pub eks_ami: Option<PathBuf>,
    /// A producer whose user data the node boots with (its flavor, or a renderer for Terraform).
    pub producer: Option<Producer>,
    /// `uses:` of the generated workflow.
    pub action: String,
    /// Overwrite files that exist.
    pub force: bool,
}

/// Where the scenario goes, relative to the repository.
pub const SCENARIO: &str = "nodejoin/scenarios/join.yaml";
const README: &str = "nodejoin/README.md";
const WORKFLOW: &str = ".github/workflows/nodejoin.yml";
/// The scenario schema, beside the scenario that names it in its first line.
const SCHEMA: &str = "nodejoin/scenarios/nodejoin.schema.json";

/// The newest Kubernetes an AL2 bootstrap runs on: kubelet 1.35 removed `--pod-infra-container-image`, which the
/// AL2 AMI's bootstrap.sh passes (amazon-eks-ami retired AL2 at 1.34).
pub const LAST_AL2_KUBERNETES: &str = "v1.34.4";

/// The flag whose presence marks a bootstrap that kubelet 1.35 and later refuse.
const REMOVED_IN_1_35: &str = "--pod-infra-container-image";

/// What `scaffold` wrote, and what it chose for the user (one line each).
#[derive(Debug)]
pub struct Scaffolded {
    pub written: Vec<PathBuf>,
    pub notes: Vec<String>,
}

/// The Kubernetes version a bootstrap needs, and why: `LAST_AL2_KUBERNETES` for AL2 runtime files (an overlay
/// with its own `etc/eks/bootstrap.sh`: AL2023 has none, nodeadm bootstraps it) and for a script that passes the
/// kubelet flag 1.35 removed; else none (the default version).
fn version_for(script: Option<&Path>, overlay: Option<&Path>) -> Option<(&'static str, String)> {
    let why = if let Some(script) = script {
        let text = std::fs::read_to_string(script).ok()?;
        text.contains(REMOVED_IN_1_35).then(|| {
            format!(
                "{} passes {REMOVED_IN_1_35}, which kubelet 1.35 removed",
                script.display()
            )
        })?
    } else {
        let al2 = overlay?.join("etc/eks/bootstrap.sh");
        al2.is_file().then(|| {
            format!(
                "{} is AL2's bootstrap (AL2 images end at Kubernetes 1.34; its kubelet flags include {REMOVED_IN_1_35}, which 1.35 removed)",
                al2.display()
            )
        })?
    };
    Some((
        LAST_AL2_KUBERNETES,
        format!("{why}: the scenario runs Kubernetes {LAST_AL2_KUBERNETES}"),
    ))
}

/// Writes the starter files and returns their paths. Refuses, before writing anything, when one exists (unless
/// `force`), when a path given does not exist or lies outside `dir`, or when user data cannot be joined with.
pub fn scaffold(opts: &InitOptions) -> Result<Scaffolded> {
    let dir = std::path::absolute(&opts.dir).map_err(|e| Error::io(&opts.dir, e))?;
    if !dir.is_dir() {
        return Err(Error::Init(format!("{} is not a directory", dir.display())));
    }
    // One spelling for the repository and the files in it (symlinks resolved), so relative paths come out right.
    let dir = std::fs::canonicalize(&dir).map_err(|e| Error::io(&dir, e))?;
    let scenario_dir = dir
        .join(SCENARIO)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| dir.clone());
    let given = |p: &Option<PathBuf>, flag: &str, noun: &str, kind: fn(&Path) -> bool| match p {
        Some(p) => in_repo(&dir, p, flag, noun, kind).map(Some),
        None => Ok(None),
    };
    let script = given(&opts.script, "--script", "file", Path::is_file)?;
    let overlay = given(&opts.overlay, "--overlay", "directory", Path::is_dir)?;
    let user_data = given(&opts.user_data, "--user-data", "file", Path::is_file)?;
    let eks_ami = given(
        &opts.eks_ami,
        "--eks-ami",
        "amazon-eks-ami tree",
        crate::node::eks_ami::looks_like_checkout,
    )?;
    if (script.is_some() || overlay.is_some()) && (user_data.is_some() || eks_ami.is_some() || opts.producer.is_some())
    {
        return Err(Error::Init(
            "--script and --overlay bootstrap a node themselves; --user-data, --producer and --eks-ami bootstrap it \
             with nodeadm: give one kind"
                .into(),
        ));
    }
    if user_data.is_some() && opts.producer.is_some() {
        return Err(Error::Init(
            "--user-data is what a producer rendered, --producer renders it: give one".into(),
        ));
    }
    let rel = |p: &Option<PathBuf>| p.as_deref().map(|p| relative(&scenario_dir, p));
    let mut notes = Vec::new();
    let scenario = if let Some(p) = opts.producer {
        producers::scenario(p, rel(&eks_ami).as_deref())
    } else if let Some(file) = &user_data {
        let found = text::read_user_data(file)?;
        notes.extend(found.note);
        text::user_data_scenario(&text::UserDataScenario {
            file: rel(&user_data).unwrap_or_default(),
            eks_ami: rel(&eks_ami),
            facts: found.facts,
            labels: found.labels,
        })
    } else if eks_ami.is_some() {
        text::eks_ami_scenario(&rel(&eks_ami).unwrap_or_default())
    } else {
        let pin = version_for(script.as_deref(), overlay.as_deref());
        notes.extend(pin.as_ref().map(|(_, why)| why.clone()));
        text::bootstrap_scenario(rel(&script), rel(&overlay), pin.map(|(v, _)| v))
    };
    if !pinned(&opts.action) {
        notes.push(format!(
            "the workflow uses {}, not a commit: pin it (`--action OWNER/NAME@<commit>`), as zizmor's unpinned-uses asks",
            opts.action
        ));
    }
    let mut files = vec![
        (SCENARIO, scenario),
        (SCHEMA, crate::scenario::schema::text()),
        (README, text::readme(&opts.action)),
        (WORKFLOW, text::workflow(&opts.action)),
    ];
    if opts.producer == Some(Producer::Terraform) {
        files.push((producers::RENDERER, producers::renderer()));
    }
    if !opts.force {
        let existing: Vec<String> = files
            .iter()
            .map(|(p, _)| dir.join(p))
            .filter(|p| p.exists())
            .map(|p| p.display().to_string())
            .collect();
        if !existing.is_empty() {
            return Err(Error::Init(format!(
                "{} already exist{} (nothing was written; --force overwrites)",
                existing.join(", "),
                if existing.len() == 1 { "s" } else { "" }
            )));
        }
    }
    let mut written = Vec::new();
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        if rel.ends_with(".sh") {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(|e| Error::io(&path, e))?;
        }
        written.push(path);
    }
    Ok(Scaffolded { written, notes })
}

/// `p` (relative to the current directory, or absolute) as an absolute path inside `repo` that passes `kind`.
fn in_repo(repo: &Path, p: &Path, flag: &str, noun: &str, kind: fn(&Path) -> bool) -> Result<PathBuf> {
    let abs = std::path::absolute(p).map_err(|e| Error::io(p, e))?;
    let abs = std::fs::canonicalize(&abs).unwrap_or(abs);
    if !kind(&abs) {
        return Err(Error::Init(format!("{flag} {}: no such {noun}", abs.display())));
    }
    if !abs.starts_with(repo) {
        return Err(Error::Init(format!(
            "{flag} {} is outside {}: a scenario refers to files of its own repository",
            abs.display(),
            repo.display()
        )));
    }
    Ok(abs)
}

/// `to` relative to the directory `from` (both absolute, spelled alike), with `/` separators.
pub fn relative(from: &Path, to: &Path) -> String {
    let a: Vec<Component> = from.components().collect();
    let b: Vec<Component> = to.components().collect();
    let common = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".to_string(); a.len() - common];
    parts.extend(b[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if parts.is_empty() {
        return ".".into();
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository (its `.git` makes it one: a scenario reads files inside it).
    fn git_repo() -> tempfile::TempDir {
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir(repo.path().join(".git")).unwrap();
        repo
    }

    /// The action pinned by a commit, as a release binary's default is.
    const PINNED: &str = "nodejoin/nodejoin@0123456789abcdef0123456789abcdef01234567";

    fn opts(dir: &Path) -> InitOptions {
        InitOptions {
            dir: dir.to_path_buf(),
            action: format!("{PINNED} # v0.1.0"),
            ..Default::default()
        }
    }

    /// A workflow's action pinned by commit is taken as is; any other gets a note saying to pin it.
    #[test]
    fn an_action_not_pinned_by_commit_is_noted() {
        assert!(pinned(PINNED) && pinned(&format!("{PINNED} # v0.1.0")));
        assert!(!pinned("nodejoin/nodejoin@main") && !pinned("nodejoin/nodejoin@v0.1.0"));
        let repo = git_repo();
        let mut o = opts(repo.path());
        o.action = "nodejoin/nodejoin@main".into();
        let done = scaffold(&o).unwrap();
        assert!(done.notes.iter().any(|n| n.contains("pin it")), "{:?}", done.notes);
    }

    /// Each producer: its flavor's scenario, the workflow, and for Terraform the renderer its scenario runs,
    /// executable; a producer with a script is refused.
    #[test]
    fn a_producer_gets_its_flavor_and_terraform_a_renderer() {
        for p in Producer::ALL {
            let repo = git_repo();
            let mut o = opts(repo.path());
            o.producer = Some(p);
            let done = scaffold(&o).unwrap_or_else(|e| panic!("{}: {e}", p.name()));
            assert!(done.notes.is_empty(), "{:?}", done.notes);
            let sc = crate::scenario::load_file(&repo.path().join(SCENARIO), &Default::default()).unwrap();
            assert!(sc.nodes[0].user_data.is_some());
            let renderer = repo.path().join(producers::RENDERER);
            assert_eq!(renderer.is_file(), p == Producer::Terraform, "{}", p.name());
        }
        let repo = git_repo();
        let mut o = opts(repo.path());
        o.producer = Some(Producer::Karpenter);
        o.script = Some(repo.path().join("x.sh"));
        std::fs::write(repo.path().join("x.sh"), "#!/bin/sh\n").unwrap();
        assert!(scaffold(&o).is_err());
    }

    #[test]
    fn the_scenario_written_parses_and_points_at_the_users_script() {
        let repo = git_repo();
        let script = repo.path().join("scripts/bootstrap.sh");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        let mut o = opts(repo.path());
        o.script = Some(script.clone());
        let done = scaffold(&o).unwrap();
        assert_eq!(done.written.len(), 4);
        assert!(done.notes.is_empty(), "{:?}", done.notes);
        let text = std::fs::read_to_string(repo.path().join(SCENARIO)).unwrap();
        // The editor's schema: named in the first line, written beside the scenario, current.
        assert_eq!(
            text.lines().next(),
            Some("# yaml-language-server: $schema=nodejoin.schema.json")
        );
        let schema = std::fs::read_to_string(repo.path().join(SCHEMA)).unwrap();
        assert_eq!(schema, crate::scenario::schema::text());
        assert!(text.contains("script: ../../scripts/bootstrap.sh"), "{text}");
        let sc = crate::scenario::load_file(&repo.path().join(SCENARIO), &Default::default()).unwrap();
        let got = PathBuf::from(sc.nodes[0].bootstrap.script.as_deref().unwrap());
        assert_eq!(
            std::fs::canonicalize(got).unwrap(),
            std::fs::canonicalize(&script).unwrap()
        );
        let wf: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(repo.path().join(WORKFLOW)).unwrap()).unwrap();
        assert_eq!(wf["jobs"]["nodejoin"]["steps"][1]["uses"].as_str(), Some(PINNED));
    }

    #[test]
    fn without_a_script_the_reference_bootstrap_runs_and_an_overlay_is_layered() {
        let repo = git_repo();
        scaffold(&opts(repo.path())).unwrap();
        let sc = crate::scenario::load_file(&repo.path().join(SCENARIO), &Default::default()).unwrap();
        assert!(sc.nodes[0].bootstrap.script.is_none());
        assert!(sc.nodes[0].image.is_none());

        let repo = git_repo();
        std::fs::create_dir_all(repo.path().join("ami/etc/eks")).unwrap();
        let mut o = opts(repo.path());
        o.overlay = Some(repo.path().join("ami"));
        scaffold(&o).unwrap();
        let sc = crate::scenario::load_file(&repo.path().join(SCENARIO), &Default::default()).unwrap();
        let overlay = sc.nodes[0].image.as_ref().unwrap().overlay.as_deref().unwrap();
        assert!(Path::new(overlay).ends_with("ami"), "{overlay}");
        assert_eq!(sc.cluster.kubernetes_version, crate::scenario::model::default_version());
        // A script that does not pass the removed flag runs on the default version.
        let repo = git_repo();
        let script = repo.path().join("bootstrap.sh");
        std::fs::write(&script, "#!/bin/sh\nexec kubelet --node-ip=$IP\n").unwrap();
        let mut o = opts(repo.path());
        o.script = Some(script);
        assert!(scaffold(&o).unwrap().notes.is_empty());
    }

    /// AL2 runtime files (an overlay with etc/eks/bootstrap.sh, as the bundled AL2 layout) get the newest
    /// Kubernetes AL2 joins, and init says why.
    #[test]
    fn an_al2_bootstrap_gets_the_newest_kubernetes_it_joins() {
        let repo = git_repo();
        let ami = repo.path().join("ami");
        std::fs::create_dir_all(ami.join("etc/eks")).unwrap();
        let al2 = crate::paths::fixtures_dir(&crate::settings::for_tests()).join("ami-al2/etc/eks/bootstrap.sh");
        std::fs::copy(&al2, ami.join("etc/eks/bootstrap.sh")).unwrap();
        let mut o = opts(repo.path());
        o.overlay = Some(ami);
        let done = scaffold(&o).unwrap();
        let sc = crate::scenario::load_file(&repo.path().join(SCENARIO), &Default::default()).unwrap();
        assert_eq!(sc.cluster.kubernetes_version, LAST_AL2_KUBERNETES);
        assert_eq!(done.notes.len(), 1);
        assert!(
            done.notes[0].contains("--pod-infra-container-image"),
            "{:?}",
            done.notes
        );
    }

    const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0lCQURBTkJna3Foa2lHOXcwQkFRc0ZBREFWTVJNd0VRWURWUVFERXdwcmRXSmwK";

    /// Terraform's layout with a real cluster's values: the scenario names the file, keeps the cluster's name and
    /// service CIDR, expects its labels, and loads (its endpoint and CA become placeholders).
    #[test]
    fn rendered_user_data_gets_its_clusters_name_cidr_and_labels() {
        let repo = git_repo();
        let file = repo.path().join("rendered/al2023.mime");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        let text = std::fs::read_to_string(
            crate::paths::fixtures_dir(&crate::settings::for_tests()).join("user-data/al2023/terraform-mime.txt"),
        )
        .unwrap()
        .replace("{{cluster.name}}", "acme-prod")
        .replace(
            "{{cluster.endpoint}}",
            "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
        )
        .replace("{{cluster.caBase64}}", CA)
        .replace("{{cluster.serviceIpv4Cidr}}", "172.20.0.0/16");
        std::fs::write(&file, &text).unwrap();
        let mut o = opts(repo.path());
        o.user_data = Some(file);
        scaffold(&o).unwrap();
        let written = std::fs::read_to_string(repo.path().join(SCENARIO)).unwrap();
        assert!(
            written.contains("file: ../../rendered/al2023.mime\n") && written.contains("rendered: true"),
            "{written}"
        );
        let sc = crate::scenario::load_file(&repo.path().join(SCENARIO), &Default::default()).unwrap();
        assert_eq!(sc.cluster.name.as_deref(), Some("acme-prod"));
        assert_eq!(
            sc.cluster.service_ipv4_cidr.map(|c| c.to_string()).as_deref(),
            Some("172.20.0.0/16")
        );
        assert!(matches!(sc.cluster.auth, crate::scenario::model::AuthMode::Iam));
        assert!(sc.nodes[0].user_data.as_ref().unwrap().rendered);
        assert_eq!(
            sc.nodes[0].expect.labels.get("team").map(String::as_str),
            Some("platform")
        );

        // User data with nothing to point at this run is refused, and nothing is written.
        let repo = git_repo();
        let file = repo.path().join("ud.sh");
        std::fs::write(&file, "#!/bin/bash\necho hello\n").unwrap();
        let mut o = opts(repo.path());
        o.user_data = Some(file);
        let err = scaffold(&o).unwrap_err().to_string();
        assert!(err.contains("no API server endpoint"), "{err}");
        assert!(!repo.path().join(SCENARIO).exists());
    }

    /// A fork of amazon-eks-ami: the scenario names the tree itself.
    #[test]
    fn an_eks_ami_fork_runs_its_own_tree() {
        let repo = git_repo();
        std::fs::create_dir_all(repo.path().join("nodeadm")).unwrap();
        std::fs::write(
            repo.path().join("nodeadm/go.mod"),
            "module github.com/awslabs/amazon-eks-ami/nodeadm\n",
        )
        .unwrap();
        let mut o = opts(repo.path());
        o.eks_ami = Some(repo.path().to_path_buf());
        scaffold(&o).unwrap();
        let written = std::fs::read_to_string(repo.path().join(SCENARIO)).unwrap();
        assert!(written.contains("amazonEksAmi: ../..   #"), "{written}");
        let mut o = opts(repo.path());
        o.eks_ami = Some(repo.path().join("nodeadm/go.mod"));
        o.force = true;
        assert!(scaffold(&o)
            .unwrap_err()
            .to_string()
            .contains("no such amazon-eks-ami tree"));
        let mut o = opts(repo.path());
        o.eks_ami = Some(repo.path().to_path_buf());
        o.script = Some(repo.path().join("nodeadm/go.mod"));
        o.force = true;
        assert!(scaffold(&o).unwrap_err().to_string().contains("give one kind"));
    }

    #[test]
    fn existing_files_are_kept_unless_forced() {
        let repo = git_repo();
        let wf = repo.path().join(WORKFLOW);
        std::fs::create_dir_all(wf.parent().unwrap()).unwrap();
        std::fs::write(&wf, "mine").unwrap();
        let err = scaffold(&opts(repo.path())).unwrap_err().to_string();
        assert!(err.contains("already exists") && err.contains("--force"), "{err}");
        assert_eq!(std::fs::read_to_string(&wf).unwrap(), "mine");
        assert!(!repo.path().join(SCENARIO).exists(), "nothing written");
        let mut o = opts(repo.path());
        o.force = true;
        scaffold(&o).unwrap();
        assert_ne!(std::fs::read_to_string(&wf).unwrap(), "mine");
    }

    #[test]
    fn a_script_outside_the_repository_or_missing_is_refused() {
        let repo = git_repo();
        let elsewhere = tempfile::NamedTempFile::new().unwrap();
        let mut o = opts(repo.path());
        o.script = Some(elsewhere.path().to_path_buf());
        assert!(scaffold(&o).unwrap_err().to_string().contains("outside"));
        o.script = Some(repo.path().join("nope.sh"));
        assert!(scaffold(&o).unwrap_err().to_string().contains("no such file"));
    }

    #[test]
    fn relative_paths_climb_to_the_common_ancestor() {
        assert_eq!(
            relative(Path::new("/r/nodejoin/scenarios"), Path::new("/r/scripts/b.sh")),
            "../../scripts/b.sh"
        );
        assert_eq!(relative(Path::new("/r/a"), Path::new("/r/a/b")), "b");
    }
}
