//! The handshake: from a connection's first message to its `WELCOME` (or
//! its `REFUSE`), within [`HANDSHAKE_TIMEOUT`] of its accept.
//!
//! - **`HELLO`**, and on a hub with a token the `CHALLENGE` it gets and the
//!   client's `AUTH` (`spec/protocol.md` 5.1): each at most
//!   [`MAX_HELLO_LEN`] bytes (a longer length prefix is no fieldhub client
//!   and is refused before its body is read), decided by the session layer
//!   (`ClientSlot::handshake`). An admitted stream client is then attached
//!   to the bus and gets its `WELCOME` queued; a shared-memory client gets
//!   its segment and `WELCOME` on its session socket.
//! - **Deadlines** ([`Deadlines`]): each accepted connection gets one;
//!   when it passes, a connection still sniffing or waiting for its `HELLO`
//!   (or its `AUTH`) is refused and closed, whatever it sent of it.
//!
//! Invariants: a refused handshake is logged once and ends with a `REFUSE`;
//! a deadline is decided from the instant it is given (no clock is read
//! here); deadlines are equal timeouts queued in accept order, so the queue
//! stays sorted and only its front is looked at; a deadline of a connection
//! that has ended is ignored, even when a later connection took its index.
//! Imports from the reactor the connection, the stream session it starts
//! and the notice that session posts.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use fieldhub_proto::limits::MAX_HELLO_LEN;
use fieldhub_proto::wire::{DecodeError, ErrorCode};

use super::conn::{Conn, Flow, Phase};
use super::forward::StreamSession;
use super::notice::Notice;
use crate::session::{Answer, Violation, HANDSHAKE_TIMEOUT};
use crate::transport::shm::ShmService;

/// Handle the client's handshake messages (`HELLO`, then its `AUTH` when
/// the hub challenged it) once they are in connection `index`'s input
/// (`shm`: on a shared-memory session socket, served with `service`).
pub(super) fn hello(
    conn: &mut Conn,
    shm: bool,
    index: usize,
    notice: &Arc<Notice>,
    service: Option<&ShmService>,
) -> Flow {
    loop {
        let range = match conn.input.next_message(MAX_HELLO_LEN) {
            Ok(Some(range)) => range,
            Ok(None) => return Flow::Continue,
            Err(DecodeError::Oversize { len, .. }) => {
                let text = format!(
                    "a handshake message claims {len} bytes; one is at most {MAX_HELLO_LEN} (is this a fieldhub \
                     client?)"
                );
                conn.refuse(&Violation::new(ErrorCode::Oversize, text));
                return Flow::Continue;
            }
            Err(e) => {
                conn.refuse(&Violation::new(ErrorCode::Malformed, format!("during handshake: {e}")));
                return Flow::Continue;
            }
        };
        let end = range.end;
        let answer = conn.slot.handshake(conn.input.body(range));
        conn.input.take_to(end);
        match answer {
            Err(violation) => {
                conn.refuse(&violation);
                return Flow::Continue;
            }
            // The AUTH may be buffered already (nothing else may be).
            Ok(Answer::Challenge(challenge)) => conn.output.push_encoded(&challenge),
            Ok(Answer::Welcome) => return welcome(conn, shm, index, notice, service),
        }
    }
}

/// Attach an admitted client and send its `WELCOME`.
fn welcome(conn: &mut Conn, shm: bool, index: usize, notice: &Arc<Notice>, service: Option<&ShmService>) -> Flow {
    if shm {
        return welcome_shm(conn, service);
    }
    match StreamSession::attach(&mut conn.slot, index, notice) {
        Ok(session) => {
            conn.output.push_encoded(&conn.slot.welcome());
            conn.phase = Phase::Stream(session);
        }
        Err(violation) => conn.refuse(&violation),
    }
    Flow::Continue
}

