//! Shared-memory clients (`spec/shm.md`): session setup over a unix socket,
//! then rings the bus thread reads and writes itself.
//!
//! - [`ShmListener`]: the session socket `DIR/NAME.sock` in the user's
//!   private directory. The reactor accepts on it and runs the handshake
//!   through the session layer; [`open_session`] then creates the client's
//!   segment, attaches the client to the bus and passes the segment and the
//!   hub's bell segment with `WELCOME` (`SCM_RIGHTS`). After that the reactor
//!   only watches the socket: its end (a client that closed, crashed or was
//!   killed) is the client's detach, at once.
//! - [`ShmLink`]: the bus's side of one client's segment; it is the client's
//!   [`Outbox`] (frames and replies go into the to-client ring: a round's
//!   frames as few `FRAMES` messages, published and rung once per bus round).
//! - [`ShmPeer`]: the client's [`Intake`]: the bus reads the to-hub ring
//!   through the session layer's one message mapping — `FRAMES`, the data
//!   path, read in one pass with each frame written where the bus takes it
//!   from — taking transmit credit per frame and leaving frames in the ring
//!   while none is left (the client's ring fills and its sender waits).
//!
//! No thread sits between a shared-memory client and the bus. Nothing read
//! from the segment is trusted: a broken ring cuts that client off alone.

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::wire::{self, BatchEncoder, ErrorCode};
use fieldhub_proto::{Frame, FrameMeta};
use fieldhub_shm::layout::SLOT_SIZE;
use fieldhub_shm::ring::{slots_for, RingRef};
use fieldhub_shm::{socket, BellSegment, ClientSegment, Consumer, Producer, RoundLock, SegmentHeader};
use tracing::warn;

use crate::session::{request_of, ClientSlot, FrameCursor, Request, Violation};
use fieldhub_bus::credit::{TxCredit, Waiter};
use fieldhub_bus::inbox::{ClientId, Inbound, Intake, IntakeEnd};
use fieldhub_bus::outbox::{Outbound, Outbox, OutboxSink, Refused};

/// Slots of a to-client ring kept free of frames for replies: the largest
/// message (a `STATS` document of `MAX_MESSAGE_LEN`, 2049 slots) plus room
/// for a few hundred small replies.
pub const CONTROL_RESERVE_SLOTS: u32 = 2304;
/// The hub's shared-memory service: what every session it opens gets.
pub struct ShmService {
    /// The hub's bell segment, repaired on every attach.
    pub bell: Arc<BellSegment>,
    /// Its descriptor, passed to every client.
    pub bell_fd: OwnedFd,
    /// Slots of each client's to-client ring (`[hub] shm_ring_slots`).
    pub ring_slots: u32,
}

/// The session socket of a hub serving shared memory.
pub struct ShmListener {
    listener: UnixListener,
    path: PathBuf,
}

impl ShmListener {
    /// Listen as `shm://name` in `dir` (`socket::runtime_dir`): create the
    /// private directory, refuse a name another live hub serves, replace a
    /// dead hub's socket.
    pub fn bind(dir: &Path, name: &str) -> std::io::Result<Self> {
        let path = socket::socket_path_in(dir, name)
            .map_err(|why| std::io::Error::new(std::io::ErrorKind::InvalidInput, why))?;
        socket::ensure_private_dir(dir)?;
        if std::fs::symlink_metadata(&path).is_ok() {
            if UnixStream::connect(&path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("another hub already serves shm://{name} ({}); choose another name", path.display()),
                ));
            }
            std::fs::remove_file(&path)?;
        }
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        Ok(Self { listener, path })
    }

    /// The session socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The listening socket and its path, for the reactor.
    pub fn into_parts(self) -> (UnixListener, PathBuf) {
        (self.listener, self.path)
    }
}

