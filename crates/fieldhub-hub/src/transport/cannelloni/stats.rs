//! What every cannelloni endpoint counts, per peer, for the control API
//! (`GET /api/v1/cannelloni`) and the log: the figures the bus cannot see
//! (UDP sequence gaps, malformed packets, senders that are no peers) beside
//! the frames the bus dropped for each peer.
//!
//! Invariants: counters only grow and are never reset while the hub runs; a
//! peer that is gone keeps its entry until [`MAX_PEER_ENTRIES`] are listed,
//! then the oldest gone ones are folded into the endpoint's `gone` sums, so
//! nothing counted disappears and the table stays bounded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde::Serialize;

use super::peer::PeerCounters;

/// Peer entries an endpoint lists before it folds gone ones into sums.
pub const MAX_PEER_ENTRIES: usize = 64;

/// One endpoint's counters.
#[derive(Debug)]
pub struct EndpointStats {
    pub listen: String,
    pub channel: String,
    /// UDP packets from senders that are no peer, dropped.
    pub refused: AtomicU64,
    peers: Mutex<Peers>,
}

#[derive(Debug, Default)]
struct Peers {
    live: Vec<(String, Arc<PeerCounters>)>,
    gone: PeerFigures,
    gone_peers: u64,
}

/// One peer's counters as numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PeerFigures {
    pub packets_in: u64,
    pub frames_in: u64,
    pub seq_gaps: u64,
    pub seq_late: u64,
    pub malformed: u64,
    pub frames_out: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub send_errors: u64,
}

impl PeerFigures {
    fn of(c: &PeerCounters) -> Self {
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Self {
            packets_in: n(&c.packets_in),
            frames_in: n(&c.frames_in),
            seq_gaps: n(&c.seq_gaps),
            seq_late: n(&c.seq_late),
            malformed: n(&c.malformed),
            frames_out: n(&c.frames_out),
            rx_dropped: n(&c.rx_dropped),
            tx_dropped: n(&c.tx_dropped),
            send_errors: n(&c.send_errors),
        }
    }

    fn add(&mut self, o: &Self) {
        self.packets_in += o.packets_in;
        self.frames_in += o.frames_in;
        self.seq_gaps += o.seq_gaps;
        self.seq_late += o.seq_late;
        self.malformed += o.malformed;
        self.frames_out += o.frames_out;
        self.rx_dropped += o.rx_dropped;
        self.tx_dropped += o.tx_dropped;
        self.send_errors += o.send_errors;
    }
}

/// One peer in the control API's answer.
#[derive(Clone, Debug, Serialize)]
pub struct PeerReport {
    /// `udp/ADDR` or `tcp/ADDR`; its port is `cannelloni-` and the same.
    pub peer: String,
    #[serde(flatten)]
    pub figures: PeerFigures,
}

/// One endpoint in the control API's answer.
#[derive(Clone, Debug, Serialize)]
pub struct EndpointReport {
    pub listen: String,
    pub channel: String,
    pub refused: u64,
    pub peers: Vec<PeerReport>,
    /// Peers folded out of `peers` (gone, the list full) and their sums.
    pub gone_peers: u64,
    pub gone: PeerFigures,
}

impl EndpointStats {
    pub fn new(listen: String, channel: String) -> Arc<Self> {
        Arc::new(Self { listen, channel, refused: AtomicU64::new(0), peers: Mutex::new(Peers::default()) })
    }

    fn peers(&self) -> MutexGuard<'_, Peers> {
        self.peers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// List a new peer's counters.
    pub fn add_peer(&self, peer: &str, counters: Arc<PeerCounters>) {
        let mut peers = self.peers();
        while peers.live.len() >= MAX_PEER_ENTRIES {
            // Only the endpoint's own entry holds a gone peer's counters.
            let Some(i) = peers.live.iter().position(|(_, c)| Arc::strong_count(c) == 1) else { break };
            let (_, old) = peers.live.remove(i);
            peers.gone.add(&PeerFigures::of(&old));
            peers.gone_peers += 1;
        }
        peers.live.push((peer.to_owned(), counters));
    }

    pub fn report(&self) -> EndpointReport {
        let peers = self.peers();
        EndpointReport {
            listen: self.listen.clone(),
            channel: self.channel.clone(),
            refused: self.refused.load(Ordering::Relaxed),
            peers: peers
                .live
                .iter()
                .map(|(peer, c)| PeerReport { peer: peer.clone(), figures: PeerFigures::of(c) })
                .collect(),
            gone_peers: peers.gone_peers,
            gone: peers.gone.clone(),
        }
    }
}

/// Every endpoint of the hub, for the control API.
#[derive(Debug, Default)]
pub struct CannelloniStats {
    pub endpoints: Vec<Arc<EndpointStats>>,
}

impl CannelloniStats {
    pub fn report(&self) -> Vec<EndpointReport> {
        self.endpoints.iter().map(|e| e.report()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gone_peers_fold_into_sums_and_nothing_counted_is_lost() {
        let stats = EndpointStats::new("tcp/127.0.0.1:1".into(), "can0".into());
        let kept = Arc::new(PeerCounters::default());
        stats.add_peer("tcp/kept", Arc::clone(&kept));
        for i in 0..MAX_PEER_ENTRIES + 3 {
            let c = Arc::new(PeerCounters::default());
            c.seq_gaps.store(2, Ordering::Relaxed);
            stats.add_peer(&format!("tcp/{i}"), c);
        }
        let report = stats.report();
        assert_eq!(report.peers.len(), MAX_PEER_ENTRIES);
        assert_eq!(report.peers[0].peer, "tcp/kept", "a live peer keeps its entry");
        assert_eq!(report.gone_peers, 4);
        let listed: u64 = report.peers.iter().map(|p| p.figures.seq_gaps).sum();
        assert_eq!(listed + report.gone.seq_gaps, 2 * (MAX_PEER_ENTRIES as u64 + 3));
    }
}
