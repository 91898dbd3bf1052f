//! The checks of a scenario that need more than one field (serde checks each field as it reads it), each error
//! at the key it is about, inside its node group (`position`).
use super::model::Scenario;
use crate::error::{Error, Result};
use std::path::Path;

/// A sanity bound on a node group's size; whether the machine can hold the nodes is checked when the scenario
/// runs (`node::capacity`).
pub const MAX_GROUP_NODES: u32 = 1000;

pub(super) fn invalid(file: &Path, message: String) -> Error {
    Error::ScenarioInvalid {
        file: file.to_path_buf(),
        message,
    }
}

/// An error at `place` (line, column) when it is known.
fn at(file: &Path, place: Option<(usize, usize)>, message: String) -> Error {
    match place {
        Some((line, column)) => Error::ScenarioParse {
            file: file.to_path_buf(),
            line,
            column,
            message,
        },
        None => invalid(file, message),
    }
}

/// Checks that need more than one field, each error at the key it is about (inside its node group).
pub(super) fn validate(s: &Scenario, text: &str, file: &Path) -> Result<()> {
    let top = |key: &str| super::position::locate(text, key, 0).filter(|(_, column)| *column == 1);
    let group = |n: &super::model::NodeGroup, key: &str, message: String| {
        at(file, super::position::in_group(text, n, key), message)
    };
    if s.nodes.is_empty() {
        return Err(at(
            file,
            top("nodes"),
            "`nodes` is empty: a scenario needs at least one node".into(),
        ));
    }
    if !s.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return Err(at(
            file,
            top("name"),
            format!("name '{}' may only hold letters, digits and '-'", s.name),
        ));
    }
    // Both become placeholder values (`{{cluster.name}}`, `{{cluster.region}}`) that may end up in node names,
    // file contents and paths: held to what EKS and EC2 accept, so neither can carry `/` or `..`.
    let nested = |key: &str| {
        super::position::locate(text, "cluster", 0).and_then(|(line, _)| super::position::locate(text, key, line))
    };
    if let Some(name) = &s.cluster.name {
        super::names::eks_cluster(name).map_err(|m| at(file, nested("name"), m))?;
    }
    super::names::region(&s.cluster.region).map_err(|m| at(file, nested("region"), m))?;
    let mut names = std::collections::BTreeSet::new();
    for n in &s.nodes {
        let e = &n.expect;
        let texts = n
            .bootstrap
            .args
            .iter()
            .chain(n.bootstrap.env.values())
            .chain(e.labels.values())
            .chain(e.labels_exactly.iter().flat_map(|l| l.values()))
            .chain(e.node_name.iter())
            .chain(e.provider_id.iter())
            .chain(e.cluster_dns.iter().flatten())
            .chain(e.evidence.iter().map(|ev| &ev.contains))
            .chain(e.identity.iter().flat_map(|i| i.username.iter().chain(&i.groups)))
            .chain(e.aws_auth_changed_by.iter());
        for t in texts {
            super::template::check(t).map_err(|m| group(n, "name", format!("node group '{}': {m}", n.name)))?;
        }
        super::names::node_group(&n.name).map_err(|m| group(n, "name", m))?;
        if e.calls.as_ref().is_some_and(|c| c.is_empty()) {
            return Err(group(
                n,
                "calls",
                format!("node group '{}': `calls` sets no rule (allow, exactly, count, max, noneAfterReady), so it would check nothing", n.name),
            ));
        }
        // A pattern with no name in it would turn every check around: a node that broke in any way (never
        // booted, never joined) would then pass. Each must name something.
        if let Some(p) = e
            .failing_checks
            .iter()
            .find(|p| p.replace(['*', ' '], "").chars().count() < 3)
        {
            return Err(group(
                n,
                "failingChecks",
                format!(
                    "node group '{}': failingChecks pattern {p:?} names no check (at least 3 characters besides `*`): \
                     it would turn every check around, so a node that broke in any way would pass",
                    n.name
                ),
            ));
        }
        if let Some(name) = &e.node_name {
            super::names::node_name(name).map_err(|m| group(n, "nodeName", format!("node group '{}': {m}", n.name)))?;
        }
        if !names.insert(&n.name) {
            return Err(group(n, "name", format!("node group name '{}' is used twice", n.name)));
        }
        if n.count == 0 || n.count > MAX_GROUP_NODES {
            return Err(group(
                n,
                "count",
                format!("node group '{}': count must be 1..={MAX_GROUP_NODES} (what this machine can hold is checked when it runs)", n.name),
            ));
        }
        let console = n
            .expect
            .evidence
            .iter()
            .any(|e| e.source == super::expect::EvidenceSource::Console);
        let machine = n.capabilities().kind;
        if console && !machine.console {
            return Err(group(
                n,
                "evidence",
                format!(
                    "node group '{}': evidence from the console needs a machine with a serial console: runtime {} \
                     has none (`runtime: vm` has one)",
                    n.name, machine.name
                ),
            ));
        }
        if !n.expect.joins && n.expect.evidence.is_empty() {
            return Err(group(
                n,
                "joins",
                format!("node group '{}': a negative expectation (joins: false) needs `evidence` saying why the node must fail", n.name),
            ));
        }
        if let Some(script) = &n.bootstrap.script {
            let path = Path::new(script);
            if !path.is_file() {
                return Err(group(
                    n,
                    "script",
                    format!(
                        "node group '{}': bootstrap script {} does not exist ({})",
                        n.name,
                        path.display(),
                        super::relative::HINT
                    ),
                ));
            }
            s.roots
                .read(path, "bootstrap script", super::confine::MAX_FILE)
                .map_err(|m| group(n, "script", format!("node group '{}': {m}", n.name)))?;
        }
        if let Some(ud) = &n.user_data {
            check_user_data(s, n, ud)
                .map_err(|m| group(n, "userData", format!("node group '{}': userData: {m}", n.name)))?;
        }
        if !n.expect.through_api_server.is_empty() && !n.expect.pod_runs {
            return Err(group(
                n,
                "throughApiServer",
                format!(
                    "node group '{}': throughApiServer acts on the pod `podRuns` runs on the node: it needs podRuns: true",
                    n.name
                ),
            ));
        }
        if n.expect.deterministic && n.count < 2 {
            return Err(group(
                n,
                "deterministic",
                format!("node group '{}': deterministic needs count: 2 or more", n.name),
            ));
        }
        if n.expect.executables.is_some() && n.user_data.is_some() {
            return Err(group(
                n,
                "executables",
                format!(
                    "node group '{}': executables traces the harness-run bootstrap; it does not apply to userData",
                    n.name
                ),
            ));
        }
        if n.expect.local_storage.is_some()
            && (!machine.instance_store || crate::eks::instance_store::count(&n.instance_type) == 0)
        {
            return Err(group(
                n,
                "localStorage",
                format!(
                    "node group '{}': localStorage needs instance-store disks: runtime: vm and an instance type \
                     that has them (nodejoin knows {}); {} has none",
                    n.name,
                    crate::eks::instance_store::types().join(", "),
                    if machine.instance_store {
                        n.instance_type.as_str()
                    } else {
                        "a container node"
                    }
                ),
            ));
        }
        if let Some(why) = skew(s, n) {
            return Err(group(n, "kubeletVersion", format!("node group '{}': {why}", n.name)));
        }
        if let Some((key, why)) = super::step_rules::check(s, n, machine) {
            return Err(group(n, key, format!("node group '{}': {why}", n.name)));
        }
        if n.expect.local_storage == Some(super::expect::LocalStorageExpectation::Raid10) {
            let disks = crate::eks::instance_store::count(&n.instance_type);
            if disks < 4 {
                return Err(group(
                    n,
                    "localStorage",
                    format!(
                        "node group '{}': RAID10 needs at least 4 instance-store disks (setup-local-disks refuses \
                         fewer); {} has {disks}",
                        n.name, n.instance_type
                    ),
                ));
            }
        }
        if n.expect.idempotent && n.user_data.is_some() {
            return Err(group(
                n,
                "idempotent",
                format!(
                    "node group '{}': idempotent re-runs the harness-run bootstrap; it does not apply to userData",
                    n.name
                ),
            ));
        }
        for f in &n.expect.files {
            if let Some(g) = &f.golden {
                let path = Path::new(g);
                let golden = s
                    .roots
                    .read_text(path, "golden", super::confine::MAX_FILE)
                    .map_err(|e| {
                        let hint = if path.exists() {
                            String::new()
                        } else {
                            format!(" ({})", super::relative::HINT)
                        };
                        group(n, "golden", format!("node group '{}': {e}{hint}", n.name))
                    })?;
                super::template::check(&golden).map_err(|m| {
                    group(
                        n,
                        "golden",
                        format!("node group '{}': golden {}: {m}", n.name, path.display()),
                    )
                })?;
            }
        }
        for f in &n.faults {
            if f.empty_private_dns_name && f.service != super::model::FakeService::Ec2 {
                return Err(group(
                    n,
                    "emptyPrivateDnsName",
                    format!(
                        "node group '{}': emptyPrivateDnsName is a fault of service: ec2",
                        n.name
                    ),
                ));
            }
            if f.status.is_none() && f.latency.is_none() && !f.hang && !f.empty_private_dns_name {
                return Err(group(
                    n,
                    "faults",
                    format!(
                        "node group '{}': a fault needs status, latency, hang or emptyPrivateDnsName",
                        n.name
                    ),
                ));
            }
            if f.status.is_some_and(|s| !(100..=599).contains(&s)) {
                return Err(group(
                    n,
                    "status",
                    format!("node group '{}': fault status must be an HTTP status", n.name),
                ));
            }
        }
        if let Some(disk) = &n.disk {
            super::own_disk::check(n, disk, &s.roots)
                .map_err(|m| group(n, "disk", format!("node group '{}': disk: {m}", n.name)))?;
        }
        if let Some(img) = &n.image {
            check_group_image(img, &s.roots).map_err(|m| group(n, "image", format!("node group '{}': {m}", n.name)))?;
        }
    }
    Ok(())
}