/// Set up a shared-memory session for a client whose `HELLO` was accepted:
/// create its segment, attach it to the bus (which reads its ring itself),
/// and send `WELCOME` with the segment and the hub's bell segment
/// (`SCM_RIGHTS`). Returns the link, which the caller ends when the session
/// socket ends.
pub fn open_session(
    slot: &mut ClientSlot,
    socket: &UnixStream,
    service: &ShmService,
) -> Result<Arc<ShmLink>, Violation> {
    // Every client maps the bell page and may have written its header (or
    // punched a hole in it): the new client finds the hub's header again
    // (`spec/shm.md` 2.2; clients do not check it, this is for diagnostics).
    if let Some(fault) = service.bell.repair_header() {
        warn!(
            client = slot.id(),
            "a shared-memory client damaged the hub's bell page ({fault}); its header was rewritten"
        );
    }
    let bell = &service.bell_fd;
    let header = SegmentHeader::with_to_client_slots(slot.id(), service.ring_slots);
    let (segment, segment_fd) = ClientSegment::create(header).map_err(|e| {
        Violation::new(ErrorCode::Internal, format!("the hub cannot create a shared-memory segment: {e}"))
    })?;
    let socket_handle =
        socket.try_clone().map_err(|e| Violation::new(ErrorCode::Internal, format!("session socket: {e}")))?;
    let link = Arc::new(ShmLink::new(segment, Starts::default(), Some(socket_handle)));
    let hang_up_handle =
        socket.try_clone().map_err(|e| Violation::new(ErrorCode::Internal, format!("session socket: {e}")))?;
    let hang_up = Box::new(move || {
        let _ = hang_up_handle.shutdown(std::net::Shutdown::Both);
    });
    // Nobody waits on this credit: the bus takes it as it reads the ring.
    let credit = Arc::new(TxCredit::new(Waiter::Bus));
    let intake = Box::new(ShmPeer::new(slot.id(), Arc::clone(&link), Arc::clone(&credit), slot.stamps_frames()));
    slot.attach(Outbox::new(link.clone()), hang_up, credit, Some(intake))
        .map_err(|_| Violation::new(ErrorCode::ShuttingDown, "the hub is shutting down"))?;
    socket::send_with_fds(socket, &slot.welcome(), &[segment_fd.as_fd(), bell.as_fd()])
        .map_err(|e| Violation::new(ErrorCode::Internal, format!("cannot send WELCOME: {e}")))?;
    // The mappings keep the memory; the descriptor is not needed.
    drop(segment_fd);
    Ok(link)
}

/// The bus's side of one shared-memory client: its segment and the
/// producer state of the to-client ring.
pub struct ShmLink {
    segment: ClientSegment,
    /// Where the bus takes up the to-hub ring (past a handshake that went
    /// through the ring itself, for ivshmem).
    to_hub_start: u32,
    /// The to-client ring's producer state. Written only by the bus thread
    /// (the ring's single producer); the lock exists so `Outbox` stays
    /// `Clone + Sync`, and is never contended. The bus keeps it from a
    /// round's first frame to the round's `flush` ([`RoundLock`]): taking
    /// and leaving it per frame were three quarters of `try_frame`.
    to_client: RoundLock<ToClient>,
    /// Slots frames may still add, as `to_client` was left by its last
    /// write ([`ShmLink::write`]): `has_frame_room` answers from it without
    /// the lock while it is above 0. Every change of `to_client` is made in
    /// `write`, which sets this anew at its end; the consumer only frees
    /// slots, so a room seen stays room.
    frame_room: AtomicU32,
    /// Slots of the to-client ring frames may fill: the client's receive
    /// buffer before its ports' overflow policy applies (at most one slot a
    /// frame; batched, about three classic frames share one). The rest is
    /// kept for replies.
    frame_share: u32,
    /// Set when the session socket ended: the client is going.
    gone: AtomicBool,
    /// The session socket, shut down when the bus lets go of the client
    /// (`None` for ivshmem, whose poller notices the link's drop instead).
    socket: Option<UnixStream>,
}

/// Ring positions a link starts from: 0 both ways for a fresh segment; past
/// `HELLO` and `WELCOME` when the handshake went through the rings.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Starts {
    pub to_hub_tail: u32,
    pub to_client_head: u32,
}

struct ToClient {
    producer: Producer,
    /// Encoding buffer for replies and reports, reused.
    scratch: Vec<u8>,
    /// The frames taken since the last publish: one open `FRAMES` message,
    /// published at the end of the bus round (or when it is full, or before
    /// a reply, which must follow them). Reused: taking a frame allocates
    /// nothing.
    frames: Vec<u8>,
    batch: Option<BatchEncoder>,
    /// Something was published since the client's doorbell last rang.
    unrung: bool,
}

