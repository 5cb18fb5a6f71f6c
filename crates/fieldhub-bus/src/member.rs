//! A port on a channel: its receive side (the client's outbox and the
//! overflow policy), its transmit FIFO and its counters.
//!
//! Delivery never waits: a full outbox drops and counts (reported to the
//! client as `RX_OVERFLOW`). A port opened with `BLOCK_ON_OVERFLOW` is kept
//! from overflowing by its channel instead, which holds its next frame while
//! such a port has no room ([`Member::lacks_room`]).
//!
//! A port is a SocketCAN socket in what it takes: CAN FD frames only when
//! opened with `FD`, nothing from a `LISTEN_ONLY` port (`spec/protocol.md`
//! 6.7). Frames a port never asked for are skipped, not counted as drops.

use std::sync::Arc;

use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameKind, FrameMeta};

use crate::confinement::ErrorCounters;
use crate::credit::TxCredit;
use crate::inbox::ClientId;
use crate::outbox::{Outbound, Outbox, Refused};
use crate::port_id::PortId;
use crate::tx_queue::TxQueue;

/// Frames a gateway port (the sending end of a route) may hold; beyond that
/// the route drops and counts, like a gateway's full buffer.
pub const GATEWAY_QUEUE: usize = 1024;

/// Where a member's received frames go.
pub enum Receiver {
    /// A client's port.
    Client { outbox: Outbox, options: PortOptions },
    /// A hub-owned sending port (gateway route, send port): it receives
    /// nothing.
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
    /// Hub-wide port id: a client's port, a gateway route's sending end or
    /// a channel's send port.
    pub port_id: PortId,
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
    /// Whether CAN FD frames are delivered to this port (its `FD` option).
    takes_fd: bool,
    /// A listen-only controller: never transmits, never acknowledges.
    pub listen_only: bool,
    /// `TRANSMIT_ONLY`: receives nothing but its own echoes, does not
    /// acknowledge.
    pub transmit_only: bool,
    /// Opened by a client whose access may receive on the channel but not
    /// send (the monitor token, an `[[access]]` without it in `write`): it
    /// acknowledges like any node (a monitor must not change the bus), but
    /// never transmits.
    pub read_only: bool,
}

impl Member {
    /// A client's port.
    pub fn client(
        client: ClientId,
        port: u16,
        port_id: PortId,
        options: PortOptions,
        outbox: Outbox,
        credit: Arc<TxCredit>,
        tx: TxQueue,
    ) -> Self {
        Self {
            receiver: Receiver::Client { outbox, options },
            credit: Some(credit),
            takes_fd: options.contains(PortOptions::FD),
            listen_only: options.contains(PortOptions::LISTEN_ONLY),
            transmit_only: options.contains(PortOptions::TRANSMIT_ONLY),
            ..Self::base(client, port, port_id, tx)
        }
    }

    /// A port of the hub's own that only sends: a gateway route's sending
    /// end, or a channel's send port (`bus::monitor`).
    pub fn gateway(port_id: PortId) -> Self {
        Self::base(0, 0, port_id, TxQueue::new(None))
    }

    /// A member with nothing to receive into and no credit: a gateway port
    /// as it is, the starting point of a client's port.
    fn base(client: ClientId, port: u16, port_id: PortId, tx: TxQueue) -> Self {
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
            takes_fd: true,
            listen_only: false,
            transmit_only: false,
            read_only: false,
        }
    }

    /// Whether CAN FD frames are delivered to this port.
    pub fn takes_fd(&self) -> bool {
        self.takes_fd
    }

    /// Why this port may not send `frame`, if it may not.
    pub fn refuses_to_send(&self, frame: &Frame) -> Option<&'static str> {
        if self.listen_only {
            Some("is listen-only and never transmits")
        } else if self.read_only {
            Some("is read-only and may not transmit")
        } else if !self.takes_fd && frame.kind() == FrameKind::CanFd {
            Some("was opened without FD and cannot send CAN FD frames (open it with the FD option)")
        } else {
            None
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

    /// Discard the oldest waiting frame, counted as dropped, returning its
    /// credit: a relayed frame the owner hub did not commit.
    pub fn drop_oldest(&mut self, now_ns: u64) {
        if self.tx.take(now_ns).is_some() {
            self.counters.tx_dropped += 1;
            if let Some(credit) = &self.credit {
                credit.release();
            }
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

    /// Whether this is a lossless port (`BLOCK_ON_OVERFLOW`).
    pub fn is_lossless(&self) -> bool {
        matches!(&self.receiver, Receiver::Client { options, .. } if options.contains(PortOptions::BLOCK_ON_OVERFLOW))
    }

    /// Whether this is a lossless port (`BLOCK_ON_OVERFLOW`) that cannot
    /// take a frame now: its channel holds until it can. A port whose client
    /// is gone never holds anything.
    pub fn lacks_room(&self) -> bool {
        match &self.receiver {
            Receiver::Client { outbox, options } if options.contains(PortOptions::BLOCK_ON_OVERFLOW) => {
                self.plugged && !outbox.has_frame_room() && !outbox.is_gone()
            }
            _ => false,
        }
    }

    /// Ask this port's outbox to wake the bus when it has room, then look
    /// again: true if it still lacks room.
    pub fn wait_for_room(&self) -> bool {
        if let Receiver::Client { outbox, .. } = &self.receiver {
            outbox.want_room();
        }
        self.lacks_room()
    }

    /// Queue a frame for this member. A full outbox drops and counts it (a
    /// lossless port is full only when its channel could not hold: a fault
    /// rule's duplicates, an error frame). Returns false if it was dropped.
    pub fn deliver(&mut self, frame: Frame, meta: FrameMeta) -> bool {
        let Receiver::Client { outbox, .. } = &self.receiver else { return false };
        if !self.takes_fd && frame.kind() == FrameKind::CanFd {
            return false;
        }
        // Like the FD case: not asked for, so neither delivered nor counted.
        if self.transmit_only && !frame.is_echo() {
            return false;
        }
        // Report drops only when the frame will fit behind the report: a
        // report per refused frame would fill the reply reserve.
        if self.unreported_drops > 0 && outbox.has_frame_room() {
            let report = Outbound::RxOverflow { port: self.port, dropped: self.unreported_drops };
            if outbox.try_control(report).is_ok() {
                self.unreported_drops = 0;
            }
        }
        match outbox.try_frame(self.port, &frame, &meta) {
            Ok(()) => {
                self.counters.rx_frames += 1;
                true
            }
            // The client is gone; its Detach is on its way to the bus.
            Err(Refused::Gone) => false,
            Err(Refused::Full) => {
                self.unreported_drops = self.unreported_drops.saturating_add(1);
                self.counters.rx_dropped += 1;
                false
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
