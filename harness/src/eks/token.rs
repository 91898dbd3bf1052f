//! EKS IAM bearer tokens: `k8s-aws-v1.` + base64url of a presigned STS GetCallerIdentity URL whose signed
//! headers include `x-k8s-aws-id: <cluster name>`. Parsing is strict (what EKS's authenticator accepts and no
//! more); verification recomputes the signature with the key's secret, as STS does.
use crate::fakes::iam::{CredentialStore, IssuedCredentials};
use crate::fakes::sigv4::{self, Presigned};
use base64::Engine;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

pub const PREFIX: &str = "k8s-aws-v1.";
/// The header that binds a token to one cluster.
pub const CLUSTER_ID_HEADER: &str = "x-k8s-aws-id";
/// A token is accepted for 15 minutes after its X-Amz-Date, whatever X-Amz-Expires says (the AWS CLI signs
/// for 60 s and the kubelet reuses a token for 14 minutes); X-Amz-Expires above 15 minutes is refused.
pub const MAX_AGE: Duration = Duration::from_secs(15 * 60);

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
    let b64 = token
        .strip_prefix(PREFIX)
        .ok_or_else(|| format!("token does not start with '{PREFIX}'"))?;
    // Padding is optional: the AWS CLI strips it, other generators keep it.
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(b64.trim_end_matches('='))
        .map_err(|e| format!("token is not base64url: {e}"))?;
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

/// `sts.amazonaws.com` (us-east-1) or `sts.<region>.amazonaws.com[.cn]`.
fn sts_region(host: &str) -> Option<String> {
    if host == "sts.amazonaws.com" {
        return Some("us-east-1".into());
    }
    let inner = host
        .strip_prefix("sts.")?
        .strip_suffix(".amazonaws.com")
        .or_else(|| host.strip_prefix("sts.")?.strip_suffix(".amazonaws.com.cn"))?;
    let valid = !inner.is_empty()
        && inner.split('-').count() >= 3
        && inner
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    valid.then(|| inner.to_string())
}

