//! User data a producer rendered for a real cluster (Karpenter's, Terraform's, eksctl's or Cluster API's output,
//! saved to a file): the API server endpoint and cluster CA in it are that cluster's, and a node here must reach
//! this run's instead. They are found where nodeadm and bootstrap.sh read them (a NodeConfig's `spec.cluster`,
//! bootstrap.sh's `--apiserver-endpoint` and `--b64-cluster-ca`) and every occurrence becomes a placeholder, so the
//! rest of the file reaches the node byte for byte. The cluster's name and service CIDR are kept: `nodejoin init`
//! gives the scenario's cluster the same ones.
use std::fmt;

/// What a rendered text says about its cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterFacts {
    pub name: Option<String>,
    pub endpoint: Option<String>,
    pub ca_base64: Option<String>,
    pub service_cidr: Option<String>,
}

impl fmt::Display for ClusterFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        write!(
            f,
            "name {}, endpoint {}, service CIDR {}, CA {}",
            show(&self.name),
            show(&self.endpoint),
            show(&self.service_cidr),
            if self.ca_base64.is_some() { "present" } else { "-" }
        )
    }
}

/// The cluster facts of `text` (the innermost text of a user-data file: MIME parts with a base64 transfer
/// encoding are not looked into). The first value of each wins.
pub fn facts(text: &str) -> ClusterFacts {
    let mut out = ClusterFacts::default();
    let mut cluster_indent: Option<usize> = None;
    for raw in text.lines() {
        let line = raw.trim_end_matches('\r');
        let body = line.trim_start();
        let indent = line.len() - body.len();
        if body.is_empty() || body.starts_with('#') {
            continue;
        }
        if cluster_indent.is_some_and(|i| indent <= i) {
            cluster_indent = None;
        }
        if body == "cluster:" {
            cluster_indent = Some(indent);
            continue;
        }
        if cluster_indent.is_some() {
            if let Some((key, value)) = body.split_once(':') {
                let value = unquote(value.trim());
                let slot = match key.trim() {
                    "name" => &mut out.name,
                    "apiServerEndpoint" => &mut out.endpoint,
                    "certificateAuthority" => &mut out.ca_base64,
                    "cidr" => &mut out.service_cidr,
                    _ => continue,
                };
                if slot.is_none() && !value.is_empty() {
                    *slot = Some(value.to_string());
                }
            }
        }
        // bootstrap.sh's flags, in a shell part (AL2 and custom AMIs that keep its interface).
        let words: Vec<&str> = body.split_whitespace().collect();
        for pair in words.windows(2) {
            let slot = match pair[0] {
                "--apiserver-endpoint" => &mut out.endpoint,
                "--b64-cluster-ca" => &mut out.ca_base64,
                _ => continue,
            };
            if slot.is_none() {
                *slot = Some(unquote(pair[1]).to_string());
            }
        }
    }
    out
}

fn unquote(v: &str) -> &str {
    let v = v.trim();
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// `text` with its cluster's endpoint and CA replaced by `{{cluster.endpoint}}` and `{{cluster.caBase64}}`
/// everywhere; an error names what is missing (a file marked rendered that no node here could join with).
pub fn to_placeholders(text: &str) -> Result<String, String> {
    let f = facts(text);
    let missing = |what: &str| {
        format!(
            "rendered: found no {what} in the user data (a NodeConfig's spec.cluster, or bootstrap.sh's \
             --apiserver-endpoint / --b64-cluster-ca; MIME parts encoded as base64 are not read)"
        )
    };
    let endpoint = f.endpoint.ok_or_else(|| missing("API server endpoint"))?;
    let ca = f.ca_base64.ok_or_else(|| missing("cluster CA"))?;
    let mut out = text.to_string();
    // A value that is already a placeholder stays; anything else must look like what EKS hands out, so a short
    // common string is never replaced all over the file.
    if !endpoint.starts_with("{{") {
        if !endpoint.starts_with("https://") {
            return Err(format!(
                "rendered: the API server endpoint {endpoint:?} is not an https:// URL"
            ));
        }
        out = out.replace(&endpoint, "{{cluster.endpoint}}");
    }
    if !ca.starts_with("{{") {
        if ca.len() < 64 || !ca.bytes().all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b)) {
            return Err("rendered: the cluster CA is not a base64 PEM bundle".into());
        }
        out = out.replace(&ca, "{{cluster.caBase64}}");
    }
    Ok(out)
}