/// Open an admitted shared-memory client's session and send its `WELCOME`
/// with the segment's descriptors.
#[cfg(target_os = "linux")]
fn welcome_shm(conn: &mut Conn, service: Option<&ShmService>) -> Flow {
    let (super::conn::Socket::Unix(socket), Some(service)) = (&conn.socket, service) else {
        return Flow::Close("no shared memory served".into());
    };
    // The CHALLENGE (if any) goes before the WELCOME and its descriptors.
    if let Err(e) = flush_before_descriptors(conn.output.finish(), conn.written, socket) {
        return Flow::Close(format!("cannot write the handshake: {e}"));
    }
    conn.output.clear();
    conn.written = 0;
    match crate::transport::shm::open_session(&mut conn.slot, socket, service) {
        Ok(link) => conn.phase = Phase::Shm(Arc::downgrade(&link)),
        Err(violation) => conn.refuse(&violation),
    }
    Flow::Continue
}

/// No shared memory is served here: no connection is a shared-memory
/// session socket, and no [`ShmService`] exists.
#[cfg(not(target_os = "linux"))]
fn welcome_shm(_conn: &mut Conn, service: Option<&ShmService>) -> Flow {
    match service {
        None => Flow::Close("no shared memory served".into()),
        Some(service) => match *service {},
    }
}

