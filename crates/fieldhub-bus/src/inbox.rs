//! What reaches the bus thread, and how it is woken.
//!
//! - [`Inbound`]: a request to the bus — a client attaching, a frame, a port
//!   to open, a control request, a client gone. Every transport and the
//!   control plane queue them on one bounded queue ([`InboxSender`]); a
//!   client's frames and requests travel in the order it sent them.
//! - [`Intake`]: a client whose messages the bus reads itself, from a ring in
//!   shared memory, instead of through the queue.
//! - [`Wake`]: how a sender wakes the bus thread; the runtime that runs the
//!   bus provides it (the hub's is its futex bell, `bus_thread/wake.rs`).

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use fieldhub_proto::wire::{ErrorCode, PortOptions};
use fieldhub_proto::Frame;

use crate::access::Access;
use crate::credit::TxCredit;
use crate::cyclic::{FrameProducer, JobError, JobId, JobOrigin};
use crate::outbox::Outbox;
use crate::request::{ControlRequest, ControlResult};

/// Hub-wide client id, as sent in `WELCOME`.
pub type ClientId = u32;

/// Capacity of the bus thread's inbound queue, in items.
pub const INBOX_CAPACITY: usize = 64 * 1024;

/// Closes one client's connection from the bus side.
pub type HangUp = Box<dyn Fn() + Send>;

/// A transport's request to the bus.
pub enum Inbound {
    /// A client finished its handshake. `hang_up` closes its connection at
    /// once, for when even an error report cannot be queued to it.
    /// `credit` bounds the frames it may have waiting in the bus. `intake`
    /// is set for a client whose ring the bus reads itself. `synchronized`:
    /// a participant of virtual time (its `HELLO` said so); `ahead`: one
    /// that may step ahead (`AHEAD`, with `synchronized`). `access`:
    /// what its token lets it do, checked as each of its ports opens.
    Attach {
        client: ClientId,
        name: String,
        outbox: Outbox,
        hang_up: HangUp,
        credit: Arc<TxCredit>,
        intake: Option<Box<dyn Intake>>,
        synchronized: bool,
        ahead: bool,
        access: Access,
    },
    /// `OPEN_PORT`.
    OpenPort { client: ClientId, request: u32, options: PortOptions, channel: String, port_name: String },
    /// `CLOSE_PORT`.
    ClosePort { client: ClientId, port: u16 },
    /// One frame record of a `FRAMES` message.
    Frame { client: ClientId, port: u16, frame: Frame },
    /// One frame record of an `AHEAD` participant with the bus time it is
    /// for (its record's `timestamp_ns`; `spec/protocol.md` 6.8).
    FrameAt { client: ClientId, port: u16, frame: Frame, at_ns: u64 },
    /// Consecutive frame records of one client (a stream's `FRAMES` batch,
    /// as far as its transmit credit went): one queue item, not one per
    /// frame. The bus hands the emptied buffer back ([`Inbox::recycle`]).
    Frames { client: ClientId, frames: FrameRun },
    /// `PING`: answered once everything the client sent before it is on the bus.
    Ping { client: ClientId, nonce: u64 },
    /// `STATS_REQUEST`.
    Stats { client: ClientId, request: u32 },
    /// `STEP`: a synchronised participant is done up to bus time `until_ns`.
    Step { client: ClientId, until_ns: u64 },
    /// `STEP_AHEAD`: an `AHEAD` participant is done up to `until_ns` in
    /// steps of `period_ns`, unless a frame matching `filters` (none: any)
    /// is delivered to one of its ports first.
    StepAhead { client: ClientId, until_ns: u64, period_ns: u64, filters: Vec<fieldhub_proto::wire::WakeFilter> },
    /// A control-plane request (HTTP API); applied between two frames.
    /// Boxed: a request (a gateway, route or fault to add) is three times
    /// a frame's size, and every `Inbound` is as large as its largest
    /// variant; control requests are rare, frames are not.
    Control { request: Box<ControlRequest>, reply: ControlReply },
    /// The client's session ended; `reason` is for the log.
    Detach { client: ClientId, reason: String },
    /// A relayed channel's owner committed a frame (`federation/`):
    /// deliver it to the channel's ports. `origin` names the local port (its
    /// id's number, as [`Uplinked`] gave it out) and arrival number when one
    /// of this hub's ports sent it.
    ///
    /// [`Uplinked`]: crate::federation::Uplinked
    Committed { channel: u16, origin: Option<(u32, u64)>, frame: Frame },
    /// The owner hub dropped a frame of a local port of a relayed channel
    /// (`origin`: its number and arrival, as in `Committed`) for `reason`:
    /// it leaves its FIFO and its sender is told (`TX_DROPPED`).
    CommitDropped { channel: u16, origin: (u32, u64), reason: fieldhub_proto::fate::DropReason },
    /// What its clients must know of a federated channel (its owner hub gone
    /// or back, events lost for good): tell every client port on it
    /// (`CHANNEL_STATE`); a port opened while it waits is told at once.
    FederationState { channel: u16, condition: fieldhub_proto::fate::ChannelCondition, missed: u32, text: String },
    /// A federated channel changes hands: with `uplink`, this hub relays it
    /// from now on (an owner that found a newer one); without, it sequences
    /// it (a standby taking over).
    FederationRole { channel: u16, uplink: Option<crossbeam_channel::Sender<crate::federation::Uplinked>> },
    /// A relayed channel has a new owner: hand every frame still waiting in
    /// its ports' FIFOs to the uplink again, in arrival order, as `round`.
    FederationResend { channel: u16, round: u64 },
    /// Add, change or remove a cyclic job sending from one of the client's
    /// ports on bus time (`bus/cyclic_jobs.rs`).
    Cyclic { client: ClientId, request: CyclicRequest },
    /// Stop the bus: say goodbye to every client and return.
    Shutdown,
}

