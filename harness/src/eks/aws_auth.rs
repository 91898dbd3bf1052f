//! The `kube-system/aws-auth` ConfigMap: parsing its `mapRoles` / `mapUsers` documents, matching a caller's
//! ARN, and rendering username templates, with the rules EKS's authenticator applies.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One `mapRoles` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RoleMapping {
    /// The IAM role's ARN (matched without its path, ignoring case, as EKS does).
    pub rolearn: String,
    /// The Kubernetes username it maps to (aws-auth templates allowed, e.g. `{{SessionName}}`).
    pub username: String,
    /// The Kubernetes groups it grants.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// One `mapUsers` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UserMapping {
    /// The IAM user's ARN (matched ignoring case, as EKS does).
    pub userarn: String,
    /// The Kubernetes username it maps to (aws-auth templates allowed, e.g. `{{SessionName}}`).
    pub username: String,
    /// The Kubernetes groups it grants.
    #[serde(default)]
    pub groups: Vec<String>,
}

/// The parsed ConfigMap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsAuth {
    pub map_roles: Vec<RoleMapping>,
    pub map_users: Vec<UserMapping>,
}

/// The username and groups an entry grants, before templates are rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub username_template: String,
    pub groups: Vec<String>,
    /// `aws-auth mapRoles[2]`, for reports.
    pub source: String,
}

impl AwsAuth {
    /// Parses the ConfigMap's `data`. Keys other than mapRoles/mapUsers/mapAccounts are errors, as are entries
    /// without an ARN or username, unknown fields, and ARNs that are not IAM ARNs.
    pub fn parse(data: &BTreeMap<String, String>) -> Result<Self, String> {
        let mut out = AwsAuth::default();
        for (key, text) in data {
            match key.as_str() {
                "mapRoles" => out.map_roles = parse_list(key, text)?,
                "mapUsers" => out.map_users = parse_list(key, text)?,
                "mapAccounts" => {
                    let _: Vec<String> = parse_list(key, text)?;
                }
                other => {
                    return Err(format!(
                        "aws-auth: unknown key '{other}' (mapRoles, mapUsers, mapAccounts)"
                    ))
                }
            }
        }
        for (i, r) in out.map_roles.iter().enumerate() {
            check_arn(&r.rolearn, ":role/").map_err(|e| format!("aws-auth mapRoles[{i}].rolearn: {e}"))?;
            check_template(&r.username).map_err(|e| format!("aws-auth mapRoles[{i}].username: {e}"))?;
        }
        for (i, u) in out.map_users.iter().enumerate() {
            check_arn(&u.userarn, ":user/").map_err(|e| format!("aws-auth mapUsers[{i}].userarn: {e}"))?;
            check_template(&u.username).map_err(|e| format!("aws-auth mapUsers[{i}].username: {e}"))?;
        }
        Ok(out)
    }

    /// The ConfigMap `data` for these entries.
    pub fn to_data(&self) -> Result<BTreeMap<String, String>, String> {
        let mut data = BTreeMap::new();
        if !self.map_roles.is_empty() {
            data.insert("mapRoles".to_string(), to_yaml(&self.map_roles)?);
        }
        if !self.map_users.is_empty() {
            data.insert("mapUsers".to_string(), to_yaml(&self.map_users)?);
        }
        Ok(data)
    }

    /// The entry for a caller whose canonical ARN is `canonical` (`arn:aws:iam::<acct>:role/<name>` or
    /// `...:user/<name>`); matching ignores case, as EKS does. Of an ARN mapped twice the last entry wins, as in
    /// EKS's authenticator (it keys its mappings by ARN): a node role mapped again under another username
    /// authenticates as that user (awslabs/amazon-eks-ami#610, its serving CSR then pending).
    pub fn grant_for(&self, canonical: &str) -> Option<Grant> {
        let roles = self.map_roles.iter().enumerate().rev().find_map(|(i, r)| {
            r.rolearn.eq_ignore_ascii_case(canonical).then(|| Grant {
                username_template: r.username.clone(),
                groups: r.groups.clone(),
                source: format!("aws-auth mapRoles[{i}]"),
            })
        });
        roles.or_else(|| {
            self.map_users.iter().enumerate().rev().find_map(|(i, u)| {
                u.userarn.eq_ignore_ascii_case(canonical).then(|| Grant {
                    username_template: u.username.clone(),
                    groups: u.groups.clone(),
                    source: format!("aws-auth mapUsers[{i}]"),
                })
            })
        })
    }

