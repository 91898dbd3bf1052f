//! EKS IAM bearer tokens: `k8s-aws-v1.` + base64url of a presigned STS GetCallerIdentity URL whose signed
//! headers include `x-k8s-aws-id: <cluster name>`. Parsing is strict (what EKS's authenticator accepts and no
//! more); verification recomputes the signature with the key's secret, as STS does.
use crate::aws::iam::{CredentialStore, IssuedCredentials};
use crate::aws::sigv4::{self, Presigned};
use base64::Engine;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub const PREFIX: &str = "k8s-aws-v1.";
/// The header that binds a token to one cluster.
pub const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// A token is accepted for 15 minutes after its X-Amz-Date, whatever X-Amz-Expires says (the AWS CLI signs
/// for 60 s and the kubelet reuses a token for 14 minutes); X-Amz-Expires above 15 minutes is refused.
pub const MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// The longest token EKS's authenticator reads (aws-iam-authenticator's `maxTokenLenBytes`).
pub const MAX_TOKEN_LEN: usize = 4096;

/// A syntactically valid token.
#[derive(Debug, Clone)]
pub struct Token {
    pub url: String,
    pub host: String,
    pub region: String,
    pub presigned: Presigned,
}

/// Decodes and checks the shape of a token.
pub fn parse(token: &str) -> Result<Token, String> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(format!(
            "token is too large ({} bytes; EKS's authenticator accepts at most {MAX_TOKEN_LEN})",
            token.len()
        ));
    }
    let b64 = token
        .strip_prefix(PREFIX)
        .ok_or_else(|| format!("token does not start with '{PREFIX}'"))?;
    // Unpadded, as EKS's authenticator decodes it (Go's RawURLEncoding): a padded token is refused there.
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(b64)
        .map_err(|e| match b64.ends_with('=') {
            true => {
                "token is padded base64url ('='): EKS's authenticator decodes it unpadded and refuses it".to_string()
            }
            false => format!("token is not base64url: {e}"),
        })?;
    let url = String::from_utf8(raw).map_err(|_| "token does not decode to text".to_string())?;
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| "token URL is not https://".to_string())?;
    let (authority, path_query) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let (path, query) = path_query.split_once('?').unwrap_or((path_query, ""));
    // Compared exactly, as EKS's authenticator does: `Sts.us-west-2.amazonaws.com` is not an allowed host.
    let host = authority.to_string();
    let region = sts_region(&host).ok_or_else(|| format!("token URL host '{host}' is not an STS endpoint"))?;
    if path != "/" {
        return Err(format!("token URL path '{path}' is not '/'"));
    }
    let pairs = sigv4::form_pairs(query)?;
    let presigned = sigv4::parse_presigned(&pairs)?;
    let mut rest: Vec<(&str, &str)> = presigned.rest.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    rest.sort();
    if rest != [("Action", "GetCallerIdentity"), ("Version", "2011-06-15")] {
        return Err(format!(
            "token URL must call Action=GetCallerIdentity&Version=2011-06-15 and nothing else, not {rest:?}"
        ));
    }
    let signed = &presigned.credential.signed_headers;
    if !signed.iter().any(|h| h == CLUSTER_ID_HEADER) {
        return Err(format!(
            "token is not bound to a cluster: {CLUSTER_ID_HEADER} is not a signed header"
        ));
    }
    if let Some(h) = signed
        .iter()
        .find(|h| !matches!(h.as_str(), "host" | CLUSTER_ID_HEADER))
    {
        return Err(format!("unexpected signed header '{h}'"));
    }
    if presigned.credential.service != "sts" {
        return Err(format!(
            "token is signed for service '{}', not sts",
            presigned.credential.service
        ));
    }
    if presigned.credential.region != region {
        return Err(format!(
            "token is signed for region '{}' but addressed to {host}",
            presigned.credential.region
        ));
    }
    if presigned.expires > MAX_AGE {
        return Err(format!(
            "X-Amz-Expires {}s exceeds 15 minutes",
            presigned.expires.as_secs()
        ));
    }
    Ok(Token {
        url,
        host,
        region: region.to_string(),
        presigned,
    })
}

