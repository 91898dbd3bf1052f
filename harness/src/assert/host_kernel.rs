//! The host's kernel parameters a node could reach by mounting a fresh procfs or sysfs (a node container's root
//! can: docs/src/design/node-privileges.md), read before the node starts and again after it ran: a check that the
//! node left them as they were (`expect.hostKernelUntouched`). On a VM node the mounts are of its own kernel.
use super::Check;

/// Global parameters (no namespace holds its own copy) that change what the host does.
pub const PARAMS: &[&str] = &[
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/modprobe",
    "/proc/sys/kernel/panic",
    "/proc/sys/vm/overcommit_memory",
    "/sys/kernel/mm/transparent_hugepage/enabled",
];

/// `(parameter, value)` for each of [`PARAMS`] readable here.
pub fn snapshot() -> Vec<(String, String)> {
    PARAMS
        .iter()
        .filter_map(|p| Some((p.to_string(), std::fs::read_to_string(p).ok()?.trim().to_string())))
        .collect()
}

/// The check: every parameter read before has the same value after.
pub fn check(name: String, before: &[(String, String)], after: &[(String, String)]) -> Check {
    let changed: Vec<String> = before
        .iter()
        .filter_map(|(p, was)| {
            let now = after.iter().find(|(q, _)| q == p).map(|(_, v)| v.as_str());
            (now != Some(was.as_str())).then(|| format!("{p}: {was:?} became {:?}", now.unwrap_or("(unreadable)")))
        })
        .collect();
    Check::new(
        name,
        !before.is_empty() && changed.is_empty(),
        format!("the host's {} kernel parameters as before the node ran", before.len()),
        if before.is_empty() {
            "none could be read on this host".to_string()
        } else if changed.is_empty() {
            "all unchanged".to_string()
        } else {
            format!("changed: {}", changed.join("; "))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_parameter_fails_the_check_naming_it() {
        let before = vec![("/proc/sys/kernel/core_pattern".to_string(), "core".to_string())];
        assert!(check("n/x".into(), &before, &before).passed);
        let after = vec![(
            "/proc/sys/kernel/core_pattern".to_string(),
            "|/bin/false nodejoin".to_string(),
        )];
        let c = check("n/x".into(), &before, &after);
        assert!(!c.passed);
        assert!(
            c.actual
                .contains("core_pattern: \"core\" became \"|/bin/false nodejoin\""),
            "{}",
            c.actual
        );
        assert!(!check("n/x".into(), &[], &[]).passed, "nothing read proves nothing");
    }
}
