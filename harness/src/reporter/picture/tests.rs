//! The picture's tests: well-formed XML (checked by a small parser below, no XML crate), escaped names, bars in
//! order on one clock, the waiting for shared builds apart, and where pictures go and how Markdown links them.
use super::*;
use crate::run::report::NodeTimeline;
use std::collections::BTreeMap;

fn s(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

const HOSTILE: &str = "<script>alert(1)</script> & \"x\"";

/// A cold run's scenario: 741.5 s blocked on shared builds, then two nodes, the second never Ready.
fn report() -> ScenarioReport {
    let mut r = ScenarioReport::new("al2023 <karpenter>", "x.yaml".into());
    r.outcome = Outcome::Failed;
    r.phases = [
        ("provision", 745_000),
        ("control plane ready", 3_000),
        ("control plane + nodes booted (in parallel)", 4_000),
        ("cluster announced", 100),
        ("bootstrap", 2_000),
        ("join observed", 5_000),
        ("teardown", 1_000),
    ]
    .map(|(n, ms)| (n.to_string(), s(ms)))
    .to_vec();
    r.waited_for_builds = s(741_500);
    r.wall = s(760_300);
    let node = |name: &str| NodeTimeline {
        node_name: name.into(),
        boot_at: Some(s(745_100)),
        container_up: Some(s(2_400)),
        kubelet_at: Some(s(751_100)),
        bootstrap: Some(s(1_900)),
        ..Default::default()
    };
    r.nodes = vec![
        NodeTimeline {
            client_csr_issued: Some(s(100)),
            registered: Some(s(500)),
            ready: Some(s(2_000)),
            serving_cert_live: Some(s(2_500)),
            ..node("worker")
        },
        NodeTimeline {
            client_csr_issued: Some(s(300)),
            ..node(HOSTILE)
        },
    ];
    r
}

type Tag = (String, BTreeMap<String, String>);

/// The start tags of `xml` in order, with their attributes; or where it is not well-formed XML.
fn parse(xml: &str) -> Result<Vec<Tag>, String> {
    let mut rest = match xml.strip_prefix("<?xml").and_then(|r| r.split_once("?>")) {
        Some((_, rest)) => rest,
        None => return Err("no XML declaration".into()),
    };
    let (mut open, mut tags, mut roots) = (Vec::<String>::new(), Vec::new(), 0);
    while let Some((text, after)) = rest.split_once('<') {
        check_text(text)?;
        if open.is_empty() && !text.trim().is_empty() {
            return Err(format!("text outside the root: {text}"));
        }
        let (tag, after) = after.split_once('>').ok_or("a tag never closed")?;
        rest = after;
        if let Some(name) = tag.strip_prefix('/') {
            if open.pop().as_deref() != Some(name) {
                return Err(format!("</{name}> closes nothing open"));
            }
            continue;
        }
        let (tag, empty) = tag.strip_suffix('/').map_or((tag, false), |t| (t, true));
        let (name, mut attrs) = tag.split_once(' ').unwrap_or((tag, ""));
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric()) {
            return Err(format!("bad element name {name:?}"));
        }
        let mut found = BTreeMap::new();
        while !attrs.trim().is_empty() {
            let (key, value) = attrs
                .trim_start()
                .split_once("=\"")
                .ok_or(format!("bad attributes {attrs:?}"))?;
            let (value, after) = value.split_once('"').ok_or("an attribute never closed")?;
            if key.contains(char::is_whitespace) || value.contains('<') {
                return Err(format!("bad attribute {key}={value}"));
            }
            check_text(value)?;
            if found.insert(key.to_string(), value.to_string()).is_some() {
                return Err(format!("{key} twice"));
            }
            attrs = after;
        }
        roots += usize::from(open.is_empty());
        if !empty {
            open.push(name.to_string());
        }
        tags.push((name.to_string(), found));
    }
    check_text(rest)?;
    match (open.is_empty(), roots, rest.trim().is_empty()) {
        (true, 1, true) => Ok(tags),
        _ => Err(format!("unclosed {open:?}, {roots} roots, trailing {rest:?}")),
    }
}

