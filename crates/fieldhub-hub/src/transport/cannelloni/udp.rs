//! A cannelloni UDP endpoint: one socket on one channel, every peer its own
//! client and port. One reader thread takes every packet, finds its peer by
//! source address, checks the sequence number and forwards the frames; one
//! writer thread per peer packs the bus's frames into packets to it.
//!
//! Invariants:
//! - Only listed peers (`peers`) and, with `learn_peers`, up to
//!   [`MAX_LEARNED_PEERS`] other senders are peers; a packet from anyone
//!   else is counted and dropped, never put on the bus.
//! - A packet is all or nothing: a malformed one is counted, logged (once a
//!   second at most) and dropped whole; the endpoint serves on.
//! - Sequence gaps are counted per peer, never hidden: a packet whose number
//!   is ahead of the next expected one counts the packets between as lost;
//!   one behind it (reordered, duplicated) is counted late and still
//!   delivered, as cannelloni delivers it.
//! - Each peer's frames reach the bus in the order its packets arrived;
//!   each peer's packets leave in the bus's order, numbered 0, 1, 2… (mod 256).
//! - Idle, nothing runs: the reader sleeps in a poll on the socket and its
//!   [`StopBell`](crate::transport::stop_bell::StopBell), each writer on its peer's outbox. The socket itself stays
//!   blocking (the writers share it); the reader takes what the poll
//!   announced without waiting (`MSG_DONTWAIT`). Windows has no such flag:
//!   there the socket is non-blocking for all, and a packet a writer cannot
//!   hand over at once is counted in its peer's `send_errors`.

use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use fieldhub_bus::outbox::QueueOutbox;
use fieldhub_proto::Frame;
use tracing::{info, warn};

use super::codec::{decode_packet, PacketWriter};
use super::peer::{item_of, Item, LogLimit, Peer, PeerCounters};
use super::stats::EndpointStats;
use crate::config::MAX_LEARNED_PEERS;
use crate::session::peer_user::PeerOrigin;
use crate::session::Sessions;
use crate::transport::stop_bell::SocketPoll;

/// The largest packet the endpoint sends: fits an Ethernet frame's 1500
/// bytes with IPv6 and UDP headers, as cannelloni's own default does.
pub const MAX_PACKET_OUT: usize = 1432;
/// The largest datagram UDP carries: any packet a peer sends fits.
const MAX_PACKET_IN: usize = 65_536;

/// Where a peer's sequence numbers stand.
#[derive(Default)]
pub struct SeqTracker {
    next: Option<u8>,
}

/// What one sequence number says.
#[derive(Debug, PartialEq, Eq)]
pub enum SeqCheck {
    /// The one expected (or the peer's first).
    InOrder,
    /// This many packets before it are missing.
    Gap(u8),
    /// Older than the last one (reordered or repeated).
    Late,
}

impl SeqTracker {
    /// Check `seq` and expect its successor next. A number up to 127 ahead
    /// is a gap; one up to 128 behind is late (a window of half the space,
    /// as any wrapping sequence number must be read).
    pub fn check(&mut self, seq: u8) -> SeqCheck {
        let Some(next) = self.next else {
            self.next = Some(seq.wrapping_add(1));
            return SeqCheck::InOrder;
        };
        let ahead = seq.wrapping_sub(next);
        match ahead {
            0 => {
                self.next = Some(seq.wrapping_add(1));
                SeqCheck::InOrder
            }
            1..=127 => {
                self.next = Some(seq.wrapping_add(1));
                SeqCheck::Gap(ahead)
            }
            _ => SeqCheck::Late,
        }
    }
}

/// A peer of the endpoint and its writer thread.
struct UdpPeer {
    peer: Peer,
    seq: SeqTracker,
    writer: Option<JoinHandle<()>>,
    log: LogLimit,
    learned: bool,
}

/// A bound UDP endpoint, not started yet.
pub struct UdpEndpoint {
    pub socket: UdpSocket,
    pub channel: String,
    pub listed: Vec<SocketAddr>,
    pub learn: bool,
    pub stats: Arc<EndpointStats>,
}

