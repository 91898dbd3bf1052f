//! `expect.localStorage`: the instance-store disks are one md array of the level the scenario names, and the
//! directories the AMI's `setup-local-disks` moves onto it by default (the kubelet's, containerd's,
//! `/var/log/pods`) are mounted from it. The disks are found as the AMI finds them, by EC2's model in udev's
//! `/dev/disk/by-id` names, and must be as many as the instance type has, so the check passes only on what the
//! bootstrap built of all of them.
use super::Check;
use crate::scenario::expect::LocalStorageExpectation;

/// The directories the array must hold: the script's defaults. nodeadm's `disabledMounts` leaves some off, which
/// this check does not follow (it fails such a node, naming the directory).
pub const DIRS: &[&str] = &["/var/lib/kubelet", "/var/lib/containerd", "/var/log/pods"];

/// The script run in the node: one `store <device> <by-id name>` line per instance-store disk, then one
/// `dir <path> <device> <md level or none> <member devices...>` line per directory of [`DIRS`] (`?` for a
/// directory whose mount could not be read).
pub fn probe() -> String {
    let mut s = String::from(
        "for l in /dev/disk/by-id/*NVMe_Instance_Storage_*; do\n\
         \x20 [ -e \"$l\" ] || continue\n\
         \x20 case \"$l\" in *-part[0-9]*) continue ;; esac\n\
         \x20 echo \"store $(basename \"$(readlink -f \"$l\")\") ${l##*/}\"\n\
         done\n",
    );
    s.push_str(&format!("for d in {}; do\n", DIRS.join(" ")));
    s.push_str(
        "  mm=$(findmnt -n -o MAJ:MIN --target \"$d\" 2>/dev/null | head -n 1 | tr -d ' ')\n\
         \x20 if [ -z \"$mm\" ]; then echo \"dir $d ? none\"; continue; fi\n\
         \x20 dev=$(basename \"$(readlink -f \"/sys/dev/block/$mm\")\")\n\
         \x20 lvl=$(cat \"/sys/dev/block/$mm/md/level\" 2>/dev/null)\n\
         \x20 echo \"dir $d ${dev:-?} ${lvl:-none} $(ls \"/sys/dev/block/$mm/slaves\" 2>/dev/null | tr '\\n' ' ')\"\n\
         done\n",
    );
    s
}

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

/// The check from the probe's output (`Err`: why it could not run), for an instance type with `disks`
/// instance-store disks.
pub fn check(name: String, want: LocalStorageExpectation, disks: u32, out: Result<&str, String>) -> Check {
    let level = want.md_level();
    let expected = format!(
        "{} on one {level} md array of the instance's {disks} instance-store disk(s) \
         (/dev/disk/by-id/*NVMe_Instance_Storage_*)",
        DIRS.join(", ")
    );
    let out = match out {
        Ok(o) => o,
        Err(e) => return Check::new(name, false, expected, format!("the probe could not run: {e}")),
    };
    let seen = parse(out);
    let mut stores: Vec<String> = seen.stores.iter().map(|(d, _)| d.clone()).collect();
    stores.sort();
    stores.dedup();
    let mut links: Vec<String> = seen.stores.iter().map(|(d, l)| format!("{d} ({l})")).collect();
    links.sort();
    let disks_seen = format!("instance store {}", links.join(", "));
    let mut wrong = Vec::new();
    if stores.len() != disks as usize {
        wrong.push(format!("{} disk(s) found by EC2's model, not {disks}", stores.len()));
    }
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
        format!("{disks_seen}; {}", dirs.join("; "))
    } else {
        format!("{disks_seen}; wrong: {}", wrong.join("; "))
    };
    Check::new(name, passed, expected, actual)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARRAY: &str = "store sdb ata-Amazon_EC2_NVMe_Instance_Storage_AWS1\n\
                         store sda ata-Amazon_EC2_NVMe_Instance_Storage_AWS0\n\
                         dir /var/lib/kubelet md127 raid0 sdb sda \n\
                         dir /var/lib/containerd md127 raid0 sda sdb \n\
                         dir /var/log/pods md127 raid0 sda sdb \n";

    fn raid0(disks: u32, out: &str) -> Check {
        check("n/local storage".into(), LocalStorageExpectation::Raid0, disks, Ok(out))
    }

    #[test]
    fn every_directory_on_a_raid0_of_every_disk_passes() {
        let c = raid0(2, ARRAY);
        assert!(c.passed, "{}", c.actual);
        assert!(c.actual.starts_with("instance store sda (ata-"), "sorted: {}", c.actual);
        assert!(
            c.actual.contains("/var/lib/kubelet on md127 (raid0 of sda sdb)"),
            "{}",
            c.actual
        );
        assert!(!check("n/x".into(), LocalStorageExpectation::Raid10, 2, Ok(ARRAY)).passed);
    }

    #[test]
    fn a_directory_left_on_the_root_or_a_disk_left_out_fails_naming_it() {
        let root = ARRAY.replace(
            "dir /var/lib/containerd md127 raid0 sda sdb",
            "dir /var/lib/containerd vda none",
        );
        let c = raid0(2, &root);
        assert!(!c.passed);
        assert!(
            c.actual.contains("wrong: /var/lib/containerd on vda (not an md array)"),
            "{}",
            c.actual
        );
        let extra = format!("store sdc ata-Amazon_EC2_NVMe_Instance_Storage_AWS2\n{ARRAY}");
        assert!(!raid0(3, &extra).passed, "sdc is not in the array");
        // A disk udev did not name by EC2's model: the array of the one it did is not the instance's instance store.
        let one = "store sda ata-Amazon_EC2_NVMe_Instance_Storage_AWS0\n\
                   dir /var/lib/kubelet md127 raid0 sda \ndir /var/lib/containerd md127 raid0 sda \n\
                   dir /var/log/pods md127 raid0 sda \n";
        let c = raid0(2, one);
        assert!(!c.passed);
        assert!(
            c.actual.contains("1 disk(s) found by EC2's model, not 2"),
            "{}",
            c.actual
        );
    }

    #[test]
    fn no_instance_store_or_no_probe_proves_nothing_and_says_why() {
        let none = "dir /var/lib/kubelet vda none \ndir /var/lib/containerd vda none \ndir /var/log/pods vda none \n";
        let c = raid0(2, none);
        assert!(!c.passed);
        assert!(c.actual.starts_with("no instance-store disk"), "{}", c.actual);
        assert!(!raid0(2, "").passed);
        let c = check(
            "n/x".into(),
            LocalStorageExpectation::Raid0,
            2,
            Err("the VM stopped".into()),
        );
        assert!(!c.passed);
        assert_eq!(c.actual, "the probe could not run: the VM stopped");
    }

    #[test]
    fn the_probe_asks_about_every_directory() {
        let p = probe();
        for d in DIRS {
            assert!(p.contains(d), "{d}");
        }
        assert!(p.contains("*NVMe_Instance_Storage_*"));
    }
}
