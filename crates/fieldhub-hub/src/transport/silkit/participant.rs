//! `[[silkit]] mode = "participant"`: the bridge is one SIL Kit participant
//! and, to the bus, one client with one port on its channel — the way a
//! SocketCAN interface is (`socketcan.rs`). [`run`] is the bridge thread.
//!
//! Frames SIL Kit's participants send arrive on SIL Kit's threads; the
//! handler queues them (bounded, [`SILKIT_QUEUE`]) for the bridge's own
//! thread, which forwards them with transmit credit like any sender, so
//! they are arbitrated, timed and subject to fault rules like any port's.
//! A writer thread hands the channel's frames from other ports to SIL Kit
//! (`SilKit_CanController_SendFrame`).
//!
//! With `synchronized = true` there is no writer thread: the bridge thread
//! runs SIL Kit's steps as steps of the hub's virtual time (`step_loop`),
//! forwarding, stepping and writing in one order.
//!
//! Invariants:
//! - The bus never waits on SIL Kit: it only queues into the port's outbox;
//!   SIL Kit's step handler only queues the step for the bridge thread.
//!   When the handler's queue is full, SIL Kit's thread waits for room (SIL
//!   Kit holds its senders back), never the bus.
//! - Nothing is lost between channel and SIL Kit: the port is lossless (a
//!   writer that falls behind holds its channel, as any lossless port does),
//!   and frames from SIL Kit wait for credit instead of being dropped. A
//!   frame one side cannot carry (error frames, CAN XL, CAN FD on a classic
//!   channel) is counted and logged once.
//! - No echo loops: the port is opened without `RECEIVE_OWN`, the SIL Kit
//!   handler takes the receive direction only.
//! - Order is kept each way: SIL Kit delivers on one thread into one FIFO,
//!   one thread forwards; one writer sends.
//! - A frame from SIL Kit that the bus takes off the bus (a fault rule,
//!   bus-off, unplugged: `TX_DROPPED`, `spec/protocol.md` 6.9) cannot be
//!   answered to its sender: SIL Kit's own simple simulation acknowledged
//!   it `Transmitted` when it was sent, before the hub got it, and a
//!   participant has no call that answers another's request. So the drops
//!   are counted by reason (here and in the port's `STATS`) and logged: the
//!   first of each reason, and the totals when the bridge leaves.
//!
//! Imports `bridge.rs` only of `silkit/`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender};
use fieldhub_proto::fate::DropReason;
use fieldhub_proto::frame::Frame;
use fieldhub_proto::wire::PortOptions;
use fieldhub_silkit::{CanParticipant, ConvertError, JoinOptions, SyncOptions};
use tracing::{error, info, warn};

use super::bridge::{Attached, SilKitBridge};
use crate::session::{ClientSlot, Sessions};
use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, QueueOutbox};

/// Frames from SIL Kit waiting for the bridge thread: enough for a burst
/// while the bus is busy, bounded so a flood holds SIL Kit back.
pub const SILKIT_QUEUE: usize = 4096;

/// The step a synchronised bridge asks SIL Kit for: 1 ms. SIL Kit steps
/// every participant at the smallest step any asks for, so a smaller
/// participant step still rules.
pub const SYNC_STEP_NS: u64 = 1_000_000;

/// How often waiting threads look whether the bridge is stopping.
const LOOK: Duration = Duration::from_millis(100);

/// A frame from SIL Kit with its event timestamp (SIL Kit time, ns).
type Stamped = (u64, Frame);

