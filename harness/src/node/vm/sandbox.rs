//! QEMU confined on the host, for every VM machine and the disk reader. QEMU parses what a guest (and a disk
//! of the user's) hands it, as root: so it runs under its own seccomp filter (`-sandbox on`: no obsolete calls,
//! no spawning a program, no scheduler or affinity changes) and, when nodejoin runs as root, as an unprivileged
//! user (`-runas nobody`), to which it drops once its disks, sockets, console and tap device are open, before
//! the guest's first instruction. It may drop privileges, so `elevateprivileges` stays allowed; having dropped
//! them it cannot take them back. What this QEMU cannot do is left out and said (`nodejoin doctor`).
use std::sync::OnceLock;

/// What confines QEMU on this host: the arguments, and a sentence for reports and `doctor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    pub args: Vec<String>,
    pub said: String,
}

/// The user QEMU drops to.
const USER: &str = "nobody";

/// This host's confinement, probed once (QEMU's `--help` lists `-sandbox` only where it was built with seccomp).
pub fn confinement() -> &'static Confinement {
    static PROBED: OnceLock<Confinement> = OnceLock::new();
    PROBED.get_or_init(|| {
        let help = crate::deadline::output_blocking(
            std::process::Command::new("qemu-system-x86_64").arg("--help"),
            "qemu-system-x86_64 --help",
            crate::deadline::TOOL_PROBE,
        )
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
        // SAFETY: geteuid(2) has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        of(&help, root, user_exists(USER))
    })
}

/// The confinement QEMU's `help` allows, for a nodejoin running as root or not, `nobody` existing or not.
fn of(help: &str, root: bool, user: bool) -> Confinement {
    let mut args = Vec::new();
    let mut said = Vec::new();
    if help.lines().any(|l| l.starts_with("-sandbox on")) {
        args.extend([
            "-sandbox".to_string(),
            "on,obsolete=deny,elevateprivileges=allow,spawn=deny,resourcecontrol=deny".to_string(),
        ]);
        said.push("under its seccomp filter (-sandbox on)".to_string());
    } else {
        said.push("without a seccomp filter (this QEMU was built without one)".to_string());
    }
    match (root, user) {
        (true, true) if help.lines().any(|l| l.starts_with("-run-with")) => {
            args.extend(["-run-with".to_string(), format!("user={USER}")]);
            said.push(format!("as user {USER}"));
        }
        (true, true) if help.lines().any(|l| l.starts_with("-runas")) => {
            args.extend(["-runas".to_string(), USER.to_string()]);
            said.push(format!("as user {USER}"));
        }
        (true, _) => said.push(format!("as root (no user {USER} to drop to, or this QEMU cannot)")),
        (false, _) => said.push("as the user nodejoin runs as".to_string()),
    }
    Confinement {
        args,
        said: format!("QEMU runs {}", said.join(", ")),
    }
}

fn user_exists(name: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(name) else {
        return false;
    };
    // SAFETY: getpwnam(3) with a NUL-terminated name; only whether it found an entry is read.
    !unsafe { libc::getpwnam(c.as_ptr()) }.is_null()
}

#[cfg(test)]
mod tests {
    use super::of;

    #[test]
    fn qemu_is_confined_as_far_as_it_can_be() {
        let help = "-sandbox on[,obsolete=allow|deny]\n-runas user     change to user id user\n";
        let c = of(help, true, true);
        assert_eq!(
            c.args,
            [
                "-sandbox",
                "on,obsolete=deny,elevateprivileges=allow,spawn=deny,resourcecontrol=deny",
                "-runas",
                "nobody"
            ]
        );
        assert_eq!(
            c.said,
            "QEMU runs under its seccomp filter (-sandbox on), as user nobody"
        );
        let newer = of(
            "-sandbox on\n-run-with [async-teardown=bool][,chroot=dir][user=username|uid:gid]\n",
            true,
            true,
        );
        assert_eq!(newer.args[2..], ["-run-with", "user=nobody"]);
        let bare = of("-machine\n", true, false);
        assert!(bare.args.is_empty());
        assert!(
            bare.said.contains("without a seccomp filter") && bare.said.contains("as root"),
            "{}",
            bare.said
        );
        assert_eq!(of(help, false, true).args.len(), 2, "not root: nothing to drop");
    }

    /// This host's QEMU, as it will run: under the filter and as nobody (where it has them), alive once started.
    #[test]
    fn this_hosts_qemu_starts_confined() {
        let c = super::confinement();
        if c.args.is_empty() {
            // Nothing to start confined: what doctor says must name the gap, not pass in silence.
            assert!(c.said.contains("without a seccomp filter"), "{}", c.said);
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let qmp = dir.path().join("qmp.sock");
        let mut child = std::process::Command::new("qemu-system-x86_64")
            .args(["-accel", "tcg", "-M", "none", "-nodefaults", "-display", "none"])
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()))
            .args(&c.args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let t0 = std::time::Instant::now();
        while !qmp.exists() && t0.elapsed() < std::time::Duration::from_secs(20) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        let alive = child.try_wait().unwrap().is_none();
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        assert!(alive, "QEMU ended: {}", String::from_utf8_lossy(&out.stderr));
        if c.args.iter().any(|a| a == "-sandbox") {
            assert!(
                status.lines().any(|l| l.starts_with("Seccomp:") && l.ends_with('2')),
                "{status}"
            );
        }
        if c.said.contains("as user nobody") {
            assert!(
                status.lines().any(|l| l.starts_with("Uid:") && l.contains("65534")),
                "{status}"
            );
        }
    }
}
