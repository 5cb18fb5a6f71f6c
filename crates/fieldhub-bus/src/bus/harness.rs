//! The bus in-process, on a manual clock: clients are plain outboxes, time
//! moves only when a test says so, and nothing sleeps. Arbitration, exact
//! timing, fault windows and error confinement are proven here
//! deterministically; the hub's system tests prove the same paths through
//! real processes and sockets.

use std::sync::Arc;

use serde::Deserialize;

use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::{Frame, FrameMeta};

use super::Bus;
use crate::access::Access;
use crate::clock::ManualClock;
use crate::clock::WallClock;
use crate::config::{BusConfig, ChannelConfig, PortConfig, RouteConfig, StallPolicy, TimeConfig};
use crate::credit::{TxCredit, Waiter};
use crate::inbox::{ClientId, Inbound};
use crate::outbox::{test_outbox, Outbound, QueueOutbox};
use crate::request::{ControlRequest, ControlResult};

/// Bus time the harness starts at (any fixed value works; this one reads
/// as a date in 2023 in logs).
pub const START_NS: u64 = 1_700_000_000_000_000_000;

/// One client of the harness.
pub struct TestClient {
    pub id: ClientId,
    outbox: Arc<QueueOutbox>,
    /// Its transmit credit, as the bus sees it.
    pub credit: Arc<TxCredit>,
}

impl TestClient {
    /// The client's session ends: its outbox refuses from now on.
    pub fn vanish(&self) {
        self.outbox.close();
    }
}

/// A bus and its manual clocks.
pub struct Harness {
    pub bus: Bus,
    pub clock: Arc<ManualClock>,
    /// The wall clock of virtual time's step timeouts.
    pub wall: Arc<crate::testing::ManualWall>,
    /// What the bus's recordings wrote.
    pub recorder: crate::testing::MemoryRecorder,
    next_client: ClientId,
}

/// The bus's tables of a hub configuration, as tests write it: `[hub]`
/// keys the bus does not read are ignored.
#[derive(Deserialize)]
struct HarnessConfig {
    #[serde(default)]
    hub: HarnessHub,
    #[serde(default)]
    channel: Vec<ChannelConfig>,
    #[serde(default)]
    port: Vec<PortConfig>,
    #[serde(default)]
    route: Vec<RouteConfig>,
    #[serde(default)]
    gateway: Vec<crate::lin_gateway::GatewayConfig>,
}

#[derive(Default, Deserialize)]
struct HarnessHub {
    name: Option<String>,
    #[serde(default)]
    time_participants: Vec<String>,
    step_timeout_ms: Option<u64>,
    on_stall: Option<StallPolicy>,
}

/// `text`'s bus tables.
fn parse(text: &str) -> BusConfig {
    let file: HarnessConfig = toml::from_str(text).expect("valid test configuration");
    let defaults = TimeConfig::default();
    BusConfig {
        name: file.hub.name.unwrap_or_else(|| "fieldhub".into()),
        channels: file.channel,
        ports: file.port,
        routes: file.route,
        gateways: file.gateway,
        time: TimeConfig {
            participants: file.hub.time_participants,
            step_timeout_ms: file.hub.step_timeout_ms.unwrap_or(defaults.step_timeout_ms),
            on_stall: file.hub.on_stall.unwrap_or(defaults.on_stall),
        },
    }
}

/// A manual clock that moves 1 ns each time it is read.
struct Ticking(Arc<ManualClock>);

impl crate::clock::Clock for Ticking {
    fn now(&self) -> u64 {
        let now = crate::clock::Clock::now(&*self.0);
        self.0.advance(1);
        now
    }
}

impl Harness {
    /// A bus for a configuration given as TOML.
    pub fn new(config: &str) -> Self {
        let clock = Arc::new(ManualClock::at(START_NS));
        Self::with_bus(|config| Bus::new(config, clock.clone()), config, clock.clone())
    }

    /// A bus whose clock moves 1 ns at every read, as a real clock moves
    /// between two reads; `clock` still sets it.
    pub fn with_ticking_clock(config: &str) -> Self {
        let clock = Arc::new(ManualClock::at(START_NS));
        let ticking = Arc::new(Ticking(clock.clone()));
        Self::with_bus(|config| Bus::new(config, ticking), config, clock)
    }

    fn with_bus(make: impl FnOnce(&BusConfig) -> Bus, config: &str, clock: Arc<ManualClock>) -> Self {
        let recorder = crate::testing::MemoryRecorder::default();
        let bus = make(&parse(config)).with_recorder(Box::new(recorder.clone()));
        Self { bus, clock, wall: Arc::default(), recorder, next_client: 1 }
    }

