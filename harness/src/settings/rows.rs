//! Every setting, one row each: its key (the flag's long name, the profile's key), its variable, whether a flag
//! and a profile may give it, and how its value is set. [`super::resolve`] applies the same precedence to every
//! row (flag > variable > profile > unset, the consumer's default), `--help` and the book list the rows, and the
//! profile file is checked against them: a setting exposed three ways is one row plus its consumer.
use super::{var, FlakyResult, NoTests, Settings};
use std::path::PathBuf;

/// One setting.
pub struct Row {
    /// The flag's long name (`--jobs`) and the profile's key (`jobs = 2`).
    pub key: &'static str,
    /// Its `NODEJOIN_*` variable, if it has one.
    pub var: Option<&'static str>,
    /// Whether a command line may give it (the CLI passes it under `key`).
    pub flag: bool,
    /// The profile keys that give it, the first found winning (none: a profile cannot).
    pub profile: &'static [&'static str],
    /// How the variable's text is cut into a list (`,` or `:`); none for a single value.
    pub list: Option<char>,
    /// A path: a profile's relative one is taken from the folder holding `.config/`.
    pub path: bool,
    /// The flag's values and the variable's are added together instead of the first winning.
    pub merge: bool,
    /// A profile's value must stay inside the repository (a relative path without `..`): nodejoin writes there as
    /// root, and what a repository allows itself is no bound (its variable may name any place).
    pub inside_repository: bool,
    /// What it does, for `--help` and the book's command-line page.
    pub help: &'static str,
    /// Sets the field from the values given (never empty); an error says what is wrong with them.
    pub set: fn(&mut Settings, Vec<String>) -> Result<(), String>,
}

/// A row with the defaults most have: a variable only, one value.
const fn row(key: &'static str, var: &'static str, help: &'static str, set: Set) -> Row {
    Row {
        key,
        var: Some(var),
        flag: false,
        profile: &[],
        list: None,
        path: false,
        merge: false,
        inside_repository: false,
        help,
        set,
    }
}

type Set = fn(&mut Settings, Vec<String>) -> Result<(), String>;

/// The one value of a single-valued row (the last given).
fn one(values: Vec<String>) -> String {
    values.into_iter().next_back().unwrap_or_default()
}

fn number<T: std::str::FromStr>(values: Vec<String>) -> Result<T, String> {
    let v = one(values);
    v.parse().map_err(|_| format!("'{v}' is not a number"))
}

/// A setter of a text field (the one value given).
macro_rules! text {
    ($field:ident) => {
        |s, v| {
            s.$field = Some(one(v));
            Ok(())
        }
    };
}

/// A setter of a path field.
macro_rules! path {
    ($field:ident) => {
        |s, v| {
            s.$field = Some(PathBuf::from(one(v)));
            Ok(())
        }
    };
}

/// A setter of a number field; a value that is no number is refused.
macro_rules! number {
    ($field:ident) => {
        |s, v| {
            s.$field = Some(number(v)?);
            Ok(())
        }
    };
}

