//! The reactor: one thread, one epoll set, every socket session.
//!
//! TCP and unix-socket clients, `shm://` session sockets and the listeners
//! they arrive on are all served here, without a thread per connection: the
//! hub's threads and memory stay flat from one client to thousands. Per
//! connection the reactor only moves bytes; the session layer
//! ([`crate::session`]) does the rest — admission, `HELLO` checks, request
//! mapping, errors, goodbyes.
//!
//! This file is the loop: it waits for readiness, notices and deadlines,
//! reads each ready connection and hands what it read to its phase's job,
//! writes what the connection has pending, and closes or hands over
//! connections. The jobs, each in its own file, import nothing from here:
//!
//! - [`accept`]: the listeners, and new connections from them.
//! - [`sniff`]: what a TCP connection speaks (the protocol, HTTP for the
//!   control server, plaintext on a TLS port), from its first bytes.
//! - [`handshake`]: `HELLO` to `WELCOME`, and the handshake deadlines;
//!   [`pending`]: the connections in their handshake per peer, and which
//!   to close to make room for a new one.
//! - [`forward`]: a stream session's messages to the bus as transmit credit
//!   allows (reading on only up to [`forward::INPUT_LIMIT`] without it),
//!   and the bus's items back to the client.
//! - [`conn`]: the connection they share; [`input`]: its input buffer;
//!   [`notice`]: how the bus asks for a connection's service.
//!
//! **TLS** (`[hub] tls_cert`): every TCP connection is a
//! [`TlsSocket`](super::tls::TlsSocket), read and written through rustls
//! without blocking; its handshake counts against the same deadline.
//!
//! Invariants: the reactor never blocks (all sockets are non-blocking; the
//! only wait is `epoll_wait`); no peer holds more than its share of the
//! handshake slots, and a new connection always gets one (the oldest
//! without a `HELLO` makes room); a client's messages reach the bus in order
//! and its detach after them; one connection's failure closes that
//! connection only; the bus is woken once per round for everything
//! forwarded in it.

mod accept;
mod conn;
mod forward;
mod handshake;
mod input;
mod notice;
mod pending;
mod sniff;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use std::io::ErrorKind;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Receiver;
use fieldhub_proto::wire::ErrorCode;
use mio::{Events, Interest, Poll, Token};
use tracing::warn;

pub use accept::Listening;
use accept::{Accepted, Acceptor};
use conn::{Conn, Flow, Phase};
use forward::{Forwarded, INPUT_LIMIT};
use handshake::Deadlines;
use notice::Notice;
use pending::{Pending, Victim};

use super::http::HttpHandoff;
use super::shm::ShmService;
use super::tls::TlsFailure;
#[cfg(target_os = "linux")]
use crate::session::peer_user::DiagSocket;
use crate::session::{Sessions, Violation};
use fieldhub_bus::slots::SlotTable;

/// The waker's token; listeners take the tokens below [`CONN_BASE`].
const WAKER: Token = Token(usize::MAX);
const CONN_BASE: usize = 1 << 16;

/// The running reactor's handle: stops it.
pub struct ReactorHandle {
    stop: Arc<AtomicBool>,
    notice: Arc<Notice>,
}

impl ReactorHandle {
    /// Stop the reactor: every connection still open is closed.
    pub fn stop(&self) {
        // SYNC POINT with the loop's Acquire load.
        self.stop.store(true, Ordering::Release);
        self.notice.wake();
    }
}

/// The reactor thread's state.
pub struct Reactor {
    poll: Poll,
    acceptor: Acceptor,
    conns: SlotTable<Conn>,
    notices: Receiver<usize>,
    notice: Arc<Notice>,
    stop: Arc<AtomicBool>,
    sessions: Arc<Sessions>,
    control: Option<Arc<dyn HttpHandoff>>,
    /// What every shared-memory session gets: the bell, the ring size.
    shm: Option<Arc<ShmService>>,
    deadlines: Deadlines,
    /// The connections in their handshake, per peer.
    pending: Pending,
    /// The read buffer lent to whichever connection is being read.
    spare: Vec<u8>,
    /// Who a TCP peer is, asked on the reactor's thread: opened here, while
    /// descriptors are free and before the hub says it is ready. Linux-only.
    #[cfg(target_os = "linux")]
    diag: Option<DiagSocket>,
}

