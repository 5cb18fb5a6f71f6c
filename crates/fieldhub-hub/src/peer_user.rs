//! Which user of this machine is at the other end of a connection: how a
//! hub admits its own user's processes without a token and refuses other
//! local users (`docs/security.md`, "Local users").
//!
//! - A unix socket (the session socket, shared memory's handshake) tells
//!   its peer's credentials itself (`SO_PEERCRED`).
//! - A TCP connection from this machine is found in the kernel's socket
//!   table (`/proc/net/tcp`, `/proc/net/tcp6` of the hub's network
//!   namespace): the peer's socket is the entry whose local address is the
//!   connection's peer address and whose remote address is the hub's end;
//!   its `uid` column is the user who created it. A connection from another
//!   machine has no such entry, so it has no local user.
//!
//! Looked up once per connection that presents no token, never on the data
//! path. The table is the kernel's, not a client's: it is parsed strictly
//! and any line that does not parse is skipped, never trusted.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

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
}

impl PeerOrigin {
    /// The peer of a unix socket, as the kernel reports it.
    pub fn unix(socket: impl AsFd) -> Self {
        let uid = rustix::net::sockopt::socket_peercred(socket).ok().map(|cred| cred.uid.as_raw());
        Self::Unix { uid }
    }

    /// Whether the peer is a process of the user the hub runs as.
    pub fn is_hub_user(&self) -> bool {
        *self == Self::Operator || self.uid() == Some(rustix::process::geteuid().as_raw())
    }

    /// Who the peer is, for an error message.
    pub fn describe(&self) -> String {
        match (self, self.uid()) {
            (Self::Operator, _) => "a transport the operator configured".into(),
            (_, Some(uid)) => format!("a process of user id {uid}"),
            (Self::Tcp { peer, .. }, None) => format!("{peer}, which no socket of this machine is (another machine)"),
            (Self::Unix { .. }, None) => "a process whose user the kernel did not tell".into(),
        }
    }

    fn uid(&self) -> Option<u32> {
        match *self {
            Self::Operator => None,
            Self::Unix { uid } => uid,
            Self::Tcp { local, peer } => tcp_peer_uid(local, peer),
        }
    }
}

/// The user id owning the socket at `peer` that is connected to `local`
/// on this machine, `None` when there is none (another machine) or the
/// socket table cannot be read.
pub fn tcp_peer_uid(local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let text = read_table(matches!(peer, SocketAddr::V6(_)))?;
    find_owner(&text, local, peer)
}

/// Open the socket tables now, while descriptors are free: a hub out of
/// descriptors must still tell who a waiting connection is.
pub fn open_tables() {
    let _ = (table(false), table(true));
}

/// `/proc/net/tcp` or `/proc/net/tcp6`, opened once and kept open.
fn table(v6: bool) -> Option<&'static std::fs::File> {
    static TABLES: [OnceLock<Option<std::fs::File>>; 2] = [OnceLock::new(), OnceLock::new()];
    let path = if v6 { "/proc/net/tcp6" } else { "/proc/net/tcp" };
    TABLES[usize::from(v6)].get_or_init(|| std::fs::File::open(path).ok()).as_ref()
}

/// The table's text now. A read at offset 0 makes the kernel list the
/// sockets afresh; one read large enough for the whole table (a hub serves
/// at most a few thousand connections, 150 bytes each) takes it in one piece, so the
/// sockets coming and going meanwhile cannot hide the one looked for.
fn read_table(v6: bool) -> Option<String> {
    const ONE_READ: usize = 1 << 20;
    let file = table(v6)?;
    let mut text = vec![0u8; ONE_READ];
    let mut len = 0;
    loop {
        if len == text.len() {
            text.resize(len * 2, 0);
        }
        match file.read_at(&mut text[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    text.truncate(len);
    String::from_utf8(text).ok()
}

/// In a `/proc/net/tcp{,6}` table, the uid of the socket whose own address
/// is `peer` and whose remote address is `local`.
fn find_owner(table: &str, local: SocketAddr, peer: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let mut fields = line.split_whitespace();
        let own = parse_endpoint(fields.nth(1)?)?;
        let remote = parse_endpoint(fields.next()?)?;
        // state, tx:rx queues, timer, retransmits, then the uid.
        let uid = fields.nth(4)?.parse().ok()?;
        (same(own, peer) && same(remote, local)).then_some(uid)
    })
}

/// Equal endpoints, an IPv4 address and its IPv4-mapped IPv6 form alike
/// (a dual-stack listener sees IPv4 peers as `::ffff:a.b.c.d`).
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    let canonical = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canonical(a.ip()) == canonical(b.ip())
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address
/// as the kernel prints it, 32-bit words in the machine's byte order.
fn parse_endpoint(text: &str) -> Option<SocketAddr> {
    let (address, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match address.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(address)?)),
        32 => {
            let mut octets = [0u8; 16];
            for (i, chunk) in octets.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&word(address.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two lines of a little-endian machine's /proc/net/tcp: the hub's
    // listener on 127.0.0.1:29536 (uid 0) and a client 127.0.0.1:40000 ->
    // 29536 of uid 1000, plus the hub's accepted end of it.
    const TCP: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:7360 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:9C40 0100007F:7360 01 00000000:00000000 00:00000000 00000000  1000        0 2 1 0 20 4 30 10 -1
   2: 0100007F:7360 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0 20 4 30 10 -1
   3: garbage
";

    #[test]
    #[cfg(target_endian = "little")]
    fn a_loopback_peer_is_found_by_its_own_end_not_the_hubs() {
        let hub: SocketAddr = "127.0.0.1:29536".parse().unwrap();
        let client: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        assert_eq!(find_owner(TCP, hub, client), Some(1000));
        let stranger: SocketAddr = "10.0.0.7:40000".parse().unwrap();
        assert_eq!(find_owner(TCP, hub, stranger), None, "a peer of another machine has no entry");
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn ipv6_and_ipv4_mapped_addresses_parse() {
        let loopback6 = parse_endpoint("00000000000000000000000001000000:7360").unwrap();
        assert_eq!(loopback6, "[::1]:29536".parse().unwrap());
        let mapped = parse_endpoint("0000000000000000FFFF00000100007F:9C40").unwrap();
        assert!(same(mapped, "127.0.0.1:40000".parse().unwrap()));
        assert_eq!(parse_endpoint("0100007F"), None);
        assert_eq!(parse_endpoint("0100007G:0001"), None);
        assert_eq!(parse_endpoint("01000:0001"), None);
    }

    #[test]
    fn a_real_loopback_connection_belongs_to_this_process_user() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        let origin = PeerOrigin::Tcp { local: accepted.local_addr().unwrap(), peer };
        assert!(origin.is_hub_user());
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(PeerOrigin::unix(&a).is_hub_user());
        drop(b);
    }
}
