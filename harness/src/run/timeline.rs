//! A node's timeline, and figures over the nodes of a scenario (most useful for large groups): p50/p95/max of
//! each node's start, its bootstrap, and its join, and how fast the nodes called the fakes.
use std::time::Duration;

/// Timeline of one node; the join milestones are measured from the moment the bootstrap finished (when the
/// kubelet was started).
#[derive(Debug, Clone, Default)]
pub struct NodeTimeline {
    pub node_name: String,
    /// `<group>-<index>` from 0: the node's name in reports read across runs (JUnit, annotations), where its
    /// DNS name, made from an address the run was given, would differ between matrix cells.
    pub label: String,
    /// Its node group's name, as the scenario writes it.
    pub group: String,
    pub instance_id: String,
    pub ip: String,
    /// The node is a machine (`runtime: vm`): it boots as one, so its reports say "machine up", not "container up".
    pub machine: bool,
    pub container_up: Option<Duration>,
    pub bootstrap: Option<Duration>,
    pub client_csr_issued: Option<Duration>,
    pub registered: Option<Duration>,
    pub ready: Option<Duration>,
    pub serving_csr_issued: Option<Duration>,
    pub serving_cert_live: Option<Duration>,
    /// CPU time the node's container used from its start until its join was settled (the end of `join observed`).
    pub cpu: Option<Duration>,
    /// Where that CPU went, phase by phase (`boot`, `bootstrap`, `join`), by part ([`crate::node::cpu`]): empty
    /// when the node's cgroup tree could not be read.
    pub cpu_profile: Vec<(String, crate::node::cpu::Profile)>,
    /// The cgroups that used the most of it (their own CPU, with their part), from the last reading.
    pub cpu_top: Vec<(String, crate::node::cpu::Part, Duration)>,
    /// When `container_up` was timed from (the node's turn to boot), from the start of the scenario's pipeline.
    pub boot_at: Option<Duration>,
    /// When the join milestones are measured from (the kubelet's start, once the bootstrap finished), from the
    /// start of the scenario's pipeline. With `boot_at`, what puts every node on one clock ([`Placed`]).
    pub kubelet_at: Option<Duration>,
}

/// A node's milestones on the scenario's clock (offsets from the start of its pipeline), for the pictures of a
/// join; each is absent when the node never got there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Placed {
    /// The container's boot: from its turn to start until systemd was up.
    pub up: Option<(Duration, Duration)>,
    /// The bootstrap: from its start until the kubelet started.
    pub bootstrap: Option<(Duration, Duration)>,
    pub client_csr: Option<Duration>,
    pub registered: Option<Duration>,
    pub ready: Option<Duration>,
    pub serving_csr: Option<Duration>,
    pub serving_live: Option<Duration>,
}

impl Placed {
    /// The latest milestone reached.
    pub fn end(&self) -> Option<Duration> {
        [
            self.up.map(|(_, e)| e),
            self.bootstrap.map(|(_, e)| e),
            self.client_csr,
            self.registered,
            self.ready,
            self.serving_csr,
            self.serving_live,
        ]
        .into_iter()
        .flatten()
        .max()
    }
}

impl NodeTimeline {
    /// Records where the node's clocks started on the scenario's (`start`): its boot (`booted`) and its kubelet
    /// (`kubelet`). The durations above are relative to these; the anchors make them absolute.
    pub fn anchor(&mut self, start: std::time::Instant, booted: std::time::Instant, kubelet: std::time::Instant) {
        self.boot_at = Some(booted.saturating_duration_since(start));
        self.kubelet_at = Some(kubelet.saturating_duration_since(start));
    }

    /// The whole profile: every phase's parts added up.
    pub fn cpu_parts(&self) -> Option<crate::node::cpu::Profile> {
        let mut whole = crate::node::cpu::Profile::default();
        for (_, p) in &self.cpu_profile {
            for (i, d) in whole.parts.iter_mut().enumerate() {
                *d += p.parts[i];
            }
        }
        (!self.cpu_profile.is_empty()).then_some(whole)
    }

    /// What its boot milestone is called: a container's start, or a machine's.
    pub fn up_label(&self) -> &'static str {
        if self.machine {
            "machine up"
        } else {
            "container up"
        }
    }

    /// The milestones on the scenario's clock; none without the anchors ([`Self::anchor`]).
    pub fn placed(&self) -> Placed {
        let after_kubelet = |d: Option<Duration>| Some(self.kubelet_at? + d?);
        Placed {
            up: self.boot_at.zip(self.container_up).map(|(b, d)| (b, b + d)),
            // The kubelet starts the moment the bootstrap is timed to have finished.
            bootstrap: self
                .kubelet_at
                .zip(self.bootstrap)
                .map(|(k, d)| (k.saturating_sub(d), k)),
            client_csr: after_kubelet(self.client_csr_issued),
            registered: after_kubelet(self.registered),
            ready: after_kubelet(self.ready),
            serving_csr: after_kubelet(self.serving_csr_issued),
            serving_live: after_kubelet(self.serving_cert_live),
        }
    }
}

