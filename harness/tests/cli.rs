//! The CLI on bad input: one clear line per failure plus a hint, a non-zero exit, and nothing started.
use std::process::Command;

mod common;

/// Runs `nodejoin ARGS` from the workspace with `envs`: its exit code and its output (stderr, then stdout).
fn nodejoin(args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut c = common::nodejoin();
    c.args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().expect("run nodejoin");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    (out.status.code(), text)
}

/// Runs `nodejoin ARGS` and checks its exit code and that its output contains every one of `wanted`; returns
/// that output for further checks.
fn expect_failure(args: &[&str], envs: &[(&str, &str)], code: i32, wanted: &[&str]) -> String {
    let (status, text) = nodejoin(args, envs);
    assert_eq!(status, Some(code), "nodejoin {args:?}:\n{text}");
    for w in wanted {
        assert!(text.contains(w), "nodejoin {args:?}: expected {w:?} in:\n{text}");
    }
    text
}

#[test]
fn unknown_field_is_reported_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("typo.yaml");
    std::fs::write(
        &file,
        "nodes:\n  - name: a\n    instanceTipe: m5.large\n    bootstrap: {}\n",
    )
    .unwrap();
    let position = format!("{}:3:5", file.display());
    let text = expect_failure(
        &["run", file.to_str().unwrap()],
        &[],
        104,
        &[&position, "unknown field `instanceTipe`", "hint:"],
    );
    // It failed before starting anything: no run was announced.
    assert!(!text.contains("[nodejoin] run "), "{text}");
}

#[test]
fn missing_scenario_file_is_a_clear_error() {
    expect_failure(
        &["run", "scenarios/does-not-exist.yaml"],
        &[],
        104,
        &["does-not-exist.yaml", "no such scenario file"],
    );
}

#[test]
fn unreachable_docker_says_how_to_fix_it() {
    let env = [("DOCKER_HOST", "unix:///nonexistent/docker.sock")];
    let run = ["run", "scenarios/basic-bootstrap-token.yaml"];
    expect_failure(
        &run,
        &env,
        96,
        &["Docker is not reachable", "hint: start the Docker engine"],
    );
    expect_failure(
        &["doctor"],
        &env,
        1,
        &["MISS Docker engine", "fix: apt-get install docker.io"],
    );
}

/// `nodejoin run`'s documented exit codes (the book's command-line page, `nodejoin run --help`) for runs that cannot pass: nothing to run
/// is never a success.
#[test]
fn a_directory_without_scenarios_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not a scenario").unwrap();
    let shown = dir.path().display().to_string();
    let text = expect_failure(
        &["run", "scenarios/basic-bootstrap-token.yaml", &shown],
        &[],
        104,
        &[&shown, "holds no scenario files"],
    );
    assert!(!text.contains("[nodejoin] run "), "nothing may start: {text}");
}

