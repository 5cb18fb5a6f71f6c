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

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fieldhub_bus::outbox::QueueOutbox;
use tracing::{info, warn};

use super::codec::{encode_record, StreamDecoder, BANNER};
use super::peer::{item_of, Item, LogLimit, Peer, PeerCounters, LOOK};
use super::stats::EndpointStats;
use crate::session::peer_user::PeerOrigin;
use crate::session::Sessions;

/// How long a new connection has to send the banner.
pub const BANNER_WAIT: Duration = Duration::from_secs(5);
/// Connections one endpoint serves at once.
pub const MAX_CONNECTIONS: usize = 64;

/// A bound TCP endpoint, not started yet.
pub struct TcpEndpoint {
    pub listener: TcpListener,
    pub channel: String,
    pub stats: Arc<EndpointStats>,
}

impl TcpEndpoint {
    /// Accept connections until the hub stops.
    pub fn run(self, sessions: &Arc<Sessions>) {
        if let Err(e) = self.listener.set_nonblocking(true) {
            return warn!(error = %e, "cannot make the cannelloni TCP listener non-blocking");
        }
        let open = Arc::new(AtomicUsize::new(0));
        let refusals = Arc::new(Refusals::default());
        let mut threads = Vec::new();
        let mut log = LogLimit::default();
        while !sessions.stopping() {
            let (stream, from) = match self.listener.accept() {
                Ok(got) => got,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    std::thread::sleep(LOOK);
                    continue;
                }
                Err(e) => {
                    if let Some(held) = log.allow() {
                        warn!(error = %e, held, "cannelloni TCP accept failed");
                    }
                    std::thread::sleep(LOOK);
                    continue;
                }
            };
            threads.retain(|t: &std::thread::JoinHandle<()>| !t.is_finished());
            if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                open.fetch_sub(1, Ordering::AcqRel);
                if let Some(held) = log.allow() {
                    warn!(%from, held, "closing a cannelloni connection: the endpoint serves {MAX_CONNECTIONS} already");
                }
                continue;
            }
            let (sessions, stats, channel, open) =
                (Arc::clone(sessions), Arc::clone(&self.stats), self.channel.clone(), Arc::clone(&open));
            let refusals = Arc::clone(&refusals);
            let spawned = std::thread::Builder::new().name("fh-cnl-tcp".into()).spawn(move || {
                serve(stream, from, &channel, &stats, &refusals, &sessions);
                open.fetch_sub(1, Ordering::AcqRel);
            });
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(e) => warn!(%from, error = %e, "cannot start a thread for the cannelloni connection"),
            }
        }
        for thread in threads {
            let _ = thread.join();
        }
    }
}

/// Serve one connection to its end.
fn serve(
    stream: TcpStream,
    from: SocketAddr,
    channel: &str,
    stats: &EndpointStats,
    refusals: &Refusals,
    sessions: &Arc<Sessions>,
) {
    let label = format!("tcp/{from}");
    if let Err(e) = banner(&stream, sessions) {
        return refusals.log(&label, &format!("closing the cannelloni connection: {e}"));
    }
    let local = stream.local_addr().unwrap_or(from);
    let mut peer = match Peer::attach(sessions, channel, label.clone(), PeerOrigin::Tcp { local, peer: from }) {
        Ok(peer) => peer,
        Err(why) => return refusals.log(&label, &format!("refusing the cannelloni peer: {why}")),
    };
    stats.add_peer(&label, Arc::clone(&peer.counters));
    info!(peer = %label, channel, "cannelloni peer connected");
    let writer = stream.try_clone().map(|out| {
        let (outbox, counters, closed) =
            (Arc::clone(&peer.outbox), Arc::clone(&peer.counters), Arc::clone(&peer.closed));
        let (label, sessions) = (label.clone(), Arc::clone(sessions));
        std::thread::Builder::new().name("fh-cnl-tcp-w".into()).spawn(move || {
            let stop = || sessions.stopping() || closed.load(Ordering::Acquire);
            write_loop(out, &outbox, &counters, &label, &stop);
            closed.store(true, Ordering::Release);
        })
    });
    let reason = read_loop(&stream, &peer, &label);
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

/// Send the banner and read the peer's within [`BANNER_WAIT`].
fn banner(mut stream: &TcpStream, sessions: &Sessions) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("the banner exchange failed: {e}");
    stream.set_nodelay(true).map_err(fail)?;
    stream.set_read_timeout(Some(LOOK)).map_err(fail)?;
    stream.set_write_timeout(Some(LOOK)).map_err(fail)?;
    stream.write_all(BANNER).map_err(fail)?;
    let mut got = [0u8; BANNER.len()];
    let mut have = 0;
    let deadline = Instant::now() + BANNER_WAIT;
    while have < got.len() {
        if sessions.stopping() || Instant::now() >= deadline {
            return Err(format!("no {} banner within {BANNER_WAIT:?}", String::from_utf8_lossy(BANNER)));
        }
        match stream.read(&mut got[have..]) {
            Ok(0) => return Err("the peer closed before its banner".into()),
            Ok(n) => have += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
            Err(e) => return Err(fail(e)),
        }
    }
    if &got != BANNER {
        return Err(format!("it sent {:?} instead of the banner CANNELLONIv1", String::from_utf8_lossy(&got)));
    }
    Ok(())
}

/// Forward the peer's records until it ends; the reason it ended.
fn read_loop(mut stream: &TcpStream, peer: &Peer, label: &str) -> &'static str {
    let mut decoder = StreamDecoder::default();
    let mut buf = [0u8; 4096];
    loop {
        if peer.is_closed() || peer.slot.sessions().stopping() {
            return "the session ended";
        }
        let n = match stream.read(&mut buf) {
            Ok(0) => return "the peer closed the connection",
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                continue
            }
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

/// Write the bus's frames to the peer until the session ends.
fn write_loop(mut out: TcpStream, outbox: &QueueOutbox, counters: &PeerCounters, label: &str, stop: &dyn Fn() -> bool) {
    let mut bytes = Vec::with_capacity(4096);
    let mut reports = LogLimit::default();
    while !stop() {
        let Some(first) = outbox.take_timeout(LOOK) else { continue };
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
        if !write_all(&mut out, &bytes, stop) {
            return;
        }
        PeerCounters::add(&counters.frames_out, frames);
    }
}

/// Write all of `bytes`, looking at `stop` while the peer does not read
/// (the socket's write timeout is [`LOOK`]); `false` when it ended first.
fn write_all(out: &mut TcpStream, mut bytes: &[u8], stop: &dyn Fn() -> bool) -> bool {
    while !bytes.is_empty() {
        match out.write(bytes) {
            Ok(0) => return false,
            Ok(n) => bytes = &bytes[n..],
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
                if stop() {
                    return false;
                }
            }
            Err(_) => return false,
        }
    }
    true
}
