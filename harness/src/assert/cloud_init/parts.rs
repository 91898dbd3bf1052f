//! Which script of the user data failed and why, in its own words. cloud-init's status says only
//! `Runparts: 1 failures (part-001)`; a bootstrap author needs what a failed bootstrap script's report gives: which
//! part, its exit code and its last lines. cloud-init.log says which script ran when and how it ended (not what
//! it printed: cloud-init does not capture it); the scripts' stdout and stderr are one stream, in
//! cloud-init-output.log and the journal of cloud-final.service, with no mark where one script ends. So a script
//! that ran alone in its directory (one shell part, a single `#!` user data) is quoted exactly: its lines are the
//! stream's from its start to cloud-init's `Failed to run module`. Where several ran, the journal's times tell
//! only what was logged while each ran (journald stamps a line when it reads it, milliseconds late), and the
//! sentence says that.

/// How many of a part's last lines are quoted, and how long each may be: the node is untrusted.
const QUOTED_LINES: usize = 3;
const QUOTED_CHARS: usize = 120;

/// A moment in the node's local time, in microseconds (`YYYYMMDD` days, then the time of day): cloud-init.log and
/// `journalctl -o short-iso-precise` both print local time, so the two compare without knowing the zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Stamp(u64);

impl Stamp {
    /// `2026-11-26 09:45:02,728` (cloud-init.log, milliseconds) or `2026-11-26T09:45:02.738860` (journal).
    fn parse(line: &str) -> Option<Stamp> {
        let b = line.as_bytes();
        if b.len() < 23 || !matches!(b[10], b' ' | b'T') || !matches!(b[19], b',' | b'.') {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<u64> {
            let s = line.get(r)?;
            s.bytes().all(|c| c.is_ascii_digit()).then(|| s.parse().ok())?
        };
        let day = num(0..4)? * 10_000 + num(5..7)? * 100 + num(8..10)?;
        let secs = num(11..13)? * 3600 + num(14..16)? * 60 + num(17..19)?;
        let digits = b[20..].iter().take(6).take_while(|c| c.is_ascii_digit()).count();
        let frac = num(20..20 + digits)? * 10u64.pow(6 - digits as u32);
        Some(Stamp((day * 86_400 + secs) * 1_000_000 + frac))
    }
}

/// What cloud-init.log says of one script a runparts ran.
#[derive(Debug, Default)]
struct Run {
    path: String,
    started: Option<Stamp>,
    exit: Option<i64>,
    /// Why it could not run at all (`[Errno 8] Exec format error`), when cloud-init says.
    reason: Option<String>,
    failed: bool,
}

impl Run {
    fn name(&self) -> &str {
        self.path.rsplit('/').next().unwrap_or(&self.path)
    }

