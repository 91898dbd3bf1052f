//! `image.amazonEksAmi: { git, rev }`: an amazon-eks-ami commit fetched once (shallow) into the cache, so a new
//! user's clone runs today's AMI without a checkout beside it. The scenario comes from a repository nodejoin was
//! handed, so git gets a network URL and a full commit id only: no transport that runs a program (`ext::`, ssh's
//! commands) or reads a host path (`file://`, a bare path), no credential helper, no prompt.
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A fetch that has not finished in this long is stopped (a network that drops packets instead of refusing).
const FETCH_TIMEOUT: Duration = Duration::from_secs(600);

/// The transports a scenario may name; each only moves objects that git checks against the pinned commit.
const SCHEMES: [&str; 3] = ["https://", "http://", "git://"];

/// Why `url` and `rev` cannot be fetched as given, if they cannot.
pub fn check_pin(url: &str, rev: &str) -> Result<(), String> {
    let scheme_ok = SCHEMES.iter().any(|s| url.starts_with(s) && url.len() > s.len());
    if !scheme_ok || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "amazonEksAmi.git {url:?} must be an https://, http:// or git:// URL (no other transport: a scenario \
             cannot make git run a program or read a path of this host)"
        ));
    }
    let hex = rev.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
    if !hex || !(rev.len() == 40 || rev.len() == 64) {
        return Err(format!(
            "amazonEksAmi.rev {rev:?} must be a full commit id (40 lower-case hex digits), so what is tested never \
             moves: e.g. `git rev-parse HEAD` in a checkout"
        ));
    }
    Ok(())
}

/// Where commit `rev` is (or will be) kept, in the cache directory `cache`.
pub fn cached(cache: &Path, rev: &str) -> PathBuf {
    cache.join("eks-ami").join(rev)
}

/// Checkouts in the cache this process verified, and how ([`verified`]); one it fetched itself is as fetched.
static CHECKED: Mutex<Option<HashMap<PathBuf, Result<(), String>>>> = Mutex::new(None);

/// Outcomes of this process's fetches, so a repository that cannot be reached is tried once per run.
static TRIED: Mutex<Option<HashMap<String, Result<(), String>>>> = Mutex::new(None);

/// Makes commit `rev` of `url` present at `dest` (its [`cached`] place), fetching it once (shallow) if it is not;
/// the error is git's own last line.
pub fn ensure(dest: &Path, url: &str, rev: &str) -> Result<PathBuf, String> {
    check_pin(url, rev)?;
    let dest = dest.to_path_buf();
    if dest.join(".git").is_dir() {
        // A checkout in the cache is trusted only as fetched: its images are built, and its scripts run, as root.
        match verified(&dest, rev) {
            Ok(()) => return Ok(dest),
            Err(why) => {
                eprintln!(
                    "[nodejoin] the cached amazon-eks-ami {} is not as fetched ({why}): fetching it again",
                    &rev[..12]
                );
                std::fs::remove_dir_all(&dest).map_err(|e| format!("cannot remove {}: {e}", dest.display()))?;
            }
        }
    }
    let key = format!("{url} {rev}");
    let mut tried = TRIED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(outcome) = tried.get_or_insert_with(HashMap::new).get(&key) {
        return outcome.clone().map(|()| dest);
    }
    eprintln!(
        "[nodejoin] fetching amazon-eks-ami {} from {url} (once: kept in {})",
        &rev[..12],
        dest.display()
    );
    let started = Instant::now();
    let outcome = fetch_into(url, rev, &dest);
    if outcome.is_ok() {
        eprintln!(
            "[nodejoin] fetched amazon-eks-ami {} in {:.1}s",
            &rev[..12],
            started.elapsed().as_secs_f64()
        );
    }
    tried.get_or_insert_with(HashMap::new).insert(key, outcome.clone());
    outcome.map(|()| dest)
}

