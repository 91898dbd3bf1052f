//! What differs between the base and the head runs of the same scenarios, and which of those differences break a
//! check the base passed. Pure: snapshots in, a [`Comparison`] out, in a fixed order so two comparisons of the same
//! runs print the same.
use super::snapshot::{CheckOutcome, NodeFields, NodeSnapshot, ScenarioSnapshot};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How far a timing may move before it counts: both bounds must be passed, so that jitter on a short milestone
/// (under `timing_abs`) and on a long one (under `timing_rel` of it) is not reported as the bootstrap's doing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    pub timing_abs: Duration,
    pub timing_rel: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            timing_abs: Duration::from_secs(3),
            timing_rel: 0.5,
        }
    }
}

impl Thresholds {
    /// Whether a milestone moving from `base` to `head` seconds is more than noise.
    pub fn timing_differs(&self, base: f64, head: f64) -> bool {
        let delta = (head - base).abs();
        delta > self.timing_abs.as_secs_f64() && delta > self.timing_rel * base.abs()
    }
}

/// Which part of a run a difference is in; the declaration order is the order differences are listed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Aspect {
    Outcome,
    Node,
    Configz,
    KubeletArgs,
    Files,
    Calls,
    Programs,
    Timings,
    Checks,
}

impl Aspect {
    /// The heading a reader sees for this aspect.
    pub fn title(&self) -> &'static str {
        match self {
            Aspect::Outcome => "outcome",
            Aspect::Node => "Node",
            Aspect::Configz => "/configz",
            Aspect::KubeletArgs => "kubelet command line",
            Aspect::Files => "files written",
            Aspect::Calls => "AWS/IMDS calls",
            Aspect::Programs => "programs run",
            Aspect::Timings => "timings",
            Aspect::Checks => "checks",
        }
    }
}

/// One thing that is not the same on both sides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    pub scenario: String,
    /// The node's key; `None` for what belongs to the scenario (its outcome, its checks).
    pub node: Option<String>,
    pub aspect: Aspect,
    pub key: String,
    /// `None`: absent on that side.
    pub base: Option<String>,
    pub head: Option<String>,
}

/// Everything `nodejoin compare` found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Comparison {
    pub differences: Vec<Difference>,
    /// `<scenario>: <check>` for each check ok on base and failed or missing on head, and
    /// `<scenario>: outcome PASSED -> <outcome>` for each scenario that stopped passing.
    pub breaks: Vec<String>,
    /// Scenarios (or `scenario/node`) run on one side only.
    pub only_in_base: Vec<String>,
    pub only_in_head: Vec<String>,
    /// Scenarios run on both sides.
    pub compared: Vec<String>,
}

impl Comparison {
    /// Whether both sides did the same thing, as far as the snapshots show.
    pub fn is_empty(&self) -> bool {
        self.differences.is_empty() && self.only_in_base.is_empty() && self.only_in_head.is_empty()
    }

    /// Whether head loses something base had: a check or a passing outcome (the verdict for CI).
    pub fn broken(&self) -> bool {
        !self.breaks.is_empty()
    }
}

/// Compares the scenarios of `base` and `head` by name and their nodes by key. A name given twice on one side
/// keeps its last snapshot.
pub fn compare(base: &[ScenarioSnapshot], head: &[ScenarioSnapshot], t: &Thresholds) -> Comparison {
    let base: BTreeMap<&str, &ScenarioSnapshot> = base.iter().map(|s| (s.scenario.as_str(), s)).collect();
    let head: BTreeMap<&str, &ScenarioSnapshot> = head.iter().map(|s| (s.scenario.as_str(), s)).collect();
    let names: BTreeSet<&str> = base.keys().chain(head.keys()).copied().collect();
    let mut c = Comparison::default();
    for name in names {
        match (base.get(name), head.get(name)) {
            (Some(b), Some(h)) => {
                c.compared.push(name.to_string());
                scenario(b, h, t, &mut c);
            }
            (Some(_), None) => c.only_in_base.push(name.to_string()),
            (None, Some(_)) => c.only_in_head.push(name.to_string()),
            (None, None) => {}
        }
    }
    c.differences
        .sort_by(|a, b| (&a.scenario, &a.node, a.aspect, &a.key).cmp(&(&b.scenario, &b.node, b.aspect, &b.key)));
    c.only_in_base.sort();
    c.only_in_head.sort();
    c
}

