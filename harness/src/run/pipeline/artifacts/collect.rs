//! What a failed (or negative) scenario leaves for a person to read: journals, the files the bootstrap wrote,
//! CSR and Node objects, the IMDS requests, the token webhook's and the approver's decisions, and a pointer to the
//! control-plane logs.
use crate::run::env::SharedCluster;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use std::path::Path;

/// Files an EKS-style bootstrap writes, collected from each node.
pub const BOOTSTRAP_FILES: &[&str] = &[
    "/etc/kubernetes/kubelet/kubelet-config.json",
    "/var/lib/kubelet/kubeconfig",
    "/var/lib/kubelet/bootstrap-kubeconfig",
    "/etc/kubernetes/pki/ca.crt",
    "/etc/systemd/system/kubelet.service.d/10-kubelet-args.conf",
    "/etc/systemd/system/kubelet.service.d/30-kubelet-extra-args.conf",
    "/var/log/cloud-init-output.log",
    "/var/log/cloud-init.log",
    "/run/cloud-init/status.json",
    "/run/cloud-init/result.json",
    "/etc/eksctl/kubelet.env",
    "/etc/kubernetes/kubelet/config.d/40-eksctl.conf",
    // nodeadm (AL2023)
    "/etc/kubernetes/kubelet/config.json",
    "/etc/kubernetes/kubelet/config.json.d/00-nodeadm.conf",
    "/etc/eks/kubelet/environment",
    "/etc/eks/image-credential-provider/config.json",
    "/etc/containerd/config.toml",
];

/// Writes an artifact: readable by root alone until the run's end redacts it (a kubeconfig or journal may hold a
/// key or token meanwhile), and never through a link planted where the file goes.
fn write(dir: &Path, name: &str, content: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(dir.join(name));
    if let Ok(mut f) = file {
        let _ = f.write_all(content.as_bytes());
    }
}

/// What the harness itself recorded about one node (the node's own logs are read from the container).
pub struct HarnessLogs {
    pub bootstrap: String,
    pub imds: String,
    /// The token webhook's decisions on this node's tokens (`auth: iam`; empty otherwise).
    pub authenticator: String,
    /// Every call the node made to the fakes.
    pub calls: String,
}

/// How much of a node's console its artifacts keep.
const CONSOLE_LINES: usize = 5000;

/// Collects one node's artifacts into `dir`; for a machine observed from outside, what its disk said after its
/// shutdown (asked for `files`, as every reading of it is), as a note for the report (the kubelet's last error in
/// it, for a node that never `registered`).
pub async fn collect_node(
    dir: &Path,
    n: &crate::run::node::RunningNode,
    logs: &HarnessLogs,
    cluster: &SharedCluster,
) -> Option<String> {
    let (node, instance, node_name) = (&n.machine, &n.instance, n.node_name.as_str());
    let registered = n.node.is_some();
    let files = crate::run::pipeline::observe::disk::wanted(n);
    let _ = std::fs::create_dir_all(dir);
    write(dir, "bootstrap.log", &logs.bootstrap);
    write(dir, "imds-requests.log", &logs.imds);
    write(dir, "calls.log", &logs.calls);
    if !logs.authenticator.is_empty() {
        write(dir, "authenticator.log", &logs.authenticator);
    }
    // A machine observed from outside: its logs are on its disk, read once it is shut down (its console then ends
    // with the shutdown).
    let from_disk = node.logs_after_shutdown(&files).await;
    let console = node.console(CONSOLE_LINES).await;
    if !console.trim().is_empty() {
        write(dir, "console.log", &console);
    }
    let mut note = None;
    if let Some(read) = from_disk {
        note = Some(write_disk_logs(dir, read, registered));
    } else if let Some(why) = node.exited().await {
        // A dead node's journal is read from the host directory it kept it in; where it cannot be, the reason is
        // where the log would be.
        for (log, unit) in [
            ("kubelet.log", Some("kubelet")),
            ("containerd.log", Some("containerd")),
            ("journal.log", None),
        ] {
            let read = node
                .journal_on_host(unit, None)
                .await
                .unwrap_or_else(|| Err("it was started without one".to_string()));
            let text = read.unwrap_or_else(|e| {
                format!(
                    "(not collected: {why}, and its journal could not be read: {e}. files/ has what the node wrote \
                     to disk, console.log what it printed, if anything.)\n"
                )
            });
            write(dir, log, &text);
        }
    } else {
        write(dir, "kubelet.log", &node.journal(Some("kubelet")).await);
        write(dir, "containerd.log", &node.journal(Some("containerd")).await);
        write(dir, "journal.log", &node.journal(None).await);
    }
    let files = dir.join("files");
    let _ = std::fs::create_dir_all(&files);
    for f in BOOTSTRAP_FILES {
        if let Some(content) = node.read_file(f).await {
            write(&files, &f.trim_start_matches('/').replace('/', "__"), &content);
        }
    }
    write(
        dir,
        "instance.txt",
        &format!(
            "instance-id: {}\nprivate-ip: {}\nprivate-dns-name: {}\ninstance-type: {}\naz: {}\nimds-v2-required: {}\nvpc: {} {}\nsubnet: {} {}\n",
            instance.instance_id,
            instance.private_ip,
            instance.private_dns_name(),
            instance.instance_type,
            instance.availability_zone,
            instance.imds_v2_required,
            instance.vpc.vpc_id,
            instance.vpc.ipv4_cidrs.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(","),
            instance.vpc.subnet_id,
            instance.vpc.subnet_ipv4,
        ),
    );
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    if let Ok(n) = nodes.get(node_name).await {
        write(dir, "node.yaml", &serde_yaml_ng::to_string(&n).unwrap_or_default());
    }
    let csrs: Api<CertificateSigningRequest> = Api::all(cluster.client.clone());
    if let Ok(list) = csrs.list(&ListParams::default()).await {
        let mine: Vec<_> = list
            .items
            .into_iter()
            .filter(|c| crate::assert::csr::belongs_to(c, node_name))
            .collect();
        write(dir, "csrs.yaml", &serde_yaml_ng::to_string(&mine).unwrap_or_default());
    }
    note
}

