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
//! - `Transmitted` at the frame's echo ([`Node::confirm`](node::Node::confirm));
//! - `Canceled` at the bus's `TX_DROPPED` for the port, which names how
//!   many of its frames are off the bus (a fault rule, bus-off, unplugged):
//!   the controller's oldest requests in the bus's hands, in order
//!   ([`Node::drop_oldest`](node::Node::drop_oldest));
//! - `Canceled` at once for a request the bus never gets (the controller
//!   stopped or cancelled, a CAN FD frame on a classic channel, no port),
//!   `TransmitQueueFull` at once beyond [`CONTROLLER_QUEUE`](forward::CONTROLLER_QUEUE) requests.
//!
//! The bus queues `TX_DROPPED` when it drops the frames, but one it cannot
//! queue then (the client's reply reserve is full) waits for the port's
//! next drop or the client's next `PING`; and an echo is missed when the
//! port's queue overflows. So while requests are in the bus's hands and
//! SIL Kit is quiet, the bridge thread sends a `PING`: its `PONG` comes only
//! once every frame forwarded before it is on the bus or reported dropped
//! (6.4, 6.9), and a request forwarded before it that is still unanswered
//! then was on the bus without its echo ([`Node::unechoed`](node::Node::unechoed)).
//!
//!
//! Threads, and the hand-offs a frame takes (issue 35): SIL Kit's I/O
//! thread runs the sink, which hands a controller's frame straight to the
//! bus when it can go now (`forward.rs`), then waits a moment for the bus's
//! answer and produces the events itself (`delivery.rs`): a round trip
//! through the simulator crosses to the bus thread and back, no bridge
//! thread in between. The bridge thread opens and closes ports, forwards
//! the frames that had to wait (for credit, for their port, behind their
//! controller's earlier ones) and pings; the delivery thread produces what
//! the bus queues while no SIL Kit thread waits for it. The sink never
//! waits for the bus beyond that bounded wait, and never for credit.
//!
//! Invariants: the bus never waits on SIL Kit (ports are lossless, so a
//! slow SIL Kit holds its channel, as any lossless port does, but the bus
//! thread only queues and rings); per controller, requests go to the bus in
//! the order SIL Kit delivered them, and the bus's reports of one port come
//! in the order it decided the frames' fates, and are produced in that
//! order by one consumer at a time, so answers come in request order unless
//! a `delay` rule let later frames overtake a held one.
//!
//! Files: `node.rs` (a controller and its requests), `shared.rs` (what the
//! threads share), `forward.rs` (the way in), `delivery.rs` (the way out);
//! this file starts them and runs the bridge thread. Imports `bridge.rs`
//! only of `silkit/`.

mod delivery;
mod forward;
mod node;
mod shared;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{RecvTimeoutError, Sender};
use fieldhub_proto::fate::DropReason;
use fieldhub_proto::wire::PortOptions;
use fieldhub_silkit::netsim_ffi::{mode_flag, ControllerDescriptor, CONTROLLER_STATE_STARTED};
use fieldhub_silkit::{
    ErrorState, EventProducer, NetworkSimulator, SimulatorEvent, SimulatorOptions, SimulatorSink, TransmitStatus,
};
use tracing::{error, info, warn};

use self::delivery::{Delivery, DeliveryWake};
use self::forward::{Forwarder, Stopped, Taken};
use self::node::{Node, Request};
use self::shared::{wall_clock_ns, Shared};
use super::bridge::{Attached, SilKitBridge};
use crate::config::SilKitConfig;
use crate::session::bridge_port::NotOpened;
use crate::session::Sessions;
use fieldhub_bus::inbox::{ClientId, Inbound};

/// How often the bridge thread looks whether the bridge is stopping, and
/// how long SIL Kit stays quiet before it pings.
const LOOK: Duration = Duration::from_millis(100);