/// One scenario run on both sides: its outcome, its checks, then each node.
fn scenario(b: &ScenarioSnapshot, h: &ScenarioSnapshot, t: &Thresholds, c: &mut Comparison) {
    let name = b.scenario.as_str();
    let at = At {
        scenario: name,
        node: None,
    };
    let out = &mut c.differences;
    at.push(
        out,
        Aspect::Outcome,
        "outcome",
        Some(b.outcome.clone()),
        Some(h.outcome.clone()),
    );
    if b.outcome == "PASSED" && h.outcome != "PASSED" {
        c.breaks.push(format!("{name}: outcome PASSED -> {}", h.outcome));
    }
    for check in keys(&b.checks, &h.checks) {
        let (bc, hc) = (b.checks.get(check), h.checks.get(check));
        // Marks only: what a check found also shows in its own aspect (Node, /configz…), and its wording would
        // make every run differ.
        if bc.map(|c| &c.mark) != hc.map(|c| &c.mark) {
            at.push(out, Aspect::Checks, check, bc.map(check_value), hc.map(check_value));
        }
        if bc.is_some_and(CheckOutcome::ok) && !hc.is_some_and(CheckOutcome::ok) {
            c.breaks.push(format!("{name}: {check}"));
        }
    }
    for key in keys(&b.nodes, &h.nodes) {
        match (b.nodes.get(key), h.nodes.get(key)) {
            (Some(bn), Some(hn)) => node(
                &At {
                    scenario: name,
                    node: Some(key),
                },
                bn,
                hn,
                t,
                &mut c.differences,
            ),
            (Some(_), None) => c.only_in_base.push(format!("{name}/{key}")),
            (None, Some(_)) => c.only_in_head.push(format!("{name}/{key}")),
            (None, None) => {}
        }
    }
}

/// One node present on both sides, aspect by aspect.
fn node(at: &At, b: &NodeSnapshot, h: &NodeSnapshot, t: &Thresholds, out: &mut Vec<Difference>) {
    node_fields(at, &b.node, &h.node, out);
    at.maps(out, Aspect::Configz, "", &b.configz, &h.configz, String::clone);
    at.maps(
        out,
        Aspect::KubeletArgs,
        "",
        &argv_flags(&b.kubelet_args),
        &argv_flags(&h.kubelet_args),
        String::clone,
    );
    at.maps(out, Aspect::Files, "", &b.files, &h.files, String::clone);
    at.maps(out, Aspect::Calls, "", &b.calls, &h.calls, usize::to_string);
    at.maps(out, Aspect::Programs, "", &b.programs, &h.programs, usize::to_string);
    for key in keys(&b.timings, &h.timings) {
        let (bt, ht) = (b.timings.get(key).copied(), h.timings.get(key).copied());
        let differs = match (bt, ht) {
            (Some(bt), Some(ht)) => t.timing_differs(bt, ht),
            _ => true,
        };
        if differs {
            at.push(out, Aspect::Timings, key, bt.map(seconds), ht.map(seconds));
        }
    }
}

/// The Node object's fields, keyed as a reader would look them up (`labels.<k>`, `capacity.<k>`…).
fn node_fields(at: &At, b: &NodeFields, h: &NodeFields, out: &mut Vec<Difference>) {
    let flag = |v: bool| Some(v.to_string());
    at.push(out, Aspect::Node, "registered", flag(b.registered), flag(h.registered));
    at.maps(out, Aspect::Node, "labels.", &b.labels, &h.labels, String::clone);
    at.push(
        out,
        Aspect::Node,
        "taints",
        Some(taints(&b.taints)),
        Some(taints(&h.taints)),
    );
    at.maps(out, Aspect::Node, "capacity.", &b.capacity, &h.capacity, String::clone);
    at.maps(
        out,
        Aspect::Node,
        "allocatable.",
        &b.allocatable,
        &h.allocatable,
        String::clone,
    );
    at.push(
        out,
        Aspect::Node,
        "providerID",
        b.provider_id.clone(),
        h.provider_id.clone(),
    );
}

