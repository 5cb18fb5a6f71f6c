//! `[[silkit]] mode = "simulator"`: the hub is the network simulator of a
//! SIL Kit CAN network. SIL Kit then routes every CAN controller's requests
//! on that network to the hub, and its controllers see only what the hub
//! produces — so SIL Kit participants get the channel's arbitration, bit
//! timing, faults and error confinement among themselves, not only with
//! fieldhub's clients.
//!
//! Every SIL Kit controller is one port of the bridge's client, opened
//! lossless with `RECEIVE_OWN`: a CAN node of its own. Its frames wait in
//! its port's transmit queue and contend by identifier like any port's;
//! each frame on the bus reaches it as a frame event (receive direction),
//! or, for its own frame, as the echo that says the frame is on the bus —
//! then it gets its frame event (send direction) and its transmit event
//! `Transmitted`, with the user context it sent.
//!
//! Every transmit request gets exactly one answer, the bus's fate of its
//! frame (`spec/protocol.md` 6.9), and no answer waits for a later frame:
//! - `Transmitted` at the frame's echo ([`Node::confirm`]);
//! - `Canceled` at the bus's `TX_DROPPED` for the port, which names how
//!   many of its frames are off the bus (a fault rule, bus-off, unplugged):
//!   the controller's oldest requests in the bus's hands, in order
//!   ([`Node::drop_oldest`]);
//! - `Canceled` at once for a request the bus never gets (the controller
//!   stopped or cancelled, a CAN FD frame on a classic channel, no port),
//!   `TransmitQueueFull` at once beyond [`CONTROLLER_QUEUE`] requests.
//!
//! The bus queues `TX_DROPPED` when it drops the frames, but one it cannot
//! queue then (the client's reply reserve is full) waits for the port's
//! next drop or the client's next `PING`; and an echo is missed when the
//! port's queue overflows. So while requests are in the bus's hands and
//! SIL Kit is quiet, the bridge thread sends a `PING`: its `PONG` comes only
//! once every frame forwarded before it is on the bus or reported dropped
//! (6.4, 6.9), and a request forwarded before it that is still unanswered
//! then was on the bus without its echo ([`Node::unechoed`]).
//!
//! Threads: SIL Kit's threads run the sink (bookkeeping and immediate
//! answers only, never waiting on the bus); the bridge thread opens and
//! closes ports, forwards frames with transmit credit and pings; the
//! delivery thread turns the bus's outbox into SIL Kit events and answers.
//! The table they share is the bridge's own lock, never one the bus or the
//! control plane takes.
//!
//! Invariants: the bus never waits on SIL Kit (ports are lossless, so a
//! slow SIL Kit holds its channel, as any lossless port does, but the bus
//! thread only queues); per controller, requests go to the bus in the
//! order SIL Kit delivered them, and the bus's reports of one port come in
//! the order it decided the frames' fates, so answers come in request order
//! unless a `delay` rule let later frames overtake a held one.
//!
//! Imports `bridge.rs` only of `silkit/`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{RecvTimeoutError, Sender};
use fieldhub_proto::fate::DropReason;
use fieldhub_proto::frame::Frame;
use fieldhub_proto::wire::{ChannelFlags, PortOptions};
use fieldhub_silkit::netsim_ffi::{mode_flag, ControllerDescriptor, CONTROLLER_STATE_STARTED};
use fieldhub_silkit::{
    Direction, ErrorState, EventProducer, NetworkSimulator, SimulatorEvent, SimulatorOptions, SimulatorSink,
    TransmitStatus,
};
use tracing::{error, info, warn};

use super::bridge::{Attached, SilKitBridge};
use crate::config::SilKitConfig;
use crate::session::bridge_port::{LateAnswer, NotOpened, OpenedPort, PortOpenings};
use crate::session::Sessions;
use fieldhub_bus::confinement::can_err;
use fieldhub_bus::inbox::{ClientId, Inbound};
use fieldhub_bus::outbox::{Outbound, QueueOutbox};

/// Requests one SIL Kit controller may have in flight (sent, not yet
/// answered): its transmit queue.
pub const CONTROLLER_QUEUE: usize = 256;

/// How often waiting threads look whether the bridge is stopping.
const LOOK: Duration = Duration::from_millis(100);

/// Outbox items the delivery thread takes under one lock.
const TAKE_BATCH: usize = 256;

/// Work for the bridge thread, in SIL Kit's order.
enum Work {
    /// Open a port for the controller.
    Open(ControllerDescriptor),
    /// Close the controller's port; cancel what it still waits for.
    Close(ControllerDescriptor),
    /// The controller has one more frame to forward.
    Forward(ControllerDescriptor),
}

/// A frame a controller asked to send, with the context its answer carries.
struct Request {
    frame: Frame,
    user_context: usize,
    /// Set when the bridge thread forwards it to the bus: the number of
    /// frames the bridge forwarded up to and with it, which a `PING`'s mark
    /// is held against.
    ticket: u64,
}

/// One SIL Kit controller: a port of the channel.
struct Node {
    /// `None` until the bus opened the port.
    port: Option<u16>,
    /// Requests not yet answered, oldest first: the first `forwarded` are
    /// in the bus's hands (in the order they were forwarded), the rest wait
    /// for the bridge thread.
    requests: VecDeque<Request>,
    forwarded: usize,
    /// The port's last echo (sequence number, frame): a `duplicate` rule's
    /// copy of it comes with the next sequence number.
    last_echo: Option<(u64, Frame)>,
    /// A controller the simulator has not heard a mode from counts as
    /// started: it may have started before it learnt of the simulator.
    started: bool,
    baud_warned: bool,
}

