//! The client's end of a to-client ring, shared by the `shm://` and
//! `ivshmem://` links: one consumer (the ring has one; the client reads it
//! from the handshake, then from the reader thread) and the buffer messages
//! are copied into before anything decodes them.
//!
//! How the reader waits for a message is the link's own — a futex doorbell
//! on one machine, polling across the VM border — and is passed in, as for
//! [`RingSender`](crate::ring_sender::RingSender).
//!
//! Invariants: every message published before the link ended is taken
//! before the reader reports the end (the hub's `GOODBYE` or fatal `ERROR`
//! gives the reason); a reader never waits past the link's end (`ended` is
//! part of every wait condition); the buffer is reused, so taking a frame
//! allocates nothing.

use std::time::Instant;

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_shm::{Consumer, RingError, RingRef};

use crate::link::Flow;

pub(crate) struct RingReceiver {
    consumer: Consumer,
    /// The message last taken, copied out of the ring.
    body: Vec<u8>,
}

/// What [`RingReceiver::take`] found.
pub(crate) enum Taken<'a> {
    /// The next message's body.
    Message(&'a [u8]),
    /// The link ended and nothing published before the end is left.
    Ended,
    /// The deadline passed with the ring empty.
    TimedOut,
}

/// Why [`RingReceiver::run`] returned.
pub(crate) enum Stop {
    /// The link ended and everything published before the end was delivered.
    Drained,
    /// The hub broke the ring's rules (`spec/shm.md` section 3, "Trust").
    Corrupt(RingError),
    /// The dispatcher ended the link with this reason.
    Close(String),
    /// The dispatcher stopped reading (nobody receives any more).
    Leave,
}

impl Stop {
    /// Why the link ended, in the words every link uses; `None` after
    /// [`Stop::Leave`], which does not end it.
    pub fn reason(self) -> Option<String> {
        match self {
            Stop::Drained => Some("the hub closed the connection".into()),
            Stop::Corrupt(e) => Some(format!("the hub corrupted the shared ring: {e}")),
            Stop::Close(reason) => Some(reason),
            Stop::Leave => None,
        }
    }
}

impl RingReceiver {
    /// A receiver for a ring of a new session: both sides start at slot 0
    /// (`spec/shm.md` sections 2.1 and 8.2).
    pub fn new() -> Self {
        Self { consumer: Consumer::starting_at(0), body: Vec::new() }
    }

    /// Take the next message from `ring`. While it is empty,
    /// `wait_for_message(deadline, ready)` waits until `ready()` holds
    /// (true) or `deadline` passes (false: [`Taken::TimedOut`]).
    pub fn take(
        &mut self,
        ring: &RingRef<'_>,
        deadline: Option<Instant>,
        ended: impl Fn() -> bool,
        mut wait_for_message: impl FnMut(Option<Instant>, &mut dyn FnMut() -> bool) -> bool,
    ) -> Result<Taken<'_>, RingError> {
        loop {
            if self.consumer.pop(ring, MAX_MESSAGE_LEN as usize, &mut self.body)? {
                return Ok(Taken::Message(&self.body));
            }
            if ended() {
                // The end may have been noticed after the hub's last
                // messages were published: they come first.
                if !self.consumer.has_message(ring) {
                    return Ok(Taken::Ended);
                }
                continue;
            }
            let consumer = &self.consumer;
            if !wait_for_message(deadline, &mut || consumer.has_message(ring) || ended()) {
                return Ok(Taken::TimedOut);
            }
        }
    }

    /// The reader thread's loop: take messages and hand each to `deliver`
    /// until it says stop or the link ends.
    pub fn run(
        &mut self,
        ring: &RingRef<'_>,
        ended: impl Fn() -> bool,
        mut wait_for_message: impl FnMut(Option<Instant>, &mut dyn FnMut() -> bool) -> bool,
        mut deliver: impl FnMut(&[u8]) -> Flow,
    ) -> Stop {
        loop {
            match self.take(ring, None, &ended, &mut wait_for_message) {
                Ok(Taken::Message(body)) => match deliver(body) {
                    Flow::Continue => {}
                    Flow::Close(reason) => return Stop::Close(reason),
                    Flow::Leave => return Stop::Leave,
                },
                // Without a deadline the wait only returns once there is a
                // message or the link ended, so a time-out is the end too.
                Ok(Taken::Ended | Taken::TimedOut) => return Stop::Drained,
                Err(e) => return Stop::Corrupt(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use fieldhub_proto::wire::{self, decode, Message};
    use fieldhub_shm::ring::LocalRing;
    use fieldhub_shm::Producer;

    use super::*;

    fn publish(producer: &mut Producer, ring: &RingRef<'_>, message: &Message<'_>) {
        let mut bytes = Vec::new();
        wire::encode(&mut bytes, message);
        assert!(producer.try_push(ring, &bytes).unwrap());
    }

    /// Polls, as the ivshmem link does; the doorbell wait is the shm link's.
    fn poll(deadline: Option<Instant>, ready: &mut dyn FnMut() -> bool) -> bool {
        loop {
            if ready() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn messages_published_before_the_end_are_delivered_before_it_is_reported() {
        let local = LocalRing::new(4096);
        let ring = local.ring();
        let mut producer = Producer::starting_at(0);
        publish(&mut producer, &ring, &Message::Pong { nonce: 1 });
        publish(&mut producer, &ring, &Message::Pong { nonce: 2 });
        let mut seen = Vec::new();
        let stop = RingReceiver::new().run(
            &ring,
            || true,
            poll,
            |body| {
                seen.push(decode(body).unwrap().type_name());
                Flow::Continue
            },
        );
        assert!(matches!(stop, Stop::Drained));
        assert_eq!(seen, ["PONG", "PONG"]);
    }

    #[test]
    fn take_times_out_on_an_empty_ring_and_reports_the_end_once_ended() {
        let local = LocalRing::new(4096);
        let ring = local.ring();
        let ended = AtomicBool::new(false);
        let mut receiver = RingReceiver::new();
        let soon = Some(Instant::now() + Duration::from_millis(20));
        assert!(matches!(receiver.take(&ring, soon, || ended.load(Ordering::Relaxed), poll), Ok(Taken::TimedOut)));
        ended.store(true, Ordering::Relaxed);
        assert!(matches!(receiver.take(&ring, None, || ended.load(Ordering::Relaxed), poll), Ok(Taken::Ended)));
    }

    #[test]
    fn a_length_the_hub_could_not_have_sent_is_a_corrupt_ring() {
        let local = LocalRing::new(4096);
        let ring = local.ring();
        // A published slot whose length prefix is 0.
        local.head_word().store(1, Ordering::Release);
        let stop = RingReceiver::new().run(&ring, || false, poll, |_| Flow::Continue);
        assert!(matches!(stop, Stop::Corrupt(RingError::Length { len: 0, .. })));
    }
}
