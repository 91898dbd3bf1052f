//! A VM guest's cgroup tree, read through its agent. The harness cannot watch a guest's tree every 0.1 s as it
//! does a container's (each look is a process the guest emulates), so the units that ended before a reading
//! (cloud-init's stages, nodeadm's) come from systemd's own account instead: when a unit stops, systemd logs
//! what it consumed (the journal's `MESSAGE_ID` below, with `UNIT` and `CPU_USAGE_NSEC`). Without it their CPU
//! would stay in their slice's own and read as the system's.
use super::{label, Reading, MAX_CGROUPS};
use std::collections::BTreeMap;
use std::time::Duration;

/// systemd's "unit consumed resources" message (`SD_MESSAGE_UNIT_RESOURCES`).
const UNIT_RESOURCES: &str = "ae8f7b866b0347b9af31fe1c80b127c0";

const ENDED: &str = "#ended";
const SLICES: &str = "#slices";

/// A shell script that prints, through a guest's agent: the cgroup v2 tree's CPU (`<usage_usec> <path>` a
/// line, to depth 2), then systemd's account of each unit that stopped in this boot (journal JSON, at most 512
/// entries), then the slice each of those units runs in (`systemctl show`), one process for them all.
pub fn guest_listing_script() -> String {
    format!(
        "cd /sys/fs/cgroup 2>/dev/null || exit 1; for f in cpu.stat */cpu.stat */*/cpu.stat; do \
         [ -f \"$f\" ] && awk -v p=\"$f\" '$1 == \"usage_usec\" {{ print $2, p }}' \"$f\"; done; \
         echo '{ENDED}'; j=$(journalctl -b -q --no-pager -o json --output-fields=UNIT,CPU_USAGE_NSEC \
         MESSAGE_ID={UNIT_RESOURCES} _PID=1 2>/dev/null | head -n 512); printf '%s\\n' \"$j\"; \
         echo '{SLICES}'; u=$(printf '%s\\n' \"$j\" | sed -n 's/.*\"UNIT\" *: *\"\\([A-Za-z0-9@_.:-]*\\)\".*/\\1/p' \
         | sort -u); [ -z \"$u\" ] || systemctl show -p Id -p Slice -- $u 2>/dev/null; exit 0"
    )
}

impl Reading {
    /// Parses what [`guest_listing_script`] prints: the tree, and each unit that ended put back under its slice
    /// (at the CPU systemd gave for all its ended runs, added to its current run's when it runs again).
    pub fn parse_listing(text: &str) -> Reading {
        let (tree, rest) = text.split_once(ENDED).unwrap_or((text, ""));
        let (ended, slices) = rest.split_once(SLICES).unwrap_or((rest, ""));
        let mut cgroups = Vec::new();
        for line in tree.lines().take(MAX_CGROUPS) {
            let Some((usec, path)) = line.split_once(' ') else {
                continue;
            };
            let Ok(usec) = usec.parse::<u64>() else { continue };
            let path = path.trim_start_matches("./").trim_start_matches('.');
            let path = path.trim_end_matches("/cpu.stat").trim_end_matches("cpu.stat");
            let path = path
                .split('/')
                .filter(|s| !s.is_empty())
                .map(label)
                .collect::<Vec<_>>()
                .join("/");
            cgroups.push((path, Duration::from_micros(usec)));
        }
        let slice_of = slices_of(slices);
        for (unit, used) in ended_units(ended) {
            // Only a unit directly under a top slice (`system.slice`, `runtime.slice`): one deeper is counted
            // in its own depth-2 slice already.
            let Some(slice) = slice_of.get(&unit).filter(|s| top_slice(s)) else {
                continue;
            };
            if !cgroups.iter().any(|(p, _)| p == slice) {
                continue;
            }
            let path = format!("{slice}/{}", label(&unit));
            if let Some((_, live)) = cgroups.iter_mut().find(|(p, _)| *p == path) {
                *live += used;
            } else if cgroups.len() < MAX_CGROUPS {
                cgroups.push((path, used));
            }
        }
        Reading {
            cgroups,
            root: super::Part::System,
        }
    }
}

