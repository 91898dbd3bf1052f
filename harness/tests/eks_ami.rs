//! amazon-eks-ami as its users change it, from the snapshot in `../shared/upstream/` (where it is absent, a user's
//! clone, the trials are ignored with that reason, never passed):
//! - a regression is caught: a copy of the checkout whose nodeadm computes max-pods wrongly (ENIs × (IPs − 1) + 3
//!   instead of + 2) makes the AL2023 scenario fail with the cause quoted (capacity.pods 30, not 29), and
//!   `nodejoin compare` of the checkout against the patched copy shows the difference on the Node and in the
//!   kubelet's config;
//! - user data nobody here wrote joins: the NodeConfig user data of nodeadm's own end-to-end cases (MIME with two
//!   NodeConfig parts and a shell part; flags with InstanceIdNodeName), with only the cluster's name, endpoint, CA
//!   and service CIDR replaced by this cluster's, runs through current nodeadm and the node joins as it says.
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::trials::{eks_ami_snapshot as snapshot, ensure, Events};

const SCENARIO: &str = "scenarios/al2023-terraform-mime.yaml";
/// The line of nodeadm's max-pods formula the mutation changes.
const FORMULA: &str = "instanceInfo.DefaultMaxENIs*(instanceInfo.Ipv4AddressesPerInterface-1) + 2";
const MUTATED: &str = "instanceInfo.DefaultMaxENIs*(instanceInfo.Ipv4AddressesPerInterface-1) + 3";

