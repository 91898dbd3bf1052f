//! A scenario's own user-data file. A file that is already encoded (gzip, base64, or base64(gzip(...)), as
//! eksctl writes it) is peeled layer by layer so its placeholders can be filled in the text inside, then wrapped
//! again in the same layers; a plain-text file can instead be encoded after rendering (`encode`). Pure
//! functions: the caller reads the file and decides what EC2 does with the result.
use super::format::{self, Kind, Layer};
use super::generate::{self, PartEncoding};
use base64::Engine;
use serde::Deserialize;
use std::fmt;

/// One `encode` step, applied to the rendered text in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EncodeStep {
    /// A `multipart/mixed` document with the text as its one part, typed by its content (`#cloud-config` →
    /// `text/cloud-config`, `#!` → `text/x-shellscript`, a NodeConfig → `application/node.eks.aws`).
    Mime,
    Gzip,
    /// The form RunInstances and launch templates take (EC2 decodes it before IMDS serves it).
    Base64,
}

impl fmt::Display for EncodeStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EncodeStep::Mime => "mime",
            EncodeStep::Gzip => "gzip",
            EncodeStep::Base64 => "base64",
        })
    }
}

/// What went wrong with one user-data file; the file is named by [`FileError`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("cannot read {0}")]
    Read(String),
    #[error("{} layer is corrupt: {reason}", after(peeled, "gzip"))]
    CorruptGzip { peeled: Vec<Layer>, reason: String },
    #[error("more than {0} gzip/base64 layers")]
    TooDeep(usize),
    #[error("{} is not UTF-8 text, so its placeholders cannot be filled in", inside(peeled))]
    NotText { peeled: Vec<Layer> },
    #[error("{message}")]
    Placeholder { message: String },
    #[error("encode: {0}")]
    Steps(String),
    #[error("encode applies to plain text, but the file is already {0}; leave encode out (its layers are kept)")]
    AlreadyEncoded(String),
    #[error("encode: mime: {0}")]
    Mime(String),
    #[error("{0}")]
    Encoding(String),
}

/// A problem with the user-data file a scenario names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("user data {file}: {problem}")]
pub struct FileError {
    /// As the scenario wrote it.
    pub file: String,
    pub problem: Problem,
}

/// `"base64 layer decodes but gzip"` for a gzip layer under a base64 one; `"gzip"` at the top.
fn after(peeled: &[Layer], what: &str) -> String {
    if peeled.is_empty() {
        return what.to_string();
    }
    let names: Vec<String> = peeled.iter().map(Layer::to_string).collect();
    let verb = if peeled.len() == 1 {
        "layer decodes"
    } else {
        "layers decode"
    };
    format!("{} {verb} but {what}", names.join(" then "))
}

/// `"the file"` or `"the content inside base64(gzip(...))"`.
fn inside(peeled: &[Layer]) -> String {
    if peeled.is_empty() {
        "the file".into()
    } else {
        format!("the content inside {}", describe(peeled))
    }
}

/// `base64(gzip(...))`, outermost first.
pub fn describe(layers: &[Layer]) -> String {
    let open: String = layers.iter().map(|l| format!("{l}(")).collect();
    format!("{open}...{}", ")".repeat(layers.len()))
}

const MAX_LAYERS: usize = 8;

/// Checks an `encode` list: each step at most once, `mime` first (it wraps the rendered text) and `base64`
/// last (nothing on a node decodes base64 user data but EC2, and EC2 only decodes the outermost layer).
pub fn check_steps(steps: &[EncodeStep]) -> Result<(), String> {
    if steps.is_empty() {
        return Err("the list is empty; leave encode out to use the file as it is".into());
    }
    for (i, s) in steps.iter().enumerate() {
        if steps[..i].contains(s) {
            return Err(format!("{s} is given twice"));
        }
        if *s == EncodeStep::Mime && i != 0 {
            return Err("mime must come first: it wraps the rendered text, before any gzip or base64".into());
        }
        if *s == EncodeStep::Base64 && i + 1 != steps.len() {
            return Err(
                "base64 must come last: it is the form RunInstances takes, and nothing after EC2 decodes base64".into(),
            );
        }
    }
    Ok(())
}

/// The file's top-level layers (outermost first) and the content inside them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peeled {
    pub layers: Vec<Layer>,
    pub inner: Vec<u8>,
}