/// A token made by the real AWS CLI (`aws eks get-token`, aws-cli 1.46.3).
pub const REFERENCE_TOKEN: &str = include_str!("../fakes/testdata/botocore-token.txt");

/// Tokens recorded from the real token clients nodes use (fakes/testdata/README.md): each client's format is
/// its [`shape`]. The AWS CLI signs for 60 s with X-Amz-SignedHeaders before X-Amz-Security-Token;
/// aws-iam-authenticator (the AL2 AMI's kubeconfig) signs with X-Amz-Expires=0 and the opposite order, for the
/// regional STS host with `--region` and the global one without.
pub const REFERENCE_CLIENTS: [(&str, &str); 3] = [
    ("aws eks get-token (aws-cli 1.46.3)", REFERENCE_TOKEN),
    (
        "aws-iam-authenticator v0.6.13 token --region",
        include_str!("../fakes/testdata/authenticator-token-regional.txt"),
    ),
    (
        "aws-iam-authenticator v0.6.13 token (global STS)",
        include_str!("../fakes/testdata/authenticator-token-global.txt"),
    ),
];

/// The real token client whose format `token` has, if any.
pub fn known_client(token: &str) -> Option<&'static str> {
    let s = shape(token);
    REFERENCE_CLIENTS
        .iter()
        .find(|(_, reference)| shape(reference) == s)
        .map(|(client, _)| *client)
}

/// The token's format with its variable parts (key, dates, region, token, signature) replaced by
/// placeholders: two tokens with equal shapes are byte-for-byte the same format (prefix, no padding,
/// parameter order and encoding).
pub fn shape(token: &str) -> String {
    let Some(b64) = token.trim().strip_prefix(PREFIX) else {
        return "no k8s-aws-v1. prefix".into();
    };
    let padding = if b64.ends_with('=') { " (padded)" } else { "" };
    let Ok(parsed) = parse(token.trim()) else {
        return format!("unparseable{padding}");
    };
    let query = parsed.url.split_once('?').map(|(_, q)| q).unwrap_or_default();
    let params: Vec<String> = query
        .split('&')
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v = match k {
                "X-Amz-Credential" => v
                    .split("%2F")
                    .enumerate()
                    .map(|(i, part)| match i {
                        0 => "<key>",
                        1 => "<yyyymmdd>",
                        2 => "<region>",
                        _ => part,
                    })
                    .collect::<Vec<_>>()
                    .join("%2F"),
                "X-Amz-Date" => "<time>".into(),
                "X-Amz-Security-Token" => "<session-token>".into(),
                "X-Amz-Signature" => "<signature>".into(),
                _ => v.to_string(),
            };
            format!("{k}={v}")
        })
        .collect();
    let host = parsed.host.replace(&parsed.region, "<region>");
    format!("{PREFIX}<base64url{padding}> of https://{host}/?{}", params.join("&"))
}

/// The region an STS host signs for: `sts.amazonaws.com` (us-east-1), `sts.<region>.amazonaws.com[.cn]` or
/// `sts-fips.<region>.amazonaws.com`. Whether the host is one EKS accepts for a cluster is [`check_host`]'s.
fn sts_region(host: &str) -> Option<String> {
    if host == "sts.amazonaws.com" {
        return Some("us-east-1".into());
    }
    let inner = host.strip_prefix("sts.").or_else(|| host.strip_prefix("sts-fips."))?;
    let inner = inner
        .strip_suffix(".amazonaws.com")
        .or_else(|| inner.strip_suffix(".amazonaws.com.cn"))?;
    let valid = !inner.is_empty()
        && inner.split('-').count() >= 3
        && inner
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    valid.then(|| inner.to_string())
}

/// An AWS region's partition and its DNS suffix.
fn partition(region: &str) -> (&'static str, &'static str) {
    if region.starts_with("cn-") {
        ("aws-cn", "amazonaws.com.cn")
    } else if region.starts_with("us-gov-") {
        ("aws-us-gov", "amazonaws.com")
    } else {
        ("aws", "amazonaws.com")
    }
}

