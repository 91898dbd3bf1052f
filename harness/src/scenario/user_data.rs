//! A node group's `userData`: a file of the user's or one of the generators. The file form is checked while
//! the scenario is parsed (it is read, its layers decode, its placeholders are known, and `encode` and
//! `encoding` fit it), so a mistake is reported with the scenario's file, line and column.
use crate::userdata::file::{self as udfile, EncodeStep, FileError, Problem};
use crate::userdata::format::Layer;
use serde::de::{Error as _, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::fmt;
use std::path::Path;

/// User data for a node group: exactly one of a file or a generator (a flavor: `super::flavors`).
#[derive(Debug, Clone, Default)]
pub struct UserDataSpec {
    /// A file (relative to the scenario file): plain text, or already gzip, base64 or base64(gzip(...)); its
    /// placeholders are filled in the innermost text and it is wrapped again in the same layers.
    pub file: Option<String>,
    /// What the file's final bytes are (default: `base64` when its outermost layer is base64, else `raw`).
    pub encoding: Option<FileEncoding>,
    /// Steps applied to a plain-text file after its placeholders are filled in (empty: none).
    pub encode: Vec<EncodeStep>,
    /// The generator named instead of a file (a flavor: `super::flavors::KEYS`).
    pub generator: Option<super::flavors::Generator>,
    /// The user's own generator, run in a container of the node's image; its output is the user data.
    pub command: Option<super::user_command::CommandSpec>,
    /// For a `file` that runs `cfn-signal`: the CloudFormation stack (and AutoScalingGroup resource) that
    /// launched the node group, in the cluster's region; the only one the fake accepts a signal for.
    pub stack: Option<StackSpec>,
    /// The file is a producer's output for a real cluster: its API server endpoint and cluster CA become this
    /// run's (`crate::userdata::rendered`), everything else reaches the node as it is.
    pub rendered: bool,
    /// A file holding NodeConfig (alone or as a MIME part): nodeadm runs it.
    pub file_has_node_config: bool,
}

/// A CloudFormation stack and the resource in it that waits for its instances' signals.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct StackSpec {
    /// The stack's name, as `cfn-signal --stack` must give it.
    pub name: String,
    /// The AutoScalingGroup resource that waits for the signals (default `NodeGroup`).
    #[serde(default = "crate::scenario::flavors::default_resource")]
    pub resource: String,
}

/// The keys of a file source.
const FILE_KEYS: [&str; 6] = ["file", "encoding", "encode", "stack", "rendered", "command"];

impl<'de> Deserialize<'de> for UserDataSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Checking inside the map visitor makes the YAML deserializer attach userData's line and column.
        d.deserialize_map(Checked)
    }
}

struct Checked;

/// A `userData` key: a file source's or a flavor's, refused where it is written otherwise.
struct Key;

impl<'de> serde::de::DeserializeSeed<'de> for Key {
    type Value = String;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<String, D::Error> {
        let key = String::deserialize(d)?;
        if FILE_KEYS.contains(&key.as_str()) || super::flavors::KEYS.contains(&key.as_str()) {
            return Ok(key);
        }
        let known: Vec<String> = FILE_KEYS
            .iter()
            .chain(super::flavors::KEYS)
            .map(|k| format!("`{k}`"))
            .collect();
        Err(D::Error::custom(format!(
            "unknown field `{key}`, expected one of {}",
            known.join(", ")
        )))
    }
}

