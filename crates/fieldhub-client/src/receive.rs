//! Who takes the hub's messages, and how everyone else waits — once for
//! every link.
//!
//! A link's receive side has one consumer at a time: the thread holding the
//! consumer *token* ([`Token`], a flag in [`Shared`]) calls [`Link::take`]
//! and hands each message to the dispatcher, which fills the receive queue
//! and the reply slots. Every other thread waits in [`Link::wait`] until
//! what it waits for is there, the token is free, or the connection ended;
//! whoever changes one of those calls [`Link::notify`].
//!
//! Who holds the token:
//!
//! - On a *direct* link (`shm://`, `ivshmem://`: [`Link::direct`]) the
//!   threads that wait for something from the hub — `recv`, and a request
//!   waiting for its reply — take it themselves: [`wait_until`] takes the
//!   token if it is free and takes messages, in order, until what this
//!   thread waits for is there; frames for others go into the receive queue.
//!   The common request/answer path is then: the hub publishes and rings,
//!   the thread in `recv` wakes, takes the frame and returns it — no other
//!   thread runs. While nobody waits, messages stay in the ring: the ring
//!   *is* the receive FIFO, and when it is full the hub applies each port's
//!   overflow policy (drop and count, or hold a lossless port's channel,
//!   `spec/shm.md` section 6).
//! - A reader thread ([`consume`]) holds it for good on a link that is not
//!   direct (a stream: the kernel socket is read by one blocking reader),
//!   and on a direct link once the application asked for the ready fd
//!   (`Client::fileno`): the fd must become readable when frames arrive,
//!   which needs someone who takes them while nobody waits.
//! - When a direct link ends (the hub's end noticed by the link's own
//!   thread), that thread takes the token once it is free and takes what
//!   the hub published before the end ([`consume`]), so a `GOODBYE` or fatal
//!   `ERROR` gives the reason even if nobody waits.
//!
//! Lossless ports: a message with a frame for a `block_on_overflow` port
//! that does not fit the receive queue is held back ([`Took::Held`]): it
//! stays the link's next message, the holder releases the token (a reader
//! thread keeps it) and waits for room, which whoever takes a frame makes
//! and announces. A request whose reply sits behind it waits, as it did
//! behind a blocked reader thread; a frame is never dropped.
//!
//! Lock order: the token, then the link's receive side (its ring consumer
//! or stream reader, locked inside `take`), then the receive queue, then the
//! ready fd's lock; reply slots and `waiters` are taken alone. A thread in
//! `send` takes none of them, except the token with `try` ([`pump`]).

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::dispatch::{self, Shared};
use crate::link::{Flow, Link, Took};

/// How [`wait_until`] ended.
pub(crate) enum Waited {
    /// What the caller waits for is there.
    Ready,
    /// The deadline passed first.
    TimedOut,
    /// The connection ended first.
    Closed,
}

/// The consumer token: held by one thread at a time; releasing it wakes
/// the waiters, one of which may want it.
pub(crate) struct Token<'a> {
    link: &'a dyn Link,
    shared: &'a Shared,
}

impl<'a> Token<'a> {
    /// The token, if no other thread holds it.
    pub fn try_take(link: &'a dyn Link, shared: &'a Shared) -> Option<Self> {
        // Acquire/Release: one holder at a time; what the holder consumed is
        // behind the link's own lock.
        let free = shared.consuming.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed);
        // Built only on success: a token built for a failed attempt would
        // release the holder's when dropped.
        if free.is_ok() {
            Some(Self { link, shared })
        } else {
            None
        }
    }

    /// Take messages from the link and dispatch them until `until()`
    /// holds, `deadline` passes, a message is held back or the session ends.
    pub fn take(&self, deadline: Option<Instant>, until: &dyn Fn() -> bool) -> Took {
        let (link, shared) = (self.link, self.shared);
        link.take(deadline, until, &mut |body| {
            let flow = dispatch::deliver(body, shared);
            // A frame queued or a reply filled for another thread, which
            // may sleep on the link's wait: a fence and a load unless it
            // announced a sleep.
            if !matches!(flow, Flow::Hold) {
                link.notify();
            }
            flow
        })
    }
}

