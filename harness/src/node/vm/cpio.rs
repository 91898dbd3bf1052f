//! Initramfs archives (`newc` cpio, what the kernel unpacks): the base one per kernel, and one per node carrying
//! its files, which the kernel unpacks over the first when both are given as one `-initrd` (concatenated).
use cpio::newc::{Builder, ModeFileType};
use std::collections::BTreeSet;
use std::io::Write;

/// An archive of `files` (`path` relative to `/`, content, permission bits), every parent directory first, and
/// the empty directories `dirs`; owned by root.
pub fn archive(files: &[(String, Vec<u8>, u32)], dirs: &[&str]) -> std::io::Result<Vec<u8>> {
    let mut all_dirs: BTreeSet<String> = dirs.iter().map(|d| d.to_string()).collect();
    for (path, _, _) in files {
        let mut parent = std::path::Path::new(path).parent();
        while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
            all_dirs.insert(p.display().to_string());
            parent = p.parent();
        }
    }
    let mut out = Vec::new();
    let mut ino = 1;
    // A BTreeSet sorts a parent before its children.
    for d in &all_dirs {
        let w = Builder::new(d)
            .ino(ino)
            .mode(0o755)
            .nlink(2)
            .set_mode_file_type(ModeFileType::Directory)
            .write(&mut out, 0);
        w.finish()?;
        ino += 1;
    }
    for (path, content, mode) in files {
        let size = u32::try_from(content.len()).map_err(|_| std::io::Error::other(format!("{path}: too large")))?;
        let mut w = Builder::new(path)
            .ino(ino)
            .mode(*mode)
            .set_mode_file_type(ModeFileType::Regular)
            .write(&mut out, size);
        w.write_all(content)?;
        w.finish()?;
        ino += 1;
    }
    cpio::newc::trailer(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn parents_come_first_and_files_read_back() {
        let files = vec![("lib/modules/6.1/a.ko".to_string(), b"ko".to_vec(), 0o644)];
        let bytes = archive(&files, &["proc"]).unwrap();
        let mut rest = &bytes[..];
        let mut seen = Vec::new();
        loop {
            let mut r = cpio::newc::Reader::new(rest).unwrap();
            if r.entry().is_trailer() {
                break;
            }
            let name = r.entry().name().to_string();
            let mode = r.entry().mode();
            let mut data = Vec::new();
            r.read_to_end(&mut data).unwrap();
            seen.push((name, mode, data));
            rest = r.finish().unwrap();
        }
        let names: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(
            names,
            ["lib", "lib/modules", "lib/modules/6.1", "proc", "lib/modules/6.1/a.ko"]
        );
        assert_eq!(seen[4].1, 0o100644);
        assert_eq!(seen[4].2, b"ko");
        assert_eq!(seen[0].1, 0o040755);
    }
}
