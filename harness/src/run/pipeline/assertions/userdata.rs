//! The checks of a user-data node: cloud-init's and nodeadm's own reports, the CloudFormation signal, and the
//! sandbox image containerd was configured with.
use crate::assert::cloud_init::{self, CloudInitReport};
use crate::assert::nodeadm::{self as nodeadm_report, NodeadmReport};
use crate::assert::Check;
use crate::node::machine::NodeMachine;
use crate::run::env::Environment;
use crate::scenario::model::{CloudInitExpectation, CloudInitStatus, NodeGroup, SignalExpectation};

/// The sandbox (pause) image the node's containerd is configured with: the `sandbox_image` (containerd 1.x,
/// `plugins."io.containerd.grpc.v1.cri"`) or `sandbox` (2.x, `plugins."io.containerd.cri.v1.images".pinned_images`)
/// key of `/etc/containerd/config.toml`, read as TOML (nodeadm's merged configs quote with single quotes); none
/// when the file is not TOML or names none.
pub fn configured_sandbox_image(config_toml: &str) -> Option<String> {
    fn find(t: &toml::Table) -> Option<String> {
        for (k, v) in t {
            match v {
                toml::Value::String(s) if matches!(k.as_str(), "sandbox_image" | "sandbox") && !s.is_empty() => {
                    return Some(s.clone())
                }
                toml::Value::Table(inner) => {
                    if let Some(found) = find(inner) {
                        return Some(found);
                    }
                }
                _ => {}
            }
        }
        None
    }
    let config: toml::Table = config_toml.parse().ok()?;
    find(config.get("plugins")?.as_table()?)
}

/// An image reference as containerd lists it: a name without tag or digest means `:latest`.
fn with_default_tag(image: &str) -> String {
    let name = image.rsplit('/').next().unwrap_or(image);
    if name.contains(':') || name.contains('@') {
        image.to_string()
    } else {
        format!("{image}:latest")
    }
}

/// Whether the node has the sandbox image its containerd was configured with (by nodeadm, or an AMI's
/// bootstrap), derived from what that tool did: an image on an ECR registry must have been pulled with an ECR
/// token signed by this instance (the 2024 nodeadm does that); a local one (current nodeadm's
/// `localhost/kubernetes/pause`) must only be in containerd's image store.
pub async fn sandbox_check(env: &Environment, container: &NodeMachine, node: &str, instance_id: &str) -> Check {
    let name = crate::assert::registry::SANDBOX_IMAGE.on(node);
    let config = container
        .read_file("/etc/containerd/config.toml")
        .await
        .unwrap_or_default();
    let Some(image) = configured_sandbox_image(&config) else {
        return Check::new(
            name,
            false,
            "a sandbox image in /etc/containerd/config.toml",
            "none configured",
        );
    };
    let listed = container
        .exec(&["ctr", "-n", "k8s.io", "images", "ls", "-q"], &[])
        .await
        .map(|o| o.stdout)
        .unwrap_or_default();
    let wanted = with_default_tag(&image);
    let present = listed.lines().any(|l| l.trim() == wanted);
    let host = image.split('/').next().unwrap_or_default();
    if host.contains(".dkr.ecr.") {
        let tokens = env.ecr.tokens_for(instance_id);
        let pulls = env.registry.pulls_by(instance_id);
        let pulled: Vec<String> = pulls
            .iter()
            .map(|p| format!("{}:{}", p.repository, p.reference))
            .collect();
        Check::new(
            name,
            present && tokens > 0 && !pulls.is_empty(),
            format!("{image} (an ECR image): an ECR token for this instance, a pull with it, the image in containerd"),
            format!(
                "{tokens} ECR token(s); pulls: {}; {}",
                if pulled.is_empty() {
                    "none".to_string()
                } else {
                    pulled.join(", ")
                },
                if present { "in containerd" } else { "not in containerd" }
            ),
        )
    } else {
        Check::new(
            name,
            present,
            format!("{image} (a local image) in containerd's k8s.io image store"),
            if present {
                "present".to_string()
            } else {
                format!(
                    "absent; images: {}",
                    listed.split_whitespace().collect::<Vec<_>>().join(", ")
                )
            },
        )
    }
}