impl Drop for Token<'_> {
    fn drop(&mut self) {
        self.shared.consuming.store(false, Ordering::Release);
        // A waiter may sleep until the token is free.
        self.link.notify();
    }
}

/// The session is over for `reason`: record it and wake every waiter.
pub(crate) fn end(link: &dyn Link, shared: &Shared, reason: String) {
    shared.close(reason);
    link.notify();
}

/// Whether the consumer token is free (for wait conditions).
fn token_free(shared: &Shared) -> bool {
    !shared.consuming.load(Ordering::Acquire)
}

/// Wait until `ready()` holds, the connection ends or `deadline` passes.
/// On a direct link, take the hub's messages meanwhile whenever no other
/// thread does. `ready` must be something only the consumer or another
/// thread that then calls [`Link::notify`] makes true.
pub(crate) fn wait_until(
    link: &dyn Link,
    shared: &Shared,
    deadline: Option<Instant>,
    ready: &dyn Fn() -> bool,
) -> Waited {
    let direct = link.direct();
    loop {
        if ready() {
            return Waited::Ready;
        }
        if shared.is_closed() || shared.is_leaving() {
            return Waited::Closed;
        }
        if direct {
            if let Some(token) = Token::try_take(link, shared) {
                match token.take(deadline, ready) {
                    Took::Until => {}
                    Took::TimedOut => return if ready() { Waited::Ready } else { Waited::TimedOut },
                    Took::Held => {
                        drop(token);
                        // Someone else must take frames first; a frame we
                        // wait for ourselves may be in the queue already.
                        let room = || ready() || shared.has_room_for_held() || shared.is_closed();
                        if !link.wait(deadline, &room) {
                            return Waited::TimedOut;
                        }
                    }
                    Took::Ended(reason) => end(link, shared, reason),
                }
                continue;
            }
        }
        let look = || ready() || shared.is_closed() || shared.is_leaving() || (direct && token_free(shared));
        if !link.wait(deadline, &look) {
            return if ready() { Waited::Ready } else { Waited::TimedOut };
        }
    }
}

/// Take what is already there without waiting, if no other thread is the
/// consumer: frames into the receive queue, replies, overrun counts. For
/// threads that do not wait for the hub (`send`, `rx_dropped`) on a direct
/// link, so a sending-only application still learns what the hub told it.
/// Never waits for the token, nor for room for a held message.
pub(crate) fn pump(link: &dyn Link, shared: &Shared) {
    if !link.direct() || shared.is_closed() {
        return;
    }
    if let Some(token) = Token::try_take(link, shared) {
        if let Took::Ended(reason) = token.take(Some(Instant::now()), &|| false) {
            end(link, shared, reason);
        }
    }
}

/// The reader's loop, for whoever consumes while nobody waits: the reader
/// thread of a link that is not direct, or of a direct link whose client
/// has a ready fd, and a direct link's own thread once it noticed the end.
/// Becomes the consumer (waiting for the token), then takes until the
/// session ends or the client is dropped.
pub(crate) fn consume(link: &dyn Link, shared: &Shared) {
    let over = || shared.is_closed() || shared.is_leaving();
    let token = loop {
        if over() {
            return;
        }
        if let Some(token) = Token::try_take(link, shared) {
            break token;
        }
        link.wait(None, &|| over() || token_free(shared));
    };
    while !over() {
        match token.take(None, &|| shared.is_leaving()) {
            // Leaving; or a wait without a deadline that ended anyway.
            Took::Until | Took::TimedOut => {}
            Took::Held => {
                link.wait(None, &|| over() || shared.has_room_for_held());
            }
            Took::Ended(reason) => end(link, shared, reason),
        }
    }
}