/// One source (or amazon-eks-ami with an overlay over it: a custom AMI), and files that exist.
fn check_group_image(img: &super::model::GroupImage, roots: &super::confine::Roots) -> std::result::Result<(), String> {
    match (&img.overlay, &img.tag, &img.amazon_eks_ami) {
        (None, None, None) => Err(
            "image needs one of overlay (a directory), tag (a local image) or amazonEksAmi (a checkout), or \
             amazonEksAmi with an overlay over it (a custom AMI)"
                .into(),
        ),
        // A local image is whole: nothing is built from or laid over it.
        (Some(_), Some(_), _) | (_, Some(_), Some(_)) => Err(
            "image.tag names a whole image: give it alone (overlay and amazonEksAmi build one, together or apart)"
                .into(),
        ),
        (None, Some(tag), None) if tag.trim().is_empty() => Err("image.tag is empty".into()),
        (None, Some(_), None) => Ok(()),
        (overlay, None, ami) => {
            if let Some(ami) = ami {
                check_eks_ami(ami, roots)?;
            }
            overlay.as_deref().map_or(Ok(()), |dir| check_overlay(dir, roots))
        }
    }
}

/// A checkout that is there is inside the roots; its absence is decided when the scenario runs
/// (`Scenario::not_applicable`): ignored, not invalid. A pin is fetched into nodejoin's cache, outside every root:
/// only network transports and a fixed commit.
fn check_eks_ami(ami: &super::model::AmazonEksAmi, roots: &super::confine::Roots) -> std::result::Result<(), String> {
    use super::model::AmazonEksAmi;
    match ami {
        AmazonEksAmi::Path(path) if path.trim().is_empty() => Err("image.amazonEksAmi is empty".into()),
        AmazonEksAmi::Path(path) if Path::new(path).exists() => {
            roots.check(Path::new(path), "image.amazonEksAmi").map(|_| ())
        }
        AmazonEksAmi::Path(_) => Ok(()),
        AmazonEksAmi::Git(pin) => crate::node::eks_ami_git::check_pin(&pin.git, &pin.rev),
    }
}