/// The logs read from a stopped machine's disk: the journal as a running node's, cloud-init's logs with the files.
/// Says what was read, and the kubelet's last error in it.
fn write_disk_logs(
    dir: &Path,
    read: std::result::Result<(String, crate::node::vm::reader::DiskLogs), String>,
    registered: bool,
) -> String {
    let (how, logs) = match read {
        Ok(r) => r,
        Err(e) => {
            let text =
                format!("(not collected: the machine has no guest agent, and its disk could not be read: {e})\n");
            for log in ["kubelet.log", "nodeadm.log", "journal.log"] {
                write(dir, log, &text);
            }
            return crate::run::pipeline::observe::disk::unreadable(e);
        }
    };
    let lines = logs.journal.lines().count();
    // A node that registered logged errors on its way (before its Node existed) that are no cause of anything.
    let kubelet = match crate::run::pipeline::observe::journal::last_error(&logs.kubelet) {
        _ if logs.kubelet.trim().is_empty() => "; no kubelet lines".to_string(),
        Some(e) if !registered => format!("; the kubelet's last error: {e}"),
        _ => format!("; {} kubelet lines", logs.kubelet.lines().count()),
    };
    let names: Vec<&str> = logs.files.iter().map(|(n, _)| n.as_str()).collect();
    let read = if lines == 0 && names.is_empty() {
        // What the reader said it found: nothing, and why.
        logs.found.trim_start_matches("nodejoin-reader: ").to_string()
    } else if names.is_empty() {
        format!("{lines} journal lines{kubelet}; no cloud-init log")
    } else {
        format!(
            "{lines} journal lines{kubelet}; cloud-init's logs: {}",
            names.join(", ")
        )
    };
    let note = format!("read from its disk after its shutdown ({how}): {read}");
    let head = format!(
        "# read from the machine's disk after its shutdown ({how}); {}\n",
        logs.found
    );
    // An empty unit log says why: no journal on the disk at all, or none of that unit's lines in it.
    let none = |s: &str| {
        match (s.is_empty(), logs.journal.is_empty()) {
            (false, _) => "",
            (true, true) => "(no persistent journal on the disk)\n",
            (true, false) => "(no lines of this unit in the journal)\n",
        }
        .to_string()
            + s
    };
    write(dir, "kubelet.log", &(head.clone() + &none(&logs.kubelet)));
    write(dir, "nodeadm.log", &(head.clone() + &none(&logs.nodeadm)));
    write(dir, "journal.log", &(head + &none(&logs.journal)));
    let files = dir.join("files");
    let _ = std::fs::create_dir_all(&files);
    for (name, bytes) in &logs.files {
        write(&files, &format!("var__log__{name}"), &String::from_utf8_lossy(bytes));
    }
    note
}

/// Cluster-level artifacts: approver decisions and a link to the control-plane logs.
pub fn collect_cluster(dir: &Path, cluster: &SharedCluster) {
    let _ = std::fs::create_dir_all(dir);
    let decisions: Vec<String> = cluster
        .approver
        .decisions()
        .iter()
        .map(|d| format!("{} {} approved={} {}", d.csr, d.requester, d.approved, d.reason))
        .collect();
    write(dir, "approver.log", &decisions.join("\n"));
    let link = dir.join("control-plane-logs");
    let _ = std::fs::remove_file(&link);
    let _ = std::os::unix::fs::symlink(&cluster.logs_dir, &link);
}
