//! Which user of this machine is at the other end of a connection: how a
//! hub admits its own user's processes without a token and refuses other
//! local users (`docs/security.md`, "Local users").
//!
//! - A unix socket (the session socket, shared memory's handshake) tells
//!   its peer's credentials itself (`SO_PEERCRED`).
//! - A TCP connection from this machine is looked up in the kernel's
//!   socket table (`fieldhub_shm::peer`, `sock_diag`): the peer's socket is
//!   the one whose own end is the connection's peer address and whose
//!   remote end is the hub's. A connection from another machine has no such
//!   socket.
//!
//! Looked up once per connection that presents no token, never on the data
//! path. The reactor opens its netlink socket before the hub is ready
//! (`DiagSocket`), so a hub out of descriptors can still tell who a
//! waiting connection is.
//!
//! Linux only: elsewhere (Windows) no user of a TCP peer can be told, so a
//! hub there admits no client without a token or a certificate.

use std::net::SocketAddr;

#[cfg(target_os = "linux")]
pub use fieldhub_shm::peer::{tcp_peer_uid, DiagSocket};

/// Which user owns the socket at `peer` connected to `local`: nobody can
/// tell on this platform.
#[cfg(not(target_os = "linux"))]
pub fn tcp_peer_uid(_local: SocketAddr, _peer: SocketAddr) -> Option<u32> {
    None
}

/// Where a client came from, as far as deciding who it is goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerOrigin {
    /// A TCP connection: its two ends.
    Tcp { local: SocketAddr, peer: SocketAddr },
    /// A unix-socket peer with the user id the kernel reported, `None`
    /// when it reported none.
    Unix { uid: Option<u32> },
    /// Set up by the operator, not by a connecting process: an ivshmem
    /// region file named in the configuration, the hub's own bridges.
    Operator,
    /// A connection whose ends could not be read (or a request that did
    /// not come through the hub's accept): nobody's.
    Unknown,
    /// A TLS client whose certificate the hub verified against its
    /// `tls_client_ca` (mutual TLS): it is whom the CA says, wherever it is.
    Certified,
}

impl PeerOrigin {
    /// The peer of a unix socket, as the kernel reports it.
    #[cfg(target_os = "linux")]
    pub fn unix(socket: impl std::os::fd::AsFd) -> Self {
        let uid = rustix::net::sockopt::socket_peercred(socket).ok().map(|cred| cred.uid.as_raw());
        Self::Unix { uid }
    }

    /// A TCP connection by its two ends, [`Unknown`](Self::Unknown) when
    /// either cannot be read.
    pub fn tcp(local: std::io::Result<SocketAddr>, peer: std::io::Result<SocketAddr>) -> Self {
        match (local, peer) {
            (Ok(local), Ok(peer)) => Self::Tcp { local, peer },
            _ => Self::Unknown,
        }
    }

    /// `Ok` when the peer is a process of the user the hub runs as (or the
    /// operator's own transport), else who it is, for an error message.
    /// Asks the kernel once.
    pub fn check_hub_user(&self) -> Result<(), String> {
        let uid = match *self {
            Self::Operator => return Ok(()),
            Self::Unknown => return Err("a peer whose user could not be told".into()),
            Self::Certified => return Err("a TLS client with a certificate, on another machine or not".into()),
            Self::Unix { uid } => uid,
            Self::Tcp { local, peer } => tcp_peer_uid(local, peer),
        };
        match (self, uid) {
            (_, Some(uid)) if Some(uid) == hub_uid() => Ok(()),
            (_, Some(uid)) => Err(format!("a process of user id {uid}")),
            (Self::Tcp { peer, .. }, None) if cfg!(target_os = "linux") => {
                Err(format!("{peer}, which no socket of this machine is (another machine)"))
            }
            (Self::Tcp { peer, .. }, None) => Err(format!(
                "{peer}, whose user a hub on {} cannot tell (on this machine or another)",
                std::env::consts::OS
            )),
            (_, None) => Err("a process whose user the kernel did not tell".into()),
        }
    }
}

/// The user the hub runs as, where users of peers can be told.
fn hub_uid() -> Option<u32> {
    #[cfg(target_os = "linux")]
    return Some(rustix::process::geteuid().as_raw());
    #[cfg(not(target_os = "linux"))]
    return None;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected pair through a listener on `at`: (the hub's end as
    /// `PeerOrigin`, the client's socket).
    fn connection(at: &str, connect: impl Fn(SocketAddr) -> SocketAddr) -> (PeerOrigin, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind(at).unwrap();
        let client = std::net::TcpStream::connect(connect(listener.local_addr().unwrap())).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        (PeerOrigin::Tcp { local: accepted.local_addr().unwrap(), peer }, client)
    }

    #[test]
    fn a_loopback_connection_belongs_to_this_process_user_over_ipv4_and_ipv6() {
        let (origin, _client) = connection("127.0.0.1:0", |a| a);
        assert_eq!(origin.check_hub_user(), Ok(()));
        if let Ok(listener) = std::net::TcpListener::bind("[::1]:0") {
            drop(listener);
            let (origin, _client) = connection("[::1]:0", |a| a);
            assert_eq!(origin.check_hub_user(), Ok(()));
        }
    }

    #[test]
    fn an_ipv4_peer_of_a_dual_stack_listener_is_found() {
        let Ok(listener) = std::net::TcpListener::bind("[::]:0") else { return };
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let (origin, _client) =
            connection(&format!("[::]:{port}"), |a| SocketAddr::new([127, 0, 0, 1].into(), a.port()));
        let PeerOrigin::Tcp { peer, .. } = origin else { unreachable!() };
        assert!(peer.is_ipv6(), "the listener sees {peer}");
        assert_eq!(origin.check_hub_user(), Ok(()));
    }

    #[test]
    fn a_socket_that_does_not_exist_has_no_user() {
        let (PeerOrigin::Tcp { local, .. }, client) = connection("127.0.0.1:0", |a| a) else { unreachable!() };
        let nowhere = SocketAddr::new([127, 0, 0, 1].into(), client.local_addr().unwrap().port() ^ 1);
        assert_eq!(tcp_peer_uid(local, nowhere), None);
        let origin = PeerOrigin::Tcp { local, peer: "10.255.0.7:40000".parse().unwrap() };
        let who = origin.check_hub_user().expect_err("another machine's peer is nobody here");
        assert!(who.contains("another machine"), "{who}");
    }

    #[test]
    fn a_unix_peer_is_told_by_the_kernel() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(PeerOrigin::unix(&a).check_hub_user(), Ok(()));
    }
}
