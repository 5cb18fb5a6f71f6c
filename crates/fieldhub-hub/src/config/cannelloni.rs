//! `[[cannelloni]]`: a cannelloni endpoint on a channel (`transport::cannelloni`,
//! `docs/cannelloni.md`), over UDP (cannelloni's packet format 2) or TCP
//! (its stream mode).
//!
//! The access rule: cannelloni has no authentication, so who may put frames
//! on the channel is decided by address. A UDP endpoint takes packets only
//! from its `peers` unless `learn_peers` lets any sender in; a TCP endpoint
//! takes anyone who connects. Either open door (TCP, or UDP with
//! `learn_peers`) on an address other hosts can reach needs
//! `allow_unauthenticated = true`, and the hub warns at start.

use std::net::SocketAddr;

use serde::Deserialize;

/// The most peers one UDP endpoint learns (`learn_peers`): each is a client
/// of the hub, so senders nobody configured cannot use up the hub's clients.
pub const MAX_LEARNED_PEERS: usize = 16;

/// How a cannelloni endpoint listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CannelloniListen {
    /// `udp/ADDR`: packets of cannelloni's format 2.
    Udp(SocketAddr),
    /// `tcp/ADDR`: cannelloni's stream mode (`CANNELLONIv1`, then frames).
    Tcp(SocketAddr),
}

impl CannelloniListen {
    /// Parse `udp/HOST:PORT` or `tcp/HOST:PORT`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (make, addr): (fn(SocketAddr) -> Self, &str) = if let Some(addr) = text.strip_prefix("udp/") {
            (Self::Udp, addr)
        } else if let Some(addr) = text.strip_prefix("tcp/") {
            (Self::Tcp, addr)
        } else {
            return Err(format!("'{text}' must be udp/HOST:PORT or tcp/HOST:PORT, as in \"udp/127.0.0.1:20000\""));
        };
        addr.parse::<SocketAddr>()
            .map(make)
            .map_err(|e| format!("'{addr}' in '{text}' is not an IP address and a port ({e})"))
    }

    /// The address the socket binds.
    pub fn addr(&self) -> SocketAddr {
        match *self {
            Self::Udp(a) | Self::Tcp(a) => a,
        }
    }
}

impl std::fmt::Display for CannelloniListen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Udp(a) => write!(f, "udp/{a}"),
            Self::Tcp(a) => write!(f, "tcp/{a}"),
        }
    }
}

/// `[[cannelloni]]`: one endpoint on one channel.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CannelloniConfig {
    /// The channel every peer of the endpoint is a port of.
    pub channel: String,
    /// `udp/HOST:PORT` or `tcp/HOST:PORT`.
    pub listen: String,
    /// UDP: the peers (`HOST:PORT`) the endpoint sends to and takes packets from.
    #[serde(default)]
    pub peers: Vec<String>,
    /// UDP: take a sender that is not in `peers` as a new peer (at most
    /// [`MAX_LEARNED_PEERS`]).
    #[serde(default)]
    pub learn_peers: bool,
    /// Let an open door (TCP, or UDP with `learn_peers`) listen on an
    /// address other hosts reach, although cannelloni has no authentication.
    #[serde(default)]
    pub allow_unauthenticated: bool,
}

impl CannelloniConfig {
    /// The parsed `listen`; [`check_values`](Self::check_values) made sure it parses.
    pub fn listen_addr(&self) -> Result<CannelloniListen, String> {
        CannelloniListen::parse(&self.listen)
    }

    /// The parsed `peers`.
    pub fn peer_addrs(&self) -> Result<Vec<SocketAddr>, String> {
        self.peers
            .iter()
            .map(|p| p.parse().map_err(|e| format!("peer '{p}' is not HOST:PORT, an IP address and a port ({e})")))
            .collect()
    }

    /// Whether anyone who reaches the address may send frames.
    pub fn open_to_anyone(&self) -> bool {
        match self.listen_addr() {
            Ok(CannelloniListen::Tcp(_)) => true,
            Ok(CannelloniListen::Udp(_)) => self.learn_peers,
            Err(_) => false,
        }
    }

