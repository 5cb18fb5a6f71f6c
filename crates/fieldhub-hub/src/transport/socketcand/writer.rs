//! A socketcand session's writer: what the connection's thread and the
//! writer thread share ([`Shared`]: the socket's write half, the mode, the
//! BCM subscriptions, the counters) and the writer thread, which turns the
//! session's outbox into `< frame … >` lines and `< error … >` reports.
//!
//! Invariants:
//! - Every write is one whole line or batch under the write lock, so lines
//!   of the two threads never interleave; `< hi >` and every `< ok >` are
//!   written alone (python-can and SavvyCAN compare whole reads with them).
//! - A write that waits [`WRITE_PATIENCE`] for a client that does not read
//!   closes the session; the bus never waits for it (a full outbox is
//!   counted as receive overflow).
//! - Idle, the writer sleeps on the outbox: items, the outbox's close and
//!   the bus's goodbye wake it.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use fieldhub_bus::outbox::{Outbound, QueueOutbox};
use tracing::{debug, warn};

use super::bcm::Subscriptions;
use super::protocol;
use super::statistics::{Counters, Statistics};

/// How long a write to a client that does not read may wait before the
/// session is closed.
pub const WRITE_PATIENCE: Duration = Duration::from_secs(10);
/// Outbox items written in one batch.
const BATCH: usize = 256;

/// The session's mode after `< open >` ([`Shared::mode`]).
pub const MODE_BCM: u8 = 0;
pub const MODE_RAW: u8 = 1;
pub const MODE_CONTROL: u8 = 2;

/// What the connection's thread and its writer share.
pub struct Shared {
    /// Writes of both threads, each one whole line or batch.
    pub out: Mutex<TcpStream>,
    pub mode: AtomicU8,
    pub subscriptions: Mutex<Subscriptions>,
    /// `< statistics MS >`'s ticker settings.
    pub statistics: Statistics,
    pub counters: Counters,
}

impl Shared {
    /// A session in NO_BUS mode writing to `out`.
    pub fn new(out: TcpStream) -> Self {
        Self {
            out: Mutex::new(out),
            mode: AtomicU8::new(MODE_BCM),
            subscriptions: Mutex::new(Subscriptions::default()),
            statistics: Statistics::default(),
            counters: Counters::default(),
        }
    }

    /// Write `line` alone; a client that does not take it within
    /// [`WRITE_PATIENCE`] loses its connection.
    pub fn write(&self, line: &str) -> bool {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        Self::write_to(out, line)
    }

    /// Switch to mode `to` and answer `< ok >`, under the write lock: a
    /// frame the client sends once it read the answer is formatted in the
    /// new mode (the writer reads the mode after taking it), and none of the
    /// new mode is written before the answer.
    pub fn switch_mode(&self, to: u8) -> bool {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        self.mode.store(to, Ordering::Release);
        Self::write_to(out, "< ok >")
    }

    fn write_to(mut out: std::sync::MutexGuard<'_, TcpStream>, line: &str) -> bool {
        match out.write_all(line.as_bytes()) {
            Ok(()) => true,
            Err(e) => {
                debug!(error = %e, "socketcand client write failed; closing");
                let _ = out.shutdown(Shutdown::Both);
                false
            }
        }
    }
}

/// The writer thread: the bus's frames and reports to the client, until
/// the bus lets go of the session or the client stops reading. It sleeps on
/// the outbox: items, the outbox's close and the bus's goodbye wake it.
pub fn write_loop(shared: &Shared, outbox: &QueueOutbox) {
    let mut batch = Vec::with_capacity(BATCH);
    let mut text = String::new();
    while let Some(first) = outbox.take_blocking(None) {
        batch.push(first);
        outbox.take_into(&mut batch, BATCH - 1);
        outbox.took();
        text.clear();
        let mut end = false;
        let mode = shared.mode.load(Ordering::Acquire);
        for item in batch.drain(..) {
            match item {
                Outbound::Frame { frame, meta, .. } => {
                    shared.counters.rx_packets.fetch_add(1, Ordering::Relaxed);
                    shared.counters.rx_bytes.fetch_add(frame.len() as u64, Ordering::Relaxed);
                    let wanted = match mode {
                        MODE_RAW => true,
                        MODE_BCM => shared
                            .subscriptions
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .pass(&frame, meta.timestamp_ns),
                        _ => false,
                    };
                    if wanted {
                        protocol::format_frame(&mut text, &frame, meta.timestamp_ns);
                    }
                }
                Outbound::RxOverflow { dropped, .. } => text.push_str(&protocol::error_line(&format!(
                    "{dropped} frames of the channel dropped: this session did not read fast enough"
                ))),
                Outbound::TxDropped { reason, dropped, .. } => text.push_str(&protocol::error_line(&format!(
                    "{dropped} frames this session sent are off the bus: {}",
                    reason.describe()
                ))),
                Outbound::ChannelState { text: said, .. } => text.push_str(&protocol::error_line(&said)),
                Outbound::Error { text: said, fatal, .. } => {
                    text.push_str(&protocol::error_line(&said));
                    end |= fatal;
                }
                Outbound::Goodbye { text: said, .. } => {
                    text.push_str(&protocol::error_line(&said));
                    end = true;
                }
                Outbound::PortOpened { .. }
                | Outbound::PortClosed { .. }
                | Outbound::Pong { .. }
                | Outbound::Grant { .. }
                | Outbound::Stats { .. } => {}
            }
        }
        if !text.is_empty() && !shared.write(&text) {
            warn!("a socketcand client stopped reading for {} s; its session is closed", WRITE_PATIENCE.as_secs());
            return;
        }
        if end {
            let _ = shared.out.lock().unwrap_or_else(|e| e.into_inner()).shutdown(Shutdown::Both);
            return;
        }
    }
}
