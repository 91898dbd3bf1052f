//! The book (`docs/`) and README hold together: every page is in SUMMARY.md and every SUMMARY.md entry is a page,
//! every relative link names a file that exists and, with `#anchor`, a heading of that page (as mdBook makes
//! heading ids), and README stays short. `.ci/run` renders the book with a pinned mdBook (`ci/book.sh`), which
//! checks none of this.
use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

mod common;
use common::root;

/// A link in a Markdown file: its target as written.
fn links(markdown: &str) -> Vec<String> {
    Parser::new(markdown)
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .collect()
}

/// The ids mdBook gives a page's headings: the text, lower-cased, with spaces as `-` and everything but
/// letters, digits, `-` and `_` dropped; a repeated id gets `-1`, `-2`...
fn heading_ids(markdown: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut text: Option<String> = None;
    for e in Parser::new(markdown) {
        match e {
            Event::Start(Tag::Heading { .. }) => text = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(s) = text.as_mut() {
                    s.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let words = text.take().unwrap_or_default();
                let base: String = words
                    .trim()
                    .to_lowercase()
                    .chars()
                    .filter_map(|c| match c {
                        ' ' => Some('-'),
                        c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                        _ => None,
                    })
                    .collect();
                let mut id = base.clone();
                let mut n = 1;
                while ids.contains(&id) {
                    id = format!("{base}-{n}");
                    n += 1;
                }
                ids.insert(id);
            }
            _ => {}
        }
    }
    ids
}

/// The broken relative links of `file`: `file: target (why)`.
fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut broken = Vec::new();
    for target in links(&text) {
        if target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        let (path, anchor) = match target.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (target.as_str(), None),
        };
        let dest = if path.is_empty() {
            file.to_path_buf()
        } else {
            file.parent().unwrap_or(Path::new(".")).join(path)
        };
        if !dest.exists() {
            broken.push(format!("{}: {target} (no such file)", file.display()));
            continue;
        }
        if let Some(anchor) = anchor {
            let page = std::fs::read_to_string(&dest).unwrap_or_default();
            if !heading_ids(&page).contains(anchor) {
                broken.push(format!("{}: {target} (no heading #{anchor} there)", file.display()));
            }
        }
    }
    broken
}

/// Every Markdown file under `dir`.
fn pages(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(pages(&p));
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn every_link_of_the_book_and_readme_resolves() {
    let src = root().join("docs/src");
    let mut files = pages(&src);
    files.push(root().join("README.md"));
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    let relative = files
        .iter()
        .flat_map(|f| links(&std::fs::read_to_string(f).unwrap_or_default()))
        .filter(|l| !l.contains("://"))
        .count();
    assert!(
        relative >= 40,
        "only {relative} relative links were found: is the book where this test looks?"
    );
}

#[test]
fn summary_lists_every_page_once() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: Vec<PathBuf> = links(&summary).iter().map(|l| src.join(l)).collect();
    let unique: BTreeSet<&PathBuf> = listed.iter().collect();
    assert_eq!(unique.len(), listed.len(), "a page is listed twice in SUMMARY.md");
    for page in pages(&src).into_iter().filter(|p| !p.ends_with("SUMMARY.md")) {
        assert!(listed.contains(&page), "{} is not in SUMMARY.md", page.display());
    }
    for l in &listed {
        assert!(l.is_file(), "SUMMARY.md lists {}, which does not exist", l.display());
    }
}

#[test]
fn a_broken_link_or_anchor_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.md"), "# Page B\n\n## Exit codes of `nodejoin run`\n").unwrap();
    let a = dir.path().join("a.md");
    std::fs::write(
        &a,
        "[ok](b.md) [ok](b.md#exit-codes-of-nodejoin-run) [web](https://example.com/x.md)\n\
         [gone](c.md) [no anchor](b.md#exit-codes) [self](#nowhere)\n",
    )
    .unwrap();
    let broken = broken_links(&a);
    assert_eq!(broken.len(), 3, "{broken:?}");
    assert!(broken[0].ends_with("c.md (no such file)"), "{broken:?}");
    assert!(
        broken[1].contains("b.md#exit-codes (no heading #exit-codes there)"),
        "{broken:?}"
    );
    assert!(broken[2].contains("#nowhere"), "{broken:?}");
}

#[test]
fn headings_get_mdbooks_ids() {
    let ids =
        heading_ids("# Providers\n## Skips, required providers and nextest\n## What k3s needs\n## What k3s needs\n");
    let want: BTreeSet<String> = [
        "providers",
        "skips-required-providers-and-nextest",
        "what-k3s-needs",
        "what-k3s-needs-1",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(ids, want);
}

#[test]
fn readme_is_short() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines; the rest belongs in the book (docs/)"
    );
}

/// The checks page's table is the checks registry (`run::pipeline::assertions::registry`): a
/// check added, renamed or reworded in code without its row here fails, and so does a row with no check behind it.
#[test]
fn the_checks_page_is_the_checks_registry() {
    let page = std::fs::read_to_string(root().join("docs/src/reference/checks.md")).expect("checks.md");
    let table = nodejoin::run::pipeline::assertions::registry::checks_table();
    assert!(
        page.contains(&table),
        "docs/src/reference/checks.md's table is not the registry's; replace it with:\n{table}"
    );
    let rows = page.lines().filter(|l| l.starts_with("| `")).count();
    assert_eq!(
        rows,
        nodejoin::run::pipeline::assertions::registry::all_checks().len(),
        "a row with no check behind it"
    );
}

#[path = "book/claims.rs"]
mod claims;
