//! The checks, registered as providers and flavors are: each a definition with the name reports show, when a
//! scenario gets it and the real-world rule it proves. The checks made by `assert` and the pipeline are defined
//! here; the checks on a registered Node are defined beside their code (`run::pipeline::assertions::node`), and
//! `run::pipeline::assertions::all_checks` is the whole table, which the book's checks page shows
//! (docs/src/reference/checks.md, kept in step by a test) and the mutation catalogue names its catchers by.

/// A check's definition.
#[derive(Debug, PartialEq, Eq)]
pub struct CheckDef {
    /// Its name in reports after `<node>/` (or `<group>/`); a family's stem, its details after a space.
    pub name: &'static str,
    /// How its names look in a report, placeholders in angle brackets (`file <path> exists`).
    pub form: &'static str,
    /// Which node or expectation gets it.
    pub when: &'static str,
    /// The rule it encodes (from EKS and Kubernetes, not from our reference script).
    pub proves: &'static str,
}

impl CheckDef {
    /// Its name on `node`: `node/name`.
    pub fn on(&self, node: &str) -> String {
        format!("{node}/{}", self.name)
    }

    /// A member of its family on `node`: `node/name detail`.
    pub fn on_with(&self, node: &str, detail: impl std::fmt::Display) -> String {
        format!("{node}/{} {detail}", self.name)
    }

    /// The scenario keys that ask for it, most precise first: a failed check's annotation points at the first
    /// of them written in its node group (else at the line naming the group).
    pub fn keys(&self) -> &'static [&'static str] {
        match self.name {
            "bootstrap exit" => &["bootstrapExit", "bootstrap", "userData"],
            "kubelet running" | "kubelet started" | "kubelet enabled" => &["bootstrap", "userData"],
            "nodeadm" => &["nodeadm", "userData"],
            "registered" | "not registered" | "ready" => &["within", "joins", "expect"],
            "client CSR" => &["clientCsr", "expect"],
            "serving CSR" => &["servingCsr", "expect"],
            "serving cert" => &["servingCert", "expect"],
            "IAM token accepted" | "IAM token format" => &["identity", "iam"],
            "identity.username" => &["username", "identity"],
            "identity.groups" => &["groups", "identity"],
            "aws-auth changed by" => &["awsAuthChangedBy"],
            "sandbox image" => &["image"],
            "pod runs" => &["podRuns"],
            "host kernel untouched" => &["hostKernelUntouched"],
            "local storage" => &["localStorage"],
            "cloud-init status" | "cloud-init module" | "cloud-init error" | "cloud-init warning" => {
                &["cloudInit", "userData"]
            }
            "cfn-signal" => &["cfnSignal", "userData"],
            "calls allowed" | "calls exactly" | "calls" => &["calls"],
            "no calls after Ready" => &["noneAfterReady", "calls"],
            "file" => &["files"],
            "idempotent bootstrap" => &["idempotent"],
            "deterministic files" => &["deterministic"],
            "executables trace" | "executables forbidden" | "executables only" | "executable" => &["executables"],
            "evidence in" => &["evidence"],
            "failingChecks" => &["failingChecks"],
            "labels" => &["labels"],
            "labels exactly" => &["labelsExactly"],
            "taints" => &["taints"],
            "capacity.pods" => &["capacityPods"],
            "providerID" => &["providerID"],
            "configz clusterDNS" => &["clusterDNS"],
            _ => &[],
        }
    }

    /// Its row in the book's table.
    pub fn row(&self) -> String {
        format!("| `{}` | {} | {} |", self.form, self.when, self.proves)
    }
}

macro_rules! check {
    ($id:ident, $name:literal, $when:literal, $proves:literal) => {
        check!($id, $name, $name, $when, $proves);
    };
    ($id:ident, $name:literal, $form:literal, $when:literal, $proves:literal) => {
        pub const $id: CheckDef = CheckDef {
            name: $name,
            form: $form,
            when: $when,
            proves: $proves,
        };
    };
}