impl Reactor {
    /// A reactor for `listeners`; TCP connections that speak HTTP go to
    /// `control`, shared-memory sessions are opened with `shm`, TCP speaks
    /// TLS with `tls`.
    pub fn new(
        listeners: Vec<Listening>,
        sessions: Arc<Sessions>,
        control: Option<Arc<dyn HttpHandoff>>,
        shm: Option<Arc<ShmService>>,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> std::io::Result<(Self, ReactorHandle)> {
        let poll = Poll::new()?;
        let (notice, notices) = Notice::new(poll.registry(), WAKER)?;
        let notice = Arc::new(notice);
        let acceptor = Acceptor::new(listeners, poll.registry(), tls)?;
        let stop = Arc::new(AtomicBool::new(false));
        let handle = ReactorHandle { stop: Arc::clone(&stop), notice: Arc::clone(&notice) };
        let reactor = Self {
            poll,
            acceptor,
            conns: SlotTable::default(),
            notices,
            notice,
            stop,
            sessions,
            control,
            shm,
            deadlines: Deadlines::default(),
            pending: Pending::default(),
            spare: Vec::with_capacity(input::READ_CHUNK),
            #[cfg(target_os = "linux")]
            diag: Some(DiagSocket::open()),
        };
        Ok((reactor, handle))
    }

    /// Serve until stopped.
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        #[cfg(target_os = "linux")]
        if let Some(diag) = self.diag.take() {
            diag.serve_this_thread();
        }
        loop {
            let next = self.deadlines.next().into_iter().chain(self.acceptor.next_retry()).min();
            let timeout = next.map(|at| at.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != ErrorKind::Interrupted {
                    warn!("the reactor cannot wait for events: {e}");
                    break;
                }
            }
            // SYNC POINT with ReactorHandle::stop's Release store.
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            self.serve_events(&events);
            self.serve_notices();
            let now = Instant::now();
            self.expire_handshakes(now);
            self.retry_accepts(now);
            // One wake-up of the bus for everything forwarded this round.
            self.sessions.inbox.wake_bus();
        }
        self.close_all();
    }

    fn serve_events(&mut self, events: &Events) {
        for event in events.iter() {
            match event.token() {
                WAKER => {}
                Token(index) if index < CONN_BASE => self.accept(index),
                Token(token) => {
                    let index = token - CONN_BASE;
                    if event.is_readable() || event.is_read_closed() || event.is_error() {
                        if let Some(conn) = self.conns.get_mut(index) {
                            conn.unread = true;
                        }
                        self.pump(index);
                    }
                    if event.is_writable() {
                        self.drain(index);
                    }
                }
            }
        }
    }

    /// Serve every connection a notice named since the last round.
    fn serve_notices(&mut self) {
        self.notice.rearm();
        while let Ok(index) = self.notices.try_recv() {
            self.serve_notice(index);
        }
    }

    fn close_all(&mut self) {
        for mut conn in self.conns.drain() {
            let _ = self.poll.registry().deregister(&mut conn.socket);
        }
        self.acceptor.close();
    }

    /// Accept every waiting connection on listener `index`.
    fn accept(&mut self, index: usize) {
        while let Some(accepted) = self.acceptor.accept(index) {
            self.admit(accepted);
        }
    }

    /// Accept again on every listener once the back-off after a failed
    /// accept is over at `now`.
    fn retry_accepts(&mut self, now: Instant) {
        if !self.acceptor.retry_due(now) {
            return;
        }
        for index in 0..self.acceptor.listeners() {
            self.accept(index);
        }
        self.acceptor.retried();
    }

    /// Count a new connection (making room for it first, `pending.rs`),
    /// watch it, start its handshake clock, and read what it sent already.
    fn admit(&mut self, accepted: Accepted) {
        let Accepted { mut socket, via, peer, origin, key, phase } = accepted;
        if let Some(victim) = self.pending.room_for(key) {
            self.make_room(victim);
        }
        let slot = match self.sessions.admit_from(via, peer.clone(), origin, key) {
            Ok(slot) => slot,
            Err(violation) => {
                self.sessions.log_refusal(key, &peer, &violation.text);
                // A fresh socket has room for one small message.
                let _ = socket.write(&violation.refusal());
                return;
            }
        };
        let index = self.conns.next_index();
        let token = Token(CONN_BASE + index);
        if let Err(e) = self.poll.registry().register(&mut socket, token, Interest::READABLE | Interest::WRITABLE) {
            warn!(peer, "cannot watch a new connection: {e}");
            return;
        }
        let serial = self.deadlines.start(index, Instant::now());
        let mut conn = Conn::new(socket, slot, phase, serial);
        conn.held = Some(key);
        self.pending.hold(key, index, serial);
        let inserted = self.conns.insert(conn);
        debug_assert_eq!(inserted, index);
        self.pump(index);
    }