/// Peels gzip and base64 layers as cloud-init (gzip) and EC2 (base64) would, recognising base64 only when it
/// decodes to gzip or to something cloud-init knows (the same rule as `format::detect`).
pub fn peel(bytes: &[u8]) -> Result<Peeled, Problem> {
    let mut layers = Vec::new();
    let mut inner = bytes.to_vec();
    loop {
        if layers.len() > MAX_LAYERS {
            return Err(Problem::TooDeep(MAX_LAYERS));
        }
        if format::is_gzip(&inner) {
            inner = format::gunzip(&inner).map_err(|e| Problem::CorruptGzip {
                peeled: layers.clone(),
                reason: match e {
                    format::FormatError::Gzip(r) => r,
                    other => other.to_string(),
                },
            })?;
            layers.push(Layer::Gzip);
        } else if let Some(decoded) = format::base64_layer(&inner) {
            inner = decoded;
            layers.push(Layer::Base64);
        } else {
            return Ok(Peeled { layers, inner });
        }
    }
}

/// The file's bytes with placeholders filled in, and its layers outermost first (its own, or those `encode`
/// added; `mime` is not a layer: the result is MIME text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prepared {
    pub bytes: Vec<u8>,
    pub layers: Vec<Layer>,
}

impl Prepared {
    /// Is the outermost layer base64 (the form RunInstances takes)?
    pub fn is_base64(&self) -> bool {
        self.layers.first() == Some(&Layer::Base64)
    }
}

/// Peels `bytes`, fills the placeholders of the innermost text with `render`, and wraps the result again in
/// the same layers; or, for a plain-text file with `encode`, applies the steps to the rendered text. A file whose
/// content `render` leaves unchanged is returned byte for byte.
pub fn prepare(
    bytes: &[u8],
    encode: &[EncodeStep],
    render: impl Fn(&str) -> Result<String, String>,
) -> Result<Prepared, Problem> {
    let peeled = peel(bytes)?;
    if !encode.is_empty() {
        check_steps(encode).map_err(Problem::Steps)?;
        if !peeled.layers.is_empty() {
            return Err(Problem::AlreadyEncoded(describe(&peeled.layers)));
        }
    }
    let rendered = match std::str::from_utf8(&peeled.inner) {
        Ok(text) => Some(render(text).map_err(|message| Problem::Placeholder { message })?),
        // Binary content (cloud-init ignores it) is passed on unchanged unless it looks like it has placeholders.
        Err(_) if peeled.inner.windows(2).any(|w| w == b"{{") => {
            return Err(Problem::NotText { peeled: peeled.layers });
        }
        Err(_) => None,
    };
    if encode.is_empty() {
        let bytes = match rendered {
            Some(text) if text.as_bytes() != peeled.inner => wrap(text.into_bytes(), &peeled.layers),
            _ => bytes.to_vec(),
        };
        return Ok(Prepared {
            bytes,
            layers: peeled.layers,
        });
    }
    // Binary content has nothing to render; gzip and base64 take it as it is (mime cannot type it).
    let mut out = rendered.map_or(peeled.inner, String::into_bytes);
    let mut layers = Vec::new();
    for step in encode {
        match step {
            EncodeStep::Mime => out = mime(&out)?,
            EncodeStep::Gzip => {
                out = generate::gzip(&out);
                layers.insert(0, Layer::Gzip);
            }
            EncodeStep::Base64 => {
                out = base64::engine::general_purpose::STANDARD.encode(&out).into_bytes();
                layers.insert(0, Layer::Base64);
            }
        }
    }
    Ok(Prepared { bytes: out, layers })
}

/// `content` wrapped in `layers` (outermost first), innermost first.
fn wrap(mut content: Vec<u8>, layers: &[Layer]) -> Vec<u8> {
    for l in layers.iter().rev() {
        content = match l {
            Layer::Gzip => generate::gzip(&content),
            Layer::Base64 => base64::engine::general_purpose::STANDARD.encode(&content).into_bytes(),
        };
    }
    content
}