/// The rows, in the order `--help` lists them.
pub const ROWS: &[Row] = &[
    Row {
        flag: true,
        profile: &["kubernetes-versions", "kubernetes-version"],
        list: Some(','),
        ..row(
            "kubernetes-version",
            var::K8S_VERSION,
            "Kubernetes version of scenarios that name none, or several, comma-separated (`run --kubernetes-version`)",
            |s, v| {
                s.set_versions(v);
                Ok(())
            },
        )
    },
    row(
        "providers",
        var::PROVIDERS,
        "providers the cargo-test trials are made for (comma-separated; default all)",
        text!(providers),
    ),
    row(
        "require-providers",
        var::REQUIRE_PROVIDERS,
        "providers that must run: a trial that cannot is a failure, not a skip",
        text!(require_providers),
    ),
    Row {
        list: Some(','),
        ..row(
            "skip-trials",
            var::SKIP_TRIALS,
            "cargo-test trials listed as ignored: those whose name contains one of these (comma-separated, e.g. `local/`)",
            |s, v| {
                s.skip_trials = v;
                Ok(())
            },
        )
    },
    Row {
        flag: true,
        profile: &["jobs"],
        ..row("jobs", var::JOBS, "scenarios run at once (`run --jobs`)", number!(jobs))
    },
    Row {
        path: true,
        ..row(
            "scenarios",
            var::SCENARIOS,
            "the folder the cargo-test trials are made from (default: the test's own)",
            path!(scenarios),
        )
    },
    Row {
        flag: true,
        ..row(
            "profile",
            var::PROFILE,
            "the profile of .config/nodejoin.toml a run uses (`run --profile`; default: default)",
            text!(profile),
        )
    },
    Row {
        flag: true,
        profile: &["retries"],
        ..row(
            "retries",
            var::RETRIES,
            "runs of a failed scenario again before it counts as failed (`run --retries`)",
            number!(retries),
        )
    },
    Row {
        flag: true,
        profile: &["containerd"],
        ..row(
            "containerd",
            var::CONTAINERD_LINE,
            "containerd line of node groups that name none: 2.2, 1.7, 2.3 or 2.4 (`run --containerd`)",
            |s, v| {
                s.containerd_line = Some(one(v).parse()?);
                Ok(())
            },
        )
    },
    Row {
        flag: true,
        profile: &["eks-ami"],
        path: true,
        ..row(
            "eks-ami",
            var::EKS_AMI,
            "amazon-eks-ami checkout for every group naming one (`run --eks-ami`)",
            path!(eks_ami),
        )
    },
    Row {
        flag: true,
        list: Some(':'),
        merge: true,
        ..row(
            "allow-path",
            var::ALLOW_PATHS,
            "directories outside a scenario's repository its paths may lead into (colon-separated; `--allow-path`)",
            |s, v| {
                s.allow_paths.extend(v.into_iter().map(PathBuf::from));
                Ok(())
            },
        )
    },
    Row {
        profile: &["artifacts-dir"],
        path: true,
        inside_repository: true,
        ..row(
            "artifacts-dir",
            var::ARTIFACTS_DIR,
            "where runs write reports and artifacts (default target/nodejoin)",
            path!(artifacts_dir),
        )
    },
    Row {
        flag: true,
        profile: &["confined"],
        ..row(
            "confined",
            var::CONFINED,
            "true: every node must be a machine that cannot reach the host's kernel (a VM); container nodes are \
             refused when their scenario loads (`run --confined`)",
            |s, v| {
                s.confined = match one(v).as_str() {
                    "true" | "1" => true,
                    "false" | "0" => false,
                    other => return Err(format!("'{other}' is not true or false")),
                };
                Ok(())
            },
        )
    },
    row(
        "keep-artifacts",
        var::KEEP_ARTIFACTS,
        "keep every scenario's artifacts, not only failed and negative ones",
        |s, _| {
            s.keep_artifacts = true;
            Ok(())
        },
    ),
    row(
        "cache-dir",
        var::CACHE_DIR,
        "the cache of binaries and builds (default ~/.cache/nodejoin)",
        path!(cache_dir),
    ),
    Row {
        flag: true,
        ..row(
            "fixtures",
            var::FIXTURES,
            "a nodejoin checkout's fixtures/ to use instead of the files built into the binary (`--dev-checkout`)",
            path!(fixtures),
        )
    },
    row(
        "k8s-assets",
        var::K8S_ASSETS,
        "a directory holding etcd, kube-apiserver, kube-controller-manager and kubelet",
        path!(k8s_assets),
    ),
    row(
        "k8s-release-url",
        var::K8S_RELEASE_URL,
        "mirror of Kubernetes' release downloads",
        text!(k8s_release_url),
    ),
    row(
        "etcd-release-url",
        var::ETCD_RELEASE_URL,
        "mirror of etcd's release downloads",
        text!(etcd_release_url),
    ),
    row(
        "github-release-url",
        var::GITHUB_RELEASE_URL,
        "mirror of github.com's release downloads (containerd, runc, aws-iam-authenticator)",
        text!(github_release_url),
    ),
    row(
        "node-image",
        var::NODE_IMAGE,
        "a node image of the user's for every scenario",
        text!(node_image),
    ),
    row(
        "base-image",
        var::BASE_IMAGE,
        "the base image the node image is built on",
        text!(base_image),
    ),
    row(
        "debian-suite",
        var::DEBIAN_SUITE,
        "the Debian suite the base image is bootstrapped from",
        text!(debian_suite),
    ),
    row(
        "boot-concurrency",
        var::BOOT_CONCURRENCY,
        "node containers started at once",
        number!(boot_concurrency),
    ),
    row(
        "vm-accel",
        var::VM_ACCEL,
        "how VM nodes run: auto (KVM where it boots a stock kernel, else TCG), kvm or tcg",
        text!(vm_accel),
    ),
    row(
        "endpoints-ca",
        var::ENDPOINTS_CA,
        "a directory with the CA (ca.pem, ca-key.pem) AWS's names are served under, which a disk of your own trusts",
        path!(endpoints_ca),
    ),
    row(
        "host-setup",
        var::HOST_SETUP,
        "never: do not install packages or start Docker, only report what is missing",
        |s, v| {
            s.no_host_setup = one(v) == "never";
            Ok(())
        },
    ),
    row("kind-image", var::KIND_IMAGE, "the kind node image", text!(kind_image)),
    row(
        "kind-restricted",
        var::KIND_RESTRICTED,
        "how kind's --privileged is replaced: always, never or sometimes",
        text!(kind_restricted),
    ),
    row("k3s-image", var::K3S_IMAGE, "the k3s image", text!(k3s_image)),
    Row {
        var: None,
        flag: true,
        profile: &["provider"],
        ..row(
            "provider",
            "",
            "the cluster provider a run uses: local, k3s or kind (`run --provider`, a profile's `provider`)",
            text!(provider),
        )
    },
    Row {
        var: None,
        profile: &["flaky-result"],
        ..row(
            "flaky-result",
            "",
            "pass or fail: whether a scenario that passed on a retry fails the run (a profile's `flaky-result`)",
            |s, v| {
                s.flaky_fails = one(v).parse::<FlakyResult>()? == FlakyResult::Fail;
                Ok(())
            },
        )
    },
    Row {
        flag: true,
        profile: &["no-tests"],
        ..row(
            "no-tests",
            var::NO_TESTS,
            "fail (exit 4, the default), warn or pass: a run in which nothing ran, as nextest's (`run --no-tests`)",
            |s, v| {
                s.no_tests = one(v).parse::<NoTests>()?;
                Ok(())
            },
        )
    },
    row(
        "github-actions",
        var::GITHUB_ACTIONS,
        "set by GitHub Actions (true): failures are also written as annotations",
        |s, v| {
            s.github_actions = one(v) == "true";
            Ok(())
        },
    ),
    row(
        "github-workspace",
        var::GITHUB_WORKSPACE,
        "set by GitHub Actions: the checkout's root, which annotations name files from",
        path!(github_workspace),
    ),
];

/// The row of `key`.
pub fn find(key: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.key == key)
}

/// Every key a profile may set.
pub fn profile_keys() -> impl Iterator<Item = &'static str> {
    ROWS.iter().flat_map(|r| r.profile.iter().copied())
}

/// The row a profile key sets.
pub fn of_profile_key(key: &str) -> Option<&'static Row> {
    ROWS.iter().find(|r| r.profile.contains(&key))
}
