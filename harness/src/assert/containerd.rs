//! What containerd itself says is wrong with how a node set it up: the configuration keys it ignored (it logs
//! `Ignoring unknown key in TOML` for each key its version no longer knows, then runs without them) and the
//! deprecated features in use (`ctr deprecations list`). A key a newer containerd ignores (nodeadm's
//! `enable_cdi`, `cni bin_dir` on 2.4) passes every other check until a user relies on it.

/// One thing containerd warned about, in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// `ignored key "cni bin_dir" (plugin io.containerd.cri.v1.runtime)`, `deprecation io.containerd...`.
    pub what: String,
    /// containerd's message.
    pub said: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.what, self.said)
    }
}

/// At most this many warnings are kept (a node's log is its own to fill).
const MAX_WARNINGS: usize = 32;
/// A field's value longer than this is cut.
const MAX_FIELD: usize = 300;

/// The keys containerd ignored, from its log (its journal): one warning per key and plugin (or file), the first
/// time it said so.
pub fn ignored_keys(log: &str) -> Vec<Warning> {
    let mut out: Vec<Warning> = Vec::new();
    for line in log.lines() {
        let Some(msg) = field(line, "msg") else { continue };
        if !msg.starts_with("Ignoring unknown key in TOML") {
            continue;
        }
        let key = field(line, "key").unwrap_or_default();
        let place = field(line, "plugin")
            .map(|p| format!("plugin {p}"))
            .or_else(|| field(line, "file").map(|f| format!("file {f}")))
            .unwrap_or_else(|| "its configuration".into());
        let what = format!("ignored key {key:?} ({place})");
        if out.iter().any(|w| w.what == what) {
            continue;
        }
        if out.len() >= MAX_WARNINGS {
            break;
        }
        out.push(Warning { what, said: msg });
    }
    out
}

/// Deprecations the host causes, not the node's configuration: containerd reports cgroup v1 on a cgroup v1 host
/// (as this one may be), whatever the bootstrap did. A note, never a failed check.
pub const HOST_CAUSED: &[&str] = &["io.containerd.deprecation/cgroup-v1"];

/// Whether `w` is one of [`HOST_CAUSED`].
pub fn host_caused(w: &Warning) -> bool {
    HOST_CAUSED.iter().any(|id| w.what == format!("deprecation {id}"))
}

/// The deprecations `ctr deprecations list --format json` printed (nothing at all when there are none).
pub fn deprecations(json: &str) -> Result<Vec<Warning>, String> {
    #[derive(serde::Deserialize)]
    struct Listed {
        id: String,
        message: String,
    }
    if json.trim().is_empty() || json.trim() == "null" {
        return Ok(Vec::new());
    }
    let listed: Vec<Listed> = serde_json::from_str(json).map_err(|e| format!("unreadable: {e}"))?;
    Ok(listed
        .into_iter()
        .take(MAX_WARNINGS)
        .map(|l| Warning {
            what: format!("deprecation {}", cut(&l.id)),
            said: cut(&l.message),
        })
        .collect())
}

/// A `name=value` field of a logrus text line: the value bare (up to a space) or quoted (with `\"` escapes).
fn field(line: &str, name: &str) -> Option<String> {
    let needle = format!(" {name}=");
    let start = line.find(&needle)? + needle.len();
    let rest = &line[start..];
    let value = if let Some(quoted) = rest.strip_prefix('"') {
        let mut v = String::new();
        let mut chars = quoted.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => v.extend(chars.next()),
                '"' => break,
                c => v.push(c),
            }
        }
        v
    } else {
        rest.split(' ').next().unwrap_or_default().to_string()
    };
    Some(cut(&value))
}

fn cut(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(MAX_FIELD).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // As containerd 2.4.2 logs them through the journal (logrus text, fields sorted).
    const LOG: &str = r#"Nov 29 08:48:56.774466 n containerd[124]: time="2026-11-29T08:48:56.77Z" level=warning msg="Ignoring unknown key in TOML for plugin" error="strict mode: fields in the document are missing in the target struct" key=enable_cdi plugin=io.containerd.cri.v1.runtime
Nov 29 08:48:56.774466 n containerd[124]: time="2026-11-29T08:48:56.77Z" level=warning msg="Ignoring unknown key in TOML for plugin" error="strict mode: fields in the document are missing in the target struct" key="cni bin_dir" plugin=io.containerd.cri.v1.runtime
Nov 29 08:48:56.774466 n containerd[124]: time="2026-11-29T08:48:56.77Z" level=warning msg="Ignoring unknown key in TOML for plugin" error="strict mode" key="cni bin_dir" plugin=io.containerd.cri.v1.runtime
Nov 29 08:48:56.774466 n containerd[124]: time="2026-11-29T08:48:56.77Z" level=warning msg="Ignoring unknown key in TOML" column=3 error="strict mode" file=/etc/containerd/config.toml key="plugins x" row=7
Nov 29 08:48:56.774466 n containerd[124]: time="2026-11-29T08:48:56.77Z" level=info msg="serving..." address=/run/containerd/containerd.sock"#;

    #[test]
    fn each_ignored_key_once_with_its_plugin_or_file() {
        let w = ignored_keys(LOG);
        let what: Vec<&str> = w.iter().map(|w| w.what.as_str()).collect();
        assert_eq!(
            what,
            [
                "ignored key \"enable_cdi\" (plugin io.containerd.cri.v1.runtime)",
                "ignored key \"cni bin_dir\" (plugin io.containerd.cri.v1.runtime)",
                "ignored key \"plugins x\" (file /etc/containerd/config.toml)",
            ]
        );
        assert_eq!(w[0].said, "Ignoring unknown key in TOML for plugin");
        assert!(ignored_keys("level=info msg=\"nothing\"").is_empty());
    }

    #[test]
    fn deprecations_as_ctr_prints_them() {
        let json = r#"[{"id":"io.containerd.deprecation/cri-registry-configs","message":"The `configs` property of `[plugins.\"io.containerd.grpc.v1.cri\".registry]` is deprecated","lastOccurrence":"2026-11-29T08:48:56Z"}]"#;
        let d = deprecations(json).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].what, "deprecation io.containerd.deprecation/cri-registry-configs");
        assert!(d[0].said.starts_with("The `configs` property"));
        assert!(
            deprecations("").unwrap().is_empty(),
            "ctr prints nothing when there are none"
        );
        assert!(deprecations("ID  LAST OCCURRENCE").is_err());
        let host = deprecations(r#"[{"id":"io.containerd.deprecation/cgroup-v1","message":"m"}]"#).unwrap();
        assert!(host_caused(&host[0]) && !host_caused(&d[0]));
    }

    #[test]
    fn a_node_cannot_flood_the_report() {
        let many: String = (0..100)
            .map(|i| format!(" msg=\"Ignoring unknown key in TOML for plugin\" key=k{i} plugin=p\n"))
            .collect();
        assert_eq!(ignored_keys(&many).len(), MAX_WARNINGS);
        let long = format!(" msg=\"Ignoring unknown key in TOML\" key={}\n", "x".repeat(5000));
        assert!(ignored_keys(&long)[0].what.len() < MAX_FIELD + 40);
    }
}
