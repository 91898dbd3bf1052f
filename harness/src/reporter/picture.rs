//! A picture of one scenario's join, `timeline.svg`: which phase got slower is answered faster by looking than by
//! reading p50/p95 lines. One time axis from the start of the scenario's pipeline: its phases as a band on top,
//! the time it spent blocked on shared builds apart (hatched), then one row per node (container boot, bootstrap,
//! then the join's milestones as marks). Hand-written SVG: every text from the scenario is escaped.
use super::WriteFailures;
use crate::run::events::{Event, Reporter};
use crate::run::report::{secs, Outcome, ScenarioReport};
use crate::run::timeline::{place_phases, NodeTimeline, Placed};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The picture's name in a scenario's directory.
pub const FILE: &str = "timeline.svg";

/// Nodes drawn at most (the scale scenario has 50); the rest are counted under the rows.
pub const MAX_ROWS: usize = 60;

const WIDTH: f64 = 960.0;
/// Where the time axis starts: the labels of the rows are left of it.
const LEFT: f64 = 210.0;
const RIGHT: f64 = 24.0;
const ROW: f64 = 18.0;
const BAR: f64 = 12.0;
/// Characters of a row's label before it is cut.
const LABEL_CHARS: usize = 30;

/// Light, so that a phase's name reads on its bar.
const PHASE_COLOURS: [&str; 6] = ["#a0cbe8", "#8cd17d", "#f1ce63", "#d4a6c8", "#ffbe7d", "#d7b5a6"];
const WAIT_COLOUR: &str = "#bab0ac";
const UP: &str = "#4e79a7";
const BOOTSTRAP: &str = "#f28e2b";
const JOINING: &str = "#cfe3c8";
/// The join's milestones: their legend, colour and class.
const MARKS: [(&str, &str, &str); 5] = [
    ("client CSR issued", "#e15759", "csr"),
    ("Node registered", "#17becf", "registered"),
    ("Ready", "#2e7d32", "ready"),
    ("serving CSR issued", "#ff9da7", "serving-csr"),
    ("serving cert live", "#7b3294", "serving"),
];

/// Where a scenario's picture goes: its artifacts directory, else the directory of its `report.txt` (which the
/// runner creates for every scenario). So a passed scenario whose artifacts were not kept still gets one: it is
/// small, and a passed scenario's wall is what shows the waiting for shared builds. None for a scenario that did
/// not run (ignored, unavailable): there is nothing to draw.
pub fn path_for(r: &ScenarioReport) -> Option<PathBuf> {
    if matches!(r.outcome, Outcome::Ignored(_) | Outcome::Unavailable(_)) {
        return None;
    }
    let dir = match &r.artifacts {
        Some(a) => a.clone(),
        None => r.report_file.as_ref()?.parent()?.to_path_buf(),
    };
    Some(dir.join(FILE))
}

/// Writes each finished scenario's picture ([`path_for`]). A picture that cannot be written is said on stderr
/// and does not fail the run (its reports are whole without it): its write failures are its own, not the run's.
#[derive(Default)]
pub struct Pictures {
    failures: WriteFailures,
}

impl Reporter for Pictures {
    fn on(&mut self, event: &Event) {
        // A failed attempt (`--retries`) gets its picture too, in the directory its artifacts were moved to.
        let (Event::ScenarioFinished { report } | Event::AttemptFailed { report, .. }) = event else {
            return;
        };
        let Some(path) = path_for(report) else {
            return;
        };
        if path.parent().is_some_and(|d| d.is_dir()) {
            if let Err(e) = super::write_whole(&path, render(report).as_bytes(), &self.failures) {
                eprintln!("warning: cannot write {}: {e}", path.display());
            }
        }
    }
}

