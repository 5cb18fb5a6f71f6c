//! A port on a channel: its receive side (the client's outbox and the
//! overflow policy), its transmit FIFO and its counters.
//!
//! Delivery never waits: a full outbox drops and counts (reported to the
//! client as `RX_OVERFLOW`). A port opened with `BLOCK_ON_OVERFLOW` is kept
//! from overflowing by its channel instead, which holds its next frame while
//! such a port has no room ([`Member::lacks_room`]).
//!
//! A port is a SocketCAN socket in what it takes: CAN FD and CAN XL frames
//! only when opened with `FD`, nothing from a `LISTEN_ONLY` port (`spec/protocol.md`
//! 6.7). Frames a port never asked for are skipped, not counted as drops.
//!
//! A frame leaves the transmit FIFO in one of two ways (the fate contract,
//! `spec/protocol.md` 6.9): sent ([`Member::sent_one`]) or dropped for a
//! [`DropReason`] ([`Member::drop_oldest`], [`Member::discard_pending`],
//! [`Member::dropped`]) — counted by reason and reported to the sender as
//! `TX_DROPPED`. Either way its transmit credit comes back.

use std::sync::Arc;

use fieldhub_proto::fate::{ChannelCondition, DropReason};
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameKind, FrameMeta};

use crate::confinement::ErrorCounters;
use crate::credit::TxCredit;
use crate::inbox::ClientId;
use crate::outbox::{Outbound, Outbox, Refused};
use crate::port_id::PortId;
use crate::tx_queue::TxQueue;
use crate::wake::WakeWatch;

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
    /// Frames this port sent that are off the bus: the sum of
    /// `tx_dropped_by_reason`, plus a gateway's full queue.
    pub tx_dropped: u64,
    /// `tx_dropped` by [`DropReason`], in the order of [`DropReason::ALL`].
    pub tx_dropped_by_reason: [u64; DropReason::ALL.len()],
    /// Frames refused as they came (`ERROR`: CAN FD on a classic channel,
    /// a listen-only or read-only port sending).
    pub tx_refused: u64,
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
    /// This port's frames dropped, by reason, since the last `TX_DROPPED`
    /// report of that reason was queued.
    unreported_tx: [u32; DropReason::ALL.len()],
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
    /// While its participant steps ahead: the frames that end its step
    /// early (`wake.rs`). `None` otherwise, at the cost of one branch per
    /// delivery.
    pub wake: Option<WakeWatch>,
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
            unreported_tx: [0; DropReason::ALL.len()],
            counters: PortCounters::default(),
            plugged: true,
            segment: 0,
            errors: ErrorCounters::default(),
            retry_at: 0,
            takes_fd: true,
            listen_only: false,
            transmit_only: false,
            read_only: false,
            wake: None,
        }
    }

    /// Whether CAN FD (and, on a `canxl` channel, CAN XL) frames are
    /// delivered to this port.
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
        } else if !self.takes_fd && frame.kind() == FrameKind::CanXl {
            Some("was opened without FD and cannot send CAN XL frames (open it with the FD option, spec 4.1.2)")
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

    /// Discard the oldest waiting frame for `reason` (a relayed frame the
    /// owner hub did not commit), returning its credit.
    pub fn drop_oldest(&mut self, now_ns: u64, reason: DropReason) {
        if self.tx.take(now_ns).is_some() {
            self.release_credit(1);
            self.dropped(reason, 1);
        }
    }

    /// Discard every waiting frame for `reason`, returning their credits.
    pub fn discard_pending(&mut self, reason: DropReason) {
        let discarded = self.tx.drain().count();
        self.release_credit(discarded);
        self.dropped(reason, discarded);
    }

    /// Discard every waiting frame of a port that is going away: its client
    /// closed it or left, so there is no one to tell.
    pub fn discard_on_close(&mut self) {
        let discarded = self.tx.drain().count();
        self.release_credit(discarded);
        self.counters.tx_dropped += discarded as u64;
    }

    /// Count `count` of this port's frames as off the bus for `reason` and
    /// tell its client (`TX_DROPPED`) — now if its outbox has room, else
    /// with the next report ([`Member::report_drops`]). The frames' credit
    /// is the caller's: it has returned it, or returns it with
    /// [`Member::release_credit`].
    pub fn dropped(&mut self, reason: DropReason, count: usize) {
        if count == 0 {
            return;
        }
        let index = reason as usize - 1;
        self.counters.tx_dropped += count as u64;
        self.counters.tx_dropped_by_reason[index] += count as u64;
        self.unreported_tx[index] = self.unreported_tx[index].saturating_add(count.try_into().unwrap_or(u32::MAX));
        self.report_tx_drops();
    }

    /// Return the transmit credit of `count` frames that left the FIFO
    /// without being sent.
    pub fn release_credit(&self, count: usize) {
        if let Some(credit) = &self.credit {
            (0..count).for_each(|_| credit.release());
        }
    }

    /// Queue `TX_DROPPED` for every reason with unreported drops; what does
    /// not fit waits for the next chance.
    fn report_tx_drops(&mut self) {
        let Receiver::Client { outbox, .. } = &self.receiver else {
            // A hub-owned port has no one to tell; its counters show it.
            self.unreported_tx = [0; DropReason::ALL.len()];
            return;
        };
        for (index, reason) in DropReason::ALL.into_iter().enumerate() {
            let dropped = self.unreported_tx[index];
            if dropped > 0 && outbox.try_control(Outbound::TxDropped { port: self.port, reason, dropped }).is_ok() {
                self.unreported_tx[index] = 0;
            }
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
    pub fn deliver(&mut self, frame: &Frame, meta: FrameMeta) -> bool {
        let Receiver::Client { outbox, .. } = &self.receiver else { return false };
        // A classic-CAN socket (spec 6.7, 4.1.2): neither FD nor XL frames.
        if !self.takes_fd && matches!(frame.kind(), FrameKind::CanFd | FrameKind::CanXl) {
            return false;
        }
        // Like the FD case: not asked for, so neither delivered nor counted.
        if self.transmit_only && !frame.is_echo() {
            return false;
        }
        if let Some(watch) = &mut self.wake {
            watch.offer(frame);
        }
        // Report drops only when the frame will fit behind the report: a
        // report per refused frame would fill the reply reserve.
        if self.unreported_drops > 0 && outbox.has_frame_room() {
            let report = Outbound::RxOverflow { port: self.port, dropped: self.unreported_drops };
            if outbox.try_control(report).is_ok() {
                self.unreported_drops = 0;
            }
        }
        match outbox.try_frame(self.port, frame, &meta) {
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

    /// Tell this port's client that its channel changed `condition`
    /// (`CHANNEL_STATE`, a reply: it takes the outbox's reply room, never a
    /// frame's). A client that is gone or whose reply room is full misses it.
    pub fn tell_channel_state(&mut self, condition: ChannelCondition, text: &str) {
        if let Receiver::Client { outbox, .. } = &self.receiver {
            let state = Outbound::ChannelState { port: self.port, condition, missed: 0, text: text.to_owned() };
            let _ = outbox.try_control(state);
        }
    }

    /// A frame meant for this port is lost on its way (a delay rule had no
    /// room to hold it): counted and reported as a receive overflow.
    pub fn missed_one(&mut self) {
        self.counters.rx_dropped += 1;
        self.unreported_drops = self.unreported_drops.saturating_add(1);
        self.report_drops();
    }

    /// Queue `TX_DROPPED` and `RX_OVERFLOW` reports for drops not yet
    /// reported; if even the reserve is full they wait for the next chance.
    pub fn report_drops(&mut self) {
        self.report_tx_drops();
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