    /// Close `victim`, a connection still in its handshake, to make room
    /// for a new one; it is told why.
    fn make_room(&mut self, victim: Victim) {
        self.pending.release(victim.peer, victim.serial);
        let Some(conn) = self.conns.get_mut(victim.index) else { return };
        if conn.serial != victim.serial {
            return;
        }
        conn.held = None;
        if conn.phase.in_handshake() {
            conn.refuse(&Violation::new(ErrorCode::HubFull, victim.why.text()));
            self.drain(victim.index);
        }
    }

    /// Let go of connection `index`'s handshake slot once it is past its
    /// handshake (welcomed, refused, or handed over).
    fn settle(&mut self, index: usize) {
        let Some(conn) = self.conns.get_mut(index) else { return };
        if !conn.phase.in_handshake() {
            if let Some(key) = conn.held.take() {
                self.pending.release(key, conn.serial);
            }
        }
    }

    /// Forget connection `conn`, just removed, among the pending handshakes.
    fn forget(&mut self, conn: &mut Conn) {
        if let Some(key) = conn.held.take() {
            self.pending.release(key, conn.serial);
        }
    }

    /// Refuse connections whose handshake ran out of time by `now`.
    fn expire_handshakes(&mut self, now: Instant) {
        while let Some((index, serial)) = self.deadlines.pop_expired(now) {
            let Some(conn) = self.conns.get_mut(index) else { continue };
            if handshake::time_out(conn, serial) {
                self.settle(index);
                self.drain(index);
            }
        }
    }

    /// A notice for connection `index`: the bus queued items, returned
    /// credit, or hung the client up.
    fn serve_notice(&mut self, index: usize) {
        let Some(conn) = self.conns.get(index) else { return };
        if let Phase::Stream(session) = &conn.phase {
            if session.hung_up() {
                return self.close(index, "the hub hung up: the client does not read its replies".into());
            }
        }
        self.pump(index);
        self.drain(index);
    }

    /// Read and process input until the socket would block, the client is
    /// paused, or the connection ends; then write what it produced.
    fn pump(&mut self, index: usize) {
        let Some(conn) = self.conns.get_mut(index) else { return };
        // A connection with nothing buffered borrows the reactor's read
        // buffer and gives it back when done: idle clients hold no buffer,
        // and reading allocates nothing.
        conn.input.borrow_if_idle(&mut self.spare);
        self.pump_buffered(index);
        if let Some(conn) = self.conns.get_mut(index) {
            conn.input.give_back_if_drained(&mut self.spare);
        }
        self.settle(index);
        self.drain(index);
    }

