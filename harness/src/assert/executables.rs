//! Which programs a bootstrap ran: `execve` calls traced by strace (`-f -e trace=execve`) while it ran, so a
//! scenario can hold it to a small set of host tools (no package manager, no downloader, no `aws` when the user
//! data carries everything).
use super::Check;
use crate::scenario::model::ExecutableExpectation;
use std::collections::{BTreeMap, HashMap};

/// Programs that ran (successful execve), by file name, with how many times.
pub fn parse_strace(trace: &str) -> BTreeMap<String, usize> {
    let mut ran = BTreeMap::new();
    let mut pending: HashMap<String, String> = HashMap::new();
    let name = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
    for line in trace.lines() {
        let pid = line.split_whitespace().next().unwrap_or_default().to_string();
        if let Some(rest) = line.split("execve(\"").nth(1) {
            let path = rest.split('"').next().unwrap_or_default().to_string();
            if line.contains("<unfinished ...>") {
                pending.insert(pid, path);
            } else if line.trim_end().ends_with("= 0") {
                *ran.entry(name(&path)).or_insert(0) += 1;
            }
        } else if line.contains("<... execve resumed>") && line.trim_end().ends_with("= 0") {
            if let Some(path) = pending.remove(&pid) {
                *ran.entry(name(&path)).or_insert(0) += 1;
            }
        }
    }
    ran
}

/// `bash 3x, curl 14x, ...`.
pub fn summary(ran: &BTreeMap<String, usize>) -> String {
    ran.iter()
        .map(|(k, n)| format!("{k} {n}x"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn checks(node: &str, ran: Option<&BTreeMap<String, usize>>, want: &ExecutableExpectation) -> Vec<Check> {
    let Some(ran) = ran else {
        return vec![Check::new(
            format!("{node}/executables"),
            false,
            "an exec trace of the bootstrap",
            "none (the image has no strace, or the bootstrap did not run under the harness)",
        )];
    };
    let mut out = Vec::new();
    if !want.forbid.is_empty() {
        let found: Vec<String> = want
            .forbid
            .iter()
            .filter_map(|p| ran.get(p).map(|n| format!("{p} ran {n}x")))
            .collect();
        out.push(Check::new(
            format!("{node}/executables forbidden"),
            found.is_empty(),
            format!("none of {} ran", want.forbid.join(", ")),
            if found.is_empty() {
                "none ran".to_string()
            } else {
                found.join(", ")
            },
        ));
    }
    if !want.only.is_empty() {
        let extra: Vec<String> = ran.keys().filter(|k| !want.only.contains(k)).cloned().collect();
        out.push(Check::new(
            format!("{node}/executables only"),
            extra.is_empty(),
            format!("only {}", want.only.join(", ")),
            if extra.is_empty() {
                summary(ran)
            } else {
                format!("also ran: {}", extra.join(", "))
            },
        ));
    }
    for r in &want.require {
        out.push(Check::new(
            format!("{node}/executable {r} ran"),
            ran.contains_key(r),
            "ran",
            match ran.get(r) {
                Some(n) => format!("{n}x"),
                None => "never".to_string(),
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = r#"101   execve("/etc/eks/bootstrap.sh", ["/etc/eks/bootstrap.sh", "demo"], 0x7ffd /* 12 vars */) = 0
102   execve("/usr/bin/curl", ["curl", "-sS"], 0x55 /* 12 vars */ <unfinished ...>
103   execve("/usr/local/sbin/jq", ["jq"], 0x55 /* 12 vars */) = -1 ENOENT (No such file or directory)
103   execve("/usr/bin/jq", ["jq", "-r"], 0x55 /* 12 vars */) = 0
102   <... execve resumed>)             = 0
104   execve("/usr/bin/curl", ["curl"], 0x55 /* 12 vars */) = 0
105   +++ exited with 0 +++
"#;

    #[test]
    fn successful_execs_are_counted_by_name() {
        let ran = parse_strace(TRACE);
        assert_eq!(ran.get("curl"), Some(&2));
        assert_eq!(ran.get("jq"), Some(&1), "the ENOENT lookup does not count");
        assert_eq!(ran.get("bootstrap.sh"), Some(&1));
        assert_eq!(summary(&ran), "bootstrap.sh 1x, curl 2x, jq 1x");
    }

    #[test]
    fn expectations() {
        let ran = parse_strace(TRACE);
        let want = ExecutableExpectation {
            forbid: vec!["aws".into(), "jq".into()],
            only: vec!["bootstrap.sh".into(), "curl".into()],
            require: vec!["curl".into(), "systemctl".into()],
        };
        let c = checks("n", Some(&ran), &want);
        assert!(!c[0].passed && c[0].actual == "jq ran 1x");
        assert!(!c[1].passed && c[1].actual.contains("also ran: jq"));
        assert!(c[2].passed);
        assert!(!c[3].passed && c[3].actual == "never");
        assert!(!checks("n", None, &want)[0].passed);
    }
}
