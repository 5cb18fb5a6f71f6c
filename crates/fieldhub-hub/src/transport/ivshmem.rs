//! ivshmem clients (`spec/shm.md` section 8): a QEMU guest's client reaches
//! the hub through a region file the guest maps as a PCI BAR
//! (`fieldhub hub --ivshmem /dev/shm/fieldhub-vm0`).
//!
//! Once a client has attached, nothing here differs from a `shm://` client:
//! the region holds a standard client segment, and the bus thread reads its
//! to-hub ring and writes its to-client ring through the same
//! [`ShmLink`]/`ShmPeer` code. What differs is what crosses the VM border —
//! memory only, no socket, no futex — so one poller thread (`fh-ivshmem`)
//! does what the session thread and the client's doorbell ring do for
//! `shm://`:
//!
//! - **Session setup.** A client asks for a session by storing a fresh
//!   nonce in the region's `connect` word; the poller lets go of any
//!   earlier session, resets the segment (indices back to 0) and grants the
//!   nonce (`granted`). The client's `HELLO` then travels through the
//!   to-hub ring and the poller answers `WELCOME` (or `REFUSE`) through the
//!   to-client ring before it hands the client to the bus.
//! - **Wake-ups.** A guest cannot ring a host futex, so the poller watches
//!   each attached to-hub ring's `head` and rings the hub's doorbell for
//!   the bus thread. This keeps the bus thread's one wait point and its
//!   sleeping when idle (a bounded wait on the bus thread would instead
//!   make the whole bus round run every millisecond). The poller spins
//!   briefly after activity, then sleeps with a growing back-off up to
//!   1 ms while a session is under way and 10 ms while none is.
//! - **Liveness.** The client bumps `client_beat` every 100 ms; a client
//!   whose beat has not moved for [`BEAT_TIMEOUT`] (3 s) is detached (its
//!   ports close) as if its socket had ended. The poller bumps `hub_beat`
//!   and, when the hub stops, stores 0 in `generation`.
//!
//! Invariants: the poller is the only writer of the segment between a grant
//! and the client's attach (the hand-over to the bus goes through the
//! inbox, which orders it); after that it only reads the ring's `head`. It
//! resets a segment only once the bus has dropped the previous session's
//! link (watched through a `Weak`), so the bus never sees indices move
//! under it.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use fieldhub_proto::limits::MAX_HELLO_LEN;
use fieldhub_proto::wire::ErrorCode;
use fieldhub_shm::layout::REGION_TO_CLIENT_SLOTS;
use fieldhub_shm::region::{CreateError, BEAT_INTERVAL, BEAT_TIMEOUT};
use fieldhub_shm::ring::slots_for;
use fieldhub_shm::{Backoff, ClientSegment, Consumer, Producer, Region, SegmentHeader};
use tracing::warn;

use super::shm::{ShmLink, ShmPeer, Starts};
use crate::session::peer_user::PeerOrigin;
use crate::session::{Answer, ClientSlot, Sessions, Violation};
use fieldhub_bus::credit::{TxCredit, Waiter};
use fieldhub_bus::outbox::Outbox;

/// The poller's longest sleep while no session is under way: a connect
/// request waits at most this long for its grant.
const IDLE_MAX_SLEEP: Duration = Duration::from_millis(10);

/// The ivshmem regions a hub serves, before its poller starts.
pub struct IvshmemRegions {
    regions: Vec<Served>,
}

/// Why a region cannot be served.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve the ivshmem region {path}: {source}")]
pub struct RegionError {
    pub path: PathBuf,
    pub source: CreateError,
}

impl IvshmemRegions {
    /// Create (or take over) every region file and publish a new
    /// generation in each, so clients of a previous hub see it changed.
    pub fn open(paths: &[PathBuf]) -> Result<Self, RegionError> {
        let generation = fresh_generation();
        let mut regions = Vec::new();
        for path in paths {
            let region = Region::create(path).map_err(|source| RegionError { path: path.clone(), source })?;
            let old = region.generation().load(Ordering::Relaxed);
            // SYNC POINT with the client's Acquire load: the header written
            // by `Region::create` is visible to whoever sees the generation.
            region.generation().store(if generation == old { generation ^ 1 } else { generation }, Ordering::Release);
            regions.push(Served { path: path.clone(), region, seen_connect: 0, state: State::Idle });
        }
        Ok(Self { regions })
    }

    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
    }

    /// The poller thread: serve every region until the hub stops, then
    /// mark them unserved.
    pub fn poll_loop(mut self, sessions: Arc<Sessions>) {
        let mut backoff = Backoff::new(IDLE_MAX_SLEEP);
        let mut next_beat = Instant::now();
        while !sessions.stopping() {
            let now = Instant::now();
            if now >= next_beat {
                next_beat = now + BEAT_INTERVAL;
                for served in &self.regions {
                    // Relaxed: a liveness counter; nothing is published through it.
                    served.region.hub_beat().fetch_add(1, Ordering::Relaxed);
                }
            }
            let mut active = false;
            for served in &mut self.regions {
                active |= served.poll(&sessions, now);
            }
            if active {
                backoff.reset();
            } else {
                let in_session = self.regions.iter().any(|s| !matches!(s.state, State::Idle));
                backoff.set_max_sleep(if in_session { Backoff::MAX_SLEEP } else { IDLE_MAX_SLEEP });
                backoff.pause(Some(next_beat));
            }
        }
        for served in self.regions {
            // SYNC POINT with the client's Acquire load: 0 says "not served".
            served.region.generation().store(0, Ordering::Release);
        }
    }
}

