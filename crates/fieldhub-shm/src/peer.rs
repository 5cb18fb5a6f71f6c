//! Who owns a TCP socket of this machine, from the kernel's socket table
//! (`sock_diag` netlink, what `ss` uses): how a hub tells which local user
//! is at the other end of a TCP connection, and how a client tells which
//! local user listens at a loopback address before it says anything there.
//!
//! - [`tcp_peer_uid`] finds the one socket whose own end is `peer` and
//!   whose remote end is `local` — the other end of a connection of this
//!   machine. The kernel finds it by its addresses (a hash lookup, not a
//!   walk over every socket) and reports the user who created it (an
//!   accepted socket has its listener's user); without such a connection it
//!   reports the listening socket at `peer`, if any.
//! - [`tcp_listener_uid`] finds the listening socket that takes
//!   connections to an address.
//!
//! Invariants: a socket whose user the kernel does not keep (a connection
//! still in its handshake, one in `TIME_WAIT`: the kernel reports user 0
//! for them) gives no user, never root's; the kernel's answer is checked
//! before it is read. Each thread keeps its netlink socket open (a hub opens
//! its reactor's before it is ready, [`DiagSocket`]), so a process out of
//! descriptors can still ask.

use std::cell::OnceCell;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::OwnedFd;
use std::time::Duration;

use rustix::net::sockopt::Timeout;
use rustix::net::{netlink, AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// The user id owning the socket at `peer` that is connected to `local`
/// on this machine, `None` when there is none (another machine) or the
/// kernel cannot be asked.
pub fn tcp_peer_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    ask(local, peer)
}

/// The user id owning the listening socket that takes TCP connections to
/// `address` on this machine, `None` when none does or the kernel cannot
/// be asked.
pub fn tcp_listener_uid(address: SocketAddr) -> Option<u32> {
    // No connection has an unspecified remote end: the kernel's lookup
    // finds no connected socket and reports the listener.
    let nobody = SocketAddr::new(if address.is_ipv4() { IpAddr::from([0u8; 4]) } else { IpAddr::from([0u8; 16]) }, 0);
    ask(nobody, address)
}

/// The owner of the socket at `peer` whose remote end is `local`.
fn ask(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
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
/// `inet_diag_msg.idiag_state`.
const STATE_OFFSET: usize = NLMSG_HEADER + 1;
/// `<net/tcp_states.h>`: states whose socket the kernel reports with user
/// 0 whoever made it (`inet_twsk_diag_fill`, `inet_req_diag_fill`).
const TCP_TIME_WAIT: u8 = 6;
const TCP_NEW_SYN_RECV: u8 = 12;

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
    if matches!(reply[STATE_OFFSET], TCP_TIME_WAIT | TCP_NEW_SYN_RECV) {
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

    fn me() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    #[test]
    fn both_ends_of_a_loopback_connection_and_its_listener_belong_to_this_user() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let hub = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(hub).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let mine = client.local_addr().unwrap();
        assert_eq!(tcp_peer_uid(hub, mine), Some(me()), "the client's socket, as the hub asks");
        assert_eq!(tcp_peer_uid(mine, accepted.local_addr().unwrap()), Some(me()), "the hub's, as the client asks");
        assert_eq!(tcp_listener_uid(hub), Some(me()));
    }

    #[test]
    fn a_port_nobody_listens_on_has_no_owner() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let free = listener.local_addr().unwrap();
        drop(listener);
        assert_eq!(tcp_listener_uid(free), None);
        let nowhere = SocketAddr::new([127, 0, 0, 1].into(), free.port());
        assert_eq!(tcp_peer_uid("127.0.0.1:1".parse().unwrap(), nowhere), None);
    }

    fn reply(kind: u16, len: usize, state: u8) -> Vec<u8> {
        let mut reply = vec![0u8; len];
        reply[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        reply[4..6].copy_from_slice(&kind.to_ne_bytes());
        if len > STATE_OFFSET {
            reply[STATE_OFFSET] = state;
        }
        reply
    }

    #[test]
    fn a_short_or_error_reply_gives_no_user() {
        assert_eq!(owner_in_reply(&[]), None);
        assert_eq!(owner_in_reply(&reply(NLMSG_ERROR, 36, 0)), None);
        assert_eq!(owner_in_reply(&reply(SOCK_DIAG_BY_FAMILY, UID_OFFSET + 2, 1)), None);
    }

    #[test]
    fn a_socket_whose_user_the_kernel_does_not_keep_gives_none_not_root() {
        const TCP_ESTABLISHED: u8 = 1;
        let mut established = reply(SOCK_DIAG_BY_FAMILY, UID_OFFSET + 8, TCP_ESTABLISHED);
        established[UID_OFFSET..UID_OFFSET + 4].copy_from_slice(&65534u32.to_ne_bytes());
        assert_eq!(owner_in_reply(&established), Some(65534));
        for state in [TCP_TIME_WAIT, TCP_NEW_SYN_RECV] {
            assert_eq!(owner_in_reply(&reply(SOCK_DIAG_BY_FAMILY, UID_OFFSET + 8, state)), None, "state {state}");
        }
    }
}