pub fn secs(d: Duration) -> String {
    format!("{:.2}s", d.as_secs_f64())
}

/// A phase recorded before the step it happened within (the control plane's creation, inside `boot`): on a
/// picture it starts where that step starts instead of following the phase before it.
pub const PHASE_CONTROL_PLANE_READY: &str = "control plane ready";

/// A scenario phase on the scenario's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlacedPhase<'a> {
    pub name: &'a str,
    pub start: Duration,
    pub took: Duration,
    /// Happened within the step after it ([`PHASE_CONTROL_PLANE_READY`]).
    pub within: bool,
}

/// The phases on the scenario's clock: the steps run one after the other, so each starts where the one before
/// ended (a wait under 10 ms is not recorded: the picture may be early by as much).
pub fn place_phases(phases: &[(String, Duration)]) -> Vec<PlacedPhase<'_>> {
    let mut at = Duration::ZERO;
    let mut out = Vec::with_capacity(phases.len());
    for (name, took) in phases {
        let within = name == PHASE_CONTROL_PLANE_READY;
        out.push(PlacedPhase {
            name,
            start: at,
            took: *took,
            within,
        });
        if !within {
            at += *took;
        }
    }
    out
}

/// The phases in which the nodes call the fakes: the call rate is taken over them. (Their steps in
/// `run::actions` are named with these.)
pub const PHASE_BOOTSTRAP: &str = "bootstrap";
pub const PHASE_JOIN_OBSERVED: &str = "join observed";

/// Reports of this many nodes or more carry the aggregate lines.
pub const AGGREGATE_FROM_NODES: usize = 3;

/// The `p`th percentile (nearest rank) of `values`, which must be sorted.
fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

/// The boot milestone's name over a scenario's nodes: "machine up" when all are machines, "node up" when they mix.
fn up_label(nodes: &[NodeTimeline]) -> &'static str {
    match (nodes.iter().all(|n| n.machine), nodes.iter().any(|n| n.machine)) {
        (true, _) => "machine up",
        (false, true) => "node up",
        (false, false) => "container up",
    }
}

/// The join's name over a scenario's nodes, from the start its boot milestone names.
fn joined_label(nodes: &[NodeTimeline]) -> &'static str {
    match up_label(nodes) {
        "machine up" => "joined (machine start to Ready)",
        "node up" => "joined (node start to Ready)",
        _ => "joined (container start to Ready)",
    }
}

/// `what p50 X p95 Y max Z (n of N)` for one milestone, from the nodes that reached it.
fn line(what: &str, nodes: &[NodeTimeline], f: impl Fn(&NodeTimeline) -> Option<Duration>) -> String {
    let mut values: Vec<Duration> = nodes.iter().filter_map(f).collect();
    values.sort();
    let show = |d: Option<Duration>| d.map(secs).unwrap_or_else(|| "-".into());
    format!(
        "{what} p50 {} p95 {} max {} ({} of {})",
        show(percentile(&values, 50.0)),
        show(percentile(&values, 95.0)),
        show(values.last().copied()),
        values.len(),
        nodes.len()
    )
}

/// What the aggregate lines are computed from.
pub struct Figures<'a> {
    pub nodes: &'a [NodeTimeline],
    /// Calls the nodes made to the fakes, and over how long (the bootstrap and the join).
    pub calls: usize,
    pub calls_window: Duration,
    pub control_plane_rss_kib: u64,
}

