//! `nodejoin init` for each kind of user, run for real: what it writes for a repository with an image's files
//! (`--overlay`, a custom AMI's files), with user data a producer rendered for a real cluster (`--user-data`: the
//! Terraform module's AL2023 MIME with a real-looking endpoint, CA, name and service CIDR), and for a fork of
//! amazon-eks-ami (`--eks-ami .`, the snapshot in `../shared/upstream/`; absent, that trial is ignored with the
//! reason, never passed), and for each producer (`--producer karpenter|eksctl|capa|eks-managed|terraform`: its
//! flavor, or for Terraform the renderer script `userData.command` runs, on the AMI's nodeadm at the pinned commit,
//! which the snapshot stands for here) must pass under `nodejoin run` as written. (`--script` runs in
//! tests/user_repo.rs, through the action's steps.)
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::Path;
use std::process::Command;

mod common;
use common::root;
use common::trials::eks_ami_snapshot as snapshot;

fn run(cmd: &mut Command) -> Result<String, Failed> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if out.status.success() {
        Ok(text)
    } else {
        Err(format!("{cmd:?} exited {}:\n{text}", out.status).into())
    }
}

/// A repository `fill` lays out, committed; `nodejoin init ARGS` in it, then its scenarios run. The written
/// scenario must pass; init's own notes are returned with the run's summary.
fn init_and_run(fill: impl FnOnce(&Path) -> Result<(), Failed>, init: &[&str]) -> Result<String, Failed> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).map_err(|e| e.to_string())?;
    fill(&repo)?;
    run(Command::new("git").args(["init", "-q"]).current_dir(&repo))?;
    let notes = run(common::nodejoin().arg("init").args(init).current_dir(&repo))?;
    let summary = tmp.path().join("summary.md");
    let out = common::nodejoin()
        .args(["run", "nodejoin/scenarios", "--markdown"])
        .arg(&summary)
        .current_dir(&repo)
        .output()
        .map_err(|e| e.to_string())?;
    let md = std::fs::read_to_string(&summary).unwrap_or_default();
    let log = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || !md.contains("✅ 1 passed, 0 failed") {
        let scenario = std::fs::read_to_string(repo.join("nodejoin/scenarios/join.yaml")).unwrap_or_default();
        return Err(format!("the scenario init wrote did not pass:\n{scenario}\n{md}\n{log}").into());
    }
    Ok(notes + &md)
}

/// A custom AMI's own files as an overlay (no bootstrap.sh of its own, as on AL2023: the bootstrap the scenario
/// calls is nodejoin's reference one, with the image's files in place).
fn overlay() -> Result<(), Failed> {
    init_and_run(
        |repo| {
            let etc = repo.join("ami/etc/eks");
            std::fs::create_dir_all(&etc).map_err(|e| e.to_string())?;
            std::fs::write(etc.join("acme-release"), "acme node image 2026.11\n").map_err(|e| e.to_string())?;
            Ok(())
        },
        &["--overlay", "ami"],
    )
    .map(|_| ())
}

/// The Terraform module's AL2023 user data as it renders it for a real cluster.
fn user_data() -> Result<(), Failed> {
    let ca = base64_of_a_pem();
    init_and_run(
        |repo| {
            let text = std::fs::read_to_string(root().join("fixtures/user-data/al2023/terraform-mime.txt"))
                .map_err(|e| e.to_string())?
                .replace("{{cluster.name}}", "acme-prod")
                .replace(
                    "{{cluster.endpoint}}",
                    "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com",
                )
                .replace("{{cluster.caBase64}}", &ca)
                .replace("{{cluster.serviceIpv4Cidr}}", "172.20.0.0/16");
            std::fs::create_dir_all(repo.join("rendered")).map_err(|e| e.to_string())?;
            std::fs::write(repo.join("rendered/workers.mime"), text).map_err(|e| e.to_string())?;
            Ok(())
        },
        &["--user-data", "rendered/workers.mime"],
    )
    .map(|_| ())
}

/// A CA bundle's base64 as EKS hands it out (any PEM: it is replaced by the run's).
fn base64_of_a_pem() -> String {
    use base64::Engine;
    let pem = "-----BEGIN CERTIFICATE-----\nMIIDBTCCAe2gAwIBAgIIZm9yLXRlc3RzMA0GCSqGSIb3DQEBCwUAMBUxEzARBgNVBAMTCmt1YmVybmV0ZXMw\n-----END CERTIFICATE-----\n";
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// A fork of amazon-eks-ami: the repository is the AMI's tree.
fn eks_ami() -> Result<(), Failed> {
    init_and_run(
        |repo| run(Command::new("tar").arg("-xzf").arg(snapshot()).arg("-C").arg(repo)).map(|_| ()),
        &["--eks-ami", "."],
    )
    .map(|_| ())
}

/// A repository whose nodes' user data `producer` writes.
fn producer(producer: &'static str) -> impl FnOnce() -> Result<(), Failed> {
    move || init_and_run(|_| Ok(()), &["--producer", producer]).map(|_| ())
}

fn main() {
    nodejoin::init_crypto();
    let args = Arguments::from_args();
    let absent = (!snapshot().is_file()).then(|| {
        format!(
            "[nodejoin] ignored: init/eks-ami needs the amazon-eks-ami snapshot {}, which is absent (test data beside \
             the project, not part of it)",
            snapshot().display()
        )
    });
    let mut eks = Trial::test("init/eks-ami", eks_ami);
    if let Some(why) = &absent {
        eprintln!("{why}");
        eks = eks.with_ignored_flag(true);
    }
    let mut trials = vec![
        Trial::test("init/overlay", overlay),
        Trial::test("init/user-data", user_data),
        eks,
    ];
    // The producers' scenarios pin the AMI's commit: its snapshot stands for it here (NODEJOIN_EKS_AMI, as
    // .ci/run sets it); without it they would fetch from GitHub, so they are ignored with the reason.
    let pinned = std::env::var_os("NODEJOIN_EKS_AMI").is_some();
    for p in nodejoin::init::Producer::ALL {
        let mut t = Trial::test(format!("init/producer-{}", p.name()), producer(p.name()));
        if !pinned {
            eprintln!(
                "[nodejoin] ignored: init/producer-{} runs the AMI's commit the scenario pins: NODEJOIN_EKS_AMI must \
                 name a copy of it (this machine cannot fetch it)",
                p.name()
            );
            t = t.with_ignored_flag(true);
        }
        trials.push(t);
    }
    libtest_mimic::run(&args, trials).exit();
}
