//! The bus thread: one sequencer for a group of channels.
//!
//! The thread waits on the hub's doorbell (its single wake-up point, rung by
//! stream sessions when they queue a request and by shared-memory clients
//! when they publish into their ring) until input arrives or the earliest
//! channel deadline passes, handles every request that is waiting and every
//! message in the shared-memory rings, then serves the channels ([`Bus::step`]):
//! arbitration, transmission, gateway routes, and answers that had to wait
//! for frames to leave (a `PONG` is sent only once every frame the client sent
//! before its `PING` is on the bus). It owns all bus state — nothing here is
//! shared with another thread, so the data path takes no lock. Control
//! requests (port opening, names) may allocate; frames do not.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crossbeam_channel::TryRecvError;
use fieldhub_proto::fate::DropReason;
use fieldhub_proto::limits::{MAX_PORTS_PER_CLIENT, MAX_STATS_LEN};
use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::Frame;
use tracing::{debug, info, warn};

use crate::access::{Access, PortRight};
use crate::auth_refusals::AuthRefusals;
use crate::channel::{Channel, Transmitted};
use crate::clock::{Clock, ManualClock, WallClock};
use crate::config::{BusConfig, PortConfig, RouteConfig, Timing};
use crate::confinement::ErrorState;
use crate::credit::TxCredit;
use crate::cyclic::{CyclicJobs, FrameProducer};
use crate::inbox::{ClientId, FrameRun, HangUp, Inbound, Inbox, IntakeEnd};
use crate::member::{Member, GATEWAY_QUEUE};
use crate::monitor::MonitorTap;
use crate::names::check_name;
use crate::outbox::{Outbound, Outbox, Refused};
use crate::port_id::PortId;
use crate::recording::{Recorder, Recording};
use crate::tx_queue::{Pending, RateLimit, TxQueue};
use intakes::{Intakes, Taken};

#[cfg(test)]
mod access_tests;
mod ahead;
#[cfg(test)]
mod canxl_tests;
mod control;
mod cyclic_jobs;
#[cfg(test)]
mod cyclic_jobs_tests;
#[cfg(test)]
mod fate_tests;
mod federated;
pub(crate) mod harness;
mod intakes;
mod lin_gateways;
#[cfg(test)]
mod lin_gateways_tests;
#[cfg(test)]
mod lin_sleep_tests;
mod lin_standing;
#[cfg(test)]
mod lin_standing_tests;
mod monitor;
#[cfg(test)]
mod port_modes_tests;
#[cfg(test)]
mod route_ids_tests;
mod stall_reports;
mod stats_document;
mod stepping;
mod time_control;
mod time_observers;
pub mod virtual_time;
#[cfg(test)]
mod virtual_time_tests;
use fieldhub_proto::stats::{ChannelStats, HubStats, PortStats, RouteStats};
use virtual_time::VirtualTime;

/// What a round of input found ([`Bus::take_input`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Input {
    /// Requests or ring messages were handled: serve the channels.
    Worked,
    /// Nothing came.
    Idle,
    /// `Shutdown`, or every sender is gone: every client was told; stop.
    Stopped,
}

/// Requests handled per wake-up before the channels are served, so a flood
/// of input cannot postpone arbitration and deadlines indefinitely.
const DRAIN_BATCH: usize = 4096;
/// How long a hub shutting down waits, in all, for recordings' writers to
/// finish their files.
const SHUTDOWN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Hashes the hub's own client ids, which no client chooses: a multiply,
/// where the default hasher (resistant to chosen keys) would cost a SipHash
/// per frame.
#[derive(Default)]
struct ClientIdHasher(u64);

impl Hasher for ClientIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A port as its owning client sees it.
#[derive(Clone, Copy)]
struct OwnedPort {
    channel: u16,
    port_id: PortId,
    /// Its slot among the channel's members: one lookup per frame.
    member: usize,
}

struct Client {
    name: String,
    outbox: Outbox,
    hang_up: HangUp,
    credit: Arc<TxCredit>,
    /// What its token lets it do; its ports' rights are taken from it
    /// when they open.
    access: Access,
    ports: [Option<OwnedPort>; MAX_PORTS_PER_CLIENT],
    /// `PONG`s waiting for the client's earlier frames to leave: (nonce,
    /// arrival number of the last frame received before the `PING`).
    pongs: Vec<(u64, u64)>,
}

/// A gateway route between two channels.
struct Route {
    /// Stable id for the control API.
    id: u32,
    from: u16,
    to: u16,
    config: RouteConfig,
    port_id: PortId,
    /// Frames copied to `to`.
    routed: u64,
}

impl Route {
    fn matches(&self, sent: &Transmitted) -> bool {
        let c = &self.config;
        sent.channel == self.from
            && sent.hops < c.hop_limit
            && !sent.frame.is_error()
            && c.extended.is_none_or(|ext| ext == sent.frame.is_extended())
            && sent.frame.id() & c.mask == c.id & c.mask
    }
}