    /// A bus in virtual time (`[hub] time = "virtual"` in `config`): bus
    /// time starts at 0 and moves only as its participants step.
    pub fn in_virtual_time(config: &str) -> Self {
        let clock = Arc::new(ManualClock::at(0));
        let wall = Arc::new(crate::testing::ManualWall::default());
        let bus_wall: Arc<dyn WallClock> = wall.clone();
        let mut harness =
            Self::with_bus(|config| Bus::in_virtual_time(config, clock.clone(), bus_wall), config, clock.clone());
        harness.wall = wall;
        harness
    }

    /// Attach a client.
    pub fn connect(&mut self, name: &str) -> TestClient {
        self.attach(name, false, false, Access::Full)
    }

    /// Attach a client whose token gave `access`.
    pub fn connect_with(&mut self, name: &str, access: Access) -> TestClient {
        self.attach(name, false, false, access)
    }

    /// Attach a synchronised participant of virtual time.
    pub fn connect_synchronized(&mut self, name: &str) -> TestClient {
        self.attach(name, true, false, Access::Full)
    }

    /// Attach a synchronised participant that may step ahead (`AHEAD`).
    pub fn connect_ahead(&mut self, name: &str) -> TestClient {
        self.attach(name, true, true, Access::Full)
    }

    fn attach(&mut self, name: &str, synchronized: bool, ahead: bool, access: Access) -> TestClient {
        let id = self.next_client;
        self.next_client += 1;
        let (outbox, queue) = test_outbox();
        let credit = Arc::new(TxCredit::new(Waiter::Bus));
        self.bus.handle(Inbound::Attach {
            client: id,
            name: name.into(),
            outbox,
            hang_up: Box::new(|| {}),
            credit: credit.clone(),
            intake: None,
            synchronized,
            ahead,
            access,
        });
        TestClient { id, outbox: queue, credit }
    }

    /// Open a port named `name` on `channel`; returns its handle.
    pub fn open(&mut self, client: &TestClient, channel: &str, name: &str, options: PortOptions) -> u16 {
        let request = Inbound::OpenPort {
            client: client.id,
            request: 1,
            options,
            channel: channel.into(),
            port_name: name.into(),
        };
        self.bus.handle(request);
        // A participant's first GRANT may wait in front of the answer.
        match client.outbox.take() {
            Some(Outbound::Grant { .. }) => match client.outbox.take() {
                Some(Outbound::PortOpened { port, .. }) => port,
                other => panic!("OPEN_PORT answered {other:?}"),
            },
            Some(Outbound::PortOpened { port, .. }) => port,
            other => panic!("OPEN_PORT answered {other:?}"),
        }
    }

    /// A frame from `client`'s port, as its transport would forward it.
    pub fn send(&mut self, client: &TestClient, port: u16, frame: Frame) {
        self.bus.handle(Inbound::Frame { client: client.id, port, frame });
    }

    /// A frame from `client`'s port as a transport forwards it: only with a
    /// transmit credit. Returns false, sending nothing, when none is left
    /// (the transport would wait, and the client's send with it).
    pub fn send_with_credit(&mut self, client: &TestClient, port: u16, frame: Frame) -> bool {
        if !client.credit.try_acquire() {
            return false;
        }
        self.send(client, port, frame);
        true
    }

    /// Serve the channels at the current time; returns the next deadline.
    pub fn step(&mut self) -> Option<u64> {
        self.bus.step()
    }

    /// Move time forward by `ns`, then serve the channels.
    pub fn advance(&mut self, ns: u64) -> Option<u64> {
        self.clock.advance(ns);
        self.step()
    }

    /// `STEP`: `client` is done up to `until_ns`.
    pub fn announce(&mut self, client: &TestClient, until_ns: u64) {
        self.bus.handle(Inbound::Step { client: client.id, until_ns });
    }

    /// A frame from `client`'s port stamped for bus time `at_ns`, as the
    /// transport of an `AHEAD` participant forwards it.
    pub fn send_at(&mut self, client: &TestClient, port: u16, frame: Frame, at_ns: u64) {
        self.bus.handle(Inbound::FrameAt { client: client.id, port, frame, at_ns });
    }