/// Every `&` starts an entity XML knows.
fn check_text(t: &str) -> Result<(), String> {
    for (at, _) in t.match_indices('&') {
        let entity = t[at + 1..].split_once(';').map(|(e, _)| e).unwrap_or("");
        let known = matches!(entity, "amp" | "lt" | "gt" | "quot" | "apos")
            || entity
                .strip_prefix('#')
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if !known {
            return Err(format!("a bare & in {t:?}"));
        }
    }
    Ok(())
}

fn num(tag: &Tag, attr: &str) -> f64 {
    tag.1.get(attr).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
}

/// Each node's drawn shapes: class to x.
fn node_rows(tags: &[Tag]) -> Vec<BTreeMap<String, f64>> {
    let mut rows: Vec<BTreeMap<String, f64>> = Vec::new();
    for t in tags {
        match (t.0.as_str(), t.1.get("class").map(String::as_str)) {
            ("g", Some("node")) => rows.push(BTreeMap::new()),
            ("rect", Some(class)) => {
                // A bar by where it starts, a milestone's mark by its centre.
                let mark = MARKS.iter().any(|(_, _, c)| *c == class);
                let x = num(t, "x") + if mark { num(t, "width") / 2.0 } else { 0.0 };
                if let Some(row) = rows.last_mut() {
                    row.insert(class.to_string(), x);
                }
            }
            _ => {}
        }
    }
    rows
}

#[test]
fn the_picture_is_well_formed_and_escapes_names() {
    let svg = render(&report());
    let tags = parse(&svg).unwrap_or_else(|e| panic!("{e}\n{svg}"));
    assert_eq!(tags[0].0, "svg");
    assert!(!svg.contains("<script>") && !svg.contains("<karpenter>"), "{svg}");
    assert!(
        svg.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot;"),
        "{svg}"
    );
    assert!(
        svg.contains("al2023 &lt;karpenter&gt;: FAILED in 760.30s (741.50s of it waiting"),
        "{svg}"
    );
    assert!(
        esc("a\u{1}b\nc").eq("a\u{FFFD}b c"),
        "characters XML cannot hold are replaced"
    );
    assert_eq!(render(&report()), svg, "deterministic");
}

#[test]
fn bars_are_ordered_on_one_clock_and_never_negative() {
    let svg = render(&report());
    let tags = parse(&svg).unwrap_or_default();
    for t in tags.iter().filter(|t| t.0 == "rect" && t.1.contains_key("class")) {
        assert!(num(t, "width") >= 0.0 && num(t, "x") >= LEFT - 2.0, "{t:?}");
    }
    let rows = node_rows(&tags);
    assert_eq!(rows.len(), 2);
    let order = ["up", "bootstrap", "joining", "csr", "registered", "ready", "serving"];
    let xs: Vec<f64> = order.iter().map(|c| rows[0][*c]).collect();
    assert!(xs.windows(2).all(|w| w[0] <= w[1]), "{order:?} at {xs:?}");
    assert!(!rows[1].contains_key("ready"), "never Ready: no mark");
    assert!(svg.contains("not Ready"));
    // The phases follow one another; the control plane's creation is drawn within the boot after it.
    let phases: Vec<f64> = tags
        .iter()
        .filter(|t| t.1.get("class").is_some_and(|c| c == "phase"))
        .map(|t| num(t, "x"))
        .collect();
    assert!(phases.windows(2).all(|w| w[0] < w[1]), "{phases:?}");
    let within = tags
        .iter()
        .find(|t| t.1.get("class").is_some_and(|c| c == "phase within"));
    assert_eq!(within.map(|t| num(t, "x")), Some(phases[1]), "starts with the boot");
}

