//! Loading scenarios from disk, with errors that point at the file, line and column.
use super::model::Scenario;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// What a run gives every scenario it loads, beside its file: the defaults a file may leave out and the
/// amazon-eks-ami checkout named for every group that names one. Loading reads nothing else (no environment):
/// the same text and defaults give the same scenario.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Defaults {
    /// The Kubernetes version of a scenario that names none (else the built-in default).
    pub kubernetes_version: Option<String>,
    /// The containerd line of a node group that names none (else 2.2).
    pub containerd_line: Option<crate::assets::tools::ContainerdLine>,
    /// The checkout every group with `image.amazonEksAmi` uses instead of its own.
    pub eks_ami: Option<PathBuf>,
    /// The caller's directories a scenario's paths may lead into besides its repository (`scenario::confine`).
    pub allow_paths: Vec<PathBuf>,
    /// The cache directory, where pinned amazon-eks-ami commits are kept; without one none is fetched.
    pub cache_dir: Option<PathBuf>,
    /// Confined mode: a node group whose machine shares the host's kernel is refused ([`super::rules`]).
    pub confined: bool,
}

impl Defaults {
    /// The defaults `settings` give; a malformed version or containerd line is refused naming its variable.
    pub fn from_settings(settings: &crate::settings::Settings) -> Result<Self> {
        use crate::settings::var;
        let invalid = |message: String| Error::ScenarioInvalid {
            file: PathBuf::from("(settings)"),
            message,
        };
        if let Some(v) = &settings.kubernetes_version {
            if crate::assets::check_version(v).is_err() {
                return Err(invalid(format!(
                    "{}='{v}' is not a version like v1.36.3",
                    var::K8S_VERSION
                )));
            }
        }
        // Parsed when the settings were resolved (a bad line is refused there, naming its source).
        let containerd_line = settings.containerd_line;
        Ok(Self {
            kubernetes_version: settings.kubernetes_version.clone(),
            containerd_line,
            eks_ami: settings
                .eks_ami
                .as_ref()
                .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.clone())),
            allow_paths: settings.allow_paths.clone(),
            cache_dir: Some(crate::paths::cache_dir(settings)),
            confined: settings.confined,
        })
    }
}

/// Parses scenario text with the built-in defaults; `file` names it in error messages, and its directory is what
/// the scenario's relative paths are relative to (`scenario::relative`).
pub fn parse(text: &str, file: &Path) -> Result<Scenario> {
    parse_with(text, file, &Defaults::default())
}

/// [`parse`] with a run's `defaults`.
pub fn parse_with(text: &str, file: &Path, defaults: &Defaults) -> Result<Scenario> {
    let dir = super::relative::dir_of(file);
    let _base = super::relative::enter(&dir, &defaults.allow_paths);
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
    absolute_paths(&mut scenario, defaults.cache_dir.as_deref());
    scenario.roots = super::confine::Roots::of_dir(&dir, &defaults.allow_paths);
    apply(&mut scenario, text, defaults);
    if scenario.name.is_empty() {
        scenario.name = file
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "scenario".into());
    }
    super::rules::validate(&scenario, text, file)?;
    if defaults.confined {
        super::rules::confined(&scenario, text, file)?;
    }
    super::iam_rules::check(&scenario, text, file)?;
    check_service_cidr(&scenario, text, file)?;
    Ok(scenario)
}

/// Every path of the scenario made absolute against the scenario file's directory (the user-data file already is,
/// see `user_data.rs`), so the runner, the image builder and `compare` never guess again.
fn absolute_paths(s: &mut Scenario, cache_dir: Option<&Path>) {
    let abs = |p: &mut String| *p = super::relative::resolve(p).to_string_lossy().into_owned();
    for n in &mut s.nodes {
        n.bootstrap.script.as_mut().map(abs);
        if let Some(d) = &mut n.disk {
            abs(&mut d.path);
        }
        if let Some(img) = &mut n.image {
            img.overlay.as_mut().map(abs);
            match &mut img.amazon_eks_ami {
                Some(super::model::AmazonEksAmi::Path(p)) => abs(p),
                Some(super::model::AmazonEksAmi::Git(pin)) => {
                    pin.checkout = cache_dir
                        .map(|c| {
                            crate::node::eks_ami_git::cached(c, &pin.rev)
                                .to_string_lossy()
                                .into_owned()
                        })
                        .unwrap_or_default();
                }
                None => {}
            }
        }
        for f in &mut n.expect.files {
            f.golden.as_mut().map(abs);
        }
    }
}

