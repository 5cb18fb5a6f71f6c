//! Whose hub this is: a client checks which user serves a local hub
//! address before it sends anything there, so another user of the machine
//! who listens where the client looks (a free loopback port, the socket
//! path a README names) learns nothing — not the token, not the client's
//! name (`docs/security.md`, "Clients check whose hub they reach").
//!
//! - `unix:PATH`: the kernel tells the user of the process that listens
//!   (`SO_PEERCRED` of the connected socket).
//! - `tcp://` to a loopback address: the kernel's socket table tells the
//!   user owning the hub's end of the connection (`fieldhub_shm::peer`,
//!   `sock_diag`), else the listening socket's.
//!
//! A hub of the client's own user or of root is trusted; any other user's
//! only when [`HUB_USER_VAR`] names that user (or is `any`). A hub whose
//! user cannot be told is refused. `shm://` checks its socket in `shm.rs`
//! (its own user only: the hub maps the client's memory); `tls://` has the
//! hub's certificate checked instead, remote TCP, serial and ivshmem are
//! not local sockets (serial and ivshmem are files their owner opened).
//! Asked once per connection, before the handshake.

use std::net::IpAddr;
use std::os::unix::net::UnixStream;

use crate::stream::Stream;
use crate::ClientError;

/// Environment variable naming the user (name or uid) whose hub the client
/// may talk to besides its own user's and root's; `any` turns the check off.
pub const HUB_USER_VAR: &str = "FIELDHUB_HUB_USER";

/// Refuse `stream`, connected to `url`, when a user the client does not
/// trust serves it.
pub(crate) fn check(url: &str, stream: &Stream) -> Result<(), ClientError> {
    let (owner, what) = match stream {
        Stream::Unix(socket) => (unix_owner(socket), "the process listening on this socket".to_owned()),
        Stream::Tcp(tcp) => {
            let (Ok(local), Ok(hub)) = (tcp.local_addr(), tcp.peer_addr()) else {
                return Err(untrusted(url, "the connection's addresses cannot be read".into()));
            };
            if !is_loopback(hub.ip()) {
                return Ok(());
            }
            let owner =
                fieldhub_shm::peer::tcp_peer_uid(local, hub).or_else(|| fieldhub_shm::peer::tcp_listener_uid(hub));
            (owner, format!("the socket listening at {hub}"))
        }
        Stream::Tls(_) | Stream::Serial(_) => return Ok(()),
    };
    let trusted = std::env::var(HUB_USER_VAR).ok().filter(|v| !v.is_empty());
    decide(owner, rustix::process::geteuid().as_raw(), trusted.as_deref(), &what).map_err(|why| untrusted(url, why))
}

fn untrusted(url: &str, why: String) -> ClientError {
    ClientError::UntrustedHub { url: url.into(), why }
}

/// Whether a hub of user `owner` may hear from a client running as `me`;
/// `trusted`: [`HUB_USER_VAR`]'s value. The error says who listens and how
/// to talk to them anyway.
fn decide(owner: Option<u32>, me: u32, trusted: Option<&str>, what: &str) -> Result<(), String> {
    if trusted == Some("any") {
        return Ok(());
    }
    let Some(owner) = owner else {
        return Err(format!(
            "the kernel does not tell which user runs {what}, so it may be another user's impostor; nothing was \
             sent. Set {HUB_USER_VAR}=any to talk to it anyway"
        ));
    };
    if owner == me || owner == 0 {
        return Ok(());
    }
    let allowed = match trusted {
        Some(user) => {
            let uid = user.parse::<u32>().ok().or_else(|| uid_of(user));
            match uid {
                Some(uid) => uid == owner,
                None => return Err(format!("{HUB_USER_VAR}={user} names no user of this machine")),
            }
        }
        None => false,
    };
    if allowed {
        return Ok(());
    }
    let owner_name = user_label(owner);
    let also = trusted.map_or_else(String::new, |t| format!(" or {HUB_USER_VAR}'s {t}"));
    Err(format!(
        "{what} runs as {owner_name}, not as you ({}), root{also}: another user may be listening there to catch \
         your token, so nothing was sent. If that user's hub is the one you mean, set {HUB_USER_VAR}={}",
        user_label(me),
        user_name(owner).unwrap_or_else(|| owner.to_string()),
    ))
}

/// The user of the process listening at the other end of `socket`.
fn unix_owner(socket: &UnixStream) -> Option<u32> {
    rustix::net::sockopt::socket_peercred(socket).ok().map(|cred| cred.uid.as_raw())
}