    fn pump_buffered(&mut self, index: usize) {
        loop {
            let Reactor { conns, notice, shm, control, .. } = self;
            let Some(conn) = conns.get_mut(index) else { return };
            let paused = match process(conn, index, notice, shm.as_deref(), control.is_some()) {
                Flow::Continue => false,
                Flow::Paused => true,
                Flow::Close(reason) => return self.close(index, reason),
                Flow::HandOver => return self.hand_over(index),
            };
            if conn.at_end {
                // Complete messages read before the end still go first.
                if paused {
                    break;
                }
                let reason = conn.end_of_input();
                return self.close(index, reason);
            }
            // Read on while the buffer has room, even while the client waits
            // for credit: the kernel's buffer stays drained and the sender's
            // window open, instead of closing and reopening only on a timer.
            if !conn.unread || (paused && conn.input.len() >= INPUT_LIMIT) {
                break;
            }
            match conn.read_some() {
                Ok(0) => conn.at_end = true,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    conn.unread = false;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    let reason = match conn.phase {
                        Phase::Stream(_) => format!("connection lost: {e}"),
                        #[cfg(target_os = "linux")]
                        Phase::Shm(_) => format!("connection lost: {e}"),
                        _ => {
                            // A failed TLS handshake (a client that does not
                            // trust the hub, or has no certificate it takes)
                            // is said once; other early ends are not news.
                            if let Some(failure) = e.get_ref().and_then(|e| e.downcast_ref::<TlsFailure>()) {
                                conn.slot.log_refusal(&Violation::new(
                                    ErrorCode::Unauthorized,
                                    format!("{failure} (the handshake failed)"),
                                ));
                            }
                            String::new()
                        }
                    };
                    return self.close(index, reason);
                }
            }
        }
    }

    /// Give an HTTP connection to the control server; it is no client.
    fn hand_over(&mut self, index: usize) {
        let Some(mut conn) = self.conns.remove(index) else { return };
        let _ = self.poll.registry().deregister(&mut conn.socket);
        self.forget(&mut conn);
        let Some(control) = &self.control else { return };
        match sniff::http_connection(&mut conn) {
            Some(Ok(connection)) => control.hand_over(connection),
            Some(Err(e)) => warn!("cannot hand a connection to the control API: {e}"),
            None => {}
        }
    }

    /// Write what connection `index` has pending, taking more from its
    /// outbox, until the socket would block or nothing is left.
    fn drain(&mut self, index: usize) {
        let Some(conn) = self.conns.get_mut(index) else { return };
        loop {
            if conn.written >= conn.output.len() {
                conn.output.clear();
                conn.written = 0;
                // What TLS still holds goes first, a last message included.
                match conn.socket.flush() {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return self.close(index, format!("connection lost: {e}")),
                }
                let Phase::Stream(session) = &mut conn.phase else {
                    if matches!(conn.phase, Phase::Closing) {
                        return self.close_quietly(index);
                    }
                    return;
                };
                if forward::refill(session, &mut conn.output) {
                    conn.phase = Phase::Closing;
                }
                if conn.output.is_empty() {
                    return;
                }
            }
            let pending = &conn.output.finish()[conn.written..];
            match conn.socket.write(pending) {
                Ok(n) => conn.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return self.close(index, format!("connection lost: {e}")),
            }
        }
    }

    /// End connection `index`: the session layer detaches its client.
    fn close(&mut self, index: usize, reason: String) {
        if let Some(mut conn) = self.conns.remove(index) {
            let _ = self.poll.registry().deregister(&mut conn.socket);
            self.forget(&mut conn);
            if !reason.is_empty() {
                conn.slot.detach(&reason);
            }
        }
    }

    fn close_quietly(&mut self, index: usize) {
        self.close(index, String::new());
    }
}

/// Act on the input buffered for connection `index`, as its phase says.
fn process(conn: &mut Conn, index: usize, notice: &Arc<Notice>, service: Option<&ShmService>, http: bool) -> Flow {
    match &mut conn.phase {
        Phase::Sniff => {
            let flow = sniff::sniff(conn, http);
            // TLS read the first bytes into the buffer (a plain socket only
            // peeks): the HELLO may be there already, and the socket may
            // have nothing more to say until it is answered.
            if !conn.input.is_empty() && matches!((&flow, &conn.phase), (Flow::Continue, Phase::Hello { .. })) {
                return handshake::hello(conn, false, index, notice, service);
            }
            flow
        }
        Phase::Hello { shm } => {
            let shm = *shm;
            handshake::hello(conn, shm, index, notice, service)
        }
        Phase::Stream(session) => match forward::forward(&mut conn.input, &mut conn.slot, session) {
            Forwarded::Done => Flow::Continue,
            Forwarded::NoCredit => Flow::Paused,
            Forwarded::Goodbye(reason) => Flow::Close(reason),
            Forwarded::Broke(violation) => {
                conn.reject(&violation);
                Flow::Continue
            }
        },
        #[cfg(target_os = "linux")]
        Phase::Shm(_) => {
            if !conn.input.is_empty() {
                warn!("a shared-memory client wrote to its session socket, which carries nothing after WELCOME");
                return Flow::Close("the client broke the session protocol (bytes on the session socket)".into());
            }
            Flow::Continue
        }
        Phase::Closing => {
            // Nothing read is acted on any more.
            conn.input.clear();
            Flow::Continue
        }
    }
}
