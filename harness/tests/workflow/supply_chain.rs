//! What the workflows and the action take from outside, and how (issue 66): Python tools by hash, caches by
//! exact key only, never a run's records.
use super::common;
use serde_yaml_ng::Value;

/// The release build installs its Python tools only by hash (issue 66): the workflow names the requirements file
/// with `--require-hashes`, and every requirement there is pinned to one version and carries a SHA-256.
#[test]
fn the_release_workflow_installs_its_python_tools_by_hash() {
    let root = common::root();
    let release = std::fs::read_to_string(root.join(".github/workflows/release.yml")).unwrap();
    let install = release
        .lines()
        .find(|l| l.contains("pip install"))
        .expect("a pip install in release.yml");
    assert!(
        install.contains("--require-hashes") && install.contains("-r ci/release-requirements.txt"),
        "{install}"
    );
    let reqs = std::fs::read_to_string(root.join("ci/release-requirements.txt")).unwrap();
    let joined = reqs
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .replace("\\\n", " ");
    let mut names = Vec::new();
    for req in joined.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = req.split_whitespace();
        let spec = words.next().unwrap();
        assert!(spec.contains("=="), "not pinned to one version: {req}");
        let hashes: Vec<&str> = words.filter_map(|w| w.strip_prefix("--hash=sha256:")).collect();
        assert!(
            !hashes.is_empty()
                && hashes
                    .iter()
                    .all(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())),
            "no SHA-256 for {req}"
        );
        names.push(spec.split("==").next().unwrap().to_string());
    }
    assert_eq!(names, ["ziglang", "cargo-zigbuild"]);
}

/// No cache is restored by prefix (issue 66): every `actions/cache` step of the action and the workflows restores
/// its exact key only, since what the caches hold (binaries, tools, node images) runs as root; and nodejoin's cache
/// is saved without its run records and work directories, which belong to one boot of one host.
#[test]
fn no_cache_is_restored_by_prefix() {
    let root = common::root();
    let mut files = vec![root.join("action.yml"), root.join("ci/nodejoin.yml")];
    files.extend(
        std::fs::read_dir(root.join(".github/workflows"))
            .unwrap()
            .flatten()
            .map(|e| e.path()),
    );
    let mut caches = 0;
    for f in files {
        let doc: Value = serde_yaml_ng::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let mut steps: Vec<Value> = doc["runs"]["steps"].as_sequence().cloned().unwrap_or_default();
        for (_, job) in doc["jobs"].as_mapping().into_iter().flatten() {
            steps.extend(job["steps"].as_sequence().cloned().unwrap_or_default());
        }
        for s in steps.iter().filter(|s| {
            s["uses"]
                .as_str()
                .is_some_and(|u| u.starts_with("actions/cache@") || u.starts_with("actions/cache/restore@"))
        }) {
            caches += 1;
            let paths = s["with"]["path"].as_str().unwrap_or_default();
            if paths.contains("~/.cache/nodejoin\n") {
                for own in ["!~/.cache/nodejoin/runs", "!~/.cache/nodejoin/tmp"] {
                    assert!(
                        paths.lines().any(|l| l.trim() == own),
                        "{}: the cache keeps a run's records or work directories (no {own})",
                        f.display()
                    );
                }
            }
            // By prefix only the rerun record: trial names, read as data, never executed (action_steps.rs holds
            // the run step to regular files named as nodejoin names them).
            let record_only = paths.trim() == "${{ runner.temp }}/nodejoin-record";
            assert!(
                s["with"]["restore-keys"].is_null() || record_only,
                "{}: step {:?} restores a cache by prefix into a path something runs from",
                f.display(),
                s["name"]
            );
        }
    }
    assert!(caches >= 2, "no cache steps found");
}