/// Checks a parsed token for `cluster_id` at `now`; returns the credentials that signed it.
pub fn verify(
    token: &Token,
    cluster_id: &str,
    store: &CredentialStore,
    now: SystemTime,
) -> Result<Arc<IssuedCredentials>, String> {
    let p = &token.presigned;
    if now > p.date + MAX_AGE {
        return Err(format!(
            "token expired: X-Amz-Date {} is more than 15 minutes before now ({})",
            crate::fakes::rfc3339(p.date),
            crate::fakes::rfc3339(now)
        ));
    }
    if p.date > now + sigv4::MAX_SKEW {
        return Err(format!(
            "token X-Amz-Date {} is in the future",
            crate::fakes::rfc3339(p.date)
        ));
    }
    let headers = vec![(CLUSTER_ID_HEADER.to_string(), cluster_id.to_string())];
    sigv4::verify_presigned(&token.host, "/", p, &headers, store, now).map_err(|f| match f {
        sigv4::Failure::SignatureMismatch(_) => format!(
            "signature does not match for {CLUSTER_ID_HEADER} '{cluster_id}' (a token made for another cluster, or altered)"
        ),
        other => other.message(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::sigv4::tests::{golden_store, GOLDEN_KEY};

    const GOLDEN: &str = include_str!("../fakes/testdata/botocore-token.txt");
    const CLUSTER: &str = "golden-cluster";

    fn golden() -> (String, SystemTime) {
        let t = GOLDEN.trim().to_string();
        let at = parse(&t).unwrap().presigned.date;
        (t, at)
    }

    fn far() -> SystemTime {
        SystemTime::now() + Duration::from_secs(10 * 365 * 86400)
    }

    fn reencode(url: &str) -> String {
        format!(
            "{PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(url)
        )
    }

    /// Tokens of every real client (the AWS CLI, aws-iam-authenticator v0.6.13 built from its Go module, regional
    /// and global) parse, verify with the credentials that made them for 15 minutes and for their cluster only,
    /// and are recognised as that client's format.
    #[test]
    fn every_real_clients_token_verifies() {
        let cases = [
            ("sts.us-west-2.amazonaws.com", "us-west-2", 60),
            ("sts.us-west-2.amazonaws.com", "us-west-2", 0),
            ("sts.amazonaws.com", "us-east-1", 0),
        ];
        for ((client, token), (host, region, expires)) in REFERENCE_CLIENTS.iter().zip(cases) {
            let t = token.trim();
            let parsed = parse(t).unwrap();
            assert_eq!(
                (parsed.host.as_str(), parsed.region.as_str()),
                (host, region),
                "{client}"
            );
            assert_eq!(parsed.presigned.expires, Duration::from_secs(expires), "{client}");
            let at = parsed.presigned.date;
            let store = golden_store(far());
            let creds = verify(&parsed, CLUSTER, &store, at + Duration::from_secs(14 * 60)).unwrap();
            assert_eq!(creds.access_key_id, GOLDEN_KEY);
            assert!(verify(&parsed, "other-cluster", &store, at).is_err(), "{client}");
            assert!(
                verify(&parsed, CLUSTER, &store, at + Duration::from_secs(16 * 60)).is_err(),
                "{client}"
            );
            assert_eq!(known_client(t), Some(*client));
        }
        // With '=' padding added back it is the same token for the verifier, but no real client's format.
        let (t, at) = golden();
        let padded = format!("{t}{}", "=".repeat((4 - (t.len() - PREFIX.len()) % 4) % 4));
        assert!(verify(&parse(&padded).unwrap(), CLUSTER, &golden_store(far()), at).is_ok());
        let t = REFERENCE_CLIENTS[1].1.trim();
        assert_eq!(known_client(&format!("{t}=")), None);
        // Nor is one with its parameters reordered.
        let url = parse(t).unwrap().url;
        let swapped = url.replace(
            "Action=GetCallerIdentity&Version=2011-06-15",
            "Version=2011-06-15&Action=GetCallerIdentity",
        );
        assert_eq!(known_client(&reencode(&swapped)), None);
    }

    #[test]
    fn shape_of_the_real_token() {
        assert_eq!(
            shape(REFERENCE_TOKEN),
            "k8s-aws-v1.<base64url> of https://sts.<region>.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=<key>%2F<yyyymmdd>%2F<region>%2Fsts%2Faws4_request&X-Amz-Date=<time>&X-Amz-Expires=60&X-Amz-SignedHeaders=host%3Bx-k8s-aws-id&X-Amz-Security-Token=<session-token>&X-Amz-Signature=<signature>"
        );
        assert_eq!(shape("Bearer x"), "no k8s-aws-v1. prefix");
    }

    #[test]
    fn rejections() {
        let (t, at) = golden();
        let store = golden_store(far());
        let p = parse(&t).unwrap();
        // Another cluster.
        let e = verify(&p, "other-cluster", &store, at).unwrap_err();
        assert!(e.contains("another cluster"), "{e}");
        // Expired: more than 15 minutes old, whatever X-Amz-Expires says.
        let e = verify(&p, CLUSTER, &store, at + Duration::from_secs(15 * 60 + 1)).unwrap_err();
        assert!(e.contains("token expired"), "{e}");
        // Credentials expired meanwhile, or never issued.
        let e = verify(&p, CLUSTER, &golden_store(at), at + Duration::from_secs(1)).unwrap_err();
        assert!(e.contains("expired at"), "{e}");
        let e = verify(&p, CLUSTER, &CredentialStore::default(), at).unwrap_err();
        assert!(e.contains("never issued"), "{e}");
        // Tampered signature.
        let sig = p.presigned.credential.signature.clone();
        let flipped: String = sig
            .chars()
            .enumerate()
            .map(|(i, c)| {
                if i == 10 {
                    if c == '0' {
                        '1'
                    } else {
                        '0'
                    }
                } else {
                    c
                }
            })
            .collect();
        let tampered = parse(&reencode(&p.url.replace(&sig, &flipped))).unwrap();
        assert!(verify(&tampered, CLUSTER, &store, at)
            .unwrap_err()
            .contains("signature does not match"));
        // Tampered session: the token is not the key's.
        let other_token = parse(&reencode(&p.url.replace("golden%2Bsession", "golden%2Bsessiom"))).unwrap();
        assert!(verify(&other_token, CLUSTER, &store, at)
            .unwrap_err()
            .contains("invalid"));
    }

    #[test]
    fn malformed_tokens() {
        let (t, _) = golden();
        let url = parse(&t).unwrap().url;
        let cases: Vec<(String, &str)> = vec![
            ("k8s-aws-v2.abc".into(), "does not start"),
            (format!("{PREFIX}%%%"), "not base64url"),
            (format!("{PREFIX}aHR0cHM6+/8"), "not base64url"),
            (reencode(&url.replace("https://", "http://")), "not https"),
            (
                reencode(&url.replace(
                    "sts.us-west-2.amazonaws.com",
                    "sts.us-west-2.amazonaws.com.evil.example",
                )),
                "not an STS endpoint",
            ),
            (
                reencode(&url.replace("sts.us-west-2", "Sts.us-west-2")),
                "not an STS endpoint",
            ),
            (
                reencode(&url.replace("sts.us-west-2.amazonaws.com", "172.18.0.1:4566")),
                "not an STS endpoint",
            ),
            (
                reencode(&url.replace("sts.us-west-2", "sts.eu-west-1")),
                "signed for region",
            ),
            (reencode(&url.replace(".com/?", ".com/x?")), "path"),
            (
                reencode(&url.replace("GetCallerIdentity", "AssumeRole")),
                "GetCallerIdentity",
            ),
            (reencode(&format!("{url}&Extra=1")), "nothing else"),
            (
                reencode(&format!("{url}&X-Amz-Date=20261122T135938Z")),
                "more than once",
            ),
            (
                reencode(&url.replace("X-Amz-Expires=60", "X-Amz-Expires=3600")),
                "exceeds 15 minutes",
            ),
            (
                reencode(&url.replace("host%3Bx-k8s-aws-id", "host")),
                "not bound to a cluster",
            ),
            (
                reencode(&url.replace("host%3Bx-k8s-aws-id", "host%3Bx-k8s-aws-id%3Bx-extra")),
                "unexpected signed header",
            ),
            (
                reencode(&url.replace("X-Amz-Date=20261122T135938Z", "X-Amz-Date=yesterday")),
                "X-Amz-Date",
            ),
        ];
        for (token, why) in cases {
            let e = parse(&token).unwrap_err();
            assert!(e.contains(why), "{why}: got {e}");
        }
        assert_eq!(sts_region("sts.amazonaws.com").as_deref(), Some("us-east-1"));
        assert_eq!(
            sts_region("sts.cn-north-1.amazonaws.com.cn").as_deref(),
            Some("cn-north-1")
        );
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_tokens_are_rejected_not_panicking(s in ".{0,300}") {
            let store = CredentialStore::default();
            if let Ok(t) = parse(&s) {
                // Nothing random verifies: no key in an empty store.
                proptest::prop_assert!(verify(&t, "c", &store, SystemTime::now()).is_err());
            }
        }

        #[test]
        fn arbitrary_urls_inside_the_prefix_are_rejected(url in "https://sts\\.[a-z0-9.-]{0,30}/\\?[A-Za-z0-9=&%.-]{0,200}") {
            let token = format!("{PREFIX}{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&url));
            let store = golden_store(far());
            let accepted = parse(&token).and_then(|t| verify(&t, CLUSTER, &store, SystemTime::now()).map(|_| ()));
            proptest::prop_assert!(accepted.is_err());
        }

        #[test]
        fn mutating_the_golden_token_never_verifies(pos in 11usize..400, byte in proptest::num::u8::ANY) {
            let (t, at) = golden();
            let mut bytes = t.into_bytes();
            let pos = pos.min(bytes.len() - 1);
            proptest::prop_assume!(bytes[pos] != byte);
            bytes[pos] = byte;
            if let Ok(s) = String::from_utf8(bytes) {
                if let Ok(parsed) = parse(&s) {
                    let ok = verify(&parsed, CLUSTER, &golden_store(far()), at).is_ok();
                    // A change may decode to the same request: trailing base64 bits, or the case of a
                    // percent-escape (`%2F` / `%2f`, the same byte to STS). Anything else must fail.
                    let query = |u: &str| sigv4::form_pairs(u.split_once('?').map(|x| x.1).unwrap_or("")).unwrap();
                    let golden = parse(GOLDEN.trim()).unwrap();
                    proptest::prop_assert!(
                        !ok || (parsed.host == golden.host && query(&parsed.url) == query(&golden.url)),
                        "accepted a different request: {}", parsed.url
                    );
                }
            }
        }
    }
}
