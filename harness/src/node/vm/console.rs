//! A VM node's serial console, bounded: the machine writes to it as much as it likes (a kernel or unit that
//! prints without end), so the file is cut to its last part whenever it grows past [`MAX`].
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The most the console file may hold before it is cut.
pub const MAX: u64 = 8 * 1024 * 1024;
/// What is kept of it when cut: its end.
const KEEP: u64 = 1024 * 1024;
const EVERY: Duration = Duration::from_secs(2);

/// Watches a console file; stops when dropped.
pub struct Cap {
    task: tokio::task::JoinHandle<()>,
}

impl Cap {
    pub fn start(path: PathBuf) -> Self {
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(EVERY).await;
                let p = path.clone();
                let _ = tokio::task::spawn_blocking(move || cut(&p, MAX, KEEP)).await;
            }
        });
        Self { task }
    }
}

impl Drop for Cap {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// When `path` holds more than `max` bytes, keeps its last `keep` after a line saying how much went.
fn cut(path: &Path, max: u64, keep: u64) -> std::io::Result<bool> {
    let mut f = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
    let len = f.metadata()?.len();
    if len <= max {
        return Ok(false);
    }
    f.seek(SeekFrom::Start(len - keep))?;
    let mut tail = Vec::with_capacity(keep as usize);
    Read::by_ref(&mut f).take(keep).read_to_end(&mut tail)?;
    f.set_len(0)?;
    f.seek(SeekFrom::Start(0))?;
    writeln!(f, "[nodejoin: the console's first {} bytes were cut]", len - keep)?;
    f.write_all(&tail)?;
    Ok(true)
}

/// What the console file at `path` holds past byte `from` (all of it when it was cut since), as text.
pub fn since(path: &Path, from: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = if len >= from { from } else { 0 };
    let mut bytes = Vec::new();
    let _ = f.seek(SeekFrom::Start(start)).and_then(|_| f.read_to_end(&mut bytes));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A failure the console shows to have been decided: the machine will not join however long it is given. Only
/// what leaves no way back counts: the firmware (OVMF or SeaBIOS) found nothing to boot, the kernel panicked, systemd fell into
/// emergency mode, nodeadm failed (its units run once, `Type=oneshot`, and print to the console as the AMI ships
/// them). A failed user-data part does not: on AL2023 nodeadm still runs after it. The kubelet prints nothing here,
/// so a kubelet that crash-loops is not seen. Returns the cause, quoting the console's lines.
pub fn decided_failure(console: &str) -> Option<String> {
    let lines: Vec<String> = console.lines().map(plain).collect();
    let find = |needle: &str| lines.iter().position(|l| l.contains(needle));
    for (ends, failed, lacks, other) in NOTHING_TO_BOOT {
        let Some(i) = ends.iter().find_map(|e| find(e)) else {
            continue;
        };
        let failed = lines[..i]
            .iter()
            .filter(|l| l.contains(failed))
            .map(|l| message(l))
            .next_back()
            .unwrap_or_else(|| message(&lines[i]));
        return Some(format!(
            "the firmware found nothing to boot ({failed}): the disk has no {lacks} the firmware can start ({other})"
        ));
    }
    if let Some(i) = find("Kernel panic - not syncing") {
        return Some(format!("the kernel panicked: {}", message(&lines[i])));
    }
    if let Some(i) = find("You are in emergency mode").or_else(|| find("Entering emergency mode")) {
        let failed: Vec<String> = lines[..i]
            .iter()
            .filter(|l| l.contains("[FAILED]") || l.contains("[DEPEND]"))
            .take(3)
            .map(|l| message(l))
            .collect();
        return Some(match failed.is_empty() {
            true => format!("systemd entered emergency mode: {}", message(&lines[i])),
            false => format!("systemd entered emergency mode after: {}", failed.join(" / ")),
        });
    }
    let fatal = lines.iter().find_map(|l| {
        let (_, after) = l.split_once("nodeadm[")?;
        let (_, rest) = after.split_once("]: ")?;
        rest.strip_prefix("fatal ").map(str::to_string)
    });
    if let Some(rest) = fatal {
        return Some(format!("nodeadm failed (its console output): {}", bounded(&rest)));
    }
    let unit = lines
        .iter()
        .find(|l| l.contains("[FAILED]") && l.contains("Failed to start nodeadm-"));
    unit.map(|l| format!("nodeadm failed: systemd: {}", message(l)))
}

/// How each firmware says it found nothing to boot (its lines, the earlier line that names what failed), what the
/// disk lacks then, and the firmware that boots such a disk.
const NOTHING_TO_BOOT: &[(&[&str], &str, &str, &str)] = &[
    // OVMF, every boot option failed: it starts its built-in shell (or says so, in other versions).
    (
        &["UEFI Interactive Shell", "No bootable option or device was found"],
        "BdsDxe: failed to load",
        "UEFI boot loader",
        "a BIOS-only image boots with `disk.firmware: bios`",
    ),
    // SeaBIOS: it says so, and tries again every minute for ever.
    (
        &["No bootable device"],
        "Boot failed",
        "BIOS boot code",
        "a UEFI-only image boots with `disk.firmware: uefi`",
    ),
];

/// The console's text without its control sequences, line by line.
pub fn readable(text: &str) -> String {
    text.lines().map(plain).collect::<Vec<_>>().join("\n")
}

/// A console line without its control sequences (systemd colours its status) or carriage returns.
fn plain(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // CSI: ESC [ parameters, then one final byte in @..~.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for f in chars.by_ref() {
                        if ('@'..='~').contains(&f) {
                            break;
                        }
                    }
                }
            }
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// A line without the kernel's `[  12.345678] ` stamp, bounded.
fn message(line: &str) -> String {
    let t = line.trim();
    let t = match t.strip_prefix('[').and_then(|r| r.split_once("] ")) {
        Some((stamp, rest)) if stamp.trim().parse::<f64>().is_ok() => rest,
        _ => t,
    };
    bounded(t)
}