/// The next datagram waiting on `socket`, without waiting; `None` when none
/// is left (the poll is edge-triggered: take all before waiting again).
#[cfg(target_os = "linux")]
fn recv_waiting(socket: &UdpSocket, buf: &mut [u8]) -> Option<std::io::Result<(usize, SocketAddr)>> {
    match rustix::net::recvfrom(socket, &mut *buf, rustix::net::RecvFlags::DONTWAIT) {
        Ok((len, _, Some(from))) => match SocketAddr::try_from(from) {
            Ok(from) => Some(Ok((len, from))),
            Err(_) => Some(Err(std::io::Error::other("a datagram from an address that is not IP"))),
        },
        Ok((_, _, None)) => Some(Err(std::io::Error::other("a datagram without a sender address"))),
        Err(rustix::io::Errno::AGAIN) => None,
        Err(rustix::io::Errno::INTR) => recv_waiting(socket, buf),
        Err(e) => Some(Err(e.into())),
    }
}

/// The next datagram waiting on `socket`, non-blocking elsewhere (see the
/// module's invariants); `None` when none is left.
#[cfg(not(target_os = "linux"))]
fn recv_waiting(socket: &UdpSocket, buf: &mut [u8]) -> Option<std::io::Result<(usize, SocketAddr)>> {
    match socket.recv_from(buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => recv_waiting(socket, buf),
        got => Some(got),
    }
}

impl UdpEndpoint {
    /// Serve until the hub stops: attach the listed peers, then read.
    pub fn run(self, mut poll: SocketPoll, sessions: &Arc<Sessions>) {
        #[cfg(not(target_os = "linux"))]
        if let Err(e) = self.socket.set_nonblocking(true) {
            return warn!(error = %e, "cannot make the cannelloni UDP socket non-blocking");
        }
        let socket = match self.socket.try_clone() {
            Ok(s) => Arc::new(s),
            Err(e) => return warn!(error = %e, "cannot share the cannelloni UDP socket with its writers"),
        };
        let mut peers: HashMap<SocketAddr, UdpPeer> = HashMap::new();
        for &addr in &self.listed {
            match self.attach(sessions, &socket, addr, false) {
                Ok(p) => drop(peers.insert(addr, p)),
                Err(why) => warn!(peer = %addr, channel = %self.channel, "cannot attach the cannelloni peer: {why}"),
            }
        }
        let mut buf = vec![0u8; MAX_PACKET_IN];
        let mut frames: Vec<Frame> = Vec::with_capacity(256);
        let mut refused_log = LogLimit::default();
        while !sessions.stopping() {
            let (len, from) = match recv_waiting(&self.socket, &mut buf) {
                Some(Ok(got)) => got,
                None => {
                    if let Err(e) = poll.wait(None) {
                        warn!(error = %e, "the cannelloni UDP endpoint cannot wait for packets; it stops");
                        break;
                    }
                    continue;
                }
                Some(Err(e)) => {
                    if let Some(held) = refused_log.allow() {
                        warn!(error = %e, held, "cannelloni UDP receive failed");
                    }
                    continue;
                }
            };
            if peers.get(&from).is_some_and(|p| p.peer.is_closed()) {
                // The bus dropped it: it starts over as a new peer.
                if let Some(old) = peers.remove(&from) {
                    finish(old, "the bus ended its session");
                }
            }
            if !peers.contains_key(&from) {
                let listed = self.listed.contains(&from);
                let may_learn = self.learn && peers.values().filter(|p| p.learned).count() < MAX_LEARNED_PEERS;
                if !listed && !may_learn {
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    if let Some(held) = refused_log.allow() {
                        warn!(%from, held, channel = %self.channel, "dropping a cannelloni packet from a sender that is no peer (peers, learn_peers)");
                    }
                    continue;
                }
                match self.attach(sessions, &socket, from, !listed) {
                    Ok(p) => peers.insert(from, p),
                    Err(why) => {
                        self.stats.refused.fetch_add(1, Ordering::Relaxed);
                        if let Some(held) = refused_log.allow() {
                            warn!(%from, held, channel = %self.channel, "refusing the cannelloni peer: {why}");
                        }
                        continue;
                    }
                };
            }
            let Some(p) = peers.get_mut(&from) else { continue };
            let counters = &p.peer.counters;
            PeerCounters::add(&counters.packets_in, 1);
            let seq = match decode_packet(&buf[..len], &mut frames) {
                Ok(seq) => seq,
                Err(e) => {
                    PeerCounters::add(&counters.malformed, 1);
                    if let Some(held) = p.log.allow() {
                        warn!(peer = %p.peer.label, held, "dropping a malformed cannelloni packet: {e}");
                    }
                    continue;
                }
            };
            match p.seq.check(seq) {
                SeqCheck::InOrder => {}
                SeqCheck::Gap(missing) => {
                    PeerCounters::add(&counters.seq_gaps, u64::from(missing));
                    if let Some(held) = p.log.allow() {
                        warn!(peer = %p.peer.label, missing, held, "cannelloni packets lost on the way (sequence gap)");
                    }
                }
                SeqCheck::Late => PeerCounters::add(&counters.seq_late, 1),
            }
            for frame in frames.drain(..) {
                if !p.peer.forward(frame) {
                    break;
                }
            }
        }
        for (_, p) in peers.drain() {
            finish(p, "the hub is stopping");
        }
    }

