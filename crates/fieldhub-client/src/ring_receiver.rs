//! The client's end of a to-client ring, shared by the `shm://` and
//! `ivshmem://` links: one consumer (the ring has one; the client reads it
//! in the handshake, then whichever thread holds the client's consumer
//! token, `receive.rs`) and the buffer messages are copied into before
//! anything decodes them.
//!
//! How the consumer waits for a message is the link's own — a futex
//! doorbell with an adaptive spin on one machine, polling across the VM
//! border — and is passed in, as for
//! [`RingSender`](crate::ring_sender::RingSender).
//!
//! Invariants: every message published before the link ended is taken
//! before the end is reported (the hub's `GOODBYE` or fatal `ERROR` gives
//! the reason); a consumer never waits past the link's end (`ended` is part
//! of every wait condition); a message is consumed (`tail` moves) only once
//! the consumer took it, so a held-back message stays the next one; the
//! buffer is reused, so taking a frame allocates nothing.

use std::time::Instant;

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_shm::{Consumer, RingError, RingRef};

use crate::link::{Flow, Took};

pub(crate) struct RingReceiver {
    consumer: Consumer,
    /// The message last taken, copied out of the ring.
    body: Vec<u8>,
}

/// What [`RingReceiver::take_one`] found.
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
    /// `until()` holds.
    Until,
    /// The deadline passed with the ring empty.
    TimedOut,
    /// The consumer held the next message back; it is still the next one.
    Held,
    /// The link ended and everything published before the end was delivered.
    Drained,
    /// The hub broke the ring's rules (`spec/shm.md` section 3, "Trust").
    Corrupt(RingError),
    /// The consumer ended the session with this reason.
    Close(String),
}

impl Stop {
    /// What the link's `take` reports, in the words every link uses.
    pub fn took(self) -> Took {
        match self {
            Stop::Until => Took::Until,
            Stop::TimedOut => Took::TimedOut,
            Stop::Held => Took::Held,
            Stop::Drained => Took::Ended("the hub closed the connection".into()),
            Stop::Corrupt(e) => Took::Ended(format!("the hub corrupted the shared ring: {e}")),
            Stop::Close(reason) => Took::Ended(reason),
        }
    }
}

impl RingReceiver {
    /// A receiver for a ring of a new session: both sides start at slot 0
    /// (`spec/shm.md` sections 2.1 and 8.2).
    pub fn new() -> Self {
        Self { consumer: Consumer::starting_at(0), body: Vec::new() }
    }

