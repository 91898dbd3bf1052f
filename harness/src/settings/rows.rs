//! Every setting, one row each: its key (the flag's long name, the profile's key), its variable, whether a flag
//! and a profile may give it, and how its value is set. [`super::resolve`] applies the same precedence to every
//! row (flag > variable > profile > unset, the consumer's default), `--help` and the book list the rows, and the
//! profile file is checked against them: a setting exposed three ways is one row plus its consumer.
use super::{var, FlakyResult, Settings};
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
        |s, v| {
            s.providers = Some(one(v));
            Ok(())
        },
    ),
    row(
        "require-providers",
        var::REQUIRE_PROVIDERS,
        "providers that must run: a trial that cannot is a failure, not a skip",
        |s, v| {
            s.require_providers = Some(one(v));
            Ok(())
        },
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
        ..row("jobs", var::JOBS, "scenarios run at once (`run --jobs`)", |s, v| {
            s.jobs = Some(number(v)?);
            Ok(())
        })
    },
    Row {
        path: true,
        ..row(
            "scenarios",
            var::SCENARIOS,
            "the folder the cargo-test trials are made from (default: the test's own)",
            |s, v| {
                s.scenarios = Some(PathBuf::from(one(v)));
                Ok(())
            },
        )
    },
    Row {
        flag: true,
        ..row(
            "profile",
            var::PROFILE,
            "the profile of .config/nodejoin.toml a run uses (`run --profile`; default: default)",
            |s, v| {
                s.profile = Some(one(v));
                Ok(())
            },
        )
    },
    Row {
        flag: true,
        profile: &["retries"],
        ..row(
            "retries",
            var::RETRIES,
            "runs of a failed scenario again before it counts as failed (`run --retries`)",
            |s, v| {
                s.retries = Some(number(v)?);
                Ok(())
            },
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
            |s, v| {
                s.eks_ami = Some(PathBuf::from(one(v)));
                Ok(())
            },
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
        ..row(
            "artifacts-dir",
            var::ARTIFACTS_DIR,
            "where runs write reports and artifacts (default target/nodejoin)",
            |s, v| {
                s.artifacts_dir = Some(PathBuf::from(one(v)));
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
        |s, v| {
            s.cache_dir = Some(PathBuf::from(one(v)));
            Ok(())
        },
    ),
    Row {
        flag: true,
        ..row(
            "fixtures",
            var::FIXTURES,
            "a nodejoin checkout's fixtures/ to use instead of the files built into the binary (`--dev-checkout`)",
            |s, v| {
                s.fixtures = Some(PathBuf::from(one(v)));
                Ok(())
            },
        )
    },
    row(
        "k8s-assets",
        var::K8S_ASSETS,
        "a directory holding etcd, kube-apiserver, kube-controller-manager and kubelet",
        |s, v| {
            s.k8s_assets = Some(PathBuf::from(one(v)));
            Ok(())
        },
    ),
    row(
        "k8s-release-url",
        var::K8S_RELEASE_URL,
        "mirror of Kubernetes' release downloads",
        |s, v| {
            s.k8s_release_url = Some(one(v));
            Ok(())
        },
    ),
    row(
        "etcd-release-url",
        var::ETCD_RELEASE_URL,
        "mirror of etcd's release downloads",
        |s, v| {
            s.etcd_release_url = Some(one(v));
            Ok(())
        },
    ),
    row(
        "github-release-url",
        var::GITHUB_RELEASE_URL,
        "mirror of github.com's release downloads (containerd, runc, aws-iam-authenticator)",
        |s, v| {
            s.github_release_url = Some(one(v));
            Ok(())
        },
    ),
    row(
        "node-image",
        var::NODE_IMAGE,
        "a node image of the user's for every scenario",
        |s, v| {
            s.node_image = Some(one(v));
            Ok(())
        },
    ),
    row(
        "base-image",
        var::BASE_IMAGE,
        "the base image the node image is built on",
        |s, v| {
            s.base_image = Some(one(v));
            Ok(())
        },
    ),
    row(
        "debian-suite",
        var::DEBIAN_SUITE,
        "the Debian suite the base image is bootstrapped from",
        |s, v| {
            s.debian_suite = Some(one(v));
            Ok(())
        },
    ),
    row(
        "boot-concurrency",
        var::BOOT_CONCURRENCY,
        "node containers started at once",
        |s, v| {
            s.boot_concurrency = Some(number(v)?);
            Ok(())
        },
    ),
    row(
        "vm-accel",
        var::VM_ACCEL,
        "how VM nodes run: auto (KVM where it boots a stock kernel, else TCG), kvm or tcg",
        |s, v| {
            s.vm_accel = Some(one(v));
            Ok(())
        },
    ),
    row(
        "endpoints-ca",
        var::ENDPOINTS_CA,
        "a directory with the CA (ca.pem, ca-key.pem) AWS's names are served under, which a disk of your own trusts",
        |s, v| {
            s.endpoints_ca = Some(PathBuf::from(one(v)));
            Ok(())
        },
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
    row("kind-image", var::KIND_IMAGE, "the kind node image", |s, v| {
        s.kind_image = Some(one(v));
        Ok(())
    }),
    row(
        "kind-restricted",
        var::KIND_RESTRICTED,
        "how kind's --privileged is replaced: always, never or sometimes",
        |s, v| {
            s.kind_restricted = Some(one(v));
            Ok(())
        },
    ),
    row("k3s-image", var::K3S_IMAGE, "the k3s image", |s, v| {
        s.k3s_image = Some(one(v));
        Ok(())
    }),
    Row {
        var: None,
        flag: true,
        profile: &["provider"],
        ..row(
            "provider",
            "",
            "the cluster provider a run uses: local, k3s or kind (`run --provider`, a profile's `provider`)",
            |s, v| {
                s.provider = Some(one(v));
                Ok(())
            },
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
    row(
        "github-actions",
        var::GITHUB_ACTIONS,
        "set by GitHub Actions (true): failures are also written as annotations",
        |s, v| {
            s.github_actions = one(v) == "true";
            Ok(())
        },
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
