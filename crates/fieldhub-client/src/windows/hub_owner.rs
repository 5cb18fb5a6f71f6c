//! Whose hub this is, on Windows. Linux asks the kernel which user listens
//! at a loopback address (`hub_owner.rs`); Windows has no such answer here,
//! so a hub on a loopback address is refused as one whose user cannot be
//! told, unless [`HUB_USER_VAR`] is `any` — nothing is sent to a listener
//! that may be another user's impostor. `tls://` has the hub's certificate
//! checked instead, and a remote address is not a local socket.

use std::net::IpAddr;

use crate::stream::Stream;
use crate::ClientError;

/// Environment variable naming the user whose hub the client may talk to
/// besides its own; on Windows only `any` means something (see above).
pub const HUB_USER_VAR: &str = "FIELDHUB_HUB_USER";

/// Refuse `stream`, connected to `url`, when it is a loopback TCP hub and
/// [`HUB_USER_VAR`] is not `any`. A `tls://` hub is checked by its
/// certificate before anything is sent.
pub(crate) fn check(url: &str, stream: &Stream) -> Result<(), ClientError> {
    let Stream::Tcp(tcp) = stream else {
        return Ok(());
    };
    if url.starts_with("tls://") {
        return Ok(());
    }
    let Ok(hub) = tcp.peer_addr() else {
        return Err(untrusted(url, "the connection's addresses cannot be read".into()));
    };
    if !is_loopback(hub.ip()) || std::env::var(HUB_USER_VAR).is_ok_and(|v| v == "any") {
        return Ok(());
    }
    Err(untrusted(
        url,
        format!(
            "Windows does not tell this client which user listens at {hub}, so it may be another user's \
             impostor; nothing was sent. Set {HUB_USER_VAR}=any to talk to it anyway, or use tls://"
        ),
    ))
}

fn untrusted(url: &str, why: String) -> ClientError {
    ClientError::UntrustedHub { url: url.into(), why }
}

/// Loopback, `::ffff:127.x.y.z` included.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}
