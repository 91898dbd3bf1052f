//! Prints a [`Comparison`]: `text` side by side for a terminal, `markdown` for a pull request's summary
//! (`$GITHUB_STEP_SUMMARY`), `json` for tools.
use super::diff::{truncate, Aspect, Comparison, Difference};
use similar::TextDiff;
use std::collections::BTreeSet;

/// Characters per side in the text columns, so that base and head stay readable on a terminal.
const SIDE: usize = 40;
/// Longest key the text column is sized for; a longer one gets a line of its own.
const KEY_MAX: usize = 48;
/// Longest value in a Markdown cell, to keep a table from drowning a pull request.
const CELL: usize = 100;

/// The comparison for a terminal: grouped by scenario, node and aspect, base left and head right, files as
/// unified diffs, and a summary line that says whether a check broke.
pub fn text(c: &Comparison) -> String {
    let rows: Vec<(&Difference, (String, String))> = c
        .differences
        .iter()
        .filter_map(|d| columns(d).map(|cols| (d, cols)))
        .collect();
    let key_w = rows
        .iter()
        .map(|(d, _)| width(&d.key))
        .filter(|&w| w <= KEY_MAX)
        .max()
        .unwrap_or(0);
    let base_w = rows.iter().map(|(_, (base, _))| width(base)).max().unwrap_or(0);
    let mut lines = Vec::new();
    let mut group = None;
    let mut aspect = None;
    for d in &c.differences {
        let g = (d.scenario.as_str(), d.node.as_deref());
        if group != Some(g) {
            if group.is_some() {
                lines.push(String::new());
            }
            lines.push(match g.1 {
                Some(node) => format!("{} / {node}", g.0),
                None => g.0.to_string(),
            });
            group = Some(g);
            aspect = None;
        }
        if aspect != Some(d.aspect) {
            lines.push(format!("  {}", d.aspect.title()));
            aspect = Some(d.aspect);
        }
        if multiline(d) {
            lines.push(format!("    {}{}", d.key, presence(d)));
            lines.extend(unified(d).lines().map(|l| format!("      {l}")));
            continue;
        }
        let Some((base, head)) = columns(d) else {
            // The cut would hide the difference: both in full, one under the other.
            lines.push(format!("    {}", d.key));
            lines.push(format!("      - {}", shown(&d.base)));
            lines.push(format!("      + {}", shown(&d.head)));
            continue;
        };
        if width(&d.key) > key_w {
            lines.push(format!("    {}", d.key));
            lines.push(format!("    {:key_w$}  {base:base_w$} | {head}", ""));
        } else {
            lines.push(format!("    {:key_w$}  {base:base_w$} | {head}", d.key));
        }
    }
    if !lines.is_empty() {
        lines.push(String::new());
    }
    for (side, names) in [("base", &c.only_in_base), ("head", &c.only_in_head)] {
        if !names.is_empty() {
            lines.push(format!("only in {side}: {}", names.join(", ")));
        }
    }
    lines.push(summary(c));
    lines.join("\n") + "\n"
}

/// The comparison for a pull request: a verdict, then one table per scenario and file changes as diffs.
pub fn markdown(c: &Comparison) -> String {
    let mut lines = vec!["### nodejoin compare".to_string(), String::new()];
    if c.is_empty() {
        lines.push(format!("No difference in {}.", plural(c.compared.len(), "scenario")));
        return lines.join("\n") + "\n";
    }
    if c.breaks.is_empty() {
        lines.push("✅ no check broken".to_string());
    } else {
        lines.push(format!("❌ {} broken:", plural(c.breaks.len(), "check")));
        lines.push(String::new());
        lines.extend(c.breaks.iter().map(|b| format!("- {}", code(b))));
    }
    lines.push(String::new());
    lines.push(format!("{}.", capitalised(&counts(c))));
    for (side, names) in [("base", &c.only_in_base), ("head", &c.only_in_head)] {
        if !names.is_empty() {
            let names: Vec<String> = names.iter().map(|n| code(n)).collect();
            lines.push(String::new());
            lines.push(format!("Only in {side}: {}", names.join(", ")));
        }
    }
    let scenarios: BTreeSet<&str> = c.differences.iter().map(|d| d.scenario.as_str()).collect();
    for scenario in scenarios {
        let diffs: Vec<&Difference> = c.differences.iter().filter(|d| d.scenario == scenario).collect();
        lines.push(String::new());
        lines.push(format!("#### {}", code(scenario)));
        lines.push(String::new());
        lines.push("| node | aspect | key | base | head |".to_string());
        lines.push("|---|---|---|---|---|".to_string());
        for d in &diffs {
            let cell = |v: &Option<String>| match v {
                None => "-".to_string(),
                Some(_) if multiline(d) => "see diff below".to_string(),
                Some(v) => code(&truncate(&one_line(v), CELL)),
            };
            lines.push(format!(
                "| {} | {} | {} | {} | {} |",
                d.node.as_deref().map(code).unwrap_or_default(),
                d.aspect.title(),
                code(&d.key),
                cell(&d.base),
                cell(&d.head),
            ));
        }
        for d in diffs.iter().filter(|d| multiline(d)) {
            let diff = unified(d);
            let fence = "`".repeat(longest_run(&diff, '`').max(2) + 1);
            let node = d.node.as_deref().map(|n| format!("{} ", code(n))).unwrap_or_default();
            lines.push(String::new());
            lines.push(format!("{node}{}{}:", code(&d.key), presence(d)));
            lines.push(String::new());
            lines.push(format!("{fence}diff"));
            lines.extend(diff.lines().map(str::to_string));
            lines.push(fence);
        }
    }
    lines.join("\n") + "\n"
}

