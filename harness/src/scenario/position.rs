//! Where a key is in a scenario's text, for the checks that need more than one field (serde points at the
//! others itself): the line of a node group, and of a key inside it, so every error names file:line:col. Read
//! from the YAML parser's own events and their positions (`saphyr-parser`), so comments, quotes and flow style are
//! YAML's, not a line scan's.
use super::model::NodeGroup;
use saphyr_parser::{Event, Parser, ScalarStyle};

/// One scalar of the text: its value, 1-based line and column, whether it is a mapping key, and the node group
/// (index into `nodes`) it is written in.
struct Scalar {
    value: String,
    line: usize,
    column: usize,
    key: bool,
    plain: bool,
    group: Option<usize>,
}

/// A container being read: a mapping (whether its next scalar is a key, and the key being read) or a sequence.
enum Frame {
    Map { expect_key: bool, key: Option<String> },
    Seq,
}

/// Every scalar of `text` in document order; none when it is not YAML.
fn scalars(text: &str) -> Vec<Scalar> {
    let mut out = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    // The depth of the top-level `nodes` sequence, and the group being read in it.
    let mut nodes_at: Option<usize> = None;
    let mut group: Option<usize> = None;
    let mut groups = 0;
    // A value (scalar or container) was read in the innermost mapping: its next scalar is a key again.
    let value_done = |stack: &mut Vec<Frame>| {
        if let Some(Frame::Map { expect_key, key }) = stack.last_mut() {
            *expect_key = true;
            *key = None;
        }
    };
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { return Vec::new() };
        match event {
            Event::Scalar(value, style, ..) => {
                let key = matches!(stack.last(), Some(Frame::Map { expect_key: true, .. }));
                out.push(Scalar {
                    value: value.to_string(),
                    line: span.start.line(),
                    column: span.start.col() + 1,
                    key,
                    plain: style == ScalarStyle::Plain,
                    group,
                });
                match stack.last_mut() {
                    Some(Frame::Map { expect_key, key: k }) if *expect_key => {
                        *expect_key = false;
                        *k = Some(value.to_string());
                    }
                    _ => value_done(&mut stack),
                }
            }
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let top_level_nodes =
                    stack.len() == 1 && matches!(stack.last(), Some(Frame::Map { key: Some(k), .. }) if k == "nodes");
                if matches!(event, Event::MappingStart(..)) && nodes_at == Some(stack.len()) {
                    group = Some(groups);
                    groups += 1;
                }
                stack.push(match event {
                    Event::MappingStart(..) => Frame::Map {
                        expect_key: true,
                        key: None,
                    },
                    _ => Frame::Seq,
                });
                if top_level_nodes && matches!(stack.last(), Some(Frame::Seq)) {
                    nodes_at = Some(stack.len());
                }
            }
            Event::MappingEnd | Event::SequenceEnd => {
                if nodes_at == Some(stack.len()) {
                    nodes_at = None;
                }
                stack.pop();
                if nodes_at.is_some_and(|d| stack.len() == d) {
                    group = None;
                }
                value_done(&mut stack);
            }
            Event::Alias(_) => value_done(&mut stack),
            _ => {}
        }
    }
    out
}

/// The line where node group `g` is named (`- name: g` or `{ name: g, ... }`), 1-based.
pub(super) fn group_line(text: &str, g: &NodeGroup) -> Option<usize> {
    named_group(&scalars(text), &g.name).map(|s| s.line)
}

/// The `name` key of node group `group`.
fn named_group<'a>(all: &'a [Scalar], group: &str) -> Option<&'a Scalar> {
    all.windows(2)
        .find(|w| w[0].key && w[0].value == "name" && w[0].group.is_some() && !w[1].key && w[1].value == group)
        .filter(|w| w[1].group == w[0].group)
        .map(|w| &w[0])
}

/// The first line at or after `after` (1-based; 0 for the start) where `key` appears as a mapping key, or as
/// a plain value (`source: authenticator`), with its 1-based column.
pub(super) fn locate(text: &str, key: &str, after: usize) -> Option<(usize, usize)> {
    scalars(text)
        .iter()
        .find(|s| s.line >= after && s.value == key && (s.key || s.plain))
        .map(|s| (s.line, s.column))
}

/// The line and column of `key` inside node group `g` (from the line naming it to the next group's), else the
/// line naming the group (column of its `name`), else nothing.
pub(super) fn in_group(text: &str, g: &NodeGroup, key: &str) -> Option<(usize, usize)> {
    in_named_group(text, &g.name, &[key])
}

/// The line of the first of `keys` written inside node group `group`, else of the line naming the group:
/// where a failed check's annotation points (the expectation that asked for it, or the node it is about).
pub fn key_line(text: &str, group: &str, keys: &[&str]) -> Option<usize> {
    in_named_group(text, group, keys).map(|(line, _)| line)
}

fn in_named_group(text: &str, group: &str, keys: &[&str]) -> Option<(usize, usize)> {
    let all = scalars(text);
    let named = named_group(&all, group)?;
    let inside = |s: &&Scalar| s.group == named.group;
    keys.iter()
        .find_map(|key| {
            all.iter()
                .filter(inside)
                .find(|s| s.value == *key && (s.key || s.plain))
        })
        .or(Some(named))
        .map(|s| (s.line, s.column))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_found_inside_its_own_group() {
        let text = "nodes:\n  - name: a\n    count: 2\n  - name: b\n    expect:\n      joins: false\n    count: 0\n";
        let g = |name: &str| {
            serde_yaml_ng::from_str::<NodeGroup>(&format!("name: {name}\nbootstrap: {{ args: [x] }}")).unwrap()
        };
        assert_eq!(in_group(text, &g("b"), "count"), Some((7, 5)));
        assert_eq!(in_group(text, &g("a"), "count"), Some((3, 5)));
        // Not written in the group: the line that names it.
        assert_eq!(in_group(text, &g("a"), "joins"), Some((2, 5)));
        assert_eq!(in_group(text, &g("c"), "count"), None);
        assert_eq!(
            key_line(text, "b", &["missing", "joins"]),
            Some(6),
            "the first key written wins"
        );
        assert_eq!(key_line(text, "a", &["joins"]), Some(2));
    }

    /// YAML's own reading: a quoted name, a commented-out group, flow style, a key inside a string.
    #[test]
    fn comments_quotes_and_flow_style_are_yamls() {
        let text = "nodes:\n  # - name: b\n  - name: \"b\"\n    description: \"count: 9\"\n    count: 2\n  - { name: c, count: 3 }\n";
        assert_eq!(key_line(text, "b", &["count"]), Some(5));
        assert_eq!(key_line(text, "c", &["count"]), Some(6));
        assert_eq!(locate(text, "count", 0), Some((5, 5)), "not the one inside the string");
        assert_eq!(key_line("nodes: [", "b", &["count"]), None, "not YAML: no position");
    }

    #[test]
    fn keys_are_found_as_keys_not_inside_words() {
        let text = "# identity: here is a comment\nnodes:\n  - name: a\n    expect: { joins: true, identity: {} }\n  - name: b\n    expect:\n      identityX: 1\n      identity:\n";
        assert_eq!(locate(text, "identity", 0), Some((4, 28)));
        assert_eq!(locate(text, "identity", 5), Some((8, 7)));
        assert_eq!(locate(text, "nodes", 0), Some((2, 1)));
        assert_eq!(locate(text, "missing", 0), None);
    }
}