fn check_overlay(dir: &str, roots: &super::confine::Roots) -> std::result::Result<(), String> {
    let path = Path::new(dir);
    if path.is_dir() {
        roots.check(path, "image.overlay").map(|_| ())
    } else {
        Err(format!(
            "image.overlay {} is not a directory ({})",
            path.display(),
            super::relative::HINT
        ))
    }
}

fn check_user_data(
    s: &Scenario,
    n: &super::model::NodeGroup,
    ud: &super::model::UserDataSpec,
) -> std::result::Result<(), String> {
    let sources = ud.sources();
    if sources.len() != 1 {
        return Err(format!(
            "give exactly one of file, command, {} (found {})",
            super::flavors::KEYS.join(", "),
            if sources.is_empty() {
                "none".to_string()
            } else {
                sources.join(", ")
            }
        ));
    }
    if !n.bootstrap.args.is_empty() || !n.bootstrap.env.is_empty() {
        return Err("bootstrap.args and bootstrap.env are for the harness-run bootstrap; with userData the user data calls /etc/eks/bootstrap.sh".into());
    }
    // A file was read and checked while parsing (user_data.rs), where its line is known.
    let Some(generator) = &ud.generator else {
        return Ok(());
    };
    if s.cluster.auth != super::model::AuthMode::Iam {
        return Err(format!(
            "{} user data logs the kubelet in the way EKS does (an IAM token): set cluster.auth: iam",
            sources[0]
        ));
    }
    generator.check()?;
    for t in generator.texts() {
        super::template::check(&t)?;
    }
    Ok(())
}

