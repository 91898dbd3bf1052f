//! Runs a node group's `userData.command` (`crate::scenario::user_command`) for one node, once the cluster's
//! and the instance's placeholders are known: in a throwaway container of the node's image, the scenario's
//! repository mounted read-only (its `.git` hidden), without network. A failure quotes the generator's exit code
//! and the end of what it printed on standard error.
use crate::node::machine::NodeMachine;
use crate::scenario::user_command::{environment, CommandSpec, TIMEOUT};
use crate::scenario::user_data::MAX_USER_DATA;
use std::collections::BTreeMap;

/// What the generator printed.
pub async fn generate(
    docker: &crate::docker::Docker,
    run_id: &str,
    roots: &crate::scenario::confine::Roots,
    spec: &CommandSpec,
    node: &NodeMachine,
    vars: &BTreeMap<String, String>,
) -> Result<Vec<u8>, String> {
    let line = spec.argv.join(" ");
    let dir = roots
        .check(&spec.dir, "userData.command's directory")
        .map_err(|e| format!("userData.command: {e}"))?;
    let repo = if roots.repo().as_os_str().is_empty() {
        dir.clone()
    } else {
        roots.repo().to_path_buf()
    };
    let git = repo.join(".git");
    let run = crate::docker::oneshot::OneShot {
        kind: "generator",
        image: &node.image,
        cmd: spec.argv.clone(),
        env: environment(vars),
        read_only: vec![repo.to_string_lossy().into_owned()],
        hidden: if git.is_dir() {
            vec![git.to_string_lossy().into_owned()]
        } else {
            Vec::new()
        },
        working_dir: dir.to_string_lossy().into_owned(),
        labels: crate::docker::run_labels(run_id),
        timeout: TIMEOUT,
        // Base64 of EC2's largest user data, and its line breaks.
        max_stdout: MAX_USER_DATA * 2,
    };
    let (out, stdout) = crate::docker::oneshot::run(docker, run)
        .await
        .map_err(|e| format!("userData.command `{line}`: {e}"))?;
    if out.exit_code != 0 {
        return Err(format!(
            "userData.command `{line}` exited {}: {}",
            out.exit_code,
            crate::process::last_lines(&out.stderr, 5, " | ")
        ));
    }
    if stdout.iter().all(u8::is_ascii_whitespace) {
        return Err(format!(
            "userData.command `{line}` printed nothing (its output is the user data)"
        ));
    }
    Ok(stdout)
}