/// Loopback, `::ffff:127.x.y.z` included.
fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// "user nobody (uid 65534)", or "uid 1234" for a user without a name.
fn user_label(uid: u32) -> String {
    user_name(uid).map_or_else(|| format!("uid {uid}"), |name| format!("user {name} (uid {uid})"))
}

/// The name `/etc/passwd` gives user `uid`.
fn user_name(uid: u32) -> Option<String> {
    passwd().find(|(_, id)| *id == uid).map(|(name, _)| name)
}

/// The uid `/etc/passwd` gives user `name`.
fn uid_of(name: &str) -> Option<u32> {
    passwd().find(|(n, _)| n == name).map(|(_, id)| id)
}

/// `/etc/passwd`'s (name, uid) pairs; none when it cannot be read. Only
/// for messages and for the override's name: the decision itself compares
/// the kernel's numbers.
fn passwd() -> impl Iterator<Item = (String, u32)> {
    let text = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let users: Vec<(String, u32)> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split(':');
            let name = fields.next()?;
            let uid = fields.nth(1)?.parse().ok()?;
            Some((name.to_owned(), uid))
        })
        .collect();
    users.into_iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: u32 = 1000;
    const OTHER: u32 = 65534;

    #[test]
    fn a_hub_of_this_user_or_of_root_is_trusted_and_another_users_is_not() {
        assert_eq!(decide(Some(ME), ME, None, "it"), Ok(()));
        assert_eq!(decide(Some(0), ME, None, "it"), Ok(()));
        assert_eq!(decide(Some(0), 0, None, "it"), Ok(()));
        let why = decide(Some(OTHER), ME, None, "the socket listening at 127.0.0.1:5").unwrap_err();
        assert!(why.starts_with("the socket listening at 127.0.0.1:5 runs as "), "{why}");
        assert!(why.contains(&format!("uid {OTHER}")) && why.contains("nothing was sent"), "{why}");
        assert!(why.contains(&format!("set {HUB_USER_VAR}=")), "{why}");
        let why = decide(Some(OTHER), 0, None, "it").unwrap_err();
        assert!(why.contains("not as you (user root (uid 0))"), "root's client refuses another user's hub: {why}");
    }

    #[test]
    fn the_override_trusts_the_user_it_names_only() {
        assert_eq!(decide(Some(OTHER), ME, Some(&OTHER.to_string()), "it"), Ok(()));
        assert_eq!(decide(Some(OTHER), ME, Some("any"), "it"), Ok(()));
        assert_eq!(decide(None, ME, Some("any"), "it"), Ok(()));
        let why = decide(Some(OTHER), ME, Some("4242"), "it").unwrap_err();
        assert!(why.contains("or FIELDHUB_HUB_USER's 4242"), "{why}");
        let why = decide(Some(OTHER), ME, Some("no-such-user-here"), "it").unwrap_err();
        assert!(why.contains("names no user of this machine"), "{why}");
        if let Some(root) = user_name(0) {
            assert_eq!(decide(Some(0), ME, Some(&root), "it"), Ok(()));
            assert_eq!(uid_of(&root), Some(0));
        }
    }

    #[test]
    fn a_hub_whose_user_cannot_be_told_is_refused() {
        let why = decide(None, ME, None, "the socket listening at [::1]:9").unwrap_err();
        assert!(why.contains("does not tell which user runs the socket listening at [::1]:9"), "{why}");
        assert!(why.contains(&format!("{HUB_USER_VAR}=any")), "{why}");
    }

    #[test]
    fn loopback_includes_mapped_ipv4_and_excludes_other_addresses() {
        for (ip, loopback) in
            [("127.0.0.1", true), ("127.9.9.9", true), ("::1", true), ("::ffff:127.0.0.1", true), ("10.0.0.1", false)]
        {
            assert_eq!(is_loopback(ip.parse().unwrap()), loopback, "{ip}");
        }
        assert!(!is_loopback("::ffff:10.0.0.1".parse().unwrap()));
    }

    #[test]
    fn this_users_own_listeners_pass_over_tcp_and_unix_sockets() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tcp = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        assert!(check("tcp://test", &Stream::Tcp(tcp)).is_ok());
        let dir = std::env::temp_dir().join(format!("fieldhub-hub-owner-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let unix = std::os::unix::net::UnixListener::bind(&dir).unwrap();
        let socket = UnixStream::connect(&dir).unwrap();
        let _ = std::fs::remove_file(&dir);
        drop(unix);
        assert!(check("unix:test", &Stream::Unix(socket)).is_ok());
    }
}
