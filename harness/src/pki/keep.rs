//! A CA kept in a directory across runs (`NODEJOIN_ENDPOINTS_CA`): the one a disk of the user's was built to
//! trust, since nothing is put into such a disk at boot. `ca.pem` is its certificate, `ca-key.pem` its key
//! (PKCS#8, PKCS#1 or SEC1 PEM), readable by its owner only, as ssh holds private keys.
use super::{keys, pki_err, Ca, CertKey};
use crate::error::{Error, Result};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

pub const CERT_FILE: &str = "ca.pem";
pub const KEY_FILE: &str = "ca-key.pem";

/// The largest certificate or key file read.
const MAX_PEM: u64 = 64 << 10;

fn read(path: &Path) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_file() || meta.len() > MAX_PEM {
        return Err(pki_err(format!("{}: not a PEM file of at most 64 KiB", path.display())));
    }
    std::fs::read_to_string(path).map_err(|e| Error::io(path, e))
}

impl Ca {
    /// The CA kept in `dir`. Its key must be readable by its owner only, its certificate a CA's (it signs
    /// certificates), and the certificate's public key the key's.
    pub fn load(dir: &Path) -> Result<Self> {
        let (cert_path, key_path) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
        let meta = std::fs::metadata(&key_path).map_err(|e| Error::io(&key_path, e))?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if meta.permissions().mode() & 0o077 != 0 || meta.uid() != me {
            return Err(pki_err(format!(
                "{}: a CA's key must be yours and readable by you only (chmod 600)",
                key_path.display()
            )));
        }
        let cert_pem = read(&cert_path)?;
        let key_pem = read(&key_path)?;
        let key = keys::from_pem(&key_pem).map_err(|e| pki_err(format!("{}: {e}", key_path.display())))?;
        let der = super::pem_to_der(&cert_pem).map_err(|e| pki_err(format!("{}: {e}", cert_path.display())))?;
        let (_, cert) = <x509_parser::certificate::X509Certificate as x509_parser::prelude::FromDer<_>>::from_der(&der)
            .map_err(|e| pki_err(format!("{}: {e}", cert_path.display())))?;
        if !cert.is_ca() {
            return Err(pki_err(format!("{}: not a CA certificate", cert_path.display())));
        }
        if cert.public_key().subject_public_key.data.as_ref() != key.public_key_raw() {
            return Err(pki_err(format!(
                "{} is not the certificate of the key {}",
                cert_path.display(),
                key_path.display()
            )));
        }
        // The issuer rcgen builds from them must work before a run relies on it.
        rcgen::Issuer::from_ca_cert_pem(&cert_pem, key)
            .map_err(|e| pki_err(format!("{}: {e}", cert_path.display())))?;
        Ok(Ca(CertKey { cert_pem, key_pem }))
    }

    /// Makes an endpoints CA ([`Ca::generate_endpoints`]) in `dir` (created owner-only) unless it holds one; true
    /// when it made one.
    pub fn create_in(dir: &Path, common_name: &str) -> Result<bool> {
        if dir.join(CERT_FILE).exists() || dir.join(KEY_FILE).exists() {
            Ca::load(dir)?;
            return Ok(false);
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(|e| Error::io(dir, e))?;
        let ca = Ca::generate_endpoints(common_name)?;
        let write = |name: &str, text: &str, mode: u32| {
            let path = dir.join(name);
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&path)
                .map_err(|e| Error::io(&path, e))?;
            std::io::Write::write_all(&mut f, text.as_bytes()).map_err(|e| Error::io(&path, e))
        };
        write(KEY_FILE, &ca.0.key_pem, 0o600)?;
        write(CERT_FILE, &ca.0.cert_pem, 0o644)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_ca_is_made_once_loaded_again_and_refused_when_exposed_or_mismatched() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("ca");
        assert!(Ca::create_in(&d, "test CA").unwrap());
        assert!(
            !Ca::create_in(&d, "test CA").unwrap(),
            "a second call keeps the first CA"
        );
        let ca = Ca::load(&d).unwrap();
        let leaf = ca
            .issue("ec2.us-west-2.amazonaws.com", &[], &[], crate::pki::Usage::Server)
            .unwrap();
        assert!(leaf.cert_pem.contains("BEGIN CERTIFICATE"));
        std::fs::set_permissions(d.join(KEY_FILE), std::fs::Permissions::from_mode(0o644)).unwrap();
        // Ca has no Debug (it holds a key): the error is taken out by hand.
        let why = |d: &Path| Ca::load(d).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(why(&d).contains("chmod 600"));
        std::fs::set_permissions(d.join(KEY_FILE), std::fs::Permissions::from_mode(0o600)).unwrap();
        let other = Ca::generate("other").unwrap();
        std::fs::write(d.join(CERT_FILE), &other.0.cert_pem).unwrap();
        assert!(why(&d).contains("not the certificate of the key"));
        std::fs::write(d.join(CERT_FILE), &leaf.cert_pem).unwrap();
        std::fs::write(d.join(KEY_FILE), &leaf.key_pem).unwrap();
        assert!(why(&d).contains("not a CA certificate"));
    }
}