/// All state of one bus thread.
pub struct Bus {
    clock: Arc<dyn Clock>,
    channels: Vec<Channel>,
    channel_ids: HashMap<String, u16>,
    routes: Vec<Route>,
    /// CAN↔LIN gateways (`[[gateway]]`).
    gateways: lin_gateways::LinGateways,
    named_ports: HashMap<String, PortConfig>,
    clients: HashMap<ClientId, Client, BuildHasherDefault<ClientIdHasher>>,
    port_names: HashMap<PortId, String>,
    taken_names: HashSet<String>,
    /// The next client port's number ([`PortId::client`]).
    next_port_id: u32,
    /// Arrival order of frames, across all clients.
    next_arrival: u64,
    /// Channels with frames that arrived since they were last served.
    dirty: Vec<bool>,
    /// Bus time at which each channel asked to be served again.
    deadlines: Vec<Option<u64>>,
    /// Frames transmitted during the current step, for routing (reused).
    sent: Vec<Transmitted>,
    hub_name: String,
    next_route_id: u32,
    next_fault_id: u32,
    recordings: Vec<Recording>,
    next_recording_id: u32,
    /// Web monitors' taps, offered every transmitted frame like recordings.
    monitors: Vec<MonitorTap>,
    /// Names of ports that left, for the monitors' traces.
    departed: crate::departed::DepartedPorts,
    /// Clients whose rings this thread reads.
    intakes: Intakes,
    /// Starts recordings' writers; `None`: recordings are refused.
    recorder: Option<Box<dyn Recorder>>,
    /// Bus time when the current round began: the arrival time of every
    /// frame taken in it, so a round of frames costs one clock read, not
    /// one each. `None` outside [`Bus::take_input`]'s rounds.
    round_ns: Option<u64>,
    /// Virtual time's participants, staged frames and limits; `None` in
    /// real time, where the data path costs one branch more and nothing else.
    virtual_time: Option<VirtualTime>,
    /// Per channel: where a relayed channel's frames go to its owner hub
    /// (`bus/federated.rs`); `None` for a channel this hub sequences.
    relays: Vec<Option<crossbeam_channel::Sender<crate::federation::Uplinked>>>,
    /// Per channel: its federation figures, for `STATS`, when it is federated.
    federation: Vec<Option<Arc<crate::federation::ChannelStatus>>>,
    /// Clients the hub refused for their credentials, for `STATS`.
    auth_refused: Arc<AuthRefusals>,
    /// Cyclic jobs of the clients' ports, by the bus time they are due
    /// (`bus/cyclic_jobs.rs`).
    cyclic: CyclicJobs<(ClientId, u16), Box<dyn FrameProducer>>,
    /// The frames of the cyclic jobs due in one step (reused).
    cyclic_due: Vec<((ClientId, u16), Frame)>,
    /// How late the runtime served the deadlines [`Bus::serve`] set, in real time.
    lateness: crate::deadline_lateness::DeadlineLateness,
}

