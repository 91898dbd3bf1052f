//! Which programs a bootstrap ran: `execve` calls traced by strace (`-f -e trace=execve`) while it ran, so a
//! scenario can hold it to a small set of host tools (no package manager, no downloader, no `aws` when the user
//! data carries everything).
use super::Check;
use crate::scenario::model::ExecutableExpectation;
use std::collections::{BTreeMap, HashMap};

/// What an exec trace shows: the programs that ran, and whether every line was understood. A check on programs
/// is only as good as its trace: an empty one, or one with lines this parser cannot read, proves nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecTrace {
    /// Programs that ran (successful execve), by file name, with how many times.
    pub ran: BTreeMap<String, usize>,
    /// execve calls seen, successful or not.
    pub execs: usize,
    /// The first few lines in none of the forms strace writes for `-f -e trace=execve`.
    pub unparsed: Vec<String>,
    pub unparsed_count: usize,
    /// execve calls strace left `<unfinished ...>` and never resumed: whether they ran is unknown.
    pub unfinished: usize,
    /// Processes strace detached from before they ended (`<detached ...>`, as it writes for one still running
    /// when tracing stops): what they ran after that is not in the trace, and the check says so.
    pub detached: usize,
}

/// The bootstrap's exec trace, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trace {
    Missing(String),
    Read(ExecTrace),
}

/// How many unparsed lines a report quotes.
const QUOTED: usize = 3;

/// Parses `strace -f -e trace=execve` output (each line `PID syscall...`; the pid is optional).
pub fn parse_strace(trace: &str) -> ExecTrace {
    let mut t = ExecTrace::default();
    let mut pending: HashMap<String, String> = HashMap::new();
    let name = |path: &str| path.rsplit('/').next().unwrap_or(path).to_string();
    let succeeded = |line: &str| line.trim_end().ends_with("= 0");
    // `...) = 0`, `...) = -1 ENOENT (No such file or directory)`, `<... execve resumed>)   = 0`.
    let returned = |line: &str| {
        line.match_indices(')')
            .any(|(i, _)| line[i + 1..].trim_start().starts_with("= "))
    };
    for line in trace.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        let (pid, rest) = match trimmed.split_once(char::is_whitespace) {
            Some((p, r)) if p.chars().all(|c| c.is_ascii_digit()) => (p.to_string(), r.trim_start()),
            _ => (String::new(), trimmed),
        };
        let mut record = |path: &str, line: &str| {
            t.execs += 1;
            if succeeded(line) {
                *t.ran.entry(name(path)).or_insert(0) += 1;
            }
        };
        if let Some(call) = rest.strip_prefix("execve(\"") {
            let path = call.split('"').next().unwrap_or_default().to_string();
            if rest.ends_with("<unfinished ...>") {
                pending.insert(pid, path);
                continue;
            }
            if returned(rest) {
                record(&path, rest);
                continue;
            }
        } else if rest.starts_with("<... execve resumed>") && returned(rest) {
            if let Some(path) = pending.remove(&pid) {
                record(&path, rest);
                continue;
            }
        } else if rest.ends_with("<detached ...>") {
            // `???( <detached ...>` or `wait4(... <detached ...>`: tracing of this process stopped here.
            t.detached += 1;
            continue;
        } else if (rest.starts_with("+++ ") && rest.ends_with(" +++"))
            || (rest.starts_with("--- SIG") && rest.ends_with(" ---"))
        {
            // A process's exit or a signal: no program ran.
            continue;
        }
        t.unparsed_count += 1;
        if t.unparsed.len() < QUOTED {
            t.unparsed.push(trimmed.chars().take(160).collect());
        }
    }
    t.unfinished = pending.len();
    t
}