/// Join `bridge`'s network as a participant and carry frames both ways
/// until the hub stops or the bus drops the bridge.
pub(super) fn run(bridge: &SilKitBridge, sessions: &Arc<Sessions>) {
    let (to_bridge, from_silkit) = crossbeam_channel::bounded(SILKIT_QUEUE);
    let (step_tx, steps) = crossbeam_channel::unbounded();
    let refused = Arc::new(AtomicU64::new(0));
    let closed = Arc::new(AtomicBool::new(false));
    let Some(participant) = join(bridge, sessions, &to_bridge, &step_tx, &refused, &closed) else { return };
    drop(step_tx);
    let member = Membership { participant, closed: Arc::clone(&closed) };
    drop(to_bridge);
    let name = bridge.config.participant_name();
    let Some(Attached { mut slot, outbox, credit }) = bridge.attach(sessions, "SIL Kit", &closed, None) else { return };
    let open = Inbound::OpenPort {
        client: slot.id(),
        request: 1,
        // SIL Kit's controllers take CAN FD; on a classic channel the
        // forwarder keeps SIL Kit's FD frames back (`Forwarder`).
        options: PortOptions::FD | PortOptions::BLOCK_ON_OVERFLOW,
        channel: bridge.config.channel.clone(),
        port_name: name.clone(),
    };
    if sessions.inbox.send(open).is_err() {
        return;
    }
    let Some((port, carries_fd)) = bridge.wait_until_opened(&outbox, sessions) else { return };
    info!(participant = %name, network = %bridge.config.network, registry = %bridge.config.registry,
        channel = %bridge.config.channel, synchronized = bridge.config.synchronized, "SIL Kit network joined");
    let forwarder = Forwarder { slot: &slot, port, credit: &credit, carries_fd, refused: &refused, participant: &name };
    if bridge.config.synchronized {
        let stop = || sessions.stopping() || closed.load(Ordering::Acquire);
        step_loop(&member, &forwarder, &outbox, &steps, &from_silkit, &stop);
        drop(from_silkit);
        slot.detach("the SIL Kit bridge is closing");
        outbox.close();
        drop(member);
        return;
    }
    let writer = {
        let (closed, outbox, name) = (Arc::clone(&closed), Arc::clone(&outbox), name.clone());
        std::thread::Builder::new()
            .name(format!("fh-silkit-w-{}", bridge.config.channel))
            .spawn(move || write_loop(member, &name, &outbox, &closed))
    };
    let stop = || sessions.stopping() || closed.load(Ordering::Acquire);
    forwarder.run(&from_silkit, &stop);
    // SIL Kit's handler may wait for room; with the queue gone it
    // returns at once, so the writer can destroy the participant.
    drop(from_silkit);
    slot.detach("the SIL Kit bridge is closing");
    outbox.close();
    match writer {
        Ok(handle) => {
            let _ = handle.join();
        }
        Err(e) => error!(participant = %name, error = %e, "cannot start the SIL Kit writer thread"),
    }
    let refused = refused.load(Ordering::Relaxed);
    if refused > 0 {
        warn!(participant = %name, refused, "frames from SIL Kit the hub cannot carry");
    }
}

/// Join the network, retrying while the registry is not there; `None`
/// when the hub stops first.
fn join(
    bridge: &SilKitBridge,
    sessions: &Sessions,
    queue: &Sender<Stamped>,
    steps: &Sender<(u64, u64)>,
    refused: &Arc<AtomicU64>,
    closed: &Arc<AtomicBool>,
) -> Option<CanParticipant> {
    let options = JoinOptions {
        registry: bridge.config.registry.clone(),
        participant: bridge.config.participant_name(),
        network: bridge.config.network.clone(),
    };
    bridge.join_retrying(sessions, || {
        let sink = handler_sink(queue.clone(), Arc::clone(refused), Arc::clone(closed), options.participant.clone());
        let library = Arc::clone(&bridge.library);
        if bridge.config.synchronized {
            let sync = SyncOptions { required_participants: bridge.config.required_names(), step_ns: SYNC_STEP_NS };
            let steps = steps.clone();
            // SIL Kit's thread only hands the step over: the bridge
            // thread runs it and completes it.
            let step = Box::new(move |now, duration| {
                let _ = steps.send((now, duration));
            });
            CanParticipant::join_synchronized(library, &options, &sync, sink, step)
        } else {
            CanParticipant::join(library, &options, sink)
        }
    })
}

/// The joined participant, leaving the simulation when dropped — on every
/// path, early returns included.
struct Membership {
    participant: CanParticipant,
    closed: Arc<AtomicBool>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        // Set before the participant (a field) is destroyed, which waits
        // for SIL Kit's threads: a handler waiting for queue room sees it
        // and returns.
        self.closed.store(true, Ordering::Release);
    }
}

