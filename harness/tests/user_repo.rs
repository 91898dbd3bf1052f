//! nodejoin as a user's repository uses it: a sample bootstrap repository in a temporary directory (its own fork
//! of a bootstrap script, scenarios with paths relative to themselves, a golden file), `nodejoin init`, the
//! binary `cargo install` puts outside any checkout (so it must bring its own fixtures), and the shell steps of
//! this repository's GitHub Action (action.yml) run one after another as a runner would run them.
use serde_yaml_ng::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::root;
#[path = "user_repo/releases.rs"]
mod releases;
use releases::{release_version, Releases};
#[path = "user_repo/action_steps.rs"]
mod action_steps;

fn action() -> Value {
    let text = std::fs::read_to_string(root().join("action.yml")).expect("action.yml");
    serde_yaml_ng::from_str(&text).expect("action.yml is YAML")
}

/// Every `${{ ... }}` expression of a text.
fn expressions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        let Some(end) = rest[start..].find("}}") else { break };
        out.push(rest[start + 3..start + end].trim().to_string());
        rest = &rest[start + end + 2..];
    }
    out
}

#[test]
fn the_action_is_composite_and_every_input_is_declared_described_and_documented() {
    let a = action();
    assert_eq!(a["runs"]["using"].as_str(), Some("composite"));
    let inputs = a["inputs"].as_mapping().expect("inputs");
    let readme = std::fs::read_to_string(root().join("docs/src/user-guide/your-repo.md")).unwrap();
    let declared: Vec<String> = inputs.keys().map(|k| k.as_str().unwrap().to_string()).collect();
    for (name, spec) in inputs {
        let name = name.as_str().unwrap();
        let description = spec["description"].as_str().unwrap_or_default();
        assert!(description.len() > 10, "input {name} has no description");
        assert!(
            !description.contains("${{"),
            "input {name}'s description holds an expression"
        );
        assert!(
            readme.contains(&format!("`{name}`")),
            "the book's your-repo page does not document input `{name}`"
        );
    }
    let text = std::fs::read_to_string(root().join("action.yml")).unwrap();
    for e in expressions(&text) {
        for word in e.split(|c: char| !(c.is_alphanumeric() || c == '.' || c == '-' || c == '_')) {
            if let Some(input) = word.strip_prefix("inputs.") {
                assert!(
                    declared.iter().any(|d| d == input),
                    "action.yml uses undeclared input {input}"
                );
            }
        }
    }
    let steps = a["runs"]["steps"].as_sequence().unwrap();
    for s in steps {
        let name = s["name"].as_str().unwrap_or("?");
        // An input spliced into a script is code: inputs reach scripts through env: only.
        assert!(
            !s["run"].as_str().unwrap_or_default().contains("${{"),
            "step {name}: an expression inside run: (pass it through env:)"
        );
        assert!(
            s["run"].is_string() != s["uses"].is_string(),
            "step {name}: exactly one of run, uses"
        );
        if s["run"].is_string() {
            assert_eq!(
                s["shell"].as_str(),
                Some("bash"),
                "step {name}: composite run steps need shell: bash"
            );
        }
    }
}

/// Fills in the expressions a runner would, for a step run here: inputs, the action's path, the runner's temp
/// directory, and the two conditions the action uses.
fn substitute(text: &str, inputs: &BTreeMap<String, String>, ctx: &BTreeMap<String, String>) -> String {
    let mut out = text.to_string();
    for e in expressions(text) {
        let value = if let Some(i) = e.strip_prefix("inputs.") {
            inputs
                .get(i)
                .cloned()
                .unwrap_or_else(|| panic!("no value for input {i}"))
        } else if let Some(v) = ctx.get(e.as_str()) {
            v.clone()
        } else if e == "always()" {
            "true".into()
        } else if e == "always() && inputs.compare-base != ''" {
            (!inputs["compare-base"].is_empty()).to_string()
        } else if e == "always() && steps.run.outcome != 'skipped'" {
            "true".into()
        } else if let Some(left) = e.strip_prefix("always() && ").and_then(|r| r.strip_suffix(" != ''")) {
            ctx.get(left).is_some_and(|v| !v.is_empty()).to_string()
        } else if let Some((left, right)) = e.split_once(" == ") {
            let right = right.trim_matches('\'');
            (ctx.get(left).map(String::as_str).unwrap_or_default() == right).to_string()
        } else if e.starts_with("steps.") || e.starts_with("runner.os") || e.starts_with("github.action_ref") {
            String::new()
        } else {
            panic!("expression {e} is not known to this test");
        };
        out = out.replace(&format!("${{{{ {e} }}}}"), &value);
    }
    out
}