    /// Take the next message from `ring` (the handshake's answer). While it
    /// is empty, `wait_for_message(deadline, ready)` waits until `ready()`
    /// holds (true) or `deadline` passes (false: [`Taken::TimedOut`]).
    pub fn take_one(
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

    /// The consumer's loop ([`Link::take`](crate::link::Link::take)): hand
    /// each message, in order, to `deliver` until `until()` holds, the
    /// deadline passes with the ring empty, `deliver` holds a message back
    /// (it is not consumed: the next call hands it over again) or the link
    /// ends. A deadline that has passed when the ring is empty ends the
    /// call without `wait_for_message`, so a link's wait keeps its own
    /// state (an adaptive spin) for real waits.
    pub fn run(
        &mut self,
        ring: &RingRef<'_>,
        deadline: Option<Instant>,
        until: &dyn Fn() -> bool,
        ended: impl Fn() -> bool,
        mut wait_for_message: impl FnMut(Option<Instant>, &mut dyn FnMut() -> bool) -> bool,
        deliver: &mut dyn FnMut(&[u8]) -> Flow,
    ) -> Stop {
        loop {
            if until() {
                return Stop::Until;
            }
            match self.consumer.peek(ring, MAX_MESSAGE_LEN as usize, &mut self.body) {
                Err(e) => return Stop::Corrupt(e),
                Ok(Some(slots)) => match deliver(&self.body) {
                    Flow::Continue => self.consumer.advance(ring, slots),
                    Flow::Close(reason) => {
                        self.consumer.advance(ring, slots);
                        return Stop::Close(reason);
                    }
                    Flow::Hold => return Stop::Held,
                },
                Ok(None) => {
                    if ended() {
                        // The end may have been noticed after the hub's last
                        // messages were published: they come first.
                        if !self.consumer.has_message(ring) {
                            return Stop::Drained;
                        }
                        continue;
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Stop::TimedOut;
                    }
                    let consumer = &self.consumer;
                    if !wait_for_message(deadline, &mut || consumer.has_message(ring) || ended() || until()) {
                        return Stop::TimedOut;
                    }
                }
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
        let stop = RingReceiver::new().run(&ring, None, &|| false, || true, poll, &mut |body| {
            seen.push(decode(body).unwrap().type_name());
            Flow::Continue
        });
        assert!(matches!(stop, Stop::Drained));
        assert_eq!(seen, ["PONG", "PONG"]);
    }

    #[test]
    fn take_one_times_out_on_an_empty_ring_and_reports_the_end_once_ended() {
        let local = LocalRing::new(4096);
        let ring = local.ring();
        let ended = AtomicBool::new(false);
        let mut receiver = RingReceiver::new();
        let soon = Some(Instant::now() + Duration::from_millis(20));
        let ended_now = || ended.load(Ordering::Relaxed);
        assert!(matches!(receiver.take_one(&ring, soon, ended_now, poll), Ok(Taken::TimedOut)));
        ended.store(true, Ordering::Relaxed);
        assert!(matches!(receiver.take_one(&ring, None, ended_now, poll), Ok(Taken::Ended)));
    }

    #[test]
    fn a_length_the_hub_could_not_have_sent_is_a_corrupt_ring() {
        let local = LocalRing::new(4096);
        let ring = local.ring();
        // A published slot whose length prefix is 0.
        local.head_word().store(1, Ordering::Release);
        let stop = RingReceiver::new().run(&ring, None, &|| false, || false, poll, &mut |_| Flow::Continue);
        assert!(matches!(stop, Stop::Corrupt(RingError::Length { len: 0, .. })));
    }

    #[test]
    fn a_held_message_stays_the_next_one_and_comes_again() {
        let local = LocalRing::new(4096);
        let ring = local.ring();
        let mut producer = Producer::starting_at(0);
        publish(&mut producer, &ring, &Message::Pong { nonce: 1 });
        publish(&mut producer, &ring, &Message::Pong { nonce: 2 });
        let mut receiver = RingReceiver::new();
        let nonce = |body: &[u8]| match decode(body).unwrap() {
            Message::Pong { nonce } => nonce,
            other => panic!("{}", other.type_name()),
        };
        let mut offered = Vec::new();
        let stop = receiver.run(&ring, None, &|| false, || false, poll, &mut |body| {
            offered.push(nonce(body));
            Flow::Hold
        });
        assert!(matches!(stop, Stop::Held));
        let mut taken = Vec::new();
        let now = Some(Instant::now());
        let stop = receiver.run(&ring, now, &|| false, || false, poll, &mut |body| {
            taken.push(nonce(body));
            Flow::Continue
        });
        assert!(matches!(stop, Stop::TimedOut), "an empty ring and a passed deadline end the call");
        assert_eq!((offered, taken), (vec![1], vec![1, 2]));
    }

    #[test]
    fn until_is_looked_at_before_each_message() {
        let local = LocalRing::new(4096);
        let ring = local.ring();
        let mut producer = Producer::starting_at(0);
        for nonce in 0..3 {
            publish(&mut producer, &ring, &Message::Pong { nonce });
        }
        let count = std::cell::Cell::new(0);
        let mut receiver = RingReceiver::new();
        let stop = receiver.run(&ring, None, &|| count.get() == 2, || false, poll, &mut |_| {
            count.set(count.get() + 1);
            Flow::Continue
        });
        assert!(matches!(stop, Stop::Until));
        assert_eq!(count.get(), 2, "the third message stays in the ring");
        assert!(receiver.consumer.has_message(&ring));
    }
}