/// Work for the bridge thread, in SIL Kit's order.
enum Work {
    /// Open a port for the controller.
    Open(ControllerDescriptor),
    /// Close the controller's port; cancel what it still waits for.
    Close(ControllerDescriptor),
    /// The controller has one more frame waiting to be forwarded.
    Forward(ControllerDescriptor),
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
    let wake = Arc::new(DeliveryWake::default());
    let attached = bridge.attach(sessions, "SIL Kit simulator", &closed, DeliveryWake::notify(&wake));
    let Some(Attached { mut slot, outbox, credit }) = attached else { return };
    let shared =
        Arc::new(Shared::new(config.participant_name(), config.channel.clone(), bridge.bitrate, Arc::clone(&closed)));
    let client = slot.id();
    let forwarder = Arc::new(Forwarder { client, credit, sessions: Arc::clone(sessions) });
    let delivery = Arc::new(Delivery::new(Arc::clone(&shared), Arc::clone(&outbox), wake, !bridge.timed));
    let (work_tx, work) = crossbeam_channel::unbounded();
    let options = SimulatorOptions {
        registry: config.registry.clone(),
        participant: config.participant_name(),
        network: config.network.clone(),
    };
    let simulator = bridge.join_retrying(sessions, || {
        let sink = sink(Arc::clone(&shared), Arc::clone(&forwarder), Arc::clone(&delivery), work_tx.clone());
        NetworkSimulator::start(Arc::clone(&bridge.library), &options, sink)
    });
    let Some(simulator) = simulator else { return slot.detach("the hub is stopping") };
    drop(work_tx);
    info!(participant = %options.participant, network = %options.network, registry = %options.registry,
        channel = %config.channel, "SIL Kit network simulated");
    let producer = simulator.producer();
    let delivery_thread = {
        let (delivery, producer) = (Arc::clone(&delivery), Arc::clone(&producer));
        std::thread::Builder::new()
            .name(format!("fh-silkit-d-{}", config.channel))
            .spawn(move || delivery.run(&producer))
    };
    let stop = || sessions.stopping() || closed.load(Ordering::Acquire);
    // A transmit credit taken for a frame that was gone when it came.
    let mut held = false;
    while !stop() {
        let item = match work.recv_timeout(LOOK) {
            Ok(item) => item,
            Err(RecvTimeoutError::Timeout) => {
                if forwarder.ping_if_waiting(&shared) {
                    continue;
                }
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let sent = match item {
            Work::Open(controller) => open_port(&shared, sessions, client, config, controller, &stop),
            Work::Close(controller) => close_port(&shared, &producer, sessions, client, controller),
            Work::Forward(controller) => match forwarder.forward_next(&shared, controller, &mut held, &stop) {
                Ok(Some(refused)) => {
                    refuse_fd(&shared, &producer, controller, &refused);
                    true
                }
                Ok(None) => true,
                Err(Stopped) => false,
            },
        };
        if !sent {
            break;
        }
    }
    slot.detach("the SIL Kit simulator is closing");
    outbox.close();
    closed.store(true, Ordering::Release);
    delivery.stop();
    match delivery_thread {
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
    // Where the bus's items were produced: SIL Kit's own thread (no hand-off) or the delivery thread.
    let (produced_inline, produced_by_thread) = delivery.produced();
    info!(participant = %shared.participant, canceled, queue_full, refused, dropped = %dropped.join(","), unechoed,
        produced_inline, produced_by_thread, "SIL Kit simulator left");
}

/// What SIL Kit's threads run for every request.
fn sink(shared: Arc<Shared>, forwarder: Arc<Forwarder>, delivery: Arc<Delivery>, work: Sender<Work>) -> SimulatorSink {
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
            delivery.expect_answer();
            let taken = forwarder.take(&shared, controller, Request { frame, user_context, ticket: 0 });
            delivery.answer_inline(producer, matches!(taken, Taken::Forwarded));
            match taken {
                Taken::Forwarded => {}
                Taken::Queued => {
                    let _ = work.send(Work::Forward(controller));
                }
                Taken::Refused(request, status) => shared.answer(producer, controller, &request, status),
            }
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
        // them `Canceled` before they reach the bus (`forward.rs`).
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

/// Answer a CAN FD frame on a classic channel `Canceled`; the first is
/// logged with what to change.
fn refuse_fd(shared: &Shared, producer: &EventProducer, controller: ControllerDescriptor, refused: &Request) {
    if shared.unshowable.fetch_add(1, Ordering::Relaxed) == 0 {
        warn!(participant = %shared.participant, channel = %shared.channel,
            "refusing CAN FD frames from SIL Kit: the channel is classic CAN; configure it with protocol = \"canfd\"");
    }
    shared.answer(producer, controller, refused, TransmitStatus::Canceled);
}
