//! The owner bridge's ports for relay ports: every relay port whose frames
//! the owner sequences gets a `TRANSMIT_ONLY` port of its own on the
//! owner's channel, so its frames wait in their own FIFO and contend by
//! identifier with every other port's — arbitration across hubs works as on
//! one hub. The bridge's main port listens (and publishes every frame);
//! these ports only send.
//!
//! A relay port's frames always go through the same port while any of them
//! waits: a route changes only when its port is idle, so a port's frames
//! keep their order. Past a client's port limit, a new relay port shares
//! the main port (one FIFO, in arrival order, as before per-port routing):
//! idle routes are closed first to make room.
//!
//! Which relay port sent a frame is known from the frame's sender (the
//! hub-wide port id in its metadata) and that port's queue of forwarded
//! requests (`Forwarded`), so the writer needs no echo from these ports;
//! which ones the bus dropped, from the port's `TX_DROPPED` reports: a port
//! drops the oldest frames it holds ([`dropped`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fieldhub_proto::limits::MAX_PORTS_PER_CLIENT;
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::Frame;
use tracing::warn;

use super::event::Origin;
use super::zenoh_threads::wait_off_runtime;
use crate::session::bridge_port::{LateAnswer, NotOpened, PortOpenings};
use fieldhub_bus::inbox::{ClientId, Inbound, InboxSender};

/// How long a relay port's route stays after its last frame left.
pub const ROUTE_IDLE: Duration = Duration::from_secs(10);

/// Requests forwarded into the bridge's ports and not seen on the bus yet,
/// by the port's hub-wide id.
pub type Forwarded = HashMap<u32, PortForwarded>;

/// One bridge port's forwarded requests.
#[derive(Default)]
pub struct PortForwarded {
    /// Not seen on the bus yet, oldest first.
    waiting: VecDeque<(Origin, Frame)>,
    /// Passed by a later frame of the port on the bus: off the bus, as the
    /// port's next `TX_DROPPED` report will say, oldest first.
    passed: VecDeque<Origin>,
}

impl PortForwarded {
    /// Queue a request forwarded into the port.
    pub fn push(&mut self, origin: Origin, frame: Frame) {
        self.waiting.push_back((origin, frame));
    }

    /// Whether a request of relay port (`relay`, `port_id`) is still here.
    fn holds(&self, relay: &str, port_id: u32) -> bool {
        let of = |o: &Origin| o.relay == relay && o.port_id == port_id;
        self.waiting.iter().any(|(o, _)| of(o)) || self.passed.iter().any(of)
    }
}

/// The origin of a frame the bus carried from bridge port `sender`: the
/// oldest request forwarded there with this frame. Older requests with
/// other frames never reached the bus before it (a fault rule dropped them,
/// the controller was bus-off): kept for the port's `TX_DROPPED` report.
pub fn origin_of(forwarded: &mut Forwarded, sender: u32, frame: &Frame) -> Option<Origin> {
    let port = forwarded.get_mut(&sender)?;
    let at = port.waiting.iter().position(|(_, sent)| sent == frame)?;
    let passed: Vec<Origin> = port.waiting.drain(..at).map(|(origin, _)| origin).collect();
    port.passed.extend(passed);
    port.waiting.pop_front().map(|(origin, _)| origin)
}

/// The origins of the `count` frames bridge port `port_id` reported dropped
/// (`TX_DROPPED`): those passed by later frames first, then the oldest still
/// waiting — a port's transmit FIFO drops from its front. Fewer when the
/// port holds fewer.
pub fn dropped(forwarded: &mut Forwarded, port_id: u32, count: u32) -> Vec<Origin> {
    let Some(port) = forwarded.get_mut(&port_id) else { return Vec::new() };
    let mut origins = Vec::new();
    while origins.len() < count as usize {
        match port.passed.pop_front().or_else(|| port.waiting.pop_front().map(|(origin, _)| origin)) {
            Some(origin) => origins.push(origin),
            None => break,
        }
    }
    origins
}

/// The relay ports' requests an owner bridge already took: per relay
/// (Zenoh session id) and its port id, one more than the arrival number of
/// the newest (0: none). A relay port's frames come in arrival order, and a
/// relay sends its waiting frames again to an owner that comes back: what
/// comes again is no newer than what came before. By relay first, so a
/// known port is looked up without an allocation.
#[derive(Default)]
pub struct SeenRequests(HashMap<String, HashMap<u32, u64>>);

impl SeenRequests {
    /// Whether `origin`'s frame comes for the first time; it is seen from now on.
    pub fn first_time(&mut self, origin: &Origin) -> bool {
        let ports = match self.0.get_mut(origin.relay.as_str()) {
            Some(ports) => ports,
            None => self.0.entry(origin.relay.clone()).or_default(),
        };
        let past_newest = ports.entry(origin.port_id).or_insert(0);
        let next = origin.arrival.saturating_add(1);
        let first = next > *past_newest;
        *past_newest = next.max(*past_newest);
        first
    }
}

