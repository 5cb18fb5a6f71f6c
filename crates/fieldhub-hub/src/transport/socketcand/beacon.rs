//! socketcand's discovery beacon (`doc/protocol.md`, "Service discovery"):
//! a UDP datagram `<CANBeacon …>` naming the hub, the server's URL and one
//! `<Bus name="…"/>` per channel, sent every [`EVERY`] to the broadcast
//! address `[hub] socketcand_beacon` names (the network it is meant for,
//! e.g. `192.168.1.255:42000`), the way python-can's `detect_beacon`,
//! SavvyCAN and Kayak look for servers.
//!
//! Invariants:
//! - Off unless configured; sent only to the configured address, from the
//!   socketcand listener's address, so no other network hears it.
//! - Names are XML-escaped; the channels are those configured when the hub
//!   started.
//! - Sending never blocks the accept thread that calls [`Beacon::tick`]; a
//!   failed send is logged once and tried again at the next tick.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use tracing::warn;

/// How often the beacon goes out (socketcand: at most every 3 s).
pub const EVERY: Duration = Duration::from_millis(2500);

/// The UDP port socketcand clients listen on when the address names none.
pub const DEFAULT_PORT: u16 = 42000;

/// Why the beacon cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum BeaconError {
    #[error(
        "[hub] socketcand_beacon = \"{0}\": not an IPv4 broadcast address with an optional port (the interface's \
         broadcast address, e.g. 192.168.1.255 or 192.168.1.255:42000; `ip -br addr` shows the network)"
    )]
    Address(String),
    #[error("[hub] socketcand_beacon = \"{addr}\": {source}")]
    Socket {
        addr: String,
        #[source]
        source: std::io::Error,
    },
}

/// The beacon of one socketcand listener.
pub struct Beacon {
    socket: UdpSocket,
    text: String,
    next: Instant,
    failed: bool,
}

impl Beacon {
    /// A beacon to `target` (`IP` or `IP:PORT`) for the server at `server`.
    pub fn new(target: &str, server: SocketAddr, hub_name: &str, channels: &[String]) -> Result<Self, BeaconError> {
        let to = parse_target(target).ok_or_else(|| BeaconError::Address(target.to_owned()))?;
        let socket_error = |source| BeaconError::Socket { addr: target.to_owned(), source };
        // From the listener's address: the beacon leaves on its interface.
        let socket = UdpSocket::bind(SocketAddr::new(server.ip(), 0)).map_err(socket_error)?;
        socket.set_broadcast(true).map_err(socket_error)?;
        socket.connect(to).map_err(socket_error)?;
        socket.set_nonblocking(true).map_err(socket_error)?;
        // A listener on every address advertises the one the beacon leaves from.
        let url_ip = match server.ip() {
            ip if ip.is_unspecified() => socket.local_addr().map_err(socket_error)?.ip(),
            ip => ip,
        };
        let text = beacon_text(hub_name, SocketAddr::new(url_ip, server.port()), channels);
        Ok(Self { socket, text, next: Instant::now(), failed: false })
    }

    /// Send the beacon if it is due; when the next one is due.
    pub fn tick(&mut self, now: Instant) -> Instant {
        if now >= self.next {
            match self.socket.send(self.text.as_bytes()) {
                Ok(_) => self.failed = false,
                Err(e) if !self.failed => {
                    self.failed = true;
                    warn!(error = %e, "cannot send the socketcand beacon; trying again every {} ms", EVERY.as_millis());
                }
                Err(_) => {}
            }
            self.next = now + EVERY;
        }
        self.next
    }
}

fn parse_target(target: &str) -> Option<SocketAddr> {
    if let Ok(addr) = target.parse::<SocketAddr>() {
        return addr.is_ipv4().then_some(addr);
    }
    let ip = target.parse::<Ipv4Addr>().ok()?;
    Some(SocketAddr::new(IpAddr::V4(ip), DEFAULT_PORT))
}

/// The datagram, as socketcand's `beacon.c` writes it.
pub fn beacon_text(hub_name: &str, server: SocketAddr, channels: &[String]) -> String {
    let mut text = format!(
        "<CANBeacon name=\"{}\" type=\"SocketCAN\" description=\"fieldhub hub\">\n<URL>can://{server}</URL>",
        escape(hub_name)
    );
    for channel in channels {
        text.push_str(&format!("<Bus name=\"{}\"/>", escape(channel)));
    }
    text.push_str("</CANBeacon>");
    text
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_beacon_names_the_hub_the_url_and_every_channel() {
        let server: SocketAddr = "10.0.0.2:29537".parse().unwrap();
        let text = beacon_text("lab \"A\"", server, &["can0".into(), "can1".into()]);
        assert_eq!(
            text,
            "<CANBeacon name=\"lab &quot;A&quot;\" type=\"SocketCAN\" description=\"fieldhub hub\">\n\
             <URL>can://10.0.0.2:29537</URL><Bus name=\"can0\"/><Bus name=\"can1\"/></CANBeacon>"
        );
    }

    #[test]
    fn targets_are_ipv4_addresses_with_socketcands_port_unless_given() {
        assert_eq!(parse_target("192.168.1.255"), Some("192.168.1.255:42000".parse().unwrap()));
        assert_eq!(parse_target("127.255.255.255:4000"), Some("127.255.255.255:4000".parse().unwrap()));
        assert_eq!(parse_target("eth0"), None);
        assert_eq!(parse_target("[::1]:42000"), None);
    }
}