/// `bash 3x, curl 14x, ...`.
pub fn summary(ran: &BTreeMap<String, usize>) -> String {
    ran.iter()
        .map(|(k, n)| format!("{k} {n}x"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The trace, or why it cannot back a verdict.
fn usable(trace: Option<&Trace>) -> Result<&ExecTrace, String> {
    let t = match trace {
        None => return Err("no trace: the bootstrap did not run under the harness".into()),
        Some(Trace::Missing(why)) => return Err(format!("no trace: {why}")),
        Some(Trace::Read(t)) => t,
    };
    if t.execs == 0 && t.unparsed_count == 0 && t.unfinished == 0 {
        return Err(
            "empty trace: not one execve (the bootstrap itself is exec'd under strace, so tracing failed)".into(),
        );
    }
    let mut why = Vec::new();
    if t.unparsed_count > 0 {
        let quoted: Vec<String> = t.unparsed.iter().map(|l| format!("{l:?}")).collect();
        why.push(format!(
            "{} lines unparsed, e.g. {}",
            t.unparsed_count,
            quoted.join(", ")
        ));
    }
    if t.unfinished > 0 {
        why.push(format!(
            "{} execve calls never resumed (whether they ran is unknown)",
            t.unfinished
        ));
    }
    if why.is_empty() {
        Ok(t)
    } else {
        Err(format!("trace unreadable: {}", why.join("; ")))
    }
}

/// The trace's own check, then (only when the trace is usable) one per expectation: a forbid list checked
/// against a trace that shows nothing would pass without having looked.
pub fn checks(node: &str, trace: Option<&Trace>, want: &ExecutableExpectation) -> Vec<Check> {
    let name = super::registry::EXECUTABLES_TRACE.on(node);
    let expected = "an exec trace of the bootstrap, every line understood";
    let t = match usable(trace) {
        Ok(t) => t,
        Err(why) => return vec![Check::new(name, false, expected, why)],
    };
    let ran = &t.ran;
    let mut out = vec![Check::new(
        name,
        true,
        expected,
        if t.detached == 0 {
            format!("{} execve calls, {} programs", t.execs, ran.len())
        } else {
            format!(
                "{} execve calls, {} programs; {} process(es) still running were detached when tracing stopped \
                 (what they ran afterwards is not in the trace)",
                t.execs,
                ran.len(),
                t.detached
            )
        },
    )];
    if !want.forbid.is_empty() {
        let found: Vec<String> = want
            .forbid
            .iter()
            .filter_map(|p| ran.get(p).map(|n| format!("{p} ran {n}x")))
            .collect();
        out.push(Check::new(
            super::registry::EXECUTABLES_FORBIDDEN.on(node),
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
            super::registry::EXECUTABLES_ONLY.on(node),
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
            super::registry::EXECUTABLE_RAN.on_with(node, format!("{r} ran")),
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
        let t = parse_strace(TRACE);
        assert_eq!(t.ran.get("curl"), Some(&2));
        assert_eq!(t.ran.get("jq"), Some(&1), "the ENOENT lookup does not count");
        assert_eq!(t.ran.get("bootstrap.sh"), Some(&1));
        assert_eq!(summary(&t.ran), "bootstrap.sh 1x, curl 2x, jq 1x");
        assert_eq!((t.execs, t.unparsed_count, t.unfinished), (5, 0, 0));
        // A process still running when tracing stopped: understood, counted, and said in the check.
        let detached =
            parse_strace("101   execve(\"/bin/sh\", [\"sh\"], 0x1 /* 1 vars */) = 0\n382   ???( <detached ...>\n");
        assert_eq!((detached.execs, detached.unparsed_count, detached.detached), (1, 0, 1));
        let checks = checks("n", Some(&Trace::Read(detached)), &Default::default());
        assert!(
            checks[0].passed && checks[0].actual.contains("1 process(es) still running were detached"),
            "{checks:?}"
        );
    }

    fn want() -> ExecutableExpectation {
        ExecutableExpectation {
            forbid: vec!["aws".into(), "jq".into()],
            only: vec!["bootstrap.sh".into(), "curl".into()],
            require: vec!["curl".into(), "systemctl".into()],
        }
    }

    #[test]
    fn expectations() {
        let t = Trace::Read(parse_strace(TRACE));
        let c = checks("n", Some(&t), &want());
        assert!(
            c[0].passed && c[0].actual == "5 execve calls, 3 programs",
            "{}",
            c[0].actual
        );
        assert!(!c[1].passed && c[1].actual == "jq ran 1x");
        assert!(!c[2].passed && c[2].actual.contains("also ran: jq"));
        assert!(c[3].passed);
        assert!(!c[4].passed && c[4].actual == "never");
    }

    /// A forbid list alone passes on any trace that shows nothing: such traces fail the trace check instead, and
    /// no expectation check is made from them.
    #[test]
    fn traces_that_show_nothing_fail() {
        let forbid_only = ExecutableExpectation {
            forbid: vec!["apt-get".into()],
            ..Default::default()
        };
        let verdict = |trace: Option<&Trace>| {
            let c = checks("n", trace, &forbid_only);
            assert_eq!(c.len(), 1, "{c:?}");
            assert_eq!(c[0].name, "n/executables trace");
            assert!(!c[0].passed);
            c[0].actual.clone()
        };
        assert!(verdict(None).starts_with("no trace: the bootstrap did not run"));
        let missing = Trace::Missing("the image has no strace".into());
        assert_eq!(verdict(Some(&missing)), "no trace: the image has no strace");
        let empty = Trace::Read(parse_strace(""));
        assert!(verdict(Some(&empty)).starts_with("empty trace"));
        let blank = Trace::Read(parse_strace("\n  \n"));
        assert!(verdict(Some(&blank)).starts_with("empty trace"));
        let garbled = format!("{TRACE}106   execv(\"/usr/bin/apt-get\"\nstrace: something odd\n");
        let why = verdict(Some(&Trace::Read(parse_strace(&garbled))));
        assert!(why.starts_with("trace unreadable: 2 lines unparsed, e.g."), "{why}");
        assert!(
            why.contains("apt-get") && why.contains("strace: something odd"),
            "{why}"
        );
        let only_garbage = Trace::Read(parse_strace("not strace output\n"));
        assert!(verdict(Some(&only_garbage)).contains("1 lines unparsed"));
        let cut = "101   execve(\"/usr/bin/apt-get\", [\"apt-get\"], 0x55 /* 1 vars */ <unfinished ...>\n";
        let why = verdict(Some(&Trace::Read(parse_strace(cut))));
        assert!(why.contains("1 execve calls never resumed"), "{why}");
        // A resumption with no call before it is not understood either.
        let orphan = "101   <... execve resumed>) = 0\n";
        assert!(verdict(Some(&Trace::Read(parse_strace(orphan)))).contains("1 lines unparsed"));
    }

    #[test]
    fn lines_without_a_pid_parse_too() {
        let t = parse_strace("execve(\"/bin/sh\", [\"sh\"], 0x1 /* 1 vars */) = 0\n");
        assert_eq!((t.execs, t.unparsed_count), (1, 0));
        assert_eq!(t.ran.get("sh"), Some(&1));
    }
}