/// A region name as AWS spells its regions (`us-west-2`, `us-gov-east-1`), not a Local Zone or Wavelength zone
/// (`us-west-2-lax-1`), which has no STS endpoint.
fn is_region(region: &str) -> bool {
    let parts: Vec<&str> = region.split('-').collect();
    let (geo, rest) = match parts.as_slice() {
        [geo, "gov", rest @ ..] | [geo, rest @ ..] => (*geo, rest),
        [] => return false,
    };
    geo.len() == 2
        && geo.chars().all(|c| c.is_ascii_lowercase())
        && matches!(rest, [name, n] if name.chars().all(|c| c.is_ascii_lowercase()) && n.parse::<u8>().is_ok())
}

/// Whether EKS's authenticator for a cluster in `cluster_region` accepts tokens presigned for `host`: the STS
/// endpoints of the cluster's partition (aws-iam-authenticator takes them from the SDK's endpoint list): the
/// global `sts.amazonaws.com` and the FIPS endpoints of the four US regions in `aws`, `sts.<region>.<suffix>`
/// for the partition's regions (never a Local Zone, never another partition's host).
pub fn check_host(host: &str, cluster_region: &str) -> Result<(), String> {
    const FIPS: [&str; 4] = ["us-east-1", "us-east-2", "us-west-1", "us-west-2"];
    let (partition_id, suffix) = partition(cluster_region);
    let accepted = match host.strip_suffix(&format!(".{suffix}")) {
        _ if host == "sts.amazonaws.com" => partition_id == "aws",
        Some(rest) => match (rest.strip_prefix("sts."), rest.strip_prefix("sts-fips.")) {
            (Some(region), _) => is_region(region) && partition(region).0 == partition_id,
            (_, Some(region)) => partition_id == "aws" && FIPS.contains(&region),
            _ => false,
        },
        None => false,
    };
    match accepted {
        true => Ok(()),
        false => Err(format!(
            "unexpected STS host '{host}' in the token for a cluster in {cluster_region} (partition {partition_id}): EKS accepts only its partition's STS endpoints"
        )),
    }
}

/// Why a well-formed token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejected {
    #[error("token expired: X-Amz-Date {signed} is more than 15 minutes before now ({now})")]
    Expired { signed: String, now: String },
    #[error("token X-Amz-Date {0} is in the future")]
    Future(String),
    /// The signature was recomputed and differs: the only verdict that proves the bytes were checked.
    #[error(
        "signature does not match for {CLUSTER_ID_HEADER} '{cluster}' (a token made for another cluster, or altered)"
    )]
    SignatureMismatch { cluster: String },
    /// The key, its session token, its expiry or the request time (before any signature is computed).
    #[error("{}", .0.message())]
    Credentials(sigv4::Failure),
}

/// Checks a parsed token for `cluster_id` at `now`; returns the credentials that signed it.
pub fn verify(
    token: &Token,
    cluster_id: &str,
    store: &CredentialStore,
    now: SystemTime,
) -> Result<Arc<IssuedCredentials>, Rejected> {
    let p = &token.presigned;
    if now > p.date + MAX_AGE {
        return Err(Rejected::Expired {
            signed: crate::aws::rfc3339(p.date),
            now: crate::aws::rfc3339(now),
        });
    }
    if p.date > now + sigv4::MAX_SKEW {
        return Err(Rejected::Future(crate::aws::rfc3339(p.date)));
    }
    let headers = vec![(CLUSTER_ID_HEADER.to_string(), cluster_id.to_string())];
    sigv4::verify_presigned(&token.host, "/", p, &headers, store, now).map_err(|f| match f {
        sigv4::Failure::SignatureMismatch(_) => Rejected::SignatureMismatch {
            cluster: cluster_id.to_string(),
        },
        other => Rejected::Credentials(other),
    })
}

#[cfg(test)]
mod mutations;
#[cfg(test)]
mod tests;