check!(
    BOOTSTRAP_EXIT,
    "bootstrap exit",
    "always for nodes that join (`bootstrapExit` otherwise); a VM seen from outside only when it refused the run's certificates or its console shows a decided failure (no boot loader, a panic, emergency mode, nodeadm failed)",
    "the bootstrap must exit 0; the failure quotes its error lines (not the usage text after them)"
);
check!(
    KUBELET_RUNNING,
    "kubelet running",
    "a node that was expected to join, not a VM seen from outside",
    "the kubelet does not crash-loop: decided at its first exit with a startup config error (`unknown flag`, \
     unparsable config) or after 3 restarts; quotes the kubelet's own error line"
);
check!(
    KUBELET_STARTED,
    "kubelet started",
    "a node that was expected to join, not a VM seen from outside",
    "whatever ran the bootstrap (cloud-init, or the harness) finished and `kubelet.service` was never started \
     within 5 s: quotes cloud-init's error or the end of its output"
);
check!(
    NODE_CONTAINER,
    "node container",
    "any node",
    "the node container runs until its join is judged: a node killed or OOM-killed fails at once, quoting its exit \
     code and its journal's last lines"
);
check!(
    NODEADM,
    "nodeadm",
    "user data with a NodeConfig, not VMs seen from outside",
    "nodeadm's `init` config and run phases both succeed, as on AL2023"
);
check!(
    REGISTERED,
    "registered",
    "nodes that join",
    "the Node is named after the instance's PrivateDnsName (or `expect.nodeName`); a Node with this instance's \
     providerID under another name is reported as such; a missing one quotes the kubelet's last error"
);
check!(
    NOT_REGISTERED,
    "not registered",
    "`joins: false`",
    "no Node registers for the instance within `within`, under its name or another"
);
check!(
    READY,
    "ready",
    "nodes that join",
    "the Node reaches Ready within `within`"
);
check!(
    CLIENT_CSR,
    "client CSR",
    "`expect.clientCsr`",
    "TLS bootstrapping: the kubelet's client CSR is auto-approved and issued (bootstrap-token clusters)"
);
check!(
    SERVING_CSR,
    "serving CSR",
    "`expect.servingCsr`",
    "serving CSRs are approved by the EKS-style approver only for the node's own names and IPs"
);
check!(
    IAM_TOKEN_ACCEPTED,
    "IAM token accepted",
    "`auth: iam`",
    "the token webhook (EKS's authenticator rules) accepted the kubelet's token"
);
check!(
    IAM_TOKEN_FORMAT,
    "IAM token format",
    "`auth: iam`",
    "every token has the exact format of a real token client: `aws eks get-token` (X-Amz-Expires=60) or \
     `aws-iam-authenticator token` (X-Amz-Expires=0, regional or global STS host), recorded from the real tools \
     (`harness/src/fakes/testdata/`)"
);
check!(
    IDENTITY_USERNAME,
    "identity.username",
    "`expect.identity` (`auth: iam`, a node that joins)",
    "the username the API server saw (audit log)"
);
check!(
    IDENTITY_GROUPS,
    "identity.groups",
    "`expect.identity` (`auth: iam`, a node that joins)",
    "the groups the API server saw (audit log)"
);
check!(
    AWS_AUTH_CHANGED_BY,
    "aws-auth changed by",
    "`awsAuthChangedBy` (`auth: iam`, a node that joins)",
    "who mapped the node role in aws-auth, before the Node registered"
);
check!(
    SANDBOX_IMAGE,
    "sandbox image",
    "nodeadm nodes that join; `expect.sandboxImage`",
    "the sandbox image the node's containerd was configured with is in its image store; an ECR image was pulled \
     with an ECR token of this instance (derived from the tool's own config, so it holds for any nodeadm version: \
     current nodeadm uses a local pause image and pulls nothing)"
);
check!(
    POD_RUNS,
    "pod runs",
    "`expect.podRuns`",
    "a pod bound to the node runs, with an address from the CNI: a Ready node that cannot run a pod has not joined"
);
check!(
    CLOUD_INIT_STATUS,
    "cloud-init status",
    "user-data nodes (`expect.cloudInit`), not VMs seen from outside",
    "what cloud-init itself reported: done unless the scenario says otherwise"
);
check!(
    CLOUD_INIT_MODULE,
    "cloud-init module",
    "cloud-init module <name>",
    "`expect.cloudInit.modules`",
    "the module ran, as cloud-init reported it"
);
check!(
    CLOUD_INIT_ERRORS,
    "cloud-init error",
    "`expect.cloudInit.errors`",
    "cloud-init reported these errors"
);
check!(
    CLOUD_INIT_WARNINGS,
    "cloud-init warning",
    "`expect.cloudInit.warnings`",
    "cloud-init reported these warnings"
);
check!(
    CFN_SIGNAL,
    "cfn-signal",
    "`expect.cfnSignal`",
    "the CloudFormation signal the instance sent"
);
check!(
    CALLS_ALLOWED,
    "calls allowed",
    "`expect.calls.allowed`",
    "the node's AWS and IMDS calls are all of the allowed kinds"
);
check!(
    CALLS_EXACTLY,
    "calls exactly",
    "`expect.calls.exactly`",
    "the node's calls are exactly this multiset"
);
check!(
    CALLS,
    "calls",
    "calls <pattern> / calls <pattern> at most <n>",
    "`expect.calls.budget`",
    "the node made at most so many calls of a kind (a loop, a retry storm)"
);
check!(
    NO_CALLS_AFTER_READY,
    "no calls after Ready",
    "`expect.calls`",
    "no call in the `afterReadyWindow` (10 s) the harness keeps watching after Ready"
);
check!(
    FILE,
    "file",
    "file <path> exists / contains \"…\" / golden / <key> / matches <golden>",
    "`expect.files`",
    "what the bootstrap wrote: present, holding a text, a key's value, or equal to a golden file"
);
check!(
    IDEMPOTENT,
    "idempotent bootstrap",
    "`expect.idempotent`",
    "running the bootstrap again exits 0 and changes no file"
);
check!(
    DETERMINISTIC,
    "deterministic files",
    "`expect.deterministic` (a group of two nodes or more)",
    "the nodes of a group wrote the same files, once their identities are normalised; zero files compared fails"
);
check!(
    EXECUTABLES_TRACE,
    "executables trace",
    "`expect.executables`",
    "the bootstrap's exec trace exists, is not empty and every line was understood (else the expectations below \
     are not checked)"
);
check!(
    EXECUTABLES_FORBIDDEN,
    "executables forbidden",
    "`expect.executables.forbidden`",
    "the bootstrap ran none of these programs (strace)"
);
check!(
    EXECUTABLES_ONLY,
    "executables only",
    "`expect.executables.only`",
    "the bootstrap ran only these programs (strace)"
);
check!(
    EXECUTABLE_RAN,
    "executable",
    "executable <name> ran",
    "`expect.executables.ran`",
    "the bootstrap ran this program (strace)"
);
check!(
    HOST_KERNEL_UNTOUCHED,
    "host kernel untouched",
    "`expect.hostKernelUntouched`",
    "the host's kernel parameters a fresh procfs or sysfs mount reaches (core_pattern, modprobe, panic, overcommit, transparent huge pages) are as before the node ran: a VM node's kernel is its own"
);
check!(
    LOCAL_STORAGE,
    "local storage",
    "`expect.localStorage`",
    "the instance's instance-store disks (found as the AMI finds them, by EC2's model under `/dev/disk/by-id`, as many as the type has) are one md array of the level `expect.localStorage` names, and the kubelet's and containerd's directories and `/var/log/pods` are mounted from it"
);
check!(
    EVIDENCE,
    "evidence in",
    "evidence in <source> log",
    "`expect.evidence`",
    "a line proving why a node failed (or a fact of its join), quoted"
);
check!(
    FAILING_CHECKS,
    "failingChecks",
    "failingChecks <pattern>",
    "`failingChecks` (a group)",
    "a check expected to fail did fail, once: a negative scenario proves its cause, not any failure"
);