    fn attach(
        &self,
        sessions: &Arc<Sessions>,
        socket: &Arc<UdpSocket>,
        addr: SocketAddr,
        learned: bool,
    ) -> Result<UdpPeer, String> {
        let label = format!("udp/{addr}");
        let peer = Peer::attach(sessions, &self.channel, label.clone(), PeerOrigin::Operator, None)?;
        self.stats.add_peer(&label, Arc::clone(&peer.counters));
        let writer = {
            let (socket, outbox, counters) = (Arc::clone(socket), Arc::clone(&peer.outbox), Arc::clone(&peer.counters));
            let (closed, label) = (Arc::clone(&peer.closed), label.clone());
            let sessions = Arc::clone(sessions);
            std::thread::Builder::new().name("fh-cnl-udp-w".into()).spawn(move || {
                let stop = || sessions.stopping() || closed.load(Ordering::Acquire);
                write_loop(&socket, addr, &outbox, &counters, &label, &stop);
                closed.store(true, Ordering::Release);
            })
        };
        let writer = match writer {
            Ok(handle) => Some(handle),
            Err(e) => {
                warn!(peer = %label, error = %e, "cannot start the cannelloni peer's writer thread");
                None
            }
        };
        info!(peer = %label, channel = %self.channel, learned, "cannelloni peer attached");
        Ok(UdpPeer { peer, seq: SeqTracker::default(), writer, log: LogLimit::default(), learned })
    }
}

fn finish(mut p: UdpPeer, reason: &str) {
    p.peer.close(reason);
    if let Some(writer) = p.writer.take() {
        let _ = writer.join();
    }
}

/// Send the bus's frames to `to` in packets until the session ends.
fn write_loop(
    socket: &UdpSocket,
    to: SocketAddr,
    outbox: &QueueOutbox,
    counters: &PeerCounters,
    label: &str,
    stop: &dyn Fn() -> bool,
) {
    let mut packet = PacketWriter::new(MAX_PACKET_OUT);
    let mut seq: u8 = 0;
    let mut log = LogLimit::default();
    let mut send = |packet: &mut PacketWriter, seq: &mut u8| {
        let count = u64::from(packet.count());
        match socket.send_to(packet.bytes(), to) {
            Ok(_) => PeerCounters::add(&counters.frames_out, count),
            Err(e) => {
                PeerCounters::add(&counters.send_errors, 1);
                if let Some(held) = log.allow() {
                    warn!(peer = label, error = %e, held, "cannot send a cannelloni packet");
                }
            }
        }
        *seq = seq.wrapping_add(1);
        packet.start(*seq);
    };
    let mut reports = LogLimit::default();
    while !stop() {
        // Sleeps until the bus queues something or the outbox closes.
        let Some(first) = outbox.take_blocking(None) else { return };
        let mut next = Some(first);
        // Pack what waits now into packets; send when full or drained.
        while let Some(item) = next.take() {
            match item_of(item, counters, label, &mut reports) {
                Item::Frame(frame) => {
                    if !packet.push(&frame) {
                        send(&mut packet, &mut seq);
                        packet.push(&frame);
                    }
                }
                Item::Nothing => {}
                Item::End => return,
            }
            next = outbox.take();
        }
        outbox.took();
        if packet.count() > 0 {
            send(&mut packet, &mut seq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_count_gaps_and_late_packets_across_the_wrap() {
        let mut t = SeqTracker::default();
        assert_eq!(t.check(250), SeqCheck::InOrder, "the first sets the start");
        assert_eq!(t.check(251), SeqCheck::InOrder);
        assert_eq!(t.check(254), SeqCheck::Gap(2));
        assert_eq!(t.check(255), SeqCheck::InOrder);
        assert_eq!(t.check(0), SeqCheck::InOrder, "255 wraps to 0");
        assert_eq!(t.check(3), SeqCheck::Gap(2));
        assert_eq!(t.check(1), SeqCheck::Late);
        assert_eq!(t.check(4), SeqCheck::InOrder, "a late packet does not move the expectation");
        assert_eq!(t.check(4), SeqCheck::Late, "a repeated one is late");
    }
}
