//! Which user of this machine is at the other end of a connection: how a
//! hub admits its own user's processes without a token and refuses other
//! local users (`docs/security.md`, "Local users").
//!
//! - A unix socket (the session socket, shared memory's handshake) tells
//!   its peer's credentials itself (`SO_PEERCRED`).
//! - A TCP connection from this machine is looked up in the kernel's
//!   socket table through `sock_diag` netlink (what `ss` uses): the peer's
//!   socket is the one whose own end is the connection's peer address and
//!   whose remote end is the hub's; the kernel finds it by its addresses (a
//!   hash lookup, not a walk over every socket) and reports the user who
//!   created it. A connection from another machine has no such socket.
//!
//! Looked up once per connection that presents no token, never on the data
//! path. Each thread keeps its netlink socket open (the reactor's is opened
//! before the hub is ready), so a hub out of descriptors can still tell who
//! a waiting connection is. The kernel's answer is checked before it is read.

use std::cell::OnceCell;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::net::sockopt::Timeout;
use rustix::net::{netlink, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

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
    pub fn unix(socket: impl AsFd) -> Self {
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
            (_, Some(uid)) if uid == rustix::process::geteuid().as_raw() => Ok(()),
            (_, Some(uid)) => Err(format!("a process of user id {uid}")),
            (Self::Tcp { peer, .. }, None) => {
                Err(format!("{peer}, which no socket of this machine is (another machine)"))
            }
            (_, None) => Err("a process whose user the kernel did not tell".into()),
        }
    }
}

/// The user id owning the socket at `peer` that is connected to `local`
/// on this machine, `None` when there is none (another machine) or the
/// kernel cannot be asked.
pub fn tcp_peer_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    DIAG.with(|diag| {
        let diag = diag.get_or_init(|| DiagSocket::open().0).as_ref()?;
        let seq = SEQ.with(|seq| {
            seq.set(seq.get().wrapping_add(1));
            seq.get()
        });
        rustix::net::send(diag, &diag_request(local, peer, seq), SendFlags::empty()).ok()?;
        // A reply that came after an earlier question gave up waiting is
        // still queued: answers are matched to questions by sequence number.
        let mut reply = [0u8; 512];
        for _ in 0..4 {
            let (_, len) = rustix::net::recv(diag, &mut reply, RecvFlags::empty()).ok()?;
            let reply = &reply[..len.min(reply.len())];
            if reply.get(8..12) == Some(&seq.to_ne_bytes()[..]) {
                return owner_in_reply(reply);
            }
        }
        None
    })
}

/// A `sock_diag` socket opened ahead of the thread that will ask with it
/// ([`DiagSocket::serve_this_thread`]): a hub opens its reactor's before it
/// says it is ready, so its descriptors are all there from then on and it
/// can ask even when it runs out of them.
pub struct DiagSocket(Option<OwnedFd>);

impl DiagSocket {
    pub fn open() -> Self {
        let socket = rustix::net::socket_with(
            AddressFamily::NETLINK,
            SocketType::DGRAM,
            SocketFlags::CLOEXEC,
            Some(netlink::SOCK_DIAG),
        );
        Self(socket.ok().inspect(|socket| {
            // The kernel answers at once; this only bounds a surprise.
            let _ = rustix::net::sockopt::set_socket_timeout(socket, Timeout::Recv, Some(DIAG_PATIENCE));
        }))
    }

    /// Ask with this socket on the calling thread from now on.
    pub fn serve_this_thread(self) {
        DIAG.with(|diag| {
            let _ = diag.set(self.0);
        });
    }
}

thread_local! {
    /// This thread's socket, opened at its first question unless one was
    /// handed over before.
    static DIAG: OnceCell<Option<OwnedFd>> = const { OnceCell::new() };
    /// The sequence number of this thread's last question.
    static SEQ: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

const DIAG_PATIENCE: Duration = Duration::from_millis(100);
/// `<linux/sock_diag.h>`, `<linux/netlink.h>`, `<linux/inet_diag.h>`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HEADER: usize = 16;
const IPPROTO_TCP: u8 = 6;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// `inet_diag_msg.idiag_uid`: family, state, timer, retransmits (4), the
/// socket id (48), expires, receive and send queue (12).
const UID_OFFSET: usize = NLMSG_HEADER + 4 + 48 + 12;

/// A `SOCK_DIAG_BY_FAMILY` request (number `seq`) for the one TCP socket
/// whose own end is `peer` and whose remote end is `local`: `nlmsghdr` then
/// `inet_diag_req_v2`, in the machine's byte order, addresses and ports in
/// the network's.
fn diag_request(local: SocketAddr, peer: SocketAddr, seq: u32) -> [u8; 72] {
    // An IPv4 peer of a dual-stack listener is an IPv4 socket.
    let (local, peer) = (unmapped(local), unmapped(peer));
    let mut request = [0u8; 72];
    request[0..4].copy_from_slice(&72u32.to_ne_bytes());
    request[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    request[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    request[8..12].copy_from_slice(&seq.to_ne_bytes());
    request[16] = if peer.is_ipv4() { AF_INET } else { AF_INET6 };
    request[17] = IPPROTO_TCP;
    request[20..24].copy_from_slice(&u32::MAX.to_ne_bytes()); // every state
    let id = &mut request[24..72];
    id[0..2].copy_from_slice(&peer.port().to_be_bytes());
    id[2..4].copy_from_slice(&local.port().to_be_bytes());
    let octets = |address: SocketAddr| match address.ip() {
        IpAddr::V4(v4) => {
            let mut padded = [0u8; 16];
            padded[..4].copy_from_slice(&v4.octets());
            padded
        }
        IpAddr::V6(v6) => v6.octets(),
    };
    id[4..20].copy_from_slice(&octets(peer));
    id[20..36].copy_from_slice(&octets(local));
    // Interface 0 (any), then INET_DIAG_NOCOOKIE.
    id[40..48].fill(0xFF);
    request
}

/// The uid in the kernel's answer, `None` for an error (no such socket) or
/// anything that is not a whole `inet_diag_msg`.
fn owner_in_reply(reply: &[u8]) -> Option<u32> {
    let field = |at: usize| reply.get(at..at + 4).map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    let kind = reply.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]))?;
    let len = field(0)? as usize;
    if kind == NLMSG_ERROR {
        // ENOENT: no socket of this machine has those addresses.
        return None;
    }
    if kind != SOCK_DIAG_BY_FAMILY || len > reply.len() || len < UID_OFFSET + 4 {
        return None;
    }
    field(UID_OFFSET)
}

/// `::ffff:a.b.c.d` as `a.b.c.d`.
fn unmapped(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), address.port()),
            None => address,
        },
        IpAddr::V4(_) => address,
    }
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

    #[test]
    fn a_short_or_error_reply_gives_no_user() {
        assert_eq!(owner_in_reply(&[]), None);
        let mut error = [0u8; 36];
        error[0..4].copy_from_slice(&36u32.to_ne_bytes());
        error[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        assert_eq!(owner_in_reply(&error), None);
        let mut short = [0u8; UID_OFFSET + 2];
        short[0..4].copy_from_slice(&((UID_OFFSET + 2) as u32).to_ne_bytes());
        short[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        assert_eq!(owner_in_reply(&short), None);
    }
}