fn bounded(s: &str) -> String {
    s.trim().chars().take(400).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_console_that_decides_nothing_says_nothing() {
        let booting = "[   24.64] nodeadm[320]: info init/init.go:55 Checking user is root..\n\
             [   24.65] nodeadm[320]: warn cli/config.go:25 failed to load cached config {\"error\": \"open /run/eks/nodeadm/config.json: no such file or directory\"}\n\
             [\u{1b}[0;32m  OK  \u{1b}[0m] Finished \u{1b}[0;1;39mnodeadm-config.service\u{1b}[0m - EKS Nodeadm Config.\n\
             [   35.10] cloud-init[900]: 2026-11-28 05:01:40,120 - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)\n";
        assert_eq!(decided_failure(booting), None);
        assert_eq!(decided_failure(""), None);
    }

    #[test]
    fn nodeadm_failing_is_quoted_from_its_own_line() {
        let text = "[   25.47] nodeadm[320]: info init/init.go:171 Fetching instance details..\n\
             [   25.90] nodeadm[320]: fatal cli/main.go:35 Command failed {\"error\": \"operation error EC2: DescribeInstances, exceeded maximum number of attempts\"}\n\
             [\u{1b}[0;1;31mFAILED\u{1b}[0m] Failed to start \u{1b}[0;1;39mnodeadm-config.service\u{1b}[0m - EKS Nodeadm Config.\n";
        let why = decided_failure(text).unwrap();
        assert_eq!(
            why,
            "nodeadm failed (its console output): cli/main.go:35 Command failed {\"error\": \"operation error EC2: \
             DescribeInstances, exceeded maximum number of attempts\"}"
        );
        // Without its line (a crash before it logged), systemd's says which unit.
        let unit_only = "[\u{1b}[0;1;31mFAILED\u{1b}[0m] Failed to start \u{1b}[0;1;39mnodeadm-run.service\u{1b}[0m - EKS Nodeadm Run.\r\n";
        assert_eq!(
            decided_failure(unit_only).unwrap(),
            "nodeadm failed: systemd: [FAILED] Failed to start nodeadm-run.service - EKS Nodeadm Run."
        );
    }

    #[test]
    fn a_machine_that_cannot_boot_says_why() {
        // OVMF (Debian's, under QEMU) on a disk without a UEFI loader, `-boot strict=on`.
        let firmware = "\u{1b}[=3h\u{1b}[=3hBdsDxe: failed to load Boot0001 \"UEFI Misc Device\" from PciRoot(0x0)/Pci(0x2,0x0): Not Found\r\n\
             BdsDxe: loading Boot0002 \"EFI Internal Shell\" from Fv(7CB8BDC9-F8EB-4F34-AAEA-3EE4AF6516A1)/FvFile(7C04A583-9E3E-4F1C-AD65-E05268D0B4D1)\r\n\
             UEFI Interactive Shell v2.2\r\nEDK II\r\nShell> ";
        assert_eq!(
            decided_failure(firmware).unwrap(),
            "the firmware found nothing to boot (BdsDxe: failed to load Boot0001 \"UEFI Misc Device\" from \
             PciRoot(0x0)/Pci(0x2,0x0): Not Found): the disk has no UEFI boot loader the firmware can start (a \
             BIOS-only image boots with `disk.firmware: bios`)"
        );
        // SeaBIOS (QEMU's, its text on the serial console) on a disk without boot code in its MBR.
        let bios = "SeaBIOS (version 1.16.2-debian-1.16.2-1)\r\nBooting from Hard Disk...\r\n\
             Boot failed: not a bootable disk\r\n\r\nNo bootable device.  Retrying in 60 seconds.\r\n";
        assert_eq!(
            decided_failure(bios).unwrap(),
            "the firmware found nothing to boot (Boot failed: not a bootable disk): the disk has no BIOS boot code \
             the firmware can start (a UEFI-only image boots with `disk.firmware: uefi`)"
        );
        let panic = "[    2.104] VFS: Cannot open root device \"vda9\" or unknown-block(0,0): error -6\n\
             [    2.106] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)\n";
        assert_eq!(
            decided_failure(panic).unwrap(),
            "the kernel panicked: Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)"
        );
        let emergency = "[\u{1b}[0;1;31mFAILED\u{1b}[0m] Failed to mount \u{1b}[0;1;39mdata.mount\u{1b}[0m - /data.\n\
             [\u{1b}[0;1;33mDEPEND\u{1b}[0m] Dependency failed for \u{1b}[0;1;39mlocal-fs.target\u{1b}[0m - Local File Systems.\n\
             You are in emergency mode. After logging in, type \"journalctl -xb\" to view\n";
        assert_eq!(
            decided_failure(emergency).unwrap(),
            "systemd entered emergency mode after: [FAILED] Failed to mount data.mount - /data. / \
             [DEPEND] Dependency failed for local-fs.target - Local File Systems."
        );
    }

    #[test]
    fn what_came_after_a_point_is_read_or_all_once_cut() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("console.log");
        std::fs::write(&p, "first boot\nsecond boot\n").unwrap();
        assert_eq!(since(&p, 11), "second boot\n");
        assert_eq!(since(&p, 100), "first boot\nsecond boot\n");
        assert_eq!(since(&dir.path().join("none"), 0), "");
    }

    #[test]
    fn a_console_past_its_bound_keeps_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("console.log");
        std::fs::write(&p, "a".repeat(100) + &"z".repeat(10)).unwrap();
        assert!(!cut(&p, 200, 10).unwrap());
        assert!(cut(&p, 50, 10).unwrap());
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "[nodejoin: the console's first 100 bytes were cut]\nzzzzzzzzzz");
    }
}