/// Confined mode: every node group's machine must have a kernel of its own (`MachineKind::own_kernel`); a
/// container node shares the host's, and its root reaches it (a fresh procfs: `kernel.core_pattern`), so it is
/// refused at the group's `name`, with what would confine it.
pub(super) fn confined(s: &Scenario, text: &str, file: &Path) -> Result<()> {
    for n in &s.nodes {
        let kind = n.capabilities().kind;
        if !kind.own_kernel {
            return Err(at(
                file,
                super::position::in_group(text, n, "name"),
                format!(
                    "node group '{}': confined mode takes only machines that cannot reach this host's kernel, and \
                     a {} node shares it (its root can mount a fresh procfs and write the host's kernel \
                     parameters): give the group `runtime: vm`, or run without confined mode only code you would \
                     run as root here",
                    n.name, kind.name
                ),
            ));
        }
    }
    Ok(())
}

/// Kubernetes' version skew policy for a group's own kubelet (`kubeletVersion`): up to three minor versions older
/// than kube-apiserver, never newer. Not judged for a cluster version the scenario does not apply to (that trial
/// is ignored, with its reason).
fn skew(s: &super::model::Scenario, n: &super::model::NodeGroup) -> Option<String> {
    let kubelet = n.kubelet_version.as_deref()?;
    if n.disk.is_some() {
        return Some("`kubeletVersion` names the kubelet nodejoin builds; a disk of its own brings its own".into());
    }
    let api = &s.cluster.kubernetes_version;
    if s.cluster
        .kubernetes_versions
        .as_ref()
        .and_then(|v| v.unsupported(api))
        .is_some()
    {
        return None;
    }
    super::versions::skew("kubeletVersion", kubelet, api)
}

#[cfg(test)]
mod tests {
    use crate::error::Error;

    fn parse(text: &str) -> crate::error::Result<crate::scenario::model::Scenario> {
        super::super::load::parse(text, &crate::paths::workspace_root().join("test.yaml"))
    }

