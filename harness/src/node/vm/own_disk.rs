//! A disk of the user's (`disk:` of a VM group), checked before a machine boots it. It is opened in the format
//! the scenario names, never one guessed from its content (a raw disk could pose as a qcow2 naming a host file as
//! its backing file). It may have no backing file and no external data file: either would have QEMU open another
//! file of the host. Its size is bounded, and an encrypted disk is refused (nothing could unlock it). `qemu-img
//! info` reads it under a memory and CPU limit, as OpenStack reads untrusted images.
use crate::error::{Error, Result};
use std::path::Path;

/// The largest disk a machine may boot: its overlay grows as the machine writes, up to the disk's size.
pub const MAX_VIRTUAL_SIZE: u64 = 64 << 30;

/// What `qemu-img` may use while it reads an untrusted image.
const QEMU_IMG_MEMORY: u64 = 1 << 30;
const QEMU_IMG_CPU_SECONDS: u64 = 30;

/// qcow2's magic number: a file that starts with it is not a raw disk, whatever the scenario says.
const QCOW2_MAGIC: &[u8] = b"QFI\xfb";

/// What was found in a disk that may be booted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnDiskInfo {
    pub virtual_size: u64,
    pub actual_size: u64,
}

fn disk_err(path: &Path, m: impl std::fmt::Display) -> Error {
    Error::Vm(format!("disk {}: {m}", path.display()))
}

/// A disk of the user's, opened once: it is checked and booted through this open file (`/proc/<pid>/fd/<n>`, which
/// reopens the very file, wherever its name now leads), so a file swapped in under its name after the checks is
/// never read. Kept while a machine may boot it.
#[derive(Debug)]
pub struct HeldDisk {
    file: std::fs::File,
}

impl HeldDisk {
    /// Opens `path` (confined by the caller), not following a link in its last part; the file must be a regular one.
    /// `confine` is asked again about where the open file really is (`/proc/self/fd`'s link), so a name changed
    /// between the caller's check and this open leads nowhere the checks did not allow.
    pub fn open(path: &Path, confine: impl Fn(&Path) -> std::result::Result<(), String>) -> Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| disk_err(path, e))?;
        let meta = file.metadata().map_err(|e| disk_err(path, e))?;
        if !meta.is_file() {
            return Err(disk_err(path, "not a regular file"));
        }
        let held = Self { file };
        let real = std::fs::read_link(held.own_path()).map_err(|e| disk_err(path, e))?;
        confine(&real).map_err(|m| disk_err(path, m))?;
        Ok(held)
    }

    /// The open file's name for this process: what `qemu-img` and QEMU are given.
    pub fn path(&self) -> std::path::PathBuf {
        use std::os::fd::AsRawFd;
        std::path::PathBuf::from(format!("/proc/{}/fd/{}", std::process::id(), self.file.as_raw_fd()))
    }

    fn own_path(&self) -> std::path::PathBuf {
        use std::os::fd::AsRawFd;
        std::path::PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }
}

