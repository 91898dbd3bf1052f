//! A stopped machine's disk, read by another machine: how the logs of a disk without a guest agent are had once
//! it is shut down (its journal, cloud-init's logs), as a person would read an instance's root volume attached
//! elsewhere. The disk is never mounted on the host, whose kernel would then parse a file system the machine
//! wrote: a reader machine (nodejoin's kernel and initramfs with `nodejoin.read=logs`, `fixtures/vm-disk/init`)
//! mounts it read-only and writes the logs as a tar to a blank disk. Of that tar the harness takes regular files
//! of known names only ([`take`]), and journalctl renders the journal in a throwaway container of nodejoin's base
//! image (no network, no capabilities, read-only: `crate::docker::oneshot`).
use super::disk::{build_context, export, unpack, Recipe};
use super::kernel::{short_hash, Kernel};
use crate::docker::Docker;
use crate::error::{Error, Result};
use std::path::Path;
use std::time::Duration;

/// The blank disk the reader writes to: its size bounds what is taken of a machine's logs.
const OUT_BYTES: u64 = 256 << 20;

/// How long the reader may take (its boot, the mounts, the tar), under TCG.
const READ_WITHIN: Duration = Duration::from_secs(180);

/// What journalctl prints at most, per log.
const JOURNAL_LINES: &str = "50000";

/// cloud-init's logs, as the reader finds them under `var/log` (or `log` on a partition of its own).
const CLOUD_INIT_LOGS: &[&str] = &["cloud-init.log", "cloud-init-output.log"];

fn reader_err(m: impl Into<String>) -> Error {
    Error::Vm(format!("reading the stopped machine's disk: {}", m.into()))
}

/// The logs read from a stopped machine's disk.
#[derive(Debug, Default, Clone)]
pub struct DiskLogs {
    /// The whole journal, the kubelet's, and nodeadm's units' (journalctl's text); empty without a journal.
    pub journal: String,
    pub kubelet: String,
    pub nodeadm: String,
    /// cloud-init's logs found: `(name, content)`.
    pub files: Vec<(String, Vec<u8>)>,
    /// What the reader said it found (its console line).
    pub found: String,
}

/// nodejoin's kernel without a node image (a group booting a disk of its own has none): the kernel's stage of
/// `fixtures/vm-disk/` alone, which Docker's cache shares with every VM disk's build, kept in the VM cache.
pub async fn kernel(docker: &Docker) -> Result<Kernel> {
    let recipe = Recipe::read().await?;
    let key = short_hash(&[
        b"reader",
        recipe.hash.as_bytes(),
        recipe.modules.as_bytes(),
        recipe.kernel_from.as_bytes(),
    ]);
    let boot = super::kernel::cache().join(format!("reader-{key}"));
    if let Some(k) = Kernel::cached(&boot) {
        return Ok(k);
    }
    let _lock = crate::paths::CacheLock::acquire("vm-disk")
        .await
        .map_err(|e| reader_err(format!("the VM disk cache lock: {e}")))?;
    if let Some(k) = Kernel::cached(&boot) {
        return Ok(k);
    }
    let steps = crate::progress::Steps::new("the reader's kernel", 2);
    let work = crate::node::image::work_dir("vm-reader")?;
    steps.step(1, "docker build (the kernel's stage: Debian's kernel by apt)");
    let context = build_context(docker, &recipe.kernel_from, work.path()).await?;
    let tag = format!("nodejoin-vm:reader-{key}");
    crate::docker::images::build_stage(
        docker,
        &context,
        &tag,
        Some("kernel"),
        &[("io.nodejoin.vm-disk", key.clone())],
        &[
            ("KERNEL_FROM", recipe.kernel_from.clone()),
            ("INITRAMFS_MODULES", recipe.modules.clone()),
        ],
    )
    .await?;
    steps.step(2, "export, the kernel and its initramfs");
    let exported = export(docker, &tag, &work.path().join("root.tar")).await;
    crate::docker::images::remove(docker, &[&tag]).await;
    let archive = exported?;
    let root = work.path().join("root");
    let partial = boot.with_extension("partial");
    let (from, to) = (root.clone(), partial.clone());
    crate::node::inputs::off_runtime(move || {
        unpack(&archive, &from)?;
        let _ = std::fs::remove_dir_all(&to);
        Kernel::from_root(&from, &to)
    })
    .await?;
    let _ = std::fs::remove_dir_all(&boot);
    std::fs::rename(&partial, &boot).map_err(|e| Error::io(&boot, e))?;
    let k = Kernel::cached(&boot).ok_or_else(|| reader_err(format!("{}: incomplete", boot.display())))?;
    steps.finish(&format!("kernel {}", k.version));
    Ok(k)
}

