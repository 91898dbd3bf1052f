//! Tests of the SigV4 checks against requests recorded from the real AWS CLI (../../fakes/testdata/README.md).
use super::*;

pub(crate) const GOLDEN_KEY: &str = "ASIAGOLDENEXAMPLE001";

/// The store holding the made-up credentials the golden vectors (testdata/README.md) were signed with.
pub(crate) fn golden_store(expiration: SystemTime) -> CredentialStore {
    let store = CredentialStore::default();
    store.insert(IssuedCredentials {
        access_key_id: GOLDEN_KEY.into(),
        secret_access_key: "golden/Secret+Key=0123456789abcdefghijkl".into(),
        session_token: "IQoJb3JpZ2luX2VjE/golden+session=token==".into(),
        issued: SystemTime::UNIX_EPOCH,
        expiration,
        instance_id: "i-0golden".into(),
        role_name: "NodeRole".into(),
        account_id: "111122223333".into(),
    });
    store
}

/// Headers that sign a request with `creds`, as an AWS SDK would (for tests of the fakes).
pub(crate) fn sign_headers(
    method: &str,
    url: &str,
    extra: &[(&str, &str)],
    body: &[u8],
    creds: &IssuedCredentials,
    region: &str,
    service: &str,
) -> Vec<(String, String)> {
    let identity = aws_credential_types::Credentials::new(
        creds.access_key_id.clone(),
        creds.secret_access_key.clone(),
        Some(creds.session_token.clone()),
        None,
        "test",
    )
    .into();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(SystemTime::now())
        .settings(SigningSettings::default())
        .build()
        .unwrap()
        .into();
    let req = SignableRequest::new(method, url, extra.iter().copied(), SignableBody::Bytes(body)).unwrap();
    let (instructions, _) = sign(req, &params).unwrap().into_parts();
    let mut out: Vec<(String, String)> = instructions
        .headers()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    out.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    out
}

struct Recorded {
    method: String,
    path: String,
    headers: http::HeaderMap,
    body: String,
}

fn recorded() -> Vec<Recorded> {
    include_str!("../../fakes/testdata/botocore-requests.jsonl")
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let mut headers = http::HeaderMap::new();
            for h in v["headers"].as_array().unwrap() {
                let name = http::HeaderName::from_bytes(h[0].as_str().unwrap().to_lowercase().as_bytes()).unwrap();
                headers.append(name, h[1].as_str().unwrap().parse().unwrap());
            }
            Recorded {
                method: v["method"].as_str().unwrap().into(),
                path: v["path"].as_str().unwrap().into(),
                headers,
                body: v["body"].as_str().unwrap().into(),
            }
        })
        .collect()
}

fn signed_at(r: &Recorded) -> SystemTime {
    parse_amz_date(r.headers["x-amz-date"].to_str().unwrap()).unwrap()
}

fn verify(r: &Recorded, store: &CredentialStore, now: SystemTime) -> Result<Verified, Failure> {
    let service = r
        .headers
        .get("authorization")
        .map(|h| parse_authorization(h.to_str().unwrap()).unwrap().service)
        .unwrap_or_else(|| "ec2".into());
    verify_request(
        &Received {
            method: &r.method,
            path_and_query: &r.path,
            headers: &r.headers,
            body: r.body.as_bytes(),
        },
        store,
        &service,
        None,
        now,
    )
}

