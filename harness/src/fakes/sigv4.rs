//! SigV4 checks of the fakes: the `Authorization` header's scope (service, region), the key (issued by the fake
//! IMDS, not expired, with its session token), the request time, and the signature itself, recomputed with
//! aws-sigv4 from the request as received. Presigned URLs (IAM tokens) are checked the same way.
use super::iam::{CredentialStore, IssuedCredentials};
use aws_sigv4::http_request::{sign, SignableBody, SignableRequest, SignatureLocation, SigningSettings};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How far a request's X-Amz-Date may be from the server's clock (AWS allows 15 minutes).
pub const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

/// The parts of `AWS4-HMAC-SHA256 Credential=AKID/DATE/REGION/SERVICE/aws4_request, SignedHeaders=..., Signature=...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    pub access_key_id: String,
    pub date: String,
    pub region: String,
    pub service: String,
    pub signed_headers: Vec<String>,
    pub signature: String,
}

pub fn parse_authorization(header: &str) -> Result<Authorization, String> {
    let rest = header
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .ok_or_else(|| "Authorization header is not AWS4-HMAC-SHA256".to_string())?;
    let mut credential = None;
    let mut signed_headers = None;
    let mut signature = None;
    for part in rest.split(',') {
        let (k, v) = part
            .trim()
            .split_once('=')
            .ok_or_else(|| format!("malformed Authorization part '{part}'"))?;
        match k {
            "Credential" => credential = Some(v),
            "SignedHeaders" => signed_headers = Some(v),
            "Signature" => signature = Some(v),
            _ => return Err(format!("unknown Authorization part '{k}'")),
        }
    }
    let credential = credential.ok_or("Authorization lacks Credential")?;
    let scope: Vec<&str> = credential.split('/').collect();
    let [key, date, region, service, terminator] = scope.as_slice() else {
        return Err(format!(
            "credential scope '{credential}' is not KEY/DATE/REGION/SERVICE/aws4_request"
        ));
    };
    if *terminator != "aws4_request" || date.len() != 8 || !date.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!("credential scope '{credential}' is malformed"));
    }
    let signature = signature.ok_or("Authorization lacks Signature")?;
    if signature.len() != 64 || !signature.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err("signature is not 64 hex digits".into());
    }
    Ok(Authorization {
        access_key_id: key.to_string(),
        date: date.to_string(),
        region: region.to_string(),
        service: service.to_string(),
        signed_headers: signed_headers
            .ok_or("Authorization lacks SignedHeaders")?
            .split(';')
            .map(str::to_string)
            .collect(),
        signature: signature.to_string(),
    })
}

/// Why a signed request was refused; each maps to the error code the real service returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Missing,
    Malformed(String),
    Scope(String),
    UnknownKey(String),
    ExpiredCredentials { key: String, expired: String },
    BadSessionToken(String),
    RequestTime(String),
    SignatureMismatch(String),
}

impl Failure {
    pub fn message(&self) -> String {
        match self {
            Failure::Missing => "Missing Authentication Token".into(),
            Failure::Malformed(m) | Failure::Scope(m) | Failure::RequestTime(m) => m.clone(),
            Failure::UnknownKey(k) => format!("The security token included in the request is invalid (access key {k} was never issued)"),
            Failure::ExpiredCredentials { key, expired } => {
                format!("The security token included in the request is expired (access key {key} expired at {expired})")
            }
            Failure::BadSessionToken(k) => format!("The security token included in the request is invalid (it is not the session token of {k})"),
            Failure::SignatureMismatch(detail) => format!(
                "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. ({detail})"
            ),
        }
    }

    /// The error code of the EC2 Query API.
    pub fn ec2_code(&self) -> &'static str {
        match self {
            Failure::Missing => "MissingAuthenticationToken",
            Failure::ExpiredCredentials { .. } | Failure::RequestTime(_) => "RequestExpired",
            Failure::UnknownKey(_) | Failure::BadSessionToken(_) => "AuthFailure",
            _ => "AuthFailure",
        }
    }

    /// The error code of REST-JSON services (EKS).
    pub fn json_code(&self) -> &'static str {
        match self {
            Failure::Missing => "MissingAuthenticationTokenException",
            Failure::ExpiredCredentials { .. } => "ExpiredTokenException",
            Failure::UnknownKey(_) | Failure::BadSessionToken(_) => "UnrecognizedClientException",
            _ => "InvalidSignatureException",
        }
    }

    /// The error code of STS's Query API.
    pub fn sts_code(&self) -> &'static str {
        match self {
            Failure::Missing => "MissingAuthenticationToken",
            Failure::ExpiredCredentials { .. } => "ExpiredToken",
            Failure::UnknownKey(_) | Failure::BadSessionToken(_) => "InvalidClientTokenId",
            Failure::SignatureMismatch(_) => "SignatureDoesNotMatch",
            _ => "IncompleteSignature",
        }
    }
}

