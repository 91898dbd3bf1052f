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
use crate::settings::Settings;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The blank disk the reader writes to: its size bounds what is taken of a machine's logs.
const OUT_BYTES: u64 = 256 << 20;

/// How long the reader may take (its boot, the mounts, the tar), under TCG.
const READ_WITHIN: Duration = Duration::from_secs(180);

/// What journalctl prints at most, per log.
const JOURNAL_LINES: &str = "50000";

/// cloud-init's logs, as the reader finds them under `var/log` (or `log` on a partition of its own).
const CLOUD_INIT_LOGS: &[&str] = &["cloud-init.log", "cloud-init-output.log"];

/// nodeadm's units in the AL2023 AMI (and nodejoin's node image): its boot hook, then its two phases. The same
/// names as `assert::nodeadm`'s, which reads them (a test there says so).
pub const NODEADM_UNITS: [&str; 3] = [
    "nodeadm-boot-hook.service",
    "nodeadm-config.service",
    "nodeadm-run.service",
];

/// What is read of each file asked for: its first MiB (the reader's `head -c`), as a check reads a config file.
pub const FILE_BYTES: u64 = 1 << 20;

/// How many files one reading may ask for.
const MAX_FILES: usize = 64;

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
    /// The units of nodeadm and its boot hook in the journal as JSON entries (systemd's record of their jobs).
    pub nodeadm_entries: String,
    /// The journal of cloud-init's final stage (where the user data's scripts print), ISO-stamped.
    pub cloud_final: String,
    /// Each file asked for ([`Read::files`]): its path and its first [`FILE_BYTES`], `None` where the disk's
    /// tree has no regular file at that path.
    pub asked: Vec<(String, Option<Vec<u8>>)>,
}

impl DiskLogs {
    /// A cloud-init log read from the disk, as text (empty where it had none).
    pub fn cloud_init_log(&self, name: &str) -> String {
        self.files
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
            .unwrap_or_default()
    }

    /// A file asked for, as text: `None` where the disk has no regular file at `path` (or it was not asked for).
    pub fn file(&self, path: &str) -> Option<String> {
        self.asked
            .iter()
            .find(|(p, _)| p == path)
            .and_then(|(_, b)| b.as_ref())
            .map(|b| String::from_utf8_lossy(b).into_owned())
    }
}