/// The checks defined here, in the order the book lists them (the Node's checks come after `ready`).
pub const CORE: &[&CheckDef] = &[
    &BOOTSTRAP_EXIT,
    &KUBELET_RUNNING,
    &KUBELET_STARTED,
    &NODE_CONTAINER,
    &NODEADM,
    &REGISTERED,
    &NOT_REGISTERED,
    &READY,
    &CLIENT_CSR,
    &SERVING_CSR,
    &IAM_TOKEN_ACCEPTED,
    &IAM_TOKEN_FORMAT,
    &IDENTITY_USERNAME,
    &IDENTITY_GROUPS,
    &AWS_AUTH_CHANGED_BY,
    &SANDBOX_IMAGE,
    &POD_RUNS,
    &CLOUD_INIT_STATUS,
    &CLOUD_INIT_MODULE,
    &CLOUD_INIT_ERRORS,
    &CLOUD_INIT_WARNINGS,
    &CFN_SIGNAL,
    &CALLS_ALLOWED,
    &CALLS_EXACTLY,
    &CALLS,
    &NO_CALLS_AFTER_READY,
    &FILE,
    &IDEMPOTENT,
    &DETERMINISTIC,
    &EXECUTABLES_TRACE,
    &EXECUTABLES_FORBIDDEN,
    &EXECUTABLES_ONLY,
    &EXECUTABLE_RAN,
    &HOST_KERNEL_UNTOUCHED,
    &LOCAL_STORAGE,
    &EVIDENCE,
    &FAILING_CHECKS,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_and_a_member_of_its_family_are_named_on_their_node() {
        assert_eq!(READY.on("n"), "n/ready");
        assert_eq!(EVIDENCE.on_with("n", "bootstrap log"), "n/evidence in bootstrap log");
        assert_eq!(CALLS.on_with("n", "ec2:* at most 2"), "n/calls ec2:* at most 2");
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = CORE.iter().map(|c| c.name).collect();
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len());
    }
}
