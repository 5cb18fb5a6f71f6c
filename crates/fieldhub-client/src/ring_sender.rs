//! The client's end of a to-hub ring, shared by the `shm://` and
//! `ivshmem://` links: one producer behind a lock (the ring has one producer,
//! the client many callers), the buffer messages are encoded into, and the
//! flag that says the link has ended.
//!
//! How a sender waits for room is the link's own — a futex doorbell on one
//! machine, polling across the VM border — and is passed in.
//!
//! Invariants: sending a frame allocates nothing (the buffer is reused); a
//! sender never waits past the link's end (`ended` is part of every wait
//! condition).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use fieldhub_proto::wire::BatchEncoder;
use fieldhub_proto::{Frame, FrameMeta};
use fieldhub_shm::ring::{slots_for, RingRef};
use fieldhub_shm::Producer;

use crate::link::SendFail;

pub(crate) struct RingSender {
    to_hub: Mutex<ToHub>,
    ended: AtomicBool,
}

struct ToHub {
    producer: Producer,
    /// Encoding buffer, reused.
    scratch: Vec<u8>,
}

impl RingSender {
    /// A sender that takes up the ring where `producer` stands.
    pub fn new(producer: Producer) -> Self {
        Self { to_hub: Mutex::new(ToHub { producer, scratch: Vec::with_capacity(256) }), ended: AtomicBool::new(false) }
    }

    /// Whether the link has ended.
    pub fn ended(&self) -> bool {
        // SYNC POINT with `end`'s Release store: whoever sees the flag sees
        // what the ending side did before it.
        self.ended.load(Ordering::Acquire)
    }

    /// Mark the link ended. A link whose waiters sleep wakes them after this.
    pub fn end(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Encode one message with `encode` and push it into `ring`. While it
    /// does not fit, `wait_for_room(deadline, room)` waits until `room()`
    /// holds (true) or the deadline — `timeout` after the ring was first
    /// found full, so a send that fits reads no clock — passes (false:
    /// [`SendFail::Timeout`]). The
    /// lock is released when this returns, so a link may ring a doorbell
    /// afterwards without holding it.
    pub fn send(
        &self,
        ring: &RingRef<'_>,
        encode: impl FnOnce(&mut Vec<u8>),
        timeout: Option<Duration>,
        mut wait_for_room: impl FnMut(Option<Instant>, &mut dyn FnMut() -> bool) -> bool,
    ) -> Result<(), SendFail> {
        let mut to_hub = self.to_hub.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let ToHub { producer, scratch } = &mut *to_hub;
        scratch.clear();
        encode(scratch);
        let needed = slots_for(scratch.len());
        let mut deadline = None;
        loop {
            if self.ended() {
                return Err(SendFail::Closed);
            }
            match producer.try_push(ring, scratch) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                // The hub broke the ring (or the message can never fit).
                Err(_) => return Err(SendFail::Closed),
            }
            let mut room = || producer.free_slots(ring).map_or(true, |free| free >= needed) || self.ended();
            let deadline = *deadline.get_or_insert_with(|| timeout.map(|t| Instant::now() + t));
            if !wait_for_room(deadline, &mut room) {
                return Err(SendFail::Timeout);
            }
        }
    }
}

/// How [`RingSender::send`] encodes one frame: a `FRAMES` message of one
/// record (every CAN and CAN FD frame then fits one slot), stamped for bus
/// time `at_ns` (0: none).
pub(crate) fn one_frame(port: u16, frame: &Frame, at_ns: u64) -> impl FnOnce(&mut Vec<u8>) + '_ {
    move |out| {
        let mut batch = BatchEncoder::begin(out);
        batch.push(out, port, frame, &FrameMeta { timestamp_ns: at_ns, ..FrameMeta::default() });
        batch.finish(out);
    }
}