    /// The directory it ran from: the scripts of one runparts (one module) share it.
    fn dir(&self) -> &str {
        self.path.rsplit_once('/').map_or("", |(d, _)| d)
    }
}

/// The path of a script cloud-init ran from one of its own directories (`['/var/lib/cloud/instance/scripts/x']`).
fn script_path(list: &str) -> Option<String> {
    let inner = list.trim().strip_prefix('[')?.strip_suffix(']')?;
    let q = inner.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let path = inner.strip_prefix(q)?.strip_suffix(q)?;
    (path.starts_with("/var/lib/cloud/") && !path.contains(&format!("{q}, {q}"))).then(|| path.to_string())
}

/// The run of `path` (the last one), added when the log has not shown it start.
fn run_of(runs: &mut Vec<Run>, path: &str) -> usize {
    match runs.iter().rposition(|r| r.path == path) {
        Some(i) => i,
        None => {
            runs.push(Run {
                path: path.to_string(),
                ..Run::default()
            });
            runs.len() - 1
        }
    }
}

/// The scripts cloud-init ran, in order, with how each ended; and each user-data part's content type by its name.
fn read_log(log: &str) -> (Vec<Run>, Vec<(String, String)>) {
    let mut runs: Vec<Run> = Vec::new();
    let mut types = Vec::new();
    let mut vendor = false;
    let mut failing: Option<usize> = None;
    for line in log.lines() {
        if line.contains("start: init-network/consume-vendor-data") {
            vendor = true;
        } else if line.contains("finish: init-network/consume-vendor-data") {
            vendor = false;
        }
        // `Calling handler ShellScriptPartHandler: [['text/x-shellscript']] (text/x-shellscript, part-001, 2) ...`
        if let Some(rest) = line.split("Calling handler ").nth(1).filter(|_| !vendor) {
            let args = rest.split("]] (").nth(1).and_then(|a| a.rsplit_once(") with"));
            if let Some((ctype, rest)) = args.and_then(|a| a.0.split_once(", ")) {
                if let Some((name, _)) = rest.rsplit_once(", ").filter(|_| !ctype.starts_with("__")) {
                    types.push((name.to_string(), ctype.to_string()));
                }
            }
        }
        let command = line
            .split("Running command ")
            .nth(1)
            .and_then(|r| r.split(" with allowed return codes").next())
            .and_then(script_path);
        if let Some(path) = command {
            runs.push(Run {
                path,
                started: Stamp::parse(line),
                ..Run::default()
            });
            continue;
        }
        // 22.4 on: `Unexpected error while running command.` then `Command: [...]`, `Exit code: N`, `Reason: ...`.
        if let Some(path) = line.strip_prefix("Command: ").and_then(script_path) {
            let i = run_of(&mut runs, &path);
            runs[i].failed = true;
            failing = Some(i);
            continue;
        }
        if let Some(r) = failing.and_then(|i| runs.get_mut(i)) {
            if let Some(code) = line.strip_prefix("Exit code: ") {
                r.exit = code.trim().parse().ok();
                continue;
            }
            if let Some(why) = line.strip_prefix("Reason: ") {
                r.reason = Some(why.trim()).filter(|w| *w != "-").map(str::to_string);
                failing = None;
                continue;
            }
        }
        // Older cloud-init: `Failed running /var/lib/cloud/instance/scripts/part-001 [1]`.
        let old = line
            .split("Failed running ")
            .nth(1)
            .and_then(|r| r.trim_end().rsplit_once(" ["));
        if let Some((path, code)) = old.filter(|(p, _)| p.starts_with("/var/lib/cloud/")) {
            let i = run_of(&mut runs, path);
            runs[i].failed = true;
            runs[i].exit = code.strip_suffix(']').and_then(|c| c.parse().ok());
        }
    }
    (runs, types)
}

/// The node's text as a report may quote it: no control characters, at most [`QUOTED_CHARS`] characters.
fn quotable(line: &str) -> String {
    let clean: String = line
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match clean.char_indices().nth(QUOTED_CHARS) {
        Some((i, _)) => format!("{}...", &clean[..i]),
        None => clean,
    }
}

/// The final stage's output stream: from `journalctl -u cloud-final.service -o short-iso-precise` with each line's
/// stamp (systemd's own lines left out), or, without a journal, cloud-init-output.log from the final stage's banner.
fn stream<'a>(journal: &'a str, output_log: &'a str) -> Vec<(Option<Stamp>, &'a str)> {
    let stamped: Vec<(Option<Stamp>, &str)> = journal
        .lines()
        .filter_map(|l| {
            let stamp = Stamp::parse(l)?;
            let (who, msg) = l.split_once("]: ")?;
            let ident = who.rsplit(' ').next().unwrap_or_default();
            (!ident.starts_with("systemd[")).then_some((Some(stamp), msg))
        })
        .collect();
    if !stamped.is_empty() {
        return stamped;
    }
    let lines: Vec<&str> = output_log.lines().collect();
    let from = lines
        .iter()
        .rposition(|l| l.contains("running 'modules:final'"))
        .map_or(0, |i| i + 1);
    lines[from..].iter().map(|l| (None, *l)).collect()
}

/// The scripts' lines of `stream` from `from` (lines logged earlier were printed before it) to cloud-init's
/// `Failed to run module` (written after every script of the module had ended), cloud-init's own lines left out.
fn scripts_lines<'a>(stream: &[(Option<Stamp>, &'a str)], from: Option<Stamp>) -> Vec<(Option<Stamp>, &'a str)> {
    stream
        .iter()
        .skip_while(|(at, _)| matches!((at, from), (Some(at), Some(from)) if *at < from))
        .take_while(|(_, l)| !l.contains("Failed to run module"))
        .filter(|(_, l)| !super::is_cloud_inits_own(l))
        .copied()
        .collect()
}

