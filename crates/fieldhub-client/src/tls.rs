//! TLS to a hub (`tls://HOST:PORT`): which certificates to trust and to
//! present, the handshake, and the stream the link reads and writes.
//!
//! Settings ([`TlsOptions`]) not given by the program come from the
//! environment, as the token does: `FIELDHUB_TLS_CA` (PEM CA bundle to
//! trust the hub's certificate with; default: the system's bundle),
//! `FIELDHUB_TLS_CERT` + `FIELDHUB_TLS_KEY` (this client's certificate, for
//! a hub with mutual TLS), `FIELDHUB_TLS_SERVER_NAME` (the name to check
//! the hub's certificate for; default: the URL's host). The tools, the C
//! library and python-can read the same variables.
//!
//! The link's reader and writer threads share one rustls session behind a
//! lock that is never held across a blocking socket call: the reader reads
//! ciphertext unlocked, then feeds it; the writer encrypts under the lock
//! and writes unlocked. Only the writer writes to the socket, so records
//! leave in the order they were made.
//!
//! Errors ([`TlsError`]) say what to set: an untrusted hub names
//! `FIELDHUB_TLS_CA`, a refused or missing client certificate
//! `FIELDHUB_TLS_CERT` and `FIELDHUB_TLS_KEY`.

use std::io::{self, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{AlertDescription, CertificateError, ClientConfig, ClientConnection, RootCertStore};

use crate::lock;

/// The PEM CA bundle to trust the hub's certificate with.
pub const TLS_CA_VAR: &str = "FIELDHUB_TLS_CA";
/// This client's PEM certificate chain, for mutual TLS.
pub const TLS_CERT_VAR: &str = "FIELDHUB_TLS_CERT";
/// The private key of [`TLS_CERT_VAR`]'s certificate.
pub const TLS_KEY_VAR: &str = "FIELDHUB_TLS_KEY";
/// The name the hub's certificate must hold, when not the URL's host.
pub const TLS_SERVER_NAME_VAR: &str = "FIELDHUB_TLS_SERVER_NAME";

/// Where a system keeps its CA bundle (Debian/Ubuntu, Fedora/RHEL,
/// openSUSE, Alpine), looked at when no CA is given.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// TLS settings of a client; each one not given is taken from the environment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM CA bundle to trust (`FIELDHUB_TLS_CA`; else the system's).
    pub ca: Option<PathBuf>,
    /// PEM certificate chain to present (`FIELDHUB_TLS_CERT`).
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert` (`FIELDHUB_TLS_KEY`).
    pub key: Option<PathBuf>,
    /// Name to check the hub's certificate for (`FIELDHUB_TLS_SERVER_NAME`;
    /// else the URL's host).
    pub server_name: Option<String>,
}

/// Why TLS with a hub failed, and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the {what} {}: {error}", path.display())]
    Read { what: &'static str, path: PathBuf, error: io::Error },
    #[error("the {what} {} {why}", path.display())]
    Invalid { what: &'static str, path: PathBuf, why: String },
    #[error("{TLS_CERT_VAR} and {TLS_KEY_VAR} go together: set both (a client certificate and its key) or neither")]
    HalfClientCertificate,
    #[error(
        "the client key {} does not belong to the client certificate {}; set {TLS_KEY_VAR} to the key the \
         certificate was made for",
        key.display(),
        cert.display()
    )]
    KeyMismatch { cert: PathBuf, key: PathBuf },
    #[error("no CA bundle to trust the hub's certificate with: set {TLS_CA_VAR} to the CA that signed it")]
    NoTrustedCa,
    #[error(
        "'{0}' is not a name a certificate can hold; set {TLS_SERVER_NAME_VAR} to the name in the hub's certificate"
    )]
    ServerName(String),
    #[error("server certificate not trusted ({0}): set {TLS_CA_VAR} to the CA that signed it")]
    Untrusted(String),
    #[error(
        "the hub's certificate is not valid for '{name}': connect by a name it holds, or set \
         {TLS_SERVER_NAME_VAR} to one"
    )]
    WrongName { name: String },
    #[error(
        "the hub requires a client certificate (mutual TLS) and this client presented none: set {TLS_CERT_VAR} \
         and {TLS_KEY_VAR} to a certificate signed by the CA the hub trusts"
    )]
    CertificateRequired,
    #[error(
        "the hub refused this client's certificate ({0}): set {TLS_CERT_VAR} and {TLS_KEY_VAR} to a \
         certificate signed by the CA the hub trusts (its tls_client_ca)"
    )]
    CertificateRefused(String),
    #[error(
        "the hub closed the connection during the TLS handshake (is this a TLS port? a hub without TLS is \
         reached with tcp://)"
    )]
    ClosedInHandshake,
    #[error("TLS with the hub failed: {0} (is this a TLS port? a hub without TLS is reached with tcp://)")]
    Failed(rustls::Error),
    #[error("TLS handshake with the hub: {0}")]
    Io(io::Error),
}

impl TlsError {
    /// Whether a setting (a file, a name) is what is wrong, rather than the
    /// handshake with the hub.
    pub fn is_setting(&self) -> bool {
        matches!(
            self,
            TlsError::Read { .. }
                | TlsError::Invalid { .. }
                | TlsError::HalfClientCertificate
                | TlsError::KeyMismatch { .. }
                | TlsError::NoTrustedCa
                | TlsError::ServerName(_)
        )
    }

    /// The error rustls reported (checking the hub's certificate for
    /// `server_name`), in words that say what to set.
    pub fn from_rustls(error: rustls::Error, server_name: &str) -> Self {
        use rustls::Error as E;
        match error {
            E::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => TlsError::WrongName { name: server_name.to_owned() },
            E::InvalidCertificate(why) => TlsError::Untrusted(format!("{why:?}")),
            E::AlertReceived(AlertDescription::CertificateRequired) => TlsError::CertificateRequired,
            E::AlertReceived(
                alert @ (AlertDescription::BadCertificate
                | AlertDescription::UnknownCA
                | AlertDescription::CertificateUnknown
                | AlertDescription::CertificateExpired
                | AlertDescription::CertificateRevoked
                | AlertDescription::UnsupportedCertificate
                | AlertDescription::AccessDenied),
            ) => TlsError::CertificateRefused(format!("{alert:?}")),
            other => TlsError::Failed(other),
        }
    }
}

impl TlsOptions {
    /// These settings, each one not given taken from the environment.
    pub fn or_environment(&self) -> TlsOptions {
        let path = |given: &Option<PathBuf>, var| {
            given.clone().or_else(|| std::env::var_os(var).filter(|v| !v.is_empty()).map(PathBuf::from))
        };
        TlsOptions {
            ca: path(&self.ca, TLS_CA_VAR),
            cert: path(&self.cert, TLS_CERT_VAR),
            key: path(&self.key, TLS_KEY_VAR),
            server_name: self
                .server_name
                .clone()
                .or_else(|| std::env::var(TLS_SERVER_NAME_VAR).ok().filter(|v| !v.is_empty())),
        }
    }

    /// The rustls client settings these options make (for a hub's TLS port
    /// or its https control API). Reads the files named; call on
    /// [`or_environment`](Self::or_environment)'s result for the
    /// environment's.
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        if self.cert.is_some() != self.key.is_some() {
            return Err(TlsError::HalfClientCertificate);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        match &self.ca {
            Some(path) => {
                for certificate in read_certificates("CA bundle", path)? {
                    roots.add(certificate).map_err(|e| TlsError::Invalid {
                        what: "CA bundle",
                        path: path.clone(),
                        why: format!("holds a certificate that is no usable CA: {e}"),
                    })?;
                }
            }
            None => {
                let bundle = std::env::var_os("SSL_CERT_FILE")
                    .map(PathBuf::from)
                    .into_iter()
                    .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
                    .find(|path| path.is_file())
                    .ok_or(TlsError::NoTrustedCa)?;
                roots.add_parsable_certificates(read_certificates("CA bundle", &bundle)?);
            }
        }
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Failed)?
            .with_root_certificates(roots);
        let config = match (&self.cert, &self.key) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => {
                let chain = read_certificates("client certificate", cert)?;
                let private = read_key(key)?;
                builder.with_client_auth_cert(chain, private).map_err(|e| match e {
                    rustls::Error::InconsistentKeys(_) => {
                        TlsError::KeyMismatch { cert: cert.clone(), key: key.clone() }
                    }
                    other => TlsError::Invalid {
                        what: "client certificate",
                        path: cert.clone(),
                        why: format!("cannot be used: {other}"),
                    },
                })?
            }
            // Checked first, above.
            _ => return Err(TlsError::HalfClientCertificate),
        };
        Ok(Arc::new(config))
    }
}

fn read(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read { what, path: path.to_owned(), error })
}

fn read_certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = read(what, path)?;
    let invalid = |why: String| TlsError::Invalid { what, path: path.to_owned(), why };
    let certificates = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("is not valid PEM ({e:?})")))?;
    if certificates.is_empty() {
        return Err(invalid("holds no certificate (a PEM block '-----BEGIN CERTIFICATE-----' is expected)".into()));
    }
    Ok(certificates)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let text = read("client key", path)?;
    PrivateKeyDer::from_pem_slice(&text).map_err(|e| TlsError::Invalid {
        what: "client key",
        path: path.to_owned(),
        why: match e {
            pem::Error::NoItemsFound => {
                "holds no private key (a PEM block '-----BEGIN PRIVATE KEY-----' is expected)".to_owned()
            }
            other => format!("is not valid PEM ({other:?})"),
        },
    })
}

/// Perform the TLS handshake over the connected, blocking `tcp` with the
/// hub named `host`, giving up at `deadline`.
pub(crate) fn handshake(
    mut tcp: TcpStream,
    host: &str,
    options: &TlsOptions,
    deadline: Instant,
) -> Result<TlsStream, TlsError> {
    let options = options.or_environment();
    let config = options.client_config()?;
    let name = options.server_name.as_deref().unwrap_or(host);
    let server_name = ServerName::try_from(name.to_owned()).map_err(|_| TlsError::ServerName(name.to_owned()))?;
    let mut session = ClientConnection::new(config, server_name).map_err(TlsError::Failed)?;
    let failed = TlsError::Io;
    while session.is_handshaking() {
        while session.wants_write() {
            session.write_tls(&mut tcp).map_err(failed)?;
        }
        if !session.is_handshaking() {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(failed(io::Error::new(ErrorKind::TimedOut, "no TLS handshake in time")));
        }
        tcp.set_read_timeout(Some(left)).map_err(failed)?;
        if session.read_tls(&mut tcp).map_err(failed)? == 0 {
            return Err(TlsError::ClosedInHandshake);
        }
        session.process_new_packets().map_err(|e| {
            // The alert that tells the hub why, if it still listens.
            let _ = session.write_tls(&mut tcp);
            TlsError::from_rustls(e, name)
        })?;
    }
    while session.wants_write() {
        session.write_tls(&mut tcp).map_err(failed)?;
    }
    let name = name.to_owned();
    Ok(TlsStream::new(tcp, Arc::new(Mutex::new(session)), Arc::from(name)))
}

/// A TLS session over TCP; clones share the session (see the module doc).
pub(crate) struct TlsStream {
    tcp: TcpStream,
    session: Arc<Mutex<ClientConnection>>,
    /// For errors: the name the hub's certificate was checked for.
    server_name: Arc<str>,
    /// Ciphertext read and not yet fed to rustls: `incoming[fed..filled]`.
    incoming: Box<[u8]>,
    fed: usize,
    filled: usize,
    /// Records made for one write (reused).
    outgoing: Vec<u8>,
}

/// Ciphertext read from the socket at once.
const INCOMING: usize = 16 * 1024;

impl TlsStream {
    fn new(tcp: TcpStream, session: Arc<Mutex<ClientConnection>>, server_name: Arc<str>) -> Self {
        Self { tcp, session, server_name, incoming: vec![0; INCOMING].into(), fed: 0, filled: 0, outgoing: Vec::new() }
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// A second handle: its own socket handle and buffers, the same session.
    pub fn try_clone(&self) -> io::Result<Self> {
        Ok(Self::new(self.tcp.try_clone()?, Arc::clone(&self.session), Arc::clone(&self.server_name)))
    }

    fn failure(&self, error: rustls::Error) -> io::Error {
        io::Error::new(ErrorKind::InvalidData, TlsError::from_rustls(error, &self.server_name))
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut session = lock(&self.session);
                match session.reader().read(buf) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    // The hub closed without close_notify: the protocol's own
                    // framing tells a cut message.
                    Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                    Err(e) => return Err(e),
                }
                if self.fed < self.filled {
                    let mut pending = &self.incoming[self.fed..self.filled];
                    let n = session.read_tls(&mut pending)?;
                    self.fed += n;
                    if let Err(e) = session.process_new_packets() {
                        drop(session);
                        return Err(self.failure(e));
                    }
                    continue;
                }
            }
            // Nothing to hand out or feed: wait for the hub, unlocked.
            let n = self.tcp.read(&mut self.incoming)?;
            (self.fed, self.filled) = (0, n);
            if n == 0 {
                // The end, for rustls to report (cleanly or not) above.
                let mut session = lock(&self.session);
                session.read_tls(&mut &[][..])?;
                if let Err(e) = session.process_new_packets() {
                    drop(session);
                    return Err(self.failure(e));
                }
            }
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let taken = {
            let mut session = lock(&self.session);
            let taken = session.writer().write(buf)?;
            while session.wants_write() {
                session.write_tls(&mut self.outgoing)?;
            }
            taken
        };
        let written = self.tcp.write_all(&self.outgoing);
        self.outgoing.clear();
        written.map(|()| taken)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_certificate_without_its_key_is_refused_naming_both_variables() {
        let options = TlsOptions { cert: Some("/x/client.crt".into()), ..Default::default() };
        let err = options.client_config().unwrap_err().to_string();
        assert!(err.contains("FIELDHUB_TLS_CERT and FIELDHUB_TLS_KEY go together"), "{err}");
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_with_its_path() {
        let ca = std::env::temp_dir().join(format!("fieldhub-tls-ca-{}", std::process::id()));
        std::fs::write(&ca, "").unwrap();
        let err = TlsOptions { ca: Some(ca.clone()), ..Default::default() }.client_config().unwrap_err();
        std::fs::remove_file(&ca).unwrap();
        let err = err.to_string();
        assert!(err.contains("holds no certificate") && err.contains(&ca.display().to_string()), "{err}");
    }

    #[test]
    fn a_missing_ca_file_is_named() {
        let options = TlsOptions { ca: Some("/nonexistent/ca.pem".into()), ..Default::default() };
        let err = options.client_config().unwrap_err().to_string();
        assert!(err.contains("/nonexistent/ca.pem") && err.contains("CA bundle"), "{err}");
    }

    #[test]
    fn rustls_errors_become_what_to_set() {
        let untrusted = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert!(TlsError::from_rustls(untrusted, "h").to_string().contains("set FIELDHUB_TLS_CA"));
        let required = rustls::Error::AlertReceived(AlertDescription::CertificateRequired);
        let text = TlsError::from_rustls(required, "h").to_string();
        assert!(text.contains("FIELDHUB_TLS_CERT") && text.contains("FIELDHUB_TLS_KEY"), "{text}");
        let refused = rustls::Error::AlertReceived(AlertDescription::UnknownCA);
        assert!(TlsError::from_rustls(refused, "h").to_string().contains("refused this client's certificate"));
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        assert!(TlsError::from_rustls(name, "hub.example").to_string().contains("'hub.example'"));
    }
}