    /// Why nothing matched `canonical`, when a near miss explains it (a role ARN written with a path).
    pub fn near_miss(&self, canonical: &str) -> Option<String> {
        let name = canonical.rsplit('/').next()?;
        self.map_roles
            .iter()
            .find(|r| {
                let (prefix, rest) = r.rolearn.split_once(":role/").unwrap_or(("", ""));
                rest.contains('/') && rest.rsplit('/').next() == Some(name) && canonical.starts_with(prefix)
            })
            .map(|r| {
                format!(
                    "mapRoles has '{}', with a path; EKS matches role ARNs without their path",
                    r.rolearn
                )
            })
    }
}

/// A list of entries as the YAML document aws-auth stores.
fn to_yaml<T: Serialize>(entries: &[T]) -> Result<String, String> {
    serde_yaml_ng::to_string(entries).map_err(|e| e.to_string())
}

fn parse_list<T: serde::de::DeserializeOwned>(key: &str, text: &str) -> Result<Vec<T>, String> {
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let v: Option<Vec<T>> = serde_yaml_ng::from_str(text).map_err(|e| format!("aws-auth {key}: {e}"))?;
    Ok(v.unwrap_or_default())
}

fn check_arn(arn: &str, kind: &str) -> Result<(), String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    match parts.as_slice() {
        ["arn", partition, "iam", "", account, resource]
            if partition.starts_with("aws")
                && account.len() == 12
                && account.chars().all(|c| c.is_ascii_digit())
                && format!(":{resource}").starts_with(kind)
                && resource.len() > kind.len() - 1 =>
        {
            Ok(())
        }
        _ => Err(format!(
            "'{arn}' is not an IAM ARN like arn:aws:iam::111122223333{kind}NAME"
        )),
    }
}

/// The templates a username may use.
pub const TEMPLATES: &[&str] = &[
    "EC2PrivateDNSName",
    "SessionName",
    "SessionNameRaw",
    "AccountID",
    "AccessKeyID",
];

fn check_template(t: &str) -> Result<(), String> {
    if t.is_empty() {
        return Err("username is empty".into());
    }
    let mut rest = t;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let end = after.find("}}").ok_or_else(|| format!("unclosed '{{{{' in '{t}'"))?;
        let name = &after[..end];
        if !TEMPLATES.contains(&name) {
            return Err(format!(
                "unknown template {{{{{name}}}}} in '{t}' (known: {})",
                TEMPLATES.join(", ")
            ));
        }
        rest = &after[end + 2..];
    }
    Ok(())
}

/// What a username template can refer to.
#[derive(Debug, Clone, Default)]
pub struct TemplateContext {
    pub account_id: String,
    pub session_name: String,
    pub access_key_id: String,
    /// The PrivateDnsName of the instance named by the session (only for instance-profile callers).
    pub ec2_private_dns_name: Option<String>,
}

/// Renders a username template. `{{SessionName}}` has `@` replaced by `-` (Kubernetes usernames of EKS do).
pub fn render(template: &str, ctx: &TemplateContext) -> Result<String, String> {
    check_template(template)?;
    let mut out = template.to_string();
    if out.contains("{{EC2PrivateDNSName}}") {
        let dns = ctx.ec2_private_dns_name.as_deref().ok_or_else(|| {
            format!(
                "{{{{EC2PrivateDNSName}}}}: session '{}' is not an EC2 instance this account knows",
                ctx.session_name
            )
        })?;
        out = out.replace("{{EC2PrivateDNSName}}", dns);
    }
    Ok(out
        .replace("{{SessionName}}", &ctx.session_name.replace('@', "-"))
        .replace("{{SessionNameRaw}}", &ctx.session_name)
        .replace("{{AccountID}}", &ctx.account_id)
        .replace("{{AccessKeyID}}", &ctx.access_key_id))
}