/// The bus thread moves an `Inbound` for every frame a ring client sends
/// (written into the intake's buffer, read out as the bus takes it): the
/// frame variants, not a rare request, set its size — 112, a `Committed`
/// frame with its origin (248 with the control request inline, whose moves
/// were calls to `memcpy`).
const _: () = assert!(std::mem::size_of::<Inbound>() <= 112);

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Inbound::Attach { client, name, .. } => write!(f, "Attach({client}, {name})"),
            Inbound::OpenPort { client, channel, .. } => write!(f, "OpenPort({client}, {channel})"),
            Inbound::ClosePort { client, port } => write!(f, "ClosePort({client}, {port})"),
            Inbound::Frame { client, port, frame } => write!(f, "Frame({client}, {port}, {frame:?})"),
            Inbound::FrameAt { client, port, frame, at_ns } => {
                write!(f, "FrameAt({client}, {port}, {frame:?}, {at_ns})")
            }
            Inbound::Frames { client, frames } => write!(f, "Frames({client}, {} frames)", frames.len()),
            Inbound::Ping { client, nonce } => write!(f, "Ping({client}, {nonce})"),
            Inbound::Stats { client, request } => write!(f, "Stats({client}, {request})"),
            Inbound::Step { client, until_ns } => write!(f, "Step({client}, {until_ns})"),
            Inbound::StepAhead { client, until_ns, period_ns, filters } => {
                write!(f, "StepAhead({client}, {until_ns}, every {period_ns}, {} filters)", filters.len())
            }
            Inbound::Control { request, .. } => write!(f, "Control({request:?})"),
            Inbound::Detach { client, reason } => write!(f, "Detach({client}, {reason})"),
            Inbound::Committed { channel, frame, .. } => write!(f, "Committed({channel}, {frame:?})"),
            Inbound::CommitDropped { channel, origin, reason } => {
                write!(f, "CommitDropped({channel}, {origin:?}, {})", reason.name())
            }
            Inbound::FederationState { channel, condition, missed, text } => {
                write!(f, "FederationState({channel}, {}, {missed}, {text})", condition.name())
            }
            Inbound::FederationRole { channel, uplink } => {
                write!(f, "FederationRole({channel}, {})", if uplink.is_some() { "relay" } else { "owner" })
            }
            Inbound::FederationResend { channel, round } => write!(f, "FederationResend({channel}, {round})"),
            Inbound::Cyclic { client, request } => write!(f, "Cyclic({client}, {request:?})"),
            Inbound::Shutdown => write!(f, "Shutdown"),
        }
    }
}