/// A request as a fake received it.
pub struct Received<'a> {
    pub method: &'a str,
    /// Path and query exactly as sent (still percent-encoded).
    pub path_and_query: &'a str,
    pub headers: &'a http::HeaderMap,
    pub body: &'a [u8],
}

/// Who signed a verified request.
#[derive(Debug, Clone)]
pub struct Verified {
    pub credentials: Arc<IssuedCredentials>,
    pub region: String,
}

/// `20261122T135938Z` → time.
pub fn parse_amz_date(s: &str) -> Result<SystemTime, String> {
    let ok = s.len() == 16
        && s.as_bytes()[8] == b'T'
        && s.ends_with('Z')
        && s[..8].chars().chain(s[9..15].chars()).all(|c| c.is_ascii_digit());
    if !ok {
        return Err(format!("X-Amz-Date '{s}' is not like 20261122T135938Z"));
    }
    let rfc = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &s[0..4],
        &s[4..6],
        &s[6..8],
        &s[9..11],
        &s[11..13],
        &s[13..15]
    );
    humantime::parse_rfc3339(&rfc).map_err(|e| format!("X-Amz-Date '{s}': {e}"))
}

/// The key, its credentials and the time checks shared by header and query signing.
fn check_key(
    store: &CredentialStore,
    key: &str,
    session_token: Option<&str>,
    date: SystemTime,
    now: SystemTime,
) -> Result<Arc<IssuedCredentials>, Failure> {
    let creds = store.lookup(key).ok_or_else(|| Failure::UnknownKey(key.to_string()))?;
    if session_token != Some(creds.session_token.as_str()) {
        return Err(Failure::BadSessionToken(key.to_string()));
    }
    if creds.expiration <= now {
        return Err(Failure::ExpiredCredentials {
            key: key.to_string(),
            expired: super::rfc3339(creds.expiration),
        });
    }
    let skew = now
        .duration_since(date)
        .or_else(|e| Ok::<_, ()>(e.duration()))
        .unwrap_or_default();
    if skew > MAX_SKEW {
        return Err(Failure::RequestTime(format!(
            "Signature expired: the request was signed at {} and it is now {} (more than 15 minutes apart)",
            super::rfc3339(date),
            super::rfc3339(now)
        )));
    }
    Ok(creds)
}

/// Signs a request the way the client should have, with the secret AWS knows, and returns the signature.
#[allow(clippy::too_many_arguments)]
fn expected_signature(
    method: &str,
    uri: &str,
    headers: &[(String, String)],
    body: &[u8],
    creds: &IssuedCredentials,
    region: &str,
    service: &str,
    time: SystemTime,
    presign_expires: Option<Duration>,
) -> Result<String, String> {
    let identity = aws_credential_types::Credentials::new(
        creds.access_key_id.clone(),
        creds.secret_access_key.clone(),
        Some(creds.session_token.clone()),
        None,
        "nodejoin",
    )
    .into();
    let mut settings = SigningSettings::default();
    if let Some(expires) = presign_expires {
        settings.signature_location = SignatureLocation::QueryParams;
        settings.expires_in = Some(expires);
    }
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let request = SignableRequest::new(
        method,
        uri,
        headers.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        SignableBody::Bytes(body),
    )
    .map_err(|e| e.to_string())?;
    let (_, signature) = sign(request, &params).map_err(|e| e.to_string())?.into_parts();
    Ok(signature)
}

/// Verifies a header-signed request for `service` (and `region`, when the caller knows which it must be).
pub fn verify_request(
    req: &Received<'_>,
    store: &CredentialStore,
    service: &str,
    region: Option<&str>,
    now: SystemTime,
) -> Result<Verified, Failure> {
    let header = |name: &str| req.headers.get(name).and_then(|v| v.to_str().ok());
    let auth = parse_authorization(header("authorization").ok_or(Failure::Missing)?).map_err(Failure::Malformed)?;
    if auth.service != service {
        return Err(Failure::Scope(format!(
            "Credential should be scoped to correct service: '{service}'"
        )));
    }
    if let Some(r) = region {
        if auth.region != r {
            return Err(Failure::Scope(format!(
                "Credential should be scoped to a valid region, not '{}'",
                auth.region
            )));
        }
    }
    let date_text = header("x-amz-date").ok_or_else(|| Failure::Malformed("X-Amz-Date header is missing".into()))?;
    let date = parse_amz_date(date_text).map_err(Failure::Malformed)?;
    if !date_text.starts_with(&auth.date) {
        return Err(Failure::Scope(format!(
            "credential scope date {} is not the date of X-Amz-Date {date_text}",
            auth.date
        )));
    }
    let creds = check_key(store, &auth.access_key_id, header("x-amz-security-token"), date, now)?;
    let host = header("host").ok_or_else(|| Failure::Malformed("Host header is missing".into()))?;
    let mut signed = Vec::new();
    for name in &auth.signed_headers {
        if matches!(name.as_str(), "host" | "x-amz-date" | "x-amz-security-token") {
            continue;
        }
        let value = header(name).ok_or_else(|| Failure::Malformed(format!("signed header '{name}' is missing")))?;
        signed.push((name.clone(), value.to_string()));
    }
    for required in ["host", "x-amz-date"] {
        if !auth.signed_headers.iter().any(|h| h == required) {
            return Err(Failure::Malformed(format!("SignedHeaders lacks '{required}'")));
        }
    }
    let uri = format!("http://{host}{}", req.path_and_query);
    let expected = expected_signature(
        req.method,
        &uri,
        &signed,
        req.body,
        &creds,
        &auth.region,
        service,
        date,
        None,
    )
    .map_err(Failure::Malformed)?;
    if expected != auth.signature {
        return Err(Failure::SignatureMismatch(format!("signed by {}", auth.access_key_id)));
    }
    Ok(Verified {
        credentials: creds,
        region: auth.region,
    })
}