/// A generation word for this hub start: nonzero, and unlikely to repeat.
fn fresh_generation() -> u32 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
    ((nanos as u32) ^ std::process::id().rotate_left(16)).max(1)
}

/// One region and where its session stands.
struct Served {
    path: PathBuf,
    region: Region,
    /// The last `connect` nonce acted on.
    seen_connect: u32,
    state: State,
}

enum State {
    /// No session granted.
    Idle,
    /// The segment is reset for the client that asked; its `HELLO` is
    /// awaited in the to-hub ring. `slot` is the refusal when the hub was full.
    Granted { segment: ClientSegment, slot: Result<ClientSlot, Violation>, starts: Starts },
    /// Handed to the bus. `head` is the to-hub head last seen, `beat` the
    /// client's beat last seen and `beat_seen` when it last moved.
    Attached { slot: ClientSlot, link: Weak<ShmLink>, head: u32, beat: u32, beat_seen: Instant },
    /// Detached; waiting for the bus to drop the link (the slot is released
    /// then), then granting `next`.
    Releasing { slot: ClientSlot, link: Weak<ShmLink>, next: Option<u32> },
}

impl Served {
    /// One look at the region. Returns whether anything happened.
    fn poll(&mut self, sessions: &Arc<Sessions>, now: Instant) -> bool {
        // SYNC POINT with the client's Release store of its nonce.
        let connect = self.region.connect().load(Ordering::Acquire);
        let request = (connect != 0 && connect != self.seen_connect).then_some(connect);
        if let Some(nonce) = request {
            self.seen_connect = nonce;
        }
        match std::mem::replace(&mut self.state, State::Idle) {
            State::Idle | State::Granted { .. } if request.is_some() => {
                self.state = self.grant(sessions, request.unwrap_or_default());
                true
            }
            State::Idle => false,
            State::Granted { segment, slot, starts } => self.handshake(segment, slot, starts, now),
            State::Attached { mut slot, link, head, beat, beat_seen } => {
                let Some(strong) = link.upgrade() else {
                    // The bus let go (goodbye, a violation): no session now.
                    drop(slot);
                    // SYNC POINT with the client's Acquire load: its session is over.
                    self.region.granted().store(0, Ordering::Release);
                    return true;
                };
                if let Some(nonce) = request {
                    self.detach(&mut slot, &strong, "a new session on the region replaces it");
                    self.state = State::Releasing { slot, link, next: Some(nonce) };
                    return true;
                }
                // Relaxed: a liveness counter; nothing is read through it.
                let seen = self.region.client_beat().load(Ordering::Relaxed);
                let (beat, beat_seen) = if seen == beat { (beat, beat_seen) } else { (seen, now) };
                if now.duration_since(beat_seen) >= BEAT_TIMEOUT {
                    let reason = format!("no sign of life for {} s", BEAT_TIMEOUT.as_secs());
                    self.detach(&mut slot, &strong, &reason);
                    self.state = State::Releasing { slot, link, next: None };
                    return true;
                }
                let ring = strong.segment().to_hub();
                let new_head = ring.head();
                if ring.has_unread() {
                    // The bus thread cannot be rung by the guest: wake it for
                    // the client. Repeated while messages wait, so a bus that
                    // began to wait just after this look is woken on the next.
                    sessions.inbox.wake_bus();
                }
                self.state = State::Attached { slot, link, head: new_head, beat, beat_seen };
                new_head != head
            }
            State::Releasing { slot, link, next } => {
                let next = request.or(next);
                if link.strong_count() > 0 {
                    self.state = State::Releasing { slot, link, next };
                    return false;
                }
                drop(slot);
                if let Some(nonce) = next {
                    self.state = self.grant(sessions, nonce);
                }
                true
            }
        }
    }