/// What SIL Kit's thread runs for every frame: queue it for the bridge
/// thread, waiting while the queue is full, until the bridge is closed.
fn handler_sink(
    queue: Sender<Stamped>,
    refused: Arc<AtomicU64>,
    closed: Arc<AtomicBool>,
    participant: String,
) -> fieldhub_silkit::FrameSink {
    Box::new(move |timestamp: u64, frame: Result<Frame, ConvertError>| {
        let mut frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                if refused.fetch_add(1, Ordering::Relaxed) == 0 {
                    warn!(participant = %participant, "dropping a frame from SIL Kit: {e}");
                }
                return;
            }
        };
        loop {
            match queue.send_timeout((timestamp, frame), LOOK) {
                Ok(()) | Err(SendTimeoutError::Disconnected(_)) => return,
                // SYNC POINT with the Release stores of `Membership::drop`
                // and the hang-up: the bridge is closing, nobody takes it.
                Err(SendTimeoutError::Timeout(_)) if closed.load(Ordering::Acquire) => return,
                Err(SendTimeoutError::Timeout((_, back))) => frame = back,
            }
        }
    })
}

/// What forwards SIL Kit's frames to the bus: the bridge's own thread.
struct Forwarder<'a> {
    slot: &'a ClientSlot,
    port: u16,
    credit: &'a TxCredit,
    /// Whether the channel carries CAN FD; when it does not, SIL Kit's FD
    /// frames stop here, counted, instead of each earning an error report.
    carries_fd: bool,
    refused: &'a AtomicU64,
    participant: &'a str,
}

impl Forwarder<'_> {
    /// Forward SIL Kit's frames to the bus, each with a transmit credit.
    fn run(&self, queue: &Receiver<Stamped>, stop: &dyn Fn() -> bool) {
        while !stop() {
            let frame = match queue.recv_timeout(LOOK) {
                Ok((_, frame)) => frame,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return,
            };
            if !self.forward(frame, stop) {
                return;
            }
        }
    }

    /// Send one frame to the bus with a transmit credit; `false` when the
    /// bridge is stopping or the bus is gone.
    fn forward(&self, frame: Frame, stop: &dyn Fn() -> bool) -> bool {
        if frame.is_fd() && !self.carries_fd {
            if self.refused.fetch_add(1, Ordering::Relaxed) == 0 {
                warn!(
                    participant = self.participant,
                    "dropping CAN FD frames from SIL Kit: the channel is \
                    classic CAN; configure it with protocol = \"canfd\""
                );
            }
            return true;
        }
        if !self.credit.acquire(stop) {
            return false;
        }
        let forward = Inbound::Frame { client: self.slot.id(), port: self.port, frame };
        self.slot.sessions().inbox.send(forward).is_ok()
    }
}

/// Hand the bus's frames to SIL Kit until the bus says goodbye or drops the
/// port's client; then leave the simulation.
fn write_loop(member: Membership, name: &str, outbox: &QueueOutbox, closed: &AtomicBool) {
    let mut to_silkit = ToSilKit::new(&member, name);
    // SYNC POINT with the hang-up's Release store.
    while !closed.load(Ordering::Acquire) {
        let Some(item) = outbox.take_timeout(LOOK) else { continue };
        outbox.took();
        // Not a synchronised participant: no GRANT comes.
        if let Taken::Leaving = to_silkit.take(item) {
            break;
        }
    }
    // Its totals are logged before the participant goes.
    drop(to_silkit);
    // Leaving: `member`'s drop closes the bridge and destroys the
    // participant; the bridge thread sees `closed` and detaches.
    drop(member);
}

/// The synchronised bridge: each SIL Kit step is one step of the hub's
/// virtual time, on this thread.
///
/// At SIL Kit's step `(now, duration)` (bus time stands at `now`: the last
/// grant), the frames SIL Kit's participants sent before `now` go to the bus
/// — they arrive at bus time `now`, one step after they were sent, as their
/// senders' steps are over only then; frames stamped `now` or later wait
/// for the next step, however early they arrived, so the trace depends on
/// SIL Kit time alone. Then `STEP now + duration`; the frames of the hub's
/// window go to SIL Kit as they come, and the grant, which follows them in
/// the outbox, completes SIL Kit's step. SIL Kit's thread only queues the
/// step; the bus thread never waits on either.
fn step_loop(
    member: &Membership,
    forwarder: &Forwarder<'_>,
    outbox: &QueueOutbox,
    steps: &Receiver<(u64, u64)>,
    from_silkit: &Receiver<Stamped>,
    stop: &dyn Fn() -> bool,
) {
    let name = forwarder.participant;
    let mut pending: std::collections::VecDeque<Stamped> = std::collections::VecDeque::new();
    let mut to_silkit = ToSilKit::new(member, name);
    while !stop() {
        let (now, duration) = match steps.recv_timeout(LOOK) {
            Ok(step) => step,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return,
        };
        pending.extend(from_silkit.try_iter());
        while pending.front().is_some_and(|(stamp, _)| *stamp < now) {
            let Some((_, frame)) = pending.pop_front() else { break };
            if !forwarder.forward(frame, stop) {
                return;
            }
        }
        let until_ns = now.saturating_add(duration.max(1));
        if forwarder.slot.sessions().inbox.send(Inbound::Step { client: forwarder.slot.id(), until_ns }).is_err() {
            return;
        }
        // The window's frames, then its grant.
        loop {
            if stop() {
                return;
            }
            let Some(item) = outbox.take_timeout(LOOK) else { continue };
            outbox.took();
            match to_silkit.take(item) {
                Taken::Granted(now_ns) if now_ns >= until_ns => break,
                // An earlier grant (the one after attaching) changes nothing.
                Taken::Going | Taken::Granted(_) => {}
                Taken::Leaving => return,
            }
        }
        if let Err(e) = member.participant.complete_step() {
            error!(participant = name, error = %e, "cannot complete the SIL Kit step; leaving");
            return;
        }
    }
}

