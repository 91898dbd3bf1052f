//! The file side of a scenario: reading what the bootstrap wrote from a node, re-running the bootstrap for the
//! idempotency check, and the per-node file expectations.
use crate::assert::files::{self, Identity, BOOTSTRAP_OUTPUTS, BOOTSTRAP_OUTPUT_DIRS};
use crate::assert::Check;
use crate::fakes::instances::Instance;
use crate::node::machine::NodeMachine;
use crate::scenario::model::FileExpectation;
use crate::scenario::template::render;
use std::collections::BTreeMap;
use std::path::Path;

/// The bootstrap's output files present on the node (path → content).
pub async fn read_outputs(node: &NodeMachine) -> BTreeMap<String, String> {
    let mut paths: Vec<String> = BOOTSTRAP_OUTPUTS.iter().map(|p| p.to_string()).collect();
    for dir in BOOTSTRAP_OUTPUT_DIRS {
        if let Ok(out) = node.exec(&["find", dir, "-maxdepth", "1", "-type", "f"], &[]).await {
            let mut found: Vec<String> = out.stdout.lines().map(str::to_string).collect();
            found.sort();
            paths.extend(found);
        }
    }
    let mut out = BTreeMap::new();
    for p in paths {
        if let Some(content) = node.read_file(&p).await {
            out.insert(p, content);
        }
    }
    out
}

/// `read_outputs` with this instance's identity replaced by placeholders.
pub async fn normalised_outputs(node: &NodeMachine, instance: &Instance) -> BTreeMap<String, String> {
    let id = Identity::of(
        &instance.instance_id,
        &instance.private_ip.to_string(),
        &instance.private_dns_name(),
        &instance.mac,
    );
    read_outputs(node)
        .await
        .into_iter()
        .map(|(k, v)| (k, id.normalise(&v)))
        .collect()
}

/// Runs the bootstrap again with the same arguments and environment, bounded like the first run (`deadline`,
/// the group's `within`), and compares the files.
pub async fn idempotency(
    node_name: &str,
    node: &NodeMachine,
    cmd: &[String],
    env: &[String],
    deadline: std::time::Duration,
) -> Check {
    let before = read_outputs(node).await;
    let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
    let exit = match node.exec_within(&args, env, deadline).await {
        Ok(o) => o.exit_code,
        Err(crate::error::Error::Timeout { after, .. }) => {
            return Check::new(
                crate::assert::registry::IDEMPOTENT.on(node_name),
                false,
                "a second run",
                format!(
                    "the idempotency re-run of the bootstrap did not finish within {}",
                    humantime::format_duration(after)
                ),
            )
        }
        Err(e) => {
            return Check::new(
                crate::assert::registry::IDEMPOTENT.on(node_name),
                false,
                "a second run",
                format!("could not run it: {e}"),
            )
        }
    };
    let after = read_outputs(node).await;
    files::idempotency(node_name, exit, &before, &after)
}

/// The checks of one node's `files` expectations, given each file's content as read (`None`: no such file).
pub fn expectations(
    roots: &crate::scenario::confine::Roots,
    node_name: &str,
    want: &[FileExpectation],
    contents: &[Option<String>],
    vars: &BTreeMap<String, String>,
) -> Vec<Check> {
    let mut out = Vec::new();
    for (f, content) in want.iter().zip(contents) {
        // `want` is the node's resolved expectation: its placeholders ({{instance.id}} ...) are filled in.
        out.extend(files::values(node_name, &f.path, content.as_deref(), &f.values));
        for wanted in &f.contains {
            let found = content.as_deref().is_some_and(|c| c.contains(wanted.as_str()));
            out.push(Check::new(
                crate::assert::registry::FILE.on_with(node_name, format!("{} contains \"{wanted}\"", f.path)),
                found,
                "present",
                match (&content, found) {
                    (None, _) => "the file does not exist",
                    (Some(_), true) => "present",
                    (Some(_), false) => "absent",
                },
            ));
        }
        if f.values.is_empty() && f.contains.is_empty() && f.golden.is_none() {
            // A path alone: the file must exist (an expectation that emitted no check would prove nothing).
            out.push(Check::new(
                crate::assert::registry::FILE.on_with(node_name, format!("{} exists", f.path)),
                content.is_some(),
                "present",
                if content.is_some() {
                    "present"
                } else {
                    "the file does not exist"
                },
            ));
        }
        if let Some(g) = &f.golden {
            // Absolute since the scenario was loaded (relative to its file: scenario::relative).
            let golden = roots
                .read_text(Path::new(g), "golden", crate::scenario::confine::MAX_FILE)
                .and_then(|t| render(&t, vars));
            out.push(match golden {
                Ok(text) => files::golden(node_name, &f.path, content.as_deref(), &text, g),
                Err(e) => Check::new(
                    crate::assert::registry::FILE.on_with(node_name, format!("{} golden", f.path)),
                    false,
                    g.clone(),
                    e,
                ),
            });
        }
    }
    out
}
