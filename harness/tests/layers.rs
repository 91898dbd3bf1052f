//! The library's layers hold: lib.rs lists its modules bottom up, once, and no module's code (tests aside) names a
//! module listed after it. Adding a module means placing it in that list; a back-edge fails here with the file
//! and the path that climbs.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules lib.rs declares, in the order its "Layers" list gives them.
fn layer_order(lib_rs: &str) -> Vec<String> {
    let mut order = Vec::new();
    let mut in_list = false;
    for line in lib_rs.lines() {
        let Some(doc) = line.strip_prefix("//!") else { break };
        if doc.contains("Layers, bottom up") {
            in_list = true;
            continue;
        }
        if !in_list {
            continue;
        }
        // Only a list item names layers (its first part, before the colon); continuation lines explain them.
        let Some(item) = doc.trim_start().strip_prefix("- ") else {
            continue;
        };
        let names = item.split(':').next().unwrap_or_default();
        for quoted in names.split('`').skip(1).step_by(2) {
            order.push(quoted.to_string());
        }
    }
    order
}

fn declared(lib_rs: &str) -> Vec<String> {
    lib_rs
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// A source file's code without its comments and without its test module (`#[cfg(test)]` before a `mod`, which
/// ends the file by convention). A test-only item elsewhere is scanned like the rest: stricter, never blind.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod ")) {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The library's source files that are not test-only: `tests.rs` files, files under a `tests/` folder, and modules
/// their parent declares under `#[cfg(test)]` are left out.
fn library_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        let name = p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if p.is_dir() {
            if name != "tests" && name != "testdata" {
                library_files(&p, out);
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !test_only(&p) {
            out.push(p);
        }
    }
}

/// Whether the parent module declares this file's module under `#[cfg(test)]`.
fn test_only(file: &Path) -> bool {
    let Some(stem) = file.file_stem().map(|s| s.to_string_lossy().into_owned()) else {
        return false;
    };
    let Some(dir) = file.parent() else { return false };
    let parents = [dir.with_extension("rs"), dir.join("mod.rs")];
    parents.iter().any(|parent| {
        std::fs::read_to_string(parent).is_ok_and(|t| {
            let lines: Vec<&str> = t.lines().map(str::trim).collect();
            lines
                .windows(2)
                .any(|w| w[0] == "#[cfg(test)]" && w[1] == format!("mod {stem};"))
        })
    })
}

/// What follows each `prefix` (`crate::`, `super::`) in `code` that starts a path of its own: not preceded by an
/// identifier character, `$` (`$crate::`) or `:` (`super::super::` counts once).
fn after_each<'a>(code: &'a str, prefix: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    code.match_indices(prefix).filter_map(move |(at, _)| {
        let joined = code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$' || c == ':');
        (!joined).then(|| &code[at + prefix.len()..])
    })
}