/// `--format json` ends with `run_finished` even when the run stops before it begins (stdout holds JSON only).
#[test]
fn an_early_error_still_ends_json_with_run_finished() {
    let dir = tempfile::tempdir().unwrap();
    let shown = dir.path().display().to_string();
    let out = common::nodejoin()
        .args(["run", "--format", "json", &shown])
        .output()
        .expect("run nodejoin");
    assert_eq!(
        out.status.code(),
        Some(104),
        "a directory with no scenario: the list cannot be made"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    assert_eq!(v["event"], "run_finished", "{v}");
    assert_eq!(v["aborted"], true, "{v}");
}

#[test]
fn a_run_in_which_nothing_runs_exits_5() {
    let dir = tempfile::tempdir().unwrap();
    // One scenario only for kind (skipped on the default provider), one for versions before 1.20 (ignored).
    std::fs::write(
        dir.path().join("kind-only.yaml"),
        "cluster: { providers: [kind] }\nnodes:\n  - name: a\n    bootstrap: { args: [x] }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("old-only.yaml"),
        "cluster:\n  kubernetesVersions: { max: \"1.20\", reason: only for old kubelets }\nnodes:\n  - name: a\n    bootstrap: { args: [x] }\n",
    )
    .unwrap();
    let text = expect_failure(
        &["run", dir.path().to_str().unwrap()],
        &[],
        4,
        &[
            "skipping",
            "it runs only on kind",
            "only for old kubelets",
            "nothing to run",
        ],
    );
    assert!(!text.contains("[nodejoin] run "), "nothing may start: {text}");
}

/// A provider asked for with --provider that cannot run here (its image is one no registry has) fails the run
/// (exit 100) before anything starts; a bad NODEJOIN_REQUIRE_PROVIDERS is a setup error (96).
#[test]
fn an_explicit_provider_that_cannot_run_fails_the_run() {
    let image = format!("nodejoin.invalid/k3s:cli-{}", std::process::id());
    let env = [("NODEJOIN_K3S_IMAGE", image.as_str())];
    let run = ["run", "--provider", "k3s", "scenarios/basic-bootstrap-token.yaml"];
    let text = expect_failure(&run, &env, 100, &["provider k3s cannot run here", &image, "hint:"]);
    assert!(!text.contains("[nodejoin] run "), "nothing may start: {text}");
    let _ = std::fs::remove_file(nodejoin::cluster::common::images::marker(&common::settings(), &image));
    expect_failure(
        &["run", "scenarios/basic-bootstrap-token.yaml"],
        &[("NODEJOIN_REQUIRE_PROVIDERS", "local,minikube")],
        96,
        &["NODEJOIN_REQUIRE_PROVIDERS: unknown provider 'minikube'"],
    );
}

#[test]
fn run_help_documents_the_exit_codes() {
    let (status, text) = nodejoin(&["run", "--help"], &[]);
    assert_eq!(status, Some(0), "{text}");
    let readme = std::fs::read_to_string(common::root().join("docs/src/reference/cli.md")).unwrap();
    for code in ["0", "2", "4", "94", "96", "100", "104", "110"] {
        assert!(
            text.contains(&format!("\n  {code:<4} ")),
            "--help lacks exit code {code}:\n{text}"
        );
        assert!(
            readme.contains(&format!("| {code} |")),
            "the book's command-line page lacks exit code {code}"
        );
    }
    assert!(text.contains("129, 130, 143") && readme.contains("| 129, 130, 143 |"));
}

#[test]
fn bad_version_is_refused_before_any_work() {
    expect_failure(&["assets", "--version", "1.36"], &[], 96, &["v1.36.3"]);
}

#[test]
fn group_image_needs_a_source() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("img.yaml");
    std::fs::write(&file, "nodes:\n  - name: a\n    image: {}\n").unwrap();
    expect_failure(
        &["run", file.to_str().unwrap()],
        &[],
        104,
        &["image needs one of overlay", "hint:"],
    );
    std::fs::write(&file, "nodes:\n  - name: a\n    image: { overlay: no/such/dir }\n").unwrap();
    expect_failure(&["run", file.to_str().unwrap()], &[], 104, &["is not a directory"]);
}

