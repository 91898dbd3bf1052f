//! Loading scenarios from disk, with errors that point at the file, line and column.
use super::model::Scenario;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// A sanity bound on a node group's size; whether the machine can hold the nodes is checked when the scenario
/// runs (`node::capacity`).
pub const MAX_GROUP_NODES: u32 = 1000;

/// Parses scenario text; `file` names it in error messages, and its directory is what the scenario's relative
/// paths are relative to (`scenario::relative`).
pub fn parse(text: &str, file: &Path) -> Result<Scenario> {
    let dir = super::relative::dir_of(file);
    let _base = super::relative::enter(&dir);
    let mut scenario: Scenario = serde_yaml_ng::from_str(text).map_err(|e| {
        let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((0, 0));
        // serde_yaml_ng appends "at line L column C" to some messages; the location is printed separately.
        let message = e.to_string();
        let message = message.split(" at line ").next().unwrap_or(&message).to_string();
        Error::ScenarioParse {
            file: file.to_path_buf(),
            line,
            column,
            message,
        }
    })?;
    absolute_paths(&mut scenario);
    if scenario.name.is_empty() {
        scenario.name = file
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "scenario".into());
    }
    validate(&scenario, text, file)?;
    super::iam_rules::check(&scenario, text, file)?;
    check_service_cidr(&scenario, text, file)?;
    Ok(scenario)
}

/// Every path of the scenario made absolute against the scenario file's directory (the user-data file already is,
/// see `user_data.rs`), so the runner, the image builder and `compare` never guess again.
fn absolute_paths(s: &mut Scenario) {
    let abs = |p: &mut String| *p = super::relative::resolve(p).to_string_lossy().into_owned();
    for n in &mut s.nodes {
        n.bootstrap.script.as_mut().map(abs);
        if let Some(img) = &mut n.image {
            img.overlay.as_mut().map(abs);
            img.amazon_eks_ami.as_mut().map(abs);
            if img.amazon_eks_ami.is_some() {
                if let Some(other) = std::env::var_os(super::model::ENV_EKS_AMI).filter(|v| !v.is_empty()) {
                    img.amazon_eks_ami = Some(
                        std::path::absolute(&other)
                            .unwrap_or(other.into())
                            .to_string_lossy()
                            .into_owned(),
                    );
                }
            }
        }
        for f in &mut n.expect.files {
            f.golden.as_mut().map(abs);
        }
    }
}

/// EKS refuses a service range that overlaps the VPC. The check needs two sections, so serde cannot point at it;
/// the error names the line of the key to change (`serviceIpv4Cidr`, else `network`).
fn check_service_cidr(s: &Scenario, text: &str, file: &Path) -> Result<()> {
    let service = ipnet::IpNet::V4(s.cluster.service_cidr());
    let vpc = s.cluster.network.all_cidrs();
    let Some(block) = vpc.iter().find(|b| super::network::overlap(b, &service)) else {
        return Ok(());
    };
    let (key, message) = if s.cluster.service_ipv4_cidr.is_some() {
        (
            "serviceIpv4Cidr",
            format!("serviceIpv4Cidr {service} overlaps VPC block {block}; EKS needs a service range outside the VPC"),
        )
    } else {
        (
            "network",
            format!("VPC block {block} overlaps {service}, the service range EKS would pick; set serviceIpv4Cidr outside the VPC"),
        )
    };
    let found = text
        .lines()
        .enumerate()
        .find_map(|(i, l)| l.find(&format!("{key}:")).map(|c| (i + 1, c + 1)));
    Err(match found {
        Some((line, column)) => Error::ScenarioParse {
            file: file.to_path_buf(),
            line,
            column,
            message: format!("cluster: {message}"),
        },
        None => invalid(file, format!("cluster: {message}")),
    })
}

