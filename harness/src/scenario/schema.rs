//! The JSON Schema of scenario files, generated from the very types the loader deserializes, so an editor
//! (yaml-language-server: VS Code, Neovim, Helix) completes fields, shows their docs and flags a misspelt one as it
//! is typed. Draft 7, the draft editors support best. The bundled scenarios' copy is checked in beside them
//! ([`BUNDLED`]) and kept current by a test; `nodejoin schema` prints it and `nodejoin init` writes it.
use super::model::Scenario;

/// The schema's file name, beside the scenarios that name it.
pub const FILE_NAME: &str = "nodejoin.schema.json";

/// The checked-in copy, relative to the workspace root.
pub const BUNDLED: &str = "scenarios/nodejoin.schema.json";

/// The first line of a scenario that uses the schema beside it (yaml-language-server resolves the path from
/// the file's own folder).
pub fn modeline(schema_path: &str) -> String {
    format!("# yaml-language-server: $schema={schema_path}")
}

/// The schema, pretty-printed, with a trailing newline.
pub fn text() -> String {
    let mut schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<Scenario>();
    schema.insert("title".into(), "nodejoin scenario".into());
    schema.insert(
        "description".into(),
        "A nodejoin scenario: a cluster, node groups that bootstrap into it, and what the cluster must see \
         (docs/src/reference/scenario-format.md)."
            .into(),
    );
    let mut schema = schema.to_value();
    without_null(&mut schema);
    let mut s = serde_json::to_string_pretty(&schema).unwrap_or_default();
    s.push('\n');
    s
}

/// An optional field is left out, never written `null` (the loader's checked values refuse null): `null`
/// leaves every type list and `anyOf`, and `"default": null` goes.
fn without_null(v: &mut serde_json::Value) {
    use serde_json::Value;
    let is_null = |t: &Value| {
        t == "null" || t.get("type").is_some_and(|t| t == "null") && t.as_object().is_some_and(|o| o.len() == 1)
    };
    match v {
        Value::Object(map) => {
            if map.get("default").is_some_and(Value::is_null) {
                map.remove("default");
            }
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| !is_null(t));
                if types.len() == 1 {
                    let only = types.remove(0);
                    map.insert("type".into(), only);
                }
            }
            if let Some(Value::Array(any)) = map.get_mut("anyOf") {
                any.retain(|t| !is_null(t));
                if any.len() == 1 {
                    if let Some(Value::Object(one)) = any.pop() {
                        map.remove("anyOf");
                        map.extend(one);
                    }
                }
            }
            map.values_mut().for_each(without_null);
        }
        Value::Array(items) => items.iter_mut().for_each(without_null),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> serde_json::Value {
        serde_json::from_str(&text()).unwrap()
    }

    #[test]
    fn every_struct_refuses_unknown_fields_as_the_loader_does() {
        let s = schema();
        assert_eq!(s["additionalProperties"], false, "the top level");
        let defs = s["definitions"].as_object().unwrap();
        let open: Vec<&String> = defs
            .iter()
            .filter(|(_, d)| d.get("properties").is_some() && d["additionalProperties"] != false)
            .map(|(n, _)| n)
            .collect();
        assert!(open.is_empty(), "definitions that accept unknown fields: {open:?}");
        assert!(defs.len() > 20, "{} definitions", defs.len());
    }

    #[test]
    fn values_the_loader_reads_as_text_are_text_in_the_schema() {
        let s = schema();
        let d = &s["definitions"];
        assert_eq!(d["Expect"]["properties"]["within"]["type"], "string");
        assert_eq!(d["Imds"]["properties"]["hopLimit"]["maximum"], 64);
        let providers = d["Provider"]["enum"].as_array().unwrap();
        assert_eq!(providers.len(), crate::cluster::REGISTRY.len());
        assert!(d["Network"]["properties"]["vpcCidrs"]["items"]["type"] == "string");
        assert!(s["properties"]["nodes"].is_object() && s["required"] == serde_json::json!(["nodes"]));
        assert!(!text().contains("null"), "an optional field is left out, never null");
    }
}