/// The comparison for tools, as `Comparison` serialises.
pub fn json(c: &Comparison) -> String {
    // Plain structs of strings cannot fail to serialise; should that change, say so in the output.
    serde_json::to_string_pretty(c).unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }).to_string())
}

/// The last line of `text`: how much differs and whether a check broke.
fn summary(c: &Comparison) -> String {
    let mut s = counts(c);
    if !c.only_in_base.is_empty() {
        s += &format!("; {} only in base", c.only_in_base.len());
    }
    if !c.only_in_head.is_empty() {
        s += &format!("; {} only in head", c.only_in_head.len());
    }
    if c.breaks.is_empty() {
        s + "; no check broken"
    } else {
        format!(
            "{s}; {} broken: {}",
            plural(c.breaks.len(), "check"),
            c.breaks.join(", ")
        )
    }
}

/// `N differences in M of C scenarios` (or `no difference in C scenarios compared`).
fn counts(c: &Comparison) -> String {
    let compared = c.compared.len();
    let with: BTreeSet<&str> = c.differences.iter().map(|d| d.scenario.as_str()).collect();
    let n = plural(c.differences.len(), "difference");
    if c.differences.is_empty() {
        format!("no difference in {} compared", plural(compared, "scenario"))
    } else if with.len() == compared {
        format!("{n} in {}", plural(compared, "scenario"))
    } else {
        format!("{n} in {} of {compared} scenarios compared", with.len())
    }
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Whether a difference reads better as a diff than as two values.
fn multiline(d: &Difference) -> bool {
    d.aspect == Aspect::Files
        || [&d.base, &d.head]
            .iter()
            .any(|v| v.as_deref().is_some_and(|v| v.contains('\n')))
}

/// A single-line difference's two values cut to the column width, or `None` when it needs more room: a
/// multi-line value, or a cut that leaves both sides looking the same.
fn columns(d: &Difference) -> Option<(String, String)> {
    let (base, head) = (truncate(&shown(&d.base), SIDE), truncate(&shown(&d.head), SIDE));
    (!multiline(d) && base != head).then_some((base, head))
}

/// Base to head as a unified diff, an absent side as empty.
fn unified(d: &Difference) -> String {
    let (base, head) = (d.base.as_deref().unwrap_or(""), d.head.as_deref().unwrap_or(""));
    TextDiff::from_lines(base, head)
        .unified_diff()
        .context_radius(2)
        .header("base", "head")
        .to_string()
}

/// A note after a key whose value exists on one side only.
fn presence(d: &Difference) -> &'static str {
    match (&d.base, &d.head) {
        (None, Some(_)) => " (only in head)",
        (Some(_), None) => " (only in base)",
        _ => "",
    }
}

/// A value as the text columns show it: `-` when absent, `""` when empty.
fn shown(v: &Option<String>) -> String {
    match v.as_deref() {
        None => "-".to_string(),
        Some("") => "\"\"".to_string(),
        Some(v) => one_line(v),
    }
}