/// The run's defaults where the file says nothing: its Kubernetes version (a version the file names wins), each
/// group's containerd line, and the amazon-eks-ami checkout that replaces every group's own.
fn apply(s: &mut Scenario, text: &str, defaults: &Defaults) {
    if let Some(v) = &defaults.kubernetes_version {
        let named = serde_yaml_ng::from_str::<serde_yaml_ng::Value>(text)
            .ok()
            .is_some_and(|doc| doc["cluster"].get("kubernetesVersion").is_some());
        if !named {
            s.cluster.kubernetes_version = v.clone();
        }
    }
    for n in &mut s.nodes {
        // A disk of the user's brings its own containerd.
        if n.containerd.is_none() && n.disk.is_none() {
            n.containerd = defaults.containerd_line;
        }
        if let (Some(img), Some(other)) = (&mut n.image, &defaults.eks_ami) {
            if img.amazon_eks_ami.is_some() {
                img.amazon_eks_ami = Some(super::model::AmazonEksAmi::Path(other.to_string_lossy().into_owned()));
            }
        }
    }
}

/// EKS refuses a service range that overlaps the VPC. The check needs two sections, so serde cannot point at it;
/// the error names the line of the key to change (`serviceIpv4Cidr`, else `network`).
fn check_service_cidr(s: &Scenario, text: &str, file: &Path) -> Result<()> {
    let service = ipnet::IpNet::V4(s.cluster.service_cidr());
    let vpc = s.cluster.network.all_cidrs();
    let Some(block) = vpc.iter().find(|b| crate::eks::network::overlap(b, &service)) else {
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
        None => super::rules::invalid(file, format!("cluster: {message}")),
    })
}

