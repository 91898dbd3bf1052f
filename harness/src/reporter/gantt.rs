//! The run's picture inline in a Markdown summary: a Mermaid gantt chart, which GitHub renders in a pull request
//! and in a job summary (`timeline.svg` is a file in the artifact, a link a summary cannot show). One section per
//! scenario on its own clock: the time it waited for room and for shared builds, apart from its own, then each of
//! its slowest nodes' boot, bootstrap and join (to Ready), as `timeline.svg` draws them.
use crate::run::report::ScenarioReport;
use std::time::Duration;

/// Scenarios drawn at most (the slowest by their own time): a chart of hundreds of rows is unreadable, and GitHub
/// bounds a summary's size.
const SCENARIOS: usize = 12;
/// Nodes drawn per scenario at most (the slowest to Ready).
const NODES: usize = 3;
/// Nodes the table of the slowest lists.
const SLOWEST: usize = 5;
/// A wait shorter than this is not drawn (it would be a sliver, and says nothing).
const WAIT_DRAWN: Duration = Duration::from_millis(100);

/// A Mermaid label: no `:` (it ends a task's name), `#` or `;` (comments and statement ends), no newline.
fn label(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            ':' | '#' | ';' | '\n' | '\r' | '`' => ' ',
            c => c,
        })
        .take(60)
        .collect()
}

/// A Markdown table cell: `|` and newlines would break it.
pub(super) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

/// A scenario's own time: its wall less what it waited for room and for shared builds.
pub fn own_time(r: &ScenarioReport) -> Duration {
    r.wall.saturating_sub(r.waited_for_room + r.waited_for_builds)
}

/// The chart, as a fenced `mermaid` block; empty when no scenario ran.
pub fn chart(reports: &[ScenarioReport]) -> String {
    let mut ran: Vec<&ScenarioReport> = reports.iter().filter(|r| !r.wall.is_zero()).collect();
    if ran.is_empty() {
        return String::new();
    }
    ran.sort_by_key(|r| std::cmp::Reverse(own_time(r)));
    let shown = ran.len().min(SCENARIOS);
    let mut out = String::from("```mermaid\ngantt\n  title Each scenario on its own clock (seconds)\n");
    out.push_str("  dateFormat x\n  axisFormat %M:%S\n");
    let mut id = 0;
    let mut task = |out: &mut String, name: &str, tag: &str, from: Duration, to: Duration| {
        id += 1;
        let to = to.max(from + Duration::from_millis(1));
        out.push_str(&format!("  {} :{tag}t{id}, {}, {}\n", label(name), ms(from), ms(to)));
    };
    for r in &ran[..shown] {
        out.push_str(&format!("  section {}\n", label(&r.name)));
        let mut at = Duration::ZERO;
        if r.waited_for_room >= WAIT_DRAWN {
            task(&mut out, "waiting for room", "done, ", at, at + r.waited_for_room);
            at += r.waited_for_room;
        }
        if r.waited_for_builds >= WAIT_DRAWN {
            task(
                &mut out,
                "waiting for shared builds",
                "done, ",
                at,
                at + r.waited_for_builds,
            );
            at += r.waited_for_builds;
        }
        let status = match r.status_word() {
            "FAILED" | "ERROR" => "crit, ",
            _ => "",
        };
        task(
            &mut out,
            &format!("{} {}", r.status_word(), crate::run::report::secs(own_time(r))),
            status,
            at,
            r.wall,
        );
        let mut nodes: Vec<_> = r.nodes.iter().map(|n| (n, n.placed())).collect();
        nodes.sort_by_key(|(_, p)| std::cmp::Reverse(p.end()));
        for (n, p) in nodes.iter().take(NODES) {
            if let Some((a, b)) = p.up {
                task(&mut out, &format!("{} up", n.label), "", a, b);
            }
            if let Some((a, b)) = p.bootstrap {
                task(&mut out, &format!("{} bootstrap", n.label), "", a, b);
            }
            if let (Some((_, k)), Some(ready)) = (p.bootstrap, p.ready) {
                task(&mut out, &format!("{} to Ready", n.label), "active, ", k, ready);
            }
        }
    }
    out.push_str("```\n");
    if ran.len() > shown {
        out.push_str(&format!(
            "\nThe {shown} slowest of {} scenarios by their own time; every one's `timeline.svg` is in the artifact.\n",
            ran.len()
        ));
    }
    out
}

