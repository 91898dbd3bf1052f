//! A container node's `/var` kept across its restarts (`after: reboot`), as an instance's disk is. The node image's
//! entrypoint otherwise gives `/var` a tmpfs, which a restart empties; a Docker volume would keep it but sit on the
//! host's disk, whose fullness the kubelet then reads as the node's (`DiskPressure` on a host 90 % full, and a
//! pod evicted at the reboot). So a host directory in the run's scratch space (a tmpfs, like the entrypoint's),
//! bound at [`MOUNT`]; the entrypoint fills `var/` in it from the image's `/var` at the first start and binds it
//! over `/var` at every start.
use super::journal::ScratchDir;
use std::path::Path;

/// Where the host directory is bound in the node (the entrypoint looks for it there).
pub const MOUNT: &str = "/run/nodejoin/kept";

/// The host directory; removed when dropped (after the container, which drops first).
pub struct KeptVar {
    dir: ScratchDir,
}

impl KeptVar {
    /// A fresh directory for the node container `container` of run `run_id`.
    pub fn create(run_id: &str, container: &str) -> std::io::Result<Self> {
        Ok(Self {
            dir: ScratchDir::create(run_id, "var", container)?,
        })
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The container's bind of it.
    pub fn bind(&self) -> String {
        format!("{}:{MOUNT}", self.dir.path().display())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_kept_var_is_a_scratch_directory_of_its_run_and_goes_when_dropped() {
        let k = super::KeptVar::create("testrun-1", "node-b").unwrap();
        let dir = k.dir().to_path_buf();
        assert!(dir.is_dir());
        assert!(k.bind().ends_with(":/run/nodejoin/kept"));
        drop(k);
        assert!(!dir.exists());
    }
}