/// How reading a client's ring ended.
#[derive(Debug)]
pub enum IntakeEnd {
    /// The client broke the protocol: tell it why and cut it off.
    Violation(ErrorCode, String),
    /// The client said `GOODBYE`.
    Left(String),
}

/// A client whose messages the bus thread takes from shared memory itself.
pub trait Intake: Send {
    /// Turn up to `budget` waiting messages into requests appended to `out`.
    /// Returns whether anything was taken.
    fn poll(&mut self, out: &mut Vec<Inbound>, budget: usize) -> Result<bool, IntakeEnd>;
    /// Whether a message waits that can be taken now.
    fn ready(&self) -> bool;
    /// Whether nothing is left to take.
    fn drained(&self) -> bool;
}

/// How senders wake the bus thread after queueing work for it. The runtime
/// that runs the bus implements it (the hub: a futex bell shared with its
/// shared-memory clients); the bus crate only calls it.
pub trait Wake: Send + Sync {
    /// Work was queued: wake the bus if it sleeps. Cheap when it is awake.
    fn ring(&self);
    /// Work the bus cannot see in its queue or rings (a lossless receiver
    /// it waits for took frames): end its current wait.
    fn poke(&self);
}

/// Where the answer to a cyclic job's request goes: the job, or why not.
/// Called once on the bus thread (it must not block).
pub type JobReply = Box<dyn FnOnce(Result<JobId, JobError>) + Send>;

/// What a client asks of its cyclic jobs. A job sends from a port of the
/// client that added it, and only that client may change or remove it; its
/// jobs end when the port closes or the client leaves.
pub enum CyclicRequest {
    /// Send `producer`'s frames from `port` every `period_ns`, the first
    /// cycle `start_delay_ns` from now (bus time) — or, with an `origin`,
    /// from the bus time the first job of that origin was added.
    Add {
        port: u16,
        producer: Box<dyn FrameProducer>,
        period_ns: u64,
        start_delay_ns: u64,
        origin: Option<JobOrigin>,
        reply: JobReply,
    },
    /// New period; the next cycle `start_delay_ns` from now.
    Update {
        id: JobId,
        period_ns: u64,
        start_delay_ns: u64,
        reply: JobReply,
    },
    Remove {
        id: JobId,
        reply: JobReply,
    },
}

impl std::fmt::Debug for CyclicRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CyclicRequest::Add { port, period_ns, .. } => write!(f, "Add(port {port}, every {period_ns} ns)"),
            CyclicRequest::Update { id, period_ns, .. } => write!(f, "Update({id:?}, every {period_ns} ns)"),
            CyclicRequest::Remove { id, .. } => write!(f, "Remove({id:?})"),
        }
    }
}

/// Where the answer to a control request goes: the control plane's
/// waiting task, called once on the bus thread (it must not block).
pub type ControlReply = Box<dyn FnOnce(ControlResult) + Send>;

/// Frame records of one client with their ports, in order, each with the
/// bus time it is for: its record's `timestamp_ns` from an `AHEAD`
/// participant, else 0 (now).
pub type FrameRun = Vec<(u16, Frame, u64)>;

