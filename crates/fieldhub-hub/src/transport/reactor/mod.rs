//! The reactor: one thread, one epoll set, every socket session.
//!
//! TCP and unix-socket clients, `shm://` session sockets and the listeners
//! they arrive on are all served here, without a thread per connection: the
//! hub's threads and memory stay flat from one client to thousands. Per
//! connection the reactor only moves bytes; the session layer
//! ([`crate::session`]) does the rest — admission, `HELLO` checks, request
//! mapping, errors, goodbyes.
//!
//! - **Reading.** Complete messages are decoded in the connection's buffer
//!   and forwarded to the bus. A `FRAMES` batch takes transmit credit
//!   record by record and goes to the bus as one queue item (an
//!   `Inbound::Frames` run, as far as credit went); when the client has none left, the reactor
//!   reads on into its buffer up to [`INPUT_LIMIT`], then stops reading that
//!   socket (the kernel's fixed receive buffer then fills and the client's
//!   writes block) until the bus returns credit and tells the reactor. That
//!   is how a stream sender is held to a bound like a shared-memory one.
//! - **Writing.** The bus queues a client's items in its [`QueueOutbox`] and,
//!   once per round, posts a notice; the reactor packs what waits into as few
//!   messages as fit and writes until the socket would block, then waits for
//!   it to drain. A client that takes items wakes a bus waiting for its room.
//! - **Handshakes** have [`HANDSHAKE_TIMEOUT`]; a TCP connection that opens
//!   with an HTTP request line goes to the control server instead.
//! - **TLS** (`[hub] tls_cert`): every TCP connection is a [`TlsSocket`]
//!   (`tls.rs`), read and written through rustls without blocking; its
//!   handshake counts against the same deadline, and the HTTP sniff looks
//!   at decrypted bytes. A plaintext peer on a TLS port is refused in
//!   plaintext (a `REFUSE`, or a `400` for HTTP) with one log line.
//!
//! Invariants: the reactor never blocks (all sockets are non-blocking; the
//! only wait is `epoll_wait`); a client's messages reach the bus in order
//! and its detach after them; one connection's failure closes that
//! connection only.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use fieldhub_proto::limits::{MAX_HELLO_LEN, MAX_MESSAGE_LEN};
use fieldhub_proto::wire::{self, check_length, DecodeError, ErrorCode, Packer, LENGTH_PREFIX};
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use tracing::{info, warn};

use super::http::{looks_like_http, HttpConnection, HttpHandoff};
use super::shm::{open_session, ShmLink, ShmService};
use super::tls::{Opening, TlsFailure, TlsSocket};
use crate::session::peer_user::{DiagSocket, PeerOrigin};
use crate::session::{request_of, ClientSlot, FrameCursor, Request, Sessions, Violation, HANDSHAKE_TIMEOUT};
use fieldhub_bus::credit::{TxCredit, Waiter};
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, Outbox, QueueOutbox};
use fieldhub_bus::slots::SlotTable;

/// How long the reactor waits before it accepts again after an accept
/// failed for want of descriptors or memory (`EMFILE`, `ENFILE`, `ENOBUFS`).
const ACCEPT_BACK_OFF: Duration = Duration::from_millis(100);
/// The waker's token; listeners take the tokens below [`CONN_BASE`].
const WAKER: Token = Token(usize::MAX);
const CONN_BASE: usize = 1 << 16;
/// Bytes read from a socket per call, at most; also the buffer's base size.
const READ_CHUNK: usize = 16 * 1024;
/// Bytes a stream client may have read but not yet forwarded (it waits for
/// transmit credit) before the reactor stops reading it, beyond the message
/// being forwarded.
const INPUT_LIMIT: usize = 64 * 1024;
/// The writer stops packing and writes once this many bytes are pending.
const WRITE_CHUNK: usize = 64 * 1024;
/// Items a stream session takes from its outbox per lock.
const TAKE_BATCH: usize = 64;
/// The kernel's receive buffer for a stream session, set so the kernel does
/// not grow it: with [`INPUT_LIMIT`], a sender the reactor stops reading is
/// held back after a few thousand frames.
pub const STREAM_RECEIVE_BUFFER: usize = 64 * 1024;
/// The TCP segment size a stream client may send. Linux advertises a
/// receive window in whole segments; on loopback (64 KiB segments) a window
/// that a stopped reader closed would reopen only once a whole segment fits,
/// and the sender would wait for its zero-window probes — stalls of seconds,
/// seen under load. Small segments let the window reopen as soon as the
/// reactor reads.
pub const STREAM_SEGMENT: u32 = 8 * 1024;

