//! Parsing of SigV4 `Authorization` headers, so the fakes can check which region and service a request was
//! signed for (a bootstrap that signs for the wrong region fails against real AWS too).
//! Verifying the signature itself against issued credentials is done where credentials matter (IAM auth).

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

/// Checks the header is present, well-formed and scoped to `region`/`service`; the error text is what AWS
/// says in the same situation, closely enough for a bootstrap author to recognise it.
pub fn check_scope(header: Option<&str>, region: &str, service: &str) -> Result<Authorization, String> {
    let header = header.ok_or("Missing Authentication Token")?;
    let auth = parse_authorization(header)?;
    if auth.service != service {
        return Err(format!("Credential should be scoped to correct service: '{service}'"));
    }
    if auth.region != region {
        return Err(format!(
            "Credential should be scoped to a valid region, not '{}'. ",
            auth.region
        ));
    }
    Ok(auth)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn scope_checks() {
        assert!(check_scope(Some(GOOD), "eu-west-1", "eks").is_ok());
        assert!(check_scope(Some(GOOD), "us-east-1", "eks")
            .unwrap_err()
            .contains("valid region"));
        assert!(check_scope(Some(GOOD), "eu-west-1", "ec2")
            .unwrap_err()
            .contains("service"));
        assert!(check_scope(None, "eu-west-1", "eks").unwrap_err().contains("Missing"));
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
