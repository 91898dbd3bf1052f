//! The files the harness puts into a node before it starts (its identity, the bootstrap, the journal's drop-in),
//! and the archive the node image's entrypoint unpacks them from.

/// A file placed in the container before it starts.
pub struct NodeFile {
    pub path: String,
    pub content: Vec<u8>,
    pub mode: u32,
}

/// The files as one tar (owned by root, with their modes), unpacked relative to `/`.
pub(crate) fn seed_archive(files: &[NodeFile]) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    let mtime = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for f in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(f.content.len() as u64);
        header.set_mode(f.mode);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(mtime);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, f.path.trim_start_matches('/'), &f.content[..])?;
    }
    tar.into_inner()
}