/// What one item of the bus's outbox means to the bridge.
enum Taken {
    /// Handled (a frame handed to SIL Kit, a report logged); go on.
    Going,
    /// Virtual time reached this bus time.
    Granted(u64),
    /// The bus said goodbye or reported a fatal error.
    Leaving,
}

/// Hands the bus's outbox items to SIL Kit, counting the frames SIL Kit
/// refused and the bridge's frames the bus dropped; logs the totals when
/// dropped, as the bridge leaves.
struct ToSilKit<'a> {
    member: &'a Membership,
    name: &'a str,
    refused: u64,
    /// By reason, as [`DropReason::ALL`].
    dropped: [u64; DropReason::ALL.len()],
}

impl Drop for ToSilKit<'_> {
    fn drop(&mut self) {
        if self.refused > 0 {
            warn!(participant = self.name, refused = self.refused, "frames that did not go to SIL Kit");
        }
        let dropped: Vec<String> = DropReason::ALL
            .iter()
            .zip(self.dropped)
            .filter(|&(_, n)| n > 0)
            .map(|(reason, n)| format!("{}={n}", reason.name()))
            .collect();
        if !dropped.is_empty() {
            warn!(participant = self.name, dropped = %dropped.join(","),
                "frames from SIL Kit the bus dropped, each already acknowledged to its sender by SIL Kit");
        }
    }
}

impl<'a> ToSilKit<'a> {
    fn new(member: &'a Membership, name: &'a str) -> Self {
        Self { member, name, refused: 0, dropped: [0; DropReason::ALL.len()] }
    }

    fn take(&mut self, item: Outbound) -> Taken {
        match item {
            Outbound::Frame { frame, .. } => {
                if let Err(e) = self.member.participant.send(&frame) {
                    self.refused += 1;
                    // The first refusal says why; later ones are only counted.
                    if self.refused == 1 {
                        warn!(participant = self.name, error = %e, "a frame did not go to SIL Kit");
                    }
                }
                Taken::Going
            }
            Outbound::Grant { now_ns } => Taken::Granted(now_ns),
            Outbound::Error { text, fatal, .. } => {
                warn!(participant = self.name, "the bus reports: {text}");
                if fatal {
                    Taken::Leaving
                } else {
                    Taken::Going
                }
            }
            Outbound::Goodbye { .. } => Taken::Leaving,
            Outbound::TxDropped { reason, dropped, .. } => {
                // DropReason's wire values are 1 to 4, in the order of DropReason::ALL.
                let count = &mut self.dropped[reason as usize - 1];
                if *count == 0 {
                    warn!(
                        participant = self.name,
                        dropped,
                        "frames from SIL Kit {}; SIL Kit acknowledged them to \
                        their senders when they were sent (a participant cannot answer another's request): \
                        mode = \"simulator\" answers such frames Canceled",
                        reason.describe()
                    );
                }
                *count += u64::from(dropped);
                Taken::Going
            }
            // A lossless port is never overrun; the rest are answers to
            // requests the bridge does not make.
            Outbound::RxOverflow { .. }
            | Outbound::ChannelState { .. }
            | Outbound::PortOpened { .. }
            | Outbound::PortClosed { .. }
            | Outbound::Pong { .. }
            | Outbound::Stats { .. } => Taken::Going,
        }
    }
}
