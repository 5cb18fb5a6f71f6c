//! Vector SIL Kit CAN networks the hub joins (`[[silkit]]`): each is one
//! SIL Kit participant and, to the bus, one client with one port on its
//! channel — the way a SocketCAN interface is (`socketcan.rs`).
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
//! - Without `libSilKit.so` or its registry the rest of the hub runs: the
//!   library's absence is logged once when the hub starts; a registry not
//!   (yet) there is retried every [`JOIN_RETRY`].

pub mod simulator;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, SendTimeoutError, Sender};
use fieldhub_proto::frame::Frame;
use fieldhub_proto::wire::{ChannelFlags, PortOptions};
use fieldhub_silkit::{CanParticipant, ConvertError, JoinOptions, SilKitLibrary, SyncOptions};
use tracing::{error, info, warn};

use crate::config::{ChannelConfig, SilKitConfig, SilKitMode};
use crate::session::peer_user::PeerOrigin;
use crate::session::{ClientSlot, Sessions};
use fieldhub_bus::credit::TxCredit;
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, Outbox, QueueOutbox};

/// Frames from SIL Kit waiting for the bridge thread: enough for a burst
/// while the bus is busy, bounded so a flood holds SIL Kit back.
pub const SILKIT_QUEUE: usize = 4096;

/// How long to wait before joining again when the registry was not there.
pub const JOIN_RETRY: Duration = Duration::from_secs(2);

/// The step a synchronised bridge asks SIL Kit for: 1 ms. SIL Kit steps
/// every participant at the smallest step any asks for, so a smaller
/// participant step still rules.
pub const SYNC_STEP_NS: u64 = 1_000_000;

/// How often waiting threads look whether the bridge is stopping.
const LOOK: Duration = Duration::from_millis(100);

/// A frame from SIL Kit with its event timestamp (SIL Kit time, ns).
type Stamped = (u64, Frame);

/// One configured SIL Kit network, not joined yet.
pub struct SilKitBridge {
    pub(super) config: SilKitConfig,
    pub(super) library: Arc<SilKitLibrary>,
    /// The channel's nominal bit rate, which SIL Kit controllers' baud rate
    /// requests are held against.
    pub(super) bitrate: u32,
}

impl SilKitBridge {
    /// Start a bridge thread for every `[[silkit]]` section. Without SIL
    /// Kit's library none starts: the error (where it was looked for, how
    /// to fix it) is logged and the hub goes on.
    pub fn start_all(
        configs: &[SilKitConfig],
        channels: &[ChannelConfig],
        sessions: &Arc<Sessions>,
    ) -> std::io::Result<Vec<JoinHandle<()>>> {
        if configs.is_empty() {
            return Ok(Vec::new());
        }
        let library = match SilKitLibrary::load() {
            Ok(library) => Arc::new(library),
            Err(e) => {
                let channels: Vec<&str> = configs.iter().map(|c| c.channel.as_str()).collect();
                error!(channels = %channels.join(","), "SIL Kit bridges not started: {e}");
                return Ok(Vec::new());
            }
        };
        info!(library = library.origin(), "SIL Kit library loaded");
        configs
            .iter()
            .map(|config| {
                let bitrate = channels.iter().find(|c| c.name == config.channel).map_or(0, |c| c.bitrate);
                let bridge = Self { config: config.clone(), library: Arc::clone(&library), bitrate };
                let sessions = Arc::clone(sessions);
                std::thread::Builder::new()
                    .name(format!("fh-silkit-{}", config.channel))
                    .spawn(move || bridge.run(&sessions))
            })
            .collect()
    }