/// `nodejoin image build --overlay DIR --tag T`, then a scenario naming that tag: the node runs the overlay's own
/// /etc/eks/bootstrap.sh from the image. A tag that is not a local image is a clear error.
#[test]
fn overlay_image_built_by_the_cli_runs_as_a_group_image() {
    let tag = format!("nodejoin-test/overlay:{}", std::process::id());
    let (status, text) = nodejoin(
        &["image", "build", "--overlay", "fixtures/overlay-example", "--tag", &tag],
        &[],
    );
    assert_eq!(status, Some(0), "{text}");
    assert!(text.contains(&format!("overlay image {tag}")), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("by-tag.yaml");
    let scenario = format!(
        "cluster: {{ auth: iam }}\nnodes:\n  - name: tagged\n    image: {{ tag: \"{tag}\" }}\n    bootstrap:\n      args: [\"{{{{cluster.name}}}}\"]\n    expect:\n      within: 60s\n      labels: {{ example.com/bootstrap: overlay }}\n"
    );
    std::fs::write(&file, scenario).unwrap();
    let (status, text) = nodejoin(&["run", file.to_str().unwrap()], &[]);
    let _ = Command::new("docker").args(["rmi", &tag]).output();
    assert_eq!(status, Some(0), "{text}");
    assert!(text.contains("PASSED"), "{text}");

    let missing = scenario_with_tag(dir.path(), "nodejoin-test/never-built:0");
    expect_failure(
        &["run", missing.to_str().unwrap()],
        &[],
        100,
        &["nodejoin-test/never-built:0 is not a local image"],
    );
}

fn scenario_with_tag(dir: &std::path::Path, tag: &str) -> std::path::PathBuf {
    let file = dir.join("missing.yaml");
    std::fs::write(
        &file,
        format!("nodes:\n  - name: m\n    image: {{ tag: \"{tag}\" }}\n    bootstrap: {{ args: [x] }}\n"),
    )
    .unwrap();
    file
}

/// The documented path for machines with a registry: fixtures/node-image/registry/Dockerfile builds a node base
/// (here FROM our debootstrap base instead of Docker Hub's debian:bookworm, which this CI cannot pull), then
/// `NODEJOIN_BASE_IMAGE=<it> nodejoin image build` adds the node layer, and a scenario joins on the result.
#[test]
fn registry_dockerfile_builds_a_base_a_node_joins_on() {
    let root = common::root();
    let docker = |args: &[&str]| Command::new("docker").args(args).output().expect("run docker");
    let images = docker(&["image", "ls", "--format", "{{.Repository}}:{{.Tag}}", "nodejoin-base"]);
    let Some(debian) = String::from_utf8_lossy(&images.stdout)
        .lines()
        .next()
        .map(str::to_string)
    else {
        panic!("no nodejoin-base image: run ci/provision.sh first");
    };
    let id = std::process::id();
    // This machine reaches PyPI through a TLS-intercepting proxy: a throw-away layer makes the build trust the
    // host's CA bundle (a machine with a registry needs none of this).
    let ctx = tempfile::tempdir().unwrap();
    std::fs::copy("/etc/ssl/certs/ca-certificates.crt", ctx.path().join("host-ca.crt")).unwrap();
    std::fs::write(
        ctx.path().join("Dockerfile"),
        format!("FROM {debian}\nCOPY host-ca.crt /etc/nodejoin-host-ca.crt\nENV PIP_CERT=/etc/nodejoin-host-ca.crt\n"),
    )
    .unwrap();
    let trusting = format!("nodejoin-test/trusting-debian:{id}");
    let base = format!("nodejoin-test/registry-base:{id}");
    let cleanup = || {
        let _ = docker(&["rmi", &base, &trusting]);
    };
    let out = docker(&[
        "build",
        "-q",
        "--force-rm",
        "-t",
        &trusting,
        ctx.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let recipe = root.join("fixtures/node-image");
    let out = docker(&[
        "build",
        "-q",
        "--force-rm",
        "--build-arg",
        &format!("DEBIAN={trusting}"),
        "-t",
        &base,
        "-f",
        recipe.join("registry/Dockerfile").to_str().unwrap(),
        recipe.to_str().unwrap(),
    ]);
    if !out.status.success() {
        cleanup();
        panic!("registry/Dockerfile: {}", String::from_utf8_lossy(&out.stderr));
    }
    let (status, text) = nodejoin(&["image", "build"], &[("NODEJOIN_BASE_IMAGE", &base)]);
    let node_tag = text
        .lines()
        .find_map(|l| l.strip_prefix("node image ").and_then(|r| r.split_whitespace().next()))
        .map(str::to_string);
    let run = match &node_tag {
        Some(tag) if status == Some(0) => Some(nodejoin(
            &["run", "scenarios/basic-bootstrap-token.yaml"],
            &[("NODEJOIN_NODE_IMAGE", tag)],
        )),
        _ => None,
    };
    if let Some(tag) = &node_tag {
        let _ = docker(&["rmi", tag]);
    }
    cleanup();
    assert_eq!(status, Some(0), "image build on the registry base: {text}");
    assert!(text.contains(&format!("(base {base})")), "{text}");
    let (run_status, run_text) = run.expect("node image tag");
    assert_eq!(run_status, Some(0), "{run_text}");
    assert!(run_text.contains("PASSED"), "{run_text}");
}

#[test]
fn a_relative_path_resolves_against_the_scenario_file_and_a_missing_one_names_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("nodejoin/scenarios");
    std::fs::create_dir_all(&nested).unwrap();
    let file = nested.join("mine.yaml");
    std::fs::write(
        &file,
        "nodes:\n  - name: a\n    bootstrap:\n      script: ../../scripts/bootstrap.sh\n",
    )
    .unwrap();
    // Run from the workspace, not from the scenario's directory: the path still resolves next to the scenario.
    let looked = dir.path().join("scripts/bootstrap.sh");
    expect_failure(
        &["run", file.to_str().unwrap()],
        &[],
        104,
        &[
            &format!("bootstrap script {} does not exist", looked.display()),
            "relative paths are resolved against the scenario file's directory",
            "hint:",
        ],
    );
}

#[test]
fn every_setting_shows_in_help_and_on_the_books_command_line_page() {
    let page = std::fs::read_to_string(common::root().join("docs/src/reference/cli.md")).unwrap();
    for args in [&["--help"][..], &["run", "--help"][..]] {
        let (status, text) = nodejoin(args, &[]);
        assert_eq!(status, Some(0), "{text}");
        for (name, _) in nodejoin::settings::variables() {
            assert!(text.contains(name), "`nodejoin {}` lacks {name}", args.join(" "));
        }
    }
    for (name, what) in nodejoin::settings::variables() {
        let row = format!("| `{name}` | {what} |");
        assert!(page.contains(&row), "docs/src/reference/cli.md lacks the row {row}");
    }
}

/// A repository that looks like a nodejoin checkout (its `fixtures/bootstrap/bootstrap.sh`, a `harness/Cargo.toml`
/// naming the package) is not one: nodejoin's own files, whose scripts run as root, still come from the binary.
#[test]
fn a_look_alike_checkout_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("fixtures/bootstrap")).unwrap();
    std::fs::create_dir_all(root.join("harness")).unwrap();
    std::fs::write(
        root.join("fixtures/bootstrap/bootstrap.sh"),
        "#!/bin/sh\ntouch /tmp/planted\n",
    )
    .unwrap();
    std::fs::write(root.join("harness/Cargo.toml"), "[package]\nname = \"nodejoin\"\n").unwrap();
    let out = common::nodejoin()
        .current_dir(root)
        .arg("doctor")
        .env_remove("NODEJOIN_FIXTURES")
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("NODEJOIN_HOST_SETUP", "never")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("the copy built into this binary"), "{text}");
    assert!(
        !text.contains(&root.display().to_string()),
        "the look-alike was used: {text}"
    );
}