    /// The API server's requests act on the `podRuns` pod: asked for without it, the scenario is refused at its
    /// key, naming what is missing.
    #[test]
    fn confined_mode_refuses_a_container_node_and_takes_a_vm() {
        let confined = crate::scenario::load::Defaults {
            confined: true,
            ..Default::default()
        };
        let f = std::path::Path::new("s.yaml");
        let container = "nodes:\n  - name: n\n    bootstrap:\n      args: [x]\n";
        let e = crate::scenario::load::parse_with(container, f, &confined)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("confined mode") && e.contains("a container node shares it") && e.contains(":2:"),
            "{e}"
        );
        parse(container).expect("outside confined mode it loads");
        let vm = std::fs::read_to_string(crate::paths::workspace_root().join("scenarios/vm-al2023.yaml")).unwrap();
        crate::scenario::load::parse_with(
            &vm,
            &crate::paths::workspace_root().join("scenarios/vm-al2023.yaml"),
            &confined,
        )
        .expect("a VM node loads in confined mode");
    }

    #[test]
    fn a_failing_checks_pattern_must_name_a_check() {
        for bad in ["\"*\"", "\"**\"", "\"* *\"", "\"a*\""] {
            let text = format!("nodes:\n  - name: n\n    expect:\n      failingChecks: [{bad}]\n");
            let e = parse(&text).unwrap_err().to_string();
            assert!(e.contains("names no check") && e.contains(":4:"), "{bad}: {e}");
        }
        parse("nodes:\n  - name: n\n    expect:\n      failingChecks: [\"calls imds * at most 30\"]\n").unwrap();
    }

    #[test]
    fn through_api_server_needs_pod_runs() {
        let base = "nodes:\n  - name: a\n    bootstrap:\n      args: [\"x\"]\n    expect:\n";
        let without = format!("{base}      throughApiServer: [exec, logs, portForward]\n");
        match parse(&without) {
            Err(Error::ScenarioParse { line, message, .. }) => {
                assert_eq!(line, 6, "{message}");
                assert!(message.contains("needs podRuns: true"), "{message}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let with = format!("{base}      podRuns: true\n      throughApiServer: [exec, logs, portForward]\n");
        let s = parse(&with).unwrap();
        use crate::scenario::model::ApiServerAction::*;
        assert_eq!(s.nodes[0].expect.through_api_server, [Exec, Logs, PortForward]);
        let typo = format!("{base}      podRuns: true\n      throughApiServer: [attach]\n");
        assert!(parse(&typo)
            .unwrap_err()
            .to_string()
            .contains("unknown variant `attach`"));
    }

    #[test]
    fn a_groups_kubelet_keeps_to_the_skew_policy() {
        let sc = |api: &str, kubelet: &str| {
            format!(
                "cluster:\n  kubernetesVersion: {api}\nnodes:\n  - name: a\n    kubeletVersion: {kubelet}\n    bootstrap:\n      args: [\"x\"]\n"
            )
        };
        assert!(parse(&sc("v1.37.2", "v1.34.4")).is_ok(), "three minors older");
        assert!(parse(&sc("v1.36.3", "v1.36.3")).is_ok());
        match parse(&sc("v1.36.3", "v1.37.2")) {
            Err(Error::ScenarioParse { line, message, .. }) => {
                assert_eq!(line, 5, "{message}");
                assert!(
                    message.contains("kubeletVersion v1.37.2 is newer than the API server's v1.36.3"),
                    "{message}"
                );
                assert!(message.contains("up to three minor versions older than kube-apiserver, never newer"));
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let msg = parse(&sc("v1.37.2", "v1.33.1")).unwrap_err().to_string();
        assert!(
            msg.contains("is 4 minor versions older than the API server's v1.37.2"),
            "{msg}"
        );
        let msg = parse(&sc("v1.36.3", "1.34")).unwrap_err().to_string();
        assert!(msg.contains("version '1.34' must look like v1.34.4"), "{msg}");
    }
}
