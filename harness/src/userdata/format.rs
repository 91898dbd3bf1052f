//! What a piece of user data is, layer by layer: gzip and base64 wrappers, MIME multipart trees, and the
//! content types cloud-init and nodeadm dispatch on. Used to describe user data in reports and to check the
//! generators' output; the node's own cloud-init stays the judge of what actually runs.
use base64::Engine;
use mail_parser::{MessageParser, PartType};
use std::fmt;
use std::io::Read;

/// A wrapper peeled off to reach the content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Gzip,
    /// Top-level base64 (the form EC2's RunInstances takes) or a MIME part's `Content-Transfer-Encoding: base64`.
    Base64,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Gzip => "gzip",
            Layer::Base64 => "base64",
        })
    }
}

/// What the content is, by the rules cloud-init documents (first line or MIME type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `#!` (MIME `text/x-shellscript`): run once by cloud-final.
    ShellScript,
    /// `#cloud-config` (MIME `text/cloud-config`).
    CloudConfig,
    /// `#cloud-boothook` (MIME `text/cloud-boothook`): run early, every boot.
    Boothook,
    /// `#include` (MIME `text/x-include-url`).
    IncludeUrl,
    /// An EKS `NodeConfig` document (MIME `application/node.eks.aws`), read by nodeadm.
    NodeConfig,
    /// `multipart/*`, with its parts in order.
    Multipart(Vec<Part>),
    /// Nothing cloud-init would act on; `what` says what was seen.
    Unknown(String),
}

/// One node of the user-data tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The declared MIME type (`None` at the top level without MIME headers).
    pub content_type: Option<String>,
    /// Layers peeled to reach `content`, outermost first.
    pub layers: Vec<Layer>,
    pub kind: Kind,
    /// The decoded content (empty for multipart).
    pub content: Vec<u8>,
    /// Every Content-Type the part declared when it declared more than one (cloud-init, through Python's email
    /// package, believes the first).
    pub duplicate_types: Vec<String>,
}

/// Why user data could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("gzip data is corrupt: {0}")]
    Gzip(String),
    #[error("MIME message cannot be parsed")]
    Mime,
    #[error("MIME nesting deeper than {0} levels")]
    TooDeep(usize),
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const MAX_DEPTH: usize = 8;
/// Types cloud-init decompresses before looking at the content again.
const GZIP_TYPES: &[&str] = &[
    "application/gzip",
    "application/x-gzip",
    "application/gzip-compressed",
    "application/x-gzip-compressed",
    "application/gzipped",
];

/// Reads top-level user data, peeling gzip and (if it decodes to something recognisable) base64 layers.
pub fn detect(bytes: &[u8]) -> Result<Part, FormatError> {
    detect_at(bytes, None, Vec::new(), 0)
}

fn detect_at(
    bytes: &[u8],
    content_type: Option<String>,
    mut layers: Vec<Layer>,
    depth: usize,
) -> Result<Part, FormatError> {
    if depth > MAX_DEPTH {
        return Err(FormatError::TooDeep(MAX_DEPTH));
    }
    if bytes.starts_with(&GZIP_MAGIC) {
        layers.push(Layer::Gzip);
        return detect_at(&gunzip(bytes)?, content_type, layers, depth + 1);
    }
    if content_type.is_none() {
        if let Some(decoded) = base64_layer(bytes) {
            layers.push(Layer::Base64);
            return detect_at(&decoded, None, layers, depth + 1);
        }
    }
    let kind = by_content(bytes, depth)?;
    let content = if matches!(kind, Kind::Multipart(_)) {
        Vec::new()
    } else {
        bytes.to_vec()
    };
    Ok(Part {
        content_type,
        layers,
        kind,
        content,
        duplicate_types: Vec::new(),
    })
}

/// Does `bytes` start with gzip's magic number (what cloud-init checks before decompressing)?
pub(crate) fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&GZIP_MAGIC)
}

/// How far a gzip layer may expand: far past any user data EC2 takes (16 KB), short of a gzip bomb's gigabytes.
pub(crate) const MAX_GUNZIPPED: u64 = 16 << 20;

pub(crate) fn gunzip(bytes: &[u8]) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes)
        .take(MAX_GUNZIPPED + 1)
        .read_to_end(&mut out)
        .map_err(|e| FormatError::Gzip(e.to_string()))?;
    if out.len() as u64 > MAX_GUNZIPPED {
        return Err(FormatError::Gzip(format!(
            "it expands past {} MiB (a gzip bomb?); EC2 user data is at most 16 KB",
            MAX_GUNZIPPED >> 20
        )));
    }
    Ok(out)
}