/// The nodes slowest to Ready across the run, as a table (scenario, node, up, bootstrap, Ready on the
/// scenario's clock); empty without any.
pub fn slowest_nodes(reports: &[ScenarioReport]) -> String {
    let mut rows: Vec<(Duration, String)> = Vec::new();
    for r in reports {
        for n in &r.nodes {
            let p = n.placed();
            let Some(end) = p.ready.or(p.end()) else { continue };
            let at = |d: Option<Duration>| d.map(crate::run::report::secs).unwrap_or_else(|| "–".into());
            rows.push((
                end,
                format!(
                    "| {} | {} | {} | {} | {} |\n",
                    cell(&r.name),
                    cell(&n.label),
                    at(p.up.map(|(_, b)| b)),
                    at(p.bootstrap.map(|(_, b)| b)),
                    at(p.ready)
                ),
            ));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    rows.sort_by_key(|(end, _)| std::cmp::Reverse(*end));
    let mut out = String::from("\n| slowest nodes | node | up | bootstrap done | Ready |\n|---|---|---|---|---|\n");
    for (_, row) in rows.into_iter().take(SLOWEST) {
        out.push_str(&row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::timeline::NodeTimeline;

    fn report(name: &str, wall: u64, room: u64) -> ScenarioReport {
        let mut r = ScenarioReport::new(name, format!("{name}.yaml").into());
        r.wall = Duration::from_secs(wall);
        r.waited_for_room = Duration::from_secs(room);
        let mut n = NodeTimeline {
            label: "worker-0".into(),
            container_up: Some(Duration::from_secs(2)),
            bootstrap: Some(Duration::from_secs(3)),
            ready: Some(Duration::from_secs(4)),
            ..Default::default()
        };
        n.boot_at = Some(Duration::from_secs(room + 1));
        n.kubelet_at = Some(Duration::from_secs(room + 6));
        r.nodes.push(n);
        r
    }

    /// `two-nodes` waited 140 of its 151 s: the chart shows the wait apart, and its own 11 s as its bar.
    #[test]
    fn the_wait_for_room_is_drawn_apart_from_the_scenarios_own_time() {
        let mut failed = report("a:b#c", 10, 0);
        failed.outcome = crate::run::Outcome::Failed;
        let md = chart(&[report("two-nodes", 151, 140), failed]);
        assert!(md.starts_with("```mermaid\ngantt\n") && md.ends_with("```\n"), "{md}");
        assert!(
            md.contains("  section two-nodes\n  waiting for room :done, t1, 0, 140000\n"),
            "{md}"
        );
        assert!(md.contains("  PASSED 11.00s :t2, 140000, 151000\n"), "{md}");
        assert!(md.contains("  worker-0 to Ready :active, t5, 146000, 150000\n"), "{md}");
        assert!(
            md.contains("  section a b c\n") && md.contains("  FAILED 10.00s :crit, "),
            "{md}"
        );
        assert_eq!(chart(&[]), "");
        let table = slowest_nodes(&[report("two-nodes", 151, 140)]);
        assert!(
            table.contains("| two-nodes | worker-0 | 143.00s | 146.00s | 150.00s |"),
            "{table}"
        );
    }

    #[test]
    fn a_large_run_draws_its_slowest_scenarios() {
        let many: Vec<ScenarioReport> = (0..30).map(|i| report(&format!("s{i}"), 10 + i, 0)).collect();
        let md = chart(&many);
        assert_eq!(md.matches("  section ").count(), SCENARIOS);
        assert!(md.contains("section s29\n") && !md.contains("section s0\n"), "{md}");
        assert!(md.contains("The 12 slowest of 30 scenarios"), "{md}");
    }
}
