use super::*;

/// A work directory with something mounted in it (a timed-out rootfs script's /proc) is unmounted and gone
/// when dropped.
#[test]
fn a_work_directory_goes_with_what_is_mounted_in_it() {
    // Mounting needs root, as nodejoin itself does (README): not root is a failure, never a pass unchecked.
    // SAFETY: geteuid(2) has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "this test mounts /proc, which needs root (as nodejoin does): run it as root"
    );
    let work = WorkDir(tempfile::tempdir().unwrap());
    let dir = work.path().to_path_buf();
    let proc_dir = dir.join("rootfs/proc");
    std::fs::create_dir_all(&proc_dir).unwrap();
    let c = |s: &str| std::ffi::CString::new(s).unwrap();
    let target = c(&proc_dir.to_string_lossy());
    // SAFETY: mount(2) of a fresh proc instance on a directory this test owns.
    let rc = unsafe {
        libc::mount(
            c("proc").as_ptr(),
            target.as_ptr(),
            c("proc").as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "mount proc: {}", std::io::Error::last_os_error());
    drop(work);
    let mounted = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .contains(&*proc_dir.to_string_lossy());
    assert!(!mounted, "{} is still mounted", proc_dir.display());
    assert!(!dir.exists(), "{} is left", dir.display());
}