    /// `STEP_AHEAD`: `client` is done up to `until_ns` in steps of
    /// `period_ns`, unless a frame matching `filters` wakes it.
    pub fn announce_ahead(
        &mut self,
        client: &TestClient,
        until_ns: u64,
        period_ns: u64,
        filters: &[fieldhub_proto::wire::WakeFilter],
    ) {
        let filters = filters.to_vec();
        self.bus.handle(Inbound::StepAhead { client: client.id, until_ns, period_ns, filters });
    }

    /// What the bus thread does after a round of input in virtual time:
    /// advance if every participant is done. Returns whether time moved.
    pub fn advance_virtual_time(&mut self) -> bool {
        self.bus.advance_virtual_time()
    }

    pub fn control(&mut self, request: ControlRequest) -> ControlResult {
        self.bus.apply(request)
    }

    /// Everything queued for `client` so far: frames, replies, errors.
    pub fn items(&self, client: &TestClient) -> Vec<Outbound> {
        client.outbox.drain()
    }

    /// The non-fatal errors the hub sent `client` so far (its other
    /// messages are taken too).
    pub fn errors(&self, client: &TestClient) -> Vec<(ErrorCode, String)> {
        let items = client.outbox.drain().into_iter();
        items
            .filter_map(|item| match item {
                Outbound::Error { code, fatal: false, text, .. } => Some((code, text)),
                _ => None,
            })
            .collect()
    }