/// Base64 text that decodes to gzip or to a recognisable start; anything else is left as it is.
pub(crate) fn base64_layer(bytes: &[u8]) -> Option<Vec<u8>> {
    let compact: Vec<u8> = bytes.iter().copied().filter(|b| !b.is_ascii_whitespace()).collect();
    if compact.len() < 8 || !compact.len().is_multiple_of(4) {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(&compact).ok()?;
    let recognisable =
        decoded.starts_with(&GZIP_MAGIC) || !matches!(first_line_kind(&decoded), None | Some(Kind::Unknown(_)));
    recognisable.then_some(decoded)
}

/// The kind announced by the content's first line, as cloud-init's "starts with" table does.
fn first_line_kind(bytes: &[u8]) -> Option<Kind> {
    let text = std::str::from_utf8(bytes.get(..bytes.len().min(4096))?).ok()?;
    let start = text.trim_start_matches('\u{feff}');
    let lower = start.to_ascii_lowercase();
    Some(if start.starts_with("#!") {
        Kind::ShellScript
    } else if lower.starts_with("#cloud-config") {
        Kind::CloudConfig
    } else if lower.starts_with("#cloud-boothook") {
        Kind::Boothook
    } else if lower.starts_with("#include") {
        Kind::IncludeUrl
    } else if lower.starts_with("content-type:") || lower.starts_with("mime-version:") {
        Kind::Multipart(Vec::new())
    } else if is_node_config(start) {
        Kind::NodeConfig
    } else {
        Kind::Unknown(start.lines().next().unwrap_or("").chars().take(60).collect())
    })
}

fn is_node_config(text: &str) -> bool {
    text.lines()
        .any(|l| l.trim_start().starts_with("apiVersion:") && l.contains("node.eks.aws/"))
}

fn by_content(bytes: &[u8], depth: usize) -> Result<Kind, FormatError> {
    match first_line_kind(bytes) {
        Some(Kind::Multipart(_)) => mime(bytes, depth),
        Some(k) => Ok(k),
        None => Ok(Kind::Unknown(format!("{} bytes of binary data", bytes.len()))),
    }
}

fn mime(bytes: &[u8], depth: usize) -> Result<Kind, FormatError> {
    let message = MessageParser::default().parse(bytes).ok_or(FormatError::Mime)?;
    let root = message.root_part();
    let Some(ids) = root.sub_parts() else {
        // A single MIME entity: its own type decides.
        let ct = type_of(root);
        let mut part = leaf(&ct, root.contents(), root.encoding, depth)?;
        part.duplicate_types = duplicates_of(root);
        return Ok(Kind::Multipart(vec![part]));
    };
    let mut parts = Vec::new();
    for id in ids {
        let Some(p) = message.part(*id) else { continue };
        let ct = type_of(p);
        if let PartType::Multipart(_) = p.body {
            // Nested multipart: re-parse its raw bytes as a message of its own.
            let raw = bytes
                .get(p.offset_header as usize..p.offset_end as usize)
                .ok_or(FormatError::Mime)?;
            let kind = mime(raw, depth + 1)?;
            parts.push(Part {
                content_type: Some(ct),
                layers: Vec::new(),
                kind,
                content: Vec::new(),
                duplicate_types: duplicates_of(p),
            });
        } else {
            let mut part = leaf(&ct, p.contents(), p.encoding, depth)?;
            part.duplicate_types = duplicates_of(p);
            parts.push(part);
        }
    }
    Ok(Kind::Multipart(parts))
}

/// Every Content-Type header of a part, in order.
fn types_of(p: &mail_parser::MessagePart<'_>) -> Vec<String> {
    p.headers()
        .iter()
        .filter(|h| h.name == mail_parser::HeaderName::ContentType)
        .filter_map(|h| h.value.as_content_type())
        .map(|c| {
            match c.subtype() {
                Some(s) => format!("{}/{}", c.ctype(), s),
                None => c.ctype().to_string(),
            }
            .to_ascii_lowercase()
        })
        .collect()
}

/// The part's type as cloud-init sees it: the first Content-Type header (Python's `Message.get` returns the
/// first of repeated headers), `text/plain` without one.
fn type_of(p: &mail_parser::MessagePart<'_>) -> String {
    types_of(p).into_iter().next().unwrap_or_else(|| "text/plain".into())
}

/// All declared types when there are several, else nothing.
fn duplicates_of(p: &mail_parser::MessagePart<'_>) -> Vec<String> {
    let all = types_of(p);
    if all.len() > 1 {
        all
    } else {
        Vec::new()
    }
}

/// A non-multipart MIME part: transfer encoding, then gzip, then its type (or, for generic types, its content).
fn leaf(ct: &str, contents: &[u8], encoding: mail_parser::Encoding, depth: usize) -> Result<Part, FormatError> {
    let mut layers = Vec::new();
    if encoding == mail_parser::Encoding::Base64 {
        layers.push(Layer::Base64);
    }
    let mut content = contents.to_vec();
    if GZIP_TYPES.contains(&ct) || content.starts_with(&GZIP_MAGIC) {
        layers.push(Layer::Gzip);
        content = gunzip(&content)?;
    }
    let kind = match ct {
        "text/x-shellscript" => Kind::ShellScript,
        "text/cloud-config" => Kind::CloudConfig,
        "text/cloud-boothook" => Kind::Boothook,
        "text/x-include-url" => Kind::IncludeUrl,
        "application/node.eks.aws" => Kind::NodeConfig,
        t if t == "text/plain" || t == "text/x-not-multipart" || GZIP_TYPES.contains(&t) => {
            by_content(&content, depth + 1)?
        }
        other => Kind::Unknown(format!("MIME type {other}")),
    };
    Ok(Part {
        content_type: Some(ct.to_string()),
        layers,
        kind,
        content,
        duplicate_types: Vec::new(),
    })
}

impl Kind {
    /// What a leaf is called in reports (a multipart container is listed by its parts instead).
    fn name(&self) -> String {
        match self {
            Kind::ShellScript => "shell script".into(),
            Kind::CloudConfig => "cloud-config".into(),
            Kind::Boothook => "boothook".into(),
            Kind::IncludeUrl => "include-url".into(),
            Kind::NodeConfig => "NodeConfig".into(),
            Kind::Unknown(w) => format!("unrecognised ({w})"),
            Kind::Multipart(parts) => format!("multipart of {}", parts.len()),
        }
    }
}

impl Part {
    /// The leaves in document order (multipart containers flattened away).
    pub fn leaves(&self) -> Vec<&Part> {
        match &self.kind {
            Kind::Multipart(parts) => parts.iter().flat_map(Part::leaves).collect(),
            _ => vec![self],
        }
    }
}

impl fmt::Display for Part {
    /// One line: `gzip(base64(...))` wrappers, then the kind; multipart lists its parts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for l in &self.layers {
            write!(f, "{l}(")?;
        }
        match &self.kind {
            Kind::Multipart(parts) => {
                write!(f, "{}[", self.content_type.as_deref().unwrap_or("MIME"))?;
                for (i, p) in parts.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{p}")?;
                }
                write!(f, "]")?;
            }
            leaf => {
                let what = leaf.name();
                match &self.content_type {
                    Some(ct) => write!(f, "{ct}: {what}")?,
                    None => write!(f, "{what}")?,
                }
                if !self.duplicate_types.is_empty() {
                    write!(
                        f,
                        " (duplicated Content-Type: {}; cloud-init uses the first)",
                        self.duplicate_types.join(", ")
                    )?;
                }
            }
        }
        for _ in &self.layers {
            write!(f, ")")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    pub fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(bytes).unwrap();
        e.finish().unwrap()
    }

    fn b64(bytes: &[u8]) -> Vec<u8> {
        base64::engine::general_purpose::STANDARD.encode(bytes).into_bytes()
    }

    #[test]
    fn plain_formats() {
        assert_eq!(detect(b"#!/bin/bash\necho hi\n").unwrap().kind, Kind::ShellScript);
        assert_eq!(detect(b"#cloud-config\nruncmd: []\n").unwrap().kind, Kind::CloudConfig);
        assert_eq!(detect(b"#cloud-boothook\n#!/bin/sh\n").unwrap().kind, Kind::Boothook);
        let nc = b"---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n";
        assert_eq!(detect(nc).unwrap().kind, Kind::NodeConfig);
        assert!(matches!(detect(b"hello world").unwrap().kind, Kind::Unknown(_)));
        assert!(matches!(detect(&[0, 1, 2, 0xff]).unwrap().kind, Kind::Unknown(_)));
    }

    #[test]
    fn layers_are_peeled_outermost_first() {
        let cc = b"#cloud-config\nruncmd: [[echo, hi]]\n";
        let p = detect(&b64(&gzip(cc))).unwrap();
        assert_eq!(p.layers, vec![Layer::Base64, Layer::Gzip]);
        assert_eq!(p.kind, Kind::CloudConfig);
        assert_eq!(p.content, cc);
        assert_eq!(p.to_string(), "base64(gzip(cloud-config))");
        // Plain text that happens to be valid base64 of nothing recognisable stays as it is.
        assert!(matches!(detect(b"abcdabcdabcd").unwrap().kind, Kind::Unknown(_)));
    }

    #[test]
    fn corrupt_gzip_is_an_error() {
        let mut g = gzip(b"#!/bin/sh\n");
        g.truncate(8);
        assert!(matches!(detect(&g), Err(FormatError::Gzip(_))));
    }

    #[test]
    fn mime_parts_by_type_encoding_and_content() {
        let nc = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n";
        let msg = format!(
            "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"==B==\"\r\n\r\n\
--==B==\r\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\r\n\r\n#!/bin/bash\necho one\r\n\
--==B==\r\nContent-Type: application/node.eks.aws\r\nContent-Transfer-Encoding: base64\r\n\r\n{}\r\n\
--==B==\r\nContent-Type: text/plain\r\n\r\n#cloud-config\nruncmd: []\r\n\
--==B==\r\nContent-Type: text/x-unknown\r\n\r\nwhatever\r\n\
--==B==--\r\n",
            String::from_utf8(b64(nc.as_bytes())).unwrap()
        );
        let p = detect(msg.as_bytes()).unwrap();
        let leaves = p.leaves();
        assert_eq!(leaves.len(), 4, "{p}");
        assert_eq!(leaves[0].kind, Kind::ShellScript);
        assert_eq!(leaves[1].kind, Kind::NodeConfig);
        assert_eq!(leaves[1].layers, vec![Layer::Base64]);
        assert_eq!(String::from_utf8_lossy(&leaves[1].content), nc);
        assert_eq!(leaves[2].kind, Kind::CloudConfig);
        assert!(matches!(&leaves[3].kind, Kind::Unknown(w) if w.contains("text/x-unknown")));
    }

    #[test]
    fn duplicated_content_type_reads_as_cloud_init_reads_it() {
        let msg = "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"//\"\r\n\r\n--//\r\n\
Content-Type: text/cloud-config; charset=\"us-ascii\"\r\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\r\n\r\n\
#!/bin/bash\necho hi\r\n--//--\r\n";
        let p = detect(msg.as_bytes()).unwrap();
        let leaf = p.leaves()[0].clone();
        assert_eq!(leaf.content_type.as_deref(), Some("text/cloud-config"));
        assert_eq!(leaf.kind, Kind::CloudConfig);
        assert_eq!(leaf.duplicate_types, vec!["text/cloud-config", "text/x-shellscript"]);
        assert!(
            p.to_string()
                .contains("duplicated Content-Type: text/cloud-config, text/x-shellscript"),
            "{p}"
        );
        let single = detect(b"Content-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/x-shellscript\r\n\r\n#!/bin/sh\r\n--b--\r\n").unwrap();
        assert!(single.leaves()[0].duplicate_types.is_empty());
    }

    #[test]
    fn nested_multipart() {
        let inner = "Content-Type: multipart/alternative; boundary=\"in\"\r\n\r\n--in\r\nContent-Type: text/cloud-boothook\r\n\r\n#cloud-boothook\necho\r\n--in--\r\n";
        let msg = format!("Content-Type: multipart/mixed; boundary=\"out\"\r\n\r\n--out\r\n{inner}\r\n--out\r\nContent-Type: text/x-shellscript\r\n\r\n#!/bin/sh\r\n--out--\r\n");
        let p = detect(msg.as_bytes()).unwrap();
        let kinds: Vec<_> = p.leaves().iter().map(|l| l.kind.clone()).collect();
        assert_eq!(kinds, vec![Kind::Boothook, Kind::ShellScript], "{p}");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400)) {
            let _ = detect(&bytes);
            let _ = detect(&gzip(&bytes));
            let mut mime = b"Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\n".to_vec();
            mime.extend_from_slice(&bytes);
            let _ = detect(&mime);
        }
    }

    #[test]
    fn a_gzip_bomb_is_refused_not_expanded() {
        use std::io::Write;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..17 {
            gz.write_all(&zeros).unwrap();
        }
        let bomb = gz.finish().unwrap();
        assert!(bomb.len() < 64 << 10, "{} bytes", bomb.len());
        let err = gunzip(&bomb).unwrap_err().to_string();
        assert!(err.contains("16 MiB"), "{err}");
    }
}
