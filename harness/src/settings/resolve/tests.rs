use super::*;
use crate::settings::ContainerdLine;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |k| map.get(k).cloned()
}

/// A repository with `.config/nodejoin.toml` holding `text`.
fn repo(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".config")).unwrap();
    std::fs::write(dir.path().join(config::FILE), text).unwrap();
    dir
}

const PROFILES: &str = r#"
[profile.default]
kubernetes-version = "v1.35.4"
jobs = 4
eks-ami = "../amazon-eks-ami"
containerd = "1.7"

[profile.ci]
retries = 2
flaky-result = "fail"
jobs = 2
provider = "kind"
"#;

#[test]
fn each_variable_fills_its_field_and_empty_counts_as_unset() {
    let none = Path::new("/");
    let s = resolve(
        &Flags::default(),
        env(&[
            ("NODEJOIN_JOBS", "3"),
            ("NODEJOIN_K8S_VERSION", "v1.35.4"),
            ("NODEJOIN_CONTAINERD_LINE", ""),
            ("NODEJOIN_NODEADM", "/opt/nodeadm"),
            ("NODEJOIN_RUNC_VERSION", "v1.3.0"),
            ("NODEJOIN_HOST_SETUP", "never"),
            ("NODEJOIN_KEEP_ARTIFACTS", ""),
            ("NODEJOIN_SKIP_TRIALS", "local/, kind/v1.35/ ,"),
            ("NODEJOIN_ALLOW_PATHS", "/a::/b"),
            ("GITHUB_ACTIONS", "true"),
        ]),
        none,
    )
    .unwrap();
    assert_eq!(s.jobs, Some(3));
    assert_eq!(s.source("jobs"), Some(Source::Variable));
    assert_eq!(s.skip_trials, ["local/", "kind/v1.35/"]);
    assert_eq!(s.versions(), [Some("v1.35.4".to_string())]);
    assert_eq!(s.containerd_line, None, "empty is unset");
    assert!(!s.keep_artifacts, "empty is unset");
    assert_eq!(s.allow_paths, [PathBuf::from("/a"), PathBuf::from("/b")]);
    assert_eq!(s.tool_bins.get("NODEADM"), Some(&PathBuf::from("/opt/nodeadm")));
    assert_eq!(s.tool_versions.get("RUNC").map(String::as_str), Some("v1.3.0"));
    assert!(s.no_host_setup && s.github_actions);
    assert_eq!(s.profile, None, "no file, no profile named");
    let two = resolve(
        &Flags::default(),
        env(&[("NODEJOIN_K8S_VERSION", "v1.35.4, v1.36.3")]),
        none,
    )
    .unwrap();
    assert_eq!(
        two.versions(),
        [Some("v1.35.4".to_string()), Some("v1.36.3".to_string())]
    );
    let empty = resolve(&Flags::default(), env(&[]), none).unwrap();
    assert_eq!(empty, Settings::default());
}

#[test]
fn every_variable_a_row_names_reaches_its_field() {
    // Each row's variable, given alone, changes the settings and is recorded as the source: no row is dead.
    let dir = repo("[profile.x]\n");
    for row in ROWS.iter().filter(|r| r.var.is_some()) {
        let var = row.var.unwrap();
        let value = match row.key {
            "jobs" | "retries" | "boot-concurrency" => "3",
            "containerd" => "1.7",
            "github-actions" | "confined" => "true",
            "host-setup" => "never",
            "no-tests" => "warn",
            "profile" => "x",
            _ => "/x",
        };
        let s = resolve(&Flags::default(), env(&[(var, value)]), dir.path()).unwrap();
        assert_ne!(s, Settings::default(), "{var} changed nothing");
        assert_eq!(s.source(row.key), Some(Source::Variable), "{var}");
        assert!(crate::settings::help().contains(var), "{var} is not in --help");
    }
}