impl From<super::relay::Committed> for SeenRequests {
    /// The frames an older term committed, as seen.
    fn from(committed: super::relay::Committed) -> Self {
        let mut seen = Self::default();
        for ((relay, port_id), arrival) in committed {
            seen.0.entry(relay).or_default().insert(port_id, arrival.saturating_add(1));
        }
        seen
    }
}

/// The bus's answers to the bridge's `OPEN_PORT`s, by request id, which
/// the writer thread (the outbox's reader) fills in.
pub type Opening = PortOpenings;

/// The table of the bridge's `OPEN_PORT`s: request 1 opened the main port,
/// relay ports' ports are 2 and up; an answer that comes after the bridge
/// stopped waiting is no request's.
pub fn opening() -> Opening {
    PortOpenings::new(2, LateAnswer::Unknown)
}

/// Where one relay port's frames go.
struct Route {
    port: u16,
    port_id: u32,
    /// A port of its own (closed when idle), or the shared main port.
    own: bool,
    last: Instant,
}

/// The bridge thread's routes from relay ports to its ports.
pub struct OriginPorts {
    main: (u16, u32),
    channel: String,
    options: PortOptions,
    /// By relay (its Zenoh session id), then by the relay's port id.
    routes: HashMap<String, HashMap<u32, Route>>,
}

impl OriginPorts {
    /// Routes for the bridge whose main port is `main` (handle, hub-wide
    /// id) on `channel`; `fd` when the channel carries CAN FD.
    pub fn new(main: (u16, u32), channel: String, fd: bool) -> Self {
        let mut options = PortOptions::TRANSMIT_ONLY | PortOptions::BLOCK_ON_OVERFLOW;
        if fd {
            options |= PortOptions::FD;
        }
        Self { main, channel, options, routes: HashMap::new() }
    }

    /// The port (handle, hub-wide id) `origin`'s frame goes through,
    /// opening one for bridge client `client` through `inbox` when the relay
    /// port has none; `None` when the bridge is stopping.
    pub fn route(
        &mut self,
        origin: &Origin,
        slot: (ClientId, &InboxSender),
        opening: &Opening,
        forwarded: &Mutex<Forwarded>,
        stop: &dyn Fn() -> bool,
    ) -> Option<(u16, u32)> {
        let now = Instant::now();
        // Looked up by reference: a known relay port costs no allocation.
        if let Some(route) = self.routes.get_mut(origin.relay.as_str()).and_then(|r| r.get_mut(&origin.port_id)) {
            route.last = now;
            return Some((route.port, route.port_id));
        }
        let key = (origin.relay.clone(), origin.port_id);
        // The main port is one of the client's ports.
        if self.own_ports() + 1 >= MAX_PORTS_PER_CLIENT {
            self.close_idle(slot, forwarded, now);
        }
        let (port, port_id, own) = if self.own_ports() + 1 < MAX_PORTS_PER_CLIENT {
            match self.open(&key, slot, opening, stop)? {
                Ok((port, port_id)) => (port, port_id, true),
                Err(text) => {
                    warn!(channel = %self.channel, relay = %key.0, port = key.1,
                        "a relay port shares the owner's main port (one FIFO): {text}");
                    (self.main.0, self.main.1, false)
                }
            }
        } else {
            (self.main.0, self.main.1, false)
        };
        self.routes.entry(key.0).or_default().insert(key.1, Route { port, port_id, own, last: now });
        Some((port, port_id))
    }

    fn own_ports(&self) -> usize {
        self.routes.values().flat_map(HashMap::values).filter(|r| r.own).count()
    }

    /// Open a port for relay port `key`: its handle and id, or the bus's
    /// refusal; `None` when the bridge is stopping.
    fn open(
        &self,
        key: &(String, u32),
        (client, inbox): (ClientId, &InboxSender),
        opening: &Opening,
        stop: &dyn Fn() -> bool,
    ) -> Option<Result<(u16, u32), String>> {
        let open = |request| Inbound::OpenPort {
            client,
            request,
            options: self.options,
            channel: self.channel.clone(),
            // Unique on the hub: the relay's session id, its port's id.
            port_name: format!("federation-{}-{}-{}", self.channel, short(&key.0), key.1),
        };
        // The writer answers it, between its publications: a wait that lasts.
        match wait_off_runtime(|| opening.open(inbox, (), open, stop)) {
            Ok(opened) => Some(Ok((opened.port, opened.port_id))),
            Err(NotOpened::Refused(text)) => Some(Err(text)),
            Err(NotOpened::Stopped) => None,
        }
    }

