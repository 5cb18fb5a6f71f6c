//! A cannelloni TCP endpoint (cannelloni's stream mode, what the
//! `can-cannelloni` python-can backend speaks): an accept thread, and per
//! connection a reader thread (banner, then records to the bus) and a
//! writer thread (the bus's frames as records).
//!
//! Invariants:
//! - A connection becomes a client only after it sent the banner within
//!   [`BANNER_WAIT`]: a half-open or silent connection is closed then,
//!   having cost no client slot; at most [`MAX_CONNECTIONS`] connections
//!   per endpoint are served at once, more are closed at once.
//! - A stream that stops being cannelloni (a record the frame model
//!   refuses) has lost its framing: it is counted, logged and closed; the
//!   frames before it are on the bus.
//! - A peer that never reads holds only itself: its writer waits on its
//!   socket, its outbox fills and the bus drops frames for it (counted as
//!   `rx_dropped`), as for any slow client.
//! - Idle, nothing runs: the accept thread sleeps in a poll on the listener
//!   and its stop bell, a reader in `read`, a writer on its outbox. What
//!   ends a connection shuts its socket down, which wakes both of its
//!   threads: the peer, the bus's hang-up, the writer's end, the stopping
//!   hub (the accept thread shuts every connection down).

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fieldhub_bus::outbox::QueueOutbox;
use tracing::{info, warn};

use super::codec::{encode_record, StreamDecoder, BANNER};
use super::peer::{item_of, Item, LogLimit, OnHangUp, Peer, PeerCounters};
use super::stats::EndpointStats;
use crate::session::peer_user::PeerOrigin;
use crate::session::Sessions;
use crate::transport::stop_bell::SocketPoll;

/// How long a new connection has to send the banner.
pub const BANNER_WAIT: Duration = Duration::from_secs(5);
/// Connections one endpoint serves at once.
pub const MAX_CONNECTIONS: usize = 64;
/// How soon the accept thread tries again after `accept` failed (out of
/// descriptors): the waiting connection may bring no new readiness.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// A bound TCP endpoint, not started yet.
pub struct TcpEndpoint {
    pub listener: TcpListener,
    pub channel: String,
    pub stats: Arc<EndpointStats>,
}

impl TcpEndpoint {
    /// Accept connections until the hub stops; then shut every connection
    /// down (which wakes its threads) and wait for them.
    pub fn run(self, mut poll: SocketPoll, sessions: &Arc<Sessions>) {
        if let Err(e) = self.listener.set_nonblocking(true) {
            return warn!(error = %e, "cannot make the cannelloni TCP listener non-blocking");
        }
        let open = Arc::new(AtomicUsize::new(0));
        let refusals = Arc::new(Refusals::default());
        let mut connections: Vec<(JoinHandle<()>, TcpStream)> = Vec::new();
        let mut log = LogLimit::default();
        let mut wait = None;
        while !sessions.stopping() {
            let (stream, from) = match self.listener.accept() {
                Ok(got) => got,
                Err(e) => {
                    if e.kind() != ErrorKind::WouldBlock {
                        // Out of descriptors and the like: the connection
                        // waits in the backlog, and no new readiness may
                        // come for it; try again shortly.
                        if let Some(held) = log.allow() {
                            warn!(error = %e, held, "cannelloni TCP accept failed");
                        }
                        wait = Some(ACCEPT_RETRY);
                    }
                    if let Err(e) = poll.wait(wait.take()) {
                        warn!(error = %e, "the cannelloni TCP endpoint cannot wait for connections; it stops");
                        break;
                    }
                    continue;
                }
            };
            connections.retain(|(thread, _)| !thread.is_finished());
            if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                open.fetch_sub(1, Ordering::AcqRel);
                if let Some(held) = log.allow() {
                    warn!(%from, held, "closing a cannelloni connection: the endpoint serves {MAX_CONNECTIONS} already");
                }
                continue;
            }
            // Accepted sockets do not inherit the listener's O_NONBLOCK on
            // Linux; make sure, as the threads block on them.
            let prepared = stream.set_nonblocking(false).and_then(|()| stream.try_clone());
            let to_shut = match prepared {
                Ok(clone) => clone,
                Err(e) => {
                    open.fetch_sub(1, Ordering::AcqRel);
                    warn!(%from, error = %e, "cannot serve the cannelloni connection");
                    continue;
                }
            };
            let (sessions, stats, channel, open) =
                (Arc::clone(sessions), Arc::clone(&self.stats), self.channel.clone(), Arc::clone(&open));
            let refusals = Arc::clone(&refusals);
            let spawned = std::thread::Builder::new().name("fh-cnl-tcp".into()).spawn(move || {
                serve(stream, from, &channel, &stats, &refusals, &sessions);
                open.fetch_sub(1, Ordering::AcqRel);
            });
            match spawned {
                Ok(handle) => connections.push((handle, to_shut)),
                Err(e) => warn!(%from, error = %e, "cannot start a thread for the cannelloni connection"),
            }
        }
        for (_, stream) in &connections {
            let _ = stream.shutdown(Shutdown::Both);
        }
        for (thread, _) in connections {
            let _ = thread.join();
        }
    }
}

/// Serve one connection to its end, then close it. Every way out shuts the
/// socket down: the accept thread holds a clone of it (to shut it down when
/// the hub stops), so dropping this one would leave a refused peer waiting
/// on an open connection.
fn serve(
    stream: TcpStream,
    from: SocketAddr,
    channel: &str,
    stats: &EndpointStats,
    refusals: &Refusals,
    sessions: &Arc<Sessions>,
) {
    serve_peer(&stream, from, channel, stats, refusals, sessions);
    let _ = stream.shutdown(Shutdown::Both);
}