#[test]
fn a_flag_outranks_its_variable_which_outranks_the_profile() {
    let dir = repo(PROFILES);
    let mut flags = Flags::default();
    flags.set("jobs", ["7"]);
    let s = resolve(&flags, env(&[("NODEJOIN_JOBS", "5")]), dir.path()).unwrap();
    assert_eq!((s.jobs, s.source("jobs")), (Some(7), Some(Source::Flag)));
    let s = resolve(&Flags::default(), env(&[("NODEJOIN_JOBS", "5")]), dir.path()).unwrap();
    assert_eq!((s.jobs, s.source("jobs")), (Some(5), Some(Source::Variable)));
    let s = resolve(&Flags::default(), env(&[]), dir.path()).unwrap();
    assert_eq!((s.jobs, s.source("jobs")), (Some(4), Some(Source::Profile)));
    assert_eq!(s.profile.as_deref(), Some("default"));
    assert_eq!(s.containerd_line, Some(ContainerdLine::V1_7));
    assert_eq!(
        s.eks_ami,
        Some(dir.path().join("../amazon-eks-ami")),
        "from the repository's root"
    );
    assert!(s.allow_paths.is_empty(), "a profile's checkout allows nothing");
    assert_eq!(s.provider, None);
}

#[test]
fn a_named_profile_is_laid_over_default_by_flag_or_variable() {
    let dir = repo(PROFILES);
    let by_var = resolve(&Flags::default(), env(&[("NODEJOIN_PROFILE", "ci")]), dir.path()).unwrap();
    let mut flags = Flags::default();
    flags.set("profile", ["ci"]);
    let by_flag = resolve(&flags, env(&[]), dir.path()).unwrap();
    for s in [by_var, by_flag] {
        assert_eq!(s.profile.as_deref(), Some("ci"));
        assert_eq!((s.jobs, s.retries), (Some(2), Some(2)));
        assert!(s.flaky_fails);
        assert_eq!(s.provider.as_deref(), Some("kind"));
        assert_eq!(s.versions(), [Some("v1.35.4".to_string())], "default's fills the rest");
    }
    let e = resolve(&Flags::default(), env(&[("NODEJOIN_PROFILE", "nightly")]), dir.path()).unwrap_err();
    assert!(e.contains("no profile 'nightly'"), "{e}");
    let e = resolve(&flags, env(&[]), Path::new("/")).unwrap_err();
    assert!(e.contains("--profile ci: no .config/nodejoin.toml"), "{e}");
}

#[test]
fn a_profiles_version_list_makes_several_unless_one_is_given() {
    let dir = repo("[profile.default]\nkubernetes-versions = [\"v1.35.4\", \"v1.36.3\"]\n");
    let s = resolve(&Flags::default(), env(&[]), dir.path()).unwrap();
    assert_eq!(s.versions(), [Some("v1.35.4".to_string()), Some("v1.36.3".to_string())]);
    let s = resolve(
        &Flags::default(),
        env(&[("NODEJOIN_K8S_VERSION", "v1.36.3")]),
        dir.path(),
    )
    .unwrap();
    assert_eq!(
        s.versions(),
        [Some("v1.36.3".to_string())],
        "a version given outranks the list"
    );
}

#[test]
fn a_bad_value_is_refused_naming_its_source() {
    let e = resolve(&Flags::default(), env(&[("NODEJOIN_JOBS", "many")]), Path::new("/")).unwrap_err();
    assert_eq!(e, "NODEJOIN_JOBS: 'many' is not a number");
    let mut flags = Flags::default();
    flags.set("containerd", ["2.9"]);
    let e = resolve(&flags, env(&[]), Path::new("/")).unwrap_err();
    assert!(e.starts_with("--containerd: containerd line '2.9' is unknown"), "{e}");
    let dir = repo("[profile.default]\nflaky-result = \"maybe\"\n");
    let e = resolve(&Flags::default(), env(&[]), dir.path()).unwrap_err();
    assert!(e.starts_with("the profile's flaky-result: "), "{e}");
    let mut flags = Flags::default();
    flags.set("cache-dir", ["/x"]);
    let e = resolve(&flags, env(&[]), Path::new("/")).unwrap_err();
    assert!(e.contains("no setting takes from a flag"), "{e}");
}

#[test]
fn the_callers_checkout_is_allowed_and_paths_merge() {
    let mut flags = Flags::default();
    flags.set("eks-ami", ["/src/amazon-eks-ami"]).set("allow-path", ["/c"]);
    let s = resolve(&flags, env(&[("NODEJOIN_ALLOW_PATHS", "/a")]), Path::new("/")).unwrap();
    assert_eq!(
        s.allow_paths,
        ["/a", "/c", "/src/amazon-eks-ami"].map(PathBuf::from),
        "variable and flag both count, then the caller's checkout"
    );
}
