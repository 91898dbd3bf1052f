//! Private keys as Kubernetes distributions write them: PKCS#8 ("PRIVATE KEY", ours), PKCS#1 ("RSA PRIVATE KEY",
//! kubeadm's CA in a kind node) and SEC1 ("EC PRIVATE KEY", k3s). rcgen on ring reads PKCS#8 only, so the other
//! two are wrapped in a PKCS#8 PrivateKeyInfo first (RFC 5208: version 0, the algorithm, the key as an OCTET
//! STRING).
use rcgen::KeyPair;
use yasna::models::ObjectIdentifier;
use yasna::Tag;

/// rsaEncryption (RFC 8017).
const RSA_ENCRYPTION: &[u64] = &[1, 2, 840, 113549, 1, 1, 1];
/// id-ecPublicKey (RFC 5480).
const EC_PUBLIC_KEY: &[u64] = &[1, 2, 840, 10045, 2, 1];

/// The key pair in `text`, whichever of the three encodings it is.
pub fn from_pem(text: &str) -> Result<KeyPair, String> {
    let block = pem::parse(text).map_err(|e| format!("not a PEM private key: {e}"))?;
    let der = match block.tag() {
        "PRIVATE KEY" => block.contents().to_vec(),
        "RSA PRIVATE KEY" => wrap(RSA_ENCRYPTION, None, block.contents()),
        "EC PRIVATE KEY" => {
            let curve = sec1_curve(block.contents())?;
            wrap(EC_PUBLIC_KEY, Some(&curve), block.contents())
        }
        other => return Err(format!("unsupported private key type \"{other}\"")),
    };
    KeyPair::try_from(der.as_slice()).map_err(|e| format!("{} key: {e}", block.tag()))
}

/// PKCS#8 PrivateKeyInfo around `key` (the algorithm's parameters: the curve, or NULL for RSA).
fn wrap(algorithm: &[u64], curve: Option<&ObjectIdentifier>, key: &[u8]) -> Vec<u8> {
    yasna::construct_der(|w| {
        w.write_sequence(|w| {
            w.next().write_u8(0);
            w.next().write_sequence(|w| {
                w.next().write_oid(&ObjectIdentifier::from_slice(algorithm));
                match curve {
                    Some(c) => w.next().write_oid(c),
                    None => w.next().write_null(),
                }
            });
            w.next().write_bytes(key);
        })
    })
}

/// The named curve of a SEC1 ECPrivateKey (RFC 5915: version, key, [0] parameters, [1] public key).
fn sec1_curve(der: &[u8]) -> Result<ObjectIdentifier, String> {
    let curve = yasna::parse_der(der, |r| {
        r.read_sequence(|r| {
            r.next().read_u8()?;
            r.next().read_bytes()?;
            let curve = r.read_optional(|r| r.read_tagged(Tag::context(0), |r| r.read_oid()))?;
            r.read_optional(|r| r.read_tagged(Tag::context(1), |r| r.read_bitvec_bytes()))?;
            Ok(curve)
        })
    })
    .map_err(|e| format!("EC PRIVATE KEY: {e}"))?;
    curve.ok_or_else(|| "EC PRIVATE KEY names no curve".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys in the formats kubeadm and k3s write (generated with `openssl genrsa -traditional` and
    /// `openssl ecparam -genkey`) sign certificates as CA keys.
    #[test]
    fn kubeadm_and_k3s_keys_are_read() {
        for (text, algorithm) in [
            (include_str!("testdata-rsa-pkcs1.pem"), &rcgen::PKCS_RSA_SHA256),
            (include_str!("testdata-ec-sec1.pem"), &rcgen::PKCS_ECDSA_P256_SHA256),
        ] {
            let key = from_pem(text).unwrap();
            assert_eq!(key.algorithm(), algorithm);
            let ca = super::super::Ca(super::super::CertKey {
                cert_pem: rcgen::CertificateParams::default().self_signed(&key).unwrap().pem(),
                key_pem: text.to_string(),
            });
            ca.issue("someone", &["group"], &[], super::super::Usage::Client)
                .unwrap();
        }
    }

    #[test]
    fn other_pem_is_refused_with_its_type() {
        let cert = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(from_pem(cert).unwrap_err().contains("CERTIFICATE"));
        assert!(from_pem("nonsense").unwrap_err().contains("not a PEM"));
    }
}
