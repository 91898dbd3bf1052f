//! Where a node's CPU goes: its cgroup tree, read from outside the node (a container's from the host's cgroupfs,
//! a VM guest's through its agent), each unit's CPU put in one part: the real parts an instance of the AMI runs
//! too (the kubelet, containerd, the bootstrap, the pods), the node's own system (systemd and the other units),
//! and what nodejoin runs in the node (its execs, its units, the entrypoint). Readings taken at phase ends give
//! the profile of each phase. systemd gives each unit a cgroup in the cgroup v2 hierarchy (the `unified` one beside
//! the v1 hierarchies on a hybrid host), where the kernel counts every cgroup's CPU.
use std::path::{Path, PathBuf};
use std::time::Duration;

mod guest;
pub use guest::guest_listing_script;

/// The cgroup, under a node's own, that nodejoin's execs move themselves into ([`exec_wrapper`]).
pub const EXEC_CGROUP: &str = "nodejoin.exec";
/// The cgroup, under a node's own, in which the harness runs a group's `bootstrap.sh` (the real bootstrap, not
/// nodejoin's own work).
pub const BOOTSTRAP_CGROUP: &str = "nodejoin.bootstrap";

/// At most this many cgroups are read from a node's tree: the node creates them, and may create many.
const MAX_CGROUPS: usize = 512;
/// A cgroup's name longer than this is cut (in a report it is only a label).
const MAX_NAME: usize = 96;

/// What part of a node a cgroup's CPU belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    Kubelet,
    Containerd,
    /// The bootstrap: cloud-init's stages, nodeadm's units, a `bootstrap.sh` the harness ran, and what they ran
    /// (the AWS CLI, scripts).
    Bootstrap,
    /// The pods' containers (`kubepods`).
    Pods,
    /// systemd and every other unit of the node's own system.
    System,
    /// What nodejoin runs inside the node: its execs (probes, reads), its units, its entrypoint.
    Nodejoin,
}

impl Part {
    pub const ALL: [Part; 6] = [
        Part::Kubelet,
        Part::Containerd,
        Part::Bootstrap,
        Part::Pods,
        Part::System,
        Part::Nodejoin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Part::Kubelet => "kubelet",
            Part::Containerd => "containerd",
            Part::Bootstrap => "bootstrap",
            Part::Pods => "pods",
            Part::System => "system",
            Part::Nodejoin => "nodejoin",
        }
    }

    /// One of the parts whose cost is the node's floor: what an instance of the AMI spends to join.
    pub fn real(self) -> bool {
        matches!(self, Part::Kubelet | Part::Containerd | Part::Bootstrap | Part::Pods)
    }

    /// The part of a cgroup by its own name (a unit's, a slice's), at depth 1 (under the node's root) or 2.
    fn of(name: &str) -> Part {
        match name {
            "kubelet.service" => Part::Kubelet,
            "containerd.service" => Part::Containerd,
            BOOTSTRAP_CGROUP => Part::Bootstrap,
            EXEC_CGROUP => Part::Nodejoin,
            n if n.starts_with("kubepods") => Part::Pods,
            // nodejoin's units, and a VM guest's agent, through which the harness runs its execs there.
            n if n.starts_with("nodejoin-") || n == "qemu-guest-agent.service" => Part::Nodejoin,
            // cloud-init's stages (cloud-init-local, cloud-init, cloud-config, cloud-final; cloud-init-main and
            // cloud-init-network in cloud-init 24+) and nodeadm's units.
            n if n.ends_with(".service") && (n.starts_with("cloud-") || n.starts_with("nodeadm-")) => Part::Bootstrap,
            _ => Part::System,
        }
    }
}

/// One reading of a node's cgroup tree: each cgroup's CPU (its descendants' included), by path from the node's
/// root (`""` the root itself), to depth 2.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub cgroups: Vec<(String, Duration)>,
    /// The part of the root's own CPU: nodejoin's in a container (its entrypoint, its execs' start), the
    /// kernel's (`System`) in a VM guest, whose root cgroup counts the kernel's own threads.
    pub root: Part,
}

