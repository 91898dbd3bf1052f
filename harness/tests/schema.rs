//! The scenario schema (`nodejoin schema`) is what the loader accepts: the checked-in copy is current, every
//! bundled scenario passes a JSON Schema validator (boon, draft 7, as editors use it), names the schema in its
//! first line, and a misspelt field is flagged by the validator and by the loader, each with where it is.
use std::path::PathBuf;

mod common;
use common::root;

fn validator() -> (boon::Schemas, boon::SchemaIndex) {
    let schema: serde_json::Value = serde_json::from_str(&nodejoin::scenario::schema::text()).unwrap();
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.add_resource("file:///nodejoin.schema.json", schema).unwrap();
    let index = compiler.compile("file:///nodejoin.schema.json", &mut schemas).unwrap();
    (schemas, index)
}

fn as_json(yaml: &str) -> serde_json::Value {
    serde_yaml_ng::from_str(yaml).unwrap()
}

/// Every scenario file the repository ships: `scenarios/`, the cgroup v2 guest's deliberate break and the own-disk
/// scenarios.
fn bundled() -> Vec<PathBuf> {
    let mut files = nodejoin::scenario::discover(&[root().join("scenarios"), root().join("ci/own-disk")]).unwrap();
    files.push(root().join("ci/cgroup2-vm/break-cgroupfs.yaml"));
    files
}

#[test]
fn the_checked_in_schema_is_current() {
    let path = root().join(nodejoin::scenario::schema::BUNDLED);
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == nodejoin::scenario::schema::text(),
        "{} is not what the scenario model generates: run `cargo run --bin nodejoin -- schema > {}`",
        path.display(),
        nodejoin::scenario::schema::BUNDLED
    );
    // What the command prints is that file.
    let out = common::nodejoin().arg("schema").output().unwrap();
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout) == checked_in,
        "`nodejoin schema` differs from {}",
        path.display()
    );
}

#[test]
fn every_bundled_scenario_passes_the_schema_and_names_it() {
    let (schemas, index) = validator();
    let files = bundled();
    assert!(files.len() > 40, "{} scenario files", files.len());
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if let Err(e) = schemas.validate(&as_json(&text), index) {
            failures.push(format!("{}: {e:#}", f.display()));
        }
        let schema = f
            .parent()
            .map(|d| {
                nodejoin::init::relative(
                    &std::fs::canonicalize(d).unwrap(),
                    &std::fs::canonicalize(root().join(nodejoin::scenario::schema::BUNDLED)).unwrap(),
                )
            })
            .unwrap();
        let first = text.lines().next().unwrap_or_default();
        if first != nodejoin::scenario::schema::modeline(&schema) {
            failures.push(format!(
                "{}: the first line is not `{}`",
                f.display(),
                nodejoin::scenario::schema::modeline(&schema)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_misspelt_field_is_flagged_by_the_schema_and_by_the_loader_with_its_place() {
    let (schemas, index) = validator();
    let good = "nodes:\n  - name: a\n    availabilityZone: us-west-2b\n    expect:\n      within: 60s\n";
    assert!(schemas.validate(&as_json(good), index).is_ok());
    let bad = good.replace("availabilityZone", "availabilityZon");
    let doc = as_json(&bad);
    let said = format!("{:#}", schemas.validate(&doc, index).unwrap_err());
    assert!(said.contains("availabilityZon") && said.contains("/nodes/0"), "{said}");
    // A value of the wrong kind and a field of a nested struct too.
    let bad = good.replace("within: 60s", "within: 60s\n      lables: {a: b}");
    let doc = as_json(&bad);
    let said = format!("{:#}", schemas.validate(&doc, index).unwrap_err());
    assert!(said.contains("lables") && said.contains("/nodes/0/expect"), "{said}");
    let bad = good.replace("name: a", "name: a\n    count: many");
    assert!(schemas.validate(&as_json(&bad), index).is_err());

    let file = root().join("scenarios/misspelt.yaml");
    let e = nodejoin::scenario::load::parse(&good.replace("availabilityZone", "availabilityZon"), &file)
        .unwrap_err()
        .to_string();
    assert!(e.contains("misspelt.yaml:3:") && e.contains("availabilityZon"), "{e}");
}