#[test]
fn waiting_for_shared_builds_is_drawn_apart() {
    let svg = render(&report());
    let tags = parse(&svg).unwrap_or_default();
    let waiting: Vec<&Tag> = tags
        .iter()
        .filter(|t| t.1.get("class").is_some_and(|c| c == "waiting"))
        .collect();
    assert_eq!(waiting.len(), 1, "{svg}");
    assert_eq!(waiting[0].1.get("fill").map(String::as_str), Some("url(#hatch)"));
    assert!(svg.contains(">waiting for shared builds</text>"));
    // 741.5 s of 760 s: squeezed, so that the nodes' 15 s still show.
    assert!((num(waiting[0], "width") - SQUEEZED).abs() < 0.2, "{svg}");
    assert!(svg.contains(">741.50s (not to scale)</text>"), "{svg}");
    let bootstrap = tags.iter().find(|t| t.1.get("class").is_some_and(|c| c == "bootstrap"));
    assert!(bootstrap.is_some_and(|b| num(b, "width") > 50.0), "{bootstrap:?}");
    // A short wait is drawn to scale.
    let mut warm = report();
    warm.waited_for_builds = s(1_000);
    warm.phases[0].1 = s(4_000);
    warm.wall = s(19_300);
    for n in &mut warm.nodes {
        (n.boot_at, n.kubelet_at) = (Some(s(4_100)), Some(s(10_100)));
    }
    let tags = parse(&render(&warm)).unwrap_or_default();
    let width = |class: &str| {
        let t = tags.iter().find(|t| t.1.get("class").is_some_and(|c| c == class));
        t.map(|t| num(t, "width")).unwrap_or(f64::NAN)
    };
    assert!((width("waiting") / width("phase") - 0.25).abs() < 0.01, "{tags:?}");
    warm.waited_for_builds = Duration::ZERO;
    assert!(!render(&warm).contains(r#"class="waiting""#));
}

#[test]
fn rows_are_capped_and_the_rest_counted() {
    let mut r = report();
    r.nodes = (0..MAX_ROWS + 15).map(|_| r.nodes[0].clone()).collect();
    let svg = render(&r);
    assert_eq!(node_rows(&parse(&svg).unwrap_or_default()).len(), MAX_ROWS);
    assert!(svg.contains("… 15 more nodes not drawn"), "{svg}");
}

#[test]
fn ticks_are_round_numbers() {
    assert_eq!(tick_step(760.0), 100.0);
    assert_eq!(tick_step(10.0), 2.0);
    assert!((tick_step(4.0) - 0.5).abs() < 1e-9);
    let svg = render(&report());
    assert!(svg.contains(">0s</text>") && svg.contains(">750s</text>"), "{svg}");
    assert!(!svg.contains(">400s</text>"), "no tick within the squeezed waiting");
}

#[test]
fn pictures_go_with_the_report_and_are_linked_from_markdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut kept = report();
    kept.artifacts = Some(dir.path().join("kept"));
    let mut passed = ScenarioReport::new("passed", "p.yaml".into());
    passed.report_file = Some(dir.path().join("passed/report.txt"));
    let mut ignored = ScenarioReport::new("ignored", "i.yaml".into());
    ignored.outcome = Outcome::Ignored("not this version".into());
    ignored.report_file = Some(dir.path().join("report.txt"));
    for sub in ["kept", "passed"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let mut pictures = Pictures::default();
    for r in [&kept, &passed, &ignored] {
        pictures.on(&Event::ScenarioFinished {
            report: std::sync::Arc::new(r.clone()),
        });
    }
    assert!(dir.path().join("kept/timeline.svg").is_file());
    assert!(dir.path().join("passed/timeline.svg").is_file(), "beside report.txt");
    assert!(
        !dir.path().join("timeline.svg").exists(),
        "nothing to draw for an ignored scenario"
    );
    let links = markdown_links(&[kept.clone(), passed, ignored], Some(dir.path()), true);
    assert_eq!(
        links,
        "\nTimelines (`timeline.svg`): [al2023 \\<karpenter\\>](kept/timeline.svg) (741.50s of it waiting for \
         shared builds) · [passed](passed/timeline.svg)\n"
    );
    let elsewhere = tempfile::tempdir().unwrap();
    let absolute = markdown_links(std::slice::from_ref(&kept), Some(elsewhere.path()), true);
    assert!(
        absolute.contains("](/"),
        "outside the Markdown file's directory, the path: {absolute}"
    );
    assert_eq!(url_path("a b/(c).svg"), "a%20b/%28c%29.svg");
    assert_eq!(markdown_links(&[], None, true), "");
    // Under GitHub Actions: the file's place in the artifact, as code, no link.
    let named = markdown_links(&[kept], Some(dir.path()), false);
    assert!(
        named.contains("in this job's artifact") && !named.contains("]("),
        "{named}"
    );
}