impl Default for Reading {
    fn default() -> Self {
        Reading {
            cgroups: Vec::new(),
            root: Part::Nodejoin,
        }
    }
}

/// CPU by part.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Profile {
    pub parts: [Duration; 6],
}

impl Profile {
    pub fn get(&self, p: Part) -> Duration {
        self.parts[p as usize]
    }

    pub fn total(&self) -> Duration {
        self.parts.iter().sum()
    }

    /// The real parts' own CPU: the node's floor.
    pub fn real(&self) -> Duration {
        Part::ALL.iter().filter(|p| p.real()).map(|p| self.get(*p)).sum()
    }

    /// The node's CPU as a multiple of its real parts' own; `None` when they used none.
    pub fn ratio(&self) -> Option<f64> {
        let real = self.real().as_secs_f64();
        (real > 0.0).then(|| self.total().as_secs_f64() / real)
    }

    /// nodejoin's share of the whole.
    pub fn nodejoin_share(&self) -> Option<f64> {
        let total = self.total().as_secs_f64();
        (total > 0.0).then(|| self.get(Part::Nodejoin).as_secs_f64() / total)
    }

    /// What was used after `earlier` (a reading's profile taken before this one).
    pub fn since(&self, earlier: &Profile) -> Profile {
        let mut parts = [Duration::ZERO; 6];
        for (i, d) in parts.iter_mut().enumerate() {
            *d = self.parts[i].saturating_sub(earlier.parts[i]);
        }
        Profile { parts }
    }