    fn run(self, sessions: &Arc<Sessions>) {
        if self.config.mode == SilKitMode::Simulator {
            return simulator::run(&self, sessions);
        }
        let (to_bridge, from_silkit) = crossbeam_channel::bounded(SILKIT_QUEUE);
        let (step_tx, steps) = crossbeam_channel::unbounded();
        let refused = Arc::new(AtomicU64::new(0));
        let closed = Arc::new(AtomicBool::new(false));
        let Some(participant) = self.join(sessions, &to_bridge, &step_tx, &refused, &closed) else { return };
        drop(step_tx);
        let member = Membership { participant, closed: Arc::clone(&closed) };
        drop(to_bridge);
        let name = self.config.participant_name();
        let Some(Attached { mut slot, outbox, credit }) = self.attach(sessions, "SIL Kit", &closed) else { return };
        let open = Inbound::OpenPort {
            client: slot.id(),
            request: 1,
            // SIL Kit's controllers take CAN FD; on a classic channel the
            // forwarder keeps SIL Kit's FD frames back (`Forwarder`).
            options: PortOptions::FD | PortOptions::BLOCK_ON_OVERFLOW,
            channel: self.config.channel.clone(),
            port_name: name.clone(),
        };
        if sessions.inbox.send(open).is_err() {
            return;
        }
        let Some((port, carries_fd)) = self.wait_until_opened(&outbox, sessions) else { return };
        info!(participant = %name, network = %self.config.network, registry = %self.config.registry,
            channel = %self.config.channel, synchronized = self.config.synchronized, "SIL Kit network joined");
        let forwarder =
            Forwarder { slot: &slot, port, credit: &credit, carries_fd, refused: &refused, participant: &name };
        if self.config.synchronized {
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
                .name(format!("fh-silkit-w-{}", self.config.channel))
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

    /// Admit the bridge to the bus as a client (named `silkit-PARTICIPANT`)
    /// whose hang-up sets `closed`; the thread calling this is the one that
    /// sends its frames, so it waits for the client's transmit credit.
    pub(super) fn attach(
        &self,
        sessions: &Arc<Sessions>,
        kind: &'static str,
        closed: &Arc<AtomicBool>,
    ) -> Option<Attached> {
        let name = self.config.participant_name();
        let peer = format!("silkit:{}/{}", self.config.registry, self.config.network);
        let mut slot = match sessions.admit(kind, peer, PeerOrigin::Operator) {
            Ok(slot) => slot,
            Err(violation) => {
                error!(participant = %name, "the hub cannot attach the SIL Kit bridge: {}", violation.text);
                return None;
            }
        };
        slot.name_as(format!("silkit-{name}"));
        if self.config.synchronized {
            slot.synchronize();
        }
        let outbox = QueueOutbox::new(None, Arc::clone(sessions.inbox.bus_wake()));
        let hang_up = {
            let closed = Arc::clone(closed);
            Box::new(move || closed.store(true, Ordering::Release))
        };
        let credit = Arc::new(TxCredit::for_current_thread());
        slot.attach(Outbox::new(outbox.clone()), hang_up, Arc::clone(&credit), None).ok()?;
        Some(Attached { slot, outbox, credit })
    }

    /// Run `attempt` until it joins, retrying every [`JOIN_RETRY`] while the
    /// registry is not there; `None` when the hub stops first.
    pub(super) fn join_retrying<T>(
        &self,
        sessions: &Sessions,
        mut attempt: impl FnMut() -> Result<T, fieldhub_silkit::SilKitError>,
    ) -> Option<T> {
        let participant = self.config.participant_name();
        let registry = &self.config.registry;
        let mut failures = 0u64;
        while !sessions.stopping() {
            match attempt() {
                Ok(joined) => return Some(joined),
                Err(e) => {
                    failures += 1;
                    // The first failure says why; a registry that stays
                    // away is reported once a minute, not every retry.
                    if failures == 1 || failures % 30 == 0 {
                        warn!(participant = %participant, registry = %registry, failures,
                            "cannot join SIL Kit; retrying every {} s: {e}", JOIN_RETRY.as_secs());
                    }
                    // In slices, so a hub that stops does not wait out the retry.
                    let retry_at = Instant::now() + JOIN_RETRY;
                    while !sessions.stopping() && Instant::now() < retry_at {
                        std::thread::sleep(LOOK);
                    }
                }
            }
        }
        None
    }

    /// Join the network, retrying while the registry is not there; `None`
    /// when the hub stops first.
    fn join(
        &self,
        sessions: &Sessions,
        queue: &Sender<Stamped>,
        steps: &Sender<(u64, u64)>,
        refused: &Arc<AtomicU64>,
        closed: &Arc<AtomicBool>,
    ) -> Option<CanParticipant> {
        let options = JoinOptions {
            registry: self.config.registry.clone(),
            participant: self.config.participant_name(),
            network: self.config.network.clone(),
        };
        self.join_retrying(sessions, || {
            let sink =
                handler_sink(queue.clone(), Arc::clone(refused), Arc::clone(closed), options.participant.clone());
            let library = Arc::clone(&self.library);
            if self.config.synchronized {
                let sync = SyncOptions { required_participants: self.config.required_names(), step_ns: SYNC_STEP_NS };
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

    /// The bus's answer to `OPEN_PORT`: the port handle and whether its
    /// channel carries CAN FD, or `None` (logged) when it refused.
    fn wait_until_opened(&self, outbox: &QueueOutbox, sessions: &Sessions) -> Option<(u16, bool)> {
        while !sessions.stopping() {
            match outbox.take_timeout(LOOK) {
                Some(Outbound::PortOpened { port, channel_flags, .. }) => {
                    return Some((port, channel_flags.contains(ChannelFlags::CANFD)))
                }
                Some(Outbound::Error { text, .. }) => {
                    error!(channel = %self.config.channel, "the bus refused the SIL Kit bridge's port: {text}");
                    return None;
                }
                Some(Outbound::Goodbye { .. }) => return None,
                Some(_) | None => continue,
            }
        }
        None
    }
}

/// The bridge's client on the bus.
pub(super) struct Attached {
    pub slot: ClientSlot,
    pub outbox: Arc<QueueOutbox>,
    pub credit: Arc<TxCredit>,
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
    let mut to_silkit = ToSilKit { member: &member, name, refused: 0 };
    // SYNC POINT with the hang-up's Release store.
    while !closed.load(Ordering::Acquire) {
        let Some(item) = outbox.take_timeout(LOOK) else { continue };
        outbox.took();
        // Not a synchronised participant: no GRANT comes.
        if let Taken::Leaving = to_silkit.take(item) {
            break;
        }
    }
    if to_silkit.refused > 0 {
        warn!(participant = name, refused = to_silkit.refused, "frames that did not go to SIL Kit");
    }
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
    let mut to_silkit = ToSilKit { member, name, refused: 0 };
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
/// refused.
struct ToSilKit<'a> {
    member: &'a Membership,
    name: &'a str,
    refused: u64,
}

impl ToSilKit<'_> {
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
            // A lossless port is never overrun; the rest are answers to
            // requests the bridge does not make.
            Outbound::RxOverflow { .. }
            | Outbound::PortOpened { .. }
            | Outbound::PortClosed { .. }
            | Outbound::Pong { .. }
            | Outbound::Stats { .. } => Taken::Going,
        }
    }
}