/// A checkout named explicitly (`--dev-checkout`) is used, and a look-alike named so is refused.
#[test]
fn a_dev_checkout_is_named_explicitly() {
    let root = common::root();
    let doctor = |dir: &std::path::Path| {
        common::nodejoin()
            .args(["--dev-checkout", dir.to_str().unwrap(), "doctor"])
            .env_remove("NODEJOIN_FIXTURES")
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .env("NODEJOIN_HOST_SETUP", "never")
            .output()
            .unwrap()
    };
    let out = doctor(&root);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("the checkout named by --dev-checkout")
            && text.contains(&root.join("fixtures").display().to_string()),
        "{text}"
    );
    let look_alike = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(look_alike.path().join("fixtures/bootstrap")).unwrap();
    std::fs::write(look_alike.path().join("fixtures/bootstrap/bootstrap.sh"), "#!/bin/sh\n").unwrap();
    let out = doctor(look_alike.path());
    assert_eq!(out.status.code(), Some(96));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a nodejoin checkout"));
}

/// A `pip.py` in the repository nodejoin is handed (its working directory, or on a PYTHONPATH it sets) never runs
/// as root: the host's pip probe is isolated (`python3 -I`) and runs from `/`.
#[test]
fn a_pip_py_in_the_repository_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pip-py-ran");
    std::fs::write(
        dir.path().join("pip.py"),
        format!("open({:?}, 'w').write('ran')\n", marker.display().to_string()),
    )
    .unwrap();
    // A run prepares the host first: the package probe, then the Docker engine (unreachable here: it ends there).
    let scenario = common::root().join("scenarios/basic-bootstrap-token.yaml");
    let out = common::nodejoin()
        .current_dir(dir.path())
        .arg("run")
        .arg(&scenario)
        .env("PYTHONPATH", dir.path())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("NODEJOIN_HOST_SETUP", "never")
        .env("NODEJOIN_ARTIFACTS_DIR", dir.path().join("artifacts"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("Docker is not reachable") || text.contains("missing packages"),
        "the host was not prepared:\n{text}"
    );
    assert!(!marker.exists(), "the repository's pip.py ran as root");
}

/// A repository that commits `target` as a link (issue 66: root's artifacts then went wherever it pointed): the run
/// is refused before it writes anything, saying why, and the place the link names stays untouched.
#[test]
fn a_linked_target_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    let elsewhere = tmp.path().join("elsewhere");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.join("target")).unwrap();
    std::fs::copy(
        common::root().join("scenarios/basic-bootstrap-token.yaml"),
        repo.join("join.yaml"),
    )
    .unwrap();
    let out = common::nodejoin()
        .args(["run", "join.yaml"])
        .current_dir(&repo)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("NODEJOIN_ARTIFACTS_DIR")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(
        text.contains("target is a link") && text.contains("NODEJOIN_ARTIFACTS_DIR"),
        "{text}"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "something was written through the link"
    );
}