/// The ARN aws-auth is matched against: `arn:aws:sts::A:assumed-role/R/S` → `arn:aws:iam::A:role/R`;
/// IAM user and role ARNs unchanged.
pub fn canonical_arn(arn: &str) -> Result<String, String> {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    let ["arn", partition, service, "", account, resource] = parts.as_slice() else {
        return Err(format!("'{arn}' is not an ARN"));
    };
    match *service {
        "sts" => {
            let mut r = resource.split('/');
            match (r.next(), r.next(), r.next(), r.next()) {
                (Some("assumed-role"), Some(role), Some(_session), None) if !role.is_empty() => {
                    Ok(format!("arn:{partition}:iam::{account}:role/{role}"))
                }
                _ => Err(format!("'{arn}' is not an assumed-role ARN")),
            }
        }
        "iam" if resource.starts_with("role/") || resource.starts_with("user/") => Ok(arn.to_string()),
        _ => Err(format!("'{arn}' is neither an IAM nor an STS assumed-role ARN")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP_ROLES: &str = r#"
- rolearn: arn:aws:iam::111122223333:role/NodeInstanceRole
  username: system:node:{{EC2PrivateDNSName}}
  groups:
    - system:bootstrappers
    - system:nodes
- rolearn: arn:aws:iam::111122223333:role/WindowsNodeRole
  username: system:node:{{EC2PrivateDNSName}}
  groups: [system:bootstrappers, system:nodes, eks:kube-proxy-windows]
- rolearn: arn:aws:iam::111122223333:role/Admins
  username: admin:{{AccountID}}:{{SessionName}}
  groups: [system:masters]
"#;

    fn data(roles: &str, users: Option<&str>) -> BTreeMap<String, String> {
        let mut d = BTreeMap::from([("mapRoles".to_string(), roles.to_string())]);
        if let Some(u) = users {
            d.insert("mapUsers".into(), u.into());
        }
        d
    }

    #[test]
    fn parses_roles_users_and_windows_mappings() {
        let a = AwsAuth::parse(&data(
            MAP_ROLES,
            Some("- userarn: arn:aws:iam::111122223333:user/alice\n  username: alice\n  groups: [dev]\n"),
        ))
        .unwrap();
        assert_eq!(a.map_roles.len(), 3);
        let g = a.grant_for("arn:aws:iam::111122223333:role/windowsnoderole").unwrap();
        assert_eq!(
            g.groups,
            ["system:bootstrappers", "system:nodes", "eks:kube-proxy-windows"]
        );
        assert_eq!(g.source, "aws-auth mapRoles[1]");
        let u = a.grant_for("arn:aws:iam::111122223333:user/alice").unwrap();
        assert_eq!(
            (u.username_template.as_str(), u.source.as_str()),
            ("alice", "aws-auth mapUsers[0]")
        );
        assert!(a.grant_for("arn:aws:iam::111122223333:role/Other").is_none());
        // Round trip through the ConfigMap form.
        assert_eq!(AwsAuth::parse(&a.to_data().unwrap()).unwrap(), a);
    }

    #[test]
    fn templates() {
        let ctx = TemplateContext {
            account_id: "111122223333".into(),
            session_name: "i-0abc@x".into(),
            access_key_id: "ASIAX".into(),
            ec2_private_dns_name: Some("ip-10-0-0-1.ec2.internal".into()),
        };
        assert_eq!(
            render("system:node:{{EC2PrivateDNSName}}", &ctx).unwrap(),
            "system:node:ip-10-0-0-1.ec2.internal"
        );
        assert_eq!(
            render("u:{{AccountID}}:{{SessionName}}", &ctx).unwrap(),
            "u:111122223333:i-0abc-x"
        );
        assert_eq!(
            render("{{SessionNameRaw}}/{{AccessKeyID}}", &ctx).unwrap(),
            "i-0abc@x/ASIAX"
        );
        assert!(render("{{Nope}}", &ctx).unwrap_err().contains("unknown template"));
        assert!(render("{{SessionName", &ctx).unwrap_err().contains("unclosed"));
        let no_instance = TemplateContext {
            ec2_private_dns_name: None,
            ..ctx
        };
        assert!(render("system:node:{{EC2PrivateDNSName}}", &no_instance)
            .unwrap_err()
            .contains("not an EC2 instance"));
    }

    #[test]
    fn canonical_arns() {
        assert_eq!(
            canonical_arn("arn:aws:sts::111122223333:assumed-role/NodeRole/i-0abc").unwrap(),
            "arn:aws:iam::111122223333:role/NodeRole"
        );
        assert_eq!(
            canonical_arn("arn:aws:iam::111122223333:user/alice").unwrap(),
            "arn:aws:iam::111122223333:user/alice"
        );
        for bad in [
            "",
            "arn:aws:sts::1:assumed-role/R",
            "arn:aws:s3:::bucket",
            "nope",
            "arn:aws:sts::1:federated-user/x",
        ] {
            assert!(canonical_arn(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_documents_are_errors() {
        for (roles, why) in [
            ("- rolearn: x\n  username: y\n", "not an IAM ARN"),
            ("- username: y\n", "missing field"),
            ("- rolearn: arn:aws:iam::111122223333:role/R\n", "missing field"),
            (
                "- rolearn: arn:aws:iam::111122223333:role/R\n  username: y\n  grups: [a]\n",
                "unknown field",
            ),
            (
                "- rolearn: arn:aws:iam::111122223333:role/R\n  username: '{{Foo}}'\n",
                "unknown template",
            ),
            (
                "- rolearn: arn:aws:iam::111122223333:user/R\n  username: u\n",
                "not an IAM ARN",
            ),
            ("{not: a list}", "invalid type"),
            (": : :", ""),
        ] {
            let e = AwsAuth::parse(&data(roles, None)).unwrap_err();
            assert!(e.contains(why), "{roles}: {e}");
        }
        let e = AwsAuth::parse(&BTreeMap::from([("mapRole".to_string(), String::new())])).unwrap_err();
        assert!(e.contains("unknown key"));
    }

    #[test]
    fn role_with_path_is_a_near_miss() {
        let a = AwsAuth::parse(&data(
            "- rolearn: arn:aws:iam::111122223333:role/eks/NodeRole\n  username: system:node:{{EC2PrivateDNSName}}\n",
            None,
        ))
        .unwrap();
        let canonical = "arn:aws:iam::111122223333:role/NodeRole";
        assert!(a.grant_for(canonical).is_none());
        assert!(a.near_miss(canonical).unwrap().contains("with a path"));
    }

    #[test]
    fn a_role_mapped_twice_is_its_last_entry_as_in_eks() {
        let a = AwsAuth::parse(&data(
            "- rolearn: arn:aws:iam::111122223333:role/NodeRole\n  username: system:node:{{EC2PrivateDNSName}}\n  \
             groups: [system:nodes]\n- rolearn: arn:aws:iam::111122223333:role/noderole\n  username: ops-admin\n  \
             groups: [system:masters]\n",
            None,
        ))
        .unwrap();
        let g = a.grant_for("arn:aws:iam::111122223333:role/NodeRole").unwrap();
        assert_eq!(g.username_template, "ops-admin");
        assert_eq!(g.groups, ["system:masters"]);
        assert_eq!(g.source, "aws-auth mapRoles[1]");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_documents_never_panic(roles in ".{0,200}", users in "[-:a-z {}\\[\\]\n/]{0,120}") {
            if let Ok(a) = AwsAuth::parse(&data(&roles, Some(&users))) {
                // Whatever parses has valid ARNs and templates.
                for r in &a.map_roles {
                    proptest::prop_assert!(r.rolearn.starts_with("arn:"));
                    proptest::prop_assert!(check_template(&r.username).is_ok());
                }
            }
        }

        #[test]
        fn arbitrary_arns_never_panic(arn in "(arn:aws:(sts|iam)::[0-9]{0,12}:)?[-a-z/:]{0,40}") {
            let _ = canonical_arn(&arn);
        }
    }
}