/// A bound listener the reactor accepts on.
pub enum Listening {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
    /// An `shm://` session socket.
    Shm(UnixListener, PathBuf),
}

/// Tells the reactor a connection needs service (its outbox has items, its
/// credit came back, the bus hung it up), with one wake-up per reactor round.
pub struct Notice {
    queue: Sender<usize>,
    waker: Waker,
    /// A wake-up is on its way: later notices of this round need none.
    pending: AtomicBool,
}

impl Notice {
    fn post(&self, conn: usize) {
        let _ = self.queue.send(conn);
        // SYNC POINT with the reactor's swap to false before it drains.
        if !self.pending.swap(true, Ordering::AcqRel) {
            let _ = self.waker.wake();
        }
    }
}

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
        self.notice.pending.store(true, Ordering::Release);
        let _ = self.notice.waker.wake();
    }
}

enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
    /// TCP on a hub with TLS; boxed, so plaintext connections stay small.
    Tls(Box<TlsSocket>),
}

impl Socket {
    fn fd(&self) -> std::os::fd::RawFd {
        match self {
            Socket::Tcp(s) => s.as_raw_fd(),
            Socket::Unix(s) => s.as_raw_fd(),
            Socket::Tls(s) => s.tcp.as_raw_fd(),
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.read(buf),
            Socket::Unix(s) => s.read(buf),
            Socket::Tls(s) => s.read(buf),
        }
    }
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.write(buf),
            Socket::Unix(s) => s.write(buf),
            Socket::Tls(s) => s.write(buf),
        }
    }
    /// Take a TLS connection's state out, leaving a plain duplicate of its
    /// socket in its place (to close, or to write plaintext on); `None`
    /// for a plain socket.
    fn take_tls(&mut self) -> std::io::Result<Option<Box<TlsSocket>>> {
        let Socket::Tls(tls) = self else { return Ok(None) };
        let duplicate = Socket::Tcp(tls.tcp.try_clone()?);
        match std::mem::replace(self, duplicate) {
            Socket::Tls(tls) => Ok(Some(tls)),
            Socket::Tcp(_) | Socket::Unix(_) => Ok(None),
        }
    }
    /// Send what the socket's own layer still holds (TLS records); plain
    /// sockets hold nothing.
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Socket::Tls(s) => s.flush(),
            Socket::Tcp(_) | Socket::Unix(_) => Ok(()),
        }
    }
}

/// A stream client's session state.
struct StreamSession {
    outbox: Arc<QueueOutbox>,
    /// Items taken from the outbox and not yet packed (reused).
    taken: Vec<Outbound>,
    credit: Arc<TxCredit>,
    cursor: FrameCursor,
    hung_up: Arc<AtomicBool>,
}

enum Phase {
    /// TCP: looking at the first bytes for an HTTP request line.
    Sniff,
    /// Waiting for `HELLO`; `shm` for a shared-memory session socket.
    Hello {
        shm: bool,
    },
    Stream(StreamSession),
    /// A shared-memory session: the socket only signals its end. Only the
    /// bus holds the link: when it lets go of the client, the link's drop
    /// shuts the socket, which ends this session too.
    Shm(Weak<ShmLink>),
    /// Writing a last message (a refusal, an error), then closing.
    Closing,
}

struct Conn {
    socket: Socket,
    slot: ClientSlot,
    phase: Phase,
    /// Read bytes not yet taken: `input[start..]`.
    input: Vec<u8>,
    start: usize,
    /// Bytes to write: `output.finish()[written..]`.
    output: Packer,
    written: usize,
    /// The last read stopped before the socket said it would block: readiness
    /// was not used up, so reading must resume without a new event.
    unread: bool,
    /// The peer closed its side; what is buffered is still handled first.
    at_end: bool,
    /// Which handshake deadline entry is this connection's.
    serial: u64,
}

