//! `expect.localStorage`: the instance-store disks are one md array of the level nodeadm's
//! `localStorage.strategy` asked for, and the directories the AMI's `setup-local-disks` moves onto it (the
//! kubelet's, containerd's, `/var/log/pods`) are mounted from it. The disks are found as the AMI finds them, by
//! EC2's model in udev's `/dev/disk/by-id` names, so a check passes only on what the bootstrap built.
use super::Check;
use crate::scenario::expect::LocalStorageExpectation;

/// The directories the array must hold (the script's defaults; nodeadm's `disabledMounts` would leave some off).
pub const DIRS: &[&str] = &["/var/lib/kubelet", "/var/lib/containerd", "/var/log/pods"];

/// Run in the node: one `store <device> <by-id name>` line per instance-store disk, then one
/// `dir <path> <device> <md level or none> <member devices...>` line per directory of [`DIRS`].
pub const PROBE: &str = r#"for l in /dev/disk/by-id/*NVMe_Instance_Storage_*; do
  [ -e "$l" ] || continue
  case "$l" in *-part[0-9]*) continue ;; esac
  echo "store $(basename "$(readlink -f "$l")") ${l##*/}"
done
for d in /var/lib/kubelet /var/lib/containerd /var/log/pods; do
  mm=$(findmnt -n -o MAJ:MIN --target "$d" 2>/dev/null | head -n 1 | tr -d ' ')
  dev=$(basename "$(readlink -f "/sys/dev/block/${mm:-none}" 2>/dev/null)" 2>/dev/null)
  lvl=$(cat "/sys/dev/block/${mm:-none}/md/level" 2>/dev/null)
  echo "dir $d ${dev:-?} ${lvl:-none} $(ls "/sys/dev/block/${mm:-none}/slaves" 2>/dev/null | tr '\n' ' ')"
done
"#;

/// What the probe printed.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    /// `(device, by-id name)`.
    stores: Vec<(String, String)>,
    /// `(path, device, level, members)`.
    dirs: Vec<(String, String, String, Vec<String>)>,
}

fn parse(out: &str) -> Seen {
    let mut seen = Seen::default();
    for line in out.lines() {
        let mut w = line.split_whitespace();
        match w.next() {
            Some("store") => {
                if let (Some(dev), Some(link)) = (w.next(), w.next()) {
                    seen.stores.push((dev.to_string(), link.to_string()));
                }
            }
            Some("dir") => {
                if let (Some(path), Some(dev), Some(level)) = (w.next(), w.next(), w.next()) {
                    let mut members: Vec<String> = w.map(str::to_string).collect();
                    members.sort();
                    seen.dirs
                        .push((path.to_string(), dev.to_string(), level.to_string(), members));
                }
            }
            _ => {}
        }
    }
    seen
}

/// The check from the probe's output `out`.
pub fn check(name: String, want: LocalStorageExpectation, out: &str) -> Check {
    let seen = parse(out);
    let level = want.md_level();
    let expected = format!(
        "{} on one {level} md array of every instance-store disk (/dev/disk/by-id/*NVMe_Instance_Storage_*)",
        DIRS.join(", ")
    );
    let mut stores: Vec<String> = seen.stores.iter().map(|(d, _)| d.clone()).collect();
    stores.sort();
    stores.dedup();
    let disks = seen
        .stores
        .iter()
        .map(|(d, l)| format!("{d} ({l})"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut wrong = Vec::new();
    let mut dirs = Vec::new();
    for want_dir in DIRS {
        match seen.dirs.iter().find(|(p, ..)| p == want_dir) {
            None => wrong.push(format!("{want_dir}: not reported")),
            Some((p, dev, lvl, members)) => {
                let on = if lvl == "none" {
                    format!("{p} on {dev} (not an md array)")
                } else {
                    format!("{p} on {dev} ({lvl} of {})", members.join(" "))
                };
                if lvl != level || members != &stores {
                    wrong.push(on.clone());
                }
                dirs.push(on);
            }
        }
    }
    let passed = !stores.is_empty() && wrong.is_empty();
    let actual = if stores.is_empty() {
        format!(
            "no instance-store disk under /dev/disk/by-id; {}",
            if dirs.is_empty() {
                "no directory reported".to_string()
            } else {
                dirs.join("; ")
            }
        )
    } else if passed {
        format!("instance store {disks}; {}", dirs.join("; "))
    } else {
        format!("instance store {disks}; wrong: {}", wrong.join("; "))
    };
    Check::new(name, passed, expected, actual)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARRAY: &str = "store sda ata-Amazon_EC2_NVMe_Instance_Storage_AWS0\n\
                         store sdb ata-Amazon_EC2_NVMe_Instance_Storage_AWS1\n\
                         dir /var/lib/kubelet md127 raid0 sdb sda \n\
                         dir /var/lib/containerd md127 raid0 sda sdb \n\
                         dir /var/log/pods md127 raid0 sda sdb \n";

    #[test]
    fn every_directory_on_a_raid0_of_every_disk_passes() {
        let c = check("n/local storage".into(), LocalStorageExpectation::Raid0, ARRAY);
        assert!(c.passed, "{}", c.actual);
        assert!(
            c.actual.contains("/var/lib/kubelet on md127 (raid0 of sda sdb)"),
            "{}",
            c.actual
        );
        assert!(!check("n/x".into(), LocalStorageExpectation::Raid10, ARRAY).passed);
    }

    #[test]
    fn a_directory_left_on_the_root_or_a_disk_left_out_fails_naming_it() {
        let root = ARRAY.replace(
            "dir /var/lib/containerd md127 raid0 sda sdb",
            "dir /var/lib/containerd vda none",
        );
        let c = check("n/x".into(), LocalStorageExpectation::Raid0, &root);
        assert!(!c.passed);
        assert!(
            c.actual.contains("wrong: /var/lib/containerd on vda (not an md array)"),
            "{}",
            c.actual
        );
        let extra = format!("store sdc ata-Amazon_EC2_NVMe_Instance_Storage_AWS2\n{ARRAY}");
        assert!(!check("n/x".into(), LocalStorageExpectation::Raid0, &extra).passed);
    }

    #[test]
    fn no_instance_store_proves_nothing() {
        let none = "dir /var/lib/kubelet vda none \ndir /var/lib/containerd vda none \ndir /var/log/pods vda none \n";
        let c = check("n/x".into(), LocalStorageExpectation::Raid0, none);
        assert!(!c.passed);
        assert!(c.actual.starts_with("no instance-store disk"), "{}", c.actual);
        assert!(!check("n/x".into(), LocalStorageExpectation::Raid0, "").passed);
    }
}
