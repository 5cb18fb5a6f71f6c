//! The hub's TLS settings (`[hub] tls_cert`, `tls_key`, `tls_client_ca`):
//! PEM files read once, at start, into one rustls [`ServerConfig`] that
//! every TCP connection then shares.
//!
//! Invariants: every mistake is found here, before the hub binds anything,
//! and its error names the setting, the file and what is wrong with it (a
//! file that cannot be read, no PEM block of the kind expected, a key that
//! does not belong to the certificate); the ring provider is named
//! explicitly, so nothing depends on a process-wide default provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{HubConfig, TlsFiles};

/// Why the TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    // `error`, not `source`: the text already carries it (see `StartError`).
    #[error("hub.{setting}: cannot read {}: {error}", path.display())]
    Read { setting: &'static str, path: PathBuf, error: std::io::Error },
    #[error("hub.{setting}: {}: {why}", path.display())]
    Invalid { setting: &'static str, path: PathBuf, why: String },
    #[error(
        "hub.tls_key: the key in {} does not belong to the certificate in {} (hub.tls_cert); give the key the \
         certificate was made for",
        key.display(),
        cert.display()
    )]
    KeyMismatch { key: PathBuf, cert: PathBuf },
}

/// The TLS settings of `config`, read and checked (`None`: no TLS), as
/// [`Hub::start`](crate::Hub::start) and `--check-config` read them.
pub fn of_hub(config: &HubConfig) -> Result<Option<Arc<ServerConfig>>, TlsConfigError> {
    config.tls_files().map(|files| server_config(&files)).transpose()
}

/// The server configuration every TLS connection of the hub uses.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = read_certificates("tls_cert", &files.cert)?;
    let key = read_key(&files.key)?;
    let invalid = |setting, path: &Path, why: String| TlsConfigError::Invalid { setting, path: path.to_owned(), why };
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("tls_cert", &files.cert, e.to_string()))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let mut roots = RootCertStore::empty();
            for certificate in read_certificates("tls_client_ca", path)? {
                roots
                    .add(certificate)
                    .map_err(|e| invalid("tls_client_ca", path, format!("not a usable CA certificate: {e}")))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| invalid("tls_client_ca", path, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(|e| match e {
        rustls::Error::InconsistentKeys(_) => {
            TlsConfigError::KeyMismatch { key: files.key.clone(), cert: files.cert.clone() }
        }
        other => invalid("tls_cert", &files.cert, format!("not a usable certificate: {other}")),
    })?;
    Ok(Arc::new(config))
}

fn read(setting: &'static str, path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    std::fs::read(path).map_err(|error| TlsConfigError::Read { setting, path: path.to_owned(), error })
}

/// Every certificate in a PEM file; at least one.
fn read_certificates(setting: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let text = read(setting, path)?;
    let certificates = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsConfigError::Invalid { setting, path: path.to_owned(), why: pem_problem(&e) })?;
    if certificates.is_empty() {
        let why = "holds no certificate (a PEM block '-----BEGIN CERTIFICATE-----' is expected)".into();
        return Err(TlsConfigError::Invalid { setting, path: path.to_owned(), why });
    }
    Ok(certificates)
}

/// The first private key in a PEM file (PKCS#8, PKCS#1 or SEC1).
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsConfigError> {
    let text = read("tls_key", path)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| {
        let why = match e {
            pem::Error::NoItemsFound => {
                "holds no private key (a PEM block '-----BEGIN PRIVATE KEY-----' is expected)".to_owned()
            }
            other => pem_problem(&other),
        };
        TlsConfigError::Invalid { setting: "tls_key", path: path.to_owned(), why }
    })
}

fn pem_problem(e: &pem::Error) -> String {
    format!("not valid PEM ({e:?})")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch file with `content`, removed when dropped.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn scratch(name: &str, content: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!("fieldhub-tls-config-{}-{name}", std::process::id()));
        std::fs::write(&path, content).unwrap();
        Scratch(path)
    }

    fn files(cert: &Path, key: &Path) -> TlsFiles {
        TlsFiles { cert: cert.to_owned(), key: key.to_owned(), client_ca: None }
    }

    #[test]
    fn a_missing_file_is_named_with_its_setting() {
        let key = scratch("key-missing-cert", "");
        let err = server_config(&files(Path::new("/nonexistent/hub.crt"), &key.0)).unwrap_err().to_string();
        assert!(err.contains("hub.tls_cert") && err.contains("/nonexistent/hub.crt"), "{err}");
        assert!(err.contains("cannot read"), "{err}");
    }

    #[test]
    fn a_file_without_a_certificate_says_what_it_expected() {
        let cert = scratch("no-cert.pem", "just some text\n");
        let key = scratch("no-cert.key", "");
        let err = server_config(&files(&cert.0, &key.0)).unwrap_err().to_string();
        assert!(err.contains("hub.tls_cert") && err.contains("holds no certificate"), "{err}");
        assert!(err.contains(&cert.0.display().to_string()), "{err}");
    }

    #[test]
    fn broken_pem_is_refused() {
        let cert = scratch("broken.pem", "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n");
        let key = scratch("broken.key", "");
        let err = server_config(&files(&cert.0, &key.0)).unwrap_err().to_string();
        assert!(err.contains("hub.tls_cert") && err.contains("not valid PEM"), "{err}");
    }

    #[test]
    fn a_garbage_certificate_or_missing_key_is_refused() {
        // Valid PEM framing around bytes that are no certificate.
        let cert = scratch("garbage.pem", "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n");
        let key = scratch("nokey.pem", "-----BEGIN CERTIFICATE-----\nAAECAwQF\n-----END CERTIFICATE-----\n");
        let err = server_config(&files(&cert.0, &key.0)).unwrap_err().to_string();
        assert!(err.contains("hub.tls_key") && err.contains("holds no private key"), "{err}");
    }
}