impl<'de> Visitor<'de> for Checked {
    type Value = UserDataSpec;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a userData mapping")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<UserDataSpec, A::Error> {
        let mut spec = UserDataSpec::default();
        let (mut encode, mut seen) = (None, Vec::new());
        while let Some(key) = map.next_key_seed(Key)? {
            if seen.contains(&key) {
                return Err(A::Error::custom(format!("duplicate field `{key}`")));
            }
            match key.as_str() {
                // Relative to the scenario file (scenario::relative), made absolute here so it means the same
                // later.
                "file" => {
                    let p: String = map.next_value()?;
                    spec.file = Some(super::relative::resolve(&p).to_string_lossy().into_owned());
                }
                "encoding" => spec.encoding = Some(map.next_value()?),
                "encode" => encode = Some(map.next_value::<Vec<EncodeStep>>()?),
                "stack" => spec.stack = Some(map.next_value()?),
                "rendered" => spec.rendered = map.next_value()?,
                "command" => {
                    let argv: Vec<String> = map.next_value()?;
                    let dir = super::relative::resolve(".");
                    spec.command = Some(super::user_command::CommandSpec::new(argv, dir).map_err(A::Error::custom)?);
                }
                flavor => {
                    let Some(generator) = super::flavors::next_flavor(flavor, &mut map) else {
                        return Err(A::Error::custom(format!("unknown field `{flavor}`")));
                    };
                    let generator = generator?;
                    if let Some(other) = &spec.generator {
                        return Err(A::Error::custom(format!(
                            "give exactly one of file, {} (found {} and {flavor})",
                            super::flavors::KEYS.join(", "),
                            other.key()
                        )));
                    }
                    spec.generator = Some(generator);
                }
            }
            seen.push(key);
        }
        let sources = spec.sources();
        if sources.len() > 1 {
            return Err(A::Error::custom(format!(
                "give exactly one of file, command, {} (found {})",
                super::flavors::KEYS.join(", "),
                sources.join(" and ")
            )));
        }
        if spec.rendered && spec.file.is_none() {
            return Err(A::Error::custom(
                "rendered: only for a userData.file (a producer's output saved to a file)",
            ));
        }
        if spec.stack.is_some() && spec.file.is_none() {
            return Err(A::Error::custom(
                "stack: only for a userData.file (cloudFormation names its stack itself)",
            ));
        }
        if encode.as_ref().is_some_and(Vec::is_empty) {
            return Err(A::Error::custom(
                "encode: the list is empty; leave encode out to use the file as it is",
            ));
        }
        spec.encode = encode.unwrap_or_default();
        spec.file_has_node_config = spec.check_file().map_err(A::Error::custom)?;
        Ok(spec)
    }
}

/// In the schema: a file source's fields and every flavor, none other.
impl schemars::JsonSchema for UserDataSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "UserData".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut properties = serde_json::Map::new();
        let mut add = |key: &str, description: Option<&str>, schema: schemars::Schema| {
            let mut schema = schema.to_value();
            if let (Some(o), Some(d)) = (schema.as_object_mut(), description) {
                o.insert("description".into(), d.into());
            }
            properties.insert(key.into(), schema);
        };
        add(
            "file",
            Some("A file (relative to the scenario file): plain text, or already gzip, base64 or base64(gzip(...)); its \
             placeholders are filled in the innermost text and it is wrapped again in the same layers."),
            generator.subschema_for::<String>(),
        );
        add(
            "encoding",
            Some("What the file's final bytes are (default: `base64` when its outermost layer is base64, else `raw`)."),
            generator.subschema_for::<FileEncoding>(),
        );
        add(
            "encode",
            Some("Steps applied to a plain-text file after its placeholders are filled in."),
            generator.subschema_for::<Vec<EncodeStep>>(),
        );
        add(
            "stack",
            Some(
                "For a file that runs `cfn-signal`: the CloudFormation stack (and AutoScalingGroup resource) that \
             launched the node group; the only one the fake accepts a signal for.",
            ),
            generator.subschema_for::<StackSpec>(),
        );
        add(
            "command",
            Some(
                "The user's own generator: a program and its arguments (relative to the scenario file), run in a \
             container of the node's image without network, with every placeholder in its environment as NODEJOIN_ \
             and the name in upper snake case (NODEJOIN_CLUSTER_ENDPOINT); what it prints is the user data \
             (`encoding: base64` when it prints the RunInstances form).",
            ),
            generator.subschema_for::<Vec<String>>(),
        );
        add(
            "rendered",
            Some(
                "The file is a producer's output for a real cluster (Karpenter, Terraform, eksctl, Cluster API): \
             its API server endpoint and cluster CA become this run's; everything else reaches the node as it is.",
            ),
            generator.subschema_for::<bool>(),
        );
        for (key, schema) in super::flavors::schemas(generator) {
            // Described by its spec's own documentation: the definition its `$ref` names carries it, and an
            // editor shows a property's own description on hover, so the key gets a copy.
            let description = schema
                .get("$ref")
                .and_then(|r| r.as_str())
                .and_then(|r| r.rsplit('/').next())
                .and_then(|name| generator.definitions().get(name))
                .and_then(|d| d.get("description"))
                .and_then(|d| d.as_str())
                .map(str::to_owned);
            add(key, description.as_deref(), schema);
        }
        schemars::json_schema!({
            "description": "User data for a node group: exactly one of a file or a generator.",
            "type": "object",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}

/// What a `userData.file` becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileUserData {
    /// What IMDS serves at `/latest/user-data`.
    pub served: Vec<u8>,
    /// What RunInstances was given, when that differs (`encoding: base64`).
    pub api_form: Option<Vec<u8>>,
}

