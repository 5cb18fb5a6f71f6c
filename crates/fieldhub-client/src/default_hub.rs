//! Connecting when no hub URL was given: [`connect_default`] — the one
//! path of every tool and library told no URL (the CLI, `fh_connect(NULL)`,
//! python-can's bus without `hub=`).
//!
//! The default URL ([`default_hub_url`]) is `$FIELDHUB_HUB`, else
//! `shm://default` when the local hub's session socket exists, else the
//! local hub's default TCP port. A session socket that exists does not mean
//! shared memory works: a hub killed with SIGKILL leaves its socket behind, a
//! hub may be out of memory for a segment, a process may lack the
//! descriptors. A tool that was told no URL then falls back to TCP — to the
//! listener the hub publishes next to its socket (`spec/shm.md` 5.1), else the
//! default port — and says why in one line, so nothing fails silently over
//! and nothing fails that TCP would have served. A URL the user gave is
//! never replaced.

use fieldhub_proto::limits::DEFAULT_TCP_PORT;
use fieldhub_proto::wire::ErrorCode;

use crate::url::{default_hub_url, DEFAULT_SHM_NAME, HUB_ENV};
use crate::{Client, ClientError, ClientOptions};

/// Connect to the default hub; if that is `shm://default` and shared memory
/// cannot be used, tell `fallback` why (one line, for stderr) and connect
/// over TCP instead.
pub fn connect_default(options: &ClientOptions, fallback: impl FnOnce(&str)) -> Result<Client, ClientError> {
    connect_default_url(options, fallback).map(|(client, _)| client)
}

/// [`connect_default`], and the URL it reached the hub at (a bus names
/// its hub).
pub fn connect_default_url(
    options: &ClientOptions,
    fallback: impl FnOnce(&str),
) -> Result<(Client, String), ClientError> {
    let url = default_hub_url();
    let shm_default = std::env::var_os(HUB_ENV).is_none() && url == format!("shm://{DEFAULT_SHM_NAME}");
    match Client::connect_with(&url, options) {
        Err(error) if shm_default && shared_memory_unusable(&error) => {
            let tcp = published_stream_url().unwrap_or_else(|| format!("tcp://127.0.0.1:{DEFAULT_TCP_PORT}"));
            fallback(&format!("{url} cannot be used ({error}); using {tcp} instead"));
            Client::connect_with(&tcp, options).map(|client| (client, tcp))
        }
        result => result.map(|client| (client, url)),
    }
}

/// Whether `error` is about the shared-memory path rather than something
/// every transport would meet (a wrong token, an unreadable token file, a
/// hub of another protocol version): only then can TCP do better.
fn shared_memory_unusable(error: &ClientError) -> bool {
    match error {
        ClientError::Refused { code, .. } => *code == ErrorCode::Internal as u16,
        ClientError::InvalidUrl { .. } | ClientError::TokenFile(_) | ClientError::Tls { .. } => false,
        _ => true,
    }
}

/// The stream listener the local hub serving `shm://default` publishes
/// next to its session socket (`DIR/default.control`), if it does and the
/// directory is this user's private one.
fn published_stream_url() -> Option<String> {
    let dir = crate::shm_socket::socket_dir();
    crate::shm_socket::check_private_dir(&dir).ok()?;
    let path = crate::shm_socket::control_path(DEFAULT_SHM_NAME).ok()?;
    let text = std::fs::read_to_string(path).ok()?;
    let url = text.trim();
    let stream = url.starts_with("tcp://") || url.starts_with("tls://");
    (stream && crate::HubUrl::parse(url).is_ok()).then(|| url.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_failures_of_the_shared_memory_path_fall_back() {
        let io = || std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(shared_memory_unusable(&ClientError::Connect { url: "shm://default".into(), source: io() }));
        assert!(shared_memory_unusable(&ClientError::Protocol("the hub's shared memory is unusable".into())));
        let refused = |code: ErrorCode| ClientError::Refused {
            url: "shm://default".into(),
            code: code as u16,
            text: String::new(),
        };
        assert!(shared_memory_unusable(&refused(ErrorCode::Internal)), "the hub could not set up shared memory");
        assert!(!shared_memory_unusable(&refused(ErrorCode::Unauthorized)), "TCP would refuse the token too");
    }
}
