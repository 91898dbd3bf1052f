//! Which scenario files a run takes: every `*.yaml`/`*.yml` under the folders given (links not followed), or the
//! files named, each inside the folder it is named in.
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Every `*.yaml`/`*.yml` file of a directory, sorted; or the files given.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        let p = crate::paths::resolve(p);
        if p.is_dir() {
            let mut files = Vec::new();
            walk(&p, 0, &mut files)?;
            files.sort();
            out.extend(files);
        } else if p.is_file() {
            confined_file(&p)?;
            out.push(p);
        } else {
            return Err(Error::io(
                &p,
                std::io::Error::new(std::io::ErrorKind::NotFound, "no such scenario file or directory"),
            ));
        }
    }
    Ok(out)
}

/// A scenario file named by path is read only when it is inside the folder it is named in: a link there to a
/// file elsewhere (a repository's `scenarios/x.yaml -> /etc/shadow`) would have root read that file and quote it
/// in a parse error. Folders given are walked without following links at all ([`walk`]).
fn confined_file(p: &Path) -> Result<()> {
    let folder = p
        .parent()
        .filter(|f| !f.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let (Ok(real), Ok(folder_real)) = (std::fs::canonicalize(p), std::fs::canonicalize(folder)) else {
        return Err(Error::io(p, std::io::Error::other("cannot be resolved")));
    };
    if real.starts_with(&folder_real) {
        return Ok(());
    }
    Err(Error::io(
        p,
        std::io::Error::other(format!(
            "a link to a file outside its folder ({}): not read (a scenario file must be inside the folder it is              named in)",
            folder_real.display()
        )),
    ))
}

/// How deep discovery goes below a directory given: deeper folders are not scenario collections.
const MAX_DEPTH: usize = 8;

/// The `*.yaml`/`*.yml` files under `dir`, folders included, but hidden ones (`.git`, `.config`), `target/`
/// and `node_modules/`; symbolic links are not followed (a checkout's link may point anywhere, or at itself).
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?.flatten() {
        let path = entry.path();
        let Ok(kind) = entry.file_type() else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        if kind.is_dir() {
            let skipped = name.starts_with('.') || name == "target" || name == "node_modules";
            if !skipped && depth < MAX_DEPTH {
                walk(&path, depth + 1, out)?;
            }
        } else if kind.is_file()
            && !name.starts_with('.')
            && matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml"))
        {
            out.push(path);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = "nodes:\n  - name: a\n    bootstrap:\n      args: [\"x\"]\n";

    #[test]
    fn discovery_goes_into_folders_but_hidden_ones_and_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "a.yaml",
            "al2023/b.yml",
            "al2023/deep/c.yaml",
            ".github/w.yaml",
            "target/t.yaml",
            "notes.txt",
        ] {
            let path = root.join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, MINIMAL).unwrap();
        }
        std::os::unix::fs::symlink(root, root.join("al2023/loop")).unwrap();
        let found = discover(&[root.to_path_buf()]).unwrap();
        let rel: Vec<String> = found
            .iter()
            .map(|f| f.strip_prefix(root).unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(rel, ["a.yaml", "al2023/b.yml", "al2023/deep/c.yaml"]);
    }

    #[test]
    fn a_named_file_that_links_outside_its_folder_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(repo.join("scenarios")).unwrap();
        let secret = tmp.path().join("shadow");
        std::fs::write(&secret, "root:$6$secret-hash:19000:0:99999:7:::\n").unwrap();
        let planted = repo.join("scenarios/evil.yaml");
        std::os::unix::fs::symlink(&secret, &planted).unwrap();
        let e = discover(std::slice::from_ref(&planted)).unwrap_err().to_string();
        assert!(e.contains("outside its folder") && !e.contains("secret-hash"), "{e}");
        // A link within the folder is a file of the folder.
        std::fs::write(repo.join("scenarios/real.yaml"), MINIMAL).unwrap();
        std::os::unix::fs::symlink("real.yaml", repo.join("scenarios/alias.yaml")).unwrap();
        assert_eq!(discover(&[repo.join("scenarios/alias.yaml")]).unwrap().len(), 1);
        // A bare file name: its folder is the working directory.
        assert_eq!(
            super::confined_file(Path::new("Cargo.toml")).map_err(|e| e.to_string()),
            Ok(())
        );
    }
}
