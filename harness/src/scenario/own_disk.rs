//! The rules of a machine's own disk (`disk:` of a VM group), checked at load.
use super::confine::Roots;
use super::model::{ExitExpectation, Expect, NodeGroup, NodeRuntime};
use super::runtime::OwnDisk;
use std::path::Path;

/// A machine's own disk: a VM group whose bootstrap is its user data (nothing of nodejoin's goes into the disk: no
/// image, script or containerd of ours), and a regular file inside the roots once it exists (an absent one makes
/// the scenario not applicable, `Scenario::not_applicable`).
pub(super) fn check(n: &NodeGroup, disk: &OwnDisk, roots: &Roots) -> std::result::Result<(), String> {
    if n.runtime != NodeRuntime::Vm {
        return Err("a disk boots a machine: add `runtime: vm`".into());
    }
    if n.user_data.is_none() {
        return Err("a disk of your own is bootstrapped by its own boot from user data: add `userData`".into());
    }
    let ours = [
        (n.image.is_some(), "image"),
        (
            n.bootstrap.script.is_some() || !n.bootstrap.args.is_empty(),
            "bootstrap",
        ),
        (n.containerd.is_some(), "containerd"),
    ];
    if let Some((_, key)) = ours.iter().find(|(set, _)| *set) {
        return Err(format!(
            "`{key}` shapes nodejoin's node image, which a disk of your own replaces: remove one of them"
        ));
    }
    if !n.capabilities().sees_inside {
        if let Some(key) = reads_inside(&n.expect) {
            return Err(format!(
                "`{key}` reads inside the machine, and a disk without a guest agent is observed from outside only \
                 (the cluster, its calls, its console): add `guestAgent: true` if the image runs qemu-guest-agent, \
                 or leave `{key}` out"
            ));
        }
    }
    let path = Path::new(&disk.path);
    if path.exists() {
        let real = roots.check(path, "disk")?;
        if !real.is_file() {
            return Err(format!("{} is not a regular file", path.display()));
        }
    }
    Ok(())
}

/// The first expectation of `e` that only a look inside the running node can judge (through the guest agent).
/// Evidence from the kubelet's, nodeadm's or cloud-init's logs, cloud-init's and nodeadm's reports and the files
/// it wrote are judged from the disk after the machine's shutdown instead.
fn reads_inside(e: &Expect) -> Option<&'static str> {
    [
        (e.idempotent, "idempotent"),
        (e.deterministic, "deterministic"),
        (e.local_storage.is_some(), "localStorage"),
        (e.sandbox_image, "sandboxImage"),
        (e.executables.is_some(), "executables"),
        (e.bootstrap_exit != ExitExpectation::Any, "bootstrapExit"),
    ]
    .into_iter()
    .find_map(|(set, key)| set.then_some(key))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_disk_of_your_own_is_a_vm_bootstrapped_by_user_data_and_confined() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("d.qcow2"), b"x").unwrap();
        std::fs::write(dir.path().join("u.sh"), b"#!/bin/sh\necho hi\n").unwrap();
        let load =
            |g: &str| crate::scenario::load::parse(&format!("nodes:\n  - name: a\n{g}"), &dir.path().join("s.yaml"));
        let ud = "    userData: { file: u.sh }\n";
        let disk = |p: &str| format!("    runtime: vm\n    disk: {{ path: {p}, format: qcow2 }}\n{ud}");
        let s = load(&disk("d.qcow2")).unwrap();
        let d = s.nodes[0].disk.clone().unwrap();
        assert!(d.path.ends_with("/d.qcow2") && d.format.name() == "qcow2" && s.nodes[0].containerd.is_none());
        assert_eq!(s.not_applicable(), None);
        let gone = load(&disk("gone.raw")).unwrap().not_applicable().unwrap();
        assert!(gone.contains("gone.raw is absent"), "{gone}");
        for (bad, says) in [
            (disk("d.qcow2").replace("    runtime: vm\n", ""), "add `runtime: vm`"),
            (disk("d.qcow2").replace(ud, ""), "add `userData`"),
            (
                format!("{}    containerd: \"2.2\"\n", disk("d.qcow2")),
                "`containerd` shapes",
            ),
            (disk("/etc/passwd"), "outside"),
            (
                format!("{}    expect:\n      bootstrapExit: success\n", disk("d.qcow2")),
                "`bootstrapExit` reads inside",
            ),
        ] {
            let e = load(&bad).unwrap_err().to_string();
            assert!(e.contains(says) && e.contains("s.yaml:"), "{says}: {e}");
        }
        // With a guest agent, the harness reads inside as on nodejoin's disks; the console is outside either way.
        let agent = disk("d.qcow2").replace("format: qcow2 }", "format: qcow2, guestAgent: true }");
        assert!(load(&format!("{agent}    expect:\n      nodeadm: succeeded\n")).is_ok());
        // Read from the disk after the machine's shutdown: cloud-init's and nodeadm's reports, files.
        for key in [
            "nodeadm: succeeded",
            "cloudInit: { status: done }",
            "files: [{ path: /etc/hostname }]",
        ] {
            assert!(
                load(&format!("{}    expect:\n      {key}\n", disk("d.qcow2"))).is_ok(),
                "{key}"
            );
        }
        // The console is outside; the kubelet's, nodeadm's and cloud-init's logs are read from the disk after the
        // machine's shutdown.
        for source in ["console", "kubelet", "nodeadm", "cloud-init"] {
            let ev = format!(
                "{}    expect:\n      evidence: [{{ source: {source}, contains: x }}]\n",
                disk("d.qcow2")
            );
            assert!(load(&ev).is_ok(), "{source}");
        }
    }
}