/// Write what is still queued for a shared-memory client before its
/// `WELCOME`, which goes out on its own with the descriptors: the client
/// read the `CHALLENGE` before it answered, so this is at most a remnant
/// the socket did not take at once.
#[cfg(target_os = "linux")]
fn flush_before_descriptors(
    pending: &[u8],
    written: usize,
    socket: &std::os::unix::net::UnixStream,
) -> std::io::Result<()> {
    use std::io::Write;
    let mut rest = &pending[written.min(pending.len())..];
    while !rest.is_empty() {
        match (&*socket).write(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The handshake deadlines of the connections accepted, in accept order.
#[derive(Default)]
pub(super) struct Deadlines {
    /// When, which connection index, and its serial.
    queue: VecDeque<(Instant, usize, u64)>,
    /// The last serial given out.
    serial: u64,
}

impl Deadlines {
    /// Start the handshake clock of connection `index`, accepted at `now`.
    /// Returns its serial, which tells it from a later connection that
    /// takes the same index.
    pub(super) fn start(&mut self, index: usize, now: Instant) -> u64 {
        self.serial += 1;
        self.queue.push_back((now + HANDSHAKE_TIMEOUT, index, self.serial));
        self.serial
    }

    /// The earliest deadline, to wait until.
    pub(super) fn next(&self) -> Option<Instant> {
        self.queue.front().map(|&(at, ..)| at)
    }

    /// The next connection (index, serial) whose deadline is not after
    /// `now`, taken off the queue.
    pub(super) fn pop_expired(&mut self, now: Instant) -> Option<(usize, u64)> {
        let &(at, index, serial) = self.queue.front()?;
        if at > now {
            return None;
        }
        self.queue.pop_front();
        Some((index, serial))
    }
}

/// Refuse connection `conn`, whose deadline entry `serial` passed, if that
/// entry is its own and its handshake is still under way. Returns whether
/// it was refused (the refusal waits to be written).
pub(super) fn time_out(conn: &mut Conn, serial: u64) -> bool {
    if conn.serial != serial || !conn.phase.in_handshake() {
        return false;
    }
    let violation = Violation::new(ErrorCode::Malformed, format!("no HELLO within {} s", HANDSHAKE_TIMEOUT.as_secs()));
    conn.refuse(&violation);
    true
}

#[cfg(test)]
mod tests {
    use std::os::unix::net::UnixStream;
    use std::time::Duration;

    use fieldhub_bus::inbox::{Inbound, Inbox};
    use fieldhub_proto::wire::{self, Message};
    use mio::{Poll, Token};

    use super::*;
    use crate::transport::reactor::conn::Socket;
    use crate::transport::reactor::testing::{self, feed};

    /// A connection waiting for its `HELLO` over one end of a socket pair
    /// (the test reads its other end only through the output queued).
    struct Waiting {
        conn: Conn,
        notice: Arc<Notice>,
        inbox: Inbox,
        _poll: Poll,
        _peer: UnixStream,
    }

    fn waiting(serial: u64) -> Waiting {
        waiting_on(testing::sessions(), serial)
    }

    fn waiting_on((sessions, inbox): (Arc<crate::session::Sessions>, Inbox), serial: u64) -> Waiting {
        let (ours, peer) = UnixStream::pair().expect("a socket pair");
        let conn = Conn::new(Socket::Unix(ours), testing::slot(&sessions), Phase::Hello { shm: false }, serial);
        let poll = Poll::new().expect("a poll");
        let (notice, _) = Notice::new(poll.registry(), Token(0)).expect("a notice");
        Waiting { conn, notice: Arc::new(notice), inbox, _poll: poll, _peer: peer }
    }

    /// The one message `conn` queued for its client.
    fn queued(conn: &mut Conn) -> Vec<u8> {
        let mut bodies = testing::bodies(conn.output.finish());
        assert_eq!(bodies.len(), 1, "one message queued");
        bodies.remove(0)
    }

    fn refusal_text(body: &[u8]) -> String {
        match wire::decode(body) {
            Ok(Message::Refuse(report)) => report.text.to_owned(),
            other => panic!("expected REFUSE, got {other:?}"),
        }
    }

    #[test]
    fn a_hello_split_across_reads_waits_for_its_last_byte_then_attaches_and_is_welcomed() {
        let mut w = waiting(1);
        let hello = testing::hello();
        feed(&mut w.conn.input, &hello[..hello.len() - 1]);
        assert!(matches!(hello_of(&mut w), Flow::Continue));
        assert!(matches!(w.conn.phase, Phase::Hello { shm: false }), "still waiting");
        assert!(w.conn.output.is_empty());

        feed(&mut w.conn.input, &hello[hello.len() - 1..]);
        assert!(matches!(hello_of(&mut w), Flow::Continue));
        assert!(matches!(w.conn.phase, Phase::Stream(_)));
        assert!(w.conn.input.is_empty(), "the HELLO was taken");
        assert!(matches!(wire::decode(&queued(&mut w.conn)), Ok(Message::Welcome(_))));
        assert!(matches!(w.inbox.try_recv(), Ok(Inbound::Attach { .. })), "attached before the WELCOME goes");
    }

    fn hello_of(w: &mut Waiting) -> Flow {
        hello(&mut w.conn, false, 0, &w.notice, None)
    }

    #[test]
    fn a_hub_with_a_token_challenges_and_welcomes_only_the_auth_that_answers_its_nonce() {
        use fieldhub_proto::auth::auth_mac;
        use fieldhub_proto::wire::Auth;
        let challenged = |w: &mut Waiting| {
            feed(&mut w.conn.input, &testing::hello());
            assert!(matches!(hello_of(w), Flow::Continue));
            assert!(matches!(w.conn.phase, Phase::Hello { shm: false }), "still in the handshake");
            assert!(w.inbox.try_recv().is_err(), "nothing reached the bus before AUTH");
            let body = queued(&mut w.conn);
            w.conn.output.clear();
            match wire::decode(&body) {
                Ok(Message::Challenge(c)) => (c.nonce, c.hub_name.to_owned()),
                other => panic!("expected CHALLENGE, got {other:?}"),
            }
        };
        let mut holder = waiting_on(testing::sessions_with(Some("sesame")), 1);
        let (nonce, hub_name) = challenged(&mut holder);
        assert_eq!(hub_name, "test-hub");
        let challenge = wire::Challenge { nonce, hub_name: &hub_name };
        let auth = Auth { mac: auth_mac(b"sesame", &challenge, &testing::HELLO) };
        feed(&mut holder.conn.input, &testing::encoded(&Message::Auth(auth)));
        hello_of(&mut holder);
        assert!(matches!(holder.conn.phase, Phase::Stream(_)));
        assert!(matches!(wire::decode(&queued(&mut holder.conn)), Ok(Message::Welcome(_))));

        // The same AUTH on another connection answers a nonce it was not sent.
        let mut replay = waiting_on(testing::sessions_with(Some("sesame")), 2);
        let (other, _) = challenged(&mut replay);
        assert_ne!(other, nonce, "every challenge has its own nonce");
        feed(&mut replay.conn.input, &testing::encoded(&Message::Auth(auth)));
        hello_of(&mut replay);
        assert!(matches!(replay.conn.phase, Phase::Closing));
        assert!(refusal_text(&queued(&mut replay.conn)).starts_with("wrong token"));
        assert!(replay.inbox.try_recv().is_err(), "nothing reached the bus");
    }

    #[test]
    fn a_tls_client_hello_on_a_plaintext_port_is_refused_before_its_body_is_read() {
        let mut w = waiting(1);
        feed(&mut w.conn.input, &[0x16, 0x03, 0x01, 0x02, 0x00]);
        assert!(matches!(hello_of(&mut w), Flow::Continue));
        assert!(matches!(w.conn.phase, Phase::Closing));
        let text = refusal_text(&queued(&mut w.conn));
        assert!(text.contains("is this a fieldhub client?"), "{text}");
        assert!(w.inbox.try_recv().is_err(), "nothing reached the bus");
    }

    #[test]
    fn a_first_message_other_than_hello_is_refused() {
        let mut w = waiting(1);
        feed(&mut w.conn.input, &testing::encoded(&Message::Ping { nonce: 1 }));
        hello_of(&mut w);
        assert!(matches!(w.conn.phase, Phase::Closing));
        assert_eq!(refusal_text(&queued(&mut w.conn)), "the first message must be HELLO, got PING");
    }

    #[test]
    fn a_deadline_passes_at_its_instant_and_not_before() {
        let accepted = Instant::now();
        let mut deadlines = Deadlines::default();
        let serial = deadlines.start(7, accepted);
        let at = accepted + HANDSHAKE_TIMEOUT;
        assert_eq!(deadlines.next(), Some(at));
        assert_eq!(deadlines.pop_expired(at - Duration::from_nanos(1)), None);
        assert_eq!(deadlines.pop_expired(at), Some((7, serial)));
        assert_eq!(deadlines.next(), None);
    }

    #[test]
    fn deadlines_pass_in_accept_order_each_at_its_own_instant() {
        let first = Instant::now();
        let second = first + Duration::from_millis(300);
        let mut deadlines = Deadlines::default();
        let a = deadlines.start(3, first);
        let b = deadlines.start(4, second);
        assert_ne!(a, b);
        let late = second + HANDSHAKE_TIMEOUT;
        assert_eq!(deadlines.pop_expired(late - Duration::from_millis(1)), Some((3, a)));
        assert_eq!(deadlines.pop_expired(late - Duration::from_millis(1)), None);
        assert_eq!(deadlines.next(), Some(late));
        assert_eq!(deadlines.pop_expired(late), Some((4, b)));
    }

    #[test]
    fn a_connection_still_in_its_handshake_at_its_deadline_is_refused_whatever_it_sent() {
        for sent in [&[][..], &testing::hello()[..3]] {
            let mut w = waiting(5);
            feed(&mut w.conn.input, sent);
            hello_of(&mut w);
            assert!(time_out(&mut w.conn, 5), "{} bytes sent", sent.len());
            assert!(matches!(w.conn.phase, Phase::Closing));
            assert_eq!(refusal_text(&queued(&mut w.conn)), "no HELLO within 5 s");
        }
    }

    #[test]
    fn a_connection_past_its_handshake_or_newer_than_the_deadline_is_left_alone() {
        let mut w = waiting(5);
        assert!(!time_out(&mut w.conn, 4), "the deadline of an earlier connection at this index");
        feed(&mut w.conn.input, &testing::hello());
        hello_of(&mut w);
        assert!(!time_out(&mut w.conn, 5), "welcomed before its deadline");
        assert!(matches!(w.conn.phase, Phase::Stream(_)));
    }
}