/// A session ends however its phase is left (closed, rejected, a last
/// message to write): its outbox refuses from then on, so the bus never
/// waits for it.
impl Drop for StreamSession {
    fn drop(&mut self) {
        self.outbox.close();
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Phase::Shm(link) = &self.phase {
            if let Some(link) = link.upgrade() {
                link.end();
            }
        }
    }
}

/// How processing a connection went.
enum Flow {
    /// Go on (read more when the socket has more).
    Continue,
    /// Stop reading: no credit (resumed by a notice) or a partial message.
    Paused,
    /// Close the connection now (for the log: why).
    Close(String),
    /// TCP that speaks HTTP: give it to the control server.
    HandOver,
}

/// The reactor thread's state.
pub struct Reactor {
    poll: Poll,
    listeners: Vec<Listening>,
    conns: SlotTable<Conn>,
    notices: Receiver<usize>,
    notice: Arc<Notice>,
    stop: Arc<AtomicBool>,
    sessions: Arc<Sessions>,
    control: Option<Arc<dyn HttpHandoff>>,
    /// What every shared-memory session gets: the bell, the ring size.
    shm: Option<Arc<ShmService>>,
    /// Handshake deadlines in accept order (all equal timeouts: sorted).
    deadlines: VecDeque<(Instant, usize, u64)>,
    /// When to try accepting again on listeners that ran out of
    /// descriptors or memory (see [`ACCEPT_BACK_OFF`]).
    accept_retry: Option<Instant>,
    /// Accepting has failed since the last success: said once in the log.
    accept_failing: bool,
    next_serial: u64,
    /// The read buffer lent to whichever connection is being read.
    spare: Vec<u8>,
    /// Who a TCP peer is, asked on the reactor's thread: opened here, while
    /// descriptors are free and before the hub says it is ready.
    diag: Option<DiagSocket>,
    /// `[hub] tls_cert`: every TCP connection speaks TLS with this.
    tls: Option<Arc<rustls::ServerConfig>>,
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
        let waker = Waker::new(poll.registry(), WAKER)?;
        let (queue, notices) = crossbeam_channel::unbounded();
        let notice = Arc::new(Notice { queue, waker, pending: AtomicBool::new(false) });
        for (index, listener) in listeners.iter().enumerate() {
            let fd = match listener {
                Listening::Tcp(l) => {
                    l.set_nonblocking(true)?;
                    // Inherited by accepted sockets; see both constants.
                    rustix::net::sockopt::set_socket_recv_buffer_size(l, STREAM_RECEIVE_BUFFER)?;
                    socket2::SockRef::from(l).set_tcp_mss(STREAM_SEGMENT)?;
                    l.as_raw_fd()
                }
                Listening::Unix(l, _) | Listening::Shm(l, _) => {
                    l.set_nonblocking(true)?;
                    l.as_raw_fd()
                }
            };
            poll.registry().register(&mut SourceFd(&fd), Token(index), Interest::READABLE)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let handle = ReactorHandle { stop: Arc::clone(&stop), notice: Arc::clone(&notice) };
        let reactor = Self {
            poll,
            listeners,
            conns: SlotTable::default(),
            notices,
            notice,
            stop,
            sessions,
            control,
            shm,
            deadlines: VecDeque::new(),
            accept_retry: None,
            accept_failing: false,
            next_serial: 0,
            spare: Vec::with_capacity(READ_CHUNK),
            diag: Some(DiagSocket::open()),
            tls,
        };
        Ok((reactor, handle))
    }