fn serve_peer(
    stream: &TcpStream,
    from: SocketAddr,
    channel: &str,
    stats: &EndpointStats,
    refusals: &Refusals,
    sessions: &Arc<Sessions>,
) {
    let label = format!("tcp/{from}");
    if let Err(e) = banner(stream) {
        if !sessions.stopping() {
            refusals.log(&label, &format!("closing the cannelloni connection: {e}"));
        }
        return;
    }
    let local = stream.local_addr().unwrap_or(from);
    let origin = PeerOrigin::Tcp { local, peer: from };
    // The bus letting go of the peer wakes its reader.
    let on_hang_up: Option<OnHangUp> = stream.try_clone().ok().map(|s| {
        Box::new(move || {
            let _ = s.shutdown(Shutdown::Both);
        }) as OnHangUp
    });
    let mut peer = match Peer::attach(sessions, channel, label.clone(), origin, on_hang_up) {
        Ok(peer) => peer,
        Err(why) => return refusals.log(&label, &format!("refusing the cannelloni peer: {why}")),
    };
    stats.add_peer(&label, Arc::clone(&peer.counters));
    info!(peer = %label, channel, "cannelloni peer connected");
    let writer = stream.try_clone().map(|out| {
        let (outbox, counters, closed) =
            (Arc::clone(&peer.outbox), Arc::clone(&peer.counters), Arc::clone(&peer.closed));
        let label = label.clone();
        std::thread::Builder::new().name("fh-cnl-tcp-w".into()).spawn(move || {
            write_loop(&out, &outbox, &counters, &label);
            closed.store(true, Ordering::Release);
            // Wakes the reader: the session is over.
            let _ = out.shutdown(Shutdown::Both);
        })
    });
    let reason = read_loop(stream, &peer, &label);
    peer.close(reason);
    let _ = stream.shutdown(Shutdown::Both);
    match writer {
        Ok(Ok(handle)) => {
            let _ = handle.join();
        }
        Ok(Err(e)) | Err(e) => warn!(peer = %label, error = %e, "cannot start the cannelloni peer's writer"),
    }
}

/// Connections the endpoint closed or refused, logged at most once a second
/// for all of its connections together (a flood of them is one line a second).
#[derive(Default)]
struct Refusals(Mutex<LogLimit>);

impl Refusals {
    fn log(&self, peer: &str, text: &str) {
        let held = self.0.lock().unwrap_or_else(|e| e.into_inner()).allow();
        if let Some(held) = held {
            warn!(peer, held, "{text}");
        }
    }
}

/// Send the banner and read the peer's within [`BANNER_WAIT`] (the
/// socket's read timeout: one wake at the end, no polling).
fn banner(mut stream: &TcpStream) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("the banner exchange failed: {e}");
    stream.set_nodelay(true).map_err(fail)?;
    stream.set_write_timeout(Some(BANNER_WAIT)).map_err(fail)?;
    stream.write_all(BANNER).map_err(fail)?;
    let mut got = [0u8; BANNER.len()];
    let mut have = 0;
    let deadline = Instant::now() + BANNER_WAIT;
    let late = || format!("no {} banner within {BANNER_WAIT:?}", String::from_utf8_lossy(BANNER));
    while have < got.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        stream.set_read_timeout(Some(left)).map_err(fail)?;
        match stream.read(&mut got[have..]) {
            Ok(0) => return Err("the peer closed before its banner".into()),
            Ok(n) => have += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return Err(late()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(fail(e)),
        }
    }
    if &got != BANNER {
        return Err(format!("it sent {:?} instead of the banner CANNELLONIv1", String::from_utf8_lossy(&got)));
    }
    // From here on the threads block until something comes: the bus's
    // hang-up, the writer's end or the hub's stop shut the socket down.
    stream.set_read_timeout(None).map_err(fail)?;
    stream.set_write_timeout(None).map_err(fail)?;
    Ok(())
}

/// Forward the peer's records until it ends; the reason it ended.
fn read_loop(mut stream: &TcpStream, peer: &Peer, label: &str) -> &'static str {
    let mut decoder = StreamDecoder::default();
    let mut buf = [0u8; 4096];
    loop {
        let n = match stream.read(&mut buf) {
            _ if peer.is_closed() || peer.slot.sessions().stopping() => return "the session ended",
            Ok(0) => return "the peer closed the connection",
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return "the connection failed",
        };
        PeerCounters::add(&peer.counters.packets_in, 1);
        decoder.feed(&buf[..n]);
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => {
                    if !peer.forward(frame) {
                        return "the session ended";
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    PeerCounters::add(&peer.counters.malformed, 1);
                    warn!(peer = label, "closing the cannelloni connection: it sent what is not cannelloni: {e}");
                    return "it sent what is not cannelloni";
                }
            }
        }
    }
}

/// Write the bus's frames to the peer until the session ends: the outbox
/// closes or the bus says goodbye (its items wake the writer, nothing else
/// does), or the connection fails (shut down by the reader, the hang-up or
/// the stopping hub).
fn write_loop(mut out: &TcpStream, outbox: &QueueOutbox, counters: &PeerCounters, label: &str) {
    let mut bytes = Vec::with_capacity(4096);
    let mut reports = LogLimit::default();
    while let Some(first) = outbox.take_blocking(None) {
        bytes.clear();
        let mut frames = 0u64;
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item_of(item, counters, label, &mut reports) {
                Item::Frame(frame) => {
                    encode_record(&frame, &mut bytes);
                    frames += 1;
                }
                Item::Nothing => {}
                Item::End => return,
            }
            if bytes.len() < 64 * 1024 {
                next = outbox.take();
            }
        }
        outbox.took();
        if out.write_all(&bytes).is_err() {
            return;
        }
        PeerCounters::add(&counters.frames_out, frames);
    }
}