/// Most slots one published `FRAMES` message of the hub's takes: about 50
/// classic frames. Bigger batches would only delay the first of them. A
/// record that alone needs more (a CAN XL or raw frame of over about 1,990
/// bytes: 17 slots for 2,048) goes out as a batch of its own
/// (spec/shm.md 6).
const BATCH_SLOTS: u32 = 16;
/// Bytes of the largest batch: [`BATCH_SLOTS`], or one record of
/// `MAX_RECORD_DATA` bytes with a CAN XL acceptance field, whichever is
/// more — the batch buffer's capacity, so it never grows on the data path.
const MAX_BATCH_BYTES: usize = {
    let one_record = wire::LENGTH_PREFIX
        + wire::BATCH_HEADER
        + wire::RECORD_HEADER
        + wire::XL_AF_LEN
        + fieldhub_proto::limits::MAX_RECORD_DATA;
    let batch = BATCH_SLOTS as usize * SLOT_SIZE;
    if one_record > batch {
        one_record
    } else {
        batch
    }
};

impl ToClient {
    /// Publish the open batch. It was checked to fit when its last frame
    /// was taken, and only the client frees slots since: a ring that has no
    /// room for it now was tampered with.
    fn publish(&mut self, ring: &RingRef<'_>) -> Result<(), String> {
        let Some(batch) = self.batch.take() else { return Ok(()) };
        if batch.count() == 0 {
            return Ok(());
        }
        batch.finish(&mut self.frames);
        match self.producer.try_push(ring, &self.frames) {
            Ok(true) => {
                self.unrung = true;
                Ok(())
            }
            Ok(false) => Err("its tail went back after the hub checked for room".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// How [`ShmLink::write`] takes the to-client lock.
#[derive(Clone, Copy)]
enum Lock {
    /// For this write.
    Once,
    /// Kept until the round's end: the bus's frames.
    ForRound,
    /// Left at the round's end, with the round's hold.
    EndRound,
}

impl std::fmt::Debug for ShmLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmLink").field("client", &self.segment.header().client_id).finish_non_exhaustive()
    }
}

impl ShmLink {
    pub(crate) fn new(segment: ClientSegment, starts: Starts, socket: Option<UnixStream>) -> Self {
        let to_client = ToClient {
            producer: Producer::starting_at(starts.to_client_head),
            scratch: Vec::with_capacity(256),
            frames: Vec::with_capacity(MAX_BATCH_BYTES),
            batch: None,
            unrung: false,
        };
        let gone = AtomicBool::new(false);
        let frame_share = segment.header().to_client_slots.saturating_sub(CONTROL_RESERVE_SLOTS);
        Self {
            segment,
            to_hub_start: starts.to_hub_tail,
            to_client: RoundLock::new(to_client),
            frame_room: AtomicU32::new(0),
            frame_share,
            gone,
            socket,
        }
    }

    /// The client's segment.
    pub(crate) fn segment(&self) -> &ClientSegment {
        &self.segment
    }

    /// The client is going (its session ended): nothing more is written.
    pub(crate) fn end(&self) {
        // SYNC POINT with `push`'s Acquire load.
        self.gone.store(true, Ordering::Release);
    }

    /// Change the to-client state under its lock (`lock`: how, a
    /// [`RoundLock`] method), then leave the slots frames may still add in
    /// `frame_room` (the open batch's slots count as taken, as
    /// `has_frame_room` counts them).
    fn write<R>(&self, lock: Lock, change: impl FnOnce(&mut ToClient) -> R) -> R {
        let change = |out: &mut ToClient| {
            let result = change(out);
            let open = out.batch.as_ref().map_or(0, |_| slots_for(out.frames.len()));
            let room = out.producer.spare_as_seen(self.frame_share).saturating_sub(open);
            self.frame_room.store(room, Ordering::Relaxed);
            result
        };
        match lock {
            Lock::Once => self.to_client.write(change),
            Lock::ForRound => self.to_client.write_for_round(change),
            Lock::EndRound => self.to_client.end_round(change),
        }
    }

    /// Publish a reply or report behind the frames taken before it.
    fn push_control(&self, item: &Outbound) -> Result<(), Refused> {
        // SYNC POINT with `end`'s Release store.
        if self.gone.load(Ordering::Acquire) {
            return Err(Refused::Gone);
        }
        let ring = self.segment.to_client();
        self.write(Lock::Once, |out| {
            if let Err(why) = out.publish(&ring) {
                return Err(self.corrupt(&why));
            }
            let ToClient { producer, scratch, unrung, .. } = out;
            scratch.clear();
            item.encode(scratch);
            match producer.try_push(&ring, scratch) {
                Ok(true) => {
                    *unrung = true;
                    Ok(())
                }
                Ok(false) => {
                    // Full: make sure a sleeping client hears of what is
                    // waiting, or it would never make room.
                    if std::mem::take(unrung) {
                        self.segment.client_bell().ring();
                    }
                    Err(Refused::Full)
                }
                Err(e) => Err(self.corrupt(&e.to_string())),
            }
        })
    }

    /// The client broke its ring's indices: it is cut off.
    fn corrupt(&self, why: &str) -> Refused {
        warn!(client = self.segment.header().client_id, "disconnecting client: its to-client ring is corrupt: {why}");
        // SYNC POINT with `push`'s Acquire load (same thread today; the
        // flag is also set by the reactor when the session socket ends).
        self.gone.store(true, Ordering::Release);
        if let Some(socket) = &self.socket {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
        Refused::Gone
    }
}

impl OutboxSink for ShmLink {
    fn has_frame_room(&self) -> bool {
        // Asked for every lossless receiver before every frame: a room seen
        // at the last write answers without the lock (its two atomic
        // operations were most of this function's time in perf).
        // Relaxed: only the bus thread writes and reads this.
        if self.frame_room.load(Ordering::Relaxed) > 0 {
            return true;
        }
        self.write(Lock::Once, |out| {
            // A record adds at most one slot to the open batch, and a new
            // batch takes one.
            let open = out.batch.as_ref().map_or(0, |_| slots_for(out.frames.len()));
            out.producer.fits_within(&self.segment.to_client(), open + 1, self.frame_share).unwrap_or(false)
        })
    }

    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Add the frame to the open batch if the batch, published, would keep
    /// the frame share.
    fn try_frame(&self, port: u16, frame: &Frame, meta: &FrameMeta) -> Result<(), Refused> {
        // SYNC POINT with `end`'s Release store.
        if self.gone.load(Ordering::Acquire) {
            return Err(Refused::Gone);
        }
        let ring = self.segment.to_client();
        self.write(Lock::ForRound, |out| {
            let record = wire::record_len(frame);
            let full = |batch: &BatchEncoder, frames: &Vec<u8>| {
                !batch.fits(frames, frame) || slots_for(frames.len() + record) > BATCH_SLOTS
            };
            if out.batch.as_ref().is_some_and(|batch| full(batch, &out.frames)) {
                if let Err(why) = out.publish(&ring) {
                    return Err(self.corrupt(&why));
                }
            }
            let batch = out.batch.get_or_insert_with(|| {
                out.frames.clear();
                BatchEncoder::begin(&mut out.frames)
            });
            match out.producer.fits_within(&ring, slots_for(out.frames.len() + record), self.frame_share) {
                Ok(true) => {
                    batch.push(&mut out.frames, port, frame, meta);
                    Ok(())
                }
                Ok(false) => {
                    // Full: what was taken goes out now, and a sleeping client
                    // hears of it, or it would never make room.
                    if let Err(why) = out.publish(&ring) {
                        return Err(self.corrupt(&why));
                    }
                    if std::mem::take(&mut out.unrung) {
                        self.segment.client_bell().ring();
                    }
                    Err(Refused::Full)
                }
                Err(e) => Err(self.corrupt(&e.to_string())),
            }
        })
    }

    fn try_control(&self, item: Outbound) -> Result<(), Refused> {
        self.push_control(&item)
    }

    /// Publish the round's frames and ring the client's doorbell if
    /// anything was published since the last ring (once per bus round, not
    /// per message).
    fn flush(&self) {
        let ring = self.segment.to_client();
        let (published, unrung) =
            self.write(Lock::EndRound, |out| (out.publish(&ring), std::mem::take(&mut out.unrung)));
        if let Err(why) = published {
            self.corrupt(&why);
        }
        if unrung {
            self.segment.client_bell().ring();
        }
    }
}

impl Drop for ShmLink {
    fn drop(&mut self) {
        // The bus has let go of the client (removed, rejected, or the hub
        // stops): the reactor and the client see the socket end.
        if let Some(socket) = &self.socket {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// What a ring client's frame becomes among the bus's requests before its
/// record is written in ([`CheckedRecord::write_into`]), with the bus time
/// it is for or not.
///
/// [`CheckedRecord::write_into`]: fieldhub_proto::wire::CheckedRecord::write_into
const FRAME_SLOT: Inbound = Inbound::Frame { client: 0, port: 0, frame: Frame::EMPTY };
const FRAME_AT_SLOT: Inbound = Inbound::FrameAt { client: 0, port: 0, frame: Frame::EMPTY, at_ns: 0 };

/// The bus's reader of one shared-memory client's to-hub ring.
pub struct ShmPeer {
    client: ClientId,
    link: Arc<ShmLink>,
    credit: Arc<TxCredit>,
    consumer: Consumer,
    /// Copy of the message at the ring's tail, reused.
    body: Vec<u8>,
    /// Where forwarding the `FRAMES` message at the tail stands.
    cursor: FrameCursor,
}

impl ShmPeer {
    /// `stamped`: the client said `AHEAD`, so its records' `timestamp_ns` is
    /// the bus time each frame is for.
    pub(crate) fn new(client: ClientId, link: Arc<ShmLink>, credit: Arc<TxCredit>, stamped: bool) -> Self {
        let consumer = Consumer::starting_at(link.to_hub_start);
        Self { client, link, credit, consumer, body: Vec::new(), cursor: FrameCursor::new(stamped) }
    }

    fn violation(v: Violation) -> IntakeEnd {
        IntakeEnd::Violation(v.code, v.text)
    }
}

impl Intake for ShmPeer {
    fn ready(&self) -> bool {
        // The credit's own limit: a participant of virtual time may have more
        // frames queued than a real-time client (`credit.rs`).
        self.consumer.has_message(&self.link.segment.to_hub()) && !self.credit.exhausted()
    }

    fn drained(&self) -> bool {
        !self.consumer.has_message(&self.link.segment.to_hub())
    }

    fn poll(&mut self, out: &mut Vec<Inbound>, budget: usize) -> Result<bool, IntakeEnd> {
        let ring = self.link.segment.to_hub();
        let client = self.client;
        let mut took = false;
        let result = loop {
            if out.len() >= budget {
                break Ok(());
            }
            let slots = match self.consumer.peek(&ring, MAX_MESSAGE_LEN as usize, &mut self.body) {
                Ok(Some(slots)) => slots,
                Ok(None) => break Ok(()),
                Err(e) => break Err(IntakeEnd::Violation(ErrorCode::Malformed, format!("corrupt to-hub ring: {e}"))),
            };
            if let Some((&wire::msg::FRAMES, payload)) = self.body.split_first() {
                // The data path: read in one pass, each frame written where
                // the bus takes it from (`forward_checked`), not through the
                // generic `Message`.
                let credit = &self.credit;
                let before = out.len();
                let forwarded = self.cursor.forward_checked(payload, |record, at_ns| {
                    if out.len() >= budget || !credit.try_acquire() {
                        return false;
                    }
                    // A constant pushed, then filled in where it lies: an
                    // `Inbound` built aside and copied in stalled on its
                    // own narrow stores (perf).
                    out.push(if at_ns == 0 { FRAME_SLOT } else { FRAME_AT_SLOT });
                    let slot = out.last_mut();
                    if let Some(
                        Inbound::Frame { client: c, port, frame } | Inbound::FrameAt { client: c, port, frame, .. },
                    ) = slot
                    {
                        (*c, *port) = (client, record.port());
                        record.write_into(frame);
                    }
                    if let Some(Inbound::FrameAt { at_ns: at, .. }) = out.last_mut() {
                        *at = at_ns;
                    }
                    true
                });
                match forwarded {
                    Ok(true) => {}
                    Ok(false) => {
                        took |= out.len() > before;
                        break Ok(());
                    }
                    Err(v) => {
                        // Refused whole: what was taken of it goes back.
                        for _ in before..out.len() {
                            credit.release();
                        }
                        out.truncate(before);
                        break Err(Self::violation(v));
                    }
                }
                self.consumer.advance(&ring, slots);
                took = true;
                continue;
            }
            let message = match wire::decode(&self.body) {
                Ok(message) => message,
                Err(e) => break Err(IntakeEnd::Violation(e.code(), e.to_string())),
            };
            match request_of(client, message) {
                Err(v) => break Err(Self::violation(v)),
                // A body whose type byte says FRAMES was forwarded above,
                // and decodes to nothing else.
                Ok(Request::Frames(_)) => unreachable!("FRAMES is forwarded before it is decoded"),
                Ok(Request::Bus(request)) => out.push(request),
                Ok(Request::Nothing) => {}
                Ok(Request::Goodbye(reason)) => {
                    self.consumer.advance(&ring, slots);
                    took = true;
                    break Err(IntakeEnd::Left(reason));
                }
            }
            self.consumer.advance(&ring, slots);
            took = true;
        };
        if took {
            // Frees slots: a client waiting for room hears of it.
            self.link.segment.space_bell().ring();
        }
        result.map(|()| took)
    }
}

#[cfg(test)]
mod tests {
    use fieldhub_proto::wire::Message;
    use fieldhub_proto::FrameFlags;

    use super::*;

    fn link() -> ShmLink {
        let (segment, _fd) = ClientSegment::create(SegmentHeader::standard(7)).expect("segment");
        ShmLink::new(segment, Starts::default(), None)
    }

    /// Every message the client would find in its to-client ring now.
    fn published(link: &ShmLink, consumer: &mut Consumer) -> Vec<Vec<u8>> {
        let ring = link.segment().to_client();
        let mut messages = Vec::new();
        let mut body = Vec::new();
        while consumer.pop(&ring, MAX_MESSAGE_LEN as usize, &mut body).expect("a sound ring") {
            messages.push(body.clone());
        }
        messages
    }

    fn frame_seqs(body: &[u8]) -> Vec<u64> {
        match wire::decode(body).expect("decodes") {
            Message::Frames(batch) => batch.iter().map(|r| r.meta.seq).collect(),
            other => panic!("expected FRAMES, got {}", other.type_name()),
        }
    }

    fn meta(seq: u64) -> FrameMeta {
        FrameMeta { channel: 1, sender: 2, seq, timestamp_ns: seq * 1000 }
    }

    /// Whether the ring, as it really is, has a slot for one more frame
    /// within the frame share: read under the lock, changing nothing.
    fn room_in_ring(link: &ShmLink) -> bool {
        link.to_client.write(|out| {
            let open = out.batch.as_ref().map_or(0, |_| slots_for(out.frames.len()));
            let used = out.producer.used_slots(&link.segment().to_client()).expect("a sound ring");
            used + open < link.frame_share
        })
    }

    /// A client's FRAMES message: a classic frame for each id of `ids` on
    /// port 1, carrying its id; the one with id `echo` (if any) flagged `ECHO`.
    fn batch_message(ids: std::ops::Range<u32>, echo: Option<u32>) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = BatchEncoder::begin(&mut out);
        for id in ids {
            let frame = Frame::can(id, false, &id.to_le_bytes()).unwrap().with_echo(Some(id) == echo);
            encoder.push(&mut out, 1, &frame, &FrameMeta::default());
        }
        encoder.finish(&mut out);
        out
    }

    /// An intake on a fresh segment (of a client whose records carry their
    /// bus time: `stamped`) and the client's producer of its ring.
    fn intake_of(stamped: bool) -> (ShmPeer, Arc<TxCredit>, Producer) {
        let link = Arc::new(link());
        let credit = Arc::new(TxCredit::new(Waiter::Bus));
        (ShmPeer::new(9, Arc::clone(&link), Arc::clone(&credit), stamped), credit, Producer::starting_at(0))
    }

    fn intake() -> (ShmPeer, Arc<TxCredit>, Producer) {
        intake_of(false)
    }

    fn frame_ids(requests: &[Inbound]) -> Vec<u32> {
        let id = |request: &Inbound| match request {
            Inbound::Frame { client: 9, port: 1, frame } => {
                assert_eq!(frame, &Frame::can(frame.id(), false, &frame.id().to_le_bytes()).unwrap());
                frame.id()
            }
            other => panic!("expected a frame of client 9 on port 1, got {other:?}"),
        };
        requests.iter().map(id).collect()
    }

    #[test]
    fn a_batch_cut_by_the_budget_resumes_at_its_next_record_every_frame_once_in_order() {
        let (mut peer, credit, mut producer) = intake();
        let ring = peer.link.segment().to_hub();
        assert!(producer.try_push(&ring, &batch_message(0..10, None)).unwrap());
        assert!(producer.try_push(&ring, &batch_message(10..13, None)).unwrap());
        let mut taken = Vec::new();
        let mut out = Vec::new();
        while !peer.drained() {
            assert!(peer.poll(&mut out, 4).expect("sound batches"));
            assert!(out.len() <= 4, "{} requests for a budget of 4", out.len());
            taken.extend(frame_ids(&out));
            out.clear();
            assert!(taken.len() <= 13, "frames taken twice: {taken:?}");
        }
        assert_eq!(taken, (0..13).collect::<Vec<_>>());
        assert_eq!(credit.in_flight(), 13, "one credit a frame");
    }

    #[test]
    fn a_stamped_clients_frames_carry_their_records_bus_time_and_an_unstamped_record_is_for_now() {
        let (mut peer, _credit, mut producer) = intake_of(true);
        let ring = peer.link.segment().to_hub();
        let mut message = Vec::new();
        let mut encoder = BatchEncoder::begin(&mut message);
        let frame = Frame::can_fd(0x42, fieldhub_proto::FrameFlags::BRS, &[7; 64]).unwrap();
        for at_ns in [5_000, 0, 7_000] {
            encoder.push(&mut message, 2, &frame, &FrameMeta { timestamp_ns: at_ns, ..FrameMeta::default() });
        }
        encoder.finish(&mut message);
        assert!(producer.try_push(&ring, &message).unwrap());
        let mut out = Vec::new();
        assert!(peer.poll(&mut out, 256).unwrap());
        let seen: Vec<_> = out
            .iter()
            .map(|request| match request {
                Inbound::FrameAt { client: 9, port: 2, frame: f, at_ns } if f == &frame => *at_ns,
                Inbound::Frame { client: 9, port: 2, frame: f } if f == &frame => 0,
                other => panic!("expected the FD frame of client 9 on port 2, got {other:?}"),
            })
            .collect();
        assert_eq!(seen, [5_000, 0, 7_000]);
        assert!(matches!(out[1], Inbound::Frame { .. }), "a record for now is a plain frame");
    }

    #[test]
    fn a_batch_with_a_bad_record_after_good_ones_is_refused_whole_and_gives_their_credit_back() {
        let (mut peer, credit, mut producer) = intake();
        let ring = peer.link.segment().to_hub();
        assert!(producer.try_push(&ring, &batch_message(0..2, None)).unwrap());
        assert!(producer.try_push(&ring, &batch_message(2..6, Some(4))).unwrap());
        let mut out = Vec::new();
        match peer.poll(&mut out, 256) {
            Err(IntakeEnd::Violation(code, text)) => {
                assert_eq!(code, ErrorCode::InvalidFrame);
                assert_eq!(text, "frame 2: the echo flag is set by the hub only");
            }
            other => panic!("expected the batch refused, got {other:?}"),
        }
        // The sound batch before it stands; nothing of the refused one.
        assert_eq!(frame_ids(&out), [0, 1]);
        assert_eq!(credit.in_flight(), 2);
    }

    #[test]
    fn frame_room_answered_without_the_lock_is_the_rings_from_empty_to_full_and_back() {
        let link = link();
        let mut consumer = Consumer::starting_at(0);
        let frame = Frame::can(0x123, false, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let mut taken = 0u64;
        while link.has_frame_room() {
            assert!(room_in_ring(&link), "room said after {taken} frames where the ring has none");
            taken += 1;
            // A yes holds until the bus queues: the frame is taken.
            link.try_frame(3, &frame, &meta(taken)).expect("room, as has_frame_room said");
            if taken % 40 == 0 {
                link.flush();
            }
            assert!(taken < 1_000_000, "the frame share never filled");
        }
        assert!(!room_in_ring(&link), "no room said after {taken} frames where the ring has some");
        assert!(taken > 1000, "the share filled after only {taken} frames");
        link.flush();
        assert!(!published(&link, &mut consumer).is_empty());
        // The client read everything: the next look finds the room again.
        assert!(room_in_ring(&link));
        assert!(link.has_frame_room());
    }

    #[test]
    fn a_rounds_frames_go_out_as_batches_at_the_flush_in_order() {
        let link = link();
        let mut consumer = Consumer::starting_at(0);
        let frame = Frame::can(0x123, false, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        for seq in 1..=200 {
            link.try_frame(3, &frame, &meta(seq)).expect("room");
        }
        // Batches fill up to their size while the round goes on; the last
        // one waits for the end of the round.
        let early: Vec<u64> = published(&link, &mut consumer).iter().flat_map(|m| frame_seqs(m)).collect();
        assert!(early.len() < 200);
        link.flush();
        let messages = published(&link, &mut consumer);
        let all: Vec<u64> = early.into_iter().chain(messages.iter().flat_map(|m| frame_seqs(m))).collect();
        assert_eq!(all, (1..=200).collect::<Vec<_>>());
        assert!(messages.iter().all(|m| m.len() + 4 <= BATCH_SLOTS as usize * SLOT_SIZE));
    }

    #[test]
    fn a_2048_byte_xl_frame_goes_out_as_a_17_slot_batch_of_its_own_in_order() {
        let link = link();
        let mut consumer = Consumer::starting_at(0);
        let small = Frame::can(0x123, false, &[1, 2, 3, 4]).unwrap();
        let data: Vec<u8> = (0..2048).map(|i| (i % 251) as u8).collect();
        let xl = Frame::can_xl(0x100, 0xAB, 3, FrameFlags::empty(), 0x1234_5678, &data).unwrap();
        let capacity = link.to_client.write(|out| out.frames.capacity());
        for (seq, frame) in [(1, &small), (2, &small), (3, &xl), (4, &small)] {
            link.try_frame(3, frame, &meta(seq)).expect("room");
        }
        link.flush();
        assert_eq!(
            link.to_client.write(|out| out.frames.capacity()),
            capacity,
            "the batch buffer holds the XL batch unchanged"
        );
        let messages = published(&link, &mut consumer);
        let seqs: Vec<Vec<u64>> = messages.iter().map(|m| frame_seqs(m)).collect();
        assert_eq!(seqs, [vec![1, 2], vec![3], vec![4]]);
        assert_eq!(slots_for(messages[1].len() + 4), 17, "4 + 4 + 36 + 2048 bytes");
        let Message::Frames(batch) = wire::decode(&messages[1]).unwrap() else { panic!("FRAMES") };
        assert_eq!(batch.iter().next().map(|r| r.frame), Some(xl));
    }

    #[test]
    fn a_reply_follows_the_frames_taken_before_it() {
        let link = link();
        let mut consumer = Consumer::starting_at(0);
        let frame = Frame::can(0x1, false, &[]).unwrap();
        link.try_frame(1, &frame, &meta(1)).unwrap();
        link.try_frame(1, &frame, &meta(2)).unwrap();
        link.try_control(Outbound::Pong { nonce: 9 }).unwrap();
        link.try_frame(1, &frame, &meta(3)).unwrap();
        link.flush();
        let messages = published(&link, &mut consumer);
        assert_eq!(messages.len(), 3);
        assert_eq!(frame_seqs(&messages[0]), [1, 2]);
        assert!(matches!(wire::decode(&messages[1]), Ok(Message::Pong { nonce: 9 })));
        assert_eq!(frame_seqs(&messages[2]), [3]);
    }

    #[test]
    fn the_frame_share_bounds_batched_frames_and_room_means_a_frame_fits() {
        let link = link();
        let frame = Frame::can_fd(0x1, fieldhub_proto::FrameFlags::empty(), &[0xAA; 64]).unwrap();
        let mut taken = 0u64;
        loop {
            let room = link.has_frame_room();
            match link.try_frame(1, &frame, &meta(taken + 1)) {
                Ok(()) => taken += 1,
                Err(refused) => {
                    assert_eq!(refused, Refused::Full);
                    assert!(!room, "room was reported, so the frame had to fit");
                    break;
                }
            }
        }
        // Everything taken was published on the refusal: the client can
        // make room.
        let mut consumer = Consumer::starting_at(0);
        let seqs: Vec<u64> = published(&link, &mut consumer).iter().flat_map(|m| frame_seqs(m)).collect();
        assert_eq!(seqs, (1..=taken).collect::<Vec<_>>());
        assert!(taken >= u64::from(link.frame_share), "batches hold at least a frame a slot: {taken}");
        // Replies still fit in the reserve.
        link.try_control(Outbound::Pong { nonce: 1 }).expect("the reserve has room");
        assert!(link.has_frame_room(), "the client took the frames");
    }
}