/// A presigned URL's query, split into the signing parameters and the rest.
#[derive(Debug, Clone)]
pub struct Presigned {
    pub credential: Authorization,
    pub date: SystemTime,
    pub expires: Duration,
    pub security_token: Option<String>,
    /// Non-signing parameters, still encoded, in their order.
    pub rest: Vec<(String, String)>,
}

/// Parses the `X-Amz-*` parameters of a presigned query. Every parameter may appear once.
pub fn parse_presigned(pairs: &[(String, String)]) -> Result<Presigned, String> {
    let mut seen = std::collections::HashSet::new();
    let mut get = std::collections::HashMap::new();
    let mut rest = Vec::new();
    for (k, v) in pairs {
        if !seen.insert(k.to_ascii_lowercase()) {
            return Err(format!("query parameter {k} appears more than once"));
        }
        if k.starts_with("X-Amz-") {
            get.insert(k.as_str(), v.as_str());
        } else {
            rest.push((k.clone(), v.clone()));
        }
    }
    let need = |k: &str| get.get(k).copied().ok_or_else(|| format!("{k} is missing"));
    if need("X-Amz-Algorithm")? != "AWS4-HMAC-SHA256" {
        return Err("X-Amz-Algorithm is not AWS4-HMAC-SHA256".into());
    }
    let header = format!(
        "AWS4-HMAC-SHA256 Credential={}, SignedHeaders={}, Signature={}",
        need("X-Amz-Credential")?,
        need("X-Amz-SignedHeaders")?,
        need("X-Amz-Signature")?
    );
    let credential = parse_authorization(&header)?;
    let date_text = need("X-Amz-Date")?;
    let date = parse_amz_date(date_text)?;
    if !date_text.starts_with(&credential.date) {
        return Err("X-Amz-Credential date differs from X-Amz-Date".into());
    }
    let expires: u64 = need("X-Amz-Expires")?
        .parse()
        .map_err(|_| "X-Amz-Expires is not a number of seconds".to_string())?;
    for k in get.keys() {
        if !matches!(
            *k,
            "X-Amz-Algorithm"
                | "X-Amz-Credential"
                | "X-Amz-Date"
                | "X-Amz-Expires"
                | "X-Amz-SignedHeaders"
                | "X-Amz-Signature"
                | "X-Amz-Security-Token"
        ) {
            return Err(format!("unexpected query parameter {k}"));
        }
    }
    Ok(Presigned {
        credential,
        date,
        expires: Duration::from_secs(expires),
        security_token: get.get("X-Amz-Security-Token").map(|s| s.to_string()),
        rest,
    })
}

/// Verifies the signature of a presigned GET to `https://host/path?query`, where the signed headers other
/// than `host` take the values in `headers` (the verifier's, like `x-k8s-aws-id`).
pub fn verify_presigned(
    host: &str,
    path: &str,
    p: &Presigned,
    headers: &[(String, String)],
    store: &CredentialStore,
    now: SystemTime,
) -> Result<Arc<IssuedCredentials>, Failure> {
    let creds = check_key(
        store,
        &p.credential.access_key_id,
        p.security_token.as_deref(),
        p.date,
        now,
    )?;
    let query: Vec<String> = p
        .rest
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    let uri = format!("https://{host}{path}?{}", query.join("&"));
    let expected = expected_signature(
        "GET",
        &uri,
        headers,
        &[],
        &creds,
        &p.credential.region,
        &p.credential.service,
        p.date,
        Some(p.expires),
    )
    .map_err(Failure::Malformed)?;
    if expected != p.credential.signature {
        return Err(Failure::SignatureMismatch(format!(
            "signed by {}",
            p.credential.access_key_id
        )));
    }
    Ok(creds)
}

/// Splits `a=1&b=2` (form bodies and query strings), percent-decoding names and values (`+` is a space).
pub fn form_pairs(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let decode =
            |s: &str| percent_decode(&s.replace('+', " ")).ok_or_else(|| format!("bad percent-encoding in '{pair}'"));
        out.push((decode(k)?, decode(v)?));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// RFC 3986 encoding of everything but unreserved characters, as SigV4 canonical queries use.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
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
        include_str!("testdata/botocore-requests.jsonl")
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
}