    /// Close the routes whose relay port sent nothing for [`ROUTE_IDLE`]
    /// and has nothing waiting: their own ports are closed, a shared one's
    /// route forgotten.
    fn close_idle(&mut self, (client, inbox): (ClientId, &InboxSender), forwarded: &Mutex<Forwarded>, now: Instant) {
        let forwarded = forwarded.lock().unwrap_or_else(|e| e.into_inner());
        let waiting =
            |key: &(String, u32), port_id: u32| forwarded.get(&port_id).is_some_and(|p| p.holds(&key.0, key.1));
        let idle: Vec<(String, u32)> = self
            .routes
            .iter()
            .flat_map(|(relay, ports)| ports.iter().map(move |(port, route)| ((relay.clone(), *port), route)))
            .filter(|(key, r)| now.duration_since(r.last) >= ROUTE_IDLE && !waiting(key, r.port_id))
            .map(|(key, _)| key)
            .collect();
        drop(forwarded);
        for key in idle {
            let removed = self.routes.get_mut(&key.0).and_then(|ports| ports.remove(&key.1));
            if self.routes.get(&key.0).is_some_and(HashMap::is_empty) {
                self.routes.remove(&key.0);
            }
            if let Some(route) = removed {
                if route.own {
                    let _ = inbox.send(Inbound::ClosePort { client, port: route.port });
                }
            }
        }
    }
}

/// A Zenoh session id, shortened for a port name (its first 8 characters
/// tell relays apart in logs and stats).
fn short(relay: &str) -> &str {
    relay.get(..8).unwrap_or(relay)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(requests: &[(Origin, Frame)]) -> PortForwarded {
        let mut port = PortForwarded::default();
        requests.iter().for_each(|(o, f)| port.push(o.clone(), f.clone()));
        port
    }

    #[test]
    fn a_frame_belongs_to_the_oldest_request_with_it_at_its_port() {
        let frame = |id| Frame::can(id, false, &[1]).unwrap();
        let origin = |arrival| Origin { relay: "r".into(), port_id: 1, arrival };
        let mut forwarded = Forwarded::new();
        forwarded.insert(7, port(&[(origin(1), frame(1)), (origin(2), frame(2)), (origin(3), frame(2))]));
        forwarded.insert(8, port(&[(origin(4), frame(2))]));
        // Frame 1 never reached the bus: the frame 2 port 7 sent skips it.
        assert_eq!(origin_of(&mut forwarded, 7, &frame(2)), Some(origin(2)));
        assert_eq!(origin_of(&mut forwarded, 8, &frame(2)), Some(origin(4)), "each port its own queue");
        assert_eq!(origin_of(&mut forwarded, 7, &frame(2)), Some(origin(3)));
        assert!(forwarded[&7].waiting.is_empty());
        assert_eq!(origin_of(&mut forwarded, 7, &frame(5)), None);
        assert_eq!(origin_of(&mut forwarded, 9, &frame(2)), None, "a local port's frame");
        // Frame 1's drop is reported after frame 2 passed it.
        assert_eq!(dropped(&mut forwarded, 7, 1), [origin(1)]);
        assert_eq!(dropped(&mut forwarded, 7, 1), []);
    }

    #[test]
    fn a_drop_report_names_the_oldest_frames_of_its_port() {
        let frame = |id| Frame::can(id, false, &[1]).unwrap();
        let origin = |arrival| Origin { relay: "r".into(), port_id: 1, arrival };
        let mut forwarded = Forwarded::new();
        forwarded.insert(7, port(&[(origin(1), frame(1)), (origin(2), frame(2)), (origin(3), frame(3))]));
        assert_eq!(dropped(&mut forwarded, 7, 2), [origin(1), origin(2)], "a bus-off port's flushed queue");
        assert_eq!(origin_of(&mut forwarded, 7, &frame(3)), Some(origin(3)));
        assert_eq!(dropped(&mut forwarded, 7, 5), [], "nothing left to drop");
        assert_eq!(dropped(&mut forwarded, 9, 1), [], "a port that forwarded nothing");
        assert!(forwarded[&7].waiting.is_empty() && !forwarded[&7].holds("r", 1));
    }

    #[test]
    fn a_request_that_comes_again_is_seen_and_a_newer_one_is_not() {
        let origin = |relay: &str, port_id, arrival| Origin { relay: relay.into(), port_id, arrival };
        let mut seen = SeenRequests::from(super::super::relay::Committed::from([(("r".into(), 1), 5)]));
        assert!(!seen.first_time(&origin("r", 1, 5)), "committed under the older term");
        assert!(seen.first_time(&origin("r", 1, 6)));
        assert!(!seen.first_time(&origin("r", 1, 6)), "sent again");
        assert!(seen.first_time(&origin("r", 2, 0)), "another port, its first frame");
        assert!(!seen.first_time(&origin("r", 2, 0)));
        assert!(seen.first_time(&origin("s", 1, 0)), "another relay");
    }

    #[test]
    fn port_names_keep_the_start_of_the_relay_id() {
        assert_eq!(short("0123456789abcdef"), "01234567");
        assert_eq!(short("abc"), "abc");
    }
}