/// The node labels a text's `--node-labels` flags give (quotes removed), in order.
pub fn node_labels(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("--node-labels=") {
        let rest = &text[at + "--node-labels=".len()..];
        let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
        let value = rest[..end].trim_matches(|c| c == '"' || c == '\'');
        for pair in value.split(',') {
            if let Some((k, v)) = pair.split_once('=') {
                out.push((k.to_string(), v.to_string()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMvakNDQWVhZ0F3SUJBZ0lCQURBTkJna3Foa2lHOXcwQkFRc0ZBREFWTVJNd0VRWURWUVFERXdwcmRXSmwK";
    const ENDPOINT: &str = "https://0123456789ABCDEF0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com";

    /// Karpenter's layout (boundary `//`, keys in its order, quoted flags), with a real cluster's values.
    fn karpenter() -> String {
        format!(
            "MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"//\"\r\n\r\n--//\r\n\
             Content-Type: application/node.eks.aws\r\n\r\napiVersion: node.eks.aws/v1alpha1\r\nkind: NodeConfig\r\n\
             metadata:\r\n  creationTimestamp: null\r\nspec:\r\n  cluster:\r\n    apiServerEndpoint: {ENDPOINT}\r\n\
             \x20   certificateAuthority: {CA}\r\n    cidr: 172.20.0.0/16\r\n    name: acme-prod\r\n  containerd: {{}}\r\n\
             \x20 kubelet:\r\n    flags:\r\n    - --node-labels=\"team=a\"\r\n\r\n--//--\r\n"
        )
    }

    #[test]
    fn a_nodeconfigs_cluster_is_found_and_its_endpoint_and_ca_become_placeholders() {
        let text = karpenter();
        let f = facts(&text);
        assert_eq!(f.name.as_deref(), Some("acme-prod"));
        assert_eq!(f.endpoint.as_deref(), Some(ENDPOINT));
        assert_eq!(f.ca_base64.as_deref(), Some(CA));
        assert_eq!(f.service_cidr.as_deref(), Some("172.20.0.0/16"));
        assert_eq!(node_labels(&text), [("team".to_string(), "a".to_string())]);
        let out = to_placeholders(&text).unwrap();
        assert!(!out.contains(ENDPOINT) && !out.contains(CA), "{out}");
        assert!(out.contains("apiServerEndpoint: {{cluster.endpoint}}\r\n"), "{out}");
        assert!(out.contains("certificateAuthority: {{cluster.caBase64}}\r\n"), "{out}");
        // Everything else byte for byte.
        assert_eq!(
            out.replace("{{cluster.endpoint}}", ENDPOINT)
                .replace("{{cluster.caBase64}}", CA),
            text
        );
    }

    #[test]
    fn quoted_values_a_name_outside_the_cluster_and_bootstrap_flags() {
        let text = format!(
            "metadata:\n  name: not-the-cluster\nspec:\n  cluster:\n    name: \"ns_cluster\"\n    apiServerEndpoint: \
             '{ENDPOINT}'\n    certificateAuthority: \"{CA}\"\n  kubelet: {{}}\n"
        );
        let f = facts(&text);
        assert_eq!(f.name.as_deref(), Some("ns_cluster"));
        assert_eq!(f.endpoint.as_deref(), Some(ENDPOINT));
        let shell = format!(
            "#!/bin/bash\n/etc/eks/bootstrap.sh acme --apiserver-endpoint '{ENDPOINT}' --b64-cluster-ca {CA}\n"
        );
        let out = to_placeholders(&shell).unwrap();
        assert_eq!(
            out,
            "#!/bin/bash\n/etc/eks/bootstrap.sh acme --apiserver-endpoint '{{cluster.endpoint}}' --b64-cluster-ca {{cluster.caBase64}}\n"
        );
    }

    #[test]
    fn what_cannot_be_joined_with_is_said() {
        let err = to_placeholders("#!/bin/bash\necho hi\n").unwrap_err();
        assert!(err.contains("no API server endpoint"), "{err}");
        let err = to_placeholders(&format!("spec:\n  cluster:\n    apiServerEndpoint: {ENDPOINT}\n")).unwrap_err();
        assert!(err.contains("no cluster CA"), "{err}");
        let err = to_placeholders(&format!(
            "spec:\n  cluster:\n    apiServerEndpoint: x\n    certificateAuthority: {CA}\n"
        ))
        .unwrap_err();
        assert!(err.contains("not an https:// URL"), "{err}");
        // Placeholders already there are fine: the file is its own template.
        let t = "spec:\n  cluster:\n    apiServerEndpoint: {{cluster.endpoint}}\n    certificateAuthority: {{cluster.caBase64}}\n";
        assert_eq!(to_placeholders(t).unwrap(), t);
    }
}
