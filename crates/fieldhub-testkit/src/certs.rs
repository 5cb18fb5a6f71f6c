//! TLS certificates for the TLS tests, made in the process with `rcgen`
//! (no `openssl` command needed): a CA, a hub certificate it signed for
//! `localhost` and 127.0.0.1, a client certificate it signed, and a client
//! certificate of another CA — as PEM files in one directory, named as the
//! tests and `docs/security.md` name them. `fieldhub-test-certs DIR`
//! (`src/bin/`) writes the same files for the Python tests.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
    SanType,
};

/// The files [`write()`] makes in its directory.
pub const FILES: [&str; 10] = [
    "ca.crt",
    "ca.key",
    "other-ca.crt",
    "other-ca.key",
    "hub.crt",
    "hub.key",
    "client.crt",
    "client.key",
    "stranger.crt",
    "stranger.key",
];

/// A certificate and its key pair.
struct Issued {
    cert: Certificate,
    key: KeyPair,
}

impl Issued {
    fn save(&self, dir: &Path, name: &str) -> std::io::Result<()> {
        std::fs::write(dir.join(format!("{name}.crt")), self.cert.pem())?;
        std::fs::write(dir.join(format!("{name}.key")), self.key.serialize_pem())
    }
}

fn params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params
}

fn ca(common_name: &str) -> Issued {
    let mut params = params(common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().expect("a CA key");
    Issued { cert: params.self_signed(&key).expect("a self-signed CA"), key }
}

fn signed(params: CertificateParams, by: &Issued) -> Issued {
    let key = KeyPair::generate().expect("a key");
    Issued { cert: params.signed_by(&key, &by.cert, &by.key).expect("a signed certificate"), key }
}

fn client(common_name: &str, by: &Issued) -> Issued {
    let mut params = params(common_name);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    signed(params, by)
}

/// Write the [`FILES`] into `dir` (which must exist): `ca` (CN "fieldhub
/// test CA"), `other-ca` ("another CA"), `hub` signed by `ca` for
/// `localhost` and 127.0.0.1, `client` ("ecu-1", client authentication)
/// signed by `ca`, and `stranger` (client authentication) signed by
/// `other-ca`; each as `NAME.crt` and `NAME.key` (PKCS #8), P-256 keys.
pub fn write(dir: &Path) -> std::io::Result<()> {
    let (trusted, other) = (ca("fieldhub test CA"), ca("another CA"));
    let mut hub = params("localhost");
    hub.subject_alt_names = vec![
        SanType::DnsName("localhost".try_into().expect("a DNS name")),
        SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
    ];
    hub.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    trusted.save(dir, "ca")?;
    other.save(dir, "other-ca")?;
    signed(hub, &trusted).save(dir, "hub")?;
    client("ecu-1", &trusted).save(dir, "client")?;
    client("stranger", &other).save(dir, "stranger")
}

/// The certificates of [`write()`] in a private temporary directory, removed
/// when dropped.
pub struct Certs {
    dir: PathBuf,
}

impl Certs {
    /// Make them, in a directory named after `test`.
    pub fn make(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("fieldhub-tls-{test}-{}-{}", std::process::id(), crate::unique()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("make the certificates' directory");
        write(&dir).expect("write the certificates");
        Self { dir }
    }

    /// The file `name` (one of [`FILES`]).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_file_is_written_as_pem() {
        let certs = super::Certs::make("certs-unit-test");
        for name in super::FILES {
            let text = std::fs::read_to_string(certs.path(name)).unwrap();
            assert!(text.starts_with("-----BEGIN "), "{name}: {text}");
        }
    }
}