/// A bootstrap repository: the reference bootstrap forked as scripts/bootstrap.sh, a golden file, and a
/// scenario of the user's own with paths relative to itself; committed, so `git:HEAD` is a revision.
fn sample_repo(dir: &Path) {
    let fork = std::fs::read_to_string(root().join("fixtures/bootstrap/bootstrap.sh"))
        .unwrap()
        .replacen(
            "#!/usr/bin/env bash\n",
            "#!/usr/bin/env bash\n# acme's fork of the EKS bootstrap.\n",
            1,
        );
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(dir.join("scripts/bootstrap.sh"), fork).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("scripts/bootstrap.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("nodejoin/scenarios/golden")).unwrap();
    std::fs::copy(
        root().join("fixtures/golden/10-kubelet-args.conf"),
        dir.join("nodejoin/scenarios/golden/10-kubelet-args.conf"),
    )
    .unwrap();
    std::fs::write(
        dir.join("nodejoin/scenarios/drop-in.yaml"),
        r#"description: our fork writes the kubelet drop-in we expect
nodes:
  - name: worker
    bootstrap:
      script: ../../scripts/bootstrap.sh
      args: ["{{cluster.name}}", --apiserver-endpoint, "{{cluster.endpoint}}", --b64-cluster-ca, "{{cluster.caBase64}}"]
    expect:
      within: 90s
      files:
        - path: /etc/systemd/system/kubelet.service.d/10-kubelet-args.conf
          golden: golden/10-kubelet-args.conf
"#,
    )
    .unwrap();
}

fn sh(dir: &Path, script: &str, env: &BTreeMap<String, String>) -> (i32, String) {
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .envs(env)
        .output()
        .expect("bash");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_user_repository_runs_through_init_the_installed_binary_and_the_actions_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("acme-ami");
    let runner_temp = tmp.path().join("runner-temp");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::create_dir_all(&runner_temp).unwrap();
    sample_repo(&repo);
    let releases = Releases::pack(tmp.path());

    // The runner's files and environment.
    let files: BTreeMap<&str, PathBuf> = ["GITHUB_PATH", "GITHUB_ENV", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY"]
        .into_iter()
        .map(|k| (k, tmp.path().join(k.to_lowercase())))
        .collect();
    for p in files.values() {
        std::fs::write(p, "").unwrap();
    }
    let mut env: BTreeMap<String, String> = files
        .iter()
        .map(|(k, p)| (k.to_string(), p.display().to_string()))
        .collect();
    env.insert("RUNNER_TEMP".into(), runner_temp.display().to_string());
    env.insert("GITHUB_WORKSPACE".into(), repo.display().to_string());
    env.insert("GITHUB_ACTIONS".into(), "true".into());
    // The install reuses this build's artifacts (same profile, same target directory) instead of a cold build.
    let target = std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| root().join("target").display().to_string());
    env.insert("CARGO_TARGET_DIR".into(), target);
    env.insert("CARGO_TERM_COLOR".into(), "never".into());
    // The release server's certificate, as a mirror's would be trusted by the runner.
    env.insert("CURL_CA_BUNDLE".into(), releases.ca.display().to_string());
    // The node images' archive for the cache, here rather than in this machine's home.
    let image_cache = tmp.path().join("image-cache");
    env.insert("NODEJOIN_ACTION_IMAGE_CACHE".into(), image_cache.display().to_string());

    let version = release_version().to_string();
    let inputs = action_steps::inputs(&[
        // The release of this build, served from a local directory as GitHub serves a release's assets.
        ("nodejoin-version", version.as_str()),
        ("release-url", releases.url.as_str()),
        ("compare-base", "git:HEAD"),
        // Selection inputs as a user passes them: every trial, in one share, no retry.
        ("filter", "all()"),
        ("partition", "count:1/1"),
        ("retries", "0"),
    ]);
    let mut ctx: BTreeMap<String, String> = BTreeMap::from([
        // The action as checked out at a commit that pins this build's release (ci/releases.sha256).
        ("github.action_path".to_string(), releases.action.display().to_string()),
        ("runner.temp".to_string(), runner_temp.display().to_string()),
        // A push to the user's repository: no pull request, so confined mode stays off (`confined: auto`).
        ("github.repository".to_string(), "acme/acme-ami".to_string()),
        // The first attempt of workflow run 42's job `nodejoin`: every trial runs.
        ("github.run_id".to_string(), "42".to_string()),
        ("github.run_attempt".to_string(), "1".to_string()),
        ("github.job".to_string(), "nodejoin".to_string()),
        (
            "github.event.pull_request.head.repo.full_name".to_string(),
            String::new(),
        ),
    ]);

    let a = action();
    let mut log = String::new();
    for step in a["runs"]["steps"].as_sequence().unwrap() {
        let name = step["name"].as_str().unwrap_or("?").to_string();
        if let Some(uses) = step["uses"].as_str() {
            log.push_str(&format!("== {name}: uses {uses} (GitHub's own, not run here)\n"));
            continue;
        }
        if let Some(cond) = step["if"].as_str() {
            if substitute(cond, &inputs, &ctx) != "true" {
                continue;
            }
        }
        // PATH as the runner builds it: what earlier steps added to $GITHUB_PATH first.
        let added: Vec<String> = std::fs::read_to_string(&files["GITHUB_PATH"])
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        let mut path = added.clone();
        path.push(std::env::var("PATH").unwrap_or_default());
        let mut step_env = env.clone();
        step_env.insert("PATH".into(), path.join(":"));
        if let Some(e) = step["env"].as_mapping() {
            for (k, v) in e {
                step_env.insert(
                    k.as_str().unwrap().into(),
                    substitute(v.as_str().unwrap_or(""), &inputs, &ctx),
                );
            }
        }
        let dir = match step["working-directory"].as_str() {
            Some(w) => repo.join(substitute(w, &inputs, &ctx)),
            None => repo.clone(),
        };
        let script = substitute(step["run"].as_str().unwrap(), &inputs, &ctx);
        // Each step its own output file, as on a runner; a step with an id publishes steps.<id>.outputs.*.
        let outputs = tmp
            .path()
            .join(format!("output-{}", step["id"].as_str().unwrap_or("anonymous")));
        std::fs::write(&outputs, "").unwrap();
        step_env.insert("GITHUB_OUTPUT".into(), outputs.display().to_string());
        let started = std::time::Instant::now();
        let (code, out) = sh(&dir, &script, &step_env);
        // Printed for the record (a figure, never an assertion).
        eprintln!("action step '{name}': {:.1?}", started.elapsed());
        log.push_str(&format!("== {name}: exit {code}\n{out}\n"));
        assert_eq!(code, 0, "step '{name}' failed:\n{log}");
        if let Some(id) = step["id"].as_str() {
            for line in std::fs::read_to_string(&outputs).unwrap().lines() {
                if let Some((k, v)) = line.split_once('=') {
                    ctx.insert(format!("steps.{id}.outputs.{k}"), v.to_string());
                }
            }
        }

        if name == "Install nodejoin" {
            // The release was downloaded and checked, nothing compiled.
            let served = releases.served();
            let archive = format!(
                "/v{v}/nodejoin-v{v}-x86_64-unknown-linux-gnu.tar.gz",
                v = release_version()
            );
            assert!(
                served == vec![archive.clone()],
                "the install step did not fetch {archive} alone (the checksum is the action's, not the server's): \
                 {served:?}\n{log}"
            );
            assert!(out.contains(": OK (SHA-256"), "no checksum verified:\n{out}");
            assert!(!out.contains("Compiling"), "the install step compiled:\n{out}");
            // The user scaffolds with the installed binary, outside any nodejoin checkout.
            let bin = Path::new(&added_after(&files["GITHUB_PATH"])).join("nodejoin");
            assert!(bin.is_file(), "the install step put no nodejoin on GITHUB_PATH:\n{log}");
            assert!(
                !bin.starts_with(root()),
                "installed inside the checkout: {}",
                bin.display()
            );
            let out = Command::new(&bin)
                .args(["init", "--script", "scripts/bootstrap.sh"])
                .current_dir(&repo)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "nodejoin init:\n{text}");
            let scenario = std::fs::read_to_string(repo.join("nodejoin/scenarios/join.yaml")).unwrap();
            assert!(scenario.contains("script: ../../scripts/bootstrap.sh"), "{scenario}");
            assert!(repo.join(".github/workflows/nodejoin.yml").is_file());
            let (code, git) = sh(
                &repo,
                "git init -q && git add -A && git -c user.email=ci@example.invalid -c user.name=ci commit -qm sample",
                &env,
            );
            assert_eq!(code, 0, "{git}");
        }
        if name.starts_with("Cache key") {
            let key = ctx.get("steps.key.outputs.key").cloned().unwrap_or_default();
            assert!(
                key.starts_with("nodejoin-x86_64-") && key.len() == "nodejoin-x86_64-".len() + 24,
                "no content key: {key:?}\n{log}"
            );
        }
        if name.starts_with("Prepare the host") {
            // No cache was restored here: the images the scenarios use were saved for the cache to keep.
            let saved = std::fs::metadata(image_cache.join("images.tar"))
                .map(|m| m.len())
                .unwrap_or(0);
            assert!(saved > 0, "no node images saved for the cache:\n{out}");
            assert!(
                out.contains("built into this binary"),
                "the installed nodejoin did not use its own packed fixtures:\n{out}"
            );
        }
    }

    // The cell's artifact name, and the record of this attempt kept for a re-run (its partition's own file).
    let artifact = ctx.get("steps.cell.outputs.artifact-name").cloned().unwrap_or_default();
    assert!(
        artifact.starts_with("nodejoin-local-default-default-count-1of1-") && artifact.ends_with("-attempt1"),
        "{artifact}"
    );
    let record = runner_temp.join("nodejoin-record/last-run-count-1-1.json");
    assert!(
        record.is_file(),
        "no record kept for a re-run at {}\n{log}",
        record.display()
    );
    let summary = std::fs::read_to_string(&files["GITHUB_STEP_SUMMARY"]).unwrap();
    assert!(
        summary.contains("### nodejoin\n\n✅ 2 passed, 0 failed"),
        "{summary}\n{log}"
    );
    assert!(
        summary.contains("| join | PASSED |") && summary.contains("| drop-in | PASSED |"),
        "{summary}"
    );
    // The picture inline (a Mermaid gantt GitHub renders), each scenario's wait apart from its own time, the
    // slowest nodes, and the timelines named by their place in the artifact (no dead link to a runner's file).
    assert!(
        summary.contains("```mermaid\ngantt\n")
            && summary.contains("  section join\n")
            && summary.contains("  section drop-in\n"),
        "{summary}"
    );
    assert!(
        summary.contains("| slowest nodes | node |") && summary.contains("| worker-0 |"),
        "{summary}"
    );
    assert!(
        summary.contains("in this job's artifact") && !summary.contains("timeline.svg)"),
        "{summary}"
    );
    assert!(
        summary.contains("### nodejoin compare") && summary.contains("No difference in 2 scenarios"),
        "{summary}"
    );
    let outputs = std::fs::read_to_string(tmp.path().join("output-run")).unwrap();
    let junit = outputs
        .lines()
        .find_map(|l| l.strip_prefix("junit="))
        .expect("the run step's junit output");
    for (key, want) in [
        ("passed", "2"),
        ("failed", "0"),
        ("flaky", "0"),
        ("ignored", "0"),
        ("result", "passed"),
    ] {
        assert!(
            outputs.lines().any(|l| l == format!("{key}={want}")),
            "the run step's output {key} is not {want}:\n{outputs}"
        );
    }
    let xml = std::fs::read_to_string(junit).unwrap();
    // One suite per trial, a test case per check and one for the scenario's outcome.
    assert!(
        xml.contains("<testsuite name=\"local/v1.")
            && xml.contains("/join\"")
            && xml.contains("<testcase name=\"scenario\""),
        "{xml}"
    );
}