impl UserDataSpec {
    /// The stack this node group's instances signal, if any: its generator's (`cloudFormation`), or a file's
    /// `stack`.
    pub fn signalled_stack(&self) -> Option<(String, String)> {
        match (self.generator.as_ref().and_then(|g| g.stack()), &self.stack) {
            (Some(stack), _) => Some(stack),
            (None, Some(st)) => Some((st.name.clone(), st.resource.clone())),
            (None, None) => None,
        }
    }

    /// The sources given, by name (exactly one is valid).
    pub fn sources(&self) -> Vec<&'static str> {
        let file = self.file.as_ref().map(|_| "file");
        file.into_iter()
            .chain(self.command.as_ref().map(|_| "command"))
            .chain(self.generator.as_ref().map(|g| g.key()))
            .collect()
    }

    /// `encode` and `encoding` belong to a file; with a file, it must go through [`Self::file_user_data`] with
    /// every placeholder known (each filled in with an empty value here). Says whether the file holds NodeConfig.
    fn check_file(&self) -> Result<bool, String> {
        let Some(file) = &self.file else {
            if !self.encode.is_empty() || (self.encoding.is_some() && self.command.is_none()) {
                return Err("encode and encoding apply to userData.file; the generators write their own format".into());
            }
            return Ok(false);
        };
        let vars = super::template::empty_vars();
        let data = self
            .file_user_data(file, &super::relative::roots(), |t| super::template::render(t, &vars))
            .map_err(|e| e.to_string())?;
        Ok(crate::userdata::carries_node_config(&data.served))
    }

    /// Is this AL2023 user data, run by nodeadm (an AL2023 flavor, or a file holding NodeConfig)? A generator's
    /// output (`command`) is not known before the run.
    pub fn runs_nodeadm(&self) -> bool {
        self.file_has_node_config || self.generator.as_ref().is_some_and(|g| g.nodeadm())
    }

    /// Reads `file`, fills its placeholders with `render` (inside its gzip/base64 layers), applies `encode`,
    /// and then does what EC2 does with the result: with `encoding: base64` (the default when the outermost
    /// layer is base64) the result is the RunInstances form and IMDS serves it base64-decoded; with `raw`, IMDS
    /// serves the result itself.
    pub fn file_user_data(
        &self,
        file: &str,
        roots: &super::confine::Roots,
        render: impl Fn(&str) -> Result<String, String>,
    ) -> Result<FileUserData, FileError> {
        let err = |problem| FileError {
            file: file.to_string(),
            problem,
        };
        let path = Path::new(file);
        let bytes = roots.read(path, "file", MAX_FILE).map_err(|e| {
            err(Problem::Read(if path.exists() {
                e
            } else {
                format!("{e} ({})", super::relative::HINT)
            }))
        })?;
        let rendered = self.rendered;
        let render = |text: &str| {
            if rendered {
                render(&crate::userdata::rendered::to_placeholders(text)?)
            } else {
                render(text)
            }
        };
        let prepared = udfile::prepare(&bytes, &self.encode, render).map_err(err)?;
        let default = if prepared.is_base64() {
            FileEncoding::Base64
        } else {
            FileEncoding::Raw
        };
        let within_ec2s_limit = |served: &[u8]| {
            if served.len() > MAX_USER_DATA {
                return Err(err(Problem::Encoding(format!(
                    "it is {} bytes as EC2 keeps it (what IMDS serves); EC2 refuses user data over {MAX_USER_DATA} bytes (16 KB)",
                    served.len()
                ))));
            }
            Ok(())
        };
        match self.encoding.unwrap_or(default) {
            FileEncoding::Raw => {
                within_ec2s_limit(&prepared.bytes)?;
                Ok(FileUserData {
                    served: prepared.bytes,
                    api_form: None,
                })
            }
            FileEncoding::Base64 => {
                if prepared.layers.first() == Some(&Layer::Gzip) {
                    return Err(err(Problem::Encoding(format!(
                        "encoding: base64 says the result is the RunInstances form, but it is {} (binary); {}",
                        udfile::describe(&prepared.layers),
                        if self.encode.is_empty() {
                            "leave encoding out to have IMDS serve it as it is"
                        } else {
                            "end encode with base64"
                        }
                    ))));
                }
                let served = crate::userdata::from_api(&prepared.bytes).map_err(|m| err(Problem::Encoding(m)))?;
                within_ec2s_limit(&served)?;
                Ok(FileUserData {
                    served,
                    api_form: Some(prepared.bytes),
                })
            }
        }
    }
}

