//! From an authenticated AWS caller to a Kubernetes identity: EKS access entries and aws-auth, in the order
//! the cluster's authentication mode gives them.
use super::aws_auth::{self, AwsAuth, TemplateContext};
use serde::Deserialize;
use std::collections::BTreeMap;

/// EKS `accessConfig.authenticationMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
pub enum AuthenticationMode {
    #[serde(rename = "CONFIG_MAP")]
    ConfigMap,
    #[serde(rename = "API")]
    Api,
    #[default]
    #[serde(rename = "API_AND_CONFIG_MAP")]
    ApiAndConfigMap,
}

impl AuthenticationMode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ConfigMap => "CONFIG_MAP",
            Self::Api => "API",
            Self::ApiAndConfigMap => "API_AND_CONFIG_MAP",
        }
    }
}

/// The access entry types a node or a person uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
pub enum AccessEntryType {
    #[default]
    #[serde(rename = "STANDARD")]
    Standard,
    #[serde(rename = "EC2_LINUX")]
    Ec2Linux,
    #[serde(rename = "EC2_WINDOWS")]
    Ec2Windows,
}

/// Username prefixes EKS keeps for itself: a STANDARD access entry naming one is refused.
pub const RESERVED_USERNAME_PREFIXES: [&str; 5] = ["system:", "eks:", "aws:", "amazon:", "iam:"];

impl AccessEntryType {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Standard => "STANDARD",
            Self::Ec2Linux => "EC2_LINUX",
            Self::Ec2Windows => "EC2_WINDOWS",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "STANDARD" => Some(Self::Standard),
            "EC2_LINUX" => Some(Self::Ec2Linux),
            "EC2_WINDOWS" => Some(Self::Ec2Windows),
            _ => None,
        }
    }
}

/// An access entry as EKS stores it, with the username and groups it grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessEntry {
    pub principal_arn: String,
    pub entry_type: AccessEntryType,
    pub username: String,
    pub kubernetes_groups: Vec<String>,
}

impl AccessEntry {
    /// Validates a CreateAccessEntry request and fills in EKS's defaults: EC2 types get
    /// `system:node:{{EC2PrivateDNSName}}` and may not set a username or groups; STANDARD entries default to
    /// the principal's ARN (an assumed-role session for roles).
    /// What CreateAccessEntry accepts: an IAM role or user ARN; EC2 types take no username or groups (EKS sets
    /// `system:node:{{EC2PrivateDNSName}}`); a STANDARD entry's username may not take EKS's reserved prefixes.
    pub fn new(
        principal_arn: &str,
        entry_type: AccessEntryType,
        username: Option<&str>,
        groups: &[String],
    ) -> Result<Self, String> {
        let canonical = aws_auth::canonical_arn(principal_arn)?;
        if canonical != principal_arn {
            return Err(format!(
                "principalArn '{principal_arn}' must be an IAM role or user ARN"
            ));
        }
        let is_role = principal_arn.contains(":role/");
        let username = match entry_type {
            AccessEntryType::Ec2Linux | AccessEntryType::Ec2Windows => {
                if !is_role {
                    return Err(format!(
                        "{} access entries need a role, not '{principal_arn}'",
                        entry_type.as_str()
                    ));
                }
                if username.is_some() || !groups.is_empty() {
                    return Err(format!(
                        "{} access entries take no username or kubernetesGroups",
                        entry_type.as_str()
                    ));
                }
                "system:node:{{EC2PrivateDNSName}}".to_string()
            }
            AccessEntryType::Standard => match username {
                Some(u) if RESERVED_USERNAME_PREFIXES.iter().any(|p| u.starts_with(p)) => {
                    return Err(format!(
                        "The username {u} is not valid: it can't start with {}",
                        RESERVED_USERNAME_PREFIXES.join(", ")
                    ))
                }
                Some(u) => u.to_string(),
                None if is_role => {
                    let (prefix, role) = principal_arn.split_once(":role/").unwrap_or((principal_arn, ""));
                    let role = role.rsplit('/').next().unwrap_or(role);
                    format!(
                        "{}:assumed-role/{role}/{{{{SessionName}}}}",
                        prefix.replacen(":iam:", ":sts:", 1)
                    )
                }
                None => principal_arn.to_string(),
            },
        };
        if let Some(g) = groups.iter().find(|g| g.starts_with("system:")) {
            return Err(format!(
                "kubernetesGroups may not contain '{g}' (system: groups are reserved)"
            ));
        }
        Ok(Self {
            principal_arn: principal_arn.to_string(),
            entry_type,
            username,
            kubernetes_groups: groups.to_vec(),
        })
    }