impl Node {
    fn new() -> Self {
        Node { port: None, requests: VecDeque::new(), forwarded: 0, last_echo: None, started: true, baud_warned: false }
    }

    /// The request an echo of `sent` with sequence number `seq` confirms:
    /// the oldest forwarded one with this frame (a frame a `delay` rule held
    /// reaches the bus after later ones); else, when a fault rule changed
    /// the frame on its way, the oldest forwarded one. `None` for a copy a
    /// `duplicate` rule made of the frame echoed just before (the controller
    /// sent it once), and when nothing is in the bus's hands.
    fn confirm(&mut self, sent: &Frame, seq: u64) -> Option<Request> {
        let previous = self.last_echo.replace((seq, sent.clone()));
        let forwarded = self.forwarded.min(self.requests.len());
        let at = match self.requests.iter().take(forwarded).position(|r| r.frame == *sent) {
            Some(at) => at,
            None if previous.as_ref().is_some_and(|(s, f)| *s == seq.wrapping_sub(1) && f == sent) => return None,
            None if forwarded > 0 => 0,
            None => return None,
        };
        self.forwarded = forwarded - 1;
        self.requests.remove(at)
    }

    /// The `count` oldest requests in the bus's hands, which it reported off
    /// the bus (a port's frames leave its FIFO in the order it sent them),
    /// and how many of `count` found no request.
    fn drop_oldest(&mut self, count: usize) -> (Vec<Request>, usize) {
        let forwarded = self.forwarded.min(self.requests.len());
        let taken = count.min(forwarded);
        self.forwarded = forwarded - taken;
        (self.requests.drain(..taken).collect(), count - taken)
    }

    /// The requests forwarded up to ticket `mark` that are still in the
    /// bus's hands when the `PONG` of a `PING` sent after them comes: the bus
    /// reported none of them dropped, so they were on the bus, but their
    /// echo never reached the port.
    fn unechoed(&mut self, mark: u64) -> Vec<Request> {
        let forwarded = self.forwarded.min(self.requests.len());
        let settled = self.requests.iter().take(forwarded).take_while(|r| r.ticket <= mark).count();
        self.forwarded = forwarded - settled;
        self.requests.drain(..settled).collect()
    }
}

#[derive(Default)]
struct Table {
    nodes: HashMap<ControllerDescriptor, Node>,
    by_port: HashMap<u16, ControllerDescriptor>,
    carries_fd: bool,
    /// Frames the bridge thread forwarded: the last ticket handed out.
    tickets: u64,
    /// The `PING` in flight, if one is: its nonce is the last ticket
    /// forwarded before it.
    ping: Option<u64>,
}

/// What the three threads share.
struct Shared {
    table: Mutex<Table>,
    /// `OPEN_PORT` requests in flight, by request id, with the controller
    /// each is for; never locked while `table` is.
    openings: PortOpenings<ControllerDescriptor>,
    closed: Arc<AtomicBool>,
    /// Requests answered `Canceled` or `TransmitQueueFull`, and frames SIL
    /// Kit cannot be shown: counted, logged once each.
    canceled: AtomicU64,
    queue_full: AtomicU64,
    unshowable: AtomicU64,
    /// Frames the bus reported off the bus, by reason (as
    /// [`DropReason::ALL`]), each reason logged the first time.
    dropped: [AtomicU64; DropReason::ALL.len()],
    /// Requests settled by a `PONG` because their echo never came, and
    /// dropped frames the bus reported beyond the requests in its hands:
    /// logged the first time.
    unechoed: AtomicU64,
    unmatched: AtomicU64,
    participant: String,
    channel: String,
    bitrate: u32,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answer a request that never reaches the bus.
    fn answer(
        &self,
        producer: &EventProducer,
        controller: ControllerDescriptor,
        request: &Request,
        status: TransmitStatus,
    ) {
        self.answer_raw(producer, controller, request.frame.id(), request.user_context, status);
    }

    fn answer_raw(
        &self,
        producer: &EventProducer,
        controller: ControllerDescriptor,
        can_id: u32,
        user_context: usize,
        status: TransmitStatus,
    ) {
        let counter = if status == TransmitStatus::QueueFull { &self.queue_full } else { &self.canceled };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = producer.transmit_status(controller, can_id, status, wall_clock_ns(), user_context) {
            warn!(participant = %self.participant, error = %e, "cannot answer a SIL Kit transmit request");
        }
    }

    /// Show `controller` its frame `sent`, on the bus at `at`, and answer
    /// its request `Transmitted`.
    fn transmitted(
        &self,
        producer: &EventProducer,
        controller: ControllerDescriptor,
        request: &Request,
        sent: &Frame,
        at: u64,
    ) {
        let shown = producer.frame(sent, at, Direction::Send, request.user_context, &[controller]).and_then(|()| {
            let id = request.frame.id();
            producer.transmit_status(controller, id, TransmitStatus::Transmitted, at, request.user_context)
        });
        if let Err(e) = shown {
            warn!(participant = %self.participant, error = %e, "cannot show a SIL Kit controller its frame");
        }
    }
}

