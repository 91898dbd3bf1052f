//! The checks' definitions: each the name reports show, when a scenario gets it, the real-world rule it proves
//! and the scenario keys that ask for it. The checks made by `assert` and the pipeline are defined here; the
//! checks on a registered Node are defined beside their code (`run::pipeline::assertions::node`). Both are listed,
//! in report order, by the one table `run::pipeline::assertions::registry::CHECKS`, which the pipeline, the
//! reporters, the book's checks page and the mutation catalogue read.

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
    /// The scenario keys that ask for it, most precise first: a failed check's annotation points at the first
    /// of them written in its node group (else at the line naming the group). Data, not a match on the name, so
    /// a renamed check keeps its keys.
    pub keys: &'static [&'static str],
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

    /// Its row in the book's table.
    pub fn row(&self) -> String {
        format!("| `{}` | {} | {} |", self.form, self.when, self.proves)
    }
}

macro_rules! check {
    ($id:ident, $name:literal, keys: [$($key:literal),*], $when:literal, $proves:literal) => {
        check!($id, $name, $name, keys: [$($key),*], $when, $proves);
    };
    ($id:ident, $name:literal, $form:literal, keys: [$($key:literal),*], $when:literal, $proves:literal) => {
        pub const $id: CheckDef = CheckDef {
            name: $name,
            form: $form,
            when: $when,
            proves: $proves,
            keys: &[$($key),*],
        };
    };
}

