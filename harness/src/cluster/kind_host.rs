//! kind on hosts that refuse privileged containers. kind always runs its node containers `--privileged`; where
//! the Docker daemon cannot grant that (it lacks CAP_SYS_RESOURCE: "unable to apply caps"), the kind process gets
//! `kind-config/restricted-host/docker` first on its PATH, a shim that swaps `--privileged` for the flag set our
//! own node containers use and passes every other docker call through. Where privileged works, kind runs
//! untouched.
use std::path::PathBuf;
use tokio::sync::OnceCell;

/// Whether kind's node containers get the restricted-host docker shim: `auto` (default) probes whether the
/// Docker daemon grants `--privileged`, `1`/`always` forces the shim, `0`/`never` runs kind untouched.
pub const ENV_RESTRICTED: &str = "NODEJOIN_KIND_RESTRICTED";

/// How kind's docker is chosen (`NODEJOIN_KIND_RESTRICTED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Probe whether the daemon grants `--privileged` (once per process).
    Auto,
    /// Always use the shim.
    Always,
    /// Never use it.
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
}

impl Shim {
    /// Puts the shim first on `cmd`'s PATH and tells it where the real docker is.
    pub fn apply(&self, cmd: &mut tokio::process::Command) {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.dir.clone()];
        dirs.extend(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(dirs) {
            cmd.env("PATH", joined);
        }
        cmd.env("NODEJOIN_REAL_DOCKER", &self.real);
    }
}

fn shim() -> Result<Shim, String> {
    let dir = crate::paths::kind_config_dir().join("restricted-host");
    if !dir.join("docker").is_file() {
        return Err(format!(
            "the restricted-host docker shim {} is missing",
            dir.join("docker").display()
        ));
    }
    let real = crate::assets::which("docker").ok_or("the docker CLI is not on PATH")?;
    Ok(Shim { dir, real })
}

/// The shim to run kind with on this host, if it needs one.
pub async fn restricted(image: &str) -> Result<Option<Shim>, String> {
    match mode(std::env::var(ENV_RESTRICTED).ok().as_deref())? {
        Mode::Never => Ok(None),
        Mode::Always => shim().map(Some),
        Mode::Auto => {
            if privileged_works(image).await {
                Ok(None)
            } else {
                shim().map(Some)
            }
        }
    }
}

/// Whether `docker run --privileged` works here, asked once per process with `image` (present locally).
async fn privileged_works(image: &str) -> bool {
    static ANSWER: OnceCell<bool> = OnceCell::const_new();
    *ANSWER
        .get_or_init(|| async {
            let out = crate::deadline::output(
                tokio::process::Command::new("docker").args([
                    "run",
                    "--rm",
                    "--privileged",
                    "--entrypoint",
                    "/bin/true",
                    image,
                ]),
                "docker run --privileged (probe)",
                crate::deadline::DOCKER_CLI,
            )
            .await;
            match out {
                Ok(o) if o.status.success() => true,
                Ok(o) => {
                    tracing::info!(
                        "privileged containers are refused here ({}); kind runs with the restricted-host docker shim",
                        String::from_utf8_lossy(&o.stderr).trim()
                    );
                    false
                }
                Err(e) => {
                    tracing::info!("privileged probe failed ({e}); kind runs with the restricted-host docker shim");
                    false
                }
            }
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_values() {
        assert_eq!(mode(None), Ok(Mode::Auto));
        assert_eq!(mode(Some(" auto ")), Ok(Mode::Auto));
        assert_eq!(mode(Some("1")), Ok(Mode::Always));
        assert_eq!(mode(Some("never")), Ok(Mode::Never));
        assert!(mode(Some("sometimes"))
            .unwrap_err()
            .contains("NODEJOIN_KIND_RESTRICTED=sometimes"));
    }

    /// The shim swaps `--privileged` for our flag set in `docker run` and passes everything else through.
    #[test]
    fn shim_swaps_only_privileged() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("real-docker");
        std::fs::write(&fake, "#!/bin/sh\nprintf '%s\\n' \"$@\"\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let shim = crate::paths::kind_config_dir().join("restricted-host/docker");
        let run = |args: &[&str]| {
            let out = std::process::Command::new(&shim)
                .args(args)
                .env("NODEJOIN_REAL_DOCKER", &fake)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        let args = run(&["run", "--name", "n", "--privileged", "--tmpfs", "/run", "img"]);
        assert!(!args.iter().any(|a| a == "--privileged"), "{args:?}");
        for want in [
            "--cap-drop",
            "SYS_RESOURCE",
            "systempaths=unconfined",
            "a *:* rwm",
            "/dev/kmsg",
        ] {
            assert!(args.iter().any(|a| a == want), "{want} missing from {args:?}");
        }
        assert_eq!(args.first().map(String::as_str), Some("run"));
        assert_eq!(args.last().map(String::as_str), Some("img"));
        assert_eq!(
            run(&["exec", "--privileged", "-i", "node", "cat", "/kind/version"]),
            ["exec", "-i", "node", "cat", "/kind/version"]
        );
        assert_eq!(run(&["inspect", "--privileged"]), ["inspect", "--privileged"]);
    }
}