    /// The groups the entry grants (EC2 types imply the node groups).
    pub fn groups(&self) -> Vec<String> {
        match self.entry_type {
            AccessEntryType::Ec2Linux => vec!["system:nodes".into()],
            AccessEntryType::Ec2Windows => vec!["system:nodes".into(), "eks:kube-proxy-windows".into()],
            AccessEntryType::Standard => self.kubernetes_groups.clone(),
        }
    }
}

/// An authenticated AWS caller (STS GetCallerIdentity's answer plus the key that signed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `arn:aws:sts::<acct>:assumed-role/<role>/<session>` or an IAM user ARN.
    pub arn: String,
    pub account: String,
    pub user_id: String,
    pub access_key_id: String,
}

impl Caller {
    pub fn session_name(&self) -> String {
        if self.arn.contains(":assumed-role/") {
            self.arn.rsplit('/').next().unwrap_or_default().to_string()
        } else {
            String::new()
        }
    }
}

/// The Kubernetes identity the webhook grants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapped {
    pub username: String,
    pub groups: Vec<String>,
    pub uid: String,
    pub extra: BTreeMap<String, Vec<String>>,
    /// Which entry granted it (`access entry arn:...`, `aws-auth mapRoles[0]`).
    pub source: String,
}

/// Maps `caller` in `mode`. `aws_auth` is `None` when the ConfigMap does not exist; `resolve_dns` turns an
/// instance id into its PrivateDnsName (EC2 DescribeInstances).
pub fn map(
    mode: AuthenticationMode,
    aws_auth: Option<&AwsAuth>,
    entries: &[AccessEntry],
    caller: &Caller,
    resolve_dns: &dyn Fn(&str) -> Option<String>,
) -> Result<Mapped, String> {
    let canonical = aws_auth::canonical_arn(&caller.arn)?;
    let use_entries = matches!(mode, AuthenticationMode::Api | AuthenticationMode::ApiAndConfigMap);
    let use_config_map = matches!(
        mode,
        AuthenticationMode::ConfigMap | AuthenticationMode::ApiAndConfigMap
    );
    let from_entry = use_entries
        .then(|| {
            entries
                .iter()
                .find(|e| e.principal_arn.eq_ignore_ascii_case(&canonical))
                .map(|e| {
                    (
                        e.username.clone(),
                        e.groups(),
                        format!("access entry {}", e.principal_arn),
                    )
                })
        })
        .flatten();
    let from_config_map = || {
        use_config_map
            .then(|| aws_auth.and_then(|a| a.grant_for(&canonical)))
            .flatten()
            .map(|g| (g.username_template, g.groups, g.source))
    };
    let Some((template, groups, source)) = from_entry.or_else(from_config_map) else {
        let consulted = match mode {
            AuthenticationMode::Api => "access entries",
            AuthenticationMode::ConfigMap => "aws-auth",
            AuthenticationMode::ApiAndConfigMap => "access entries and aws-auth",
        };
        let hint = if use_config_map {
            match aws_auth {
                None => " (there is no kube-system/aws-auth ConfigMap)".to_string(),
                Some(a) => a.near_miss(&canonical).map(|m| format!(" ({m})")).unwrap_or_default(),
            }
        } else {
            String::new()
        };
        return Err(format!(
            "ARN {canonical} is not mapped: not in the {consulted} of this {} cluster{hint}",
            mode.as_str()
        ));
    };
    let session = caller.session_name();
    let ctx = TemplateContext {
        account_id: caller.account.clone(),
        session_name: session.clone(),
        access_key_id: caller.access_key_id.clone(),
        ec2_private_dns_name: (session.starts_with("i-")).then(|| resolve_dns(&session)).flatten(),
    };
    let username = aws_auth::render(&template, &ctx).map_err(|e| format!("{source}: {e}"))?;
    let extra = BTreeMap::from([
        ("accessKeyId".to_string(), vec![caller.access_key_id.clone()]),
        ("arn".to_string(), vec![caller.arn.clone()]),
        ("canonicalArn".to_string(), vec![canonical.clone()]),
        ("sessionName".to_string(), vec![session]),
        ("principalId".to_string(), vec![caller.user_id.clone()]),
    ]);
    Ok(Mapped {
        username,
        groups,
        uid: format!(
            "aws-iam-authenticator:{}:{}",
            caller.account,
            caller.user_id.split(':').next().unwrap_or_default()
        ),
        extra,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller() -> Caller {
        Caller {
            arn: "arn:aws:sts::111122223333:assumed-role/NodeRole/i-0abc".into(),
            account: "111122223333".into(),
            user_id: "AROAEXAMPLE:i-0abc".into(),
            access_key_id: "ASIAX".into(),
        }
    }

    fn dns(id: &str) -> Option<String> {
        (id == "i-0abc").then(|| "ip-10-0-0-1.us-west-2.compute.internal".to_string())
    }

    fn aws_auth(username: &str) -> AwsAuth {
        AwsAuth {
            map_roles: vec![aws_auth::RoleMapping {
                rolearn: "arn:aws:iam::111122223333:role/NodeRole".into(),
                username: username.into(),
                groups: vec!["system:bootstrappers".into(), "system:nodes".into()],
            }],
            map_users: vec![],
        }
    }

    fn entry(username: Option<&str>, t: AccessEntryType, groups: &[&str]) -> Result<AccessEntry, String> {
        let g: Vec<String> = groups.iter().map(|s| s.to_string()).collect();
        AccessEntry::new("arn:aws:iam::111122223333:role/NodeRole", t, username, &g)
    }

    #[test]
    fn aws_auth_mapping_with_templates() {
        let a = aws_auth("system:node:{{EC2PrivateDNSName}}");
        let m = map(AuthenticationMode::ConfigMap, Some(&a), &[], &caller(), &dns).unwrap();
        assert_eq!(m.username, "system:node:ip-10-0-0-1.us-west-2.compute.internal");
        assert_eq!(m.groups, ["system:bootstrappers", "system:nodes"]);
        assert_eq!(m.source, "aws-auth mapRoles[0]");
        assert_eq!(m.extra["canonicalArn"], ["arn:aws:iam::111122223333:role/NodeRole"]);
        let wrong = aws_auth("system:node:{{SessionName}}");
        let m = map(AuthenticationMode::ConfigMap, Some(&wrong), &[], &caller(), &dns).unwrap();
        assert_eq!(m.username, "system:node:i-0abc");
    }

    #[test]
    fn mode_precedence() {
        let a = aws_auth("from-aws-auth");
        let e = vec![entry(None, AccessEntryType::Ec2Linux, &[]).unwrap()];
        // API_AND_CONFIG_MAP: access entries win.
        let m = map(AuthenticationMode::ApiAndConfigMap, Some(&a), &e, &caller(), &dns).unwrap();
        assert_eq!(m.username, "system:node:ip-10-0-0-1.us-west-2.compute.internal");
        assert_eq!(m.groups, ["system:nodes"]);
        assert!(m.source.starts_with("access entry"));
        // ... and aws-auth fills in when there is no entry.
        let m = map(AuthenticationMode::ApiAndConfigMap, Some(&a), &[], &caller(), &dns).unwrap();
        assert_eq!(m.username, "from-aws-auth");
        // CONFIG_MAP ignores entries, API ignores aws-auth.
        assert_eq!(
            map(AuthenticationMode::ConfigMap, Some(&a), &e, &caller(), &dns)
                .unwrap()
                .username,
            "from-aws-auth"
        );
        let err = map(AuthenticationMode::Api, Some(&a), &[], &caller(), &dns).unwrap_err();
        assert!(err.contains("not in the access entries of this API cluster"), "{err}");
        let err = map(AuthenticationMode::ConfigMap, None, &e, &caller(), &dns).unwrap_err();
        assert!(err.contains("no kube-system/aws-auth"), "{err}");
    }

    #[test]
    fn access_entry_rules() {
        assert!(entry(Some("x"), AccessEntryType::Ec2Linux, &[])
            .unwrap_err()
            .contains("take no username"));
        assert!(entry(None, AccessEntryType::Standard, &["system:masters"])
            .unwrap_err()
            .contains("reserved"));
        let w = entry(None, AccessEntryType::Ec2Windows, &[]).unwrap();
        assert_eq!(w.groups(), ["system:nodes", "eks:kube-proxy-windows"]);
        let s = entry(None, AccessEntryType::Standard, &["dev"]).unwrap();
        assert_eq!(
            s.username,
            "arn:aws:sts::111122223333:assumed-role/NodeRole/{{SessionName}}"
        );
        let m = map(AuthenticationMode::Api, None, &[s], &caller(), &dns).unwrap();
        assert_eq!(m.username, "arn:aws:sts::111122223333:assumed-role/NodeRole/i-0abc");
        assert_eq!(m.groups, ["dev"]);
        assert!(AccessEntry::new("arn:aws:sts::1:assumed-role/R/s", AccessEntryType::Standard, None, &[]).is_err());
    }

    #[test]
    fn unknown_instance_in_template_is_an_error() {
        let mut c = caller();
        c.arn = "arn:aws:sts::111122223333:assumed-role/NodeRole/i-0unknown".into();
        let a = aws_auth("system:node:{{EC2PrivateDNSName}}");
        let err = map(AuthenticationMode::ConfigMap, Some(&a), &[], &c, &dns).unwrap_err();
        assert!(err.contains("not an EC2 instance"), "{err}");
    }
}