fn taints(t: &[String]) -> String {
    if t.is_empty() {
        "(none)".to_string()
    } else {
        t.join(", ")
    }
}

/// The kubelet's argv as flag → value, so that one changed, added or moved flag is one difference (or none)
/// rather than a shifted list. `--flag=value` and `--flag value` (the next argument not being a flag) give the
/// same entry; a bare flag or a positional (the program) is keyed by itself; a repeated flag's values are joined
/// with `, ` in their order.
pub fn argv_flags(argv: &[String]) -> BTreeMap<String, String> {
    let mut flags: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    let mut args = argv.iter().peekable();
    while let Some(arg) = args.next() {
        let (key, value) = if arg.len() > 1 && arg.starts_with('-') {
            match arg.split_once('=') {
                Some((flag, value)) => (flag, value),
                None => match args.next_if(|next| !next.starts_with('-')) {
                    Some(value) => (arg.as_str(), value.as_str()),
                    None => (arg.as_str(), arg.as_str()),
                },
            }
        } else {
            (arg.as_str(), arg.as_str())
        };
        flags.entry(key.to_string()).or_default().push(value);
    }
    flags.into_iter().map(|(k, v)| (k, v.join(", "))).collect()
}

/// A check as shown: its mark and, for context, what it found on one line.
fn check_value(c: &CheckOutcome) -> String {
    let actual = c.actual.split_whitespace().collect::<Vec<_>>().join(" ");
    if actual.is_empty() {
        c.mark.clone()
    } else {
        format!("{} ({})", c.mark, truncate(&actual, 120))
    }
}

fn seconds(s: f64) -> String {
    format!("{s:.2}s")
}

/// `s` cut to at most `max` characters, the cut marked with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The keys of two maps, each once, in order.
fn keys<'a, V, W>(a: &'a BTreeMap<String, V>, b: &'a BTreeMap<String, W>) -> BTreeSet<&'a str> {
    a.keys().chain(b.keys()).map(String::as_str).collect()
}

/// Where differences are being collected: a scenario, and a node in it or not.
struct At<'a> {
    scenario: &'a str,
    node: Option<&'a str>,
}

