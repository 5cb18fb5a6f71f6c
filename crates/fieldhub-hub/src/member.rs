//! A port on a channel: its receive side (the client's outbound queue and
//! the overflow policy), its transmit FIFO and its counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameMeta};

use crate::confinement::ErrorCounters;
use crate::credit::TxCredit;
use crate::queues::{ClientId, Outbound, Outbox, Refused};
use crate::tx_queue::TxQueue;

/// How long a port that holds the bus waits before it looks for room again.
const HOLD_POLL: Duration = Duration::from_micros(50);

/// Frames a gateway port (the sending end of a route) may hold; beyond that
/// the route drops and counts, like a gateway's full buffer.
pub const GATEWAY_QUEUE: usize = 1024;

/// Where a member's received frames go.
pub enum Receiver {
    /// A client's port.
    Client { outbox: Outbox, options: PortOptions },
    /// The sending end of a gateway route: it receives nothing.
    Gateway,
}

/// Counters of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    pub tx_frames: u64,
    pub rx_frames: u64,
    /// Frames dropped because the port's receive queue was full.
    pub rx_dropped: u64,
    /// Frames discarded from the transmit queue (port closed, gateway full).
    pub tx_dropped: u64,
}

/// A port attached to a channel.
pub struct Member {
    pub client: ClientId,
    /// The client's local handle for the port.
    pub port: u16,
    /// Hub-wide port id (for gateway ports: a reserved id, see `bus`).
    pub port_id: u32,
    pub receiver: Receiver,
    pub tx: TxQueue,
    /// The owning client's transmit credit, returned when a frame leaves `tx`.
    credit: Option<Arc<TxCredit>>,
    /// Frames dropped since the last `RX_OVERFLOW` report was queued.
    unreported_drops: u32,
    pub counters: PortCounters,
    /// False while the port's cable is pulled: it neither sends nor receives.
    pub plugged: bool,
    /// Segment of a cut channel the port is on (0 when the channel is whole).
    pub segment: u8,
    /// Fault confinement: error counters and bus-off.
    pub errors: ErrorCounters,
    /// Bus time before which a controller whose last attempt failed does not
    /// try again (the failed frame and the error frame occupy the bus).
    pub retry_at: u64,
}

impl Member {
    /// A client's port.
    pub fn client(
        client: ClientId,
        port: u16,
        port_id: u32,
        options: PortOptions,
        outbox: Outbox,
        credit: Arc<TxCredit>,
        tx: TxQueue,
    ) -> Self {
        Self {
            receiver: Receiver::Client { outbox, options },
            credit: Some(credit),
            ..Self::base(client, port, port_id, tx)
        }
    }

    /// The sending end of a gateway route.
    pub fn gateway(port_id: u32) -> Self {
        Self::base(0, 0, port_id, TxQueue::new(None))
    }

    /// A member with nothing to receive into and no credit: a gateway port
    /// as it is, the starting point of a client's port.
    fn base(client: ClientId, port: u16, port_id: u32, tx: TxQueue) -> Self {
        Self {
            client,
            port,
            port_id,
            receiver: Receiver::Gateway,
            tx,
            credit: None,
            unreported_drops: 0,
            counters: PortCounters::default(),
            plugged: true,
            segment: 0,
            errors: ErrorCounters::default(),
            retry_at: 0,
        }
    }

    /// Whether this member asked for its own frames back.
    pub fn receives_own(&self) -> bool {
        matches!(&self.receiver, Receiver::Client { options, .. } if options.contains(PortOptions::RECEIVE_OWN))
    }

    /// Whether this member is a client's port (not a gateway).
    pub fn is_client(&self) -> bool {
        matches!(self.receiver, Receiver::Client { .. })
    }

    /// A frame left the transmit queue: count it and return its credit.
    pub fn sent_one(&mut self) {
        self.counters.tx_frames += 1;
        if let Some(credit) = &self.credit {
            credit.release();
        }
    }

    /// Discard every waiting frame, returning their credits.
    pub fn discard_pending(&mut self) {
        let discarded = self.tx.drain().count() as u64;
        self.counters.tx_dropped += discarded;
        if let Some(credit) = &self.credit {
            (0..discarded).for_each(|_| credit.release());
        }
    }

    /// Queue a frame for this member under its overflow policy. Returns
    /// false if the frame was dropped.
    pub fn deliver(&mut self, frame: Frame, meta: FrameMeta, stopping: &AtomicBool) -> bool {
        let Receiver::Client { outbox, options } = &self.receiver else { return false };
        // Report drops only when the frame will fit behind the report: a
        // report per refused frame would fill the reply reserve.
        if outbox.has_frame_room() && self.unreported_drops > 0 {
            let report = Outbound::RxOverflow { port: self.port, dropped: self.unreported_drops };
            if outbox.try_control(report).is_ok() {
                self.unreported_drops = 0;
            }
        }
        let mut item = Outbound::Frame { port: self.port, frame, meta };
        loop {
            match outbox.try_frame(item) {
                Ok(()) => {
                    self.counters.rx_frames += 1;
                    return true;
                }
                // The client is gone; its Detach is on its way to the bus.
                Err(Refused::Gone) => return false,
                Err(Refused::Full) if !options.contains(PortOptions::BLOCK_ON_OVERFLOW) => {
                    self.unreported_drops = self.unreported_drops.saturating_add(1);
                    self.counters.rx_dropped += 1;
                    return false;
                }
                Err(Refused::Full) => {
                    // SYNC POINT with Hub::shutdown's store: a hub that is
                    // stopping must not wait on a reader that never reads.
                    if stopping.load(Ordering::Acquire) {
                        return false;
                    }
                    std::thread::sleep(HOLD_POLL);
                    item = Outbound::Frame { port: self.port, frame, meta };
                }
            }
        }
    }

    /// Queue an `RX_OVERFLOW` report for drops not yet reported; if even the
    /// reserve is full they wait for the next chance.
    pub fn report_drops(&mut self) {
        if let Receiver::Client { outbox, .. } = &self.receiver {
            if self.unreported_drops > 0 {
                let report = Outbound::RxOverflow { port: self.port, dropped: self.unreported_drops };
                if outbox.try_control(report).is_ok() {
                    self.unreported_drops = 0;
                }
            }
        }
    }
}