    /// Reset the segment for the client that asked with `nonce` and tell it.
    fn grant(&self, sessions: &Arc<Sessions>, nonce: u32) -> State {
        let slot = sessions.admit("ivshmem", format!("ivshmem:{}", self.path.display()), PeerOrigin::Operator);
        let client = slot.as_ref().map_or(0, ClientSlot::id);
        match self.region.reset_segment(SegmentHeader::with_to_client_slots(client, REGION_TO_CLIENT_SLOTS)) {
            Ok(segment) => {
                // SYNC POINT with the client's Acquire load of `granted`: the
                // reset segment (header, zeroed indices) is visible to it.
                self.region.granted().store(nonce, Ordering::Release);
                State::Granted { segment, slot, starts: Starts::default() }
            }
            Err(e) => {
                warn!(region = %self.path.display(), "cannot reset the ivshmem segment: {e}");
                State::Idle
            }
        }
    }

    /// Look for the granted client's next handshake message (its `HELLO`,
    /// then its `AUTH` when the hub has a token); answer it, and attach the
    /// client once it is admitted. `starts`: the ring positions past the
    /// handshake's messages so far.
    fn handshake(
        &mut self,
        segment: ClientSegment,
        slot: Result<ClientSlot, Violation>,
        mut starts: Starts,
        now: Instant,
    ) -> bool {
        let ring = segment.to_hub();
        let mut consumer = Consumer::starting_at(starts.to_hub_tail);
        let mut body = Vec::new();
        let slots = match consumer.peek(&ring, MAX_HELLO_LEN as usize, &mut body) {
            Ok(Some(slots)) => slots,
            Ok(None) => {
                self.state = State::Granted { segment, slot, starts };
                return false;
            }
            Err(e) => {
                let text = format!("corrupt to-hub ring during the handshake: {e}");
                refuse(&self.path, &segment, starts, &Violation::new(ErrorCode::Malformed, text));
                return true;
            }
        };
        consumer.advance(&ring, slots);
        starts.to_hub_tail = starts.to_hub_tail.wrapping_add(slots);
        let mut slot = match slot {
            Ok(slot) => slot,
            Err(violation) => {
                refuse(&self.path, &segment, starts, &violation);
                return true;
            }
        };
        let reply = match slot.handshake(&body) {
            Err(violation) => {
                refuse(&self.path, &segment, starts, &violation);
                return true;
            }
            Ok(Answer::Challenge(challenge)) => {
                starts.to_client_head = push(&segment, starts.to_client_head, &challenge);
                self.state = State::Granted { segment, slot: Ok(slot), starts };
                return true;
            }
            Ok(Answer::Welcome) => slot.welcome(),
        };
        // The handshake's few messages leave room; the bus produces after them.
        starts.to_client_head = push(&segment, starts.to_client_head, &reply);
        // Relaxed: a liveness counter.
        let beat = self.region.client_beat().load(Ordering::Relaxed);
        let head = segment.to_hub().head();
        let link = Arc::new(ShmLink::new(segment, starts, None));
        let weak = Arc::downgrade(&link);
        // Nobody waits on this credit: the bus takes it as it reads the ring.
        let credit = Arc::new(TxCredit::new(Waiter::Bus));
        let intake = Box::new(ShmPeer::new(slot.id(), Arc::clone(&link), Arc::clone(&credit), slot.stamps_frames()));
        // The bus's drop of the link is what the poller watches for.
        let hang_up = Box::new(|| {});
        if slot.attach(Outbox::new(link), hang_up, credit, Some(intake)).is_err() {
            return true;
        }
        self.state = State::Attached { slot, link: weak, head, beat, beat_seen: now };
        true
    }

    /// End the client's session: the bus takes what is left in its ring,
    /// then closes its ports; the client learns from `granted`.
    fn detach(&self, slot: &mut ClientSlot, link: &ShmLink, reason: &str) {
        link.end();
        // SYNC POINT with the client's Acquire load: its session is over.
        self.region.granted().store(0, Ordering::Release);
        slot.detach(reason);
    }
}

/// Answer a bad handshake with `REFUSE` in the to-client ring, after what
/// the handshake put there (`starts`).
fn refuse(path: &Path, segment: &ClientSegment, starts: Starts, violation: &Violation) {
    warn!(region = %path.display(), "refusing an ivshmem client: {}", violation.text);
    push(segment, starts.to_client_head, &violation.refusal());
}

/// Publish a handshake message at `head` of the to-client ring; returns
/// the head after it.
fn push(segment: &ClientSegment, head: u32, message: &[u8]) -> u32 {
    // A fresh ring has room for the handshake's few messages.
    let _ = Producer::starting_at(head).try_push(&segment.to_client(), message);
    head.wrapping_add(slots_for(message.len()))
}