/// The MIME type cloud-init dispatches a part of this kind on.
fn content_type(kind: &Kind) -> Result<&'static str, String> {
    Ok(match kind {
        Kind::CloudConfig => "text/cloud-config",
        Kind::ShellScript => "text/x-shellscript",
        Kind::Boothook => "text/cloud-boothook",
        Kind::IncludeUrl => "text/x-include-url",
        Kind::NodeConfig => "application/node.eks.aws",
        Kind::Multipart(_) => return Err("the text is MIME already".into()),
        Kind::Unknown(what) => {
            return Err(format!(
                "cannot tell the part's Content-Type: the text starts with '{what}', not #cloud-config, #!, \
#cloud-boothook, #include or a NodeConfig (apiVersion: node.eks.aws/...)"
            ))
        }
    })
}

/// The rendered text as the one part of a `multipart/mixed` document (transfer encoding 7bit for ASCII,
/// base64 otherwise, since MIME's 7bit cannot carry other bytes).
fn mime(text: &[u8]) -> Result<Vec<u8>, Problem> {
    let kind = format::detect(text).map_err(|e| Problem::Mime(e.to_string()))?.kind;
    let ct = content_type(&kind).map_err(Problem::Mime)?;
    let s = String::from_utf8_lossy(text).into_owned();
    let enc = if text.is_ascii() {
        PartEncoding::Plain
    } else {
        PartEncoding::Base64
    };
    Ok(generate::single_part(ct, s, enc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    const CLOUD_CONFIG: &str = "#cloud-config\nwrite_files:\n  - path: /etc/x\n    content: \"{{cluster.endpoint}}\"\n";

    fn vars() -> BTreeMap<String, String> {
        BTreeMap::from([("cluster.endpoint".to_string(), "https://10.0.0.1:6443".to_string())])
    }

    fn render(t: &str) -> Result<String, String> {
        crate::scenario::template::render(t, &vars())
    }

    fn b64(bytes: &[u8]) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD.encode(bytes).into_bytes()
    }

    /// The content cloud-init would see, and the layers on the way.
    fn open(bytes: &[u8]) -> (Vec<Layer>, String) {
        let p = peel(bytes).unwrap();
        (p.layers, String::from_utf8(p.inner).unwrap())
    }

    #[test]
    fn encoded_files_are_rendered_inside_and_rewrapped() {
        let rendered = render(CLOUD_CONFIG).unwrap();
        for layers in [
            vec![],
            vec![Layer::Gzip],
            vec![Layer::Base64],
            vec![Layer::Base64, Layer::Gzip],
        ] {
            let file = wrap(CLOUD_CONFIG.as_bytes().to_vec(), &layers);
            let p = prepare(&file, &[], render).unwrap();
            assert_eq!(p.layers, layers);
            assert_eq!(open(&p.bytes), (layers.clone(), rendered.clone()), "{layers:?}");
        }
    }

    #[test]
    fn a_base64_gzip_file_with_placeholders_is_rendered_inside() {
        let file = b64(&generate::gzip(CLOUD_CONFIG.as_bytes()));
        let p = prepare(&file, &[], render).unwrap();
        assert!(p.is_base64());
        let served = crate::userdata::from_api(&p.bytes).unwrap();
        assert!(format::is_gzip(&served));
        let (layers, text) = open(&served);
        assert_eq!(layers, vec![Layer::Gzip]);
        assert!(text.contains("content: \"https://10.0.0.1:6443\""), "{text}");
        assert!(!text.contains("{{"));
    }

    #[test]
    fn raw_gzip_and_unchanged_files_keep_their_bytes() {
        let plain = b"#!/bin/sh\necho hi\n";
        let gz = generate::gzip(plain);
        let p = prepare(&gz, &[], render).unwrap();
        assert_eq!(p.bytes, gz);
        assert_eq!(p.layers, vec![Layer::Gzip]);
        // Binary content without placeholders passes through, or is encoded as it is.
        let bin = [0u8, 0xff, 0xfe, 1];
        assert_eq!(prepare(&bin, &[], render).unwrap().bytes, bin);
        let b = prepare(&bin, &[EncodeStep::Base64], render).unwrap();
        assert_eq!(crate::userdata::from_api(&b.bytes).unwrap(), bin);
        assert!(prepare(&bin, &[EncodeStep::Mime], render).is_err());
    }

    #[test]
    fn every_encode_round_trips() {
        use EncodeStep::*;
        let rendered = render(CLOUD_CONFIG).unwrap();
        for steps in [
            vec![Gzip],
            vec![Base64],
            vec![Gzip, Base64],
            vec![Mime],
            vec![Mime, Gzip],
            vec![Mime, Base64],
            vec![Mime, Gzip, Base64],
        ] {
            let p = prepare(CLOUD_CONFIG.as_bytes(), &steps, render).unwrap();
            let detected = format::detect(&p.bytes).unwrap();
            assert_eq!(detected.layers, p.layers, "{steps:?}");
            let leaves = detected.leaves();
            assert_eq!(leaves.len(), 1, "{steps:?}: {detected}");
            assert_eq!(leaves[0].kind, Kind::CloudConfig);
            assert_eq!(String::from_utf8_lossy(&leaves[0].content), rendered, "{steps:?}");
            if steps.contains(&Mime) {
                assert_eq!(leaves[0].content_type.as_deref(), Some("text/cloud-config"));
            }
            assert_eq!(p.is_base64(), steps.last() == Some(&Base64));
        }
    }

    #[test]
    fn mime_types_by_content() {
        let ct = |text: &str| {
            let p = prepare(text.as_bytes(), &[EncodeStep::Mime], render).unwrap();
            format::detect(&p.bytes).unwrap().leaves()[0].content_type.clone()
        };
        assert_eq!(ct("#!/bin/bash\necho hi\n").as_deref(), Some("text/x-shellscript"));
        assert_eq!(
            ct("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n").as_deref(),
            Some("application/node.eks.aws")
        );
        // Non-ASCII text travels base64 inside the part and comes back intact.
        let p = prepare("#!/bin/sh\necho café\n".as_bytes(), &[EncodeStep::Mime], render).unwrap();
        let d = format::detect(&p.bytes).unwrap();
        assert_eq!(d.leaves()[0].content, "#!/bin/sh\necho café\n".as_bytes());
        let err = prepare(b"hello world\n", &[EncodeStep::Mime], render).unwrap_err();
        assert!(err.to_string().contains("'hello world'"), "{err}");
        let mime = generate::single_part("text/x-shellscript", "#!/bin/sh\n".into(), PartEncoding::Plain);
        let err = prepare(&mime, &[EncodeStep::Mime], render).unwrap_err();
        assert!(err.to_string().contains("MIME already"), "{err}");
    }

    #[test]
    fn bad_combinations_are_rejected() {
        use EncodeStep::*;
        for (steps, says) in [
            (vec![], "empty"),
            (vec![Gzip, Gzip], "twice"),
            (vec![Gzip, Mime], "mime must come first"),
            (vec![Base64, Gzip], "base64 must come last"),
        ] {
            let err = check_steps(&steps).unwrap_err();
            assert!(err.contains(says), "{steps:?}: {err}");
        }
        let gz = generate::gzip(CLOUD_CONFIG.as_bytes());
        let err = prepare(&b64(&gz), &[Gzip, Base64], render).unwrap_err();
        assert_eq!(err, Problem::AlreadyEncoded("base64(gzip(...))".into()));
        assert!(err.to_string().contains("already base64(gzip(...))"), "{err}");
    }

    #[test]
    fn errors_say_which_layer_failed() {
        let mut gz = generate::gzip(CLOUD_CONFIG.as_bytes());
        gz.truncate(gz.len() / 2);
        let err = FileError {
            file: "fixtures/x.b64".into(),
            problem: prepare(&b64(&gz), &[], render).unwrap_err(),
        };
        let msg = err.to_string();
        assert!(
            msg.starts_with("user data fixtures/x.b64: base64 layer decodes but gzip layer is corrupt: "),
            "{msg}"
        );
        let err = prepare(&gz, &[], render).unwrap_err().to_string();
        assert!(err.starts_with("gzip layer is corrupt"), "{err}");
        let err = prepare(&generate::gzip(b"#!/bin/sh\n{{nope}}\n"), &[], render).unwrap_err();
        assert!(err.to_string().contains("{{nope}}"), "{err}");
        let mut bin = vec![0xffu8, 0xfe];
        bin.extend_from_slice(b"{{cluster.endpoint}}");
        let err = prepare(&generate::gzip(&bin), &[], render).unwrap_err().to_string();
        assert!(err.contains("inside gzip(...) is not UTF-8"), "{err}");
    }
}
