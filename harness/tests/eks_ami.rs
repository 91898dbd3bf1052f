//! A regression in a user's amazon-eks-ami checkout is caught: a copy of the current checkout whose nodeadm
//! computes max-pods wrongly (ENIs × (IPs − 1) + 3 instead of + 2) makes the AL2023 scenario fail with the cause
//! quoted (capacity.pods 30, not 29), and `nodejoin compare` of the checkout against the patched copy shows the
//! difference on the Node and in the kubelet's config. The checkout is the snapshot in `../shared/upstream/`;
//! where it is absent (a user's clone) the trials are ignored with that reason, never passed.
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const SCENARIO: &str = "scenarios/al2023-terraform-mime.yaml";
/// The line of nodeadm's max-pods formula the mutation changes.
const FORMULA: &str = "instanceInfo.DefaultMaxENIs*(instanceInfo.Ipv4AddressesPerInterface-1) + 2";
const MUTATED: &str = "instanceInfo.DefaultMaxENIs*(instanceInfo.Ipv4AddressesPerInterface-1) + 3";

fn snapshot() -> PathBuf {
    nodejoin::paths::workspace_root().join("../shared/upstream/amazon-eks-ami-81fec2e8.tar.gz")
}

/// The checkout unpacked into `dir`, with nodeadm's max-pods formula changed.
fn patched_copy(dir: &Path) -> Result<PathBuf, Failed> {
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(snapshot())
        .arg("-C")
        .arg(dir)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if !status.success() {
        return Err(format!("tar -xzf {} failed: {status}", snapshot().display()).into());
    }
    let file = dir.join("nodeadm/internal/kubelet/eni_max_pods.go");
    let source = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    if !source.contains(FORMULA) {
        return Err(format!("{} no longer holds `{FORMULA}`: update the mutation", file.display()).into());
    }
    std::fs::write(&file, source.replace(FORMULA, MUTATED)).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(dir.to_path_buf())
}

fn nodejoin(args: &[&str]) -> Result<(Option<i32>, String, String), Failed> {
    let out = Command::new(env!("CARGO_BIN_EXE_nodejoin"))
        .current_dir(nodejoin::paths::workspace_root())
        .args(args)
        .output()
        .map_err(|e| format!("run nodejoin: {e}"))?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Result<(), Failed> {
    if ok {
        Ok(())
    } else {
        Err(what().into())
    }
}

/// `nodejoin run --eks-ami PATCHED`: FAILED (exit 1) with the max-pods check quoting 30.
fn run_fails_with_the_cause() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let patched = patched_copy(dir.path())?;
    let patched = patched.to_string_lossy();
    let (code, stdout, stderr) = nodejoin(&["run", "--eks-ami", &patched, "--format", "json", SCENARIO])?;
    ensure(code == Some(1), || {
        format!("exit {code:?}, not 1 (failed):\n{stdout}\n{stderr}")
    })?;
    let checks: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "check")
        .collect();
    let failed: Vec<&Value> = checks.iter().filter(|c| c["passed"] == false).collect();
    let max_pods = failed
        .iter()
        .find(|c| c["check"].as_str().is_some_and(|n| n.ends_with("/capacity.pods")));
    ensure(
        max_pods.is_some_and(|c| c["actual"].as_str().is_some_and(|a| a.contains("30"))),
        || format!("no failed capacity.pods check quoting 30 among {failed:#?}\n{stderr}"),
    )?;
    // The mutation changes max-pods and what derives from it, not whether the node joins.
    let unrelated: Vec<&&Value> = failed
        .iter()
        .filter(|c| !c["check"].as_str().is_some_and(|n| n.ends_with("/capacity.pods")))
        .collect();
    ensure(unrelated.is_empty(), || {
        format!("other checks failed too: {unrelated:#?}")
    })
}

/// `nodejoin compare --base eks-ami:SNAPSHOT --head eks-ami:PATCHED`: the Node's pods capacity and the kubelet's
/// maxPods differ, and the comparison says the head breaks a check.
fn compare_shows_it_on_the_node() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let patched = patched_copy(dir.path())?;
    let base = format!("eks-ami:{}", snapshot().display());
    let head = format!("eks-ami:{}", patched.display());
    let (code, stdout, stderr) = nodejoin(&[
        "compare", "--base", &base, "--head", &head, "--format", "json", SCENARIO,
    ])?;
    let v: Value = serde_json::from_str(&stdout).map_err(|e| format!("not JSON ({e}):\n{stdout}\n{stderr}"))?;
    ensure(code == Some(1), || {
        format!("exit {code:?}, not 1 (a broken check):\n{v:#}\n{stderr}")
    })?;
    let differences = v["differences"].as_array().cloned().unwrap_or_default();
    let has = |aspect: &str, key: &str| {
        differences
            .iter()
            .any(|d| d["aspect"] == aspect && d["key"].as_str() == Some(key))
    };
    ensure(has("node", "capacity.pods"), || {
        format!("no capacity.pods difference:\n{v:#}")
    })?;
    ensure(has("configz", "kubeletconfig.maxPods"), || {
        format!("no kubelet maxPods difference:\n{v:#}")
    })
}

fn main() {
    nodejoin::init_crypto();
    let args = Arguments::from_args();
    let absent = (!snapshot().is_file()).then(|| {
        format!(
            "[nodejoin] ignored: the amazon-eks-ami snapshot {} is absent (it is test data beside the project, not \
             part of it)",
            snapshot().display()
        )
    });
    let trials = [
        Trial::test(
            "eks-ami/patched-max-pods/run-fails-with-the-cause",
            run_fails_with_the_cause,
        ),
        Trial::test(
            "eks-ami/patched-max-pods/compare-shows-it-on-the-node",
            compare_shows_it_on_the_node,
        ),
    ]
    .into_iter()
    .map(|t| match &absent {
        Some(why) => {
            eprintln!("{why}");
            t.with_ignored_flag(true)
        }
        None => t,
    })
    .collect();
    libtest_mimic::run(&args, trials).exit();
}