/// What the reader machine is started with.
pub struct Read<'a> {
    pub kernel: &'a Kernel,
    pub accel: super::qemu::Accel,
    /// The stopped machine's disk (its overlay, qcow2): attached read-only.
    pub disk: &'a Path,
    /// Where the reader's files go (its blank disk, its console).
    pub work: &'a Path,
    pub pids_dir: &'a Path,
}

/// Reads the logs of the stopped machine's disk `r.disk`.
pub async fn read(docker: &Docker, r: Read<'_>) -> Result<DiskLogs> {
    let out = r.work.join("reader-out.raw");
    let console = r.work.join("reader-console.log");
    let file = std::fs::File::create(&out).map_err(|e| Error::io(&out, e))?;
    file.set_len(OUT_BYTES).map_err(|e| Error::io(&out, e))?;
    drop(file);
    let program = crate::assets::which("qemu-system-x86_64")
        .ok_or_else(|| reader_err("qemu-system-x86_64 is not on PATH (Debian package qemu-system-x86)"))?;
    let mut qemu =
        crate::process::Supervised::spawn("qemu-reader", &program, &args(&r, &out, &console)?, r.work, r.pids_dir)?;
    let t0 = std::time::Instant::now();
    while qemu.exited().is_none() && t0.elapsed() < READ_WITHIN {
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let ended = qemu.exited();
    qemu.stop(Duration::from_secs(2)).await;
    let said = crate::process::tail(&console, 200);
    let found = said
        .lines()
        .rev()
        .find(|l| l.contains("nodejoin-reader:"))
        .map(|l| l.trim().to_string());
    let Some(found) = found else {
        return Err(reader_err(match ended {
            Some(_) => format!(
                "the reader stopped without a word; its console ends: {}",
                crate::process::last_lines(&said, 3, " | ")
            ),
            None => format!("the reader did not finish within {}s", READ_WITHIN.as_secs()),
        }));
    };
    let dir = r.work.join("reader-logs");
    let (o, d) = (out.clone(), dir.clone());
    let files = crate::node::inputs::off_runtime(move || take(&o, &d)).await?;
    let _ = std::fs::remove_file(&out);
    let mut logs = DiskLogs {
        files,
        found,
        ..Default::default()
    };
    if dir.join("journal").is_dir() {
        logs.journal = render(docker, &dir, &[]).await?;
        logs.kubelet = render(docker, &dir, &["-u", "kubelet"]).await?;
        logs.nodeadm = render(docker, &dir, &["-u", "nodeadm-config", "-u", "nodeadm-run"]).await?;
    }
    Ok(logs)
}

/// The reader's QEMU command line: nodejoin's kernel in reader mode, the disk read-only, a blank disk, no network.
fn args(r: &Read<'_>, out: &Path, console: &Path) -> Result<Vec<String>> {
    let path = super::qemu::opt_path;
    Ok(vec![
        "-name".into(),
        "reader,process=nodejoin-vm-reader".into(),
        "-accel".into(),
        r.accel.name().into(),
        "-m".into(),
        "512".into(),
        "-smp".into(),
        "1".into(),
        "-nodefaults".into(),
        "-no-user-config".into(),
        "-display".into(),
        "none".into(),
        "-no-reboot".into(),
        "-net".into(),
        "none".into(),
        "-kernel".into(),
        path(&r.kernel.vmlinuz)?,
        "-initrd".into(),
        path(&r.kernel.initramfs)?,
        "-append".into(),
        "console=ttyS0 panic=-1 nodejoin.read=logs".into(),
        "-chardev".into(),
        format!("file,id=con0,path={}", path(console)?),
        "-serial".into(),
        "chardev:con0".into(),
        "-drive".into(),
        format!("file={},if=none,id=disk,format=qcow2,readonly=on", path(r.disk)?),
        "-device".into(),
        "virtio-blk-pci,drive=disk".into(),
        "-drive".into(),
        format!("file={},if=none,id=out,format=raw", path(out)?),
        "-device".into(),
        "virtio-blk-pci,drive=out".into(),
    ])
}

/// Takes the logs out of the reader's tar (`out`, the blank disk: a tar, then zeros) into `dir`: the journal's
/// files to `dir/journal/<machine id>/`, cloud-init's logs returned. Only regular files of those names are taken,
/// each within the disk's bound; anything else (links, devices, other paths, odd names) is passed over.
fn take(out: &Path, dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    use std::io::Read as _;
    let file = std::fs::File::open(out).map_err(|e| Error::io(out, e))?;
    let mut tar = tar::Archive::new(std::io::BufReader::new(file));
    let mut found = Vec::new();
    let Ok(entries) = tar.entries() else {
        return Ok(found);
    };
    // A tar cut short (the blank disk filled up) ends the reading where it breaks.
    for entry in entries {
        let Ok(mut entry) = entry else { break };
        if entry.header().entry_type() != tar::EntryType::Regular || entry.size() > OUT_BYTES {
            continue;
        }
        let Ok(path) = entry.path().map(|p| p.into_owned()) else {
            continue;
        };
        let Some(wanted) = wanted(&path) else { continue };
        let mut bytes = Vec::new();
        if entry.read_to_end(&mut bytes).is_err() {
            break;
        }
        match wanted {
            Wanted::Journal { machine, file } => {
                let to = dir.join("journal").join(machine);
                std::fs::create_dir_all(&to).map_err(|e| Error::io(&to, e))?;
                std::fs::write(to.join(&file), &bytes).map_err(|e| Error::io(to.join(&file), e))?;
            }
            Wanted::Log(name) => found.push((name, bytes)),
        }
    }
    Ok(found)
}

#[derive(Debug, PartialEq, Eq)]
enum Wanted {
    Journal { machine: String, file: String },
    Log(String),
}

/// Whether the reader's tar path `path` is one the harness takes: `[var/]log/journal/<32 hex>/<name>.journal[~]`
/// or `[var/]log/<cloud-init log>`.
fn wanted(path: &Path) -> Option<Wanted> {
    let parts: Vec<&str> = path
        .components()
        .map(|c| match c {
            std::path::Component::Normal(s) => s.to_str(),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let rest = match parts.as_slice() {
        ["var", "log", rest @ ..] | ["log", rest @ ..] => rest,
        _ => return None,
    };
    let plain = |s: &str| s.len() <= 200 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"@._-~".contains(&b));
    match rest {
        [log] if CLOUD_INIT_LOGS.contains(log) => Some(Wanted::Log((*log).to_string())),
        ["journal", machine, file]
            if machine.len() == 32
                && machine.bytes().all(|b| b.is_ascii_hexdigit())
                && plain(file)
                && !file.starts_with('.')
                && (file.ends_with(".journal") || file.ends_with(".journal~")) =>
        {
            Some(Wanted::Journal {
                machine: (*machine).to_string(),
                file: (*file).to_string(),
            })
        }
        _ => None,
    }
}

/// journalctl's text of the journal under `dir/journal`, with `filter` (units), in a throwaway container.
async fn render(docker: &Docker, dir: &Path, filter: &[&str]) -> Result<String> {
    let journal = dir.join("journal").display().to_string();
    let mut cmd: Vec<String> = [
        "journalctl",
        "-D",
        &journal,
        "--no-pager",
        "-q",
        "-o",
        "short-precise",
        "-n",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    cmd.push(JOURNAL_LINES.into());
    cmd.extend(filter.iter().map(|s| s.to_string()));
    let (out, stdout) = crate::docker::oneshot::run(
        docker,
        crate::docker::oneshot::OneShot {
            image: &crate::node::image::base_tag()?,
            cmd,
            env: Vec::new(),
            read_only: vec![dir.display().to_string()],
            hidden: Vec::new(),
            working_dir: "/".into(),
            labels: [("io.nodejoin.vm-reader".to_string(), "journalctl".to_string())].into(),
            timeout: Duration::from_secs(120),
            max_stdout: 32 << 20,
        },
    )
    .await?;
    if out.exit_code != 0 && stdout.is_empty() {
        return Err(reader_err(format!(
            "journalctl failed ({}): {}",
            out.exit_code,
            out.stderr.trim()
        )));
    }
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::{take, wanted, Wanted};
    use std::path::Path;

    #[test]
    fn only_the_journal_and_cloud_inits_logs_are_taken() {
        let mid = "0123456789abcdef0123456789abcdef";
        assert_eq!(
            wanted(Path::new(&format!("var/log/journal/{mid}/system.journal"))),
            Some(Wanted::Journal {
                machine: mid.into(),
                file: "system.journal".into()
            })
        );
        assert_eq!(
            wanted(Path::new("log/cloud-init-output.log")),
            Some(Wanted::Log("cloud-init-output.log".into()))
        );
        for bad in [
            format!("var/log/journal/{mid}/../../../etc/shadow"),
            format!("var/log/journal/{mid}/.hidden.journal"),
            format!("var/log/journal/{mid}/system.journal/x"),
            "var/log/journal/notamachineid/system.journal".into(),
            "/var/log/cloud-init.log".into(),
            "var/log/messages".into(),
            "etc/shadow".into(),
            format!("var/log/journal/{mid}/sys tem.journal"),
        ] {
            assert_eq!(wanted(Path::new(&bad)), None, "{bad}");
        }
    }

    #[test]
    fn a_tar_of_logs_yields_files_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out.raw");
        let mid = "0123456789abcdef0123456789abcdef";
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, data: &[u8]| {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(kind);
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            if kind == tar::EntryType::Symlink {
                h.set_link_name("/etc/shadow").unwrap();
            }
            h.set_cksum();
            b.append_data(&mut h, path, data).unwrap();
        };
        add(
            &format!("var/log/journal/{mid}/system.journal"),
            tar::EntryType::Regular,
            b"LPKSHHRH",
        );
        add(
            &format!("var/log/journal/{mid}/user.journal"),
            tar::EntryType::Symlink,
            b"",
        );
        add("var/log/cloud-init.log", tar::EntryType::Regular, b"ci");
        add("var/log/secret", tar::EntryType::Regular, b"no");
        let mut bytes = b.into_inner().unwrap();
        // The rest of the blank disk: zeros.
        bytes.resize(bytes.len() + (64 << 10), 0);
        std::fs::write(&out, bytes).unwrap();
        let got = take(&out, &dir.path().join("logs")).unwrap();
        assert_eq!(got, vec![("cloud-init.log".to_string(), b"ci".to_vec())]);
        let journal = dir.path().join("logs/journal").join(mid);
        assert_eq!(std::fs::read(journal.join("system.journal")).unwrap(), b"LPKSHHRH");
        assert!(!journal.join("user.journal").exists());
        assert!(!dir.path().join("logs/secret").exists());
        // A disk the reader wrote nothing to: nothing taken.
        std::fs::write(&out, vec![0u8; 4096]).unwrap();
        assert!(take(&out, &dir.path().join("empty")).unwrap().is_empty());
    }
}
