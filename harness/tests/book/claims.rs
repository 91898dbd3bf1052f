//! The book's claims held to the code: every `NODEJOIN_*` variable the code, the scripts and the action read is
//! documented; every property of the scenario schema is described and its defaults are values, not Rust's debug
//! form. (That the command-line page lists every flag and `--help` describes each is the binary's own test:
//! `src/bin/nodejoin/cli.rs`.)
use super::common::root;
use std::collections::BTreeSet;
use std::path::Path;

/// Every file under `dir` (recursively) whose name ends with one of `exts`.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, exts, out);
        } else if exts.iter().any(|x| p.to_string_lossy().ends_with(x)) {
            out.push(p);
        }
    }
}

/// The whole book as one text.
fn book() -> String {
    let mut pages = Vec::new();
    files(&root().join("docs/src"), &[".md"], &mut pages);
    pages
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect()
}

/// Every `NODEJOIN_` name in `text`.
fn names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find("NODEJOIN_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(tail.len());
        let name = tail[..end].trim_end_matches('_');
        if name.len() > "NODEJOIN_".len() {
            out.insert(name.to_string());
        }
        rest = &tail[end.max(1)..];
    }
    out
}

#[test]
fn every_variable_is_documented() {
    let r = root();
    let mut sources = Vec::new();
    for dir in ["harness/src", "ci", "fixtures", "kind-config"] {
        files(
            &r.join(dir),
            &[".rs", ".sh", ".yml", ".yaml", "run", "entrypoint", "shim"],
            &mut sources,
        );
    }
    for f in ["action.yml", ".ci/run", "harness/build.rs"] {
        sources.push(r.join(f));
    }
    let book = book();
    let tools: Vec<String> = nodejoin::settings::TOOLS
        .iter()
        .map(|t| format!("NODEJOIN_{t}"))
        .collect();
    // Families the book documents as one: the action's own, the guest's, a tool's binary and version, EC2's DMI.
    let family = |n: &str| {
        (n.starts_with("NODEJOIN_ACTION_") && book.contains("NODEJOIN_ACTION_*"))
            || (n.starts_with("NODEJOIN_VM_") && book.contains("NODEJOIN_VM_*"))
            || (n.starts_with("NODEJOIN_DMI_") && book.contains("NODEJOIN_DMI_<FILE>"))
            || tools.iter().any(|t| {
                (n == t && book.contains("NODEJOIN_<TOOL>"))
                    || (n == format!("{t}_VERSION") && book.contains("NODEJOIN_<TOOL>_VERSION"))
            })
    };
    let mut missing = BTreeSet::new();
    for f in &sources {
        for n in names(&std::fs::read_to_string(f).unwrap_or_default()) {
            if !book.contains(&n) && !family(&n) {
                missing.insert(format!("{n} ({})", f.strip_prefix(&r).unwrap_or(f).display()));
            }
        }
    }
    assert!(missing.is_empty(), "variables the book does not document: {missing:#?}");
}

/// Every property of the scenario schema has a description; a default is a value a user would write.
#[test]
fn every_schema_property_is_described() {
    let schema: serde_json::Value = serde_json::from_str(&nodejoin::scenario::schema::text()).unwrap();
    let mut undescribed = Vec::new();
    let mut debug_defaults = Vec::new();
    walk(&schema, "", &mut undescribed, &mut debug_defaults);
    assert!(
        debug_defaults.is_empty(),
        "defaults in Rust's debug form: {debug_defaults:#?}"
    );
    assert!(
        undescribed.is_empty(),
        "{} properties without a description: {undescribed:#?}",
        undescribed.len()
    );
}

fn walk(v: &serde_json::Value, at: &str, undescribed: &mut Vec<String>, debug: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(props) = m.get("properties").and_then(|p| p.as_object()) {
                for (name, p) in props {
                    let described = p.get("description").is_some()
                        || p.get("allOf")
                            .and_then(|a| a.as_array())
                            .is_some_and(|a| a.iter().any(|x| x.get("description").is_some()));
                    if !described {
                        undescribed.push(format!("{at}/{name}"));
                    }
                }
            }
            if let Some(d) = m.get("default") {
                if d.get("secs").is_some() || d.get("nanos").is_some() {
                    debug.push(format!("{at}: {d}"));
                }
            }
            for (k, child) in m {
                walk(child, &format!("{at}/{k}"), undescribed, debug);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                walk(child, &format!("{at}/{i}"), undescribed, debug);
            }
        }
        _ => {}
    }
}