fn invalid(file: &Path, message: String) -> Error {
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
fn validate(s: &Scenario, text: &str, file: &Path) -> Result<()> {
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
    if let Ok(v) = std::env::var("NODEJOIN_K8S_VERSION") {
        if !v.is_empty() && crate::assets::check_version(&v).is_err() {
            return Err(invalid(
                file,
                format!("NODEJOIN_K8S_VERSION='{v}' is not a version like v1.36.3"),
            ));
        }
    }
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
        }
        if let Some(ud) = &n.user_data {
            check_user_data(s, n, ud)
                .map_err(|m| group(n, "userData", format!("node group '{}': userData: {m}", n.name)))?;
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
                let golden = std::fs::read_to_string(path).map_err(|e| {
                    group(
                        n,
                        "golden",
                        format!(
                            "node group '{}': golden {}: {e} ({})",
                            n.name,
                            path.display(),
                            super::relative::HINT
                        ),
                    )
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
        if let Some(img) = &n.image {
            check_group_image(img).map_err(|m| group(n, "image", format!("node group '{}': {m}", n.name)))?;
        }
    }
    Ok(())
}

/// One source, files that exist, known placeholders, and no harness-run bootstrap arguments next to it.
fn check_group_image(img: &super::model::GroupImage) -> std::result::Result<(), String> {
    match (&img.overlay, &img.tag, &img.amazon_eks_ami) {
        // Its absence is decided when the scenario runs (`Scenario::not_applicable`): ignored, not invalid.
        (None, None, Some(path)) if !path.trim().is_empty() => Ok(()),
        (None, None, Some(_)) => Err("image.amazonEksAmi is empty".into()),
        (Some(dir), None, None) => {
            let path = Path::new(dir);
            if path.is_dir() {
                Ok(())
            } else {
                Err(format!(
                    "image.overlay {} is not a directory ({})",
                    path.display(),
                    super::relative::HINT
                ))
            }
        }
        (None, Some(tag), None) if !tag.trim().is_empty() => Ok(()),
        (None, Some(_), None) => Err("image.tag is empty".into()),
        _ => Err(
            "image needs exactly one of overlay (a directory), tag (a local image) or amazonEksAmi (a checkout)".into(),
        ),
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
            "give exactly one of file, eksManaged, cloudFormation, eksctl, nodeadm (found {})",
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
    let mut texts: Vec<&String> = Vec::new();
    if ud.file.is_none() && s.cluster.auth != super::model::AuthMode::Iam {
        return Err(format!(
            "{} user data logs the kubelet in the way EKS does (an IAM token): set cluster.auth: iam",
            sources[0]
        ));
    }
    if let Some(m) = &ud.eks_managed {
        texts.extend(m.labels.values().chain(&m.taints));
    }
    if let Some(c) = &ud.cloud_formation {
        texts.push(&c.bootstrap_arguments);
    }
    if let Some(e) = &ud.eksctl {
        texts.extend(e.labels.values().chain(&e.taints));
    }
    let mut part_texts = Vec::new();
    if let Some(n) = &ud.nodeadm {
        for p in &n.parts {
            if !p.spec.is_mapping() {
                return Err("nodeadm.parts[].spec must be a mapping (a NodeConfig's spec)".into());
            }
            collect_strings(&p.spec, &mut part_texts);
        }
    }
    for t in texts.into_iter().chain(part_texts.iter()) {
        super::template::check(t)?;
    }
    Ok(())
}

/// Every string in a YAML value (keys and values), for placeholder checks.
fn collect_strings(v: &serde_yaml_ng::Value, out: &mut Vec<String>) {
    use serde_yaml_ng::Value;
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Sequence(items) => items.iter().for_each(|i| collect_strings(i, out)),
        Value::Mapping(m) => m.iter().for_each(|(k, v)| {
            collect_strings(k, out);
            collect_strings(v, out);
        }),
        Value::Tagged(t) => collect_strings(&t.value, out),
        _ => {}
    }
}

pub fn load_file(path: &Path) -> Result<Scenario> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse(&text, path)
}

/// Every `*.yaml`/`*.yml` file of a directory, sorted; or the files given.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let p = crate::paths::resolve(p);
        if p.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&p)
                .map_err(|e| Error::io(&p, e))?
                .flatten()
                .map(|e| e.path())
                .filter(|f| matches!(f.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
                .collect();
            files.sort();
            out.extend(files);
        } else if p.is_file() {
            out.push(p);
        } else {
            return Err(Error::io(
                &p,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such scenario file or directory"),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::model::*;

    const MINIMAL: &str = "nodes:\n  - name: a\n    bootstrap:\n      args: [\"x\"]\n";

    fn p(text: &str) -> Result<Scenario> {
        parse(text, &crate::paths::workspace_root().join("test.yaml"))
    }

    #[test]
    fn minimal_scenario_gets_defaults() {
        let s = p(MINIMAL).unwrap();
        assert_eq!(s.name, "test");
        assert_eq!(s.cluster_name(), "test");
        assert_eq!(s.cluster.provider, Provider::LOCAL);
        assert_eq!(s.cluster.kubernetes_version, crate::scenario::model::default_version());
        assert_eq!(s.cluster.service_cidr().to_string(), "10.100.0.0/16");
        assert_eq!(s.cluster.network.vpc_cidrs()[0].to_string(), "192.168.0.0/16");
        assert_eq!(s.nodes[0].instance_type, "m5.large");
        assert_eq!(s.nodes[0].imds.tokens, ImdsTokens::Required);
        assert!(s.nodes[0].expect.joins);
    }

    fn parse_error(text: &str) -> (usize, usize, String) {
        match p(text) {
            Err(Error::ScenarioParse {
                line, column, message, ..
            }) => (line, column, message),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn unknown_field_has_line_and_column() {
        let (line, col, msg) = parse_error("nodes:\n  - name: a\n    instanceTipe: m5.large\n    bootstrap: {}\n");
        assert_eq!(line, 3);
        assert_eq!(col, 5);
        assert!(msg.contains("unknown field `instanceTipe`"), "{msg}");
    }

    #[test]
    fn type_errors_have_line() {
        let (line, _, msg) = parse_error("nodes:\n  - name: a\n    count: many\n    bootstrap: {}\n");
        assert_eq!(line, 3);
        assert!(msg.contains("invalid type") || msg.contains("invalid digit"), "{msg}");
        let (line, _, msg) = parse_error("cluster:\n  serviceIpv4Cidr: 10.100.0.0/99\nnodes: []\n");
        assert_eq!(line, 2);
        assert!(!msg.is_empty());
        let (line, _, msg) = parse_error("cluster:\n  providers: [minikube]\nnodes: []\n");
        assert_eq!(line, 2);
        assert!(
            msg.contains("unknown provider 'minikube' (known: local, k3s, kind)"),
            "{msg}"
        );
        let (line, _, msg) = parse_error("cluster:\n  kubernetesVersion: \"1.30\"\nnodes: []\n");
        assert_eq!(line, 2);
        assert!(msg.contains("v1.36.3"), "{msg}");
        let (line, _, msg) = parse_error(&format!("{MINIMAL}    expect:\n      within: soon\n"));
        assert_eq!(line, 6);
        assert!(msg.contains("duration"), "{msg}");
    }

    #[test]
    fn network_errors_have_line() {
        let (line, col, msg) =
            parse_error("cluster:\n  network:\n    vpcCidrs: [10.0.0.0/16]\n    subnetCidr: 10.1.0.0/20\nnodes: []\n");
        assert_eq!((line, col), (2, 3), "{msg}");
        assert!(msg.contains("not inside a VPC block (10.0.0.0/16)"), "{msg}");
        let (line, _, msg) = parse_error("cluster:\n  serviceIpv4Cidr: 10.0.0.0/8\nnodes: []\n");
        assert_eq!(line, 2);
        assert!(msg.contains("/12 to /24"), "{msg}");
        let overlapping = format!(
            "cluster:\n  network: {{ vpcCidrs: [10.0.0.0/16] }}\n  serviceIpv4Cidr: 10.0.0.0/16\n{}",
            MINIMAL
        );
        let (line, col, msg) = parse_error(&overlapping);
        assert_eq!((line, col), (3, 3));
        assert!(msg.contains("overlaps VPC block 10.0.0.0/16"), "{msg}");
        let picked = format!("cluster:\n  network: {{ vpcCidrs: [10.0.0.0/16, 172.20.0.0/16] }}\n{MINIMAL}");
        let (line, _, msg) = parse_error(&picked);
        assert_eq!(line, 2);
        assert!(msg.contains("172.20.0.0/16, the service range EKS would pick"), "{msg}");
        let ok = format!("cluster:\n  network: {{ vpcCidrs: [10.0.0.0/16] }}\n{MINIMAL}");
        assert_eq!(p(&ok).unwrap().cluster.service_cidr().to_string(), "172.20.0.0/16");
    }

    #[test]
    fn invalid_yaml_is_a_parse_error() {
        let (line, _, _) = parse_error("nodes:\n  - name: [unclosed\n");
        assert!(line >= 2);
    }

    #[test]
    fn semantic_errors() {
        assert!(matches!(
            p("nodes: []\n"),
            Err(Error::ScenarioParse { line: 1, column: 1, .. })
        ));
        let negative = format!("{MINIMAL}    expect:\n      joins: false\n");
        let err = p(&negative).unwrap_err().to_string();
        assert!(err.contains("evidence") && err.contains("test.yaml:6:7"), "{err}");
        let missing = "nodes:\n  - name: a\n    bootstrap:\n      script: fixtures/nope.sh\n";
        let err = p(missing).unwrap_err().to_string();
        assert!(err.contains("does not exist") && err.contains("test.yaml:4:7"), "{err}");
        // In the second group, at its own key, not the first group's.
        let count =
            "nodes:\n  - name: a\n    count: 2\n    bootstrap: {}\n  - name: b\n    bootstrap: {}\n    count: 0\n";
        let err = p(count).unwrap_err().to_string();
        assert!(err.contains("count must be") && err.contains("test.yaml:7:5"), "{err}");
        let typo = "nodes:\n  - name: a\n    bootstrap:\n      args: [\"{{cluster.nmae}}\"]\n";
        let err = p(typo).unwrap_err().to_string();
        assert!(err.contains("cluster.nmae") && err.contains("cluster.name"), "{err}");
        let typo =
            format!("{MINIMAL}    expect:\n      identity: {{ username: \"system:node:{{{{instance.dns}}}}\" }}\n");
        let err = p(&typo).unwrap_err().to_string();
        assert!(err.contains("instance.dns"), "{err}");
        let typo = format!(
            "{MINIMAL}    expect:\n      evidence: [{{ source: kubelet, contains: \"{{{{instance.idd}}}}\" }}]\n"
        );
        assert!(p(&typo).unwrap_err().to_string().contains("instance.idd"));
        let dup = "nodes:\n  - name: a\n    bootstrap: {}\n  - name: a\n    bootstrap: {}\n";
        assert!(p(dup).unwrap_err().to_string().contains("twice"));
        // Every error of a node group names a line.
        let fault = format!("{MINIMAL}    faults: [{{ service: imds }}]\n");
        let err = p(&fault).unwrap_err().to_string();
        assert!(err.contains("a fault needs") && err.contains("test.yaml:5:5"), "{err}");
    }

    #[test]
    fn user_data_rules() {
        let base = "cluster: { auth: iam }\nnodes:\n  - name: a\n    imds: { tokens: optional }\n";
        let two = format!("{base}    userData: {{ file: fixtures/user-data/wrong-content-type.mime, eksctl: {{}} }}\n");
        assert!(p(&two).unwrap_err().to_string().contains("exactly one"));
        let none = format!("{base}    userData: {{}}\n");
        assert!(p(&none).unwrap_err().to_string().contains("found none"));
        let missing = format!("{base}    userData: {{ file: fixtures/user-data/nope.mime }}\n");
        assert!(p(&missing).unwrap_err().to_string().contains("nope.mime"));
        // IMDSv2-only instances run user data: cloud-init recognises AWS from the node's DMI and uses tokens.
        let v2 = "cluster: { auth: iam }\nnodes:\n  - name: a\n    userData: { eksManaged: {} }\n";
        assert!(p(v2).is_ok());
        let token = "nodes:\n  - name: a\n    imds: { tokens: optional }\n    userData: { eksctl: {} }\n";
        assert!(p(token).unwrap_err().to_string().contains("auth: iam"));
        let args = format!("{base}    bootstrap: {{ args: [x] }}\n    userData: {{ eksManaged: {{}} }}\n");
        assert!(p(&args).unwrap_err().to_string().contains("bootstrap.args"));
        let typo =
            format!("{base}    userData: {{ cloudFormation: {{ bootstrapArguments: \"{{{{cluster.nam}}}}\" }} }}\n");
        assert!(p(&typo).unwrap_err().to_string().contains("cluster.nam"));
        assert!(p(&format!("{base}    userData: {{ eksManaged: {{}} }}\n")).is_ok());
    }

    /// Expectations and settings only an IAM cluster checks are refused elsewhere, at the key, with a hint.
    #[test]
    fn iam_only_keys_need_auth_iam() {
        let cases = [
            (
                format!("{MINIMAL}    expect:\n      identity: {{ username: x }}\n"),
                (6, 7),
                "expect.identity needs cluster.auth: iam",
            ),
            (
                format!("{MINIMAL}    expect:\n      within: 60s\n      awsAuthChangedBy: eks:node-manager\n"),
                (7, 7),
                "expect.awsAuthChangedBy needs cluster.auth: iam",
            ),
            (
                format!("cluster:\n  auth: bootstrap-token\n  awsAuth: {{ mapUsers: [] }}\n{MINIMAL}"),
                (3, 3),
                "cluster.awsAuth needs",
            ),
            (
                format!("cluster:\n  accessEntries:\n    - principalArn: arn:aws:iam::111122223333:role/R\n{MINIMAL}"),
                (2, 3),
                "cluster.accessEntries needs",
            ),
            (
                format!("{MINIMAL}    roleMapping: {{ via: access-entry }}\n"),
                (5, 5),
                "roleMapping needs",
            ),
            (
                format!("{MINIMAL}    expect:\n      joins: false\n      evidence: [{{ source: authenticator, contains: x }}]\n"),
                (7, 28),
                "evidence from source: authenticator needs",
            ),
        ];
        for (text, at, why) in cases {
            let (line, column, msg) = parse_error(&text);
            assert_eq!((line, column), at, "{msg}\n{text}");
            assert!(msg.contains(why), "{msg}");
            assert!(msg.contains("hint: set `cluster: { auth: iam }`"), "{msg}");
        }
        // The second group is the one named, at its own key.
        let two = "nodes:\n  - name: a\n    bootstrap: {}\n  - name: b\n    expect:\n      identity: { username: x }\n";
        let (line, column, msg) = parse_error(two);
        assert_eq!((line, column), (6, 7));
        assert!(msg.starts_with("node group 'b'"), "{msg}");
        // The same keys are fine with auth: iam.
        let iam = format!("cluster: {{ auth: iam }}\n{MINIMAL}    roleMapping: {{ via: aws-auth }}\n    expect:\n      identity: {{ username: x }}\n      awsAuthChangedBy: eks:node-manager\n");
        assert!(p(&iam).is_ok(), "{:?}", p(&iam).err());
        // An identity check on a node that must not join would never run either.
        let negative = format!("cluster: {{ auth: iam }}\n{MINIMAL}    expect:\n      joins: false\n      evidence: [{{ source: authenticator, contains: x }}]\n      identity: {{ username: x }}\n");
        let (line, _, msg) = parse_error(&negative);
        assert_eq!(line, 9);
        assert!(msg.contains("joins: false"), "{msg}");
    }

    #[test]
    fn bundled_scenarios_parse() {
        let files = discover(&[crate::paths::workspace_root().join("scenarios")]).unwrap();
        assert!(files.len() >= 5, "{files:?}");
        for f in files {
            load_file(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
    }
}