/// nodejoin's kernel without a node image (a group booting a disk of its own has none): the kernel's stage of
/// `fixtures/vm-disk/` alone, which Docker's cache shares with every VM disk's build, kept in the VM cache.
pub async fn kernel(settings: &Settings, docker: &Docker) -> Result<Kernel> {
    let recipe = Recipe::read(settings).await?;
    let key = short_hash(&[
        b"reader",
        recipe.hash.as_bytes(),
        recipe.modules.as_bytes(),
        recipe.kernel_from.as_bytes(),
    ]);
    let boot = super::kernel::cache(settings).join(format!("reader-{key}"));
    if let Some(k) = Kernel::cached(&boot) {
        return Ok(k);
    }
    let _lock = crate::paths::CacheLock::acquire(settings, "vm-disk")
        .await
        .map_err(|e| reader_err(format!("the VM disk cache lock: {e}")))?;
    if let Some(k) = Kernel::cached(&boot) {
        return Ok(k);
    }
    let steps = crate::progress::Steps::new("the reader's kernel", 2);
    let work = crate::node::image::work_dir(settings, "vm-reader")?;
    steps.step(1, "docker build (the kernel's stage: Debian's kernel by apt)");
    let context = build_context(settings, docker, &recipe.kernel_from, work.path()).await?;
    let tag = format!("nodejoin-vm:reader-{key}");
    crate::docker::images::build_stage(
        settings,
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
    let (from, to, owned) = (root.clone(), partial.clone(), settings.clone());
    crate::node::inputs::off_runtime(move || {
        unpack(&archive, &from)?;
        let _ = std::fs::remove_dir_all(&to);
        Kernel::from_root(&owned, &from, &to)
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
    /// Files to read from the disk's own tree (absolute paths, as the machine saw them): at most [`MAX_FILES`],
    /// each path on one line.
    pub files: &'a [String],
}

/// Reads the logs of the stopped machine's disk `r.disk`.
pub async fn read(settings: &Settings, docker: &Docker, r: Read<'_>) -> Result<DiskLogs> {
    let out = r.work.join("reader-out.raw");
    let console = r.work.join("reader-console.log");
    blank(&out, OUT_BYTES)?;
    let asked: Vec<String> = r
        .files
        .iter()
        .filter(|p| p.starts_with('/') && !p.contains(['\n', '\0']))
        .take(MAX_FILES)
        .cloned()
        .collect();
    let files = (!asked.is_empty()).then(|| (r.work.join("reader-request.raw"), r.work.join("reader-files.raw")));
    if let Some((request, files_out)) = &files {
        write_request(request, &asked)?;
        blank(files_out, (asked.len() as u64 + 1) * (FILE_BYTES + 4096))?;
    }
    let program = crate::assets::which("qemu-system-x86_64")
        .ok_or_else(|| reader_err("qemu-system-x86_64 is not on PATH (Debian package qemu-system-x86)"))?;
    // Confined as a node's QEMU is (`super::sandbox`): the disk it reads is the user's, or a machine's.
    let mut qemu_args = args(&r, &out, &console, files.as_ref())?;
    qemu_args.extend(super::sandbox::confinement().args.iter().cloned());
    let mut qemu = crate::process::Supervised::spawn("qemu-reader", &program, &qemu_args, r.work, r.pids_dir)?;
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
    let logs = crate::node::inputs::off_runtime(move || take(&o, &d)).await?;
    let _ = std::fs::remove_file(&out);
    let mut read = DiskLogs {
        files: logs,
        found,
        ..Default::default()
    };
    if let Some((request, files_out)) = files {
        let taken = files_out.clone();
        let found = crate::node::inputs::off_runtime(move || take_files(&taken)).await?;
        let _ = std::fs::remove_file(&request);
        let _ = std::fs::remove_file(&files_out);
        read.asked = asked
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                let bytes = found.iter().find(|(n, _)| *n == i + 1).map(|(_, b)| b.clone());
                (p, bytes)
            })
            .collect();
    }
    if dir.join("journal").is_dir() {
        let nodeadm: Vec<&str> = NODEADM_UNITS.iter().flat_map(|u| ["-u", *u]).collect();
        read.journal = render(settings, docker, &dir, "short-precise", &[]).await?;
        read.kubelet = render(settings, docker, &dir, "short-precise", &["-u", "kubelet"]).await?;
        read.nodeadm = render(settings, docker, &dir, "short-precise", &nodeadm[2..]).await?;
        read.nodeadm_entries = render(settings, docker, &dir, "json", &nodeadm).await?;
        read.cloud_final = render(
            settings,
            docker,
            &dir,
            "short-iso-precise",
            &["-u", "cloud-final.service"],
        )
        .await?;
    }
    Ok(read)
}

/// A blank raw disk of `bytes`.
fn blank(path: &Path, bytes: u64) -> Result<()> {
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    file.set_len(bytes).map_err(|e| Error::io(path, e))
}

/// The reader's request disk: a tar holding `paths`, one a line.
fn write_request(path: &Path, asked: &[String]) -> Result<()> {
    let mut list = asked.join("\n");
    list.push('\n');
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(list.len() as u64);
    h.set_mode(0o644);
    h.set_cksum();
    b.append_data(&mut h, "paths", list.as_bytes())
        .map_err(|e| Error::io(path, e))?;
    let mut bytes = b.into_inner().map_err(|e| Error::io(path, e))?;
    bytes.resize(bytes.len().next_multiple_of(1 << 16), 0);
    std::fs::write(path, bytes).map_err(|e| Error::io(path, e))
}

/// The files the reader found (its tar on the files disk): `(line number in the request, bytes)` of each regular
/// file `files/<number>`, within [`FILE_BYTES`]; anything else is passed over.
fn take_files(out: &Path) -> Result<Vec<(usize, Vec<u8>)>> {
    let mut found = Vec::new();
    let number = |path: &Path| match path.to_str().and_then(|p| p.strip_prefix("files/")) {
        Some(n) if !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit()) => n.parse::<usize>().ok(),
        _ => None,
    };
    regular_files(out, FILE_BYTES, number, |n, bytes| {
        found.push((n, bytes));
        Ok(())
    })?;
    Ok(found)
}

/// The reader's QEMU command line: nodejoin's kernel in reader mode, the disk read-only, a blank disk, no network.
fn args(r: &Read<'_>, out: &Path, console: &Path, files: Option<&(PathBuf, PathBuf)>) -> Result<Vec<String>> {
    let path = super::qemu::opt_path;
    let mode = match files {
        Some(_) => "nodejoin.read=logs nodejoin.read=files",
        None => "nodejoin.read=logs",
    };
    let mut args = vec![
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
        format!("console=ttyS0 panic=-1 {mode}"),
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
    ];
    // vdc, the request (read-only); vdd, the files found.
    if let Some((request, files_out)) = files {
        args.extend([
            "-drive".into(),
            format!("file={},if=none,id=request,format=raw,readonly=on", path(request)?),
            "-device".into(),
            "virtio-blk-pci,drive=request".into(),
            "-drive".into(),
            format!("file={},if=none,id=files,format=raw", path(files_out)?),
            "-device".into(),
            "virtio-blk-pci,drive=files".into(),
        ]);
    }
    Ok(args)
}