/// `system.slice`, not `-.slice` (the root) nor `system-getty.slice` (under `system.slice`).
fn top_slice(s: &str) -> bool {
    s.strip_suffix(".slice")
        .is_some_and(|n| !n.is_empty() && !n.contains('-'))
}

/// Each unit's CPU summed over its journal entries (one per run that ended).
fn ended_units(json_lines: &str) -> BTreeMap<String, Duration> {
    let mut out: BTreeMap<String, Duration> = BTreeMap::new();
    for line in json_lines.lines().take(MAX_CGROUPS) {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(unit), Some(nsec)) = (
            v.get("UNIT").and_then(|u| u.as_str()),
            v.get("CPU_USAGE_NSEC")
                .and_then(|n| n.as_str())
                .and_then(|n| n.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if out.len() < MAX_CGROUPS || out.contains_key(unit) {
            *out.entry(unit.to_string()).or_default() += Duration::from_nanos(nsec);
        }
    }
    out
}

/// `systemctl show -p Id -p Slice` output (blocks of `Key=value` lines, a blank line between units): unit to
/// slice.
fn slices_of(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for block in text.split("\n\n") {
        let get = |k: &str| block.lines().find_map(|l| l.trim().strip_prefix(k)).map(str::to_string);
        if let (Some(id), Some(slice)) = (get("Id="), get("Slice=")) {
            out.insert(id, slice);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::Part;
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_guest_listing_parses_and_bad_lines_are_skipped() {
        let r = Reading::parse_listing(
            "5000000 cpu.stat\n2000000 system.slice/cpu.stat\n1000000 system.slice/kubelet.service/cpu.stat\n\
             garbage\nx y\n300000 qemu-guest-agent.service/cpu.stat\n",
        );
        assert_eq!(r.total(), Some(ms(5000)));
        assert_eq!(r.cgroups.len(), 4);
        assert_eq!(r.profile().get(Part::Kubelet), ms(1000));
    }

    #[test]
    fn units_that_ended_are_taken_out_of_their_slice() {
        // cloud-init-local ended (1.5 s), nodeadm-config ran twice (0.5 + 0.25 s), the kubelet runs again
        // (0.25 s before, 1 s now); a getty unit under a nested slice and garbage are left as they are.
        let text =
            "9000000 cpu.stat\n4000000 system.slice/cpu.stat\n500000 system.slice/qemu-guest-agent.service/cpu.stat\n\
            2000000 runtime.slice/cpu.stat\n1000000 runtime.slice/kubelet.service/cpu.stat\n#ended\n\
            { \"UNIT\" : \"cloud-init-local.service\", \"CPU_USAGE_NSEC\" : \"1500000000\" }\n\
            {\"UNIT\":\"nodeadm-config.service\",\"CPU_USAGE_NSEC\":\"500000000\"}\n\
            {\"UNIT\":\"nodeadm-config.service\",\"CPU_USAGE_NSEC\":\"250000000\"}\n\
            {\"UNIT\":\"kubelet.service\",\"CPU_USAGE_NSEC\":\"250000000\"}\n\
            {\"UNIT\":\"getty@tty1.service\",\"CPU_USAGE_NSEC\":\"100000000\"}\n\
            {\"UNIT\":\"nothing-known.service\"}\nnot json\n#slices\n\
            Slice=system.slice\nId=cloud-init-local.service\n\nId=nodeadm-config.service\nSlice=system.slice\n\n\
            Slice=runtime.slice\nId=kubelet.service\n\nSlice=system-getty.slice\nId=getty@tty1.service\n";
        let r = Reading::parse_listing(text);
        let p = r.profile();
        assert_eq!(p.get(Part::Bootstrap), ms(2250));
        assert_eq!(p.get(Part::Kubelet), ms(1250));
        assert_eq!(p.get(Part::Nodejoin), ms(500));
        // system.slice's own 4000 - 500 - 2250, runtime.slice's 2000 - 1250, the kernel's 9000 - 6000
        assert_eq!(p.get(Part::System), ms(1250 + 750 + 3000));
        assert_eq!(p.total(), ms(9000));
    }

    #[test]
    fn only_top_slices_take_units() {
        assert!(top_slice("system.slice") && top_slice("runtime.slice"));
        assert!(!top_slice("-.slice") && !top_slice("system-getty.slice") && !top_slice("system.service"));
    }
}
