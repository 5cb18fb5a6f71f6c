//! What a [`Client`](crate::Client) needs from its transport: the [`Link`]
//! trait and the types its methods speak. A leaf the transports import;
//! `transport.rs` picks the transport a URL names.
//!
//! A link moves messages; it knows nothing of ports, requests or the
//! receive queue. Each transport implements the trait once: `stream.rs`
//! (TCP, unix socket, serial device), `shm.rs` (`shm://`) and `ivshmem.rs`
//! (`ivshmem://`). Every one of them greets the hub through the one
//! [`handshake`](crate::handshake::handshake), and hands raw message bodies
//! to whoever consumes (`receive.rs`), which passes them to the one
//! dispatcher (`dispatch.rs`). Who consumes, and when, is decided once for
//! every link in `receive.rs`; a link only says whether any thread may take
//! with a deadline ([`Link::direct`]) and brings its own way of waiting.
//!
//! Invariants every link keeps:
//!
//! - Messages leave in the order they were sent and arrive in the order the
//!   hub sent them; a message the consumer holds back ([`Flow::Hold`]) stays
//!   the next one.
//! - No call waits on a hub that is gone: once the link ends (the hub's end
//!   noticed, or [`Link::close`]), sends fail with [`SendFail::Closed`] and
//!   [`Link::take`] reports the end after the messages published before it.
//! - Sending a frame allocates nothing, and neither does taking one.

use std::time::{Duration, Instant};

use fieldhub_proto::Frame;

/// Why a message could not be sent.
pub(crate) enum SendFail {
    /// No room within the timeout.
    Timeout,
    /// The link has ended.
    Closed,
}

/// What the consumer does with one message it was handed.
pub(crate) enum Flow {
    /// Taken; go on.
    Continue,
    /// Taken; it ends the session with this reason (`GOODBYE`, a fatal
    /// `ERROR`, a message that does not decode).
    Close(String),
    /// Not taken: it must wait (a frame for a lossless port and no room in
    /// the receive queue). The link keeps it and hands it over first on the
    /// next [`Link::take`].
    Hold,
}

/// Why [`Link::take`] returned.
pub(crate) enum Took {
    /// `until()` holds.
    Until,
    /// `deadline` passed with nothing to take.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))] // direct links only: shared memory (Linux)
    TimedOut,
    /// The consumer said [`Flow::Hold`]; the message is still the next one.
    Held,
    /// The session is over: every message published before the end was
    /// handed over. The reason, in the words every link uses.
    Ended(String),
}

/// One transport under a client, after a successful handshake.
///
/// Receiving: whoever holds the client's consumer token (one thread at a
/// time, see `receive.rs`) calls [`Link::take`]; everyone else waits in
/// [`Link::wait`] and is woken by [`Link::notify`]. On a *direct* link
/// ([`Link::direct`]: the shared-memory rings) the application's own
/// waiting threads take; on the others a reader thread holds the token for
/// the link's life and takes with no deadline. Besides, the client runs the
/// link's own thread ([`Link::tend`]). Any thread may send; sending never
/// touches the receive side.
pub(crate) trait Link: Send + Sync {
    /// Send one frame on the port with handle `port`, stamped for bus time
    /// `at_ns` (0: none; `AHEAD` participants only), waiting at most
    /// `timeout` (`None`: no limit) for room.
    fn send_frame(&self, port: u16, frame: &Frame, at_ns: u64, timeout: Option<Duration>) -> Result<(), SendFail>;

    /// Send one encoded message (a request, `GOODBYE`), waiting at most
    /// `timeout` (`None`: no limit) for room.
    fn send_message(&self, message: Vec<u8>, timeout: Option<Duration>) -> Result<(), SendFail>;

    /// Whether any thread may take messages with a deadline: the hub's
    /// messages wait in a ring the link reads without a thread of its own,
    /// and [`Link::wait`] is woken by the hub itself. A link that is not
    /// direct is only ever called with no deadline, by the reader thread.
    fn direct(&self) -> bool;

    /// Hand each message from the hub, in order, to `deliver` until
    /// `until()` holds (looked at before each message and while waiting),
    /// `deadline` passes with nothing to take, `deliver` holds a message, or
    /// the session ends. Only the holder of the client's consumer token
    /// calls this, so the ring (or the stream) has one consumer.
    fn take(&self, deadline: Option<Instant>, until: &dyn Fn() -> bool, deliver: &mut dyn FnMut(&[u8]) -> Flow)
        -> Took;

    /// Wait, taking nothing, until `ready()` holds (true) or `deadline`
    /// passes (false). Whoever changes what `ready` looks at calls
    /// [`Link::notify`] afterwards, so no wake-up is lost.
    fn wait(&self, deadline: Option<Instant>, ready: &dyn Fn() -> bool) -> bool;

    /// Wake the threads in [`Link::wait`] (and a consumer waiting in
    /// [`Link::take`]) to look at their conditions again. Costs a system
    /// call only when one of them announced that it sleeps.
    fn notify(&self);

    /// The link's own thread, for what it does besides reading: the stream's
    /// writer, the shared-memory links' watch for the hub's end. Runs until
    /// the link ends; returns why, if this thread is the one that noticed.
    fn tend(&self) -> Option<String>;

    /// End the link: let what is queued reach the hub (bounded by
    /// [`GOODBYE_GRACE`](crate::GOODBYE_GRACE)), then release the hub and
    /// wake every thread waiting on the link so it returns.
    fn close(&self);
}
