//! Tests of token parsing and verification with tokens recorded from the real clients.
use super::*;
use crate::aws::sigv4::tests::{golden_store, GOLDEN_KEY};

const GOLDEN: &str = include_str!("../../fakes/testdata/botocore-token.txt");
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
    // With '=' padding added back it is refused, as EKS's authenticator (Go's RawURLEncoding) refuses it.
    let (t, _) = golden();
    let padding = (4 - (t.len() - PREFIX.len()) % 4) % 4;
    assert!(padding > 0, "the golden token needs padding, or this proves nothing");
    let padded = format!("{t}{}", "=".repeat(padding));
    let err = parse(&padded).unwrap_err();
    assert!(err.contains("padded"), "{err}");
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
    assert_eq!(
        e,
        Rejected::SignatureMismatch {
            cluster: "other-cluster".into()
        }
    );
    assert!(e.to_string().contains("another cluster"), "{e}");
    // Expired: more than 15 minutes old, whatever X-Amz-Expires says.
    let e = verify(&p, CLUSTER, &store, at + Duration::from_secs(15 * 60 + 1)).unwrap_err();
    assert!(matches!(e, Rejected::Expired { .. }), "{e}");
    assert!(e.to_string().contains("token expired"), "{e}");
    let e = verify(&p, CLUSTER, &store, at - Duration::from_secs(16 * 60)).unwrap_err();
    assert!(matches!(e, Rejected::Future(_)), "{e}");
    // Credentials expired meanwhile, or never issued.
    let e = verify(&p, CLUSTER, &golden_store(at), at + Duration::from_secs(1)).unwrap_err();
    assert!(
        matches!(e, Rejected::Credentials(sigv4::Failure::ExpiredCredentials { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("expired at"), "{e}");
    let e = verify(&p, CLUSTER, &CredentialStore::default(), at).unwrap_err();
    assert!(e.to_string().contains("never issued"), "{e}");
    // Tampered signature: one hex digit changed.
    let sig = p.presigned.credential.signature.clone();
    let mut flipped = sig.clone().into_bytes();
    flipped[10] = if flipped[10] == b'0' { b'1' } else { b'0' };
    let flipped = String::from_utf8(flipped).unwrap();
    let tampered = parse(&reencode(&p.url.replace(&sig, &flipped))).unwrap();
    assert!(matches!(
        verify(&tampered, CLUSTER, &store, at),
        Err(Rejected::SignatureMismatch { .. })
    ));
    // Tampered session: the token is not the key's.
    let other_token = parse(&reencode(&p.url.replace("golden%2Bsession", "golden%2Bsessiom"))).unwrap();
    let e = verify(&other_token, CLUSTER, &store, at).unwrap_err();
    assert!(
        matches!(e, Rejected::Credentials(sigv4::Failure::BadSessionToken(_))),
        "{e}"
    );
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
        let accepted = parse(&token).and_then(|t| verify(&t, CLUSTER, &store, SystemTime::now()).map(|_| ()).map_err(|e| e.to_string()));
        proptest::prop_assert!(accepted.is_err());
    }
}

/// The longest token EKS reads is 4096 bytes; a longer one is refused before it is decoded.
#[test]
fn a_token_over_4096_bytes_is_refused() {
    let (t, _) = golden();
    let long = format!("{t}{}", "A".repeat(MAX_TOKEN_LEN + 1 - t.len()));
    let err = parse(&long).unwrap_err();
    assert!(err.contains("too large"), "{err}");
}

/// The STS hosts EKS accepts for a cluster: its partition's endpoints, FIPS included; never a Local Zone, another
/// partition's host or a made-up one.
#[test]
fn sts_hosts_are_the_clusters_partitions() {
    for (host, region) in [
        ("sts.amazonaws.com", "us-west-2"),
        ("sts.us-west-2.amazonaws.com", "us-west-2"),
        ("sts.eu-west-1.amazonaws.com", "us-west-2"),
        ("sts-fips.us-east-1.amazonaws.com", "us-west-2"),
        ("sts-fips.us-west-2.amazonaws.com", "eu-west-1"),
        ("sts.cn-north-1.amazonaws.com.cn", "cn-northwest-1"),
        ("sts.us-gov-west-1.amazonaws.com", "us-gov-east-1"),
    ] {
        assert_eq!(check_host(host, region), Ok(()), "{host} for a cluster in {region}");
    }
    for (host, region) in [
        ("sts.us-west-2-lax-1.amazonaws.com", "us-west-2"),
        ("sts.cn-north-1.amazonaws.com.cn", "us-west-2"),
        ("sts.us-west-2.amazonaws.com", "cn-north-1"),
        ("sts.amazonaws.com", "cn-north-1"),
        ("sts.us-gov-west-1.amazonaws.com", "us-west-2"),
        ("sts-fips.eu-west-1.amazonaws.com", "us-west-2"),
        ("sts-fips.us-gov-west-1.amazonaws.com", "us-gov-west-1"),
        ("sts.us-west-2.amazonaws.com.evil.example", "us-west-2"),
        ("sts.x-y-z.amazonaws.com", "us-west-2"),
    ] {
        let err = check_host(host, region).unwrap_err();
        assert!(err.contains(host), "{err}");
    }
}
