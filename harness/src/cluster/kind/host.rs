//! The docker kind runs. Every kind process gets `kind-config/docker-shim/docker` first on its PATH: a shim that
//! labels kind's node containers with the run and its owner (so the reaper proves whose they are, never trusting
//! a cluster's name) and, on hosts whose Docker daemon cannot grant `--privileged` (it lacks CAP_SYS_RESOURCE:
//! "unable to apply caps"), swaps that flag for the set our own node containers use. Every other docker call
//! passes through.
use crate::settings::Settings;
use std::collections::HashMap;
use std::path::PathBuf;

/// Whether kind's node containers get a node's privileges instead of `--privileged`: `auto`/`always` (default:
/// the same as nodejoin's own nodes, see `node::privileges`), `never` (`0`: kind's `--privileged` as it is, for a
/// host where the narrowed set fails; say so in an issue).
pub const ENV_RESTRICTED: &str = crate::settings::var::KIND_RESTRICTED;

/// How kind's `--privileged` is treated ([`ENV_RESTRICTED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The default: swapped (kept as a value of its own, so `auto` stays accepted).
    Auto,
    /// Always swap it.
    Always,
    /// Never swap it.
    Never,
}

pub fn mode(value: Option<&str>) -> Result<Mode, String> {
    match value.map(str::trim).unwrap_or("") {
        "" | "auto" => Ok(Mode::Auto),
        "1" | "true" | "always" | "yes" => Ok(Mode::Always),
        "0" | "false" | "never" | "no" => Ok(Mode::Never),
        other => Err(format!(
            "{}={other} is not one of auto, always (1), never (0)",
            ENV_RESTRICTED
        )),
    }
}

/// The docker shim for one kind process.
#[derive(Debug, Clone)]
pub struct Shim {
    dir: PathBuf,
    real: PathBuf,
    labels: String,
    /// `--privileged` swapped for a node's privileges.
    pub swaps_privileged: bool,
    /// Capabilities dropped from `ALL` when swapped.
    cap_drop: Vec<String>,
    /// The node seccomp profile, written to a file (the docker CLI takes a path), for kind's
    /// `seccomp=unconfined` when swapped.
    seccomp: Option<PathBuf>,
}

impl Shim {
    /// Puts the shim first on `cmd`'s PATH and tells it where the real docker is, which labels to add and
    /// whether to swap `--privileged`.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.dir.clone()];
        dirs.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(dirs) {
            cmd.env("PATH", joined);
        }
        cmd.env(crate::settings::var::SHIM_REAL_DOCKER, &self.real)
            .env(crate::settings::var::SHIM_LABELS, &self.labels)
            .env(
                crate::settings::var::SHIM_SWAP_PRIVILEGED,
                if self.swaps_privileged { "1" } else { "0" },
            )
            .env(crate::settings::var::SHIM_CAP_DROP, self.cap_drop.join(" "))
            .env(
                crate::settings::var::SHIM_DEVICES,
                crate::node::privileges::devices().join(" "),
            );
        if let Some(profile) = &self.seccomp {
            cmd.env(crate::settings::var::SHIM_SECCOMP, profile);
        }
    }
}

/// One `key=value` a line, in a stable order (labels never hold a newline: ours are ids and PIDs).
fn label_lines(labels: &HashMap<String, String>) -> String {
    let mut lines: Vec<String> = labels
        .iter()
        .filter(|(k, v)| !k.contains('\n') && !v.contains('\n'))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    lines.sort();
    lines.join("\n")
}

fn shim(settings: &Settings, labels: &HashMap<String, String>, swaps_privileged: bool) -> Result<Shim, String> {
    let dir = crate::paths::kind_config_dir(settings).join("docker-shim");
    if !dir.join("docker").is_file() {
        return Err(format!("the docker shim {} is missing", dir.join("docker").display()));
    }
    let real = crate::assets::which("docker").ok_or("the docker CLI is not on PATH")?;
    Ok(Shim {
        dir,
        real,
        labels: label_lines(labels),
        swaps_privileged,
        cap_drop: crate::node::privileges::dropped_capabilities(),
        seccomp: swaps_privileged.then(|| seccomp_file(settings)).transpose()?,
    })
}

/// The node seccomp profile as a file, named by its content in the cache (every run writes the same bytes; a
/// rename makes it appear whole). One already there is used only when it holds those very bytes (a regular file,
/// not a link): a cache restored from elsewhere could hold a laxer profile under the name.
fn seccomp_file(settings: &Settings) -> Result<PathBuf, String> {
    seccomp_file_in(&crate::paths::cache_dir(settings).join("seccomp"))
}

fn seccomp_file_in(dir: &std::path::Path) -> Result<PathBuf, String> {
    use sha2::Digest;
    let profile = crate::node::privileges::seccomp_profile();
    let hash = hex::encode(sha2::Sha256::digest(profile.as_bytes()));
    let path = dir.join(format!("node-{}.json", &hash[..16]));
    let regular = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file());
    if regular && std::fs::read(&path).is_ok_and(|b| b == profile.as_bytes()) {
        return Ok(path);
    }
    let fail = |e: std::io::Error| format!("the node seccomp profile in {}: {e}", dir.display());
    if std::fs::symlink_metadata(&path).is_ok() {
        std::fs::remove_file(&path).map_err(fail)?;
    }
    std::fs::create_dir_all(dir).map_err(fail)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(fail)?;
    std::io::Write::write_all(&mut tmp, profile.as_bytes()).map_err(fail)?;
    tmp.persist(&path).map_err(|e| fail(e.error))?;
    Ok(path)
}