/// Every `crate::<module>` a file's code names that lies above the file's own module in `order`.
fn back_edges(order: &[String], files: &[(String, String)]) -> Vec<String> {
    let pos: BTreeMap<&str, usize> = order.iter().enumerate().map(|(i, m)| (m.as_str(), i)).collect();
    let mut found = Vec::new();
    for (rel, text) in files {
        let own = rel.split('/').next().unwrap_or_default().trim_end_matches(".rs");
        let Some(&own_pos) = pos.get(own) else { continue };
        let code = code(text);
        for rest in after_each(&code, "crate::") {
            let target: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if let Some(&target_pos) = pos.get(target.as_str()) {
                if target_pos > own_pos {
                    found.push(format!(
                        "{rel}: `crate::{target}`: {own} may not use {target}, which lib.rs lists above it"
                    ));
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn every_module_is_placed_once_and_none_uses_a_module_above_it() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let order = layer_order(&lib);
    let mut sorted = order.clone();
    sorted.sort();
    let mut modules = declared(&lib);
    modules.sort();
    assert_eq!(
        sorted, modules,
        "lib.rs's layer list must name each module it declares, once"
    );

    let mut files = Vec::new();
    library_files(&src(), &mut files);
    let files: Vec<(String, String)> = files
        .iter()
        .filter(|p| !p.starts_with(src().join("bin")))
        .map(|p| {
            let rel = p.strip_prefix(src()).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    assert!(files.len() > 100, "{} files", files.len());
    let uses = files
        .iter()
        .map(|(_, t)| code(t).matches("crate::").count())
        .sum::<usize>();
    assert!(uses > 300, "only {uses} crate:: paths found: the scan is broken");
    let found = back_edges(&order, &files);
    assert!(found.is_empty(), "{} back-edge(s):\n{}", found.len(), found.join("\n"));
}

#[test]
fn a_deliberate_back_edge_is_caught_and_comments_and_tests_are_not() {
    let order: Vec<String> = ["paths", "pki", "run"].map(String::from).into();
    let file = |rel: &str, text: &str| vec![(rel.to_string(), text.to_string())];
    let caught = back_edges(
        &order,
        &file("pki/ca.rs", "use crate::paths;\nuse crate::run::report::Outcome;\n"),
    );
    assert_eq!(caught.len(), 1, "{caught:?}");
    assert!(
        caught[0].contains("pki/ca.rs") && caught[0].contains("crate::run"),
        "{caught:?}"
    );
    // An expression path counts as much as a `use`.
    assert_eq!(
        back_edges(&order, &file("pki.rs", "fn f() { crate::run::go(); }\n")).len(),
        1
    );
    // Code after a test-only item is still read.
    let after_item = "#[cfg(test)]\nfn probe() {}\nfn f() { crate::run::go(); }\n";
    assert_eq!(back_edges(&order, &file("pki.rs", after_item)).len(), 1);
    // Downward, in a comment, or in a test module: fine.
    let fine = "use crate::paths;\n// see crate::run\n/// crate::run::x\nfn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::run;\n}\n";
    assert!(back_edges(&order, &file("pki/ca.rs", fine)).is_empty());
    assert!(back_edges(&order, &file("run/x.rs", "use crate::pki;\n")).is_empty());
}

/// A file's module path (`node/container.rs` → `node::container`, `run/env/mod.rs` → `run::env`).
fn module_of(rel: &str) -> Vec<String> {
    let trimmed = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = trimmed.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The file a module path names, if one does (the longest prefix of `path` that is a module file).
fn file_of(path: &[String], files: &BTreeMap<String, ()>) -> Option<String> {
    (1..=path.len()).rev().find_map(|n| {
        let joined = path[..n].join("/");
        [format!("{joined}.rs"), format!("{joined}/mod.rs")]
            .into_iter()
            .find(|f| files.contains_key(f))
    })
}

/// The other files of the crate a file's code names (`crate::a::b`, `super::x`), as relative paths.
fn file_uses(rel: &str, text: &str, files: &BTreeMap<String, ()>) -> std::collections::BTreeSet<String> {
    let own = module_of(rel);
    let code = code(text);
    let mut used = std::collections::BTreeSet::new();
    let word = |s: &str| -> Vec<String> {
        s.split("::")
            .map(|p| {
                p.chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect::<String>()
            })
            .take_while(|p| !p.is_empty())
            .collect()
    };
    for rest in after_each(&code, "crate::") {
        if let Some(f) = file_of(&word(rest), files) {
            used.insert(f);
        }
    }
    for rest in after_each(&code, "super::") {
        let mut path = own.clone();
        path.pop();
        path.extend(word(rest));
        if let Some(f) = file_of(&path, files) {
            used.insert(f);
        }
    }
    used.remove(rel);
    used
}

/// Pairs of files that use each other, other than a module and the files of its own children.
fn cycles(files: &[(String, String)]) -> Vec<String> {
    let names: BTreeMap<String, ()> = files.iter().map(|(r, _)| (r.clone(), ())).collect();
    let uses: BTreeMap<&str, std::collections::BTreeSet<String>> = files
        .iter()
        .map(|(r, t)| (r.as_str(), file_uses(r, t, &names)))
        .collect();
    let mut found = Vec::new();
    for (a, used) in &uses {
        for b in used {
            let (ma, mb) = (module_of(a), module_of(b));
            let nested = mb.starts_with(&ma) || ma.starts_with(&mb);
            if a < &b.as_str() && !nested && uses.get(b.as_str()).is_some_and(|u| u.contains(*a)) {
                found.push(format!("{a} and {b} use each other"));
            }
        }
    }
    found
}

#[test]
fn no_two_files_use_each_other() {
    let mut files = Vec::new();
    library_files(&src(), &mut files);
    let files: Vec<(String, String)> = files
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(src()).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    let found = cycles(&files);
    assert!(found.is_empty(), "{} circle(s):\n{}", found.len(), found.join("\n"));
}

#[test]
fn a_deliberate_circle_is_caught_and_a_module_and_its_children_are_not() {
    let f = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let circle = [
        f("node/container.rs", "use super::journal::HostJournal;\n"),
        f("node/journal.rs", "use crate::node::container::NodeFile;\n"),
        f("node/mod.rs", "pub mod container;\npub mod journal;\n"),
    ];
    assert_eq!(
        cycles(&circle),
        ["node/container.rs and node/journal.rs use each other"]
    );
    let family = [
        f("run/pipeline/mod.rs", "use crate::run::pipeline::boot::ACTION;\n"),
        f("run/pipeline/boot/mod.rs", "use super::{Action, Context};\n"),
    ];
    assert!(cycles(&family).is_empty(), "{:?}", cycles(&family));
    let one_way = [
        f("node/image.rs", "fn f() {}\n"),
        f("node/eks_ami.rs", "use super::image::NodeImage;\n"),
    ];
    assert!(cycles(&one_way).is_empty());
}

/// The uses between the children of each folder (its subfolders and files, its own `mod.rs` left out: a module
/// and its children are one family), as `folder -> (child, child)` pairs, from every file's uses.
fn child_uses(files: &[(String, String)]) -> BTreeMap<String, std::collections::BTreeSet<(String, String)>> {
    let names: BTreeMap<String, ()> = files.iter().map(|(r, _)| (r.clone(), ())).collect();
    let mut out: BTreeMap<String, std::collections::BTreeSet<(String, String)>> = BTreeMap::new();
    for (rel, text) in files {
        let from = module_of(rel);
        for used in file_uses(rel, text, &names) {
            let to = module_of(&used);
            // The folder both sit in, and the child of it each belongs to.
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            let (Some(a), Some(b)) = (from.get(common), to.get(common)) else {
                continue; // one is the other's module: a family
            };
            out.entry(from[..common].join("/"))
                .or_default()
                .insert((a.clone(), b.clone()));
        }
    }
    out
}

/// Circles between the children of any folder (folders included: `a/` uses `b/` and `b/` uses `a/`), each named
/// once with the path that closes it.
fn folder_cycles(files: &[(String, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for (folder, edges) in child_uses(files) {
        let next = |u: &str| -> Vec<String> { edges.iter().filter(|(a, _)| a == u).map(|(_, b)| b.clone()).collect() };
        for (a, b) in &edges {
            // A path from b back to a closes the circle a -> b -> ... -> a.
            let mut seen = std::collections::BTreeSet::new();
            let mut stack = vec![vec![b.clone()]];
            while let Some(path) = stack.pop() {
                let last = path.last().cloned().unwrap_or_default();
                if &last == a {
                    let mut circle = vec![a.clone()];
                    circle.extend(path);
                    let smallest = circle[..circle.len() - 1].iter().min().cloned().unwrap_or_default();
                    if a == &smallest {
                        found.push(format!("in {}/: {}", folder, circle.join(" -> ")));
                    }
                    break;
                }
                if seen.insert(last.clone()) {
                    for n in next(&last) {
                        let mut p = path.clone();
                        p.push(n);
                        stack.push(p);
                    }
                }
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

fn all_library_files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    library_files(&src(), &mut files);
    files
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(src()).unwrap().to_string_lossy().into_owned();
            (rel, std::fs::read_to_string(p).unwrap())
        })
        .collect()
}

/// Circles between folders' children that are known and accepted, each with its reason; none is left. A new one
/// fails the test, and so does an entry here once its circle is gone.
const KNOWN_CIRCLES: &[&str] = &[];

#[test]
fn no_two_folders_use_each_other() {
    let files = all_library_files();
    let found = folder_cycles(&files);
    let new: Vec<&String> = found.iter().filter(|c| !KNOWN_CIRCLES.contains(&c.as_str())).collect();
    let gone: Vec<&&str> = KNOWN_CIRCLES
        .iter()
        .filter(|k| !found.iter().any(|c| c == *k))
        .collect();
    assert!(new.is_empty(), "{} circle(s) between folders:\n{new:#?}", new.len());
    assert!(
        gone.is_empty(),
        "no longer a circle: take it out of KNOWN_CIRCLES: {gone:?}"
    );
}

#[test]
fn a_deliberate_circle_between_folders_is_caught() {
    let f = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    // No two files use each other, but boot/ and bootstrap/ do, through different files.
    let circle = [
        f("run/pipeline/mod.rs", "mod boot;\nmod bootstrap;\n"),
        f(
            "run/pipeline/boot/nodes.rs",
            "use crate::run::pipeline::bootstrap::userdata::build;\n",
        ),
        f("run/pipeline/boot/mod.rs", "pub mod nodes;\n"),
        f("run/pipeline/bootstrap/userdata.rs", "fn build() {}\n"),
        f(
            "run/pipeline/bootstrap/mod.rs",
            "mod userdata;\nuse crate::run::pipeline::boot::nodes::go;\n",
        ),
    ];
    assert!(cycles(&circle).is_empty(), "no pair of files: {:?}", cycles(&circle));
    assert_eq!(folder_cycles(&circle), ["in run/pipeline/: boot -> bootstrap -> boot"]);
    // Three folders in a ring are caught too; one way is not.
    let ring = [
        f("x/a/m.rs", "use crate::x::b::n;\n"),
        f("x/b/n.rs", "use crate::x::c::o;\n"),
        f("x/c/o.rs", "use crate::x::a::m;\n"),
    ];
    assert_eq!(folder_cycles(&ring), ["in x/: a -> b -> c -> a"]);
    assert!(folder_cycles(&ring[..2]).is_empty());
}

/// The pipeline's steps in the order `run/pipeline/mod.rs` runs them (its `PIPELINE`, then teardown).
fn pipeline_order(mod_rs: &str) -> Vec<String> {
    let list = mod_rs.split("const PIPELINE").nth(1).unwrap_or_default();
    let list = list.split("];").next().unwrap_or_default();
    let mut order: Vec<String> = Vec::new();
    for step in list.lines().filter_map(|l| l.trim().split("::").next()) {
        if !step.is_empty()
            && step.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            && !order.iter().any(|s| s == step)
        {
            order.push(step.to_string());
        }
    }
    order.push("teardown".into());
    order
}

/// Each step's folder uses only the steps before it.
fn steps_using_later_ones(order: &[String], files: &[(String, String)]) -> Vec<String> {
    let at = |s: &str| order.iter().position(|o| o == s);
    let uses = child_uses(files);
    let mut found = Vec::new();
    for (a, b) in uses.get("run/pipeline").into_iter().flatten() {
        if let (Some(i), Some(j)) = (at(a), at(b)) {
            if j > i {
                found.push(format!("run/pipeline/{a} uses {b}, a step after it"));
            }
        }
    }
    found
}

#[test]
fn each_pipeline_step_uses_only_the_steps_before_it() {
    let mod_rs = std::fs::read_to_string(src().join("run/pipeline/mod.rs")).unwrap();
    let order = pipeline_order(&mod_rs);
    assert_eq!(
        order,
        [
            "provision",
            "boot",
            "announce",
            "bootstrap",
            "observe",
            "assertions",
            "after",
            "snapshot",
            "artifacts",
            "teardown"
        ]
    );
    let found = steps_using_later_ones(&order, &all_library_files());
    assert!(found.is_empty(), "{}", found.join("\n"));
    // A planted use of a later step is caught.
    let f = |rel: &str, text: &str| (rel.to_string(), text.to_string());
    let planted = [
        f(
            "run/pipeline/provision/mod.rs",
            "use crate::run::pipeline::boot::vm::prepare;\n",
        ),
        f("run/pipeline/boot/vm.rs", ""),
    ];
    assert_eq!(
        steps_using_later_ones(&order, &planted),
        ["run/pipeline/provision uses boot, a step after it"]
    );
}

/// Every `.rs` file of the package (sources, tests, the build script) and its line count.
fn line_counts(dir: &Path, out: &mut Vec<(PathBuf, usize)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for p in entries.flatten().map(|e| e.path()) {
        if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
            line_counts(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let lines = std::fs::read_to_string(&p).map(|t| t.lines().count()).unwrap_or(0);
            out.push((p, lines));
        }
    }
}

/// The files over their limit: 250 lines for the CLI's `main.rs` (it parses and dispatches; the rest lives in the
/// library), 600 for any other.
fn over_limit(files: &[(PathBuf, usize)]) -> Vec<String> {
    files
        .iter()
        .filter_map(|(p, lines)| {
            let limit = if p.ends_with("bin/nodejoin/main.rs") { 250 } else { 600 };
            (*lines > limit).then(|| format!("{}: {lines} lines (at most {limit})", p.display()))
        })
        .collect()
}

#[test]
fn no_file_outgrows_its_limit() {
    let mut files = Vec::new();
    line_counts(Path::new(env!("CARGO_MANIFEST_DIR")), &mut files);
    assert!(files.len() > 200, "{} files: the walk is broken", files.len());
    assert!(files.iter().any(|(p, _)| p.ends_with("src/bin/nodejoin/main.rs")));
    let found = over_limit(&files);
    assert!(found.is_empty(), "{}", found.join("\n"));
    // Each limit bites.
    let planted = [
        (PathBuf::from("src/bin/nodejoin/main.rs"), 251),
        (PathBuf::from("src/run/env/mod.rs"), 601),
        (PathBuf::from("src/run/env/lazy.rs"), 600),
    ];
    assert_eq!(over_limit(&planted).len(), 2, "{:?}", over_limit(&planted));
}
