//! Figures over the nodes of a scenario (most useful for large groups): p50/p95/max of each node's start, its
//! bootstrap, and its join, and how fast the nodes called the fakes.
use super::report::{secs, NodeTimeline, ScenarioReport};
use std::time::Duration;

/// The `p`th percentile (nearest rank) of `values`, which must be sorted.
fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
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

/// The aggregate lines of a report with `min_nodes` nodes or more.
pub fn lines(report: &ScenarioReport, min_nodes: usize) -> Vec<String> {
    let nodes = &report.nodes;
    if nodes.len() < min_nodes {
        return Vec::new();
    }
    let mut out = vec![
        line("container up", nodes, |n| n.container_up),
        line("bootstrap done", nodes, |n| n.bootstrap),
        line("Ready after the kubelet started", nodes, |n| n.ready),
        line("serving cert live after the kubelet started", nodes, |n| {
            n.serving_cert_live
        }),
        // From the container's start to Ready: what a user waits for, per node.
        line("joined (container start to Ready)", nodes, |n| {
            Some(n.container_up? + n.bootstrap? + n.ready?)
        }),
    ];
    let window: Duration = report
        .phases
        .iter()
        .filter(|(p, _)| p == "bootstrap" || p == "join observed")
        .map(|(_, d)| *d)
        .sum();
    if report.call_count > 0 && !window.is_zero() {
        out.push(format!(
            "fake calls: {} in {} ({:.1}/s)",
            report.call_count,
            secs(window),
            report.call_count as f64 / window.as_secs_f64()
        ));
    }
    if !report.control_plane_rss.is_empty() {
        let total: u64 = report.control_plane_rss.iter().map(|(_, kib)| kib).sum();
        out.push(format!("control-plane RSS {} MiB", total / 1024));
    }
    out
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
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=20).map(Duration::from_secs).collect();
        assert_eq!(percentile(&v, 50.0), Some(Duration::from_secs(10)));
        assert_eq!(percentile(&v, 95.0), Some(Duration::from_secs(19)));
        assert_eq!(percentile(&v, 100.0), Some(Duration::from_secs(20)));
        assert_eq!(percentile(&[], 50.0), None);
    }

    #[test]
    fn counts_nodes_that_never_got_there() {
        let mut r = ScenarioReport::new("scale", "s.yaml".into());
        r.nodes = (1..=4).map(|i| node(i * 1000)).collect();
        r.nodes.push(NodeTimeline::default());
        let found = lines(&r, 3);
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
        assert!(lines(&r, 10).is_empty());
    }
}
