//! The API server's audit log (JSON lines): who the API server took a caller to be, and who changed what when.
//! The policy (cluster/apiserver.rs) logs aws-auth at RequestResponse, Node creations at Request and other Node
//! and CSR traffic at Metadata.
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct User {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    #[serde(default)]
    pub resource: String,
    #[serde(default)]
    pub namespace: String,
    #[serde(default)]
    pub name: String,
}

#[derive(Debug, Clone, Deserialize, Default)]
pub struct Status {
    #[serde(default)]
    pub code: u16,
}

/// One audit event (the fields the assertions use).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    #[serde(default)]
    pub stage: String,
    #[serde(default)]
    pub verb: String,
    #[serde(default)]
    pub user: User,
    #[serde(default)]
    pub impersonated_user: Option<User>,
    #[serde(default)]
    pub object_ref: Option<ObjectRef>,
    #[serde(default)]
    pub response_status: Option<Status>,
    /// RFC 3339 with microseconds; events of one log compare as strings.
    #[serde(default)]
    pub stage_timestamp: String,
    #[serde(default)]
    pub request_object: Option<serde_json::Value>,
}

impl Event {
    /// About `resource` `name`; a create's name is in its request object (the URI has none).
    fn is(&self, resource: &str, name: &str) -> bool {
        let named = |o: &ObjectRef| {
            o.name == name
                || (o.name.is_empty()
                    && self
                        .request_object
                        .as_ref()
                        .and_then(|r| r["metadata"]["name"].as_str())
                        == Some(name))
        };
        self.object_ref
            .as_ref()
            .is_some_and(|o| o.resource == resource && named(o))
    }

    fn succeeded(&self) -> bool {
        self.stage == "ResponseComplete" && self.response_status.as_ref().is_some_and(|s| s.code < 300)
    }

    /// The effective user (the impersonated one, if any).
    pub fn acting_user(&self) -> &User {
        self.impersonated_user.as_ref().unwrap_or(&self.user)
    }
}

/// Every parseable event of the log (a line cut short while the API server writes is skipped).
pub fn read(path: &Path) -> Vec<Event> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The successful creation of Node `name` at or after `since` (a shared control plane outlives scenarios and a
/// node name can recur): who registered it, when, and (policy level Request) what it registered.
pub fn node_created<'a>(events: &'a [Event], name: &str, since: std::time::SystemTime) -> Option<&'a Event> {
    let since = humantime::format_rfc3339_micros(since).to_string();
    events
        .iter()
        .find(|e| e.verb == "create" && e.is("nodes", name) && e.succeeded() && e.stage_timestamp >= since)
}

/// Successful writes of `kube-system/aws-auth` since `since` whose request mentions `needle` (a role ARN), oldest
/// first. Earlier writes belong to an earlier scenario on the same (shared) control plane.
pub fn aws_auth_writes<'a>(events: &'a [Event], needle: &str, since: std::time::SystemTime) -> Vec<&'a Event> {
    let since = humantime::format_rfc3339_micros(since).to_string();
    events
        .iter()
        .filter(|e| e.stage_timestamp >= since)
        .filter(|e| matches!(e.verb.as_str(), "create" | "update" | "patch"))
        .filter(|e| e.is("configmaps", "aws-auth") && e.succeeded())
        .filter(|e| {
            e.request_object
                .as_ref()
                .is_some_and(|o| o.to_string().contains(needle))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"kind":"Event","level":"RequestResponse","stage":"ResponseComplete","verb":"create","user":{"username":"eks:node-manager","groups":["system:authenticated"]},"objectRef":{"resource":"configmaps","namespace":"kube-system"},"responseStatus":{"code":201},"requestObject":{"metadata":{"name":"aws-auth"},"data":{"mapRoles":"- rolearn: arn:aws:iam::111122223333:role/NodeRole\n"}},"stageTimestamp":"2026-11-22T14:00:01.000001Z"}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"create","user":{"username":"system:node:ip-1","groups":["system:bootstrappers","system:nodes","system:authenticated"]},"objectRef":{"resource":"nodes","name":"ip-1"},"responseStatus":{"code":201},"stageTimestamp":"2026-11-22T14:00:03.000001Z"}
{"kind":"Event","level":"Metadata","stage":"ResponseComplete","verb":"create","user":{"username":"system:node:i-0","groups":["system:nodes"]},"objectRef":{"resource":"nodes","name":"ip-2"},"responseStatus":{"code":403},"stageTimestamp":"2026-11-22T14:00:04.000001Z"}
{"truncated"#;

    #[test]
    fn finds_registrations_and_aws_auth_writes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.log");
        std::fs::write(&p, LOG).unwrap();
        let events = read(&p);
        assert_eq!(events.len(), 3);
        let epoch = std::time::SystemTime::UNIX_EPOCH;
        let n = node_created(&events, "ip-1", epoch).unwrap();
        // A registration from before the node launched is another node's of the same name.
        let launched = humantime::parse_rfc3339("2026-11-22T14:00:03.5Z").unwrap();
        assert!(node_created(&events, "ip-1", launched).is_none());
        assert_eq!(n.acting_user().username, "system:node:ip-1");
        // A refused registration is not a registration.
        assert!(node_created(&events, "ip-2", epoch).is_none());
        let w = aws_auth_writes(&events, "role/NodeRole", epoch);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].user.username, "eks:node-manager");
        assert!(w[0].stage_timestamp < n.stage_timestamp);
        assert!(aws_auth_writes(&events, "role/Other", epoch).is_empty());
        // A write from before the scenario's instance launched is an earlier scenario's.
        assert!(aws_auth_writes(&events, "role/NodeRole", launched).is_empty());
    }
}
