//! A repository handed to nodejoin is untrusted input to a root process: the paths its scenarios name lead only
//! into the repository (outside `.git/`) or where the caller allows, and only regular files of bounded size are
//! read. Each case is a repro from issue 40, through `nodejoin list` (which loads and checks every scenario, and
//! needs no Docker).
use std::path::Path;

mod common;

/// A repository with one scenario whose node group has `lines` (indented under the group) in `nodejoin/`.
fn repo_with(lines: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let (dir, scenarios) = common::untrusted_repo();
    let file = scenarios.join("s.yaml");
    std::fs::write(&file, format!("nodes:\n  - name: a\n{lines}")).unwrap();
    (dir, file)
}

fn list(file: &Path, extra: &[&str]) -> (Option<i32>, String) {
    let out = common::nodejoin()
        .arg("list")
        .args(extra)
        .arg(file)
        .env_remove("NODEJOIN_ALLOW_PATHS")
        .env_remove("NODEJOIN_EKS_AMI")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    (out.status.code(), text)
}

fn refused(file: &Path, extra: &[&str], wanted: &[&str]) -> String {
    let (code, text) = list(file, extra);
    assert_eq!(
        code,
        Some(104),
        "refused when it loads: the trials cannot be listed\n{text}"
    );
    for w in wanted {
        assert!(text.contains(w), "expected {w:?} in:\n{text}");
    }
    text
}

#[test]
fn a_golden_file_outside_the_repository_is_refused_and_never_shown() {
    let (_dir, file) = repo_with(
        "    expect:\n      files:\n        - path: /etc/kubernetes/kubelet.conf\n          golden: /etc/passwd\n",
    );
    let text = refused(
        &file,
        &[],
        &[
            "golden /etc/passwd is outside the scenario's repository",
            "--allow-path",
        ],
    );
    assert!(
        !text.contains("root:x:0:0"),
        "the host file's content reached the output:\n{text}"
    );
}

#[test]
fn a_device_is_not_read_even_where_allowed() {
    let (_dir, file) = repo_with("    expect:\n      files:\n        - path: /etc/x\n          golden: /dev/zero\n");
    refused(&file, &[], &["/dev/zero: not a regular file"]);
    refused(&file, &["--allow-path", "/dev"], &["/dev/zero: not a regular file"]);
}

#[test]
fn the_repositorys_git_directory_is_never_read() {
    let (_dir, file) =
        repo_with("    expect:\n      files:\n        - path: /etc/x\n          golden: ../.git/config\n");
    let text = refused(&file, &[], &["inside the repository's .git/"]);
    assert!(!text.contains("token@"), "{text}");
}

#[test]
fn an_overlay_or_script_outside_the_repository_is_refused_unless_allowed() {
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(elsewhere.path().join("etc")).unwrap();
    let overlay = format!("    image: {{ overlay: {} }}\n", elsewhere.path().display());
    let (_dir, file) = repo_with(&overlay);
    refused(&file, &[], &["image.overlay", "outside the scenario's repository"]);
    let (code, text) = list(&file, &["--allow-path", elsewhere.path().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{text}");
    // A link inside the repository is judged by where it leads.
    let script = elsewhere.path().join("bootstrap.sh");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let (dir, file) = repo_with("    bootstrap: { script: ../link.sh }\n");
    std::os::unix::fs::symlink(&script, dir.path().join("link.sh")).unwrap();
    refused(
        &file,
        &[],
        &["bootstrap script", "it leads to", "outside the scenario's repository"],
    );
}