/// The last directory a step added to `$GITHUB_PATH`.
fn added_after(github_path: &Path) -> String {
    std::fs::read_to_string(github_path)
        .unwrap()
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

/// `confined: auto` (the default) turns confined mode on for a pull request from another repository (a fork) and
/// only then; `true` and `false` are taken as given; anything else fails the step (issue 66).
#[test]
fn a_pull_request_from_a_fork_runs_confined() {
    let tmp = tempfile::tempdir().unwrap();
    let step = action()["runs"]["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|s| s["name"].as_str() == Some("Which nodejoin"))
        .cloned()
        .unwrap();
    let output = tmp.path().join("output");
    for (input, head, want) in [
        ("auto", "someone/acme-ami", Some("true")),
        ("auto", "acme/acme-ami", Some("false")),
        ("auto", "", Some("false")),
        ("false", "someone/acme-ami", Some("false")),
        ("true", "", Some("true")),
        ("yes\nconfined=false", "someone/acme-ami", None),
    ] {
        std::fs::write(&output, "").unwrap();
        let env = BTreeMap::from([
            ("GITHUB_OUTPUT".to_string(), output.display().to_string()),
            ("NODEJOIN_ACTION_PATH".to_string(), root().display().to_string()),
            ("NODEJOIN_ACTION_WANT".to_string(), "source".to_string()),
            ("NODEJOIN_ACTION_CONFINED".to_string(), input.to_string()),
            ("NODEJOIN_ACTION_PR_HEAD_REPO".to_string(), head.to_string()),
            ("NODEJOIN_ACTION_THIS_REPO".to_string(), "acme/acme-ami".to_string()),
        ]);
        let (code, out) = sh(tmp.path(), step["run"].as_str().unwrap(), &env);
        let outputs = std::fs::read_to_string(&output).unwrap();
        match want {
            Some(w) => {
                assert_eq!(code, 0, "{input} {head}: {out}");
                assert!(
                    outputs.lines().any(|l| l == format!("confined={w}")),
                    "{input} {head}: {outputs}"
                );
            }
            None => {
                assert_ne!(code, 0, "{input:?} was taken: {out}");
                assert!(!outputs.contains("confined="), "{outputs}");
            }
        }
    }
}