check!(
    BOOTSTRAP_EXIT,
    "bootstrap exit",
    keys: ["bootstrapExit", "bootstrap", "userData"],
    "always for nodes that join (`bootstrapExit` otherwise); a VM seen from outside only when it refused the run's certificates or its console shows a decided failure (no boot loader, a panic, emergency mode, nodeadm failed)",
    "the bootstrap must exit 0; the failure quotes its error lines (not the usage text after them)"
);
check!(
    KUBELET_RUNNING,
    "kubelet running",
    keys: ["bootstrap", "userData"],
    "a node that was expected to join, not a VM seen from outside",
    "the kubelet does not crash-loop: decided at its first exit with a startup config error (`unknown flag`, \
     unparsable config) or after 3 restarts; quotes the kubelet's own error line"
);
check!(
    KUBELET_STARTED,
    "kubelet started",
    keys: ["bootstrap", "userData"],
    "a node that was expected to join, not a VM seen from outside",
    "whatever ran the bootstrap (cloud-init, or the harness) finished and `kubelet.service` was never started \
     within 5 s: quotes cloud-init's error or the end of its output"
);
// No key: every node gets it, whatever its scenario says, so its annotation points at the group's line.
check!(
    NODE_CONTAINER,
    "node container",
    keys: [],
    "any node",
    "the node container runs until its join is judged: a node killed or OOM-killed fails at once, quoting its exit \
     code and its journal's last lines"
);
check!(
    NODEADM,
    "nodeadm",
    keys: ["nodeadm", "userData"],
    "user data with a NodeConfig, not VMs seen from outside",
    "nodeadm's `init` config and run phases both succeed, as on AL2023. A failure quotes nodeadm's last error and, \
     beside it, the warning or error nearest before it that carries an error of its own: `failed: Command failed: \
     no config in chain (after: Encountered error in config provider: failed to decode node config, json: cannot \
     unmarshal string into Go struct field KubeletOptions.spec.kubelet.flags of type []string)` \
     (`al2023-nodeadm-bad-part`; the bootstrap exit check quotes the same)"
);
check!(
    REGISTERED,
    "registered",
    keys: ["within", "joins", "expect"],
    "nodes that join",
    "the Node is named after the instance's PrivateDnsName (or `expect.nodeName`); a Node with this instance's \
     providerID under another name is reported as such; a missing one quotes the kubelet's last error"
);
check!(
    NOT_REGISTERED,
    "not registered",
    keys: ["within", "joins", "expect"],
    "`joins: false`",
    "no Node registers for the instance within `within`, under its name or another"
);
check!(
    READY,
    "ready",
    keys: ["within", "joins", "expect"],
    "nodes that join",
    "the Node reaches Ready within `within`"
);
check!(
    CLIENT_CSR,
    "client CSR",
    keys: ["clientCsr", "expect"],
    "`expect.clientCsr`",
    "TLS bootstrapping: the kubelet's client CSR is auto-approved and issued (bootstrap-token clusters)"
);
check!(
    SERVING_CSR,
    "serving CSR",
    keys: ["servingCsr", "expect"],
    "`expect.servingCsr`",
    "serving CSRs are approved by the EKS-style approver only for the node's own names and IPs"
);
check!(
    IAM_TOKEN_ACCEPTED,
    "IAM token accepted",
    keys: ["identity", "iam"],
    "`auth: iam`",
    "the token webhook (EKS's authenticator rules) accepted the kubelet's token"
);
check!(
    IAM_TOKEN_FORMAT,
    "IAM token format",
    keys: ["identity", "iam"],
    "`auth: iam`",
    "every token has the exact format of a real token client: `aws eks get-token` (X-Amz-Expires=60) or \
     `aws-iam-authenticator token` (X-Amz-Expires=0, regional or global STS host), recorded from the real tools \
     (`harness/src/fakes/testdata/`)"
);
check!(
    IDENTITY_USERNAME,
    "identity.username",
    keys: ["username", "identity"],
    "`expect.identity` (`auth: iam`, a node that joins)",
    "the username the API server saw (audit log)"
);
check!(
    IDENTITY_GROUPS,
    "identity.groups",
    keys: ["groups", "identity"],
    "`expect.identity` (`auth: iam`, a node that joins)",
    "the groups the API server saw (audit log)"
);
check!(
    AWS_AUTH_CHANGED_BY,
    "aws-auth changed by",
    keys: ["awsAuthChangedBy"],
    "`awsAuthChangedBy` (`auth: iam`, a node that joins)",
    "who mapped the node role in aws-auth, before the Node registered"
);
check!(
    SANDBOX_IMAGE,
    "sandbox image",
    keys: ["image"],
    "nodeadm nodes that join; `expect.sandboxImage`",
    "the sandbox image the node's containerd was configured with is in its image store; an ECR image was pulled \
     with an ECR token of this instance (derived from the tool's own config, so it holds for any nodeadm version: \
     current nodeadm uses a local pause image and pulls nothing)"
);
check!(
    CONTAINERD_WARNINGS,
    "containerd warnings",
    keys: ["containerdWarnings", "containerd"],
    "nodes that join on a containerd line no AMI ships yet (2.3, 2.4: the canary), or `containerdWarnings: none`; \
     a note on the others (`containerdWarnings: any` for a note anywhere)",
    "containerd used every key of the configuration the node gave it and reports no deprecated feature in use: \
     the keys it ignored (`Ignoring unknown key in TOML`, from its log) and `ctr deprecations list`, in its words \
     (a key a newer containerd ignores fails nothing else until a user relies on it)"
);
check!(
    POD_RUNS,
    "pod runs",
    keys: ["podRuns"],
    "`expect.podRuns`",
    "a pod bound to the node runs, with an address from the CNI: a Ready node that cannot run a pod has not joined"
);
check!(
    READY_AFTER,
    "ready after",
    "ready after <step>",
    keys: ["after"],
    "each `reboot`, `upgrade` or `wait-for-rotation` step of a group's `after`",
    "the same Node (name and UID) is Ready again within the step's `within`, reported by a kubelet started after \
     the step; a node that does not come back quotes the kubelet's error line or the Node's Ready condition"
);
check!(
    KUBELET_VERSION_AFTER,
    "kubelet version after",
    "kubelet version after upgrade",
    keys: ["to", "after"],
    "each `upgrade` step of a group's `after`",
    "the Node reports the kubelet the step installed (`status.nodeInfo.kubeletVersion` is its `to`): the image's \
     bootstrap, run again, started the new binary, and the Node kept its name and UID (a kubelet that registered \
     anew under another name is quoted)"
);
check!(
    POD_KEPT_AFTER,
    "pod kept after",
    "pod kept after upgrade",
    keys: ["after"],
    "each `upgrade` step of a group's `after`",
    "a pod bound to the node before the upgrade still runs after it: the same pod (UID), the same container (not \
     restarted by the new kubelet), as an in-place kubelet upgrade promises"
);
check!(
    NODE_DELETED_AFTER,
    "node deleted after",
    "node deleted after terminate",
    keys: ["after"],
    "each `terminate` step of a group's `after`",
    "once EC2 reports the instance terminated and the machine has shut down, the Node goes NotReady (its lease \
     expires) and the cloud controller deletes it within the step's `within`, as the AWS cloud controller manager \
     does: a Node left behind keeps pods bound to a machine that is gone. Quotes when it went NotReady and when it \
     was deleted, or what it still says"
);
check!(
    CORDONED_AFTER,
    "cordoned after",
    "cordoned after <step>",
    keys: ["after"],
    "each `cordon` or `drain` step of a group's `after`",
    "the Node marked unschedulable is tainted `node.kubernetes.io/unschedulable:NoSchedule` by the node lifecycle \
     controller within the step's `within`, so nothing new is scheduled to it while it is drained"
);
check!(
    DRAINED_AFTER,
    "drained after",
    "drained after drain",
    keys: ["workload", "after"],
    "each `drain` step of a group's `after`",
    "a workload placed on the node before (a ReplicaSet under a PodDisruptionBudget, a DaemonSet's pod) is drained \
     through the eviction API as a managed node group's update drains it: every pod but the DaemonSet's evicted \
     and ended by the node's kubelet within the step's `within`, an eviction refused (429) while the budget is \
     spent and allowed once the replacement runs on another node; a drain the budget blocks quotes the refusal"
);
check!(
    SCHEDULABLE_AFTER,
    "schedulable after",
    "schedulable after uncordon",
    keys: ["after"],
    "each `uncordon` step of a group's `after`",
    "the Node made schedulable again loses the `node.kubernetes.io/unschedulable` taint (the node lifecycle \
     controller removes it) within the step's `within`, so pods are placed on it again after its upgrade"
);
check!(
    INHIBITOR_LOCK_BEFORE,
    "inhibitor lock before",
    "inhibitor lock before shutdown",
    keys: ["after"],
    "each `shutdown` step of a group's `after`",
    "the kubelet holds a delay inhibitor lock on shutdown in systemd-logind before the shutdown (its graceful node \
     shutdown, `shutdownGracePeriod`, which AL2023's nodeadm sets on 1.34+): without it the machine powers off \
     under its pods. A missing lock quotes the kubelet's own line about it"
);
check!(
    PODS_TERMINATED_AFTER,
    "pods terminated after",
    "pods terminated after shutdown",
    keys: ["after"],
    "each `shutdown` step of a group's `after`",
    "a pod on the node before a graceful shutdown is ended by the kubelet's shutdown manager (reason \
     `Terminated`, phase Failed, or Succeeded where its container exited 0 first) before the machine is off: told \
     by logind (`PrepareForShutdown`), the kubelet ends its pods within its grace period. Where that status did not \
     reach the API server before the machine went, the kubelet's journal line for the pod is the evidence, said so"
);
check!(
    NOT_READY_AFTER,
    "not ready after",
    "not ready after shutdown",
    keys: ["after"],
    "each `shutdown` step of a group's `after`",
    "the Node's Ready condition is False as the kubelet reported it while shutting down (its own words quoted), \
     not left Ready for the node lifecycle controller to find Unknown once the lease expires"
);
check!(
    CLIENT_CSR_AFTER,
    "client CSR after",
    "client CSR after <step>",
    keys: ["clientCsr", "after"],
    "each step of a group's `after`",
    "the client CSRs made during the step are as expected (none by default: a kubelet whose client certificate is \
     still valid asks for no other; one that asks again lost it)"
);
check!(
    SERVING_CSR_AFTER,
    "serving CSR after",
    "serving CSR after <step>",
    keys: ["servingCsr", "after"],
    "each step of a group's `after`",
    "the serving CSRs made during the step are as expected (none by default: the kubelet keeps its serving \
     certificate on its disk)"
);
check!(
    SERVING_CERT_AFTER,
    "serving cert after",
    "serving cert after <step>",
    keys: ["servingCsr", "after"],
    "a step that renews the serving certificate (`wait-for-rotation`)",
    ":10250 serves the renewed certificate (another serial than before the step), for exactly the node's DNS \
     name and IP, chained to the cluster CA; a renewal the approver refuses is decided once it stayed pending 15 s, \
     quoting the CSR and the approver's reason"
);
check!(
    POD_RUNS_AGAIN,
    "pod runs again after",
    "pod runs again after <step>",
    keys: ["podRunsAgain", "after"],
    "`podRunsAgain` of a step",
    "a pod bound to the node before the step runs again after it: the same pod (UID), its container started after \
     the step"
);
check!(
    CLOUD_INIT_STATUS,
    "cloud-init status",
    keys: ["cloudInit", "userData"],
    "user-data nodes (`expect.cloudInit`), not VMs seen from outside",
    "what cloud-init itself reported: done unless the scenario says otherwise"
);
check!(
    CLOUD_INIT_MODULE,
    "cloud-init module",
    "cloud-init module <name>",
    keys: ["cloudInit", "userData"],
    "`expect.cloudInit.modules`",
    "the module ran, as cloud-init reported it"
);
check!(
    CLOUD_INIT_ERRORS,
    "cloud-init error",
    keys: ["cloudInit", "userData"],
    "`expect.cloudInit.errors`",
    "cloud-init reported these errors"
);
check!(
    CLOUD_INIT_WARNINGS,
    "cloud-init warning",
    keys: ["cloudInit", "userData"],
    "`expect.cloudInit.warnings`",
    "cloud-init reported these warnings"
);
check!(
    CFN_SIGNAL,
    "cfn-signal",
    keys: ["cfnSignal", "userData"],
    "`expect.cfnSignal`",
    "the CloudFormation signal the instance sent"
);
check!(
    CALLS_ALLOWED,
    "calls allowed",
    keys: ["calls"],
    "`expect.calls.allowed`",
    "the node's AWS and IMDS calls are all of the allowed kinds"
);
check!(
    CALLS_EXACTLY,
    "calls exactly",
    keys: ["calls"],
    "`expect.calls.exactly`",
    "the node's calls are exactly this multiset"
);
check!(
    CALLS,
    "calls",
    "calls <pattern> / calls <pattern> at most <n>",
    keys: ["calls"],
    "`expect.calls.budget`",
    "the node made at most so many calls of a kind (a loop, a retry storm)"
);
check!(
    NO_CALLS_AFTER_READY,
    "no calls after Ready",
    keys: ["noneAfterReady", "calls"],
    "`expect.calls`",
    "no call in the `afterReadyWindow` (10 s) the harness keeps watching after Ready"
);
check!(
    FILE,
    "file",
    "file <path> exists / contains \"…\" / golden / <key> / matches <golden>",
    keys: ["files"],
    "`expect.files`",
    "what the bootstrap wrote: present, holding a text, a key's value, or equal to a golden file"
);
check!(
    IDEMPOTENT,
    "idempotent bootstrap",
    keys: ["idempotent"],
    "`expect.idempotent`",
    "running the bootstrap again exits 0 and changes no file"
);
check!(
    DETERMINISTIC,
    "deterministic files",
    keys: ["deterministic"],
    "`expect.deterministic` (a group of two nodes or more)",
    "the nodes of a group wrote the same files, once their identities are normalised; zero files compared fails"
);
check!(
    EXECUTABLES_TRACE,
    "executables trace",
    keys: ["executables"],
    "`expect.executables`",
    "the bootstrap's exec trace exists, is not empty and every line was understood (else the expectations below \
     are not checked)"
);
check!(
    EXECUTABLES_FORBIDDEN,
    "executables forbidden",
    keys: ["executables"],
    "`expect.executables.forbidden`",
    "the bootstrap ran none of these programs (strace)"
);
check!(
    EXECUTABLES_ONLY,
    "executables only",
    keys: ["executables"],
    "`expect.executables.only`",
    "the bootstrap ran only these programs (strace)"
);
check!(
    EXECUTABLE_RAN,
    "executable",
    "executable <name> ran",
    keys: ["executables"],
    "`expect.executables.ran`",
    "the bootstrap ran this program (strace)"
);
check!(
    HOST_KERNEL_UNTOUCHED,
    "host kernel untouched",
    keys: ["hostKernelUntouched"],
    "`expect.hostKernelUntouched`",
    "the host's kernel parameters a fresh procfs or sysfs mount reaches (core_pattern, modprobe, panic, overcommit, transparent huge pages) are as before the node ran: a VM node's kernel is its own"
);
check!(
    LOCAL_STORAGE,
    "local storage",
    keys: ["localStorage"],
    "`expect.localStorage`",
    "the instance's instance-store disks (found as the AMI finds them, by EC2's model under `/dev/disk/by-id`, as many as the type has) are one md array of the level `expect.localStorage` names, and the kubelet's and containerd's directories and `/var/log/pods` are mounted from it"
);
check!(
    EVIDENCE,
    "evidence in",
    "evidence in <source> log",
    keys: ["evidence"],
    "`expect.evidence`",
    "a line proving why a node failed (or a fact of its join), quoted"
);
check!(
    FAILING_CHECKS,
    "failingChecks",
    "failingChecks <pattern>",
    keys: ["failingChecks"],
    "`failingChecks` (a group)",
    "a check expected to fail did fail, once: a negative scenario proves its cause, not any failure"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_and_a_member_of_its_family_are_named_on_their_node() {
        assert_eq!(READY.on("n"), "n/ready");
        assert_eq!(EVIDENCE.on_with("n", "bootstrap log"), "n/evidence in bootstrap log");
        assert_eq!(CALLS.on_with("n", "ec2:* at most 2"), "n/calls ec2:* at most 2");
    }
}