/// The snapshot unpacked into `dir`.
fn unpack_snapshot(dir: &Path) -> Result<(), Failed> {
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(snapshot())
        .arg("-C")
        .arg(dir)
        .status()
        .map_err(|e| format!("tar: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("tar -xzf {} failed: {status}", snapshot().display()).into())
    }
}

/// The checkout unpacked into `dir`, with nodeadm's max-pods formula changed.
fn patched_copy(dir: &Path) -> Result<PathBuf, Failed> {
    unpack_snapshot(dir)?;
    let file = dir.join("nodeadm/internal/kubelet/eni_max_pods.go");
    let source = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    if !source.contains(FORMULA) {
        return Err(format!("{} no longer holds `{FORMULA}`: update the mutation", file.display()).into());
    }
    std::fs::write(&file, source.replace(FORMULA, MUTATED)).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(dir.to_path_buf())
}

fn nodejoin(args: &[&str]) -> Result<(Option<i32>, String, String), Failed> {
    let out = common::nodejoin()
        // Each trial names its own trees; a run's override (`.ci/run` sets one) would replace them.
        .env_remove(nodejoin::scenario::model::ENV_EKS_AMI)
        .args(args)
        .output()
        .map_err(|e| format!("run nodejoin: {e}"))?;
    Ok((
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// `nodejoin run --eks-ami PATCHED`: FAILED (exit 100) with the max-pods check quoting 30.
fn run_fails_with_the_cause() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let patched = patched_copy(dir.path())?;
    let patched = patched.to_string_lossy();
    let (code, stdout, stderr) = nodejoin(&["run", "--eks-ami", &patched, "--format", "json", SCENARIO])?;
    ensure(code == Some(100), || {
        format!("exit {code:?}, not 100 (failed):\n{stdout}\n{stderr}")
    })?;
    let events = Events::parse(&stdout);
    let failed = events.failed_checks();
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

/// nodeadm's own e2e user data (`nodeadm/test/e2e/cases/<case>/config.yaml`) with the four cluster values it
/// names (a placeholder cluster: `my-cluster`, `https://example.com`, ...) replaced by this cluster's placeholders;
/// every other byte as written.
fn e2e_user_data(checkout: &Path, case: &str) -> Result<String, Failed> {
    let file = checkout.join(format!("nodeadm/test/e2e/cases/{case}/config.yaml"));
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    // The key of each line to replace and this cluster's placeholder for it (`name` only as the cluster's).
    const CLUSTER: [(&str, &str); 4] = [
        ("apiServerEndpoint", "{{cluster.endpoint}}"),
        ("certificateAuthority", "{{cluster.caBase64}}"),
        ("cidr", "{{cluster.serviceIpv4Cidr}}"),
        ("name", "{{cluster.name}}"),
    ];
    let mut out = String::new();
    let mut replaced = 0;
    for line in text.lines() {
        let (indent, rest) = line.split_at(line.len() - line.trim_start().len());
        let value = |key: &str| rest.strip_prefix(key)?.strip_prefix(':').map(str::trim);
        let hit = CLUSTER
            .iter()
            .find(|(key, _)| value(key).is_some_and(|v| *key != "name" || v == "my-cluster"));
        match hit {
            Some((key, placeholder)) => {
                replaced += 1;
                out.push_str(&format!("{indent}{key}: {placeholder}\n"));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    if replaced != 4 {
        return Err(format!("{}: expected the 4 cluster values, replaced {replaced}", file.display()).into());
    }
    Ok(out)
}

/// Two of nodeadm's e2e cases as a user's scenarios: both join, with what their NodeConfig says.
fn upstream_user_data_joins() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let checkout = dir.path().join("amazon-eks-ami");
    std::fs::create_dir_all(&checkout).map_err(|e| e.to_string())?;
    unpack_snapshot(&checkout)?;
    let write = |name: &str, text: &str| -> Result<PathBuf, Failed> {
        let p = dir.path().join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(p)
    };
    write("merge.mime", &e2e_user_data(&checkout, "mime-userdata-merge")?)?;
    write("flags.yaml", &e2e_user_data(&checkout, "kubelet-flags")?)?;
    let eks_ami = snapshot().display().to_string();
    // mime-userdata-merge: maxPods 58 and clusterDNS 1.1.1.1 from the first part, systemReserved from the second,
    // a shell part cloud-init runs.
    let merge = write(
        "upstream-mime-userdata-merge.yaml",
        &r#"description: nodeadm's own e2e MIME user data (two NodeConfig parts and a shell part) joins
cluster: { auth: iam, providers: [local] }
nodes:
  - name: merge
    image: { amazonEksAmi: EKS_AMI }
    userData: { file: merge.mime }
    expect:
      within: 150s
      clientCsr: none
      servingCsr: issued
      capacityPods: 58
      clusterDNS: ["1.1.1.1"]
      nodeadm: succeeded
      files:
        - path: /etc/kubernetes/kubelet/config.json.d/40-nodeadm.conf
          values: { systemReserved.cpu: 150m }
        - path: /var/log/cloud-init-output.log
          contains: ["hello!"]
"#
        .replace("EKS_AMI", &eks_ami),
    )?;
    // kubelet-flags: InstanceIdNodeName names the node after its instance id (mapped as EKS maps such nodes), with
    // the labels and taint of its flags.
    let flags = write(
        "upstream-kubelet-flags.yaml",
        &r#"description: nodeadm's own e2e NodeConfig with InstanceIdNodeName and kubelet flags joins
cluster: { auth: iam, providers: [local] }
nodes:
  - name: flags
    image: { amazonEksAmi: EKS_AMI }
    userData: { file: flags.yaml }
    roleMapping: { username: "system:node:{{SessionName}}" }
    expect:
      within: 150s
      clientCsr: none
      nodeName: "{{instance.id}}"
      labels: { foo: bar, foo2: baz }
      taints: [{ key: foo, value: bar, effect: NoSchedule }]
      nodeadm: succeeded
"#
        .replace("EKS_AMI", &eks_ami),
    )?;
    let (merge, flags) = (merge.to_string_lossy(), flags.to_string_lossy());
    let (code, stdout, stderr) = nodejoin(&["run", "--format", "json", &merge, &flags])?;
    let events = Events::parse(&stdout);
    let failed = events.failed_checks();
    ensure(code == Some(0) && failed.is_empty(), || {
        format!("exit {code:?}; failed checks: {failed:#?}\n{stderr}")
    })?;
    // Both ran and passed with their checks.
    ensure(events.passed_with(8) == 2, || {
        format!("not both passed with their checks:\n{stdout}\n{stderr}")
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
    ensure(code == Some(100), || {
        format!("exit {code:?}, not 100 (a broken check):\n{v:#}\n{stderr}")
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

/// A repository served by `git daemon` on a free local port, killed on drop.
struct Served {
    daemon: std::process::Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.daemon.kill();
        let _ = self.daemon.wait();
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String, Failed> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        // A fixed date, so the commit (and the cache entry it names) is the same on every run.
        .env("GIT_AUTHOR_DATE", "2026-07-23T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-07-23T00:00:00Z")
        .output()
        .map_err(|e| format!("git: {e}"))?;
    ensure(out.status.success(), || {
        format!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr))
    })?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The repositories under `base` served read-only on 127.0.0.1 (any commit may be fetched by its id, as GitHub
/// allows).
fn serve(base: &Path) -> Result<Served, Failed> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let exec_path = git(base, &["--exec-path"])?;
    let daemon = Command::new(Path::new(&exec_path).join("git-daemon"))
        .args(["--export-all", "--listen=127.0.0.1", &format!("--port={port}")])
        .arg(format!("--base-path={}", base.display()))
        .arg(base)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("git-daemon: {e}"))?;
    let served = Served {
        daemon,
        url: format!("git://127.0.0.1:{port}/amazon-eks-ami"),
    };
    let up = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        ensure(up.elapsed().as_secs() < 10, || "git daemon did not listen".into())?;
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Ok(served)
}

/// A scenario file in `dir` whose one AL2023 node names amazon-eks-ami by `url` and `rev`.
fn pinned_scenario(dir: &Path, url: &str, rev: &str) -> Result<String, Failed> {
    let text = format!(
        "description: an amazon-eks-ami commit named by git joins\n\
         cluster: {{ auth: iam, providers: [local] }}\n\
         nodes:\n  - name: pinned\n    image:\n      amazonEksAmi: {{ git: \"{url}\", rev: \"{rev}\" }}\n\
         \x20   userData: {{ nodeadm: {{}} }}\n\
         \x20   expect: {{ within: 150s, clientCsr: none, capacityPods: 29, nodeadm: succeeded }}\n"
    );
    let file = dir.join("pinned.yaml");
    std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(file.to_string_lossy().into_owned())
}

/// `amazonEksAmi: { git, rev }` as a new user writes it: the commit is fetched (shallow, from a local `git daemon`
/// standing in for GitHub), the node joins on it, and with the repository gone a later run finds it in the cache.
fn pinned_commit_is_fetched_and_joins() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let repo = dir.path().join("served/amazon-eks-ami");
    std::fs::create_dir_all(&repo).map_err(|e| e.to_string())?;
    unpack_snapshot(&repo)?;
    git(&repo, &["init", "-q"])?;
    git(&repo, &["add", "-A"])?;
    git(
        &repo,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "-m",
            "snapshot",
        ],
    )?;
    git(&repo, &["config", "uploadpack.allowAnySHA1InWant", "true"])?;
    let rev = git(&repo, &["rev-parse", "HEAD"])?;
    // This commit is this test's own: start without it in the cache, so the fetch is what is tested.
    let cached = nodejoin::node::eks_ami_git::cached(&nodejoin::paths::cache_dir(&common::settings()), &rev);
    let _ = std::fs::remove_dir_all(&cached);
    let served = serve(&dir.path().join("served"))?;
    let scenario = pinned_scenario(dir.path(), &served.url, &rev)?;
    let (code, stdout, stderr) = nodejoin(&["run", "--format", "json", &scenario])?;
    ensure(stderr.contains("fetching amazon-eks-ami"), || {
        format!("no fetch announced:\n{stderr}")
    })?;
    let passed = Events::parse(&stdout).passed_with(4) == 1;
    ensure(code == Some(0) && passed, || {
        format!("exit {code:?}, not passed:\n{stdout}\n{stderr}")
    })?;
    ensure(cached.join("nodeadm/go.mod").is_file(), || {
        format!("nothing cached at {}", cached.display())
    })?;
    // The repository gone: the cached commit still applies (listed, not ignored), and nothing is fetched.
    drop(served);
    let (code, stdout, stderr) = nodejoin(&["list", &scenario])?;
    ensure(
        code == Some(0)
            && !stderr.contains("fetching")
            && !format!("{stdout}{stderr}").contains("could not be fetched"),
        || format!("exit {code:?}:\n{stdout}\n{stderr}"),
    )
}

/// A pinned commit that cannot be fetched (nothing answers) makes the scenario ignored with git's reason and the
/// fix, never an error and never a pass.
fn unreachable_pin_is_ignored_with_the_fix() -> Result<(), Failed> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let scenario = pinned_scenario(dir.path(), "git://127.0.0.1:1/amazon-eks-ami", &"5".repeat(40))?;
    let (code, stdout, stderr) = nodejoin(&["run", &scenario])?;
    let all = format!("{stdout}{stderr}");
    ensure(
        code == Some(nodejoin::session::exit::NO_TESTS_RUN as i32)
            && all.contains("could not be fetched from git://127.0.0.1:1/amazon-eks-ami")
            && all.contains("NODEJOIN_EKS_AMI")
            && !all.contains("PASSED"),
        || format!("exit {code:?}:\n{all}"),
    )
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
        Trial::test(
            "eks-ami/upstream-user-data/nodeadm-e2e-cases-join",
            upstream_user_data_joins,
        ),
        Trial::test(
            "eks-ami/pinned-commit/fetched-once-and-joins",
            pinned_commit_is_fetched_and_joins,
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
    .chain(std::iter::once(Trial::test(
        "eks-ami/pinned-commit/unreachable-is-ignored-with-the-fix",
        unreachable_pin_is_ignored_with_the_fix,
    )))
    .collect();
    libtest_mimic::run(&args, trials).exit();
}