/// Whether the checkout at `dest` is commit `rev` exactly as fetched: HEAD is `rev`, every object is whole (`git
/// fsck`: objects hash to their names, so the commit's tree is the one published), and the work tree holds that
/// tree and nothing else (no change, no untracked or ignored file). Checked once per process.
fn verified(dest: &Path, rev: &str) -> Result<(), String> {
    let mut checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(done) = checked.get_or_insert_with(HashMap::new).get(dest) {
        return done.clone();
    }
    let outcome = (|| {
        if std::fs::symlink_metadata(dest.join(".git"))
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(true)
        {
            return Err("its .git is not a directory".to_string());
        }
        let head = git(dest, &["rev-parse", "HEAD"])?;
        if head.trim() != rev {
            return Err(format!("HEAD is {}", head.trim()));
        }
        git(dest, &["fsck", "--no-progress", "--no-dangling"])?;
        let changed = git(dest, &["status", "--porcelain", "--ignored", "--untracked-files=all"])?;
        match changed.lines().next() {
            Some(first) => Err(format!("its work tree differs: {}", first.trim())),
            None => Ok(()),
        }
    })();
    checked
        .get_or_insert_with(HashMap::new)
        .insert(dest.to_path_buf(), outcome.clone());
    outcome
}

/// `git init`, a depth-1 fetch of `rev` and its checkout in a directory of this process's, renamed into place
/// (a run beside it that got there first wins; the trees are the same commit).
fn fetch_into(url: &str, rev: &str, dest: &Path) -> Result<(), String> {
    let parent = dest.parent().ok_or("the cache directory has no parent")?;
    std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    remove_abandoned(parent, rev);
    let partial = parent.join(format!(".partial-{rev}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&partial);
    let result = (|| {
        std::fs::create_dir_all(&partial).map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
        git(&partial, &["init", "-q"])?;
        git(&partial, &["fetch", "-q", "--depth", "1", "--no-tags", "--", url, rev])?;
        git(
            &partial,
            &["-c", "advice.detachedHead=false", "checkout", "-q", "FETCH_HEAD"],
        )?;
        let head = git(&partial, &["rev-parse", "HEAD"])?;
        if head.trim() != rev {
            return Err(format!("{url} gave commit {} for {rev}", head.trim()));
        }
        match std::fs::rename(&partial, dest) {
            Ok(()) => {
                let mut checked = CHECKED.lock().unwrap_or_else(|p| p.into_inner());
                checked
                    .get_or_insert_with(HashMap::new)
                    .insert(dest.to_path_buf(), Ok(()));
                Ok(())
            }
            Err(_) if dest.join(".git").is_dir() => Ok(()),
            Err(e) => Err(format!("cannot move the checkout to {}: {e}", dest.display())),
        }
    })();
    let _ = std::fs::remove_dir_all(&partial);
    result
}

/// Partial fetches of `rev` left by runs that are provably gone (no process with their id).
fn remove_abandoned(parent: &Path, rev: &str) {
    let prefix = format!(".partial-{rev}-");
    for entry in std::fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix(&prefix).and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !crate::process::alive(pid) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// One git command in `dir` with only network transports allowed, no credential helper and no prompt; its
/// stdout, or its last stderr line as the error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let mut cmd = crate::process::git();
    cmd.current_dir(dir)
        .args(["-c", "protocol.allow=never"])
        .args(["-c", "protocol.https.allow=always", "-c", "protocol.http.allow=always"])
        .args(["-c", "protocol.git.allow=always", "-c", "credential.helper="])
        .args(["-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=60"])
        // The URL named is the one fetched: a redirect (to another host, another scheme) is refused.
        .args(["-c", "http.followRedirects=false"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "/bin/false")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().map_err(|e| format!("cannot run git ({e}): install git"))?;
    let out = wait_bounded(child)?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message");
    Err(format!("git {} failed: {}", args[0], last.trim()))
}

/// Waits for `child` at most [`FETCH_TIMEOUT`], reading its output as it goes (a full pipe would stall it).
fn wait_bounded(child: std::process::Child) -> Result<std::process::Output, String> {
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watch = {
        let done = done.clone();
        std::thread::spawn(move || {
            let end = Instant::now() + FETCH_TIMEOUT;
            while Instant::now() < end {
                if done.load(std::sync::atomic::Ordering::SeqCst) {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            if !done.load(std::sync::atomic::Ordering::SeqCst) {
                // SAFETY: kill(2) on the child's pid, which is not reaped until wait_with_output returns.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                return true;
            }
            false
        })
    };
    let out = child.wait_with_output().map_err(|e| format!("git: {e}"));
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    if watch.join().unwrap_or(false) {
        return Err(format!("git did not finish within {}s", FETCH_TIMEOUT.as_secs()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository with one commit, served by `git daemon` on a free local port (killed on drop).
    struct Served {
        _dir: tempfile::TempDir,
        daemon: std::process::Child,
        url: String,
        rev: String,
    }

    impl Drop for Served {
        fn drop(&mut self) {
            let _ = self.daemon.kill();
            let _ = self.daemon.wait();
        }
    }

    fn sh(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn serve() -> Served {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("amazon-eks-ami");
        std::fs::create_dir_all(repo.join("nodeadm")).unwrap();
        std::fs::write(
            repo.join("nodeadm/go.mod"),
            "module github.com/awslabs/amazon-eks-ami/nodeadm\n",
        )
        .unwrap();
        sh(&repo, &["init", "-q"]);
        sh(&repo, &["add", "."]);
        sh(
            &repo,
            &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"],
        );
        std::fs::write(repo.join("later"), "x").unwrap();
        sh(&repo, &["add", "."]);
        let first = sh(&repo, &["rev-parse", "HEAD"]);
        sh(
            &repo,
            &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "two"],
        );
        sh(&repo, &["config", "uploadpack.allowAnySHA1InWant", "true"]);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // git-daemon itself (`git daemon` would run it as a child that outlives a kill of `git`).
        let exec_path = sh(dir.path(), &["--exec-path"]);
        let daemon = std::process::Command::new(Path::new(&exec_path).join("git-daemon"))
            .args(["--export-all", "--listen=127.0.0.1", &format!("--port={port}")])
            .arg(format!("--base-path={}", dir.path().display()))
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let up = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(up.elapsed() < Duration::from_secs(10), "git daemon did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Served {
            _dir: dir,
            daemon,
            url: format!("git://127.0.0.1:{port}/amazon-eks-ami"),
            rev: first,
        }
    }

    #[test]
    fn a_pinned_commit_is_fetched_shallow_and_checked() {
        let served = serve();
        let cache = tempfile::tempdir().unwrap();
        let dest = cache.path().join(&served.rev);
        fetch_into(&served.url, &served.rev, &dest).unwrap();
        assert!(dest.join("nodeadm/go.mod").is_file());
        assert!(!dest.join("later").exists(), "the pinned commit, not the branch's head");
        assert_eq!(sh(&dest, &["rev-parse", "HEAD"]), served.rev);
        assert_eq!(sh(&dest, &["rev-list", "--count", "HEAD"]), "1", "shallow");
        let leftovers: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no partial directory left: {leftovers:?}");
        // A commit the repository does not have: git's reason, nothing left behind.
        let missing = "0123456789abcdef0123456789abcdef01234567";
        let e = fetch_into(&served.url, missing, &cache.path().join(missing)).unwrap_err();
        assert!(e.starts_with("git fetch failed: "), "{e}");
        assert!(!cache.path().join(missing).exists());
        // A checkout changed in the cache (a file edited, one planted) is found out and fetched again.
        let planted = cache.path().join("planted").join(&served.rev);
        fetch_into(&served.url, &served.rev, &planted).unwrap();
        assert_eq!(verified(&planted, &served.rev), Ok(()));
        std::fs::write(planted.join("nodeadm/go.mod"), "module evil\n").unwrap();
        let other = cache.path().join("edited").join(&served.rev);
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::rename(&planted, &other).unwrap();
        let why = verified(&other, &served.rev).unwrap_err();
        assert!(why.contains("work tree differs"), "{why}");
        let untracked = cache.path().join("untracked").join(&served.rev);
        fetch_into(&served.url, &served.rev, &untracked).unwrap();
        std::fs::write(untracked.join("nodeadm/extra.go"), "package main\n").unwrap();
        // As a later process finds it (this one knows it fetched it).
        CHECKED.lock().unwrap().as_mut().map(|m| m.remove(&untracked));
        assert!(verified(&untracked, &served.rev).is_err(), "an untracked file");
        let back = ensure(&untracked, &served.url, &served.rev).unwrap();
        assert!(!back.join("nodeadm/extra.go").exists(), "fetched again, as published");
        // Nothing answers: a clear error, quickly.
        drop(served);
        let e = fetch_into("git://127.0.0.1:1/x", missing, &cache.path().join(missing)).unwrap_err();
        assert!(e.contains("git fetch failed") && e.contains("127.0.0.1"), "{e}");
    }

    #[test]
    fn a_redirect_is_not_followed() {
        // A server that sends every request elsewhere, and the elsewhere, which must never be asked.
        let elsewhere = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = format!("http://{}/other", elsewhere.local_addr().unwrap());
        elsewhere.set_nonblocking(true).unwrap();
        let redirecting = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/amazon-eks-ami", redirecting.local_addr().unwrap());
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            for mut s in redirecting.incoming().flatten() {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 302 Found\r\nLocation: {target}/info/refs?service=git-upload-pack\r\n\
                     Content-Length: 0\r\nConnection: close\r\n\r\n"
                );
            }
        });
        let cache = tempfile::tempdir().unwrap();
        let rev = "0123456789abcdef0123456789abcdef01234567";
        let e = fetch_into(&url, rev, &cache.path().join(rev)).unwrap_err();
        assert!(e.contains("git fetch failed"), "{e}");
        assert!(elsewhere.accept().is_err(), "the redirect was followed");
    }

    #[test]
    fn git_itself_refuses_other_transports() {
        // Even past `check_pin`, the git commands allow network transports only.
        let served = serve();
        let cache = tempfile::tempdir().unwrap();
        let repo = served._dir.path().join("amazon-eks-ami");
        for url in [
            format!("file://{}", repo.display()),
            format!("ext::git daemon {}", repo.display()),
        ] {
            let e = fetch_into(&url, &served.rev, &cache.path().join("x")).unwrap_err();
            assert!(e.contains("not allowed") || e.contains("unsupported"), "{url}: {e}");
        }
    }

    #[test]
    fn only_network_urls_and_full_commits() {
        let rev = "81fec2e895854f599974fe4d3d72f61c0a9aaffa";
        assert!(check_pin("https://github.com/awslabs/amazon-eks-ami", rev).is_ok());
        assert!(check_pin("git://127.0.0.1:9418/x", rev).is_ok());
        for bad in [
            "ext::sh -c touch% /tmp/pwned",
            "file:///etc",
            "/etc",
            "../other",
            "ssh://git@github.com/a/b",
            "git@github.com:a/b",
            "https://",
            "https://x y",
            "-uhttps://x",
        ] {
            let e = check_pin(bad, rev).unwrap_err();
            assert!(e.contains("https://, http:// or git://"), "{bad}: {e}");
        }
        for bad in ["main", "81fec2e8", "v20260714", &rev.to_uppercase(), &format!("{rev}0")] {
            assert!(
                check_pin("https://x/y", bad).unwrap_err().contains("full commit id"),
                "{bad}"
            );
        }
    }
}