/// The shim to run kind with: `labels` on every node container, `--privileged` swapped for a node's
/// privileges unless [`ENV_RESTRICTED`] is `never`.
pub async fn for_kind(settings: &Settings, labels: &HashMap<String, String>) -> Result<Shim, String> {
    let swap = mode(settings.kind_restricted.as_deref())? != Mode::Never;
    shim(settings, labels, swap)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile planted under the profile's own name (a laxer one, or a link) is replaced by the real bytes.
    #[test]
    fn a_planted_seccomp_profile_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let real = seccomp_file_in(dir.path()).unwrap();
        let profile = crate::node::privileges::seccomp_profile();
        std::fs::write(&real, r#"{"defaultAction":"SCMP_ACT_ALLOW"}"#).unwrap();
        assert_eq!(seccomp_file_in(dir.path()).unwrap(), real);
        assert_eq!(std::fs::read_to_string(&real).unwrap(), profile);
        std::fs::remove_file(&real).unwrap();
        let lax = dir.path().join("lax.json");
        std::fs::write(&lax, "{}").unwrap();
        std::os::unix::fs::symlink(&lax, &real).unwrap();
        seccomp_file_in(dir.path()).unwrap();
        assert!(!std::fs::symlink_metadata(&real).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&real).unwrap(), profile);
        assert_eq!(
            std::fs::read_to_string(&lax).unwrap(),
            "{}",
            "the link's target was written through"
        );
    }

    #[test]
    fn mode_values() {
        assert_eq!(mode(None), Ok(Mode::Auto));
        assert_eq!(mode(Some(" auto ")), Ok(Mode::Auto));
        assert_eq!(mode(Some("1")), Ok(Mode::Always));
        assert_eq!(mode(Some("never")), Ok(Mode::Never));
        assert!(mode(Some("sometimes"))
            .unwrap_err()
            .contains(&format!("{ENV_RESTRICTED}=sometimes")));
    }

    fn shim_run(args: &[&str], labels: &str, swap: bool) -> Vec<String> {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("real-docker");
        std::fs::write(&fake, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let shim = crate::paths::kind_config_dir(&crate::settings::for_tests()).join("docker-shim/docker");
        let out = std::process::Command::new(&shim)
            .args(args)
            .env(crate::settings::var::SHIM_REAL_DOCKER, &fake)
            .env(crate::settings::var::SHIM_LABELS, labels)
            .env(crate::settings::var::SHIM_SWAP_PRIVILEGED, if swap { "1" } else { "0" })
            .env(crate::settings::var::SHIM_CAP_DROP, "SYS_MODULE SYS_RAWIO")
            .env(crate::settings::var::SHIM_DEVICES, "/dev/kmsg")
            .env(crate::settings::var::SHIM_SECCOMP, "/cache/seccomp/node.json")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The shim swaps `--privileged` in `docker run` for a node's privileges (all capabilities but those
    /// dropped, the devices named, Docker's default masks: no `systempaths=unconfined`, no device rule for
    /// all) and passes everything else through.
    #[test]
    fn shim_swaps_only_privileged() {
        let run = |args: &[&str]| shim_run(args, "", true);
        let args = run(&[
            "run",
            "--name",
            "n",
            "--privileged",
            "--security-opt",
            "seccomp=unconfined",
            "--tmpfs",
            "/run",
            "img",
        ]);
        assert!(!args.iter().any(|a| a == "--privileged"), "{args:?}");
        let joined = args.join(" ");
        for want in [
            "--cap-add ALL",
            "--cap-drop SYS_MODULE",
            "--cap-drop SYS_RAWIO",
            "--device /dev/kmsg",
            "--security-opt seccomp=/cache/seccomp/node.json",
        ] {
            assert!(joined.contains(want), "{want} missing from {args:?}");
        }
        for unwanted in ["systempaths=unconfined", "a *:* rwm", "seccomp=unconfined"] {
            assert!(!args.iter().any(|a| a == unwanted), "{unwanted} in {args:?}");
        }
        assert_eq!(args.first().map(String::as_str), Some("run"));
        assert_eq!(args.last().map(String::as_str), Some("img"));
        assert_eq!(
            run(&["exec", "--privileged", "-i", "node", "cat", "/kind/version"]),
            ["exec", "-i", "node", "cat", "/kind/version"]
        );
        assert_eq!(run(&["inspect", "--privileged"]), ["inspect", "--privileged"]);
    }

    /// Everywhere, kind's node containers carry the run's labels, and nothing else changes.
    #[test]
    fn shim_labels_every_node_container() {
        let labels = label_lines(&HashMap::from([
            ("io.nodejoin.run".to_string(), "r1".to_string()),
            ("io.nodejoin.owner-pid".to_string(), "12:34".to_string()),
        ]));
        let args = shim_run(&["run", "--name", "n", "--privileged", "img"], &labels, false);
        assert_eq!(
            args,
            [
                "run",
                "--label",
                "io.nodejoin.owner-pid=12:34",
                "--label",
                "io.nodejoin.run=r1",
                "--name",
                "n",
                "--privileged",
                "img"
            ]
        );
        assert_eq!(
            shim_run(&["exec", "--privileged", "node", "true"], &labels, false),
            ["exec", "--privileged", "node", "true"]
        );
        assert_eq!(shim_run(&["ps", "-a"], &labels, false), ["ps", "-a"]);
    }
}