fn one_line(v: &str) -> String {
    v.replace(['\n', '\r'], " ")
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// `s` as Markdown inline code that survives a table: `|` escaped, backticks inside fenced by more backticks.
fn code(s: &str) -> String {
    if s.is_empty() {
        return "`\"\"`".to_string();
    }
    let s = s.replace('|', "\\|");
    let ticks = "`".repeat(longest_run(&s, '`') + 1);
    if ticks.len() > 1 {
        format!("{ticks} {s} {ticks}")
    } else {
        format!("`{s}`")
    }
}

/// The longest run of `ch` in `s` (so a fence can be longer).
fn longest_run(s: &str, ch: char) -> usize {
    s.split(|c| c != ch).map(str::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diff(node: Option<&str>, aspect: Aspect, key: &str, base: Option<&str>, head: Option<&str>) -> Difference {
        Difference {
            scenario: "basic-bootstrap-token".into(),
            node: node.map(String::from),
            aspect,
            key: key.into(),
            base: base.map(String::from),
            head: head.map(String::from),
        }
    }

    fn sample() -> Comparison {
        let w = Some("worker-0");
        Comparison {
            differences: vec![
                diff(
                    None,
                    Aspect::Checks,
                    "worker-0/labels",
                    Some("PASS"),
                    Some("FAIL (a|b)"),
                ),
                diff(w, Aspect::Node, "capacity.pods", Some("29"), Some("110")),
                diff(w, Aspect::Configz, "kubeletconfig.maxPods", Some("29"), Some("110")),
                diff(
                    w,
                    Aspect::KubeletArgs,
                    "--node-labels",
                    Some(&"x".repeat(60)),
                    Some(&"x".repeat(61)),
                ),
                diff(w, Aspect::KubeletArgs, "--v", Some("2"), None),
                diff(
                    w,
                    Aspect::Files,
                    "/etc/kubernetes/kubelet/kubelet-config.json",
                    Some("{\n  \"maxPods\": 29\n}\n"),
                    Some("{\n  \"maxPods\": 110\n}\n"),
                ),
            ],
            breaks: vec!["basic-bootstrap-token: worker-0/labels".into()],
            only_in_base: vec![],
            only_in_head: vec!["new-scenario".into()],
            compared: vec!["basic-bootstrap-token".into(), "other".into()],
        }
    }

    #[test]
    fn text_shows_keys_values_diffs_and_summary() {
        let out = text(&sample());
        assert!(out.contains("basic-bootstrap-token / worker-0\n  Node\n"), "{out}");
        let line = out
            .lines()
            .find(|l| l.contains("kubeletconfig.maxPods"))
            .unwrap_or_default();
        assert_eq!(line, "    kubeletconfig.maxPods  29   | 110");
        assert!(out.contains("  /configz\n"), "{out}");
        assert!(
            out.contains("      -  \"maxPods\": 29\n      +  \"maxPods\": 110\n"),
            "{out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with("    --v ") && l.contains(" 2 ") && l.ends_with(" | -")),
            "{out}"
        );
        // The cut would hide where the long values differ: both shown in full.
        assert!(out.contains(&format!("      + {}\n", "x".repeat(61))), "{out}");
        assert!(out.contains("only in head: new-scenario"), "{out}");
        let last = out.lines().last().unwrap_or_default();
        assert_eq!(
            last,
            "6 differences in 1 of 2 scenarios compared; 1 only in head; 1 check broken: \
             basic-bootstrap-token: worker-0/labels"
        );
    }

    #[test]
    fn text_cuts_long_values_to_keep_columns() {
        let mut c = sample();
        c.differences = vec![diff(None, Aspect::Configz, "k", Some(&"a".repeat(80)), Some("b"))];
        c.breaks.clear();
        let out = text(&c);
        assert!(out.contains(&format!("{}… | b", "a".repeat(SIDE - 1))), "{out}");
        assert!(out.ends_with("no check broken\n"), "{out}");
    }

    #[test]
    fn markdown_has_verdict_table_escapes_and_diff() {
        let out = markdown(&sample());
        assert!(out.starts_with("### nodejoin compare\n"), "{out}");
        assert!(out.contains("❌ 1 check broken:"), "{out}");
        assert!(out.contains("\n6 differences in 1 of 2 scenarios compared.\n"), "{out}");
        assert!(
            out.contains("| node | aspect | key | base | head |\n|---|---|---|---|---|\n"),
            "{out}"
        );
        assert!(out.contains("`FAIL (a\\|b)`"), "{out}");
        assert!(
            out.contains("| `worker-0` | /configz | `kubeletconfig.maxPods` | `29` | `110` |"),
            "{out}"
        );
        assert!(out.contains("| `2` | - |"), "{out}");
        assert!(out.contains("```diff\n--- base\n+++ head\n"), "{out}");
        assert!(out.contains("-  \"maxPods\": 29\n+  \"maxPods\": 110\n"), "{out}");
        let mut ok = sample();
        ok.breaks.clear();
        assert!(markdown(&ok).contains("✅ no check broken"));
    }

    #[test]
    fn markdown_code_survives_backticks() {
        assert_eq!(code("a`b"), "`` a`b ``");
        assert_eq!(code("plain"), "`plain`");
    }

    #[test]
    fn json_parses_back_with_differences() {
        let v: serde_json::Value = serde_json::from_str(&json(&sample())).unwrap();
        let diffs = v["differences"].as_array().unwrap();
        assert_eq!(diffs.len(), 6);
        assert_eq!(diffs[2]["aspect"], "configz");
        assert_eq!(diffs[3]["aspect"], "kubelet-args");
        assert_eq!(diffs[4]["head"], serde_json::Value::Null);
        assert_eq!(v["breaks"][0], "basic-bootstrap-token: worker-0/labels");
    }

    #[test]
    fn an_empty_comparison_says_no_difference() {
        let c = Comparison {
            compared: vec!["a".into(), "b".into()],
            ..Default::default()
        };
        assert_eq!(text(&c), "no difference in 2 scenarios compared; no check broken\n");
        assert!(markdown(&c).contains("No difference in 2 scenarios."));
        assert_eq!(
            text(&Comparison::default()),
            "no difference in 0 scenarios compared; no check broken\n"
        );
    }
}