/// Checks for one user-data node: cloud-init's status (done unless the scenario says otherwise) and the
/// CloudFormation signal.
pub fn checks(
    env: &Environment,
    group: &NodeGroup,
    node: &str,
    instance_id: &str,
    report: Option<&CloudInitReport>,
    nodeadm: Option<&NodeadmReport>,
    bootstrap_error: Option<&str>,
) -> Vec<Check> {
    let mut out = Vec::new();
    let expect = group.expect.cloud_init.clone().unwrap_or(CloudInitExpectation {
        status: CloudInitStatus::Done,
        ..Default::default()
    });
    match report {
        Some(r) => out.extend(cloud_init::checks(node, r, &expect)),
        None => out.push(Check::new(
            crate::assert::registry::CLOUD_INIT_STATUS.on(node),
            false,
            format!("{:?}", expect.status).to_lowercase(),
            match bootstrap_error {
                // Not that cloud-init did not run: the harness stopped waiting for it before it was over.
                Some(e) => format!("cloud-init's outcome was not read: the bootstrap's wait ended first ({e})"),
                None => "cloud-init did not run".into(),
            },
        )),
    }
    let nodeadm_want = group.expect.nodeadm.or(group
        .expect
        .joins
        .then_some(crate::scenario::model::NodeadmExpectation::Succeeded));
    match (nodeadm, nodeadm_want) {
        (Some(r), Some(want)) => {
            out.push(nodeadm_report::check(node, r, want));
        }
        (None, Some(want)) if group.expect.nodeadm.is_some() => out.push(Check::new(
            crate::assert::registry::NODEADM.on(node),
            false,
            format!("{want:?}").to_lowercase(),
            "nodeadm did not run (the user data carries no NodeConfig, or cloud-init never ran)",
        )),
        _ => {}
    }
    out.extend(cfn_check(env, group, node, instance_id));
    out
}

/// The CloudFormation signal the instance sent, when the group expects one (from the fake, not the node).
pub fn cfn_check(env: &Environment, group: &NodeGroup, node: &str, instance_id: &str) -> Option<Check> {
    let want = group.expect.cfn_signal?;
    let signals = env.cloudformation.signals_from(instance_id);
    let seen: Vec<String> = signals
        .iter()
        .map(|s| format!("{} {}/{} ({})", s.status, s.stack, s.resource, s.unique_id))
        .collect();
    let passed = match want {
        SignalExpectation::Success => signals
            .iter()
            .any(|s| s.status == "SUCCESS" && s.unique_id == instance_id),
        SignalExpectation::Failure => signals
            .iter()
            .any(|s| s.status == "FAILURE" && s.unique_id == instance_id),
        SignalExpectation::None => signals.is_empty(),
    };
    Some(Check::new(
        crate::assert::registry::CFN_SIGNAL.on(node),
        passed,
        format!("{want:?}").to_uppercase(),
        if seen.is_empty() {
            "no signal".to_string()
        } else {
            seen.join(", ")
        },
    ))
}

/// Appends the failed user-data part (which part, its exit code, its last lines) to the node's failed checks that
/// follow from it (no TokenReview, ...): each failure line then names the first cause, as a pull-request
/// annotation must, not only the one that quotes cloud-init.
pub(crate) fn name_failed_part(n: &crate::run::node::RunningNode, checks: &mut [Check]) {
    let Some(cause) = n.cloud_init.as_ref().and_then(CloudInitReport::failed_parts_cause) else {
        return;
    };
    for c in checks.iter_mut().filter(|c| !c.passed && !c.actual.contains(&cause)) {
        c.actual = format!("{}; {cause}", c.actual);
    }
}

#[cfg(test)]
mod tests {
    use super::{configured_sandbox_image, with_default_tag};

    #[test]
    fn untagged_images_are_latest() {
        assert_eq!(
            with_default_tag("localhost/kubernetes/pause"),
            "localhost/kubernetes/pause:latest"
        );
        assert_eq!(with_default_tag("localhost:5000/pause"), "localhost:5000/pause:latest");
        assert_eq!(with_default_tag("a/pause:3.10"), "a/pause:3.10");
        assert_eq!(with_default_tag("a/pause@sha256:ab"), "a/pause@sha256:ab");
    }

    #[test]
    fn sandbox_image_from_containerd_configs() {
        let v1 = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5\"\n";
        assert_eq!(
            configured_sandbox_image(v1).as_deref(),
            Some("602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5")
        );
        let v2 = "version = 3\n[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = \"localhost/kubernetes/pause\"\n";
        assert_eq!(
            configured_sandbox_image(v2).as_deref(),
            Some("localhost/kubernetes/pause")
        );
        let merged = "[plugins.'io.containerd.cri.v1.images'.pinned_images]\nsandbox = 'localhost/kubernetes/pause'\n";
        assert_eq!(
            configured_sandbox_image(merged).as_deref(),
            Some("localhost/kubernetes/pause")
        );
        assert_eq!(configured_sandbox_image("version = 2\n"), None);
        assert_eq!(configured_sandbox_image("sandbox_image = \"\"\n"), None);
    }
}