/// A Markdown paragraph linking each written picture, relative to `dir` (the Markdown file's) when it lies under
/// it, else by its path; empty when no picture was written. Not `as_links`: each is named by that path as code,
/// the place of the file in the uploaded artifact (a job summary's link to a runner's file is dead).
pub fn markdown_links(reports: &[ScenarioReport], dir: Option<&Path>, as_links: bool) -> String {
    let dir = dir
        .map(|d| if d.as_os_str().is_empty() { Path::new(".") } else { d })
        .and_then(|d| d.canonicalize().ok());
    let links: Vec<String> = reports
        .iter()
        .filter_map(|r| {
            let svg = path_for(r).filter(|p| p.is_file())?;
            let svg = svg.canonicalize().unwrap_or(svg);
            let shown = match dir.as_deref().and_then(|d| svg.strip_prefix(d).ok()) {
                Some(relative) => relative.to_path_buf(),
                None => svg,
            };
            Some(match as_links {
                true => format!(
                    "[{}]({}){}",
                    md_text(&r.name),
                    url_path(&shown.to_string_lossy()),
                    super::text::waited_note(r)
                ),
                false => format!("{} `{}`", md_text(&r.name), shown.to_string_lossy().replace('`', "'")),
            })
        })
        .collect();
    if links.is_empty() {
        return String::new();
    }
    match as_links {
        true => format!("\nTimelines (`{FILE}`): {}\n", links.join(" · ")),
        false => format!(
            "\nTimelines (`{FILE}`), in this job's artifact: {}\n",
            links.join(" · ")
        ),
    }
}

/// A link's text with Markdown's punctuation escaped.
fn md_text(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let escape = c.is_ascii_punctuation() && !matches!(c, '-' | '_' | '.');
            escape
                .then_some('\\')
                .into_iter()
                .chain([if c == '\n' { ' ' } else { c }])
        })
        .collect()
}

/// A path as a link's destination: percent-encoded but for `/` and unreserved characters.
fn url_path(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'.' | b'_' | b'~' | b'-' => (b as char).to_string(),
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// `s` fit for XML text and attribute values: markup escaped, characters XML cannot hold replaced.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(' '),
            c if (c as u32) < 0x20 || matches!(c, '\u{FFFE}' | '\u{FFFF}') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// `s` cut to `max` characters.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// A tick step of 1, 2 or 5 times a power of ten giving about eight ticks over `span` seconds.
fn tick_step(span: f64) -> f64 {
    let raw = (span / 8.0).max(1e-3);
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude)
}

/// Waiting for shared builds longer than this share of the picture's span is squeezed into [`SQUEEZED`] pixels:
/// in a cold run it is 98% of the wall, and drawn to scale it would leave the nodes' join a sliver.
const SQUEEZE_FROM: f64 = 0.25;
const SQUEEZED: f64 = 60.0;

/// The time axis: seconds to x, linear but for the waiting for shared builds when it is squeezed (`gap`, in
/// seconds from the start). Every label stays a time from the scenario's start.
struct Axis {
    px_per_sec: f64,
    gap: Option<(f64, f64)>,
}

impl Axis {
    fn new(end: Duration, waiting: (Duration, Duration)) -> Self {
        let (end, (from, to)) = (end.as_secs_f64(), (waiting.0.as_secs_f64(), waiting.1.as_secs_f64()));
        let plot = WIDTH - LEFT - RIGHT;
        if to - from > SQUEEZE_FROM * end && end > to - from {
            Self {
                px_per_sec: (plot - SQUEEZED) / (end - (to - from)),
                gap: Some((from, to)),
            }
        } else {
            Self {
                px_per_sec: plot / end,
                gap: None,
            }
        }
    }

    fn x(&self, d: Duration) -> f64 {
        let t = d.as_secs_f64();
        match self.gap {
            Some((from, to)) if t >= to => LEFT + (t - (to - from)) * self.px_per_sec + SQUEEZED,
            Some((from, to)) if t > from => LEFT + from * self.px_per_sec + (t - from) / (to - from) * SQUEEZED,
            _ => LEFT + t * self.px_per_sec,
        }
    }

    /// A bar from `from` to `to` (never negative, at least a hairline so a short one still shows).
    fn bar(&self, out: &mut String, class: &str, y: f64, (from, to): (Duration, Duration), fill: &str, title: &str) {
        let w = (self.x(to) - self.x(from)).max(1.0);
        let _ = writeln!(
            out,
            r#"<rect class="{class}" x="{:.1}" y="{y:.1}" width="{w:.1}" height="{BAR}" fill="{fill}"><title>{}</title></rect>"#,
            self.x(from),
            esc(title)
        );
    }

    /// A milestone's mark: a thin upright bar centred on `at`.
    fn mark(&self, out: &mut String, class: &str, y: f64, at: Duration, fill: &str, title: &str) {
        let _ = writeln!(
            out,
            r#"<rect class="{class}" x="{:.1}" y="{:.1}" width="3" height="{:.1}" fill="{fill}"><title>{}</title></rect>"#,
            self.x(at) - 1.5,
            y - 2.0,
            BAR + 4.0,
            esc(title)
        );
    }
}

