//! Where a key is in a scenario's text, for the checks that need more than one field (serde points at the
//! others itself): the line of a node group, and of a key inside it, so every error names file:line:col.
use super::model::NodeGroup;

/// The line where node group `g` is named (`- name: g` or `{ name: g, ... }`), 1-based.
pub(super) fn group_line(text: &str, g: &NodeGroup) -> Option<usize> {
    named_group_line(text, &g.name)
}

fn named_group_line(text: &str, group: &str) -> Option<usize> {
    let mut from = locate(text, "nodes", 0).map_or(0, |(l, _)| l);
    loop {
        let (line, column) = locate(text, "name", from)?;
        let code = strip_comment(text.lines().nth(line - 1)?);
        let value = code[column - 1 + "name".len()..]
            .trim_start_matches(':')
            .split([',', '}'])
            .next()?
            .trim()
            .trim_matches(|c| c == '"' || c == '\'');
        if value == group {
            return Some(line);
        }
        from = line + 1;
    }
}

/// The first line at or after `after` (1-based; 0 for the start) where `key` appears as a mapping key, or as
/// a plain value (`source: authenticator`), with its 1-based column.
pub(super) fn locate(text: &str, key: &str, after: usize) -> Option<(usize, usize)> {
    text.lines()
        .enumerate()
        .skip(after.saturating_sub(1))
        .find_map(|(i, l)| {
            let code = strip_comment(l);
            let mut from = 0;
            while let Some(found) = code[from..].find(key) {
                let at = from + found;
                let before = code[..at].chars().next_back();
                let after = code[at + key.len()..].chars().next();
                let starts = before.is_none_or(|c| c.is_whitespace() || matches!(c, '{' | ',' | '-' | '['));
                let ends = after.is_none_or(|c| c == ':' || c.is_whitespace() || matches!(c, ',' | '}' | ']'));
                if starts && ends {
                    return Some((i + 1, at + 1));
                }
                from = at + key.len();
            }
            None
        })
}

/// A line without its `# comment` (a `#` after a space, or at the start).
fn strip_comment(line: &str) -> &str {
    if line.trim_start().starts_with('#') {
        return "";
    }
    match line.find(" #") {
        Some(i) => &line[..i],
        None => line,
    }
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
    let start = named_group_line(text, group)?;
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.get(start - 1)?;
    // The group's item starts at its `- `; the next item at the same column (or anything less indented) ends it.
    let dash = first.find('-').unwrap_or(0);
    let end = lines
        .iter()
        .enumerate()
        .skip(start)
        .find(|(_, l)| {
            let code = strip_comment(l);
            let indent = code.len() - code.trim_start().len();
            !code.trim().is_empty() && (indent < dash || (indent == dash && code.trim_start().starts_with('-')))
        })
        .map_or(lines.len(), |(i, _)| i);
    let named = locate(text, "name", start);
    keys.iter()
        .find_map(|key| locate(text, key, start).filter(|(line, _)| *line <= end))
        .or(named)
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

    #[test]
    fn keys_are_found_as_keys_not_inside_words() {
        let text = "# identity: here is a comment\nnodes:\n  - name: a\n    expect: { joins: true, identity: {} }\n  - name: b\n    expect:\n      identityX: 1\n      identity:\n";
        assert_eq!(locate(text, "identity", 0), Some((4, 28)));
        assert_eq!(locate(text, "identity", 5), Some((8, 7)));
        assert_eq!(locate(text, "nodes", 0), Some((2, 1)));
        assert_eq!(locate(text, "missing", 0), None);
    }
}
