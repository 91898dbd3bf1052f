//! A disk of the user's is judged by `qemu-img info`'s own account of it (harness/src/node/vm/own_disk.rs), so
//! these trials need qemu-img (Debian qemu-utils; README's first command installs QEMU, so CI has it). Where it is
//! absent they are listed as ignored, with the reason: never passed without running.
use libtest_mimic::{Arguments, Failed, Trial};
use nodejoin::node::vm::{disk, own_disk};

mod common;
use common::trials::ensure;

/// A real qcow2 with a backing file (what `qemu-img create -b` makes) is refused for its backing file; the same
/// file named raw is refused by its magic number; a plain raw disk is accepted with its size.
async fn a_backing_file_is_refused() -> Result<(), Failed> {
    let dir = tempfile::tempdir()?;
    let base = dir.path().join("base.raw");
    std::fs::write(&base, vec![0u8; 1 << 20])?;
    let top = dir.path().join("top.qcow2");
    disk::overlay(&base, "raw", &top).await?;
    let e = refused(&top, "qcow2").await?;
    ensure(e.contains("backing file") && e.contains("base.raw"), || e.clone())?;
    let e = refused(&top, "raw").await?;
    ensure(e.contains("named raw"), || e.clone())?;
    let info = own_disk::check_own(&base, "raw").await?;
    ensure(info.virtual_size == 1 << 20, || format!("{info:?}"))
}

/// Why the disk at `path` named `format` is refused; a failure if it is accepted.
async fn refused(path: &std::path::Path, format: &str) -> Result<String, Failed> {
    match own_disk::check_own(path, format).await {
        Ok(info) => Err(format!("{} as {format} was accepted: {info:?}", path.display()).into()),
        Err(e) => Ok(e.to_string()),
    }
}

fn main() {
    let args = Arguments::from_args();
    let trial = Trial::test("own-disk/qemu-img/a-backing-file-is-refused", || {
        tokio::runtime::Runtime::new()?.block_on(a_backing_file_is_refused())
    });
    let trial = if nodejoin::assets::which("qemu-img").is_none() {
        eprintln!("[nodejoin] ignored: own-disk/qemu-img needs qemu-img, which is not installed (Debian qemu-utils)");
        trial.with_ignored_flag(true)
    } else {
        trial
    };
    libtest_mimic::run(&args, vec![trial]).exit();
}
