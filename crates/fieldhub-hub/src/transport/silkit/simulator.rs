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
//! `Transmitted`, with the user context it sent. A controller has
//! [`CONTROLLER_QUEUE`] requests in flight at most; beyond, a request is
//! answered `TransmitQueueFull` at once. A request the bus never carries
//! (cancelled by the controller, refused, fault-dropped) is answered
//! `Canceled`. So every request gets exactly one answer: nothing is lost
//! silently.
//!
//! Threads: SIL Kit's threads run the sink (bookkeeping and immediate
//! answers only, never waiting on the bus); the bridge thread opens and
//! closes ports and forwards frames with transmit credit; the delivery
//! thread turns the bus's outbox into SIL Kit events. The table they share
//! is the bridge's own lock, never one the bus or the control plane takes.
//!
//! Invariants: the bus never waits on SIL Kit (ports are lossless, so a
//! slow SIL Kit holds its channel, as any lossless port does, but the bus
//! thread only queues); per controller, requests go to the bus in the
//! order SIL Kit delivered them, and answers come in that order.
//!
//! Imports `bridge.rs` only of `silkit/`.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{RecvTimeoutError, Sender};
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
}

/// One SIL Kit controller: a port of the channel.
struct Node {
    /// `None` until the bus opened the port.
    port: Option<u16>,
    /// Requests not yet answered, oldest first: the first `forwarded` are
    /// in the bus's hands, the rest wait for the bridge thread.
    requests: VecDeque<Request>,
    forwarded: usize,
    /// A controller the simulator has not heard a mode from counts as
    /// started: it may have started before it learnt of the simulator.
    started: bool,
    baud_warned: bool,
}

#[derive(Default)]
struct Table {
    nodes: HashMap<ControllerDescriptor, Node>,
    by_port: HashMap<u16, ControllerDescriptor>,
    carries_fd: bool,
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
            Err(RecvTimeoutError::Timeout) => continue,
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
    info!(participant = %shared.participant, canceled, queue_full, refused, "SIL Kit simulator left");
}

/// What SIL Kit's threads run for every request.
fn sink(shared: Arc<Shared>, work: Sender<Work>) -> SimulatorSink {
    Box::new(move |producer: &EventProducer, event: SimulatorEvent| match event {
        SimulatorEvent::ControllerAdded(controller) => {
            let node = Node { port: None, requests: VecDeque::new(), forwarded: 0, started: true, baud_warned: false };
            shared.table().nodes.insert(controller, node);
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
            let request = Request { frame, user_context };
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
        let carries_fd = table.carries_fd;
        let node = table.nodes.get_mut(&controller)?;
        let port = node.port?;
        let at = node.forwarded;
        let frame = node.requests.get(at)?.frame;
        if !frame.is_fd() || carries_fd {
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
                Outbound::TxDropped { reason, dropped, .. } => {
                    warn!(participant = %shared.participant, dropped, "frames of a SIL Kit controller {}", reason.describe());
                }
                Outbound::RxOverflow { .. }
                | Outbound::ChannelState { .. }
                | Outbound::PortClosed { .. }
                | Outbound::Pong { .. }
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
        let (skipped, matched) = confirmed(node, &sent);
        drop(table);
        // Frames the bus never carried (fault-dropped, discarded while
        // unplugged) went before this one in the port's queue.
        for request in &skipped {
            shared.answer(producer, controller, request, TransmitStatus::Canceled);
        }
        let Some(request) = matched else { return };
        let at = meta.timestamp_ns;
        let shown = producer.frame(&sent, at, Direction::Send, request.user_context, &[controller]).and_then(|()| {
            let id = request.frame.id();
            producer.transmit_status(controller, id, TransmitStatus::Transmitted, at, request.user_context)
        });
        if let Err(e) = shown {
            warn!(participant = %shared.participant, error = %e, "cannot show a SIL Kit controller its frame");
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

/// The requests a controller's echo `sent` answers: those before it that
/// the bus never carried (a fault rule dropped them, or they were discarded
/// while the node was bus off or unplugged), and the one it confirms — the
/// oldest forwarded request with this frame, else, when a fault rule changed
/// the frame on its way, the oldest forwarded one (a port's frames reach
/// the bus in the order it sent them).
fn confirmed(node: &mut Node, sent: &Frame) -> (Vec<Request>, Option<Request>) {
    let forwarded = node.forwarded.min(node.requests.len());
    let Some(at) = node.requests.iter().take(forwarded).position(|r| r.frame == *sent) else {
        node.forwarded = forwarded.saturating_sub(1);
        return (Vec::new(), if forwarded > 0 { node.requests.pop_front() } else { None });
    };
    let skipped: Vec<Request> = node.requests.drain(..at).collect();
    node.forwarded = forwarded - at - 1;
    (skipped, node.requests.pop_front())
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
    use fieldhub_bus::fault::corruption_error_frame;

    fn node_with(frames: &[u32], forwarded: usize) -> Node {
        let requests = frames
            .iter()
            .enumerate()
            .map(|(n, &id)| Request { frame: Frame::can(id, false, &[1]).unwrap(), user_context: n + 1 })
            .collect();
        Node { port: Some(1), requests, forwarded, started: true, baud_warned: false }
    }

    #[test]
    fn an_echo_confirms_its_request_and_cancels_the_ones_the_bus_never_carried() {
        let mut node = node_with(&[1, 2, 3, 4], 3);
        let (skipped, matched) = confirmed(&mut node, &Frame::can(3, false, &[1]).unwrap());
        assert_eq!(skipped.iter().map(|r| r.user_context).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(matched.map(|r| r.user_context), Some(3));
        assert_eq!((node.forwarded, node.requests.len()), (0, 1), "the fourth still waits for the bridge");
    }

    #[test]
    fn an_echo_a_fault_rule_changed_confirms_the_oldest_forwarded_request() {
        let mut node = node_with(&[1, 2], 2);
        let (skipped, matched) = confirmed(&mut node, &Frame::can(1, false, &[0xFF]).unwrap());
        assert!(skipped.is_empty());
        assert_eq!(matched.map(|r| r.user_context), Some(1));
        assert_eq!(node.forwarded, 1);
        let mut idle = node_with(&[7], 0);
        let (skipped, matched) = confirmed(&mut idle, &Frame::can(7, false, &[1]).unwrap());
        assert!(skipped.is_empty() && matched.is_none(), "nothing forwarded, nothing to confirm");
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
