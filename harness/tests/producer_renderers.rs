//! A producer's own renderer, tried as a user tries theirs: Karpenter's AL2023 user data rendered by Karpenter's
//! code (aws/karpenter-provider-aws v1.15.0 from the Go module proxy, called by `fixtures/producers/karpenter/
//! main.go`), built into a repository of the user's, run by nodejoin through `userData.command`, and the node joins
//! as Karpenter's EC2NodeClass and NodePool say. Nobody here wrote the user data: nodejoin's own `karpenter` flavor
//! is not involved.
//!
//! Ignored, with the reason, where the AL2023 node cannot be had (the amazon-eks-ami snapshot beside the project is
//! absent) or where no Go toolchain is installed; a build that fails is a failure, quoting go's last lines.
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::Path;
use std::process::Command;

mod common;
use common::trials::{eks_ami_snapshot as snapshot, ensure, Events};

/// The renderer's sources, manifests and scenario, copied whole into the user's repository.
const FIXTURE: &str = "fixtures/producers/karpenter";
const FILES: [&str; 6] = [
    "main.go",
    "go.mod",
    "go.sum",
    "ec2nodeclass.yaml",
    "nodepool.yaml",
    "karpenter-renderer.yaml",
];

/// `go build` of the renderer in `repo` into `repo/bin/`, as the scenario's comment tells a user to; with the
/// toolchain setting nodejoin's own Go builds use (the go.mod's `toolchain` line is fetched where the installed Go
/// is older), static, and with no workspace or GOFLAGS from the caller.
fn build(repo: &Path) -> Result<(), Failed> {
    let toolchain = nodejoin::assets::toolchain_setting(nodejoin::assets::local_go_version().as_deref());
    let out = Command::new("go")
        .args(["build", "-trimpath", "-o", "bin/karpenter-userdata", "."])
        .current_dir(repo)
        .env("GOTOOLCHAIN", toolchain)
        .env("CGO_ENABLED", "0")
        .env("GOWORK", "off")
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .map_err(|e| format!("go build: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(15).collect();
    ensure(out.status.success(), || {
        format!(
            "go build of Karpenter's renderer failed ({}):\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    })
}

/// The renderer built in a fresh repository and its scenario run: it passes, every check with it.
fn karpenter_renderer_joins() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let repo = dir.path().join("karpenter-fork");
    std::fs::create_dir_all(&repo).map_err(|e| e.to_string())?;
    let source = common::root().join(FIXTURE);
    for f in FILES {
        std::fs::copy(source.join(f), repo.join(f)).map_err(|e| format!("copy {f}: {e}"))?;
    }
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&repo)
        .status()
        .map_err(|e| format!("git init: {e}"))?;
    ensure(init.success(), || format!("git init: {init}"))?;
    build(&repo)?;

    let scenario = repo.join("karpenter-renderer.yaml");
    let out = common::nodejoin()
        .args(["run", "--format", "json", "--eks-ami"])
        .arg(snapshot())
        .arg(&scenario)
        .output()
        .map_err(|e| format!("run nodejoin: {e}"))?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let events = Events::parse(&stdout);
    let failed = events.failed_checks();
    ensure(out.status.code() == Some(0) && failed.is_empty(), || {
        format!("exit {:?}; failed checks: {failed:#?}\n{stderr}", out.status.code())
    })?;
    // Passed with its checks: the labels, the three taints, maxPods and reservations from the EC2NodeClass, and the
    // EC2NodeClass's own shell part having run.
    ensure(events.passed_with(10) == 1, || {
        format!("the scenario did not pass with its checks:\n{stdout}\n{stderr}")
    })
}

fn main() {
    nodejoin::init_crypto();
    let args = Arguments::from_args();
    let why = if !snapshot().is_file() {
        Some(format!(
            "the amazon-eks-ami snapshot {} is absent (it is test data beside the project, not part of it)",
            snapshot().display()
        ))
    } else if nodejoin::assets::local_go_version().is_none() {
        Some("no Go toolchain (`go`) is installed to build the producer's renderer".to_string())
    } else {
        None
    };
    let trial = Trial::test("producers/karpenter/own-renderer-joins", karpenter_renderer_joins);
    let trial = match why {
        Some(why) => {
            eprintln!("[nodejoin] ignored: {why}");
            trial.with_ignored_flag(true)
        }
        None => trial,
    };
    libtest_mimic::run(&args, vec![trial]).exit();
}