impl Figures<'_> {
    /// The aggregate lines, when there are `min_nodes` nodes or more.
    pub fn lines(&self, min_nodes: usize) -> Vec<String> {
        let nodes = self.nodes;
        if nodes.len() < min_nodes {
            return Vec::new();
        }
        let mut out = vec![
            line(up_label(nodes), nodes, |n| n.container_up),
            line("bootstrap done", nodes, |n| n.bootstrap),
            line("Ready after the kubelet started", nodes, |n| n.ready),
            line("serving cert live after the kubelet started", nodes, |n| {
                n.serving_cert_live
            }),
            // From the node's start to Ready: what a user waits for, per node.
            line(joined_label(nodes), nodes, |n| {
                Some(n.container_up? + n.bootstrap? + n.ready?)
            }),
        ];
        let cpu: Duration = nodes.iter().filter_map(|n| n.cpu).sum();
        if !cpu.is_zero() {
            out.push(format!("{}, {} in all", line("CPU used", nodes, |n| n.cpu), secs(cpu)));
        }
        if self.calls > 0 && !self.calls_window.is_zero() {
            out.push(format!(
                "fake calls: {} in {} ({:.1}/s)",
                self.calls,
                secs(self.calls_window),
                self.calls as f64 / self.calls_window.as_secs_f64()
            ));
        }
        if self.control_plane_rss_kib > 0 {
            out.push(format!("control-plane RSS {} MiB", self.control_plane_rss_kib / 1024));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ready_ms: u64) -> NodeTimeline {
        NodeTimeline {
            container_up: Some(Duration::from_secs(2)),
            bootstrap: Some(Duration::from_secs(1)),
            ready: Some(Duration::from_millis(ready_ms)),
            ..Default::default()
        }
    }

    #[test]
    fn cpu_line_only_when_measured() {
        let mut nodes: Vec<NodeTimeline> = (1..=3).map(|i| node(i * 1000)).collect();
        let figures = |nodes: &[NodeTimeline]| {
            Figures {
                nodes,
                calls: 0,
                calls_window: Duration::ZERO,
                control_plane_rss_kib: 0,
            }
            .lines(3)
        };
        assert!(!figures(&nodes).iter().any(|l| l.starts_with("CPU used")));
        for (i, n) in nodes.iter_mut().enumerate() {
            n.cpu = Some(Duration::from_secs(i as u64 + 2));
        }
        let lines = figures(&nodes);
        let cpu = lines.iter().find(|l| l.starts_with("CPU used")).expect("a CPU line");
        assert_eq!(cpu, "CPU used p50 3.00s p95 4.00s max 4.00s (3 of 3), 9.00s in all");
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=20).map(Duration::from_secs).collect();
        assert_eq!(percentile(&v, 50.0), Some(Duration::from_secs(10)));
        assert_eq!(percentile(&v, 95.0), Some(Duration::from_secs(19)));
        assert_eq!(percentile(&v, 100.0), Some(Duration::from_secs(20)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn counts_nodes_that_never_got_there() {
        let mut nodes: Vec<NodeTimeline> = (1..=4).map(|i| node(i * 1000)).collect();
        nodes.push(NodeTimeline::default());
        let figures = Figures {
            nodes: &nodes,
            calls: 0,
            calls_window: Duration::ZERO,
            control_plane_rss_kib: 0,
        };
        let found = figures.lines(3);
        let ready = found
            .iter()
            .find(|l| l.starts_with("Ready"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            ready,
            "Ready after the kubelet started p50 2.00s p95 4.00s max 4.00s (4 of 5)"
        );
        let joined = found
            .iter()
            .find(|l| l.starts_with("joined"))
            .cloned()
            .unwrap_or_default();
        assert!(joined.contains("max 7.00s (4 of 5)"), "{joined}");
        assert!(figures.lines(10).is_empty());
    }

    #[test]
    fn a_machines_boot_is_called_a_machines() {
        let machine = NodeTimeline {
            machine: true,
            ..node(1000)
        };
        assert_eq!(
            (machine.up_label(), node(1000).up_label()),
            ("machine up", "container up")
        );
        let first = |nodes: &[NodeTimeline]| {
            let f = Figures {
                nodes,
                calls: 0,
                calls_window: Duration::ZERO,
                control_plane_rss_kib: 0,
            };
            let lines = f.lines(1);
            (lines[0].clone(), lines[4].clone())
        };
        let (up, joined) = first(&[machine.clone(), machine.clone()]);
        assert!(
            up.starts_with("machine up p50") && joined.starts_with("joined (machine start"),
            "{up} / {joined}"
        );
        let (up, joined) = first(&[machine, node(1000)]);
        assert!(
            up.starts_with("node up p50") && joined.starts_with("joined (node start"),
            "{up} / {joined}"
        );
        assert!(first(&[node(1000)]).0.starts_with("container up p50"));
    }

    #[test]
    fn milestones_are_placed_on_the_scenarios_clock() {
        let start = std::time::Instant::now();
        let mut n = NodeTimeline {
            container_up: Some(Duration::from_secs(2)),
            bootstrap: Some(Duration::from_secs(3)),
            client_csr_issued: Some(Duration::from_millis(500)),
            ready: Some(Duration::from_secs(4)),
            ..Default::default()
        };
        assert_eq!(n.placed(), Placed::default(), "nothing placed without the anchors");
        n.anchor(start, start + Duration::from_secs(10), start + Duration::from_secs(20));
        let p = n.placed();
        let s = Duration::from_secs;
        assert_eq!(p.up, Some((s(10), s(12))));
        assert_eq!(p.bootstrap, Some((s(17), s(20))), "it ended when the kubelet started");
        assert_eq!(p.client_csr, Some(Duration::from_millis(20_500)));
        assert_eq!((p.ready, p.registered), (Some(s(24)), None));
        assert_eq!(p.end(), Some(s(24)));
    }

    #[test]
    fn phases_follow_one_another_but_the_control_plane_is_within_boot() {
        let phases: Vec<(String, Duration)> = [
            ("provision", 5),
            (PHASE_CONTROL_PLANE_READY, 3),
            ("boot", 4),
            ("bootstrap", 2),
        ]
        .map(|(n, s)| (n.to_string(), Duration::from_secs(s)))
        .to_vec();
        let placed: Vec<(&str, u64, bool)> = place_phases(&phases)
            .iter()
            .map(|p| (p.name, p.start.as_secs(), p.within))
            .collect();
        assert_eq!(
            placed,
            [
                ("provision", 0, false),
                (PHASE_CONTROL_PLANE_READY, 5, true),
                ("boot", 5, false),
                ("bootstrap", 9, false)
            ]
        );
    }
}