/// Each regular file of the tar at the start of `out` (a blank disk the reader wrote) that `name` names and that
/// is within `max` bytes, handed to `keep`; links, devices, other paths are passed over. A tar cut short (the disk
/// filled up) ends where it breaks.
fn regular_files<T>(
    out: &Path,
    max: u64,
    name: impl Fn(&Path) -> Option<T>,
    mut keep: impl FnMut(T, Vec<u8>) -> Result<()>,
) -> Result<()> {
    use std::io::Read as _;
    let file = std::fs::File::open(out).map_err(|e| Error::io(out, e))?;
    let mut tar = tar::Archive::new(std::io::BufReader::new(file));
    let Ok(entries) = tar.entries() else {
        return Ok(());
    };
    for entry in entries {
        let Ok(entry) = entry else { break };
        if entry.header().entry_type() != tar::EntryType::Regular || entry.size() > max {
            continue;
        }
        let Some(named) = entry.path().ok().and_then(|p| name(&p)) else {
            continue;
        };
        let mut bytes = Vec::new();
        if entry.take(max).read_to_end(&mut bytes).is_err() {
            break;
        }
        keep(named, bytes)?;
    }
    Ok(())
}

/// Takes the logs out of the reader's tar (`out`, the blank disk: a tar, then zeros) into `dir`: the journal's
/// files to `dir/journal/<machine id>/`, cloud-init's logs returned. Only regular files of those names are taken,
/// each within the disk's bound; anything else (links, devices, other paths, odd names) is passed over.
fn take(out: &Path, dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut found = Vec::new();
    regular_files(out, OUT_BYTES, wanted, |wanted, bytes| {
        match wanted {
            Wanted::Journal { machine, file } => {
                let to = dir.join("journal").join(machine);
                std::fs::create_dir_all(&to).map_err(|e| Error::io(&to, e))?;
                std::fs::write(to.join(&file), &bytes).map_err(|e| Error::io(to.join(&file), e))?;
            }
            Wanted::Log(name) => found.push((name, bytes)),
        }
        Ok(())
    })?;
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

/// journalctl's `output` of the journal under `dir/journal`, with `filter` (units), in a throwaway container.
async fn render(settings: &Settings, docker: &Docker, dir: &Path, output: &str, filter: &[&str]) -> Result<String> {
    let mut args = vec!["-n", JOURNAL_LINES];
    args.extend_from_slice(filter);
    crate::node::journal::render(settings, docker, dir, &dir.join("journal"), output, &args)
        .await
        .map_err(|e| reader_err(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::{take, take_files, wanted, write_request, Wanted, FILE_BYTES};
    use std::path::Path;

    /// Adds an entry to a tar a crafted disk could make the reader write (a symlink points at `/etc/shadow`).
    fn append(b: &mut tar::Builder<Vec<u8>>, path: &str, kind: tar::EntryType, data: &[u8]) {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        if kind == tar::EntryType::Symlink {
            h.set_link_name("/etc/shadow").unwrap();
        }
        h.set_cksum();
        b.append_data(&mut h, path, data).unwrap();
    }

    #[test]
    fn the_request_names_each_path_on_a_line_and_only_numbered_files_come_back() {
        use std::io::Read as _;
        let dir = tempfile::tempdir().unwrap();
        let request = dir.path().join("request.raw");
        let asked = [
            "/etc/kubernetes/kubelet/config.json".to_string(),
            "/var/lib/a b.txt".to_string(),
        ];
        write_request(&request, &asked).unwrap();
        let bytes = std::fs::read(&request).unwrap();
        assert_eq!(bytes.len() % 512, 0, "a whole number of sectors");
        let mut tar = tar::Archive::new(&bytes[..]);
        let mut entry = tar.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(entry.path().unwrap().to_str(), Some("paths"));
        let mut paths = String::new();
        entry.read_to_string(&mut paths).unwrap();
        assert_eq!(paths, "/etc/kubernetes/kubelet/config.json\n/var/lib/a b.txt\n");
        // What the reader wrote: numbered files, and whatever else a crafted disk could make it write.
        let out = dir.path().join("files.raw");
        let mut b = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, data: &[u8]| append(&mut b, path, kind, data);
        add("files/1", tar::EntryType::Regular, b"{\"cgroupDriver\":\"systemd\"}");
        add("files/2", tar::EntryType::Symlink, b"");
        add("etc/1", tar::EntryType::Regular, b"no");
        add("files/1x", tar::EntryType::Regular, b"no");
        add("files/3", tar::EntryType::Regular, &vec![b'x'; FILE_BYTES as usize + 1]);
        let mut bytes = b.into_inner().unwrap();
        bytes.resize(bytes.len() + 4096, 0);
        std::fs::write(&out, bytes).unwrap();
        let got = take_files(&out).unwrap();
        assert_eq!(got, vec![(1, b"{\"cgroupDriver\":\"systemd\"}".to_vec())]);
    }

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
        let mut add = |path: &str, kind: tar::EntryType, data: &[u8]| append(&mut b, path, kind, data);
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