    /// `kubelet 0.40s | containerd 0.31s | ...`, parts that used nothing left out.
    pub fn line(&self) -> String {
        Part::ALL
            .iter()
            .filter(|p| !self.get(**p).is_zero())
            .map(|p| format!("{} {:.2}s", p.name(), self.get(*p).as_secs_f64()))
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

impl Reading {
    /// The root's CPU: the node's whole.
    pub fn total(&self) -> Option<Duration> {
        self.cgroups.iter().find(|(p, _)| p.is_empty()).map(|(_, d)| *d)
    }

    /// Each cgroup's own CPU (its usage less its children's) put in its part. A depth-1 cgroup's own CPU is that
    /// of its units that have ended (systemd removes their cgroups; the kernel keeps their CPU in the parent):
    /// it goes to the slice's part. The root's own is the entrypoint's and any exec that did not move: nodejoin's.
    pub fn profile(&self) -> Profile {
        let mut parts = [Duration::ZERO; 6];
        for (_, part, own) in self.own() {
            parts[part as usize] += own;
        }
        Profile { parts }
    }

    /// The cgroups whose own CPU is the most, at most `n`, each with its part: `system.slice` stands for its
    /// units that ended unseen, the root (`/`) for what ran in no cgroup of its own.
    pub fn top(&self, n: usize) -> Vec<(String, Part, Duration)> {
        let mut own: Vec<_> = self.own().into_iter().filter(|(_, _, d)| !d.is_zero()).collect();
        own.sort_by_key(|o| std::cmp::Reverse(o.2));
        own.truncate(n);
        own.into_iter()
            .map(|(p, part, d)| (if p.is_empty() { "/".to_string() } else { p.to_string() }, part, d))
            .collect()
    }

    /// Each cgroup's own CPU and part (a cgroup whose part its name decides at depth 1 taken whole).
    fn own(&self) -> Vec<(&str, Part, Duration)> {
        let children = |path: &str| -> Duration {
            self.cgroups
                .iter()
                .filter(|(p, _)| parent(p) == Some(path))
                .map(|(_, d)| *d)
                .sum()
        };
        let taken_whole = |name: &str| matches!(Part::of(name), Part::Pods | Part::Nodejoin | Part::Bootstrap);
        let mut out = Vec::new();
        for (path, used) in &self.cgroups {
            let depth = if path.is_empty() {
                0
            } else {
                path.matches('/').count() + 1
            };
            if depth == 2 && path.split('/').next().is_some_and(taken_whole) {
                continue;
            }
            let own = if (depth == 1 && taken_whole(path)) || depth == 2 {
                *used
            } else {
                used.saturating_sub(children(path))
            };
            let part = match depth {
                0 => self.root,
                _ => Part::of(path.rsplit('/').next().unwrap_or(path)),
            };
            out.push((path.as_str(), part, own));
        }
        out
    }

    /// Reads the tree under `root` (a cgroup v1 `cpuacct` directory or a cgroup v2 one), to depth 2, at most
    /// [`MAX_CGROUPS`] cgroups. `None` when the root itself cannot be read.
    pub fn read(root: &Path) -> Option<Reading> {
        let mut cgroups = vec![(String::new(), usage(root)?)];
        let mut dirs = vec![(String::new(), root.to_path_buf(), 0)];
        while let Some((rel, dir, depth)) = dirs.pop() {
            if depth == 2 {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for e in entries.flatten() {
                if cgroups.len() >= MAX_CGROUPS {
                    return Some(Reading {
                        cgroups,
                        root: Part::Nodejoin,
                    });
                }
                // cgroupfs holds no links; a directory is a cgroup.
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = label(&e.file_name().to_string_lossy());
                let path = if rel.is_empty() { name } else { format!("{rel}/{name}") };
                if let Some(used) = usage(&e.path()) {
                    cgroups.push((path.clone(), used));
                    dirs.push((path, e.path(), depth + 1));
                }
            }
        }
        Some(Reading {
            cgroups,
            root: Part::Nodejoin,
        })
    }
}

/// A node's readings over time. systemd removes a unit's cgroup once the unit has ended (cloud-init's stages,
/// nodeadm's), and its CPU stays only in its slice's: a unit seen before keeps the usage it was last seen with.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    seen: std::collections::BTreeMap<String, Duration>,
}

impl Tracker {
    /// Notes the units of `r` (depth 2) and their usage.
    pub fn observe(&mut self, r: &Reading) {
        for (path, used) in &r.cgroups {
            if path.matches('/').count() == 1 && (self.seen.len() < MAX_CGROUPS || self.seen.contains_key(path)) {
                let last = self.seen.entry(path.clone()).or_default();
                *last = (*last).max(*used);
            }
        }
    }

    /// `r` with each unit seen before and gone since put back at its last usage.
    pub fn complete(&mut self, mut r: Reading) -> Reading {
        self.observe(&r);
        for (path, used) in &self.seen {
            if !r.cgroups.iter().any(|(p, _)| p == path) {
                r.cgroups.push((path.clone(), *used));
            }
        }
        r
    }
}

/// `path`'s parent (`""` for a depth-1 path); `None` for the root.
fn parent(path: &str) -> Option<&str> {
    if path.is_empty() {
        return None;
    }
    Some(path.rsplit_once('/').map(|(p, _)| p).unwrap_or(""))
}

/// A cgroup's name as a report label: printable, cut at [`MAX_NAME`] characters.
fn label(name: &str) -> String {
    name.chars().filter(|c| !c.is_control()).take(MAX_NAME).collect()
}

/// A cgroup directory's CPU: v1's `cpuacct.usage` (nanoseconds), or v2's `cpu.stat` `usage_usec`.
fn usage(dir: &Path) -> Option<Duration> {
    if let Ok(s) = std::fs::read_to_string(dir.join("cpuacct.usage")) {
        return s.trim().parse().ok().map(Duration::from_nanos);
    }
    let stat = std::fs::read_to_string(dir.join("cpu.stat")).ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .map(Duration::from_micros)
}

/// The host directory of the cgroup a container's init process (`pid`, as the engine reports it) was started
/// in: in the cgroup v2 hierarchy (the whole tree on a v2 host, `unified` beside the v1 ones on a hybrid host),
/// where systemd gives every unit a cgroup and the kernel counts each one's CPU whatever the controllers; else in
/// the v1 `cpuacct` hierarchy. systemd inside moves itself to `init.scope`, which is cut off. `None` unless the
/// path names `container_id` (the node cannot point the host elsewhere) and exists.
pub fn container_root(pid: i64, container_id: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (v1, v2) = cgroup_lines(&text);
    let (mount, rel) = match (mount_of(&mounts, "cgroup2", None), v2) {
        (Some(mount), Some(rel)) if !rel.is_empty() && rel != "/" => (mount, rel),
        _ => (mount_of(&mounts, "cgroup", Some("cpuacct"))?, v1?),
    };
    let rel = rel.strip_suffix("/init.scope").unwrap_or(rel).trim_start_matches('/');
    if container_id.is_empty() || !rel.contains(container_id) || rel.split('/').any(|s| s == "..") {
        return None;
    }
    let dir = mount.join(rel);
    dir.is_dir().then_some(dir)
}

/// The `cpuacct` line's path and the cgroup v2 line's (`0::`) in `/proc/<pid>/cgroup`.
fn cgroup_lines(text: &str) -> (Option<&str>, Option<&str>) {
    let mut v1 = None;
    let mut v2 = None;
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if controllers.split(',').any(|c| c == "cpuacct") {
            v1 = Some(path);
        } else if controllers.is_empty() {
            v2 = Some(path);
        }
    }
    (v1, v2)
}

/// Where the mount table (`/proc/self/mountinfo`) mounts a filesystem of type `fs` (with the super option
/// `option`, when given).
fn mount_of(mountinfo: &str, fs: &str, option: Option<&str>) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mut post = post.split(' ');
        let (kind, _src, opts) = (post.next()?, post.next()?, post.next()?);
        let point = pre.split(' ').nth(4)?;
        let wanted = kind == fs && option.is_none_or(|o| opts.split(',').any(|x| x == o));
        wanted.then(|| PathBuf::from(point))
    })
}

