//! The deliberate regressions: each is one edit to our reference bootstrap or to the user data our generators
//! write, and the scenario (and check) that must catch it. Anchors are exact text of those sources, so a change
//! to the bootstrap that moves one breaks the catalogue loudly instead of silently testing nothing.
use super::{Catcher, Mutation, Target};
use crate::assert::registry::{self as checks, CheckDef};
use crate::run::pipeline::assertions::node as node_checks;

/// `check` of `scenario` must fail and its finding must contain `says` (the symptom the mutation causes).
const fn catcher(scenario: &'static str, check: &'static CheckDef, says: &'static str) -> Catcher {
    Catcher {
        scenario,
        check,
        detail: "",
        says,
    }
}

/// [`catcher`] for one member of a check's family (`evidence in` + `bootstrap log`).
const fn catcher_of(
    scenario: &'static str,
    check: &'static CheckDef,
    detail: &'static str,
    says: &'static str,
) -> Catcher {
    Catcher {
        scenario,
        check,
        detail,
        says,
    }
}

pub const CATALOGUE: &[Mutation] = &[
    Mutation {
        name: "serving-cert-on-tmpfs",
        regression: "the kubelet keeps its certificates in /run (--cert-dir on a tmpfs): an IAM node joins, and after \
                     a reboot asks for a serving certificate again",
        target: Target::ReferenceBootstrap,
        find: "--hostname-override=$PRIVATE_DNS_NAME --cloud-provider=external'",
        replace: "--hostname-override=$PRIVATE_DNS_NAME --cloud-provider=external --cert-dir=/run/kubelet/pki'",
        caught_by: &[catcher_of(
            "reboot-al2-eksctl",
            &checks::SERVING_CSR_AFTER,
            "reboot",
            "(issued)",
        )],
    },
    Mutation {
        name: "self-signed-serving-cert-at-rotation",
        regression: "the kubelet config loses serverTLSBootstrap: the kubelet serves a certificate it signed itself, \
                     and renews none through the cluster",
        target: Target::ReferenceBootstrap,
        find: "  serverTLSBootstrap: true,\n",
        replace: "",
        caught_by: &[catcher_of(
            "cert-rotation",
            &checks::SERVING_CERT_AFTER,
            "rotation",
            "no CA-verified TLS",
        )],
    },
    Mutation {
        name: "no-client-rotation",
        regression: "the kubelet config loses rotateCertificates: the join passes, and the client certificate \
                     expires unrenewed",
        target: Target::ReferenceBootstrap,
        find: "if $rotate == \"yes\" then { rotateCertificates: true }",
        replace: "if false then {}",
        caught_by: &[catcher_of("cert-rotation", &checks::CLIENT_CSR_AFTER, "rotation", "no new CSR")],
    },
    Mutation {
        name: "kubelet-config-on-tmpfs",
        regression: "the bootstrap renders the kubelet's config into /run (a tmpfs, linked from /etc): the join \
                     passes, and after a reboot the kubelet finds no config",
        target: Target::ReferenceBootstrap,
        find: "mkdir -p /etc/kubernetes/pki /etc/kubernetes/kubelet /var/lib/kubelet",
        replace: "mkdir -p /etc/kubernetes/pki /run/kubelet-config /var/lib/kubelet && ln -sfn /run/kubelet-config \
                  /etc/kubernetes/kubelet && mkdir -p",
        caught_by: &[catcher_of(
            "reboot-bootstrap-sh",
            &checks::READY_AFTER,
            "reboot",
            "failed to load kubelet config file",
        )],
    },
    Mutation {
        name: "credentials-on-tmpfs",
        regression: "the kubelet keeps its kubeconfig and certificates in /run (a tmpfs): the join passes, and at the \
                     first reboot the kubelet bootstraps again with a new client CSR",
        target: Target::ReferenceBootstrap,
        find: "--bootstrap-kubeconfig=/var/lib/kubelet/bootstrap-kubeconfig --kubeconfig=/var/lib/kubelet/kubeconfig\"",
        replace: "--bootstrap-kubeconfig=/var/lib/kubelet/bootstrap-kubeconfig --kubeconfig=/run/kubelet/kubeconfig \
                  --cert-dir=/run/kubelet/pki\"",
        caught_by: &[catcher_of(
            "reboot-bootstrap-sh",
            &checks::CLIENT_CSR_AFTER,
            "reboot",
            "(issued)",
        )],
    },
    Mutation {
        name: "drop-provider-id",
        regression: "the kubelet config loses providerID (the cloud controller fills it in, so the Node still has one)",
        target: Target::ReferenceBootstrap,
        find: "  providerID: $provider,\n",
        replace: "",
        caught_by: &[catcher("basic-bootstrap-token", &node_checks::provider_id::DEF, "set by cloud-node controller")],
    },
    Mutation {
        name: "wrong-max-pods",
        regression: "max-pods from the ENI table without the +2 for host-network pods",
        target: Target::ReferenceBootstrap,
        find: "print $2 * ($3 - 1) + 2 }' /etc/eks/eni-limits.txt",
        replace: "print $2 * ($3 - 1) }' /etc/eks/eni-limits.txt",
        caught_by: &[catcher("basic-bootstrap-token", &node_checks::capacity_pods::DEF, "27, set by kubelet")],
    },
    Mutation {
        name: "lose-extra-args",
        regression: "--kubelet-extra-args no longer reach the kubelet (labels and taints lost)",
        target: Target::ReferenceBootstrap,
        find: "if [[ -n \"$KUBELET_EXTRA_ARGS\" ]]; then\n  cat >",
        replace: "if false; then\n  cat >",
        caught_by: &[catcher("basic-bootstrap-token", &node_checks::labels::DEF, "team=payments (node has nothing)")],
    },
    Mutation {
        name: "lose-taint",
        regression: "--register-with-taints is dropped from the extra args (labels still arrive)",
        target: Target::ReferenceBootstrap,
        find: "mkdir -p /etc/kubernetes/pki /etc/kubernetes/kubelet",
        replace: "KUBELET_EXTRA_ARGS=$(sed -E 's/--register-with-taints=[^ ]*//' <<<\"$KUBELET_EXTRA_ARGS\")\nmkdir -p /etc/kubernetes/pki /etc/kubernetes/kubelet",
        caught_by: &[catcher("basic-bootstrap-token", &node_checks::taints::DEF, "[]")],
    },
    Mutation {
        name: "cluster-dns-off",
        regression: "the kubelet config carries no clusterDNS",
        target: Target::ReferenceBootstrap,
        find: "clusterDNS: [ $dns ],",
        replace: "clusterDNS: [],",
        caught_by: &[catcher("basic-bootstrap-token", &node_checks::cluster_dns::DEF, "no kubeletconfig.clusterDNS")],
    },
    Mutation {
        name: "kubelet-not-enabled",
        regression: "the kubelet is started but not enabled (it would not come back after a reboot)",
        target: Target::ReferenceBootstrap,
        find: "systemctl enable kubelet\n",
        replace: "",
        caught_by: &[catcher("basic-bootstrap-token", &node_checks::kubelet_enabled::DEF, "disabled")],
    },
    Mutation {
        name: "self-signed-serving-cert",
        regression: "the kubelet config loses serverTLSBootstrap: the kubelet serves a certificate it signed itself, \
                     which the API server (verifying :10250 against the cluster CA, as EKS's does) refuses, so \
                     kubectl exec, logs and port-forward fail while the node is Ready",
        target: Target::ReferenceBootstrap,
        find: "  serverTLSBootstrap: true,\n",
        replace: "",
        caught_by: &[catcher(
            "basic-bootstrap-token",
            &node_checks::through_exec::DEF,
            "tls: failed to verify certificate: x509: cannot validate certificate",
        )],
    },
    Mutation {
        name: "wrong-ca",
        regression: "the cluster CA file is the system trust bundle instead of --b64-cluster-ca",
        target: Target::ReferenceBootstrap,
        find: "base64 -d <<<\"$B64_CLUSTER_CA\" > /etc/kubernetes/pki/ca.crt",
        replace: "cp /etc/ssl/certs/ca-certificates.crt /etc/kubernetes/pki/ca.crt",
        caught_by: &[catcher("basic-bootstrap-token", &checks::REGISTERED, "x509")],
    },
    Mutation {
        name: "wrong-node-name",
        regression: "the kubelet is named after the instance id instead of the PrivateDnsName",
        target: Target::ReferenceBootstrap,
        find: "--hostname-override=$PRIVATE_DNS_NAME",
        replace: "--hostname-override=$INSTANCE_ID",
        caught_by: &[catcher("basic-bootstrap-token", &checks::REGISTERED, "registered as")],
    },
    Mutation {
        name: "extra-imds-polling",
        regression: "IMDS asked for the instance id three more times",
        target: Target::ReferenceBootstrap,
        find: "INSTANCE_ID=$(imds meta-data/instance-id)\n",
        replace: "INSTANCE_ID=$(imds meta-data/instance-id)\nfor _ in 1 2 3; do imds meta-data/instance-id >/dev/null; done\n",
        caught_by: &[catcher("calls-imds-only", &checks::CALLS_EXACTLY, "instance-id: 4 (want 1)")],
    },
    Mutation {
        name: "imds-poller-after-ready",
        regression: "a timer left behind asks IMDS again once the node is Ready",
        target: Target::ReferenceBootstrap,
        find: "log \"kubelet started\"",
        // A repeating transient systemd timer, so it outlives the bootstrap (a `&` child would be waited for
        // with it) and some of its calls land after Ready however long the join takes. Its accuracy is set: a
        // timer's default (1 min) lets systemd fire it anywhere in the minute after it is due, by a per-machine
        // offset, which put the first call past the 10 s the scenario watches after Ready in one CI run.
        replace: "systemd-run --quiet --timer-property=AccuracySec=100ms --on-active=4 --on-unit-active=3 curl -s -H \"X-aws-ec2-metadata-token: $IMDS_TOKEN\" \"http://$IMDS_ENDPOINT/latest/meta-data/instance-id\"\nlog \"kubelet started\"",
        caught_by: &[catcher("calls-imds-only", &checks::NO_CALLS_AFTER_READY, "after Ready")],
    },
    Mutation {
        name: "extra-aws-call",
        regression: "an extra EC2 DescribeInstances call",
        target: Target::ReferenceBootstrap,
        find: "IP_FAMILY=${IP_FAMILY:-ipv4}\n",
        replace: "IP_FAMILY=${IP_FAMILY:-ipv4}\naws ec2 describe-instances --region \"$REGION\" --instance-ids \"$INSTANCE_ID\" >/dev/null || true\n",
        caught_by: &[catcher("calls-imds-only", &checks::CALLS_ALLOWED, "DescribeInstances")],
    },
    Mutation {
        name: "timestamp-in-file",
        regression: "a kubelet drop-in stamped with the time the bootstrap ran",
        target: Target::ReferenceBootstrap,
        find: "systemctl daemon-reload\n",
        replace: "echo \"# written $(date +%s.%N)\" >> /etc/systemd/system/kubelet.service.d/10-kubelet-args.conf\nsystemctl daemon-reload\n",
        caught_by: &[catcher("determinism-two-nodes", &checks::DETERMINISTIC, "# written")],
    },
    Mutation {
        name: "user-data-label-lost",
        regression: "managed node group user data loses the capacity-type label",
        target: Target::UserData,
        find: "eks.amazonaws.com/capacityType=ON_DEMAND,",
        replace: "",
        caught_by: &[catcher("userdata-eks-managed", &node_checks::labels::DEF, "capacityType=ON_DEMAND (node has nothing)")],
    },
    Mutation {
        name: "user-data-wrong-dns",
        regression: "managed node group user data passes a cluster DNS IP outside the service CIDR",
        target: Target::UserData,
        find: "--dns-cluster-ip $K8S_CLUSTER_DNS_IP",
        replace: "--dns-cluster-ip 172.20.0.10",
        caught_by: &[catcher("userdata-eks-managed", &node_checks::cluster_dns::DEF, "172.20.0.10")],
    },
    Mutation {
        name: "user-data-no-signal",
        regression: "CloudFormation user data never runs cfn-signal",
        target: Target::UserData,
        find: "/opt/aws/bin/cfn-signal --exit-code",
        replace: "true --exit-code",
        caught_by: &[catcher("userdata-cloudformation", &checks::CFN_SIGNAL, "no signal")],
    },
    Mutation {
        name: "user-data-cfn-wrong-stack",
        regression: "CloudFormation user data signals a stack that did not launch the node (the real stack times out and rolls back)",
        target: Target::UserData,
        find: "  --stack ",
        replace: "  --stack wrong-",
        caught_by: &[catcher("userdata-cloudformation", &checks::CFN_SIGNAL, "no signal")],
    },
    Mutation {
        name: "user-data-cfn-wrong-region",
        regression: "CloudFormation user data signals with another --region than the stack's (the signal reaches no stack)",
        target: Target::UserData,
        find: "  --region us-west-2",
        replace: "  --region eu-west-1",
        caught_by: &[catcher("userdata-cloudformation", &checks::CFN_SIGNAL, "no signal")],
    },
    Mutation {
        name: "node-maps-itself",
        regression: "the bootstrap writes its own EKS access entry with the node's credentials (AccessDenied in EKS: the worker-node policy allows DescribeCluster only)",
        target: Target::ReferenceBootstrap,
        find: "  KUBECONFIG_FLAGS=\"--kubeconfig=/var/lib/kubelet/kubeconfig\"\n",
        replace: "  KUBECONFIG_FLAGS=\"--kubeconfig=/var/lib/kubelet/kubeconfig\"\n  aws eks create-access-entry --region \"$REGION\" --cluster-name \"$CLUSTER_NAME\" --principal-arn arn:aws:iam::111122223333:role/EksNodeRole --type EC2_LINUX >/dev/null\n",
        caught_by: &[catcher("iam-access-entries", &checks::BOOTSTRAP_EXIT, "AccessDeniedException")],
    },
    Mutation {
        name: "padded-token",
        regression: "the kubelet's token is made with '=' padding (EKS's authenticator decodes it unpadded and refuses it)",
        target: Target::ReferenceBootstrap,
        find: "      command: /usr/local/bin/aws\n      args: [\"--region\", \"$REGION\", \"eks\", \"get-token\", \"--cluster-name\", \"$CLUSTER_NAME\"]\n",
        replace: "      command: /bin/sh\n      args: [\"-c\", \"/usr/local/bin/aws --region $REGION eks get-token --cluster-name $CLUSTER_NAME | jq -c '.status.token += \\\"==\\\"'\"]\n",
        caught_by: &[catcher("iam-join", &checks::REGISTERED, "")],
    },
    Mutation {
        name: "local-zone-sts-token",
        regression: "the kubelet's token is presigned for a Local Zone's STS host (no such endpoint: EKS refuses the host)",
        target: Target::ReferenceBootstrap,
        find: "      args: [\"--region\", \"$REGION\", \"eks\", \"get-token\"",
        replace: "      args: [\"--region\", \"$REGION-lax-1\", \"eks\", \"get-token\"",
        caught_by: &[catcher("iam-join", &checks::REGISTERED, "")],
    },
    Mutation {
        name: "sts-wrong-region",
        regression: "an STS call is signed for another region than the regional endpoint it goes to (STS refuses the signature)",
        target: Target::ReferenceBootstrap,
        find: "_STS_ENDPOINT\" --region \"$REGION\" sts",
        replace: "_STS_ENDPOINT\" --region eu-west-1 sts",
        caught_by: &[catcher_of("iam-join", &checks::EVIDENCE, "bootstrap log", "")],
    },
    Mutation {
        name: "containerd-deprecated-mirrors",
        regression: "the user data's NodeConfig sets a registry mirror the way containerd deprecated (the CRI \
                     plugin's `registry.mirrors`, removed in containerd 2): the node joins, and breaks on the \
                     next containerd",
        target: Target::UserData,
        find: "- --register-with-taints=dedicated=infra:NoSchedule\n",
        replace: "- --register-with-taints=dedicated=infra:NoSchedule\n  containerd:\n    config: |\n      \
                  [plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\n        \
                  endpoint = [\"https://mirror.example.com\"]\n",
        caught_by: &[catcher(
            "userdata-nodeadm",
            &checks::CONTAINERD_WARNINGS,
            "cri-registry-mirrors",
        )],
    },
    Mutation {
        name: "graceful-shutdown-off",
        regression: "the user data's NodeConfig sets the kubelet's shutdownGracePeriod to 0 (graceful node shutdown \
                     off): the node joins, and a Spot interruption or a stop powers it off under its pods",
        target: Target::UserData,
        find: "spec:\n  cluster:\n",
        replace: "spec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 0s\n      \
                  shutdownGracePeriodCriticalPods: 0s\n  cluster:\n",
        caught_by: &[catcher_of(
            "al2023-shutdown",
            &checks::INHIBITOR_LOCK_BEFORE,
            "shutdown",
            "no lock of the kubelet's",
        )],
    },
    Mutation {
        name: "removed-feature-gate",
        regression: "the user data's NodeConfig turns on a feature gate Kubernetes has since removed (SidecarContainers, \
                     GA in 1.33, gone in 1.37): the node joins on 1.36, and the kubelet its upgrade installs refuses \
                     to start",
        target: Target::UserData,
        find: "spec:\n  cluster:\n",
        replace: "spec:\n  kubelet:\n    config:\n      featureGates:\n        SidecarContainers: true\n  cluster:\n",
        caught_by: &[catcher_of(
            "al2023-upgrade",
            &checks::READY_AFTER,
            "upgrade",
            "unrecognized feature gate: SidecarContainers",
        )],
    },
    Mutation {
        name: "replacement-loses-node-label",
        regression: "the node group's new launch template version drops the label its workloads select \
                     (`--node-labels=app-pool=web`): the new nodes join, and the update's drain of the old ones \
                     stalls on the PodDisruptionBudget, the evicted pods' replacements fitting no node \
                     (a managed node group's PodEvictionFailure)",
        target: Target::GroupUserData("spare"),
        find: "--node-labels=app-pool=web,",
        replace: "--node-labels=",
        caught_by: &[catcher_of("al2023-drain", &checks::DRAINED_AFTER, "drain", "fits no node")],
    },
];