/// Loads the scenario file at `path` with a run's `defaults`: the file and what it names are read, nothing is
/// fetched. Fetching the amazon-eks-ami commits it pins is a step of its own ([`Scenario::fetched`]), which every
/// command that runs or lists scenarios takes next, so they agree on whether one applies here.
pub fn load_file(path: &Path, defaults: &Defaults) -> Result<Scenario> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_with(&text, path, defaults)
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
        assert!(s.cluster.providers.is_empty(), "every provider by default");
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
    fn steps_after_the_join_are_refused_where_they_cannot_run() {
        let reboot = format!("{MINIMAL}    after:\n      - do: reboot\n");
        assert_eq!(p(&reboot).unwrap().nodes[0].after.len(), 1);
        let negative = format!(
            "{MINIMAL}    expect:\n      joins: false\n      evidence: [{{ source: kubelet, contains: x }}]\n    after:\n      - do: reboot\n"
        );
        let (_, _, msg) = parse_error(&negative);
        assert!(msg.contains("steps after the join need a node that joins"), "{msg}");
        let many = format!("{MINIMAL}    after:\n{}", "      - do: wait-for-rotation\n".repeat(17));
        let (_, _, msg) = parse_error(&many);
        assert!(msg.contains("17 steps after the join; at most 16"), "{msg}");
        let golden = format!(
            "{MINIMAL}    after:\n      - do: reboot\n        expect:\n          files: [{{ path: /x, golden: g }}]\n"
        );
        let (_, _, msg) = parse_error(&golden);
        assert!(msg.contains("`golden` is for the join's files"), "{msg}");
    }

    #[test]
    fn local_storage_needs_a_vm_of_a_type_with_instance_store() {
        let on_container = format!("{MINIMAL}    instanceType: m5d.4xlarge\n    expect:\n      localStorage: RAID0\n");
        let (line, _, msg) = parse_error(&on_container);
        assert_eq!(line, 7, "{msg}");
        assert!(msg.contains("a container node has none"), "{msg}");
        let no_store = format!("{MINIMAL}    runtime: vm\n    expect:\n      localStorage: RAID0\n");
        let (_, _, msg) = parse_error(&no_store);
        assert!(
            msg.contains("m5d.4xlarge") && msg.contains("m5.large has none"),
            "{msg}"
        );
        let ok = format!(
            "{MINIMAL}    runtime: vm\n    instanceType: m5d.4xlarge\n    expect:\n      localStorage: RAID0\n"
        );
        assert_eq!(
            p(&ok).unwrap().nodes[0].expect.local_storage,
            Some(crate::scenario::expect::LocalStorageExpectation::Raid0)
        );
        let (_, _, msg) = parse_error(&ok.replace("RAID0", "RAID10"));
        assert!(
            msg.contains("RAID10 needs at least 4 instance-store disks") && msg.contains("has 2"),
            "{msg}"
        );
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
        let two =
            format!("{base}    userData: {{ file: fixtures/user-data/wrong-content-type.mime, eksctlAl2: {{}} }}\n");
        assert!(p(&two).unwrap_err().to_string().contains("exactly one"));
        let none = format!("{base}    userData: {{}}\n");
        assert!(p(&none).unwrap_err().to_string().contains("found none"));
        let missing = format!("{base}    userData: {{ file: fixtures/user-data/nope.mime }}\n");
        assert!(p(&missing).unwrap_err().to_string().contains("nope.mime"));
        // IMDSv2-only instances run user data: cloud-init recognises AWS from the node's DMI and uses tokens.
        let v2 = "cluster: { auth: iam }\nnodes:\n  - name: a\n    userData: { eksManagedAl2: {} }\n";
        assert!(p(v2).is_ok());
        let token = "nodes:\n  - name: a\n    imds: { tokens: optional }\n    userData: { eksctlAl2: {} }\n";
        assert!(p(token).unwrap_err().to_string().contains("auth: iam"));
        let args = format!("{base}    bootstrap: {{ args: [x] }}\n    userData: {{ eksManagedAl2: {{}} }}\n");
        assert!(p(&args).unwrap_err().to_string().contains("bootstrap.args"));
        let typo =
            format!("{base}    userData: {{ cloudFormationAl2: {{ bootstrapArguments: \"{{{{cluster.nam}}}}\" }} }}\n");
        assert!(p(&typo).unwrap_err().to_string().contains("cluster.nam"));
        assert!(p(&format!("{base}    userData: {{ eksManagedAl2: {{}} }}\n")).is_ok());
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
        let files = crate::scenario::discover(&[crate::paths::workspace_root().join("scenarios")]).unwrap();
        assert!(files.len() >= 5, "{files:?}");
        for f in files {
            // Parsed, not loaded: loading fetches the amazon-eks-ami commits they pin.
            let text = std::fs::read_to_string(&f).unwrap();
            parse(&text, &f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
    }

    #[test]
    fn a_2024_nodeadm_node_gets_the_containerd_of_its_era() {
        use crate::assets::tools::ContainerdLine;
        let group = |rest: &str| {
            let text = format!("cluster: {{ auth: iam }}\nnodes:\n  - name: a\n{rest}");
            p(&text).unwrap().nodes[0].containerd_line()
        };
        assert_eq!(group("    userData: { nodeadm: {} }\n"), ContainerdLine::V1_7);
        assert_eq!(group("    userData: { karpenter: {} }\n"), ContainerdLine::V1_7);
        assert_eq!(
            group("    userData: { file: fixtures/user-data/al2023/terraform-mime.txt }\n"),
            ContainerdLine::V1_7,
            "a file holding NodeConfig"
        );
        assert_eq!(
            group("    containerd: \"2.2\"\n    userData: { nodeadm: {} }\n"),
            ContainerdLine::V2_2
        );
        assert_eq!(
            group("    image: { amazonEksAmi: ./mine }\n    userData: { nodeadm: {} }\n"),
            ContainerdLine::V2_2,
            "current nodeadm runs today's line"
        );
        assert_eq!(group("    userData: { eksManagedAl2: {} }\n"), ContainerdLine::V2_2);
        assert_eq!(group(""), ContainerdLine::V2_2);
    }

    #[test]
    fn a_runs_defaults_fill_only_what_the_file_leaves_out() {
        use crate::assets::tools::ContainerdLine;
        let file = crate::paths::workspace_root().join("t.yaml");
        let defaults = Defaults {
            kubernetes_version: Some("v1.35.4".into()),
            containerd_line: Some(ContainerdLine::V1_7),
            eks_ami: Some(PathBuf::from("/srv/eks-ami")),
            ..Default::default()
        };
        let unnamed = parse_with(MINIMAL, &file, &defaults).unwrap();
        assert_eq!(unnamed.cluster.kubernetes_version, "v1.35.4");
        assert_eq!(unnamed.nodes[0].containerd_line(), ContainerdLine::V1_7);
        let named = "cluster: { kubernetesVersion: v1.34.4 }\nnodes:\n  - name: a\n    containerd: \"2.2\"\n    \
                     image: { amazonEksAmi: ./mine }\n";
        let named = parse_with(named, &file, &defaults).unwrap();
        assert_eq!(named.cluster.kubernetes_version, "v1.34.4", "the file's version wins");
        assert_eq!(
            named.nodes[0].containerd_line(),
            ContainerdLine::V2_2,
            "the group's line wins"
        );
        let checkout = named.nodes[0]
            .image
            .as_ref()
            .and_then(|i| i.amazon_eks_ami.as_ref())
            .map(|a| a.path());
        assert_eq!(
            checkout,
            Some(Path::new("/srv/eks-ami")),
            "the run's checkout replaces the group's"
        );
        // Without defaults, the built-in ones; and loading reads no environment.
        assert_eq!(
            p(MINIMAL).unwrap().cluster.kubernetes_version,
            crate::assets::DEFAULT_VERSION
        );
        let bad = crate::settings::Settings {
            kubernetes_version: Some("1.35".into()),
            ..Default::default()
        };
        let e = Defaults::from_settings(&bad).unwrap_err().to_string();
        let named = format!("{}='1.35' is not a version", crate::settings::var::K8S_VERSION);
        assert!(e.contains(&named), "{e}");
    }
}