/// `cmd` wrapped so that it runs in the node's `cgroup` (a direct child of the node's root, made on first use)
/// for the node's CPU profile; the command is run as given (exec) when the cgroup cannot be joined.
pub fn exec_wrapper<'a>(cgroup: &'a str, cmd: &[&'a str]) -> Vec<&'a str> {
    let mut out = vec!["sh", "-c", EXEC_SCRIPT, cgroup];
    out.extend_from_slice(cmd);
    out
}

/// Joins `$0` in the hierarchy [`container_root`] reads (cgroup v2's: `/sys/fs/cgroup/unified` on a hybrid host,
/// `/sys/fs/cgroup` on a v2 one; else v1's `cpuacct`), then runs the command.
const EXEC_SCRIPT: &str = "for r in /sys/fs/cgroup/unified /sys/fs/cgroup /sys/fs/cgroup/cpuacct; do \
     [ -e \"$r/cgroup.procs\" ] || continue; [ -d \"$r/$0\" ] || mkdir \"$r/$0\" 2>/dev/null; \
     echo $$ > \"$r/$0/cgroup.procs\" 2>/dev/null; break; done; exec \"$@\"";

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn reading(rows: &[(&str, u64)]) -> Reading {
        Reading {
            cgroups: rows.iter().map(|(p, d)| (p.to_string(), ms(*d))).collect(),
            root: Part::Nodejoin,
        }
    }

    #[test]
    fn each_cgroup_goes_to_its_part_and_nothing_twice() {
        let r = reading(&[
            ("", 3000),
            ("init.scope", 200),
            ("system.slice", 1500),
            ("system.slice/cloud-final.service", 600),
            ("system.slice/nodeadm-run.service", 100),
            ("system.slice/systemd-journald.service", 50),
            ("system.slice/nodejoin-imds-redirect.service", 30),
            ("runtime.slice", 700),
            ("runtime.slice/kubelet.service", 400),
            ("runtime.slice/containerd.service", 300),
            ("kubepods.slice", 120),
            ("kubepods.slice/kubepods-besteffort.slice", 100),
            ("nodejoin.exec", 200),
            ("nodejoin.bootstrap", 80),
        ]);
        let p = r.profile();
        assert_eq!(p.get(Part::Kubelet), ms(400));
        assert_eq!(p.get(Part::Containerd), ms(300));
        assert_eq!(p.get(Part::Bootstrap), ms(780));
        assert_eq!(p.get(Part::Pods), ms(120));
        // init 200, journald 50, system.slice's ended units 1500 - 780 = 720
        assert_eq!(p.get(Part::System), ms(970));
        // imds redirect 30, execs 200, root's own 3000 - (200+1500+700+120+200+80) = 200
        assert_eq!(p.get(Part::Nodejoin), ms(430));
        assert_eq!(p.total(), ms(3000), "the parts add up to the root");
        assert_eq!(p.real(), ms(1600));
        assert!((p.ratio().unwrap() - 1.875).abs() < 1e-9);
        let top = r.top(2);
        assert_eq!(top[0], ("system.slice".to_string(), Part::System, ms(720)));
        assert_eq!(
            top[1],
            ("system.slice/cloud-final.service".to_string(), Part::Bootstrap, ms(600))
        );
    }

    #[test]
    fn a_phase_is_the_difference_of_two_readings() {
        let a = reading(&[("", 1000), ("nodejoin.exec", 1000)]).profile();
        let b = reading(&[("", 1500), ("nodejoin.exec", 1100), ("kubepods.slice", 400)]).profile();
        let d = b.since(&a);
        assert_eq!(d.get(Part::Nodejoin), ms(100));
        assert_eq!(d.get(Part::Pods), ms(400));
        assert_eq!(d.line(), "pods 0.40s | nodejoin 0.10s");
    }

    #[test]
    fn an_ended_unit_keeps_its_part() {
        let mut t = Tracker::default();
        t.observe(&reading(&[
            ("", 500),
            ("system.slice", 400),
            ("system.slice/cloud-final.service", 300),
        ]));
        // cloud-final ended (its cgroup removed): 350 ms of it in the slice's own now
        let r = t.complete(reading(&[("", 700), ("system.slice", 450)]));
        let p = r.profile();
        assert_eq!(p.get(Part::Bootstrap), ms(300));
        assert_eq!(p.get(Part::System), ms(150));
        assert_eq!(p.total(), ms(700));
    }

    #[test]
    fn the_host_finds_a_container_cgroup_only_under_its_id() {
        let text = "12:pids:/docker/abc/init.scope\n4:cpu,cpuacct:/docker/abc/init.scope\n0::/docker/abc/init.scope\n";
        assert_eq!(
            cgroup_lines(text),
            (Some("/docker/abc/init.scope"), Some("/docker/abc/init.scope"))
        );
        assert_eq!(container_root(i64::MAX, "abc"), None, "no such process");
    }

    #[test]
    fn the_hierarchy_is_found_in_the_mount_table() {
        let mountinfo = "30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate\n\
                         33 25 0:29 / /sys/fs/cgroup/cpuacct rw,nosuid shared:13 - cgroup cgroup rw,cpuacct\n";
        assert_eq!(
            mount_of(mountinfo, "cgroup2", None),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            mount_of(mountinfo, "cgroup", Some("cpuacct")),
            Some(PathBuf::from("/sys/fs/cgroup/cpuacct"))
        );
        assert_eq!(mount_of(mountinfo, "cgroup", Some("memory")), None);
    }

    #[test]
    fn names_are_labels() {
        assert_eq!(label("a\nb"), "ab");
        assert_eq!(label(&"x".repeat(500)).len(), MAX_NAME);
    }
}