/// EC2's limit on user data, before base64 (what IMDS serves): 16 KB.
pub const MAX_USER_DATA: usize = 16 * 1024;

/// The largest user-data file read: far past EC2's limit (layers of base64 and text grow), short of a device.
const MAX_FILE: u64 = 1 << 20;

/// What a user-data file's final bytes (after placeholders and `encode`) are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FileEncoding {
    /// What IMDS serves, as they are.
    Raw,
    /// What RunInstances and launch templates take: EC2 base64-decodes it before IMDS serves it.
    Base64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::userdata::format::{self, Kind};
    use crate::userdata::generate::gzip;
    use base64::Engine;
    use std::collections::BTreeMap;

    const ENCODED: &str = "fixtures/user-data/eksctl/encoded.b64";
    const SOURCE: &str = "fixtures/user-data/eksctl/encoded.cloud-config";

    fn b64(bytes: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(bytes)
    }

    /// A scenario with one userData node group; `user_data` is the flow mapping's inside, on line 5.
    fn scenario(user_data: &str) -> Result<crate::scenario::Scenario, Error> {
        let text = format!(
            "cluster: {{ auth: iam }}\nnodes:\n  - name: a\n    imds: {{ tokens: optional }}\n    userData: {{ {user_data} }}\n"
        );
        crate::scenario::load::parse(&text, &crate::paths::workspace_root().join("t.yaml"))
    }

    fn parse_error(user_data: &str) -> (usize, String) {
        match scenario(user_data) {
            Err(Error::ScenarioParse { line, message, .. }) => (line, message),
            other => panic!("expected a parse error for {user_data}, got {other:?}"),
        }
    }

    /// A temporary directory inside this repository, where a scenario of it may read.
    fn repo_temp() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(".test-")
            .tempdir_in(crate::paths::workspace_root())
            .unwrap()
    }

    fn temp_file(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> String {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    }

    fn vars() -> BTreeMap<String, String> {
        let mut v = crate::scenario::template::empty_vars();
        v.insert("cluster.name".into(), "demo".into());
        v.insert("cluster.endpoint".into(), "https://172.20.0.1:6443".into());
        v.insert("cluster.caBase64".into(), "LS0tQ0EtLS0=".into());
        v.insert("cluster.dnsIp".into(), "10.100.0.10".into());
        v
    }

    #[test]
    fn user_data_past_ec2s_limit_or_not_a_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let spec = |file: String| UserDataSpec {
            file: Some(file),
            ..Default::default()
        };
        let big = temp_file(
            &dir,
            "big.sh",
            format!("#!/bin/sh\n#{}\n", "x".repeat(MAX_USER_DATA)).as_bytes(),
        );
        let err = spec(big).check_file().unwrap_err();
        assert!(err.contains("16 KB"), "{err}");
        let err = spec("/dev/zero".into()).check_file().unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        let fits = temp_file(&dir, "ok.sh", b"#!/bin/sh\necho {{cluster.name}}\n");
        assert!(spec(fits).check_file().is_ok());
    }

    fn served(spec: &UserDataSpec) -> FileUserData {
        let vars = vars();
        let file = spec.file.clone().unwrap();
        spec.file_user_data(&file, &Default::default(), |t| {
            crate::scenario::template::render(t, &vars)
        })
        .unwrap()
    }

    /// encoded.b64 must stay base64(gzip(encoded.cloud-config)); the comment at the top of the source says how
    /// to regenerate it. Its helper must stay the one our eksctl generator embeds.
    #[test]
    fn encoded_fixture_is_its_source_gzipped_and_base64_encoded() {
        let root = crate::paths::workspace_root();
        let source = std::fs::read(root.join(SOURCE)).unwrap();
        let encoded = std::fs::read(root.join(ENCODED)).unwrap();
        let peeled = udfile::peel(&encoded).unwrap();
        assert_eq!(peeled.layers, vec![Layer::Base64, Layer::Gzip]);
        assert!(
            peeled.inner == source,
            "{ENCODED} is out of date: regenerate it from {SOURCE}"
        );
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_slice(&source).unwrap();
        let helper = std::fs::read_to_string(
            crate::paths::fixtures_dir(&crate::settings::for_tests()).join("user-data/eksctl/bootstrap.helper.sh"),
        );
        let embedded = doc["write_files"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|f| f["path"].as_str() == Some(crate::userdata::generate::EKSCTL_HELPER))
            .and_then(|f| f["content"].as_str());
        assert_eq!(embedded, Some(helper.unwrap().as_str()));
    }

    #[test]
    fn the_encoded_file_and_the_encoded_source_serve_the_same_rendered_cloud_config() {
        let file = scenario(&format!("file: {ENCODED}, encoding: base64")).unwrap();
        let plain = scenario(&format!("file: {SOURCE}, encode: [gzip, base64]")).unwrap();
        let (file, plain) = (
            served(file.nodes[0].user_data.as_ref().unwrap()),
            served(plain.nodes[0].user_data.as_ref().unwrap()),
        );
        for ud in [&file, &plain] {
            let api = ud.api_form.as_deref().unwrap();
            assert_eq!(format::detect(api).unwrap().to_string(), "base64(gzip(cloud-config))");
            // IMDS serves what EC2 decoded: gzip, as for eksctl's nodes.
            let p = format::detect(&ud.served).unwrap();
            assert_eq!(
                (p.layers.clone(), p.kind.clone()),
                (vec![Layer::Gzip], Kind::CloudConfig)
            );
            let text = String::from_utf8(p.content).unwrap();
            assert!(text.contains("API_SERVER_URL=https://172.20.0.1:6443\n"), "{text}");
            assert!(text.contains("B64_CLUSTER_CA=LS0tQ0EtLS0=\n"), "{text}");
            assert!(!text.contains("{{"), "{text}");
        }
        assert_eq!(
            udfile::peel(&file.served).unwrap().inner,
            udfile::peel(&plain.served).unwrap().inner
        );
    }

    #[test]
    fn encoding_defaults_to_base64_for_a_base64_result_and_raw_keeps_the_text() {
        let s = scenario(&format!("file: {ENCODED}")).unwrap();
        let ud = s.nodes[0].user_data.as_ref().unwrap();
        assert_eq!(ud.encoding, None);
        assert!(format::is_gzip(&served(ud).served));
        // encoding: raw: IMDS serves the base64 text itself (a tool that base64-encodes it again).
        let s = scenario(&format!("file: {SOURCE}, encode: [gzip, base64], encoding: raw")).unwrap();
        let ud = served(s.nodes[0].user_data.as_ref().unwrap());
        assert_eq!(ud.api_form, None);
        assert_eq!(
            format::detect(&ud.served).unwrap().to_string(),
            "base64(gzip(cloud-config))"
        );
    }

    #[test]
    fn a_raw_gzip_file_loads_and_is_served_as_gzip() {
        let dir = repo_temp();
        let f = temp_file(&dir, "ud.gz", &gzip(b"#!/bin/bash\necho {{cluster.name}}\n"));
        let s = scenario(&format!("file: {f}")).unwrap();
        let ud = served(s.nodes[0].user_data.as_ref().unwrap());
        assert_eq!(ud.api_form, None);
        let p = format::detect(&ud.served).unwrap();
        assert_eq!(p.layers, vec![Layer::Gzip]);
        assert_eq!(p.content, b"#!/bin/bash\necho demo\n");
    }

    #[test]
    fn bad_files_and_combinations_fail_with_the_scenario_line() {
        let dir = repo_temp();
        let mut gz = gzip(b"#cloud-config\nruncmd: []\n");
        gz.truncate(gz.len() / 2);
        let corrupt = temp_file(&dir, "x.b64", b64(&gz).as_bytes());
        let (line, msg) = parse_error(&format!("file: {corrupt}"));
        assert_eq!(line, 5);
        assert!(
            msg.contains(&format!(
                "user data {corrupt}: base64 layer decodes but gzip layer is corrupt: "
            )),
            "{msg}"
        );
        let typo = temp_file(&dir, "typo.sh", b"#!/bin/sh\necho {{cluster.nmae}}\n");
        let (line, msg) = parse_error(&format!("file: {typo}, encode: [gzip]"));
        assert_eq!(line, 5);
        assert!(msg.contains("cluster.nmae"), "{msg}");
        for (user_data, says) in [
            (
                format!("file: {ENCODED}, encode: [gzip, base64]"),
                "already base64(gzip(...))",
            ),
            (
                format!("file: {SOURCE}, encode: [base64, gzip]"),
                "base64 must come last",
            ),
            (format!("file: {SOURCE}, encode: [gzip, mime]"), "mime must come first"),
            (format!("file: {SOURCE}, encode: []"), "empty"),
            (
                format!("file: {SOURCE}, encode: [gzip], encoding: base64"),
                "end encode with base64",
            ),
            (format!("file: {SOURCE}, encoding: base64"), "not valid base64"),
            ("eksctlAl2: {}, encode: [gzip]".to_string(), "apply to userData.file"),
            ("file: fixtures/user-data/nope.mime".to_string(), "nope.mime"),
        ] {
            let (line, msg) = parse_error(&user_data);
            assert_eq!(line, 5, "{user_data}: {msg}");
            assert!(msg.contains(says), "{user_data}: {msg}");
        }
        let (line, msg) = parse_error(&format!("file: {SOURCE}, encode: [zip]"));
        assert_eq!(line, 5);
        assert!(msg.contains("unknown variant `zip`"), "{msg}");
    }

    #[test]
    fn a_corrupt_gzip_file_names_its_layer() {
        let dir = repo_temp();
        let raw = temp_file(&dir, "ud.gz", &[0x1f, 0x8b, 8, 0, 0]);
        let (_, msg) = parse_error(&format!("file: {raw}"));
        assert!(
            msg.contains(&format!("user data {raw}: gzip layer is corrupt")),
            "{msg}"
        );
    }
}