impl Bus {
    /// A bus for `config`'s channels, reading time from `clock`.
    pub fn new(config: &BusConfig, clock: Arc<dyn Clock>) -> Self {
        let mut channels: Vec<Channel> =
            config.channels.iter().enumerate().map(|(i, c)| Channel::new(i as u16, c.clone())).collect();
        let channel_ids: HashMap<String, u16> = channels.iter().map(|c| (c.name().to_owned(), c.id)).collect();
        let routes: Vec<Route> = config
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| Route {
                id: i as u32,
                from: channel_ids[&r.from],
                to: channel_ids[&r.to],
                config: r.clone(),
                // Route `i` sends from gateway slot `i`; a slot is a `u16`, and
                // no configuration comes near 65,536 routes.
                // The configuration holds at most MAX_ROUTES (`HubConfig::validate`).
                port_id: PortId::gateway(u16::try_from(i).expect("at most MAX_ROUTES routes")),
                routed: 0,
            })
            .collect();
        for route in &routes {
            channels[route.to as usize].members.push(Member::gateway(route.port_id));
        }
        let gateways = lin_gateways::LinGateways::new(&config.gateways, |n| channel_ids.get(n).copied(), &mut channels);
        let count = channels.len();
        Self {
            clock,
            channels,
            channel_ids,
            routes,
            gateways,
            named_ports: config.ports.iter().map(|p| (p.name.clone(), p.clone())).collect(),
            clients: HashMap::default(),
            port_names: HashMap::new(),
            taken_names: HashSet::new(),
            next_port_id: 1,
            next_arrival: 0,
            dirty: vec![false; count],
            deadlines: vec![None; count],
            sent: Vec::with_capacity(1024),
            hub_name: config.name.clone(),
            next_route_id: config.routes.len() as u32,
            next_fault_id: 1,
            recordings: Vec::new(),
            next_recording_id: 1,
            monitors: Vec::new(),
            departed: Default::default(),
            intakes: Intakes::default(),
            recorder: None,
            round_ns: None,
            virtual_time: None,
            relays: vec![None; count],
            federation: vec![None; count],
            auth_refused: Arc::default(),
            cyclic: CyclicJobs::new(),
            cyclic_due: Vec::new(),
            lateness: Default::default(),
        }
    }

    /// A bus in virtual time: `clock` moves only when the bus moves it,
    /// once every synchronised participant has finished its step.
    pub fn in_virtual_time(config: &BusConfig, clock: Arc<ManualClock>, wall: Arc<dyn WallClock>) -> Self {
        let mut bus = Self::new(config, clock.clone());
        bus.virtual_time = Some(VirtualTime::new(&config.time, clock, wall));
        bus
    }

    /// Take one round of input: the waiting requests (up to a batch, so a
    /// flood cannot postpone arbitration and deadlines indefinitely), then
    /// what waits in the clients' rings; then, in virtual time, advance if
    /// every participant is done. The runtime's loop calls it, then
    /// [`Bus::serve`] when it did work or a deadline is due, else waits for
    /// input (`Inbox::has_waiting`, [`Bus::ring_ready`]) until the earliest
    /// deadline.
    pub fn take_input(&mut self, inbox: &Inbox) -> Input {
        let mut worked = false;
        self.round_ns = Some(self.clock.now());
        for _ in 0..DRAIN_BATCH {
            match inbox.try_recv() {
                Ok(Inbound::Shutdown) => {
                    self.say_goodbye();
                    return Input::Stopped;
                }
                // A ring client's messages still in its ring go first;
                // `read_intakes` detaches it once the ring is empty.
                Ok(Inbound::Detach { client, reason }) if self.intakes.leave(client, &reason) => {}
                Ok(Inbound::Frames { client, mut frames }) => {
                    self.on_frames(client, &mut frames);
                    inbox.recycle(frames);
                }
                Ok(request) => self.handle(request),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => return Input::Stopped,
            }
            worked = true;
        }
        worked |= self.read_intakes();
        self.round_ns = None;
        worked |= self.advance_virtual_time();
        match worked {
            true => Input::Worked,
            false => Input::Idle,
        }
    }

    /// Serve the channels ([`Bus::step`]) and wake the consumers of the
    /// outboxes that got items. Returns the bus time to serve again at the
    /// latest.
    pub fn serve(&mut self) -> Option<u64> {
        let deadline = self.step();
        self.flush_outboxes();
        deadline
    }

    /// The runtime served the deadline `due_ns` (what [`Bus::serve`]
    /// returned) at bus time `served_ns`, having slept toward it and woken at
    /// `woke_ns`, or being awake (`None`): `STATS`' `timer`. Real time only;
    /// virtual time's deadlines are never late.
    pub fn note_deadline_served(&mut self, due_ns: u64, served_ns: u64, woke_ns: Option<u64>) {
        if !self.in_virtual_time_mode() {
            self.lateness.served(due_ns, served_ns, woke_ns);
        }
    }

    /// Bus time now, as the bus reads it.
    pub fn now(&self) -> u64 {
        self.clock.now()
    }

    /// Whether bus time is virtual: it moves with the participants' steps,
    /// and the only wall-clock deadline is [`Bus::stall_deadline`].
    pub fn in_virtual_time_mode(&self) -> bool {
        self.virtual_time.is_some()
    }

    /// Whether a client's ring holds a message the bus can take now.
    pub fn ring_ready(&self) -> bool {
        self.intakes.any_ready()
    }

    /// Whether clients ring the bus from shared memory, where one could
    /// clear the wake-up word: then the runtime must not wait unboundedly.
    pub fn reads_rings(&self) -> bool {
        self.intakes.count() > 0
    }

    /// Record with `recorder` (`POST /api/v1/recordings`); without one, the
    /// bus refuses to start recordings.
    pub fn with_recorder(mut self, recorder: Box<dyn Recorder>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Report `refusals`, which the hub's transports count, in `STATS`.
    pub fn with_auth_refusals(mut self, refusals: Arc<AuthRefusals>) -> Self {
        self.auth_refused = refusals;
        self
    }

    /// Wake the consumers of every outbox that got items this round.
    fn flush_outboxes(&self) {
        for client in self.clients.values() {
            client.outbox.flush();
        }
    }

    /// Take what waits in the clients' rings and handle it, as a stream
    /// session's forwarded requests are handled. Returns whether anything
    /// was done.
    fn read_intakes(&mut self) -> bool {
        let mut worked = false;
        let mut index = 0;
        while index < self.intakes.count() {
            let (taken, took) = self.intakes.read(index);
            worked |= took;
            let mut requests = std::mem::take(&mut self.intakes.requests);
            for request in requests.drain(..) {
                self.handle(request);
            }
            self.intakes.requests = requests;
            let before = self.intakes.count();
            match taken {
                Taken::Requests => {}
                Taken::Ended(client, reason) => self.handle(Inbound::Detach { client, reason }),
                Taken::Broke(client, IntakeEnd::Violation(code, text)) => self.reject_client(client, code, text),
                Taken::Broke(client, IntakeEnd::Left(reason)) => self.handle(Inbound::Detach { client, reason }),
            }
            // A client removed while handling its requests left the table:
            // the next one moved into this index.
            if self.intakes.count() == before {
                index += 1;
            }
        }
        worked
    }

    /// Serve every channel that has work or a due deadline, route what was
    /// sent, answer waiting pings. Returns when to run again at the latest.
    pub fn step(&mut self) -> Option<u64> {
        let now_ns = self.clock.now();
        self.run_cyclic(now_ns);
        // Routing marks destination channels dirty; hop limits make it end.
        loop {
            for index in 0..self.channels.len() {
                let due = self.deadlines[index].is_some_and(|at| at <= now_ns);
                // A relayed channel's frames are sequenced by its owner hub.
                if (self.dirty[index] || due) && !self.channels[index].removed && self.relays[index].is_none() {
                    self.dirty[index] = false;
                    self.channels[index].tapped = self.taps(index);
                    self.deadlines[index] = self.channels[index].service(now_ns, &mut self.sent);
                }
            }
            if !self.route_sent() {
                break;
            }
        }
        self.answer_pongs();
        let channels = self.deadlines.iter().flatten().min().copied();
        [channels, self.cyclic.next_due()].into_iter().flatten().min()
    }

    /// Whether anything takes channel `index`'s transmitted frames from
    /// `sent` in `route_sent`.
    fn taps(&self, index: usize) -> bool {
        !self.recordings.is_empty()
            || !self.monitors.is_empty()
            || self.routes.iter().any(|r| usize::from(r.from) == index)
            || self.gateways.use_channel(index)
    }

    /// Copy transmitted frames along matching routes. Returns whether any
    /// channel got new work.
    fn route_sent(&mut self) -> bool {
        let mut routed = false;
        for sent in self.sent.drain(..) {
            for recording in &mut self.recordings {
                recording.offer(sent.timestamp_ns, sent.channel, &sent.frame);
            }
            for monitor in &self.monitors {
                monitor.offer(&sent);
            }
            for route in self.routes.iter_mut().filter(|r| r.matches(&sent)) {
                let destination = &mut self.channels[route.to as usize];
                let Some(gateway) = destination.members.iter_mut().find(|m| m.port_id == route.port_id) else {
                    continue;
                };
                let mut frame = sent.frame.clone();
                if let Some(id) = route.config.rewrite_id {
                    if let Ok(rewritten) = frame.clone().with_id(id) {
                        frame = rewritten;
                    }
                }
                // Routes carry what the destination carries (FD not onto
                // classic CAN, XL onto CAN XL only, raw between raw
                // channels); LIN frames travel through [[gateway]]s.
                let fits = !frame.is_lin() && destination.config.protocol.carries(frame.kind());
                if !fits || gateway.tx.len() >= GATEWAY_QUEUE {
                    gateway.counters.tx_dropped += 1;
                    continue;
                }
                let arrived_ns = sent.timestamp_ns;
                gateway.tx.push(Pending { frame, arrival: self.next_arrival, hops: sent.hops + 1, arrived_ns });
                self.next_arrival += 1;
                route.routed += 1;
                self.dirty[route.to as usize] = true;
                routed = true;
            }
            routed |= self.gateways.carry(&sent, &mut self.channels, &mut self.next_arrival, &mut self.dirty);
        }
        // A page closed while the bus was quiet: its tap goes with the next frames.
        if !self.monitors.is_empty() {
            self.close_monitors();
        }
        routed
    }

    fn handle(&mut self, request: Inbound) {
        match request {
            Inbound::Frame { client, port, frame } => self.on_frame(client, port, frame),
            Inbound::Frames { client, mut frames } => self.on_frames(client, &mut frames),
            Inbound::Attach { client, name, outbox, hang_up, credit, intake, synchronized, ahead, access } => {
                if let Some(intake) = intake {
                    self.intakes.add(client, intake);
                }
                let ports = [None; MAX_PORTS_PER_CLIENT];
                let pongs = Vec::new();
                self.clients.insert(client, Client { name, outbox, hang_up, credit, access, ports, pongs });
                if synchronized {
                    self.join_time(client, ahead);
                }
            }
            Inbound::Step { client, until_ns } => self.on_step(client, until_ns),
            Inbound::StepAhead { client, until_ns, period_ns, filters } => {
                self.on_step_ahead(client, until_ns, period_ns, filters)
            }
            Inbound::FrameAt { client, port, frame, at_ns } => self.on_frame_at(client, port, frame, at_ns),
            Inbound::OpenPort { client, request, options, channel, port_name } => {
                self.on_open_port(client, request, options, &channel, &port_name)
            }
            Inbound::ClosePort { client, port } => {
                // Frames the port sent before closing go out first (those a
                // busy timed channel cannot take yet leave with the port, as
                // do those of a virtual-time step that has not ended).
                self.step();
                self.discard_staged(client, Some(port));
                self.on_close_port(client, port)
            }
            Inbound::Ping { client, nonce } => self.on_ping(client, nonce),
            Inbound::Control { request, reply } => {
                reply(self.apply(*request));
            }
            Inbound::Stats { client, request } => {
                let json = stats_document::within(self.stats(), MAX_STATS_LEN);
                self.reply(client, Outbound::Stats { request, json });
            }
            Inbound::Detach { client, reason } => {
                self.step();
                if let Some(c) = self.remove_client(client) {
                    debug!(client, name = %c.name, "client detached: {reason}");
                }
            }
            Inbound::Committed { channel, origin, frame } => self.on_committed(channel, origin, frame),
            Inbound::CommitDropped { channel, origin, reason } => self.on_commit_dropped(channel, origin, reason),
            Inbound::FederationState { channel, condition, missed, text } => {
                self.on_federation_state(channel, condition, missed, &text)
            }
            Inbound::FederationRole { channel, uplink } => self.on_federation_role(channel, uplink),
            Inbound::FederationResend { channel, round } => self.on_federation_resend(channel, round),
            Inbound::Cyclic { client, request } => self.on_cyclic(client, request),
            Inbound::Shutdown => {}
        }
    }

    fn on_frames(&mut self, client: ClientId, frames: &mut FrameRun) {
        for (port, frame, at_ns) in frames.drain(..) {
            match at_ns {
                0 => self.on_frame(client, port, frame),
                at_ns => self.on_frame_at(client, port, frame, at_ns),
            }
        }
    }

    fn on_frame(&mut self, client_id: ClientId, port: u16, frame: Frame) {
        if self.virtual_time.is_some() {
            return self.stage_frame(client_id, port, frame);
        }
        self.queue_frame(client_id, port, frame)
    }

    /// Put a frame into its port's transmit FIFO (or refuse it).
    fn queue_frame(&mut self, client_id: ClientId, port: u16, frame: Frame) {
        let arrived_ns = self.round_ns.unwrap_or_else(|| self.clock.now());
        let Some(client) = self.clients.get(&client_id) else {
            // Frames still queued from a client the bus already removed.
            return;
        };
        let Some(owned) = client.ports.get(port as usize).copied().flatten() else {
            client.credit.release();
            let text = format!("frame for port {port}, which this client has not opened");
            self.reject_client(client_id, ErrorCode::PortNotOpen, text);
            return;
        };
        if self.refuses_as_it_comes(client_id, owned, &frame) {
            return;
        }
        let Some(client) = self.clients.get(&client_id) else { return };
        let channel = &mut self.channels[owned.channel as usize];
        let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) else {
            return client.credit.release();
        };
        // Like a node whose cable is pulled, or a controller that is
        // bus-off: the frame goes nowhere, and its sender hears why.
        let off_the_bus = match member.errors.bus_off_until {
            _ if !member.plugged => Some(DropReason::Unplugged),
            Some(until) if arrived_ns < until => Some(DropReason::BusOff),
            _ => None,
        };
        if let Some(reason) = off_the_bus {
            client.credit.release();
            return member.dropped(reason, 1);
        }
        if frame.is_lin_standing() {
            // A slave's response buffer, not a frame to queue.
            client.credit.release();
            return self.apply_standing(client_id, owned, &frame);
        }
        if frame.is_lin_wake_up() {
            // A pulse on the wire, not behind the responses the sleeping
            // bus holds back in the port's FIFO.
            client.credit.release();
            channel.lin_pulse(owned.port_id, arrived_ns);
            self.dirty[owned.channel as usize] = true;
            return;
        }
        let arrival = self.next_arrival;
        // A relayed channel's frame also goes up to the owner: the one
        // place a queued frame is held twice.
        let uplinked = self.relays[owned.channel as usize].is_some().then(|| frame.clone());
        member.tx.push(Pending { frame, arrival, hops: 0, arrived_ns });
        self.next_arrival += 1;
        self.dirty[owned.channel as usize] = true;
        if let Some(frame) = uplinked {
            self.uplink(owned.channel, owned.port_id, arrival, frame);
        }
    }

    /// Whether `frame` from the port `owned` is refused as it comes: a kind
    /// its channel cannot carry, a port that never gets a turn under the
    /// channel's access rule, a port that may not send it. A refusal is told
    /// to the client, counted on the port and returns the frame's credit.
    /// Each reason is fixed for the port, so virtual time checks it when a
    /// frame is staged, before its sender hears the frame is placed.
    fn refuses_as_it_comes(&mut self, client_id: ClientId, owned: OwnedPort, frame: &Frame) -> bool {
        let Some(client) = self.clients.get(&client_id) else { return false };
        let channel = &mut self.channels[owned.channel as usize];
        let kind_refused = channel.config.protocol.refuses(frame.kind());
        if let Some((what, fix)) = kind_refused {
            client.credit.release();
            if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
                member.counters.tx_refused += 1;
            }
            let text = format!("channel '{}' {what} {frame:?}{fix}", channel.name());
            let error = Outbound::Error { code: ErrorCode::InvalidFrame, request: 0, fatal: false, text };
            self.reply(client_id, error);
            return true;
        }
        // A `tdma` or `token` channel gives turns to named ports: a frame
        // that would never get one is refused now rather than kept forever.
        if let Some(why) = channel.arbitration_refuses(owned.port_id, frame) {
            client.credit.release();
            if let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) {
                member.counters.tx_refused += 1;
            }
            let name = self.port_names.get(&owned.port_id).map_or("?", String::as_str);
            let text = format!("port '{name}' {why}; the frame {frame:?} was not sent (see docs/buses.md)");
            let error = Outbound::Error { code: ErrorCode::InvalidFrame, request: 0, fatal: false, text };
            self.reply(client_id, error);
            return true;
        }
        let Some(member) = channel.members.get_mut(owned.member).filter(|m| m.port_id == owned.port_id) else {
            return false;
        };
        if let Some(why) = member.refuses_to_send(frame) {
            client.credit.release();
            member.counters.tx_refused += 1;
            let name = self.port_names.get(&owned.port_id).map_or("?", String::as_str);
            let (code, text) = if member.read_only {
                let who = client.access.describe();
                let text = format!(
                    "port '{name}' {why}: {who} may receive on its channel, not send; the frame {frame:?} was not sent"
                );
                (ErrorCode::Unauthorized, text)
            } else {
                (ErrorCode::InvalidFrame, format!("port '{name}' {why}; the frame {frame:?} was not sent"))
            };
            let error = Outbound::Error { code, request: 0, fatal: false, text };
            self.reply(client_id, error);
            return true;
        }
        false
    }

    /// Answer a ping once every frame the client sent before it has left its
    /// transmit queues (at once if none is waiting).
    fn on_ping(&mut self, client_id: ClientId, nonce: u64) {
        let mark = self.next_arrival;
        if let Some(client) = self.clients.get_mut(&client_id) {
            client.pongs.push((nonce, mark));
        }
    }

    fn answer_pongs(&mut self) {
        let waiting: Vec<ClientId> =
            self.clients.iter().filter(|(_, c)| !c.pongs.is_empty()).map(|(&id, _)| id).collect();
        for client_id in waiting {
            let Some(client) = self.clients.get(&client_id) else { continue };
            let oldest = client
                .ports
                .iter()
                .flatten()
                .filter_map(|owned| self.channels[owned.channel as usize].oldest_pending_of(client_id))
                .min()
                .unwrap_or(u64::MAX);
            let due: Vec<u64> = client.pongs.iter().filter(|(_, mark)| *mark <= oldest).map(|(n, _)| *n).collect();
            if due.is_empty() {
                continue;
            }
            // Drops still unreported are reported first, so a client that
            // flushes learns of every overrun so far.
            let ports: Vec<OwnedPort> = client.ports.iter().flatten().copied().collect();
            for owned in ports {
                if let Some(member) = self.channels[owned.channel as usize].member_mut(owned.port_id) {
                    member.report_drops();
                }
            }
            if let Some(client) = self.clients.get_mut(&client_id) {
                client.pongs.retain(|(_, mark)| *mark > oldest);
            }
            for nonce in due {
                self.reply(client_id, Outbound::Pong { nonce });
            }
        }
    }

    /// A snapshot of every counter, for `STATS`.
    pub(crate) fn stats(&mut self) -> HubStats {
        let now_ns = self.clock.now();
        let channels = self
            .channels
            .iter_mut()
            .filter(|c| !c.removed)
            .map(|c| ChannelStats {
                name: c.name().to_owned(),
                protocol: c.config.protocol.name().into(),
                bitrate: c.config.bitrate,
                data_bitrate: c.config.effective_data_bitrate(),
                timing: match c.config.timing {
                    Timing::Ideal => "ideal".into(),
                    Timing::Timed => "timed".into(),
                },
                frames: c.frames,
                error_frames: c.error_frames,
                bits: c.load.bits,
                load_1s: c.load.percent(now_ns, 1_000_000_000),
                load_10s: c.load.percent(now_ns, 10_000_000_000),
                ids: c.ids.snapshot(now_ns),
                tx_dropped_by_reason: DropReason::counts_by_name(c.tx_dropped_by_reason()),
                federation: self.federation[c.id as usize].as_ref().map(|status| status.snapshot()),
            })
            .collect();
        let mut ports = Vec::new();
        for channel in &self.channels {
            for member in channel.members.iter().filter(|m| m.is_client()) {
                ports.push(PortStats {
                    name: self.port_names.get(&member.port_id).cloned().unwrap_or_default(),
                    channel: channel.name().to_owned(),
                    client: member.client,
                    port_id: member.port_id.into(),
                    tx_frames: member.counters.tx_frames,
                    rx_frames: member.counters.rx_frames,
                    rx_dropped: member.counters.rx_dropped,
                    tx_dropped: member.counters.tx_dropped,
                    tx_dropped_by_reason: DropReason::counts_by_name(member.counters.tx_dropped_by_reason),
                    tx_refused: member.counters.tx_refused,
                    tx_pending: member.tx.len() as u32,
                    error_state: match member.errors.state() {
                        ErrorState::Active => "active".into(),
                        ErrorState::Passive => "passive".into(),
                        ErrorState::BusOff => "bus_off".into(),
                    },
                    tec: member.errors.tec,
                    rec: member.errors.rec,
                });
            }
        }
        ports.sort_by_key(|p| p.port_id);
        let routes = self
            .routes
            .iter()
            .map(|r| RouteStats {
                from: r.config.from.clone(),
                to: r.config.to.clone(),
                routed: r.routed,
                dropped: self.channels[r.to as usize]
                    .members
                    .iter()
                    .find(|m| m.port_id == r.port_id)
                    .map_or(0, |m| m.counters.tx_dropped),
            })
            .collect();
        HubStats {
            hub: self.hub_name.clone(),
            channels,
            ports,
            routes,
            time: self.time_stats(),
            omitted: None,
            auth_refused: self.auth_refused.snapshot(),
            timer: (!self.in_virtual_time_mode()).then(|| self.lateness.snapshot()),
        }
    }

    fn on_open_port(
        &mut self,
        client_id: ClientId,
        request: u32,
        options: PortOptions,
        channel: &str,
        port_name: &str,
    ) {
        let refused = |code: ErrorCode, text: String| Outbound::Error { code, request, fatal: false, text };
        if options.contains(PortOptions::LISTEN_ONLY | PortOptions::TRANSMIT_ONLY) {
            let text = "a port cannot be both LISTEN_ONLY and TRANSMIT_ONLY: it would neither send nor receive".into();
            return self.reply(client_id, refused(ErrorCode::Malformed, text));
        }
        let named = self.named_ports.get(port_name).cloned();
        let channel = match (&named, channel) {
            (Some(PortConfig { channel: Some(wired), .. }), requested)
                if requested.is_empty() || requested == wired =>
            {
                wired.clone()
            }
            (Some(PortConfig { channel: Some(wired), .. }), requested) => {
                let text = format!("port '{port_name}' is wired to channel '{wired}', not '{requested}'");
                return self.reply(client_id, refused(ErrorCode::UnknownChannel, text));
            }
            (_, "") => {
                let text = format!("OPEN_PORT names no channel and port '{port_name}' is not wired to one");
                return self.reply(client_id, refused(ErrorCode::UnknownChannel, text));
            }
            (_, requested) => requested.to_owned(),
        };
        let Some(&channel_id) = self.channel_ids.get(&channel) else {
            let mut known: Vec<&str> = self.channel_ids.keys().map(String::as_str).collect();
            known.sort_unstable();
            let text = format!("unknown channel '{channel}'; this hub has: {}", known.join(", "));
            return self.reply(client_id, refused(ErrorCode::UnknownChannel, text));
        };
        let Some(client) = self.clients.get_mut(&client_id) else { return };
        // Checked once, here: the frame path only reads the port's flags.
        let right = client.access.port_right(&channel);
        if right == PortRight::None {
            let text = format!("{} may not use channel '{channel}'", client.access.describe());
            return self.reply(client_id, refused(ErrorCode::Unauthorized, text));
        }
        let Some(handle) = client.ports.iter().position(Option::is_none) else {
            let text = format!("a client may open at most {MAX_PORTS_PER_CLIENT} ports");
            return self.reply(client_id, refused(ErrorCode::TooManyPorts, text));
        };
        let Some(port_id) = PortId::client(self.next_port_id) else {
            let text = "this hub has opened as many ports as it has client port ids".into();
            return self.reply(client_id, refused(ErrorCode::TooManyPorts, text));
        };
        let name = if port_name.is_empty() { format!("{}.{port_id}", client.name) } else { port_name.to_owned() };
        if let Err(why) = check_name(&name) {
            return self.reply(client_id, refused(ErrorCode::Malformed, format!("port name {why}")));
        }
        if self.taken_names.contains(&name) {
            let text = format!("a port named '{name}' is already open");
            return self.reply(client_id, refused(ErrorCode::PortNameTaken, text));
        }
        self.next_port_id += 1;
        let slot = handle;
        let handle = handle as u16;
        let limit = named
            .as_ref()
            .and_then(|p| p.rate.map(|rate| RateLimit::new(rate, p.burst.unwrap_or(1), self.clock.now())));
        let mut member = Member::client(
            client_id,
            handle,
            port_id,
            options,
            client.outbox.clone(),
            client.credit.clone(),
            TxQueue::new(limit),
        );
        member.read_only = right == PortRight::Read;
        member.transmit_only |= right == PortRight::Write;
        info!(target: crate::CLIENT_LOG, client = client_id, port = %name, channel, "port opened");
        let member = self.channels[channel_id as usize].members.push(member);
        self.channels[channel_id as usize].name_port(port_id, &name);
        // Served at once: a LIN channel's master starts its schedule when a port opens.
        self.dirty[channel_id as usize] = true;
        client.ports[slot] = Some(OwnedPort { channel: channel_id, port_id, member });
        self.taken_names.insert(name.clone());
        self.port_names.insert(port_id, name);
        let channel_flags = self.channels[channel_id as usize].flags();
        let port_id = port_id.into();
        self.reply(client_id, Outbound::PortOpened { request, port: handle, channel_id, port_id, channel_flags });
        self.tell_waiting(channel_id, client_id, handle);
        self.widen_for_relay(channel_id, client_id);
        // A port opened on a sleeping LIN channel hears so, as its other ports did.
        if let Some(state) = self.channels[channel_id as usize].lin_asleep(handle) {
            self.reply(client_id, state);
        }
    }

    fn on_close_port(&mut self, client_id: ClientId, port: u16) {
        let Some(client) = self.clients.get_mut(&client_id) else {
            return;
        };
        let Some(owned) = client.ports.get_mut(port as usize).and_then(Option::take) else {
            let text = format!("cannot close port {port}: it is not open");
            let error = Outbound::Error { code: ErrorCode::PortNotOpen, request: 0, fatal: false, text };
            return self.reply(client_id, error);
        };
        self.release_port(owned);
        self.cyclic.remove_where(|(client, handle)| client == client_id && handle == port);
        self.reply(client_id, Outbound::PortClosed { port });
    }

    fn release_port(&mut self, owned: OwnedPort) {
        self.channels[owned.channel as usize].detach(owned.port_id);
        if let Some(name) = self.port_names.remove(&owned.port_id) {
            self.taken_names.remove(&name);
            self.departed.remember(owned.port_id, name);
        }
    }

    fn remove_client(&mut self, client_id: ClientId) -> Option<Client> {
        self.discard_staged(client_id, None);
        let client = self.clients.remove(&client_id)?;
        self.intakes.remove(client_id);
        if let Some(vt) = self.virtual_time.as_mut() {
            vt.leave(client_id);
        }
        client.credit.close();
        for owned in client.ports.iter().flatten() {
            self.release_port(*owned);
        }
        if !self.cyclic.is_empty() {
            self.cyclic.remove_where(|(client, _)| client == client_id);
        }
        Some(client)
    }

    /// Queue a reply. A client that has let its whole reply reserve fill up
    /// has stopped reading; it is cut off so it cannot hold memory.
    fn reply(&mut self, client_id: ClientId, item: Outbound) {
        let Some(client) = self.clients.get(&client_id) else { return };
        if client.outbox.try_control(item) == Err(Refused::Full) {
            if let Some(client) = self.remove_client(client_id) {
                warn!(client = client_id, name = %client.name, "disconnecting client: it does not read the hub's replies");
                (client.hang_up)();
            }
        }
    }

    /// Tell a misbehaving client why and drop it; its transport closes the
    /// connection after writing the error.
    fn reject_client(&mut self, client_id: ClientId, code: ErrorCode, text: String) {
        if let Some(client) = self.remove_client(client_id) {
            warn!(client = client_id, name = %client.name, "disconnecting client: {text}");
            if client.outbox.try_control(Outbound::Error { code, request: 0, fatal: true, text }).is_err() {
                (client.hang_up)();
            }
            client.outbox.flush();
        }
    }

    fn say_goodbye(&mut self) {
        for recording in &mut self.recordings {
            recording.stop();
        }
        for (_, client) in self.clients.drain() {
            let goodbye = Outbound::Goodbye { code: ErrorCode::ShuttingDown, text: "the hub is shutting down".into() };
            if client.outbox.try_control(goodbye).is_err() {
                (client.hang_up)();
            }
            client.outbox.flush();
        }
        // Give the writers a moment to complete their files: traffic has
        // ended, so only the shutdown waits, and a stuck disk only so long.
        let deadline = std::time::Instant::now() + SHUTDOWN_PATIENCE;
        for mut recording in self.recordings.drain(..) {
            match recording.stop_and_wait(deadline.saturating_duration_since(std::time::Instant::now())) {
                Some(Ok(_)) => {}
                Some(Err(e)) => warn!("recording {}: {e}", recording.name),
                None => warn!(
                    "recording {}: its file was not finished within {SHUTDOWN_PATIENCE:?} of the shutdown (a slow \
                     disk?); it may end early",
                    recording.name
                ),
            }
        }
    }
}