/// Checks the disk at `path` (already confined to the scenario's roots) in `format`.
pub async fn check_own(path: &Path, format: &str) -> Result<OwnDiskInfo> {
    if format == "raw" {
        let mut head = [0u8; 4];
        let read = std::fs::File::open(path).and_then(|mut f| std::io::Read::read(&mut f, &mut head));
        if read.map_err(|e| Error::io(path, e))? == 4 && head == QCOW2_MAGIC {
            return Err(disk_err(path, "it is a qcow2 image, named raw: say `format: qcow2`"));
        }
    }
    let mut cmd = tokio::process::Command::new("qemu-img");
    cmd.args(["info", "--output=json", "-f", format]).arg(path);
    // SAFETY: setrlimit is async-signal-safe and touches only the child about to exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = |what, value: u64| {
                let l = libc::rlimit {
                    rlim_cur: value,
                    rlim_max: value,
                };
                if libc::setrlimit(what, &l) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            limit(libc::RLIMIT_AS, QEMU_IMG_MEMORY)?;
            limit(libc::RLIMIT_CPU, QEMU_IMG_CPU_SECONDS)
        });
    }
    crate::process::mark(&mut cmd);
    let out = crate::deadline::output(&mut cmd, "qemu-img info", crate::deadline::TOOL_PROBE).await?;
    if !out.status.success() {
        return Err(disk_err(
            path,
            format!(
                "qemu-img cannot read it as {format}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    judge(&String::from_utf8_lossy(&out.stdout), format).map_err(|m| disk_err(path, m))
}

/// The verdict on `qemu-img info --output=json`'s account of a disk named `format`.
fn judge(json: &str, format: &str) -> std::result::Result<OwnDiskInfo, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("qemu-img info: {e}"))?;
    let found = v["format"].as_str().unwrap_or_default();
    if found != format {
        return Err(format!("qemu-img reads it as {found:?}, not {format}"));
    }
    for key in ["backing-filename", "full-backing-filename"] {
        if let Some(b) = v.get(key).and_then(|b| b.as_str()) {
            return Err(format!(
                "it has a backing file ({b}): QEMU would open that host file too; give one self-contained image \
                 (`qemu-img convert -O {format}`)"
            ));
        }
    }
    if let Some(d) = v["format-specific"]["data"].get("data-file").and_then(|d| d.as_str()) {
        return Err(format!(
            "it keeps its data in another file ({d}): QEMU would open that host file too; give one self-contained \
             image (`qemu-img convert -O {format}`)"
        ));
    }
    if v["encrypted"].as_bool() == Some(true) {
        return Err("it is encrypted: nothing here could unlock it".into());
    }
    let virtual_size = v["virtual-size"].as_u64().ok_or("qemu-img info gave no virtual size")?;
    if virtual_size > MAX_VIRTUAL_SIZE {
        return Err(format!(
            "it is {} GiB; a machine here boots at most {} GiB (its overlay can grow to the disk's size)",
            virtual_size >> 30,
            MAX_VIRTUAL_SIZE >> 30
        ));
    }
    Ok(OwnDiskInfo {
        virtual_size,
        actual_size: v["actual-size"].as_u64().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The held file is what is read, whatever its name leads to afterwards.
    #[test]
    fn a_held_disk_is_the_file_that_was_opened() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("disk.raw");
        std::fs::write(&disk, b"first").unwrap();
        let held = HeldDisk::open(&disk, |_| Ok(())).unwrap();
        std::fs::remove_file(&disk).unwrap();
        std::fs::write(&disk, b"swapped").unwrap();
        assert_eq!(std::fs::read(held.path()).unwrap(), b"first");
        // A link in its last part is not followed; where the open file is, is confined again.
        let link = dir.path().join("link.raw");
        std::os::unix::fs::symlink(&disk, &link).unwrap();
        assert!(HeldDisk::open(&link, |_| Ok(())).is_err());
        let refused = HeldDisk::open(&disk, |real| Err(format!("{} is elsewhere", real.display()))).unwrap_err();
        assert!(refused.to_string().contains("disk.raw is elsewhere"), "{refused}");
        assert!(HeldDisk::open(dir.path(), |_| Ok(())).is_err(), "a directory");
    }

    #[test]
    fn a_self_contained_disk_of_the_named_format_passes_and_others_say_why() {
        let ok = r#"{"virtual-size": 8589934592, "filename": "d.qcow2", "format": "qcow2", "actual-size": 1000,
            "format-specific": {"type": "qcow2", "data": {"compat": "1.1"}}, "dirty-flag": false}"#;
        assert_eq!(
            judge(ok, "qcow2"),
            Ok(OwnDiskInfo {
                virtual_size: 8 << 30,
                actual_size: 1000
            })
        );
        let cases = [
            (ok.to_string(), "raw", "not raw"),
            (
                ok.replace(
                    "\"format\": \"qcow2\",",
                    "\"format\": \"qcow2\", \"backing-filename\": \"/etc/shadow\",",
                ),
                "qcow2",
                "backing file (/etc/shadow)",
            ),
            (
                ok.replace(
                    "\"compat\": \"1.1\"",
                    "\"compat\": \"1.1\", \"data-file\": \"/dev/sda\"",
                ),
                "qcow2",
                "another file (/dev/sda)",
            ),
            (
                ok.replace("\"dirty-flag\": false", "\"encrypted\": true"),
                "qcow2",
                "encrypted",
            ),
            (ok.replace("8589934592", "137438953472"), "qcow2", "128 GiB"),
            ("not json".into(), "qcow2", "qemu-img info"),
        ];
        for (json, format, says) in cases {
            let e = judge(&json, format).unwrap_err();
            assert!(e.contains(says), "{says}: {e}");
        }
    }
    // A real qcow2 judged by qemu-img itself: tests/own_disk.rs (ignored, with the reason, without qemu-img).
}