    /// Check everything but the channel reference; the error names the
    /// offending key.
    pub fn check_values(&self) -> Result<(), (&'static str, String)> {
        let listen = self.listen_addr().map_err(|m| ("listen", m))?;
        let peers = self.peer_addrs().map_err(|m| ("peers", m))?;
        match listen {
            CannelloniListen::Tcp(_) if !peers.is_empty() || self.learn_peers => {
                let text = "a TCP endpoint serves whoever connects; peers and learn_peers are for udp/ endpoints";
                return Err(("peers", text.into()));
            }
            CannelloniListen::Udp(_) if peers.is_empty() && !self.learn_peers => {
                let text = "a UDP endpoint needs peers = [\"HOST:PORT\", …] or learn_peers = true, or nobody can send";
                return Err(("peers", text.into()));
            }
            _ => {}
        }
        if let Some((i, p)) = peers.iter().enumerate().find(|(i, p)| peers[..*i].contains(p)) {
            return Err(("peers", format!("peer {p} is listed twice (peers[{i}])")));
        }
        if self.open_to_anyone() && !listen.addr().ip().is_loopback() && !self.allow_unauthenticated {
            let text = format!(
                "{listen} lets anyone who reaches it put frames on '{}' (cannelloni has no authentication): \
                 listen on 127.0.0.1, list the UDP peers without learn_peers, or set allow_unauthenticated = true",
                self.channel
            );
            return Err(("listen", text));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(listen: &str, peers: &[&str], learn_peers: bool) -> CannelloniConfig {
        CannelloniConfig {
            channel: "can0".into(),
            listen: listen.into(),
            peers: peers.iter().map(|p| p.to_string()).collect(),
            learn_peers,
            allow_unauthenticated: false,
        }
    }

    #[test]
    fn listen_takes_udp_or_tcp_and_an_address() {
        assert_eq!(
            CannelloniListen::parse("udp/127.0.0.1:20000"),
            Ok(CannelloniListen::Udp("127.0.0.1:20000".parse().unwrap()))
        );
        assert_eq!(CannelloniListen::parse("tcp/[::1]:0"), Ok(CannelloniListen::Tcp("[::1]:0".parse().unwrap())));
        assert!(CannelloniListen::parse("127.0.0.1:20000").unwrap_err().contains("udp/HOST:PORT"));
        assert!(CannelloniListen::parse("udp/localhost:1").unwrap_err().contains("not an IP address"));
    }

    #[test]
    fn a_udp_endpoint_nobody_may_send_to_is_refused() {
        let (key, text) = endpoint("udp/127.0.0.1:0", &[], false).check_values().unwrap_err();
        assert_eq!(key, "peers");
        assert!(text.contains("learn_peers"), "{text}");
        assert!(endpoint("udp/127.0.0.1:0", &["127.0.0.1:20000"], false).check_values().is_ok());
        assert!(endpoint("udp/127.0.0.1:0", &[], true).check_values().is_ok());
    }

    #[test]
    fn an_open_door_on_a_reachable_address_needs_allow_unauthenticated() {
        for open in [endpoint("tcp/0.0.0.0:20000", &[], false), endpoint("udp/0.0.0.0:20000", &[], true)] {
            let (key, text) = open.check_values().unwrap_err();
            assert_eq!(key, "listen");
            assert!(text.contains("allow_unauthenticated"), "{text}");
            assert!(CannelloniConfig { allow_unauthenticated: true, ..open }.check_values().is_ok());
        }
        // Listed peers only: the rule is the list.
        assert!(endpoint("udp/0.0.0.0:20000", &["10.0.0.5:20000"], false).check_values().is_ok());
    }

    #[test]
    fn peers_are_addresses_listed_once_and_only_for_udp() {
        assert_eq!(endpoint("udp/127.0.0.1:0", &["host:1"], false).check_values().unwrap_err().0, "peers");
        let twice = endpoint("udp/127.0.0.1:0", &["127.0.0.1:5", "127.0.0.1:5"], false);
        assert!(twice.check_values().unwrap_err().1.contains("twice"));
        assert_eq!(endpoint("tcp/127.0.0.1:0", &["127.0.0.1:5"], false).check_values().unwrap_err().0, "peers");
    }
}
