//! The GitHub Actions workflow (ci/nodejoin.yml, installed as .github/workflows/nodejoin.yml) parses, its matrix
//! expands to the cells README.md documents, and what its steps name exists.
use serde_yaml_ng::Value;
use std::collections::BTreeMap;

type Cell = BTreeMap<String, String>;

mod common;
use common::root;
#[path = "workflow/supply_chain.rs"]
mod supply_chain;

fn workflow() -> Value {
    let text = std::fs::read_to_string(root().join("ci/nodejoin.yml")).expect("ci/nodejoin.yml");
    serde_yaml_ng::from_str(&text).expect("ci/nodejoin.yml is YAML")
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("matrix value {other:?} is not a scalar"),
    }
}

/// GitHub's expansion: the product of the list-valued keys, minus `exclude` entries (each removes the cells that
/// match all its keys), plus `include` entries (added to every cell whose original keys they match, or as a
/// new cell when they match none).
fn expand(matrix: &Value) -> Vec<Cell> {
    let map = matrix.as_mapping().expect("matrix is a mapping");
    let mut cells: Vec<Cell> = vec![Cell::new()];
    for (k, v) in map {
        let key = scalar(k);
        if key == "include" || key == "exclude" {
            continue;
        }
        let values: Vec<String> = v
            .as_sequence()
            .expect("matrix dimension is a list")
            .iter()
            .map(scalar)
            .collect();
        let mut next = Vec::new();
        for c in &cells {
            for val in &values {
                let mut c = c.clone();
                c.insert(key.clone(), val.clone());
                next.push(c);
            }
        }
        cells = next;
    }
    let entry = |e: &Value| -> Cell {
        e.as_mapping()
            .unwrap()
            .iter()
            .map(|(k, v)| (scalar(k), scalar(v)))
            .collect()
    };
    let matches = |cell: &Cell, e: &Cell| e.iter().all(|(k, v)| cell.get(k) == Some(v));
    if let Some(ex) = map.get("exclude").and_then(|e| e.as_sequence()) {
        let ex: Vec<Cell> = ex.iter().map(entry).collect();
        cells.retain(|c| !ex.iter().any(|e| matches(c, e)));
    }
    if let Some(inc) = map.get("include").and_then(|e| e.as_sequence()) {
        let original: Vec<String> = cells.first().map(|c| c.keys().cloned().collect()).unwrap_or_default();
        for e in inc.iter().map(entry) {
            let orig: Cell = e
                .iter()
                .filter(|(k, _)| original.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut hit = false;
            for c in cells.iter_mut().filter(|c| matches(c, &orig)) {
                c.extend(e.clone());
                hit = true;
            }
            if !hit {
                cells.push(e);
            }
        }
    }
    cells
}

#[test]
fn installed_copy_matches_the_source() {
    let source = std::fs::read(root().join("ci/nodejoin.yml")).unwrap();
    let installed =
        std::fs::read(root().join(".github/workflows/nodejoin.yml")).expect(".github/workflows/nodejoin.yml");
    assert!(
        source == installed,
        "copy ci/nodejoin.yml to .github/workflows/nodejoin.yml"
    );
}

/// The Scenarios step's `case` arms: each flavor with the number of nextest partitions its trials are dealt into
/// (`--partition count:K/N`), K being the cell's shard when N > 1.
fn partitions_by_flavor(job: &Value) -> BTreeMap<String, u32> {
    let step = job["steps"]
        .as_sequence()
        .expect("the scenarios job's steps")
        .iter()
        .find_map(|s| s["run"].as_str().filter(|r| r.contains("cargo nextest run")))
        .expect("the Scenarios step");
    step.lines()
        .filter_map(|l| {
            let (flavor, arm) = l.trim().split_once(')')?;
            let partition = arm.split("partition=\"count:").nth(1)?.split('"').next()?;
            let (shard, total) = partition.split_once('/').expect("count:K/N");
            let total: u32 = total.parse().expect("a partition total");
            let each_shard = if total > 1 { "${{ matrix.shard }}" } else { "1" };
            assert_eq!(shard, each_shard, "{flavor}: the partition of {l}");
            Some((flavor.trim().to_string(), total))
        })
        .collect()
}

/// The containerd lines of the action job's cells: (the AMI's lines, the canary lines).
fn action_lines(w: &Value) -> (Vec<String>, Vec<String>) {
    let (mut ami, mut canary) = (Vec::new(), Vec::new());
    for c in expand(&w["jobs"]["action"]["strategy"]["matrix"]) {
        let lines = if c.get("canary").map(String::as_str) == Some("true") {
            &mut canary
        } else {
            &mut ami
        };
        if !lines.contains(&c["containerd"]) {
            lines.push(c["containerd"].clone());
        }
    }
    (ami, canary)
}

/// The scenarios job's cells are derived, not typed again: every registered provider × the workflow's Kubernetes
/// versions × each flavor the Scenarios step knows, in as many shards as that step partitions it into, on the
/// default containerd line; the AL2023 flavor (its subject the node, not the control plane) on local only, on
/// the AMI's lines the action job runs. The book's CI matrix page says how many jobs that is.
#[test]
fn matrix_expands_to_the_documented_cells() {
    use nodejoin::assets::tools::ContainerdLine;
    let w = workflow();
    let job = &w["jobs"]["scenarios"];
    let cells = expand(&job["strategy"]["matrix"]);
    // The Kubernetes versions are the workflow's own list (providers.md: changing it needs nothing else); each
    // must be a release version.
    let versions: Vec<String> = job["strategy"]["matrix"]["kubernetes"]
        .as_sequence()
        .expect("a kubernetes list")
        .iter()
        .map(|v| v.as_str().expect("a version string").to_string())
        .collect();
    assert!(!versions.is_empty(), "the matrix names at least one Kubernetes version");
    for v in &versions {
        let parts: Vec<&str> = v.trim_start_matches('v').split('.').collect();
        assert!(
            v.starts_with('v') && parts.len() == 3 && parts.iter().all(|p| p.parse::<u32>().is_ok()),
            "{v} is not a Kubernetes release version like v1.36.3"
        );
        assert!(nodejoin::assets::check_version(v).is_ok(), "{v}");
    }
    let flavors = partitions_by_flavor(job);
    assert!(
        flavors.contains_key("al2023"),
        "the Scenarios step has no al2023 arm: {flavors:?}"
    );
    let (ami_lines, _) = action_lines(&w);
    let default_line = ContainerdLine::default().as_str().to_string();
    assert!(ami_lines.contains(&default_line), "{ami_lines:?}");
    let mut expected = Vec::new();
    for provider in nodejoin::cluster::names() {
        for kubernetes in &versions {
            for (flavor, &shards) in &flavors {
                let al2023 = flavor == "al2023";
                if al2023 && provider != nodejoin::cluster::Provider::LOCAL.as_str() {
                    continue;
                }
                let lines = if al2023 {
                    &ami_lines[..]
                } else {
                    std::slice::from_ref(&default_line)
                };
                for shard in 1..=shards {
                    for containerd in lines {
                        expected.push(Cell::from([
                            ("provider".to_string(), provider.to_string()),
                            ("kubernetes".to_string(), kubernetes.to_string()),
                            ("flavor".to_string(), flavor.to_string()),
                            ("shard".to_string(), shard.to_string()),
                            ("containerd".to_string(), containerd.to_string()),
                        ]));
                    }
                }
            }
        }
    }
    let mut got = cells.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    // The book's CI matrix page documents the same cells, and the action job's beside them.
    let page = std::fs::read_to_string(root().join("docs/src/reference/ci-matrix.md")).expect("the CI matrix page");
    assert!(
        page.contains(&format!("{} jobs", cells.len())),
        "the book's CI matrix page must say {} jobs",
        cells.len()
    );
    let action = expand(&w["jobs"]["action"]["strategy"]["matrix"]).len();
    assert!(
        page.contains(&format!("({action} more jobs)")),
        "the book's CI matrix page must say the action job adds {action} jobs"
    );
    for c in &cells {
        for v in [&c["provider"], &c["kubernetes"], &c["flavor"]] {
            assert!(page.contains(v.as_str()), "the book's CI matrix page does not name {v}");
        }
    }
}

#[test]
fn every_flavor_selects_scenarios_and_steps_name_what_exists() {
    let w = workflow();
    let steps = w["jobs"]["scenarios"]["steps"].as_sequence().unwrap();
    let runs: Vec<String> = steps
        .iter()
        .filter_map(|s| s["run"].as_str().map(str::to_string))
        .collect();
    for script in ["ci/setup-host.sh", "ci/provision.sh"] {
        assert!(runs.iter().any(|r| r.contains(script)), "{script} is not run");
        assert!(root().join(script).is_file(), "{script} does not exist");
    }
    assert!(runs
        .iter()
        .any(|r| r.contains("cargo nextest run") && r.contains("--profile ci")));
    let nextest = std::fs::read_to_string(root().join(".config/nextest.toml")).expect(".config/nextest.toml");
    assert!(nextest.contains("[profile.ci.junit]"));
    let scenarios: Vec<String> = std::fs::read_dir(root().join("scenarios"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    // The filters of the Scenarios step, by their substrings.
    let count = |pred: &dyn Fn(&str) -> bool| scenarios.iter().filter(|s| pred(s)).count();
    assert!(count(&|s| !s.contains("userdata-")) > 0, "bootstrap-sh selects nothing");
    assert!(
        count(&|s| s.contains("userdata-") && !s.contains("userdata-nodeadm")) > 0,
        "user-data selects nothing"
    );
    assert!(
        count(&|s| s.contains("userdata-nodeadm")) > 0,
        "nodeadm selects nothing"
    );
    assert!(count(&|s| s.contains("al2023-")) > 0, "al2023 selects nothing");
    let scenario_step = runs.iter().find(|r| r.contains("cargo nextest run")).unwrap();
    for f in [
        "not test(/userdata-/) and not test(/al2023-/)",
        "test(/userdata-nodeadm/)",
        "al2023)       filter='test(/eks-ami/)'",
    ] {
        assert!(scenario_step.contains(f), "the Scenarios step lost its filter {f}");
    }
}

/// The AL2023 scenarios run through the repository's own action, on both containerd lines and every version the
/// matrix has, with the amazon-eks-ami checkout as its `eks-ami` input; every input it passes is one the action
/// declares.
#[test]
fn the_al2023_cells_use_the_action_itself() {
    let w = workflow();
    let job = &w["jobs"]["action"];
    let steps = job["steps"].as_sequence().expect("the action job's steps");
    let step = steps
        .iter()
        .find(|s| s["uses"].as_str() == Some("./"))
        .expect("a step with uses: ./");
    let with = &step["with"];
    let filter = with["filter"].as_str().expect("the action step's filter");
    assert_eq!(filter, "test(/al2023-/) and version(=${{ matrix.kubernetes }})");
    // A scenario that pins its control plane's version runs in that version's cells only; the others in every cell.
    let matrix = |cell: &str| -> nodejoin::select::Filter {
        filter
            .replace("${{ matrix.kubernetes }}", cell)
            .parse()
            .expect("the filter parses")
    };
    let picks = |cell: &str, scenario: &str, version: &str| {
        let name = format!("local/v1.{}/{scenario}", version.split('.').nth(1).unwrap_or_default());
        matrix(cell).matches(&nodejoin::select::Candidate {
            name: &name,
            scenario,
            file: "",
            provider: "local",
            version,
            tags: &[],
        })
    };
    assert!(picks("v1.37.2", "al2023-upgrade", "v1.37.2"));
    assert!(
        !picks("v1.34.4", "al2023-upgrade", "v1.37.2"),
        "a pinned scenario ran in another version's cell"
    );
    assert!(picks("v1.34.4", "al2023-drain", "v1.34.4"));
    assert!(!picks("v1.34.4", "basic-bootstrap-token", "v1.34.4"));
    assert_eq!(with["containerd"].as_str(), Some("${{ matrix.containerd }}"));
    assert_eq!(with["eks-ami"].as_str(), Some("amazon-eks-ami"));
    // The canary cells: every line nodejoin builds beyond those the AMI cells run (the scenarios job's al2023
    // cells run the same, matrix_expands_to_the_documented_cells), reporting without failing.
    use nodejoin::assets::tools::ContainerdLine;
    let (ami, mut canary) = action_lines(&w);
    canary.sort();
    assert!(ami.contains(&ContainerdLine::default().as_str().to_string()), "{ami:?}");
    let beyond: Vec<String> = ContainerdLine::ALL
        .iter()
        .map(|l| l.as_str().to_string())
        .filter(|l| !ami.contains(l))
        .collect();
    assert!(!beyond.is_empty(), "no line after the AMI's to be a canary on: {ami:?}");
    assert_eq!(
        canary, beyond,
        "the canary cells' lines are the lines nodejoin builds beyond the AMI's"
    );
    assert!(
        ami.iter().chain(&canary).all(|l| ContainerdLine::parse(l).is_some()),
        "{ami:?} {canary:?}"
    );
    assert_eq!(job["continue-on-error"].as_str(), Some("${{ matrix.canary == true }}"));
    // Every version the scenarios job runs, and newer ones ahead of it (a release whose k3s and kind images are
    // not out yet); the canaries on the newest.
    let versions = |m: &Value| -> Vec<String> {
        m.as_sequence()
            .expect("a kubernetes list")
            .iter()
            .map(|v| v.as_str().expect("a version").to_string())
            .collect()
    };
    let ours = versions(&job["strategy"]["matrix"]["kubernetes"]);
    let theirs = versions(&w["jobs"]["scenarios"]["strategy"]["matrix"]["kubernetes"]);
    assert!(
        theirs.iter().all(|v| ours.contains(v)),
        "{ours:?} lacks one of {theirs:?}"
    );
    let minor = |v: &str| v.split('.').nth(1).and_then(|m| m.parse::<u32>().ok()).unwrap_or(0);
    let newest = ours.iter().max_by_key(|v| minor(v)).expect("a version");
    assert!(
        ours.iter()
            .filter(|v| !theirs.contains(v))
            .all(|v| minor(v) > theirs.iter().map(|t| minor(t)).max().unwrap_or(0)),
        "only versions newer than the scenarios job's run ahead of it: {ours:?}"
    );
    for c in job["strategy"]["matrix"]["include"]
        .as_sequence()
        .expect("the canary cells")
    {
        assert_eq!(
            c["kubernetes"].as_str(),
            Some(newest.as_str()),
            "a canary on the newest version: {c:?}"
        );
    }
    let action: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(root().join("action.yml")).unwrap()).unwrap();
    for (k, _) in with.as_mapping().unwrap() {
        let k = k.as_str().unwrap();
        assert!(!action["inputs"][k].is_null(), "the action declares no input {k}");
    }
    let checkout = steps
        .iter()
        .find(|s| s["with"]["repository"].as_str() == Some("awslabs/amazon-eks-ami"))
        .expect("the amazon-eks-ami checkout");
    assert_eq!(checkout["with"]["path"].as_str(), Some("amazon-eks-ami"));
}

/// Skips are never a green cell: each cell requires the provider it tests, and a provider image that cannot be
/// pulled fails the job instead of being swallowed (`|| true`).
#[test]
fn each_cell_requires_its_provider_and_pull_failures_fail_the_job() {
    let w = workflow();
    let job = &w["jobs"]["scenarios"];
    let env = &job["env"];
    for var in ["NODEJOIN_PROVIDERS", "NODEJOIN_REQUIRE_PROVIDERS"] {
        assert_eq!(
            env[var].as_str(),
            Some("${{ matrix.provider }}"),
            "{var} must be the cell's provider"
        );
    }
    let steps = job["steps"].as_sequence().unwrap();
    let pulls: Vec<&str> = steps
        .iter()
        .filter_map(|s| s["run"].as_str())
        .filter(|r| r.contains("docker pull"))
        .collect();
    assert!(
        pulls.iter().any(|r| r.contains("docker pull \"kindest/node:")),
        "no step pulls kindest/node"
    );
    // k3s: the image ci/k3s-image.sh resolved (the newest rancher/k3s:<version>-k3sN published) is pulled.
    assert!(
        pulls
            .iter()
            .any(|r| r.contains("image=$(bash ci/k3s-image.sh") && r.contains("docker pull \"$image\"")),
        "no step pulls the resolved k3s image"
    );
    // kind: when kindest/node cannot be pulled, the cell builds nodejoin's own kind node image (never skips).
    let build = steps
        .iter()
        .find(|s| s["run"].as_str().is_some_and(|r| r.contains("image build --kind")))
        .expect("a step builds the kind node image");
    assert_eq!(build["if"].as_str(), Some("env.NODEJOIN_BUILD_KIND_IMAGE == '1'"));
    assert!(pulls.iter().any(|r| r.contains("NODEJOIN_BUILD_KIND_IMAGE=1")));
    for line in pulls
        .iter()
        .flat_map(|r| r.lines())
        .filter(|l| l.contains("docker pull"))
    {
        assert!(
            !line.contains("|| true") && !line.contains("|| :") && !line.contains("continue-on-error"),
            "a pull failure must fail the job: {line}"
        );
    }
    assert!(
        steps.iter().all(|s| s["continue-on-error"].as_bool() != Some(true)),
        "no step may turn a failure into a green cell"
    );
}

/// `.ci/run` runs exactly the README's test command (its local scenario trials, which README's first command has just
/// run, left out by name), then the nextest proof that skips are skips
/// (ci/nextest-skips.sh), which must pin the nextest version it installs.
#[test]
fn ci_run_runs_the_readme_command_and_the_nextest_proof() {
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let command = readme
        .split("Run the tests")
        .nth(1)
        .and_then(|r| r.split("```sh\n").nth(1))
        .and_then(|r| r.split("\n```").next())
        .expect("README has the test command in a sh block after 'Run the tests'");
    assert_eq!(command, "cargo test --workspace");
    // A command runs as `step "NAME" COMMAND` (its share of the time budget) or bare.
    let lines: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .map(|l| match l.strip_prefix("step \"").and_then(|r| r.split_once("\" ")) {
            Some((_, command)) => command,
            None => l,
        })
        .collect();
    // README's first command runs first, before anything else touches the host (no setup script, no Docker
    // engine started by CI): it must prepare the host itself.
    let first = readme
        .split("Run the bundled scenarios")
        .nth(1)
        .and_then(|r| r.split("```sh\n").nth(1))
        .and_then(|r| r.split("\n```").next())
        .expect("README has the run command in a sh block after 'Run the bundled scenarios'");
    assert_eq!(first, "cargo run --bin nodejoin -- run scenarios/");
    let first_at = lines
        .iter()
        .position(|l| *l == first)
        .expect(".ci/run runs README's first command");
    let commands_before: Vec<&&str> = lines[..first_at]
        .iter()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| l.contains("setup-host") || l.contains("provision") || l.contains("dockerd"))
        .collect();
    assert!(
        commands_before.is_empty(),
        "nothing prepares the host before README's first command: {commands_before:?}"
    );
    // The test command may run under `env NAME=VALUE ...` (variables only, the command itself unchanged); the one
    // variable .ci/run gives it leaves out the local trials README's first command has just run, and nothing else.
    let bare = |l: &str| -> (Vec<String>, String) {
        let Some(rest) = l.strip_prefix("env ") else {
            return (Vec::new(), l.to_string());
        };
        let words: Vec<&str> = rest.split(' ').collect();
        let n = words.iter().take_while(|w| w.contains('=')).count();
        (words[..n].iter().map(|w| w.to_string()).collect(), words[n..].join(" "))
    };
    let test_at = lines
        .iter()
        .position(|l| bare(l).1 == command)
        .expect(".ci/run runs the README's test command");
    let (vars, _) = bare(lines[test_at]);
    assert!(
        vars.iter().all(|v| v == "NODEJOIN_SKIP_TRIALS=local/"),
        "README's test command runs unchanged, its local trials at most left out: {vars:?}"
    );
    let proof_at = lines
        .iter()
        .position(|l| *l == "bash ci/nextest-skips.sh")
        .expect(".ci/run runs ci/nextest-skips.sh");
    assert!(
        first_at < test_at && test_at < proof_at,
        "README's two commands run first, in order"
    );
    let proof = std::fs::read_to_string(root().join("ci/nextest-skips.sh")).expect("ci/nextest-skips.sh");
    assert!(
        proof.contains("cargo install cargo-nextest --version \"$NEXTEST_VERSION\" --locked"),
        "ci/nextest-skips.sh installs a pinned nextest"
    );
    assert!(
        proof.contains("NEXTEST_VERSION=0."),
        "ci/nextest-skips.sh pins NEXTEST_VERSION"
    );
}

#[test]
fn expansion_follows_github_rules() {
    let m: Value = serde_yaml_ng::from_str(
        "a: [1, 2]\nb: [x, y]\nexclude:\n  - {a: 1, b: y}\ninclude:\n  - {a: 2, b: x, extra: e}\n  - {a: 3, b: z}\n",
    )
    .unwrap();
    let cells = expand(&m);
    assert_eq!(cells.len(), 4, "{cells:?}");
    assert!(!cells.iter().any(|c| c["a"] == "1" && c["b"] == "y"));
    assert!(cells
        .iter()
        .any(|c| c["a"] == "2" && c["b"] == "x" && c.get("extra").map(String::as_str) == Some("e")));
    assert!(cells.iter().any(|c| c["a"] == "3" && c["b"] == "z"));
}

/// ci/k3s-image.sh picks the newest k3s revision of exactly the asked version, and fails naming what exists.
#[test]
fn k3s_image_resolves_to_the_newest_published_revision() {
    let dir = tempfile::tempdir().unwrap();
    let tags = dir.path().join("tags.json");
    std::fs::write(
        &tags,
        r#"{"results":[{"name":"v1.36.3-k3s1"},{"name":"v1.36.3-k3s2"},{"name":"v1.36.3-k3s10-amd64"},{"name":"v1.36.2-k3s1"},{"name":"v1.36.30-k3s9"}]}"#,
    )
    .unwrap();
    let run = |version: &str| {
        std::process::Command::new("bash")
            .arg(root().join("ci/k3s-image.sh"))
            .arg(version)
            .env("K3S_TAGS_JSON", &tags)
            .output()
            .unwrap()
    };
    let out = run("v1.36.3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "rancher/k3s:v1.36.3-k3s2");
    let out = run("v1.36.4");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no v1.36.4-k3sN tag") && err.contains("v1.36.2-k3s1 v1.36.3-k3s1"),
        "{err}"
    );
}