/// Emptied [`FrameRun`] buffers on their way back from the bus to the
/// transports: after warm-up, forwarding a batch allocates nothing.
#[derive(Clone)]
struct RunPool {
    back: Sender<FrameRun>,
    free: Receiver<FrameRun>,
}

/// Buffers the pool keeps; more in flight at once are dropped when done.
const POOLED_RUNS: usize = 256;

impl RunPool {
    fn new() -> Self {
        let (back, free) = crossbeam_channel::bounded(POOLED_RUNS);
        Self { back, free }
    }
}

/// The bus thread's input queue.
pub struct Inbox {
    queue: Receiver<Inbound>,
    wake: Arc<dyn Wake>,
    runs: RunPool,
}

impl Inbox {
    /// The next waiting request; `Err(Disconnected)` once every sender is gone.
    pub fn try_recv(&self) -> Result<Inbound, TryRecvError> {
        self.queue.try_recv()
    }

    /// Whether a request waits.
    pub fn has_waiting(&self) -> bool {
        !self.queue.is_empty()
    }

    /// How the bus thread waits.
    pub fn wake(&self) -> &Arc<dyn Wake> {
        &self.wake
    }

    /// Give a handled [`Inbound::Frames`] buffer back for reuse.
    pub fn recycle(&self, mut frames: FrameRun) {
        frames.clear();
        let _ = self.runs.back.try_send(frames);
    }
}

/// The sending half of the inbound queue: every send wakes the bus.
#[derive(Clone)]
pub struct InboxSender {
    queue: Sender<Inbound>,
    wake: Arc<dyn Wake>,
    runs: RunPool,
}

/// A request was not queued: the bus thread has stopped.
#[derive(Debug, PartialEq, Eq)]
pub struct NotQueued;

impl InboxSender {
    /// Queue a request, waiting while the queue is full (the bus drains it
    /// without waiting on anyone, so the wait is short).
    pub fn send(&self, request: Inbound) -> Result<(), NotQueued> {
        self.queue.send(request).map_err(|_| NotQueued)?;
        self.wake.ring();
        Ok(())
    }

    /// Queue a request, waiting at most `timeout` while the queue is full.
    pub fn send_timeout(&self, request: Inbound, timeout: Duration) -> Result<(), NotQueued> {
        self.queue.send_timeout(request, timeout).map_err(|_| NotQueued)?;
        self.wake.ring();
        Ok(())
    }

    /// Queue a request without waking the bus: for a sender that queues
    /// many and calls [`InboxSender::wake_bus`] once after them. A full
    /// queue wakes the bus before waiting for room.
    pub fn send_quietly(&self, request: Inbound) -> Result<(), NotQueued> {
        match self.queue.try_send(request) {
            Ok(()) => Ok(()),
            Err(crossbeam_channel::TrySendError::Full(request)) => self.send(request),
            Err(crossbeam_channel::TrySendError::Disconnected(_)) => Err(NotQueued),
        }
    }

    /// An empty buffer for an [`Inbound::Frames`]: one the bus gave back,
    /// or a new one while none has come back yet.
    pub fn frame_run(&self) -> FrameRun {
        self.runs.free.try_recv().unwrap_or_else(|_| Vec::with_capacity(crate::credit::TX_CREDITS as usize))
    }

    /// Wake the bus for requests queued quietly.
    pub fn wake_bus(&self) {
        self.wake.ring();
    }

    /// The bus's wake-up, for outboxes that tell it about freed room.
    pub fn bus_wake(&self) -> &Arc<dyn Wake> {
        &self.wake
    }
}

/// A fresh inbound queue for one bus thread, woken through `wake`.
pub fn inbox(wake: Arc<dyn Wake>) -> (InboxSender, Inbox) {
    let (queue, receiver) = crossbeam_channel::bounded(INBOX_CAPACITY);
    let runs = RunPool::new();
    (InboxSender { queue, wake: Arc::clone(&wake), runs: runs.clone() }, Inbox { queue: receiver, wake, runs })
}