impl At<'_> {
    /// Records `key` if its two sides differ.
    fn push(&self, out: &mut Vec<Difference>, aspect: Aspect, key: &str, base: Option<String>, head: Option<String>) {
        if base != head {
            out.push(Difference {
                scenario: self.scenario.to_string(),
                node: self.node.map(str::to_string),
                aspect,
                key: key.to_string(),
                base,
                head,
            });
        }
    }

    /// Records each key of two maps whose shown values differ, as `<prefix><key>`.
    fn maps<V>(
        &self,
        out: &mut Vec<Difference>,
        aspect: Aspect,
        prefix: &str,
        b: &BTreeMap<String, V>,
        h: &BTreeMap<String, V>,
        show: impl Fn(&V) -> String,
    ) {
        for key in keys(b, h) {
            let (bv, hv) = (b.get(key).map(&show), h.get(key).map(&show));
            self.push(out, aspect, &format!("{prefix}{key}"), bv, hv);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(mark: &str) -> CheckOutcome {
        CheckOutcome {
            mark: mark.into(),
            actual: format!("found\n  something {mark}"),
        }
    }

    fn node() -> NodeSnapshot {
        let mut n = NodeSnapshot::default();
        n.node.registered = true;
        n.node
            .labels
            .insert("node.kubernetes.io/instance-type".into(), "m5.large".into());
        n.node.capacity.insert("pods".into(), "29".into());
        n.node.allocatable.insert("pods".into(), "29".into());
        n.node.provider_id = Some("aws:///{{instance.az}}/{{instance.id}}".into());
        n.configz.insert("kubeletconfig.maxPods".into(), "29".into());
        n.configz
            .insert("kubeletconfig.clusterDNS".into(), "[\"10.100.0.10\"]".into());
        n.kubelet_args = [
            "kubelet",
            "--config=/etc/kubernetes/kubelet/kubelet-config.json",
            "--node-ip={{instance.privateIp}}",
            "--hostname-override",
            "{{instance.privateDnsName}}",
            "--v=2",
        ]
        .map(String::from)
        .to_vec();
        n.files.insert(
            "/etc/kubernetes/kubelet/kubelet-config.json".into(),
            "{\n  \"maxPods\": 29\n}\n".into(),
        );
        n.calls
            .insert("imds GET /latest/meta-data/instance-id -> 200".into(), 2);
        n.programs.insert("aws".into(), 1);
        n.timings.insert("bootstrap done".into(), 4.0);
        n.timings.insert("Ready".into(), 12.0);
        n
    }

    fn snap(name: &str) -> ScenarioSnapshot {
        let mut s = ScenarioSnapshot {
            scenario: name.into(),
            outcome: "PASSED".into(),
            ..Default::default()
        };
        s.checks.insert("worker-0/labels".into(), check("PASS"));
        s.checks.insert("worker-0/known-bug".into(), check("XFAIL"));
        s.nodes.insert("worker-0".into(), node());
        s
    }

    fn worker(s: &mut ScenarioSnapshot) -> &mut NodeSnapshot {
        s.nodes.entry("worker-0".into()).or_default()
    }

    fn run(base: ScenarioSnapshot, head: ScenarioSnapshot) -> Comparison {
        compare(&[base], &[head], &Thresholds::default())
    }

    fn keys_of(c: &Comparison) -> Vec<(Aspect, &str)> {
        c.differences.iter().map(|d| (d.aspect, d.key.as_str())).collect()
    }

    #[test]
    fn identical_snapshots_have_no_difference() {
        let c = compare(&[snap("a"), snap("b")], &[snap("b"), snap("a")], &Thresholds::default());
        assert!(c.is_empty(), "{c:#?}");
        assert!(!c.broken());
        assert_eq!(c.compared, ["a", "b"]);
    }

    #[test]
    fn timing_noise_is_ignored_and_a_real_change_reported() {
        let base = snap("a");
        let mut head = snap("a");
        let t = &mut worker(&mut head).timings;
        t.insert("bootstrap done".into(), 6.5); // +2.5 s: under 3 s
        t.insert("Ready".into(), 20.0); // +8 s: over 3 s and over half of 12 s
        let c = run(base.clone(), head.clone());
        assert_eq!(keys_of(&c), [(Aspect::Timings, "Ready")]);
        assert_eq!(c.differences[0].base.as_deref(), Some("12.00s"));
        assert_eq!(c.differences[0].head.as_deref(), Some("20.00s"));
        assert!(!c.broken());

        // Over 3 s but under half: a long milestone's jitter.
        let mut base = base;
        worker(&mut base).timings.insert("Ready".into(), 100.0);
        worker(&mut head).timings.insert("Ready".into(), 104.0);
        assert!(run(base.clone(), head.clone()).is_empty());

        worker(&mut head).timings.insert("serving cert live".into(), 0.4);
        let c = run(base, head);
        assert_eq!(keys_of(&c), [(Aspect::Timings, "serving cert live")]);
        assert_eq!(c.differences[0].base, None);
    }

    #[test]
    fn configz_label_and_capacity_changes_are_exactly_those() {
        let mut head = snap("a");
        let n = worker(&mut head);
        n.configz.insert("kubeletconfig.maxPods".into(), "110".into());
        n.node.labels.insert("extra".into(), "yes".into());
        n.node.capacity.insert("pods".into(), "110".into());
        let c = run(snap("a"), head);
        assert_eq!(
            keys_of(&c),
            [
                (Aspect::Node, "capacity.pods"),
                (Aspect::Node, "labels.extra"),
                (Aspect::Configz, "kubeletconfig.maxPods"),
            ]
        );
        assert!(c.differences.iter().all(|d| d.node.as_deref() == Some("worker-0")));
        assert_eq!(c.differences[1].base, None);
        assert_eq!(c.differences[1].head.as_deref(), Some("yes"));
        assert_eq!(c.differences[2].base.as_deref(), Some("29"));
        assert!(!c.broken());
    }

    #[test]
    fn a_changed_flag_is_one_difference() {
        let mut head = snap("a");
        let args = &mut worker(&mut head).kubelet_args;
        args[2] = "--node-ip=10.0.0.1".into();
        args.swap(1, 5); // order alone is no difference
        let c = run(snap("a"), head);
        assert_eq!(keys_of(&c), [(Aspect::KubeletArgs, "--node-ip")]);
        assert_eq!(c.differences[0].base.as_deref(), Some("{{instance.privateIp}}"));
        assert_eq!(c.differences[0].head.as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn argv_flags_key_flags_by_name() {
        let argv = ["kubelet", "--a=1", "--b", "2", "--bare", "--a=3", "-v=2"].map(String::from);
        let flags = argv_flags(&argv);
        let want: BTreeMap<String, String> = [
            ("kubelet", "kubelet"),
            ("--a", "1, 3"),
            ("--b", "2"),
            ("--bare", "--bare"),
            ("-v", "2"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(flags, want);
    }

    #[test]
    fn a_check_that_stops_passing_is_a_break() {
        let mut head = snap("a");
        head.checks.insert("worker-0/labels".into(), check("FAIL"));
        head.outcome = "FAILED".into();
        let c = run(snap("a"), head);
        assert_eq!(
            keys_of(&c),
            [(Aspect::Outcome, "outcome"), (Aspect::Checks, "worker-0/labels")]
        );
        assert_eq!(c.differences[1].node, None);
        assert_eq!(c.differences[1].base.as_deref(), Some("PASS (found something PASS)"));
        assert!(c.broken());
        assert_eq!(c.breaks, ["a: outcome PASSED -> FAILED", "a: worker-0/labels"]);
    }

    #[test]
    fn a_check_that_starts_passing_is_no_break_and_xfail_counts_as_ok() {
        let mut base = snap("a");
        base.checks.insert("worker-0/labels".into(), check("FAIL"));
        base.outcome = "FAILED".into();
        let mut head = snap("a");
        head.checks.insert("worker-0/known-bug".into(), check("PASS"));
        let c = run(base, head);
        assert_eq!(
            keys_of(&c),
            [
                (Aspect::Outcome, "outcome"),
                (Aspect::Checks, "worker-0/known-bug"),
                (Aspect::Checks, "worker-0/labels"),
            ]
        );
        assert!(!c.broken(), "{:?}", c.breaks);

        // XFAIL on base is ok, so FAIL or nothing on head breaks it.
        let mut head = snap("a");
        head.checks.insert("worker-0/known-bug".into(), check("FAIL"));
        head.checks.remove("worker-0/labels");
        let c = run(snap("a"), head);
        assert_eq!(c.breaks, ["a: worker-0/known-bug", "a: worker-0/labels"]);
        assert_eq!(c.differences.iter().filter(|d| d.head.is_none()).count(), 1);
    }

    #[test]
    fn a_node_on_one_side_only_is_listed_not_diffed() {
        let mut head = snap("a");
        head.nodes.insert("worker-1".into(), NodeSnapshot::default());
        let c = run(snap("a"), head.clone());
        assert!(c.differences.is_empty());
        assert_eq!(c.only_in_head, ["a/worker-1"]);
        assert!(c.only_in_base.is_empty());
        assert!(!c.is_empty());
        let c = run(head, snap("a"));
        assert_eq!(c.only_in_base, ["a/worker-1"]);
    }

    #[test]
    fn a_scenario_on_one_side_only_is_listed_not_compared() {
        let c = compare(
            &[snap("a"), snap("old")],
            &[snap("new"), snap("a")],
            &Thresholds::default(),
        );
        assert_eq!(c.compared, ["a"]);
        assert_eq!(c.only_in_base, ["old"]);
        assert_eq!(c.only_in_head, ["new"]);
        assert!(c.differences.is_empty() && c.breaks.is_empty());
        assert!(!c.is_empty() && !c.broken());
    }

    #[test]
    fn aspects_serialise_in_kebab_case() {
        let names: Vec<String> = [Aspect::Configz, Aspect::KubeletArgs, Aspect::Files]
            .iter()
            .filter_map(|a| serde_json::to_string(a).ok())
            .collect();
        assert_eq!(names, ["\"configz\"", "\"kubelet-args\"", "\"files\""]);
    }
}
