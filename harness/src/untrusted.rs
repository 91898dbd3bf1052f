//! Reading a file an untrusted repository names (a scenario's golden file or script, its settings file): only a
//! regular file, never blocking on a FIFO, and never more than a cap (a link to /dev/zero ends there).
use std::path::Path;

/// Opens `path` for reading only if it is a regular file: `O_NONBLOCK`, so a FIFO cannot hang the open, and the
/// type judged on what was opened. For files an untrusted repository names (a link to /dev/zero, a FIFO).
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok(file)
}

/// All of `file`, refused past `cap` bytes (`larger than N KiB`).
pub fn read_capped(file: std::fs::File, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > cap {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {} KiB, the most nodejoin reads", cap >> 10),
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_large_files_are_refused() {
        let err = open_regular(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 2048]).unwrap();
        let err = read_capped(open_regular(&big).unwrap(), 1024).unwrap_err();
        assert!(err.to_string().contains("larger than 1 KiB"), "{err}");
        assert_eq!(read_capped(open_regular(&big).unwrap(), 4096).unwrap().len(), 2048);
    }
}
