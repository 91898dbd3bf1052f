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
    if !session_token.is_some_and(|t| secrets_equal(&creds.session_token, t)) {
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
    if !secrets_equal(&expected, &auth.signature) {
        return Err(Failure::SignatureMismatch(format!("signed by {}", auth.access_key_id)));
    }
    Ok(Verified {
        credentials: creds,
        region: auth.region,
    })
}

/// Compares a computed signature (or a known session token) with a presented one in time independent of where
/// they differ, so timing does not tell a forger how many leading characters of a guess were right.
pub fn secrets_equal(expected: &str, presented: &str) -> bool {
    use subtle::ConstantTimeEq;
    expected.as_bytes().ct_eq(presented.as_bytes()).into()
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
    if !secrets_equal(&expected, &p.credential.signature) {
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
pub(crate) mod tests;