/// Run the simulator for `bridge`'s network until the hub stops.
pub(super) fn run(bridge: &SilKitBridge, sessions: &Arc<Sessions>) {
    let config = &bridge.config;
    if !bridge.library.has_network_simulator() {
        return error!(channel = %config.channel, library = bridge.library.origin(),
            "SIL Kit simulator not started: this SIL Kit has no network simulator API (SIL Kit 4.0.50 or later has it); \
            install SIL Kit 5 or use mode = \"participant\"");
    }
    let closed = Arc::new(AtomicBool::new(false));
    let Some(Attached { mut slot, outbox, credit }) = bridge.attach(sessions, "SIL Kit simulator", &closed) else {
        return;
    };
    let shared = Arc::new(Shared {
        table: Mutex::new(Table::default()),
        // No port of the client's own: requests from 1. A refusal that comes
        // after the bridge stopped waiting still cancels the controller's
        // frames.
        openings: PortOpenings::new(1, LateAnswer::Ours),
        closed: Arc::clone(&closed),
        canceled: AtomicU64::new(0),
        queue_full: AtomicU64::new(0),
        unshowable: AtomicU64::new(0),
        dropped: Default::default(),
        unechoed: AtomicU64::new(0),
        unmatched: AtomicU64::new(0),
        participant: config.participant_name(),
        channel: config.channel.clone(),
        bitrate: bridge.bitrate,
    });
    let (work_tx, work) = crossbeam_channel::unbounded();
    let options = SimulatorOptions {
        registry: config.registry.clone(),
        participant: config.participant_name(),
        network: config.network.clone(),
    };
    let simulator = bridge.join_retrying(sessions, || {
        NetworkSimulator::start(Arc::clone(&bridge.library), &options, sink(Arc::clone(&shared), work_tx.clone()))
    });
    let Some(simulator) = simulator else { return slot.detach("the hub is stopping") };
    drop(work_tx);
    info!(participant = %options.participant, network = %options.network, registry = %options.registry,
        channel = %config.channel, "SIL Kit network simulated");
    let producer = simulator.producer();
    let delivery = {
        let (shared, outbox, producer) = (Arc::clone(&shared), Arc::clone(&outbox), Arc::clone(&producer));
        std::thread::Builder::new()
            .name(format!("fh-silkit-d-{}", config.channel))
            .spawn(move || deliver(&shared, &outbox, &producer))
    };
    let stop = || sessions.stopping() || closed.load(Ordering::Acquire);
    let client = slot.id();
    while !stop() {
        let item = match work.recv_timeout(LOOK) {
            Ok(item) => item,
            Err(RecvTimeoutError::Timeout) => {
                if ping_if_waiting(&shared, sessions, client) {
                    continue;
                }
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let sent = match item {
            Work::Open(controller) => open_port(&shared, sessions, client, config, controller, &stop),
            Work::Close(controller) => close_port(&shared, &producer, sessions, client, controller),
            Work::Forward(controller) => match next_frame(&shared, &producer, controller) {
                Some((port, frame)) => {
                    credit.acquire(stop) && sessions.inbox.send(Inbound::Frame { client, port, frame }).is_ok()
                }
                None => true,
            },
        };
        if !sent {
            break;
        }
    }
    slot.detach("the SIL Kit simulator is closing");
    outbox.close();
    closed.store(true, Ordering::Release);
    match delivery {
        Ok(handle) => {
            let _ = handle.join();
        }
        Err(e) => error!(participant = %shared.participant, error = %e, "cannot start the SIL Kit delivery thread"),
    }
    // Destroying the participant ends SIL Kit's calls into the sink.
    let refused = simulator.refused_requests();
    drop(simulator);
    let (canceled, queue_full) = (shared.canceled.load(Ordering::Relaxed), shared.queue_full.load(Ordering::Relaxed));
    let dropped: Vec<String> = DropReason::ALL
        .iter()
        .zip(&shared.dropped)
        .map(|(reason, n)| (reason.name(), n.load(Ordering::Relaxed)))
        .filter(|&(_, n)| n > 0)
        .map(|(name, n)| format!("{name}={n}"))
        .collect();
    let unechoed = shared.unechoed.load(Ordering::Relaxed);
    info!(participant = %shared.participant, canceled, queue_full, refused, dropped = %dropped.join(","), unechoed,
        "SIL Kit simulator left");
}

/// What SIL Kit's threads run for every request.
fn sink(shared: Arc<Shared>, work: Sender<Work>) -> SimulatorSink {
    Box::new(move |producer: &EventProducer, event: SimulatorEvent| match event {
        SimulatorEvent::ControllerAdded(controller) => {
            shared.table().nodes.insert(controller, Node::new());
            let _ = work.send(Work::Open(controller));
        }
        SimulatorEvent::ControllerRemoved(controller) => {
            let _ = work.send(Work::Close(controller));
        }
        SimulatorEvent::FrameRequest { controller, frame, user_context } => {
            let frame = match frame {
                Ok(frame) => frame,
                Err(e) => {
                    if shared.unshowable.fetch_add(1, Ordering::Relaxed) == 0 {
                        warn!(participant = %shared.participant, "refusing a frame from SIL Kit: {e}");
                    }
                    // The identifier did not survive the conversion either.
                    return shared.answer_raw(producer, controller, 0, user_context, TransmitStatus::Canceled);
                }
            };
            let request = Request { frame, user_context, ticket: 0 };
            let mut table = shared.table();
            let status = match table.nodes.get_mut(&controller) {
                Some(node) if node.started && node.requests.len() < CONTROLLER_QUEUE => {
                    node.requests.push_back(request);
                    drop(table);
                    let _ = work.send(Work::Forward(controller));
                    return;
                }
                Some(node) if node.started => TransmitStatus::QueueFull,
                // Stopped, or no port: the controller is no node of the bus now.
                _ => TransmitStatus::Canceled,
            };
            drop(table);
            shared.answer(producer, controller, &request, status);
        }
        SimulatorEvent::ControllerMode { controller, state, flags } => {
            let canceled: Vec<Request> = {
                let mut table = shared.table();
                let Some(node) = table.nodes.get_mut(&controller) else { return };
                node.started = state == CONTROLLER_STATE_STARTED;
                if flags & mode_flag::CANCEL_TRANSMIT_REQUESTS != 0 || !node.started {
                    let from = node.forwarded;
                    node.requests.drain(from..).collect()
                } else {
                    Vec::new()
                }
            };
            for request in &canceled {
                shared.answer(producer, controller, request, TransmitStatus::Canceled);
            }
            let now = wall_clock_ns();
            let mut report = producer.controller_state(controller, state, now);
            if state == CONTROLLER_STATE_STARTED {
                report = report.and_then(|()| producer.error_state(controller, ErrorState::Active, now));
            }
            if let Err(e) = report {
                warn!(participant = %shared.participant, error = %e, "cannot report a SIL Kit controller's state");
            }
        }
        SimulatorEvent::Baudrate { controller, rate, fd_rate } => {
            let mut table = shared.table();
            let Some(node) = table.nodes.get_mut(&controller) else { return };
            if rate != 0 && rate != shared.bitrate && !node.baud_warned {
                node.baud_warned = true;
                warn!(participant = %shared.participant, controller, rate, fd_rate, channel = %shared.channel,
                    bitrate = shared.bitrate, "a SIL Kit controller asks for another bit rate than its channel's; \
                    the channel's rules (set bitrate in its [[channel]] to match)");
            }
        }
    })
}

/// Open the controller's port and wait until the bus answered; `false`
/// when the bridge is stopping.
fn open_port(
    shared: &Shared,
    sessions: &Sessions,
    client: ClientId,
    config: &SilKitConfig,
    controller: ControllerDescriptor,
    stop: &dyn Fn() -> bool,
) -> bool {
    let open = |request| Inbound::OpenPort {
        client,
        request,
        // Classic channels refuse CAN FD frames: the bridge thread answers
        // them `Canceled` before they reach the bus (`next_frame`).
        options: PortOptions::FD | PortOptions::BLOCK_ON_OVERFLOW | PortOptions::RECEIVE_OWN,
        channel: config.channel.clone(),
        port_name: format!("silkit-{}-{controller}", config.network),
    };
    // The delivery thread handled the answer (a refused controller is no
    // node any more) before this one wakes.
    match shared.openings.open(&sessions.inbox, controller, open, stop) {
        Ok(_) | Err(NotOpened::Refused(_)) => true,
        Err(NotOpened::Stopped) => false,
    }
}

/// Close a controller's port and cancel what it still waits for.
fn close_port(
    shared: &Shared,
    producer: &EventProducer,
    sessions: &Sessions,
    client: ClientId,
    controller: ControllerDescriptor,
) -> bool {
    let node = {
        let mut table = shared.table();
        let node = table.nodes.remove(&controller);
        if let Some(port) = node.as_ref().and_then(|n| n.port) {
            table.by_port.remove(&port);
        }
        node
    };
    let Some(node) = node else { return true };
    // The controller is gone from SIL Kit; the answers are for its log.
    for request in &node.requests {
        shared.answer(producer, controller, request, TransmitStatus::Canceled);
    }
    match node.port {
        Some(port) => sessions.inbox.send(Inbound::ClosePort { client, port }).is_ok(),
        None => true,
    }
}

/// The controller's next frame for the bus and its port, if it still has
/// one (a mode change may have cancelled it); a CAN FD frame on a classic
/// channel is answered `Canceled` here.
fn next_frame(shared: &Shared, producer: &EventProducer, controller: ControllerDescriptor) -> Option<(u16, Frame)> {
    let refused = {
        let mut table = shared.table();
        let Table { nodes, carries_fd, tickets, .. } = &mut *table;
        let node = nodes.get_mut(&controller)?;
        let port = node.port?;
        let at = node.forwarded;
        let request = node.requests.get_mut(at)?;
        if !request.frame.is_fd() || *carries_fd {
            *tickets += 1;
            request.ticket = *tickets;
            let frame = request.frame.clone();
            node.forwarded += 1;
            return Some((port, frame));
        }
        node.requests.remove(at)?
    };
    if shared.unshowable.fetch_add(1, Ordering::Relaxed) == 0 {
        warn!(participant = %shared.participant, channel = %shared.channel,
            "refusing CAN FD frames from SIL Kit: the channel is classic CAN; configure it with protocol = \"canfd\"");
    }
    shared.answer(producer, controller, &refused, TransmitStatus::Canceled);
    None
}

/// While requests are in the bus's hands and SIL Kit is quiet, send a
/// `PING` (one at a time) whose `PONG` settles them (see the module doc);
/// `false` when the bus is gone.
fn ping_if_waiting(shared: &Shared, sessions: &Sessions, client: ClientId) -> bool {
    let nonce = {
        let mut table = shared.table();
        if table.ping.is_some() || table.nodes.values().all(|node| node.forwarded == 0) {
            return true;
        }
        // Frames reach the inbox in the order this thread sends them, so
        // every ticket up to this one is before the PING.
        table.ping = Some(table.tickets);
        table.tickets
    };
    sessions.inbox.send(Inbound::Ping { client, nonce }).is_ok()
}

/// A frame on its way to several controllers: one SIL Kit event for all.
struct Fanout {
    seq: u64,
    frame: Option<Frame>,
    timestamp: u64,
    receivers: Vec<ControllerDescriptor>,
}

/// The delivery thread: the bus's outbox to SIL Kit events, until the
/// bridge closes.
fn deliver(shared: &Shared, outbox: &QueueOutbox, producer: &EventProducer) {
    let mut items = Vec::with_capacity(TAKE_BATCH);
    let mut fanout = Fanout { seq: 0, frame: None, timestamp: 0, receivers: Vec::new() };
    // The latest bus time seen: when a PONG settles a request whose echo
    // never came, its frame was on the bus by then.
    let mut bus_ns = 0;
    // SYNC POINT with the Release stores of the hang-up and the bridge's end.
    while !shared.closed.load(Ordering::Acquire) {
        outbox.take_into(&mut items, TAKE_BATCH);
        if items.is_empty() {
            flush(shared, producer, &mut fanout);
            items.extend(outbox.take_timeout(LOOK));
        }
        outbox.took();
        for item in items.drain(..) {
            match item {
                Outbound::Frame { port, frame, meta } => {
                    bus_ns = bus_ns.max(meta.timestamp_ns);
                    if fanout.seq != meta.seq {
                        flush(shared, producer, &mut fanout);
                    }
                    on_frame(shared, producer, &mut fanout, port, frame, meta);
                }
                Outbound::PortOpened { request, port, port_id, channel_flags, .. } => {
                    // The port is the controller's before the bridge thread
                    // wakes and forwards to it.
                    if let Some(controller) = shared.openings.waiting(request) {
                        let mut table = shared.table();
                        table.carries_fd = channel_flags.contains(ChannelFlags::CANFD);
                        table.by_port.insert(port, controller);
                        if let Some(node) = table.nodes.get_mut(&controller) {
                            node.port = Some(port);
                        }
                    }
                    shared.openings.answer(request, Ok(OpenedPort { port, port_id }));
                }
                Outbound::Error { request, text, fatal, .. } => {
                    if let Some(controller) = shared.openings.waiting(request) {
                        // Without a port the controller is no node of the
                        // channel: all it asks is answered Canceled.
                        let refused = shared.table().nodes.remove(&controller);
                        shared.openings.answer(request, Err(text.clone()));
                        error!(participant = %shared.participant, controller,
                            "the bus refused a SIL Kit controller's port, its frames are canceled: {text}");
                        for request in refused.iter().flat_map(|node| &node.requests) {
                            shared.answer(producer, controller, request, TransmitStatus::Canceled);
                        }
                    } else {
                        warn!(participant = %shared.participant, "the bus reports: {text}");
                    }
                    if fatal {
                        return;
                    }
                }
                Outbound::Goodbye { .. } => return,
                // Answers follow the frames before them: a frame collected
                // for its receivers goes out first.
                Outbound::TxDropped { port, reason, dropped } => {
                    flush(shared, producer, &mut fanout);
                    on_dropped(shared, producer, port, reason, dropped);
                }
                Outbound::Pong { nonce } => {
                    flush(shared, producer, &mut fanout);
                    on_pong(shared, producer, nonce, bus_ns);
                }
                Outbound::RxOverflow { .. }
                | Outbound::ChannelState { .. }
                | Outbound::PortClosed { .. }
                | Outbound::Grant { .. }
                | Outbound::Stats { .. } => {}
            }
        }
    }
}

/// One frame for one controller's port.
fn on_frame(
    shared: &Shared,
    producer: &EventProducer,
    fanout: &mut Fanout,
    port: u16,
    frame: Frame,
    meta: fieldhub_proto::FrameMeta,
) {
    let mut table = shared.table();
    let Some(&controller) = table.by_port.get(&port) else { return };
    let Some(node) = table.nodes.get_mut(&controller) else { return };
    if frame.is_error() {
        // The bus's own error frames have no SIL Kit form; a change of the
        // controller's error state does.
        drop(table);
        if let Some(state) = error_state_of(&frame) {
            if let Err(e) = producer.error_state(controller, state, meta.timestamp_ns) {
                warn!(participant = %shared.participant, error = %e, "cannot report a SIL Kit controller's error state");
            }
        }
        return;
    }
    if frame.is_echo() {
        let sent = frame.with_echo(false);
        let confirmed = node.confirm(&sent, meta.seq);
        drop(table);
        if let Some(request) = confirmed {
            shared.transmitted(producer, controller, &request, &sent, meta.timestamp_ns);
        }
        return;
    }
    if node.started {
        fanout.seq = meta.seq;
        fanout.frame = Some(frame);
        fanout.timestamp = meta.timestamp_ns;
        fanout.receivers.push(controller);
    }
}

/// `TX_DROPPED`: `count` frames of `port` are off the bus for `reason`,
/// its controller's oldest requests in the bus's hands: answered
/// `Canceled` now.
fn on_dropped(shared: &Shared, producer: &EventProducer, port: u16, reason: DropReason, count: u32) {
    let (controller, canceled, missing) = {
        let mut table = shared.table();
        let Some(&controller) = table.by_port.get(&port) else { return };
        let Some(node) = table.nodes.get_mut(&controller) else { return };
        let (canceled, missing) = node.drop_oldest(count as usize);
        (controller, canceled, missing)
    };
    // DropReason's wire values are 1 to 4, in the order of DropReason::ALL.
    if shared.dropped[reason as usize - 1].fetch_add(u64::from(count), Ordering::Relaxed) == 0 {
        warn!(participant = %shared.participant, controller, count,
            "frames of a SIL Kit controller {}; their requests are answered Canceled", reason.describe());
    }
    for request in &canceled {
        shared.answer(producer, controller, request, TransmitStatus::Canceled);
    }
    if missing > 0 && shared.unmatched.fetch_add(missing as u64, Ordering::Relaxed) == 0 {
        error!(participant = %shared.participant, controller, missing,
            "the bus reports more frames of a SIL Kit controller dropped than it has requests of it; \
            a fieldhub bug: please report it with this log");
    }
}

/// The `PONG` of the bridge's `PING` (`nonce`: the last ticket forwarded
/// before it): every frame forwarded before it is on the bus or reported
/// dropped, so a request of those still unanswered was on the bus without
/// its echo reaching the controller's port (its queue overflowed). It is
/// answered `Transmitted`, at `bus_ns`, the latest bus time seen.
fn on_pong(shared: &Shared, producer: &EventProducer, nonce: u64, bus_ns: u64) {
    let unechoed: Vec<(ControllerDescriptor, Vec<Request>)> = {
        let mut table = shared.table();
        if table.ping != Some(nonce) {
            return;
        }
        table.ping = None;
        let settled = table.nodes.iter_mut().map(|(&controller, node)| (controller, node.unechoed(nonce)));
        settled.filter(|(_, requests)| !requests.is_empty()).collect()
    };
    for (controller, requests) in unechoed {
        if shared.unechoed.fetch_add(requests.len() as u64, Ordering::Relaxed) == 0 {
            warn!(participant = %shared.participant, controller, requests = requests.len(),
                "SIL Kit transmit requests whose echo the bus never delivered (the port's queue overflowed): \
                the bus carried their frames, so they are answered Transmitted");
        }
        for request in &requests {
            shared.transmitted(producer, controller, request, &request.frame, bus_ns);
        }
    }
}

/// Show the collected frame to its receivers, in one event.
fn flush(shared: &Shared, producer: &EventProducer, fanout: &mut Fanout) {
    let Some(frame) = fanout.frame.take() else { return };
    if fanout.receivers.is_empty() {
        return;
    }
    if let Err(e) = producer.frame(&frame, fanout.timestamp, Direction::Receive, 0, &fanout.receivers) {
        if shared.unshowable.fetch_add(1, Ordering::Relaxed) == 0 {
            warn!(participant = %shared.participant, error = %e, "a frame could not be shown to SIL Kit");
        }
    }
    fanout.receivers.clear();
}

/// The error state a SocketCAN state-change error frame reports
/// (`confinement::state_change_frame`), if it is one.
fn error_state_of(frame: &Frame) -> Option<ErrorState> {
    let class = frame.id();
    if class & can_err::CNT == 0 {
        return None;
    }
    if class & can_err::BUSOFF != 0 {
        Some(ErrorState::BusOff)
    } else if class & can_err::RESTARTED != 0 {
        Some(ErrorState::Active)
    } else if class & can_err::CRTL != 0 {
        let detail = frame.data().get(1).copied().unwrap_or(0);
        if detail & (can_err::CRTL_TX_PASSIVE | can_err::CRTL_RX_PASSIVE) != 0 {
            Some(ErrorState::Passive)
        } else if detail & can_err::CRTL_ACTIVE != 0 {
            Some(ErrorState::Active)
        } else {
            None
        }
    } else {
        None
    }
}

fn wall_clock_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_bus::confinement::{state_change_frame, ErrorCounters, ErrorState as Confined};
    use fieldhub_bus::fault::{corruption_error_frame, Dice, FaultSpec};
    use fieldhub_bus::request::{ControlRequest, ForcedState};
    use fieldhub_bus::testing::{Harness, SteppedByHand, TestClient};
    use serde_json::json;

    const CHANNEL: &str = "[[channel]]\nname = \"can0\"\n";
    /// The options the simulator opens a controller's port with.
    const CONTROLLER: PortOptions =
        PortOptions::FD.union(PortOptions::BLOCK_ON_OVERFLOW).union(PortOptions::RECEIVE_OWN);

    /// Frame `n` of a controller: identifier `0x100 + n % 16`, `n` in its payload.
    fn numbered(n: u32) -> Frame {
        Frame::can(0x100 + n % 16, false, &n.to_le_bytes()).unwrap()
    }

    /// A controller with `count` numbered requests (user context `n + 1`),
    /// all in the bus's hands, with tickets `1..=count`.
    fn forwarded(count: u32) -> Node {
        let mut node = Node::new();
        node.port = Some(1);
        for n in 0..count {
            let ticket = u64::from(n) + 1;
            node.requests.push_back(Request { frame: numbered(n), user_context: n as usize + 1, ticket });
        }
        node.forwarded = count as usize;
        node
    }

    /// What the delivery thread answers for the bus's items to the
    /// controller's client, by the same `Node` calls: (user context,
    /// status), in the order given.
    fn answers(node: &mut Node, items: Vec<Outbound>) -> Vec<(usize, TransmitStatus)> {
        let mut answered = Vec::new();
        for item in items {
            let (settled, status) = match item {
                Outbound::Frame { frame, meta, .. } if frame.is_echo() => {
                    (node.confirm(&frame.with_echo(false), meta.seq).into_iter().collect(), TransmitStatus::Transmitted)
                }
                Outbound::TxDropped { dropped, .. } => {
                    let (canceled, missing) = node.drop_oldest(dropped as usize);
                    assert_eq!(missing, 0, "a drop without a request");
                    (canceled, TransmitStatus::Canceled)
                }
                Outbound::Pong { nonce } => (node.unechoed(nonce), TransmitStatus::Transmitted),
                _ => (Vec::new(), TransmitStatus::Transmitted),
            };
            answered.extend(settled.iter().map(|r: &Request| (r.user_context, status)));
        }
        answered
    }

    /// A bus with the controller's port ("ctl", handle returned) and a
    /// receiver ("rx") on can0, and `rules` added in order.
    fn bus(rules: &[serde_json::Value]) -> (Harness, TestClient, u16, TestClient) {
        let mut h = Harness::new(CHANNEL);
        let (ctl, rx) = (h.connect("silkit"), h.connect("rx"));
        let port = h.open(&ctl, "can0", "ctl", CONTROLLER);
        h.open(&rx, "can0", "rx", PortOptions::empty());
        for rule in rules {
            let spec: FaultSpec = serde_json::from_value(rule.clone()).unwrap();
            h.control(ControlRequest::AddFault(spec)).unwrap();
        }
        (h, ctl, port, rx)
    }

    fn numbers(frames: &[(Frame, fieldhub_proto::FrameMeta)]) -> Vec<u32> {
        frames.iter().map(|(f, _)| u32::from_le_bytes(f.data()[..4].try_into().unwrap())).collect()
    }

    #[test]
    fn a_dropped_frame_with_nothing_behind_it_is_canceled_at_its_report() {
        let (mut h, ctl, port, rx) = bus(&[json!({"channel": "can0", "at": "sender", "action": {"type": "drop"}})]);
        let mut node = forwarded(1);
        h.send(&ctl, port, numbered(0));
        h.step();
        assert_eq!(answers(&mut node, h.items(&ctl)), [(1, TransmitStatus::Canceled)]);
        assert!(h.frames(&rx).is_empty());
        assert!(node.requests.is_empty() && node.forwarded == 0);
    }

    /// Seeded drops at the sender and on the bus: every request answered
    /// once, in request order; `Transmitted` for exactly the frames the
    /// receiver got, `Canceled` for exactly the ones the rules' dice drop.
    #[test]
    fn seeded_drops_answer_every_request_once_in_order() {
        const COUNT: u32 = 300;
        for seed in [1u64, 2, 3] {
            let at_sender = json!({"channel": "can0", "at": "sender", "action": {"type": "drop"},
                "probability": 0.2, "seed": seed});
            let on_bus = json!({"channel": "can0", "at": "bus", "action": {"type": "drop"},
                "probability": 0.1, "seed": seed + 100});
            let (mut h, ctl, port, rx) = bus(&[at_sender, on_bus]);
            let mut node = forwarded(COUNT);
            let mut answered = Vec::new();
            // In bursts, as the bridge forwards what SIL Kit queued.
            for burst in (0..COUNT).collect::<Vec<_>>().chunks(7) {
                burst.iter().for_each(|&n| h.send(&ctl, port, numbered(n)));
                h.step();
                answered.extend(answers(&mut node, h.items(&ctl)));
            }
            let contexts: Vec<usize> = answered.iter().map(|(c, _)| *c).collect();
            assert_eq!(contexts, (1..=COUNT as usize).collect::<Vec<_>>(), "seed {seed}: once each, in order");
            let transmitted: Vec<u32> = answered
                .iter()
                .filter(|(_, s)| *s == TransmitStatus::Transmitted)
                .map(|(c, _)| *c as u32 - 1)
                .collect();
            assert_eq!(transmitted, numbers(&h.frames(&rx)), "seed {seed}: Transmitted = on the bus");
            // Each rule rolls its dice once per frame it sees: the sender's
            // for every frame, the bus's for those the sender's let through.
            let (mut sender, mut on_bus) = (Dice::new(seed), Dice::new(seed + 100));
            let expected: Vec<u32> = (0..COUNT).filter(|_| sender.roll() < 0.2 || on_bus.roll() < 0.1).collect();
            let canceled: Vec<u32> =
                answered.iter().filter(|(_, s)| *s == TransmitStatus::Canceled).map(|(c, _)| *c as u32 - 1).collect();
            assert_eq!(canceled, expected, "seed {seed}: Canceled = what the dice dropped");
        }
    }

    #[test]
    fn frames_dropped_while_bus_off_are_canceled_at_once() {
        let config = "[[channel]]\nname = \"can0\"\nauto_bus_off_recovery = false\n";
        let mut h = Harness::new(config);
        let ctl = h.connect("silkit");
        let port = h.open(&ctl, "can0", "ctl", CONTROLLER);
        h.control(ControlRequest::ForceState { port: "ctl".into(), state: ForcedState::BusOff }).unwrap();
        let mut node = forwarded(3);
        (0..3).for_each(|n| h.send(&ctl, port, numbered(n)));
        let canceled = [(1, TransmitStatus::Canceled), (2, TransmitStatus::Canceled), (3, TransmitStatus::Canceled)];
        assert_eq!(answers(&mut node, h.items(&ctl)), canceled, "before the bus serves the channel again");
    }

    /// A frame a delay rule holds reaches the bus after later ones; a rule
    /// that changes a frame changes its echo; a duplicate's copies echo
    /// again: each echo still answers the request whose frame it sent.
    #[test]
    fn held_changed_and_duplicated_frames_answer_their_own_requests() {
        let rule = |at: &str, id: u32, action: serde_json::Value| json!({"channel": "can0", "at": at, "id": id, "mask": 0x7FF, "action": action});
        let cases = [
            (rule("sender", 0x100, json!({"type": "delay", "ms": 10})), [2, 3, 4, 1], 4),
            (rule("bus", 0x101, json!({"type": "flip", "byte": 0, "mask": 255})), [1, 2, 3, 4], 4),
            (rule("bus", 0x102, json!({"type": "duplicate", "copies": 2})), [1, 2, 3, 4], 6),
        ];
        for (rule, order, carried) in cases {
            let (mut h, ctl, port, rx) = bus(std::slice::from_ref(&rule));
            let mut node = forwarded(4);
            (0..4).for_each(|n| h.send(&ctl, port, numbered(n)));
            h.step();
            let mut answered = answers(&mut node, h.items(&ctl));
            h.advance(10_000_000);
            answered.extend(answers(&mut node, h.items(&ctl)));
            let expected: Vec<(usize, TransmitStatus)> = order.map(|c| (c, TransmitStatus::Transmitted)).to_vec();
            assert_eq!(answered, expected, "{rule}");
            assert_eq!(h.frames(&rx).len(), carried, "{rule}");
        }
    }

    /// An echo that never reached the port (its queue overflowed) leaves
    /// its request in the bus's hands until the PONG of a PING sent after
    /// it, which says the frame was on the bus; a later request waits for
    /// its own fate.
    #[test]
    fn a_pong_settles_a_request_whose_echo_never_came() {
        let (mut h, ctl, port, _rx) = bus(&[]);
        let mut node = forwarded(3);
        (0..2).for_each(|n| h.send(&ctl, port, numbered(n)));
        // The PING through an inbox, as the bridge thread sends it.
        let (to_bus, inbox) = fieldhub_bus::inbox::inbox(Arc::new(SteppedByHand));
        to_bus.send(Inbound::Ping { client: ctl.id, nonce: 2 }).unwrap();
        h.bus.take_input(&inbox);
        h.send(&ctl, port, numbered(2));
        h.step();
        let items: Vec<Outbound> = h
            .items(&ctl)
            .into_iter()
            .filter(|item| !matches!(item, Outbound::Frame { frame, .. } if frame.data()[0] == 1))
            .collect();
        let transmitted = |c| (c, TransmitStatus::Transmitted);
        assert_eq!(answers(&mut node, items), [transmitted(1), transmitted(3), transmitted(2)]);
        assert!(node.unechoed(3).is_empty() && node.requests.is_empty());
    }

    #[test]
    fn an_echo_without_a_request_in_the_bus_hands_answers_nothing() {
        let mut idle = forwarded(1);
        idle.forwarded = 0;
        assert!(idle.confirm(&numbered(0), 1).is_none(), "nothing forwarded, nothing to confirm");
        assert_eq!(idle.drop_oldest(2).1, 2, "and nothing to cancel");
        assert_eq!(idle.requests.len(), 1, "the request still waits for the bridge thread");
    }

    #[test]
    fn state_change_frames_map_to_silkit_error_states() {
        let passive = ErrorCounters { tec: 128, ..Default::default() };
        let frame = state_change_frame(Confined::Active, &passive).unwrap();
        assert_eq!(error_state_of(&frame), Some(ErrorState::Passive));
        let bus_off = ErrorCounters { tec: 256, bus_off_until: Some(1), ..Default::default() };
        let frame = state_change_frame(Confined::Passive, &bus_off).unwrap();
        assert_eq!(error_state_of(&frame), Some(ErrorState::BusOff));
        let recovered = ErrorCounters::default();
        let frame = state_change_frame(Confined::BusOff, &recovered).unwrap();
        assert_eq!(error_state_of(&frame), Some(ErrorState::Active));
        let frame = state_change_frame(Confined::Passive, &recovered).unwrap();
        assert_eq!(error_state_of(&frame), Some(ErrorState::Active));
        assert_eq!(error_state_of(&corruption_error_frame()), None, "a bus error is no state change");
    }
}
