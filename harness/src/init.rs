//! `nodejoin init`: a starter `nodejoin/` folder for a user's repository (a scenario for their bootstrap script or
//! image overlay, a README stub) and a GitHub workflow that runs it through nodejoin's action. What it writes
//! passes as written: with no script given, the scenario runs our reference bootstrap, which takes the same
//! arguments as the EKS AMI's `bootstrap.sh`.
use crate::error::{Error, Result};
use std::path::{Component, Path, PathBuf};

/// The action the generated workflow uses (`uses:`); `--action` overrides it (a fork, a pinned tag or commit).
pub const DEFAULT_ACTION: &str = "nodejoin/nodejoin@main";

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

/// Writes the starter files and returns their paths. Refuses, before writing anything, when one exists (unless
/// `force`), when the script or overlay does not exist, or when it lies outside `dir`.
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
    let script = match &opts.script {
        Some(s) => Some(in_repo(&dir, s, "--script", "file", Path::is_file)?),
        None => None,
    };
    let overlay = match &opts.overlay {
        Some(o) => Some(in_repo(&dir, o, "--overlay", "directory", Path::is_dir)?),
        None => None,
    };
    let pin = version_for(script.as_deref(), overlay.as_deref());
    let files = [
        (
            SCENARIO,
            scenario_text(
                script.as_deref().map(|s| relative(&scenario_dir, s)),
                overlay.as_deref().map(|o| relative(&scenario_dir, o)),
                pin.as_ref().map(|(v, _)| *v),
            ),
        ),
        (SCHEMA, crate::scenario::schema::text()),
        (README, readme_text(&opts.action)),
        (WORKFLOW, workflow_text(&opts.action)),
    ];
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
        written.push(path);
    }
    Ok(Scaffolded {
        written,
        notes: pin.map(|(_, why)| why).into_iter().collect(),
    })
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
    parts.join("/")
}

fn scenario_text(script: Option<String>, overlay: Option<String>, version: Option<&str>) -> String {
    let version = match version {
        Some(v) => format!(
            "  kubernetesVersion: {v}   # the newest this bootstrap joins: kubelet 1.35 removed {REMOVED_IN_1_35}\n"
        ),
        None => String::new(),
    };
    let source = match (&script, &overlay) {
        (Some(s), _) => format!("      script: {s}                 # installed as /etc/eks/bootstrap.sh\n"),
        (None, Some(_)) => String::new(),
        (None, None) => "      # script: ../../path/to/your/bootstrap.sh   # yours, installed as /etc/eks/bootstrap.sh;\n      #                                           # left out, nodejoin's reference bootstrap runs\n".into(),
    };
    let image = match &overlay {
        Some(o) => format!(
            "    image: {{ overlay: {o} }}   # laid over the node image; its etc/eks/bootstrap.sh is the bootstrap\n"
        ),
        None => String::new(),
    };
    format!(
        r#"{modeline}
# A node bootstrapped the way an EKS AMI does it (`/etc/eks/bootstrap.sh CLUSTER --apiserver-endpoint ...`)
# joins a real control plane: TLS bootstrapping, registration under its PrivateDnsName, labels, max-pods and
# providerID. Paths are relative to this file. Run it: nodejoin run nodejoin/scenarios
description: a node bootstrapped by this repository's bootstrap joins the cluster
cluster:
  auth: bootstrap-token
{version}nodes:
  - name: worker
    instanceType: m5.large
    availabilityZone: us-west-2a
{image}    bootstrap:
{source}      args:
        - "{{{{cluster.name}}}}"
        - --apiserver-endpoint
        - "{{{{cluster.endpoint}}}}"
        - --b64-cluster-ca
        - "{{{{cluster.caBase64}}}}"
        - --kubelet-extra-args
        - --node-labels=nodejoin.io/scenario=join
    expect:
      within: 90s
      labels:
        nodejoin.io/scenario: join
        kubernetes.io/hostname: "{{{{instance.privateDnsName}}}}"
      capacityPods: 29          # m5.large: 3 ENIs x (10 - 1) + 2
      providerID: "aws:///{{{{instance.az}}}}/{{{{instance.id}}}}"
      clientCsr: issued
      servingCsr: issued
      servingCert: true
"#,
        modeline = crate::scenario::schema::modeline(crate::scenario::schema::FILE_NAME)
    )
}

fn readme_text(action: &str) -> String {
    format!(
        r#"# nodejoin scenarios

These scenarios boot node containers that run this repository's bootstrap for real against a real Kubernetes
control plane with fake EC2/EKS/IMDS APIs, and check what the cluster sees (CSRs, the Node's name, labels,
taints, max-pods, providerID, the kubelet's live config).

Run them (Linux, root, Docker; nodejoin prepares the rest on first use):

```sh
cargo install --locked --git <nodejoin repository> nodejoin
nodejoin run nodejoin/scenarios
```

See what a change does to a node, compared with main:

```sh
nodejoin compare --base git:main --head git:HEAD nodejoin/scenarios
```

Paths in a scenario (`bootstrap.script`, `image.overlay`, `userData.file`, golden files) are relative to the
scenario file. CI: `.github/workflows/nodejoin.yml` runs them with `{action}`.
"#
    )
}

fn workflow_text(action: &str) -> String {
    format!(
        r#"# Runs nodejoin's scenarios (nodejoin/scenarios) on every push and pull request: the bootstrap in this repository
# joins a real control plane in node containers. Written by `nodejoin init`.
name: nodejoin
on:
  push:
  pull_request:
permissions:
  contents: read
jobs:
  nodejoin:
    runs-on: ubuntu-24.04
    timeout-minutes: 60
    steps:
      - uses: actions/checkout@11d5960a326750d5838078e36cf38b85af677262 # v4.4.0
        with: {{ persist-credentials: false }}
      - uses: {action}
        with:
          scenarios: nodejoin/scenarios
          provider: local
"#
    )
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

    fn opts(dir: &Path) -> InitOptions {
        InitOptions {
            dir: dir.to_path_buf(),
            action: DEFAULT_ACTION.into(),
            ..Default::default()
        }
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
        assert_eq!(
            wf["jobs"]["nodejoin"]["steps"][1]["uses"].as_str(),
            Some(DEFAULT_ACTION)
        );
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
        let al2 = crate::paths::fixtures_dir().join("ami-al2/etc/eks/bootstrap.sh");
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