/// A row's label, left of the axis; a long one is cut, and whole in its tooltip.
fn label(out: &mut String, y: f64, text: &str) {
    let shown = cut(text, LABEL_CHARS);
    let whole = if shown == text {
        String::new()
    } else {
        format!("<title>{}</title>", esc(text))
    };
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{whole}{}</text>"#,
        LEFT - 8.0,
        y + BAR - 2.0,
        esc(&shown)
    );
}

/// The picture of `r`'s join. Deterministic: the same report gives the same bytes.
pub fn render(r: &ScenarioReport) -> String {
    let phases = place_phases(&r.phases);
    let waited = r.waited_for_builds;
    // The shared builds are waited for in `provision`: the waiting is drawn from its start.
    let wait_from = phases
        .iter()
        .find(|p| p.name == "provision")
        .map(|p| p.start)
        .unwrap_or_default();
    let nodes: Vec<(&NodeTimeline, Placed)> = r.nodes.iter().take(MAX_ROWS).map(|n| (n, n.placed())).collect();
    let end = phases
        .iter()
        .map(|p| p.start + p.took)
        .chain(nodes.iter().filter_map(|(_, p)| p.end()))
        .chain([r.wall, wait_from + waited])
        .max()
        .unwrap_or_default()
        .max(Duration::from_millis(100));
    let axis = Axis::new(end, (wait_from, wait_from + waited));
    let mut body = String::new();
    let mut y = 34.0;
    // The scenario's phases, and those that happened within the step after them on a row of their own.
    label(&mut body, y, "phases");
    for (i, p) in phases.iter().enumerate().filter(|(_, p)| !p.within) {
        let fill = if p.name.starts_with("waited") {
            WAIT_COLOUR
        } else {
            PHASE_COLOURS[i % PHASE_COLOURS.len()]
        };
        let title = format!("{} {}–{}", p.name, secs(p.start), secs(p.start + p.took));
        axis.bar(&mut body, "phase", y, (p.start, p.start + p.took), fill, &title);
        // Its name on it, when it fits (about 6 px a character).
        let (x, width) = (axis.x(p.start), axis.x(p.start + p.took) - axis.x(p.start));
        if p.name.chars().count() as f64 * 6.0 + 6.0 < width {
            let _ = writeln!(
                body,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                x + 3.0,
                y + BAR - 2.0,
                esc(p.name)
            );
        }
    }
    for p in phases.iter().filter(|p| p.within) {
        y += ROW;
        label(&mut body, y, p.name);
        let title = format!("{} {} (within the step after it)", p.name, secs(p.took));
        axis.bar(
            &mut body,
            "phase within",
            y,
            (p.start, p.start + p.took),
            PHASE_COLOURS[0],
            &title,
        );
    }
    if !waited.is_zero() {
        y += ROW;
        label(&mut body, y, "waiting for shared builds");
        let title = format!(
            "waiting for shared builds {} in all (in provision; part of the wall {}){}",
            secs(waited),
            secs(r.wall),
            if axis.gap.is_some() { "; not to scale" } else { "" }
        );
        axis.bar(
            &mut body,
            "waiting",
            y,
            (wait_from, wait_from + waited),
            "url(#hatch)",
            &title,
        );
        let _ = writeln!(
            body,
            r#"<text x="{:.1}" y="{:.1}">{}{}</text>"#,
            axis.x(wait_from + waited) + 6.0,
            y + BAR - 2.0,
            secs(waited),
            if axis.gap.is_some() { " (not to scale)" } else { "" }
        );
    }
    y += ROW + 6.0;
    let _ = writeln!(
        body,
        r##"<line x1="0" y1="{:.1}" x2="{WIDTH}" y2="{:.1}" stroke="#ccc"/>"##,
        y - 4.0,
        y - 4.0
    );
    for (n, p) in &nodes {
        let _ = writeln!(body, r#"<g class="node">"#);
        label(&mut body, y, &n.node_name);
        if let Some((from, to)) = p.up {
            axis.bar(
                &mut body,
                "up",
                y,
                (from, to),
                UP,
                &format!("{} {}–{}", n.up_label(), secs(from), secs(to)),
            );
        }
        if let Some((from, to)) = p.bootstrap {
            let title = format!("bootstrap {}–{}", secs(from), secs(to));
            axis.bar(&mut body, "bootstrap", y, (from, to), BOOTSTRAP, &title);
            // From the kubelet's start to Ready (or to the last milestone reached): the join itself.
            let last = p.ready.or(p.registered).or(p.client_csr).unwrap_or(to);
            let title = match p.ready {
                Some(ready) => format!("joining {}–{}", secs(to), secs(ready)),
                None => format!("joining from {}, never Ready", secs(to)),
            };
            axis.bar(&mut body, "joining", y, (to, last), JOINING, &title);
        }
        let reached = [p.client_csr, p.registered, p.ready, p.serving_csr, p.serving_live];
        for ((what, colour, class), at) in MARKS.iter().zip(reached) {
            if let Some(at) = at {
                axis.mark(&mut body, class, y, at, colour, &format!("{what} {}", secs(at)));
            }
        }
        if p.bootstrap.is_some() && p.ready.is_none() {
            let _ = writeln!(
                body,
                r##"<text x="{:.1}" y="{:.1}" fill="#c00">not Ready</text>"##,
                axis.x(p.end().unwrap_or_default()) + 6.0,
                y + BAR - 2.0
            );
        }
        let _ = writeln!(body, "</g>");
        y += ROW;
    }
    if r.nodes.len() > nodes.len() {
        let _ = writeln!(
            body,
            r#"<text x="{LEFT}" y="{:.1}">… {} more nodes not drawn (report.txt has every node)</text>"#,
            y + BAR - 2.0,
            r.nodes.len() - nodes.len()
        );
        y += ROW;
    }
    y += 4.0;
    // The axis, with a tick and a faint line across every step (none within squeezed waiting, marked by a break).
    let span = end.as_secs_f64() - axis.gap.map(|(from, to)| to - from).unwrap_or(0.0);
    let step = tick_step(span);
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let _ = writeln!(
        body,
        r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#333"/>"##,
        WIDTH - RIGHT
    );
    if axis.gap.is_some() {
        let x = axis.x(wait_from + waited / 2);
        let _ = writeln!(
            body,
            r##"<rect class="break" x="{:.1}" y="{:.1}" width="10" height="10" fill="#fff"/><path d="M{:.1} {:.1}l4 -10M{:.1} {:.1}l4 -10" stroke="#333"/>"##,
            x - 5.0,
            y - 5.0,
            x - 5.0,
            y + 5.0,
            x + 1.0,
            y + 5.0
        );
    }
    // Counted in steps on both sides of the squeezed waiting, never through it (it may be days of steps).
    let last = (end.as_secs_f64() / step).floor() as u64;
    let (before, after) = match axis.gap {
        Some((from, to)) => ((from / step).floor() as u64, (to / step).ceil() as u64),
        None => (last, last + 1),
    };
    for t in (0..=before).chain(after..=last).map(|i| i as f64 * step) {
        let x = axis.x(Duration::from_secs_f64(t));
        let _ = writeln!(
            body,
            r##"<line class="grid" x1="{x:.1}" y1="26" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{t:.decimals$}s</text>"##,
            y + 4.0,
            y + 16.0
        );
    }
    y += 34.0;
    // The legend.
    let mut legend: Vec<(&str, &str, bool)> = vec![
        ("container boot", UP, false),
        ("bootstrap", BOOTSTRAP, false),
        ("joining", JOINING, false),
    ];
    legend.extend(MARKS.iter().map(|(what, colour, _)| (*what, *colour, true)));
    legend.push(("waiting for shared builds", "url(#hatch)", false));
    let mut x = 10.0;
    for (i, (what, colour, mark)) in legend.iter().enumerate() {
        if i == 5 {
            (x, y) = (10.0, y + ROW);
        }
        let w = if *mark { 3.0 } else { 14.0 };
        let _ = writeln!(
            body,
            r#"<rect x="{x:.1}" y="{:.1}" width="{w}" height="{BAR}" fill="{colour}"/><text x="{:.1}" y="{:.1}">{what}</text>"#,
            y - BAR + 2.0,
            x + w + 5.0,
            y
        );
        x += 30.0 + what.chars().count() as f64 * 6.5;
    }
    let height = y + 14.0;
    let title = format!(
        "{}: {} in {}{}",
        r.name,
        r.status_word(),
        secs(r.wall),
        super::text::waited_note(r)
    );
    let mut out = format!(
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif" font-size="11">
<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="#e6e6e6"/><line x1="0" y1="0" x2="0" y2="6" stroke="#888" stroke-width="2"/></pattern></defs>
<rect width="100%" height="100%" fill="#fff"/>
<text x="10" y="16" font-size="13" font-weight="bold">{}</text>
"##,
        esc(&title)
    );
    out.push_str(&body);
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests;