#[test]
fn real_aws_cli_requests_verify() {
    let far = SystemTime::now() + Duration::from_secs(10 * 365 * 86400);
    let store = golden_store(far);
    let all = recorded();
    assert_eq!(all.len(), 5);
    for r in &all {
        let v = verify(r, &store, signed_at(r) + Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{} {}: {e:?}", r.method, r.path));
        assert_eq!(v.credentials.access_key_id, GOLDEN_KEY);
    }
}

#[test]
fn tampering_keys_and_time_are_refused() {
    let far = SystemTime::now() + Duration::from_secs(10 * 365 * 86400);
    let store = golden_store(far);
    let r = &recorded()[1]; // EC2 POST with a body
    let at = signed_at(r) + Duration::from_secs(1);
    // Body changed after signing.
    let mut changed = Recorded {
        body: r.body.replace("i-0123", "i-0999"),
        method: r.method.clone(),
        path: r.path.clone(),
        headers: r.headers.clone(),
    };
    assert!(matches!(
        verify(&changed, &store, at),
        Err(Failure::SignatureMismatch(_))
    ));
    // Signed header changed.
    changed.body = r.body.clone();
    changed.headers.insert("host", "127.0.0.1:9999".parse().unwrap());
    assert!(matches!(
        verify(&changed, &store, at),
        Err(Failure::SignatureMismatch(_))
    ));
    // Wrong secret: the key is known but the secret differs.
    let wrong = CredentialStore::default();
    let mut c = (*golden_store(far).lookup(GOLDEN_KEY).unwrap()).clone();
    c.secret_access_key.push('x');
    wrong.insert(c);
    assert!(matches!(verify(r, &wrong, at), Err(Failure::SignatureMismatch(_))));
    // Unknown key, expired credentials, stale request.
    assert!(matches!(
        verify(r, &CredentialStore::default(), at),
        Err(Failure::UnknownKey(_))
    ));
    let expired = golden_store(signed_at(r) - Duration::from_secs(1));
    let e = verify(r, &expired, at).unwrap_err();
    assert!(e.message().contains("expired"), "{e:?}");
    assert_eq!(e.ec2_code(), "RequestExpired");
    assert!(matches!(
        verify(r, &store, at + Duration::from_secs(16 * 60)),
        Err(Failure::RequestTime(_))
    ));
    // Session token not the key's.
    let mut other = r.headers.clone();
    other.insert("x-amz-security-token", "other".parse().unwrap());
    let changed = Recorded {
        headers: other,
        method: r.method.clone(),
        path: r.path.clone(),
        body: r.body.clone(),
    };
    assert!(matches!(verify(&changed, &store, at), Err(Failure::BadSessionToken(_))));
    // No Authorization header.
    let mut none = r.headers.clone();
    none.remove("authorization");
    let changed = Recorded {
        headers: none,
        method: r.method.clone(),
        path: r.path.clone(),
        body: r.body.clone(),
    };
    assert_eq!(verify(&changed, &store, at).unwrap_err(), Failure::Missing);
}

#[test]
fn wrong_service_or_region_is_a_scope_failure() {
    let far = SystemTime::now() + Duration::from_secs(10 * 365 * 86400);
    let store = golden_store(far);
    let r = &recorded()[1];
    let at = signed_at(r) + Duration::from_secs(1);
    let received = Received {
        method: &r.method,
        path_and_query: &r.path,
        headers: &r.headers,
        body: r.body.as_bytes(),
    };
    let e = verify_request(&received, &store, "eks", None, at).unwrap_err();
    assert!(matches!(&e, Failure::Scope(m) if m.contains("service")), "{e:?}");
    let e = verify_request(&received, &store, "ec2", Some("ap-south-2"), at).unwrap_err();
    assert!(matches!(&e, Failure::Scope(m) if m.contains("valid region")), "{e:?}");
}

#[test]
fn form_decoding() {
    let p = form_pairs("Action=DescribeInstances&InstanceId.1=i-abc&Version=2016-11-15&X=a%2Fb+c").unwrap();
    assert_eq!(p[0], ("Action".to_string(), "DescribeInstances".to_string()));
    assert_eq!(p[3].1, "a/b c");
    assert!(form_pairs("A=%zz").is_err());
    assert_eq!(encode("a/b+c=d~"), "a%2Fb%2Bc%3Dd~");
    assert!(parse_amz_date("20261122T135938Z").is_ok());
    for bad in ["2026-11-22", "20261122T135938", "2026112XT135938Z", "20261322T135938Z"] {
        assert!(parse_amz_date(bad).is_err(), "{bad}");
    }
}

const GOOD: &str = "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20261122/eu-west-1/eks/aws4_request, SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn parses_a_real_shaped_header() {
    let a = parse_authorization(GOOD).unwrap();
    assert_eq!(a.access_key_id, "ASIAEXAMPLE");
    assert_eq!(a.region, "eu-west-1");
    assert_eq!(a.service, "eks");
    assert_eq!(a.signed_headers, vec!["host", "x-amz-date", "x-amz-security-token"]);
}

#[test]
fn malformed_headers_are_errors() {
    for bad in [
        "Basic abc",
        "AWS4-HMAC-SHA256 Credential=A/B/C, SignedHeaders=host, Signature=00",
        "AWS4-HMAC-SHA256 Credential=K/2026/eu-west-1/eks/aws4_request, SignedHeaders=host, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "AWS4-HMAC-SHA256 Credential=K/20261122/eu-west-1/eks/aws4_request, SignedHeaders=host, Signature=xyz",
        "AWS4-HMAC-SHA256 Credential=K/20261122/eu-west-1/eks/aws4_request, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "AWS4-HMAC-SHA256 garbage",
    ] {
        assert!(parse_authorization(bad).is_err(), "{bad}");
    }
}