/// The last [`QUOTED_LINES`] of `lines`, quotable, joined; empty when they are.
fn last_lines(lines: &[(Option<Stamp>, &str)]) -> String {
    let said: Vec<String> = lines
        .iter()
        .map(|(_, l)| quotable(l))
        .filter(|l| !l.is_empty())
        .collect();
    said[said.len().saturating_sub(QUOTED_LINES)..].join(" / ")
}

/// How many commands cloud-init's status says a runparts attempted (`... in 3 attempted commands`).
fn attempted(errors: &[String]) -> usize {
    errors
        .iter()
        .filter_map(|e| e.split(") in ").nth(1)?.split_whitespace().next()?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// One sentence per failed script: `part-001 (text/x-shellscript) exited 1; its last lines: a / b`, or `... exited 1
/// and printed nothing`. `log` is cloud-init.log, `journal` the final stage's (may be empty), `output_log`
/// cloud-init-output.log, `errors` cloud-init's own (naming failed parts the log may not have).
pub fn failed_parts(log: &str, journal: &str, output_log: &str, errors: &[String]) -> Vec<String> {
    let (mut runs, types) = read_log(log);
    // Parts cloud-init's status names (`Runparts: 2 failures (part-001,x.sh) in ...`) that the log lost.
    for e in errors {
        let Some(names) = e.split("failures (").nth(1).and_then(|r| r.split(") in ").next()) else {
            continue;
        };
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if !runs.iter().any(|r| r.failed && r.name() == name) {
                runs.push(Run {
                    path: name.to_string(),
                    failed: true,
                    ..Run::default()
                });
            }
        }
    }
    let stream = stream(journal, output_log);
    let stamped = stream.first().is_some_and(|(at, _)| at.is_some());
    let attempted = attempted(errors);
    runs.iter()
        .filter(|r| r.failed)
        .map(|r| {
            let name = r.name();
            let kind = match types.iter().find(|(n, _)| n == name) {
                Some((_, ctype)) => format!(" ({ctype})"),
                None if name == "runcmd" => " (the cloud-config's runcmd)".to_string(),
                None => String::new(),
            };
            let ended = match (r.exit, &r.reason) {
                (Some(code), _) if code < 0 => format!("was killed by signal {}", -code),
                (Some(code), _) => format!("exited {code}"),
                (None, Some(why)) => format!("could not run ({})", quotable(why)),
                (None, None) => "failed (cloud-init logged no exit code)".to_string(),
            };
            let group: Vec<&Run> = runs
                .iter()
                .filter(|g| g.started.is_some() && g.dir() == r.dir())
                .collect();
            let first = group.first().and_then(|g| g.started);
            let next = group
                .iter()
                .skip_while(|g| !std::ptr::eq(**g, r))
                .nth(1)
                .map(|g| (g.name(), g.started));
            let said = match (group.len().max(attempted), r.started) {
                // Alone in its directory: the stream from its start to cloud-init's warning is all its own.
                (0 | 1, from) => match last_lines(&scripts_lines(&stream, from)) {
                    s if s.is_empty() => " and printed nothing".to_string(),
                    s => format!("; its last lines: {s}"),
                },
                (_, Some(from)) if stamped => {
                    let lines = scripts_lines(&stream, Some(from));
                    match next {
                        Some((next, Some(until))) => {
                            let before: Vec<_> = lines
                                .into_iter()
                                .filter(|(at, _)| at.is_some_and(|a| a < until))
                                .collect();
                            match last_lines(&before) {
                                s if s.is_empty() => format!("; nothing was logged before {next} started"),
                                s => format!("; the last lines logged while it ran: {s}"),
                            }
                        }
                        _ => match last_lines(&lines) {
                            s if s.is_empty() => " and printed nothing".to_string(),
                            s => format!("; the last lines logged since it started: {s}"),
                        },
                    }
                }
                (n, _) => match last_lines(&scripts_lines(&stream, first)) {
                    s if s.is_empty() => format!(" and none of the {n} scripts printed anything"),
                    s => format!("; the output of the {n} scripts cloud-init ran ends: {s}"),
                },
            };
            format!("{name}{kind} {ended}{said}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cloud-init 22.4's log of a MIME user data whose one shell part failed (trimmed from a real run).
    const LOG: &str = "\
2026-11-26 09:45:00,693 - handlers.py[DEBUG]: start: init-network/consume-user-data: reading and applying user-data
2026-11-26 09:45:00,695 - __init__.py[DEBUG]: Calling handler ShellScriptPartHandler: [['text/x-shellscript']] (__begin__, None, 2) with frequency once-per-instance
2026-11-26 09:45:00,695 - __init__.py[DEBUG]: {'Content-Type': 'text/x-shellscript; charset=\"us-ascii\"', 'Content-Disposition': 'attachment; filename=\"part-001\"'}
2026-11-26 09:45:00,695 - __init__.py[DEBUG]: Calling handler ShellScriptPartHandler: [['text/x-shellscript']] (text/x-shellscript, part-001, 2) with frequency once-per-instance
2026-11-26 09:45:00,701 - handlers.py[DEBUG]: finish: init-network/consume-user-data: SUCCESS: reading and applying user-data
2026-11-26 09:45:00,701 - handlers.py[DEBUG]: start: init-network/consume-vendor-data: reading and applying vendor-data
2026-11-26 09:45:00,701 - __init__.py[DEBUG]: Calling handler ShellScriptPartHandler: [['text/x-shellscript']] (text/x-vendor, part-001, 2) with frequency once-per-instance
2026-11-26 09:45:00,701 - handlers.py[DEBUG]: finish: init-network/consume-vendor-data: SUCCESS: reading and applying vendor-data
2026-11-26 09:45:01,047 - subp.py[DEBUG]: Running command ['ssh-keygen', '-t', 'rsa', '-N', '', '-f', '/etc/ssh/ssh_host_rsa_key'] with allowed return codes [0] (shell=False, capture=True)
2026-11-26 09:45:02,723 - modules.py[DEBUG]: Running module scripts-user (<module 'cloudinit.config.cc_scripts_user' from '/usr/lib/python3/dist-packages/cloudinit/config/cc_scripts_user.py'>) with frequency once-per-instance
2026-11-26 09:45:02,728 - subp.py[DEBUG]: Running command ['/var/lib/cloud/instance/scripts/part-001'] with allowed return codes [0] (shell=False, capture=False)
2026-11-26 09:45:02,739 - subp.py[DEBUG]: Unexpected error while running command.
Command: ['/var/lib/cloud/instance/scripts/part-001']
Exit code: 1
Reason: -
Stdout: -
Stderr: -
2026-11-26 09:45:02,739 - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)
2026-11-26 09:45:02,739 - util.py[WARNING]: Running module scripts-user (<module 'cloudinit.config.cc_scripts_user' from '/usr/lib/python3/dist-packages/cloudinit/config/cc_scripts_user.py'>) failed
RuntimeError: Runparts: 1 failures (part-001) in 1 attempted commands
2026-11-26 09:45:02,742 - modules.py[DEBUG]: Running module ssh-authkey-fingerprints (<module 'cloudinit.config.cc_ssh_authkey_fingerprints'>) with frequency once-per-instance
";

    /// The final stage's journal of the same run (`journalctl -u cloud-final.service -o short-iso-precise`).
    const JOURNAL: &str = "\
2026-11-26T09:45:02.150933+00:00 ip-172-18-0-2 systemd[1]: Starting cloud-final.service - Execute cloud user/final scripts...
2026-11-26T09:45:02.620687+00:00 ip-172-18-0-2 cloud-init[315]: Cloud-init v. 22.4.2 running 'modules:final' at Thu, 26 Nov 2026 09:45:02 +0000. Up 11588.16 seconds.
2026-11-26T09:45:02.738860+00:00 ip-172-18-0-2 cloud-init[315]: probe: checking /etc/eks/foo
2026-11-26T09:45:02.739034+00:00 ip-172-18-0-2 cloud-init[315]: probe: /etc/eks/foo missing
2026-11-26T09:45:02.740532+00:00 ip-172-18-0-2 cloud-init[315]: 2026-11-26 09:45:02,739 - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)
2026-11-26T09:45:02.760867+00:00 ip-172-18-0-2 cloud-init[315]: Cloud-init v. 22.4.2 finished at Thu, 26 Nov 2026 09:45:02 +0000. Datasource DataSourceEc2Local.  Up 11588.34 seconds
2026-11-26T09:45:02.767831+00:00 ip-172-18-0-2 cloud-init[315]: ci-info: no authorized SSH keys fingerprints found for user debian.
2026-11-26T09:45:02.898496+00:00 ip-172-18-0-2 systemd[1]: cloud-final.service: Main process exited, code=exited, status=1/FAILURE
";

    const OUTPUT: &str = "\
Cloud-init v. 22.4.2 running 'modules:config' at Thu, 26 Nov 2026 09:45:01 +0000. Up 11587.27 seconds.
config stage noise
Cloud-init v. 22.4.2 running 'modules:final' at Thu, 26 Nov 2026 09:45:02 +0000. Up 11588.16 seconds.
probe: checking /etc/eks/foo
probe: /etc/eks/foo missing
2026-11-26 09:45:02,739 - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)
Cloud-init v. 22.4.2 finished at Thu, 26 Nov 2026 09:45:02 +0000. Datasource DataSourceEc2Local.  Up 11588.34 seconds
";

    const RUNPARTS: &str =
        "modules-final: ('scripts-user', RuntimeError('Runparts: 1 failures (part-001) in 1 attempted commands'))";

    #[test]
    fn a_failed_part_is_named_with_its_exit_code_and_its_own_last_lines() {
        let said = failed_parts(LOG, JOURNAL, OUTPUT, &[RUNPARTS.to_string()]);
        assert_eq!(
            said,
            vec!["part-001 (text/x-shellscript) exited 1; its last lines: probe: checking /etc/eks/foo / probe: /etc/eks/foo missing"]
        );
        // journald stamps lines when it reads them: late, here after cloud-init had moved on. They are still its.
        let late = JOURNAL.replace("09:45:02.73", "09:45:02.75");
        assert_eq!(failed_parts(LOG, &late, OUTPUT, &[RUNPARTS.to_string()]), said);
        // Without a journal the final stage's output says the same (nothing ran after the part).
        assert_eq!(failed_parts(LOG, "", OUTPUT, &[]), said);
    }

    #[test]
    fn a_silent_part_is_said_to_have_printed_nothing() {
        let journal: String = JOURNAL
            .lines()
            .filter(|l| !l.contains("probe:"))
            .map(|l| format!("{l}\n"))
            .collect();
        let output: String = OUTPUT
            .lines()
            .filter(|l| !l.contains("probe:"))
            .map(|l| format!("{l}\n"))
            .collect();
        let expected = vec!["part-001 (text/x-shellscript) exited 1 and printed nothing".to_string()];
        assert_eq!(failed_parts(LOG, &journal, &output, &[]), expected);
        assert_eq!(failed_parts(LOG, "", &output, &[]), expected);
    }

    #[test]
    fn several_scripts_are_told_apart_only_by_what_was_logged_while_each_ran() {
        // A real run (trimmed): a named part that failed, a part that printed and succeeded, a silent part that
        // failed. journald stamped part-002's line after part-003 had started: the sentence says what it knows.
        let log = "\
2026-11-26 09:53:40,134 - __init__.py[DEBUG]: Calling handler ShellScriptPartHandler: [['text/x-shellscript']] (text/x-shellscript, check-eks.sh, 2) with frequency once-per-instance
2026-11-26 09:53:40,135 - __init__.py[DEBUG]: Calling handler ShellScriptPartHandler: [['text/x-shellscript']] (text/x-shellscript, part-002, 2) with frequency once-per-instance
2026-11-26 09:53:40,135 - __init__.py[DEBUG]: Calling handler ShellScriptPartHandler: [['text/x-shellscript']] (text/x-shellscript, part-003, 2) with frequency once-per-instance
2026-11-26 09:53:42,682 - modules.py[DEBUG]: Running module scripts-user (<module 'cloudinit.config.cc_scripts_user'>) with frequency once-per-instance
2026-11-26 09:53:42,683 - subp.py[DEBUG]: Running command ['/var/lib/cloud/instance/scripts/check-eks.sh'] with allowed return codes [0] (shell=False, capture=False)
2026-11-26 09:53:42,695 - subp.py[DEBUG]: Unexpected error while running command.
Command: ['/var/lib/cloud/instance/scripts/check-eks.sh']
Exit code: 1
Reason: -
2026-11-26 09:53:42,696 - subp.py[DEBUG]: Running command ['/var/lib/cloud/instance/scripts/part-002'] with allowed return codes [0] (shell=False, capture=False)
2026-11-26 09:53:42,707 - subp.py[DEBUG]: Running command ['/var/lib/cloud/instance/scripts/part-003'] with allowed return codes [0] (shell=False, capture=False)
2026-11-26 09:53:42,715 - subp.py[DEBUG]: Unexpected error while running command.
Command: ['/var/lib/cloud/instance/scripts/part-003']
Exit code: 7
Reason: -
";
        let journal = "\
2026-11-26T09:53:42.535811+00:00 n cloud-init[316]: Cloud-init v. 22.4.2 running 'modules:final' at Thu, 26 Nov 2026 09:53:42 +0000.
2026-11-26T09:53:42.691261+00:00 n cloud-init[316]: check-eks: probing
2026-11-26T09:53:42.691261+00:00 n cloud-init[316]: check-eks: \x1b[31m/etc/eks/foo\x1b[0m missing
2026-11-26T09:53:42.708052+00:00 n cloud-init[316]: second part: ran after check-eks
2026-11-26T09:53:42.717602+00:00 n cloud-init[316]: 2026-11-26 09:53:42,716 - cc_scripts_user.py[WARNING]: Failed to run module scripts-user (scripts in /var/lib/cloud/instance/scripts)
2026-11-26T09:53:42.738511+00:00 n cloud-init[316]: ci-info: no authorized SSH keys fingerprints found for user debian.
";
        let errors = ["modules-final: ('scripts-user', RuntimeError('Runparts: 2 failures (check-eks.sh,part-003) in 3 attempted commands'))".to_string()];
        assert_eq!(
            failed_parts(log, journal, "", &errors),
            vec![
                "check-eks.sh (text/x-shellscript) exited 1; the last lines logged while it ran: check-eks: probing / check-eks:  [31m/etc/eks/foo [0m missing",
                "part-003 (text/x-shellscript) exited 7; the last lines logged since it started: second part: ran after check-eks",
            ]
        );
        // Without a journal, the lines of several scripts cannot be told apart, and the sentence says so.
        let output =
            "Cloud-init v. 22.4.2 running 'modules:final'\ncheck-eks: probing\nsecond part: ran after check-eks\n";
        assert_eq!(
            failed_parts(log, "", output, &errors)[0],
            "check-eks.sh (text/x-shellscript) exited 1; the output of the 3 scripts cloud-init ran ends: check-eks: probing / second part: ran after check-eks"
        );
    }

    #[test]
    fn older_logs_exits_without_a_code_and_long_lines() {
        let old =
            "2019-01-01 10:00:00,000 - util.py[WARNING]: Failed running /var/lib/cloud/instance/scripts/runcmd [2]\n";
        let long = format!("{}\n", "x".repeat(500));
        let said = failed_parts(old, "", &long, &[]);
        assert_eq!(said.len(), 1);
        assert!(
            said[0].starts_with("runcmd (the cloud-config's runcmd) exited 2; its last lines: xxx"),
            "{said:?}"
        );
        assert!(said[0].len() < 200, "{said:?}");
        let killed = "Command: ['/var/lib/cloud/instance/scripts/part-001']\nExit code: -9\nReason: -\n";
        assert_eq!(
            failed_parts(killed, "", "", &[]),
            vec!["part-001 was killed by signal 9 and printed nothing"]
        );
        let not_run = "Command: ['/var/lib/cloud/instance/scripts/part-001']\nExit code: -\nReason: [Errno 8] Exec format error: b'/var/lib/cloud/instance/scripts/part-001'\n";
        assert!(
            failed_parts(not_run, "", "", &[])[0].starts_with("part-001 could not run ([Errno 8] Exec format error")
        );
        // Only cloud-init's status names the part: it is still named.
        assert_eq!(
            failed_parts("", "", "", &[RUNPARTS.to_string()]),
            vec!["part-001 failed (cloud-init logged no exit code) and printed nothing"]
        );
    }

    #[test]
    fn stamps_compare_across_the_two_formats() {
        let log = Stamp::parse("2026-11-26 09:45:02,728 - x").unwrap();
        let journal = Stamp::parse("2026-11-26T09:45:02.728500+00:00 h x[1]: y").unwrap();
        assert!(log < journal);
        assert!(Stamp::parse("2026-11-27 00:00:00,000").unwrap() > journal);
        assert_eq!(Stamp::parse("Nov 26 09:45:02.738860 h x[1]: y"), None);
    }
}