    /// Serve until stopped.
    pub fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        if let Some(diag) = self.diag.take() {
            diag.serve_this_thread();
        }
        loop {
            let next = self.deadlines.front().map(|(at, ..)| *at).into_iter().chain(self.accept_retry).min();
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
            // SYNC POINT with Notice::post's swap: reading its `true` makes
            // its queued notice visible below; a post after this swap reads
            // `false` and wakes the next round.
            self.notice.pending.swap(false, Ordering::AcqRel);
            while let Ok(index) = self.notices.try_recv() {
                self.serve_notice(index);
            }
            self.expire_handshakes();
            self.retry_accepts();
            // One wake-up of the bus for everything forwarded this round.
            self.sessions.inbox.wake_bus();
        }
        self.close_all();
    }

    fn close_all(&mut self) {
        for conn in self.conns.drain() {
            let _ = self.poll.registry().deregister(&mut SourceFd(&conn.socket.fd()));
        }
        for listener in self.listeners.drain(..) {
            if let Listening::Unix(_, path) | Listening::Shm(_, path) = listener {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// Accept every waiting connection on listener `index`.
    fn accept(&mut self, index: usize) {
        loop {
            let accepted = match &self.listeners[index] {
                Listening::Tcp(l) => l.accept().map(|(s, peer)| {
                    let _ = s.set_nodelay(true);
                    let origin = PeerOrigin::tcp(s.local_addr(), Ok(peer));
                    // `admit` wraps it in TLS when the hub speaks TLS.
                    let via = if self.tls.is_some() { "TLS" } else { "TCP" };
                    (Socket::Tcp(s), via, peer.to_string(), origin, Phase::Sniff)
                }),
                Listening::Unix(l, path) => l.accept().map(|(s, _)| {
                    let origin = PeerOrigin::unix(&s);
                    let peer = format!("unix:{}", path.display());
                    (Socket::Unix(s), "a unix socket", peer, origin, Phase::Hello { shm: false })
                }),
                Listening::Shm(l, _) => l.accept().map(|(s, _)| {
                    let origin = PeerOrigin::unix(&s);
                    (Socket::Unix(s), "shared memory", "shm".to_owned(), origin, Phase::Hello { shm: true })
                }),
            };
            match accepted {
                Ok((socket, via, peer, origin, phase)) => self.admit(socket, via, peer, origin, phase),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors or memory: the connection waits in
                    // the backlog, and the listener (edge-triggered) says
                    // nothing more about it; try again a little later, and
                    // say so once, not once per attempt.
                    if !std::mem::replace(&mut self.accept_failing, true) {
                        warn!(
                            "cannot accept connections: {e}; trying again every {} ms (too many clients, or raise \
                             the hub's descriptor limit: ulimit -n)",
                            ACCEPT_BACK_OFF.as_millis()
                        );
                    }
                    self.accept_retry = Some(Instant::now() + ACCEPT_BACK_OFF);
                    return;
                }
            }
        }
    }

    /// Accept again on every listener once the back-off after a failed
    /// accept is over.
    fn retry_accepts(&mut self) {
        if self.accept_retry.is_none_or(|at| at > Instant::now()) {
            return;
        }
        self.accept_retry = None;
        for index in 0..self.listeners.len() {
            self.accept(index);
        }
        if self.accept_retry.is_none() && std::mem::take(&mut self.accept_failing) {
            info!("accepting connections again");
        }
    }

    fn admit(&mut self, socket: Socket, via: &'static str, peer: String, origin: PeerOrigin, phase: Phase) {
        let mut socket = match (socket, &self.tls) {
            (Socket::Tcp(tcp), Some(config)) => match TlsSocket::new(tcp, config) {
                Ok(tls) => Socket::Tls(Box::new(tls)),
                Err(e) => {
                    warn!(peer, "cannot start TLS on a connection: {e}");
                    return;
                }
            },
            (socket, _) => socket,
        };
        let nonblocking = match &socket {
            Socket::Tcp(s) => s.set_nonblocking(true),
            Socket::Unix(s) => s.set_nonblocking(true),
            Socket::Tls(s) => s.tcp.set_nonblocking(true),
        };
        if nonblocking.is_err() {
            return;
        }
        let slot = match self.sessions.admit(via, peer.clone(), origin) {
            Ok(slot) => slot,
            Err(violation) => {
                warn!(peer, "refusing connection: {}", violation.text);
                // A fresh socket has room for one small message.
                let _ = socket.write(&violation.refusal());
                return;
            }
        };
        let index = self.conns.next_index();
        let token = Token(CONN_BASE + index);
        let fd = socket.fd();
        if let Err(e) =
            self.poll.registry().register(&mut SourceFd(&fd), token, Interest::READABLE | Interest::WRITABLE)
        {
            warn!(peer, "cannot watch a new connection: {e}");
            return;
        }
        self.next_serial += 1;
        let serial = self.next_serial;
        let conn = Conn {
            socket,
            slot,
            phase,
            input: Vec::new(),
            start: 0,
            output: Packer::new(),
            written: 0,
            unread: true,
            at_end: false,
            serial,
        };
        let inserted = self.conns.insert(conn);
        debug_assert_eq!(inserted, index);
        self.deadlines.push_back((Instant::now() + HANDSHAKE_TIMEOUT, index, serial));
        self.pump(index);
    }

    /// Refuse connections whose handshake ran out of time.
    fn expire_handshakes(&mut self) {
        let now = Instant::now();
        while let Some(&(at, index, serial)) = self.deadlines.front() {
            if at > now {
                return;
            }
            self.deadlines.pop_front();
            let Some(conn) = self.conns.get_mut(index) else { continue };
            if conn.serial != serial || !matches!(conn.phase, Phase::Sniff | Phase::Hello { .. }) {
                continue;
            }
            let violation =
                Violation::new(ErrorCode::Malformed, format!("no HELLO within {} s", HANDSHAKE_TIMEOUT.as_secs()));
            refuse(conn, &violation);
            self.drain(index);
        }
    }

    /// A notice for connection `index`: the bus queued items, returned
    /// credit, or hung the client up.
    fn serve_notice(&mut self, index: usize) {
        let Some(conn) = self.conns.get(index) else { return };
        if let Phase::Stream(session) = &conn.phase {
            // SYNC POINT with the hang-up's Release store.
            if session.hung_up.load(Ordering::Acquire) {
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
        if conn.start == conn.input.len() && conn.input.capacity() == 0 {
            std::mem::swap(&mut conn.input, &mut self.spare);
            conn.input.clear();
            conn.start = 0;
        }
        self.pump_buffered(index);
        if let Some(conn) = self.conns.get_mut(index) {
            if conn.start == conn.input.len() && self.spare.capacity() == 0 {
                conn.input.clear();
                conn.start = 0;
                std::mem::swap(&mut conn.input, &mut self.spare);
            }
        }
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
                let reason = end_of_input(conn);
                return self.close(index, reason);
            }
            // Read on while the buffer has room, even while the client waits
            // for credit: the kernel's buffer stays drained and the sender's
            // window open, instead of closing and reopening only on a timer.
            if !conn.unread || (paused && conn.input.len() - conn.start >= INPUT_LIMIT) {
                break;
            }
            match read_some(conn) {
                Ok(0) => conn.at_end = true,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    conn.unread = false;
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    let reason = match conn.phase {
                        Phase::Stream(_) | Phase::Shm(_) => format!("connection lost: {e}"),
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
        let _ = self.poll.registry().deregister(&mut SourceFd(&conn.socket.fd()));
        let Some(control) = &self.control else { return };
        // The duplicate keeps the connection open when `conn` closes its own.
        let handed = match conn.socket.take_tls() {
            Ok(Some(tls)) => {
                let certified = tls.certified();
                let (tcp, session) = tls.into_parts();
                // The request's first bytes were decrypted into the buffer already.
                let read_ahead = conn.input[conn.start..].to_vec();
                Ok(HttpConnection::Tls { tcp, session: Box::new(session), read_ahead, certified })
            }
            Ok(None) => match &conn.socket {
                Socket::Tcp(stream) => stream.try_clone().map(HttpConnection::Plain),
                Socket::Unix(_) | Socket::Tls(_) => return,
            },
            Err(e) => Err(e),
        };
        match handed {
            Ok(connection) => control.hand_over(connection),
            Err(e) => warn!("cannot hand a connection to the control API: {e}"),
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
                if matches!(conn.phase, Phase::Closing) {
                    return self.close_quietly(index);
                }
                if !refill(conn) {
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
            let _ = self.poll.registry().deregister(&mut SourceFd(&conn.socket.fd()));
            if !reason.is_empty() {
                conn.slot.detach(&reason);
            }
        }
    }

    fn close_quietly(&mut self, index: usize) {
        self.close(index, String::new());
    }
}

/// Act on the input buffered for connection `index`.
fn process(conn: &mut Conn, index: usize, notice: &Arc<Notice>, service: Option<&ShmService>, http: bool) -> Flow {
    match &mut conn.phase {
        Phase::Sniff => {
            let flow = sniff(conn, http);
            // TLS read the first bytes into the buffer (a plain socket only
            // peeks): the HELLO may be there already, and the socket may
            // have nothing more to say until it is answered.
            let read_ahead = conn.start < conn.input.len();
            if read_ahead && matches!((&flow, &conn.phase), (Flow::Continue, Phase::Hello { .. })) {
                return hello(conn, false, index, notice, service);
            }
            flow
        }
        Phase::Hello { shm } => {
            let shm = *shm;
            hello(conn, shm, index, notice, service)
        }
        Phase::Stream(_) => forward(conn),
        Phase::Shm(_) => {
            if conn.start < conn.input.len() {
                warn!("a shared-memory client wrote to its session socket, which carries nothing after WELCOME");
                return Flow::Close("the client broke the session protocol (bytes on the session socket)".into());
            }
            Flow::Continue
        }
        Phase::Closing => {
            // Nothing read is acted on any more.
            conn.input.clear();
            conn.start = 0;
            Flow::Continue
        }
    }
}

/// TCP: decide between the protocol and HTTP by the first four bytes,
/// without taking them from the socket.
fn sniff(conn: &mut Conn, http: bool) -> Flow {
    let stream = match &mut conn.socket {
        Socket::Tcp(stream) => stream,
        Socket::Tls(_) => return sniff_tls(conn, http),
        Socket::Unix(_) => {
            conn.phase = Phase::Hello { shm: false };
            return Flow::Continue;
        }
    };
    let mut first = [0u8; 4];
    match stream.peek(&mut first) {
        Ok(0) => return Flow::Close(String::new()),
        Ok(n) if n < first.len() => {
            conn.unread = false;
            return Flow::Paused;
        }
        Ok(_) => {}
        Err(e) if e.kind() == ErrorKind::WouldBlock => {
            conn.unread = false;
            return Flow::Paused;
        }
        Err(_) => return Flow::Close(String::new()),
    }
    if http && looks_like_http(&first) {
        return Flow::HandOver;
    }
    conn.phase = Phase::Hello { shm: false };
    Flow::Continue
}

/// TLS: check that the peer speaks TLS at all, then decide between the
/// protocol and HTTP by the first four decrypted bytes (read into the
/// buffer: rustls cannot peek).
fn sniff_tls(conn: &mut Conn, http: bool) -> Flow {
    let Socket::Tls(tls) = &mut conn.socket else { return Flow::Close(String::new()) };
    if !tls.opened() {
        match tls.opening() {
            Opening::Tls => {}
            Opening::Wait => {
                conn.unread = false;
                return Flow::Paused;
            }
            Opening::Closed => return Flow::Close(String::new()),
            Opening::Plain(first) => return refuse_plaintext(conn, &first, http),
        }
    }
    let Some(first) = conn.input.get(conn.start..conn.start + 4) else {
        // Handshake under way, or the first bytes not all here: read on.
        return Flow::Continue;
    };
    if tls.certified() {
        conn.slot.certified();
    }
    if http && looks_like_http(first) {
        return Flow::HandOver;
    }
    conn.phase = Phase::Hello { shm: false };
    Flow::Continue
}

/// A plaintext peer on a TLS port: answered in plaintext, in its own
/// protocol (a `REFUSE`, or an HTTP `400`), so it learns what to do.
fn refuse_plaintext(conn: &mut Conn, first: &[u8], http: bool) -> Flow {
    // The TLS state goes; the answer is written on the plain socket.
    if !matches!(conn.socket.take_tls(), Ok(Some(_))) {
        return Flow::Close(String::new());
    }
    let text = "this port speaks TLS: connect with tls://HOST:PORT (and FIELDHUB_TLS_CA set to the CA of the hub's \
                certificate); plaintext tcp:// is refused";
    if http && looks_like_http(first) {
        conn.slot.log_refusal(&Violation::new(ErrorCode::Unauthorized, "plaintext HTTP on a TLS port"));
        let body = "{\"error\":\"this port speaks TLS: use https://\"}\n";
        let head = "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close";
        conn.output.push_encoded(format!("{head}\r\ncontent-length: {}\r\n\r\n{body}", body.len()).as_bytes());
        conn.phase = Phase::Closing;
    } else {
        refuse(conn, &Violation::new(ErrorCode::Unauthorized, text));
    }
    Flow::Continue
}

/// Queue a refusal and switch the connection to closing.
fn refuse(conn: &mut Conn, violation: &Violation) {
    conn.slot.log_refusal(violation);
    conn.output.push_encoded(&violation.refusal());
    conn.phase = Phase::Closing;
}

/// Queue a fatal error for a client that broke the protocol, detach it and
/// switch the connection to closing.
fn reject(conn: &mut Conn, violation: &Violation) {
    // The bus hears of the detach before the client hears of its rejection:
    // whatever the client does next reaches the bus after its ports closed.
    conn.slot.reject(violation);
    conn.output.push_encoded(&violation.fatal_error());
    conn.phase = Phase::Closing;
}

/// Why a connection's input ended, for the log (or a violation).
fn end_of_input(conn: &mut Conn) -> String {
    let buffered = conn.input.len() - conn.start;
    match &conn.phase {
        Phase::Sniff | Phase::Closing => String::new(),
        Phase::Hello { .. } => {
            conn.slot.log_refusal(&Violation::new(ErrorCode::Malformed, "during handshake: connection closed"));
            String::new()
        }
        Phase::Stream(_) if buffered > 0 => {
            let need = LENGTH_PREFIX + body_len(conn).map_or(0, |len| len as usize);
            let violation = Violation::new(
                ErrorCode::Malformed,
                format!("disconnected mid-message: got {buffered} of {need} bytes"),
            );
            conn.slot.reject(&violation);
            violation.text
        }
        Phase::Stream(_) | Phase::Shm(_) => "connection closed".into(),
    }
}

/// Read once into the connection's buffer.
fn read_some(conn: &mut Conn) -> std::io::Result<usize> {
    if conn.start > 0 && conn.start == conn.input.len() {
        conn.input.clear();
        conn.start = 0;
    } else if conn.start > READ_CHUNK {
        conn.input.drain(..conn.start);
        conn.start = 0;
    }
    let filled = conn.input.len();
    conn.input.resize(filled + READ_CHUNK, 0);
    let result = conn.socket.read(&mut conn.input[filled..]);
    conn.input.truncate(filled + *result.as_ref().unwrap_or(&0));
    result
}

/// The length prefix of the next message in the buffer, once it is there.
fn body_len(conn: &Conn) -> Option<u32> {
    let prefix = conn.input.get(conn.start..conn.start + LENGTH_PREFIX)?;
    Some(u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]))
}

/// The next complete message's body range in the buffer, if one is there.
fn next_message(conn: &Conn, max: u32) -> Result<Option<(usize, usize)>, DecodeError> {
    let Some(len) = body_len(conn) else { return Ok(None) };
    let len = check_length(len, max)?;
    let body = conn.start + LENGTH_PREFIX;
    Ok((conn.input.len() >= body + len).then_some((body, body + len)))
}

/// Handle the client's `HELLO` once it is in the buffer.
fn hello(conn: &mut Conn, shm: bool, index: usize, notice: &Arc<Notice>, service: Option<&ShmService>) -> Flow {
    let (body, end) = match next_message(conn, MAX_HELLO_LEN) {
        Ok(Some(range)) => range,
        Ok(None) => return Flow::Continue,
        Err(DecodeError::Oversize { len, .. }) => {
            let text = format!(
                "first message claims {len} bytes; a HELLO is at most {MAX_HELLO_LEN} (is this a fieldhub client?)"
            );
            refuse(conn, &Violation::new(ErrorCode::Oversize, text));
            return Flow::Continue;
        }
        Err(e) => {
            refuse(conn, &Violation::new(ErrorCode::Malformed, format!("during handshake: {e}")));
            return Flow::Continue;
        }
    };
    let checked = conn.slot.check_hello(&conn.input[body..end]);
    conn.start = end;
    if let Err(violation) = checked {
        refuse(conn, &violation);
        return Flow::Continue;
    }
    if shm {
        let (Socket::Unix(socket), Some(service)) = (&conn.socket, service) else {
            return Flow::Close("no shared memory served".into());
        };
        return match open_session(&mut conn.slot, socket, service) {
            Ok(link) => {
                conn.phase = Phase::Shm(Arc::downgrade(&link));
                Flow::Continue
            }
            Err(violation) => {
                refuse(conn, &violation);
                Flow::Continue
            }
        };
    }
    let session = match attach_stream(conn, index, notice) {
        Ok(session) => session,
        Err(violation) => {
            refuse(conn, &violation);
            return Flow::Continue;
        }
    };
    conn.phase = Phase::Stream(session);
    Flow::Continue
}

/// Attach a stream client to the bus and queue its `WELCOME`.
fn attach_stream(conn: &mut Conn, index: usize, notice: &Arc<Notice>) -> Result<StreamSession, Violation> {
    let bus = Arc::clone(conn.slot.sessions().inbox.bus_wake());
    let for_outbox = Arc::clone(notice);
    let outbox = QueueOutbox::new(Some(Box::new(move || for_outbox.post(index))), bus);
    let for_credit = Arc::clone(notice);
    let credit = Arc::new(TxCredit::new(Waiter::Notify(Box::new(move || for_credit.post(index)))));
    let hung_up = Arc::new(AtomicBool::new(false));
    let hang_up = {
        let (hung_up, notice) = (Arc::clone(&hung_up), Arc::clone(notice));
        Box::new(move || {
            // SYNC POINT with serve_notice's Acquire load.
            hung_up.store(true, Ordering::Release);
            notice.post(index);
        })
    };
    conn.slot
        .attach(Outbox::new(outbox.clone()), hang_up, Arc::clone(&credit), None)
        .map_err(|_| Violation::new(ErrorCode::ShuttingDown, "the hub is shutting down"))?;
    conn.output.push_encoded(&conn.slot.welcome());
    let taken = Vec::with_capacity(TAKE_BATCH);
    Ok(StreamSession { outbox, taken, credit, cursor: FrameCursor::default(), hung_up })
}

/// Forward a stream client's complete messages to the bus.
fn forward(conn: &mut Conn) -> Flow {
    loop {
        let (body, end) = match next_message(conn, MAX_MESSAGE_LEN) {
            Ok(Some(range)) => range,
            Ok(None) => return Flow::Continue,
            Err(e) => {
                reject(conn, &Violation::from(e));
                return Flow::Continue;
            }
        };
        let Phase::Stream(session) = &mut conn.phase else { return Flow::Continue };
        let client = conn.slot.id();
        let message = match wire::decode(&conn.input[body..end]) {
            Ok(message) => message,
            Err(e) => {
                reject(conn, &Violation::from(e));
                return Flow::Continue;
            }
        };
        let outcome = match request_of(client, message) {
            Err(violation) => Err(violation),
            Ok(Request::Frames(batch)) => {
                // The batch goes to the bus as one item, as far as credit goes.
                let inbox = &conn.slot.sessions().inbox;
                let credit = &session.credit;
                let mut frames = inbox.frame_run();
                let done = session.cursor.forward(
                    &batch,
                    || credit.acquire_or_wait(),
                    |port, frame| {
                        frames.push((port, frame));
                        true
                    },
                );
                let queued =
                    if frames.is_empty() { Ok(()) } else { conn.slot.forward(Inbound::Frames { client, frames }) };
                match queued {
                    Err(violation) => Err(violation),
                    // No credit: the rest of the batch waits in the buffer.
                    Ok(()) if !done => return Flow::Paused,
                    Ok(()) => Ok(None),
                }
            }
            Ok(Request::Bus(request)) => conn.slot.forward(request).map(|()| None),
            Ok(Request::Nothing) => Ok(None),
            Ok(Request::Goodbye(reason)) => Ok(Some(reason)),
        };
        conn.start = end;
        match outcome {
            Ok(None) => {}
            Ok(Some(goodbye)) => return Flow::Close(goodbye),
            Err(violation) => {
                reject(conn, &violation);
                return Flow::Continue;
            }
        }
    }
}

/// Pack what waits in a stream client's outbox into its output. Returns
/// whether there is anything to write.
fn refill(conn: &mut Conn) -> bool {
    let Phase::Stream(session) = &mut conn.phase else { return false };
    let outbox = &session.outbox;
    outbox.rearm();
    let mut ends = false;
    // A few dozen items per look at the queue: the bus, queueing, meets
    // the lock once per batch instead of once per frame.
    while !ends && conn.output.len() < WRITE_CHUNK {
        outbox.take_into(&mut session.taken, TAKE_BATCH);
        if session.taken.is_empty() {
            break;
        }
        for item in session.taken.drain(..) {
            if ends {
                // Nothing goes after a connection's last message.
                continue;
            }
            ends = item.ends_connection();
            item.pack(&mut conn.output);
        }
    }
    outbox.took();
    if ends {
        conn.phase = Phase::Closing;
    }
    !conn.output.is_empty()
}