    /// Every frame delivered to `client` so far, with its metadata.
    pub fn frames(&self, client: &TestClient) -> Vec<(Frame, FrameMeta)> {
        client
            .outbox
            .drain()
            .into_iter()
            .filter_map(|item| match item {
                Outbound::Frame { frame, meta, .. } => Some((frame, meta)),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use fieldhub_proto::bits::FrameBits;

    use super::*;
    use crate::channel::HOLD_RECHECK_MAX_NS;
    use crate::fault::FaultSpec;

    const TWO_CHANNELS: &str = r#"
        [[channel]]
        name = "can0"
        [[channel]]
        name = "slow"
        timing = "timed"
        bitrate = 500000
    "#;

    fn can(id: u32, data: &[u8]) -> Frame {
        Frame::can(id, false, data).unwrap()
    }

    #[test]
    fn frames_pending_together_go_out_lowest_identifier_first() {
        let mut h = Harness::new(TWO_CHANNELS);
        let (a, b, c, rx) = (h.connect("a"), h.connect("b"), h.connect("c"), h.connect("rx"));
        let pa = h.open(&a, "can0", "a", PortOptions::empty());
        let pb = h.open(&b, "can0", "b", PortOptions::empty());
        let pc = h.open(&c, "can0", "c", PortOptions::empty());
        h.open(&rx, "can0", "rx", PortOptions::empty());
        h.send(&a, pa, can(0x300, &[]));
        h.send(&b, pb, can(0x100, &[]));
        h.send(&c, pc, Frame::can(0x080 << 18, true, &[]).unwrap());
        h.send(&c, pc, can(0x200, &[]));
        h.step();
        let got = h.frames(&rx);
        let ids: Vec<u32> = got.iter().map(|(f, _)| f.id()).collect();
        // c's extended frame has base bits 0x080, lower than every other:
        // it wins, then c's FIFO offers 0x200, which loses to b's 0x100.
        assert_eq!(ids, [0x080 << 18, 0x100, 0x200, 0x300]);
        assert_eq!(got.iter().map(|(_, m)| m.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
    }

    #[test]
    fn a_timed_channel_carries_each_frame_for_exactly_its_bit_time() {
        let mut h = Harness::new(TWO_CHANNELS);
        let (tx, rx) = (h.connect("tx"), h.connect("rx"));
        let port = h.open(&tx, "slow", "tx", PortOptions::empty());
        h.open(&rx, "slow", "rx", PortOptions::empty());
        let (first, second) = (can(0x123, &[1, 2, 3, 4, 5, 6, 7, 8]), can(0x124, &[0x55; 3]));
        let first_ns = FrameBits::of(&first).duration_ns(500_000, 500_000);
        let second_ns = FrameBits::of(&second).duration_ns(500_000, 500_000);
        h.send(&tx, port, first);
        h.send(&tx, port, second);
        let end_of_first = h.step().expect("the channel asks to be served at the end of the frame");
        assert_eq!(end_of_first, START_NS + first_ns);
        h.advance(first_ns - 1);
        assert!(h.frames(&rx).is_empty(), "nothing arrives before the end of frame");
        h.advance(1);
        h.advance(second_ns);
        let got = h.frames(&rx);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].1.timestamp_ns, START_NS + first_ns);
        assert_eq!(got[1].1.timestamp_ns - got[0].1.timestamp_ns, second_ns, "back to back, to the nanosecond");
    }

    #[test]
    fn a_fault_rule_acts_only_inside_its_time_window() {
        let mut h = Harness::new(TWO_CHANNELS);
        let (tx, rx) = (h.connect("tx"), h.connect("rx"));
        let port = h.open(&tx, "can0", "tx", PortOptions::empty());
        h.open(&rx, "can0", "rx", PortOptions::empty());
        let spec: FaultSpec = serde_json::from_value(serde_json::json!({
            "channel": "can0", "at": "bus", "action": {"type": "drop"}, "after_ms": 10.0, "for_ms": 5.0
        }))
        .unwrap();
        h.control(ControlRequest::AddFault(spec)).unwrap();
        let mut delivered = Vec::new();
        // One frame per millisecond for 20 ms; byte 0 says which millisecond.
        for ms in 0..20u8 {
            h.send(&tx, port, can(0x10, &[ms]));
            h.step();
            delivered.extend(h.frames(&rx).iter().map(|(f, _)| f.data()[0]));
            h.clock.advance(1_000_000);
        }
        let expected: Vec<u8> = (0..20).filter(|ms| !(10..15).contains(ms)).collect();
        assert_eq!(delivered, expected);
    }

    #[test]
    fn a_full_lossless_port_holds_only_its_own_channel_until_it_has_room_or_goes() {
        use crate::outbox::OUTBOX_FRAMES;
        let mut h = Harness::new("[[channel]]\nname = \"can0\"\n[[channel]]\nname = \"can1\"\n");
        let (tx, slow, other_tx, other_rx) = (h.connect("tx"), h.connect("slow"), h.connect("tx1"), h.connect("rx1"));
        let port = h.open(&tx, "can0", "tx", PortOptions::empty());
        h.open(&slow, "can0", "slow", PortOptions::BLOCK_ON_OVERFLOW);
        let other = h.open(&other_tx, "can1", "tx1", PortOptions::empty());
        h.open(&other_rx, "can1", "rx1", PortOptions::empty());
        let total = OUTBOX_FRAMES as u32 + 10;
        for n in 0..total {
            h.send(&tx, port, can(0x100, &n.to_le_bytes()));
        }
        h.step();
        assert!(h.bus.channels[0].held_by.is_some(), "can0 is held for the full lossless port");
        // The other channel goes on meanwhile.
        h.send(&other_tx, other, can(0x7, &[1]));
        h.step();
        assert_eq!(h.frames(&other_rx).len(), 1);
        // The slow reader takes its frames: the held ones follow in order.
        let first = h.frames(&slow);
        assert_eq!(first.len(), OUTBOX_FRAMES);
        h.advance(HOLD_RECHECK_MAX_NS);
        let rest = h.frames(&slow);
        let seqs: Vec<u64> = first.iter().chain(&rest).map(|(_, m)| m.seq).collect();
        assert_eq!(seqs, (1..=u64::from(total)).collect::<Vec<_>>(), "nothing lost, nothing reordered");
        assert!(h.bus.channels[0].held_by.is_none());

        // Held again; this time the reader goes away: the channel resumes.
        for n in 0..total {
            h.send(&tx, port, can(0x100, &n.to_le_bytes()));
        }
        h.step();
        assert!(h.bus.channels[0].held_by.is_some());
        slow.vanish();
        h.advance(HOLD_RECHECK_MAX_NS);
        assert!(h.bus.channels[0].held_by.is_none(), "a gone reader holds nothing");
        assert_eq!(h.bus.channels[0].frames, 2 * u64::from(total));
    }

    #[test]
    fn repeated_transmit_errors_make_a_port_error_passive_then_bus_off() {
        let mut h = Harness::new(TWO_CHANNELS);
        let (tx, rx) = (h.connect("tx"), h.connect("rx"));
        let port = h.open(&tx, "slow", "tx", PortOptions::empty());
        h.open(&rx, "slow", "rx", PortOptions::empty());
        let spec: FaultSpec = serde_json::from_value(serde_json::json!({
            "channel": "slow", "at": "bus", "action": {"type": "corrupt"}
        }))
        .unwrap();
        h.control(ControlRequest::AddFault(spec)).unwrap();
        h.send(&tx, port, can(0x42, &[0xAA]));
        let state = |h: &mut Harness| {
            let stats = h.bus.stats();
            let p = stats.ports.iter().find(|p| p.name == "tx").unwrap().clone();
            (p.tec, p.error_state)
        };
        let mut seen = vec![state(&mut h)];
        // Each attempt is destroyed; the controller retransmits after the
        // frame and the error frame. Serve every deadline until bus-off.
        while let Some(next) = h.step() {
            if seen.last().is_some_and(|(_, s)| s == "bus_off") {
                break;
            }
            h.clock.set(next);
            let now = state(&mut h);
            if seen.last() != Some(&now) {
                seen.push(now);
            }
        }
        let states: Vec<&str> = seen.iter().map(|(_, s)| s.as_str()).collect();
        let first = |s: &str| seen.iter().find(|(_, state)| state == s).map(|(tec, _)| *tec);
        assert_eq!(first("passive"), Some(128), "{states:?}");
        assert_eq!(first("bus_off"), Some(256), "{states:?}");
        assert!(h.frames(&rx).iter().all(|(f, _)| f.is_error()), "only error frames reached the receiver");
    }

    #[test]
    fn recordings_beyond_the_limit_are_refused_until_one_stops() {
        use crate::recording::MAX_RECORDINGS;
        use crate::request::RecordingSpec;
        let start = |h: &mut Harness, n: usize| {
            let spec: RecordingSpec = serde_json::from_value(serde_json::json!({"path": format!("r{n}.log")})).unwrap();
            h.control(ControlRequest::StartRecording { spec, file: format!("recordings/r{n}.log").into() })
        };
        let mut h = Harness::new(TWO_CHANNELS);
        let ids: Vec<u64> = (0..MAX_RECORDINGS).map(|n| start(&mut h, n).unwrap()["id"].as_u64().unwrap()).collect();
        let refused = start(&mut h, MAX_RECORDINGS).unwrap_err();
        assert!(refused.to_string().contains(&format!("at most {MAX_RECORDINGS} recordings")), "{refused}");
        h.control(ControlRequest::StopRecording { id: ids[0] as u32 }).unwrap();
        start(&mut h, MAX_RECORDINGS).unwrap();
        for id in &ids[1..] {
            h.control(ControlRequest::StopRecording { id: *id as u32 }).unwrap();
        }
        assert_eq!(h.recorder.recordings.lock().unwrap().len(), MAX_RECORDINGS + 1, "each start reached the recorder");
    }

    #[test]
    fn a_stopped_recording_stays_listed_with_how_it_ended_and_its_file_can_be_recorded_again() {
        use crate::request::RecordingSpec;
        let start = |h: &mut Harness| {
            let spec: RecordingSpec = serde_json::from_value(serde_json::json!({"path": "again.log"})).unwrap();
            h.control(ControlRequest::StartRecording { spec, file: "recordings/again.log".into() }).unwrap()
        };
        let mut h = Harness::new(TWO_CHANNELS);
        let first = start(&mut h);
        assert_eq!(first["state"], "recording");
        let stopped = h.control(ControlRequest::StopRecording { id: first["id"].as_u64().unwrap() as u32 }).unwrap();
        assert_eq!((stopped["state"].as_str(), stopped["frames"].as_u64()), (Some("stopped"), Some(0)), "{stopped}");
        let listed = h.control(ControlRequest::Recordings).unwrap();
        assert_eq!(listed[0]["state"], "stopped", "{listed}");
        let second = start(&mut h);
        let listed = h.control(ControlRequest::Recordings).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 1, "the new recording of the file supersedes the finished one");
        assert_eq!(listed[0]["id"], second["id"]);
    }

    #[test]
    fn client_port_ids_stop_below_the_ids_of_the_hubs_own_ports() {
        use crate::port_id::{PortId, PortKind};

        let mut h = Harness::new(TWO_CHANNELS);
        let c = h.connect("c");
        // The last client id lies right below the remote sender's block.
        h.bus.next_port_id = u32::from(PortId::REMOTE) - 1;
        h.open(&c, "can0", "last", PortOptions::empty());
        let ports = h.control(ControlRequest::Ports).unwrap();
        let last = PortId::from_wire(ports[0]["port_id"].as_u64().unwrap() as u32).unwrap();
        assert_eq!(last.kind(), PortKind::Client);
        let port_name = "one-too-many".into();
        let options = PortOptions::empty();
        h.bus.handle(Inbound::OpenPort { client: c.id, request: 2, options, channel: "can0".into(), port_name });
        let refused = h.items(&c);
        assert!(matches!(refused[..], [Outbound::Error { code: ErrorCode::TooManyPorts, .. }]), "{refused:?}");
    }
}
