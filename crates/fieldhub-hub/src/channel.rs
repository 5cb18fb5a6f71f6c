//! One channel: its sequencer and the ports attached to it.
//!
//! [`Channel::transmit`] is the whole data path of a frame once it is on the
//! bus: take the next sequence number and timestamp, then hand a copy to every
//! attached port (the sender's own port only as a TX confirmation, and only
//! if it asked for one). Members are visited in one fixed order, and every
//! member's queue is FIFO, so all receivers see the channel's single order.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender, TrySendError};
use fieldhub_proto::wire::PortOptions;
use fieldhub_proto::{Frame, FrameMeta};

use crate::config::Protocol;
use crate::queues::{ClientId, Outbound};

/// How long a blocking delivery waits before it re-checks for shutdown.
const BLOCKING_SEND_SLICE: Duration = Duration::from_millis(100);

/// A port attached to a channel, as the fan-out sees it.
pub struct Member {
    pub client: ClientId,
    /// The client's local handle for the port.
    pub port: u16,
    /// Hub-wide port id.
    pub port_id: u32,
    pub options: PortOptions,
    outbox: Sender<Outbound>,
    /// Frames dropped since the last `RX_OVERFLOW` report reached the client.
    unreported_drops: u32,
    /// Frames dropped for this port since it was opened.
    pub rx_dropped: u64,
}

impl Member {
    pub fn new(client: ClientId, port: u16, port_id: u32, options: PortOptions, outbox: Sender<Outbound>) -> Self {
        Self { client, port, port_id, options, outbox, unreported_drops: 0, rx_dropped: 0 }
    }

    /// Queue `item` for this member under its overflow policy. Returns false
    /// if the frame was dropped.
    fn deliver(&mut self, frame: Frame, meta: FrameMeta, stopping: &AtomicBool) -> bool {
        if self.unreported_drops > 0 {
            let report = Outbound::RxOverflow { port: self.port, dropped: self.unreported_drops };
            match self.outbox.try_send(report) {
                Ok(()) => self.unreported_drops = 0,
                Err(_) if !self.options.contains(PortOptions::BLOCK_ON_OVERFLOW) => return self.drop_one(),
                Err(_) => {}
            }
        }
        let item = Outbound::Frame { port: self.port, frame, meta };
        if !self.options.contains(PortOptions::BLOCK_ON_OVERFLOW) {
            return match self.outbox.try_send(item) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) => self.drop_one(),
                // The client is gone; its Detach is on its way to the bus.
                Err(TrySendError::Disconnected(_)) => false,
            };
        }
        let mut item = item;
        loop {
            match self.outbox.send_timeout(item, BLOCKING_SEND_SLICE) {
                Ok(()) => return true,
                Err(SendTimeoutError::Disconnected(_)) => return false,
                Err(SendTimeoutError::Timeout(back)) => {
                    // SYNC POINT with Hub::shutdown's store: a hub that is
                    // stopping must not wait on a reader that never reads.
                    if stopping.load(Ordering::Acquire) {
                        return self.drop_one();
                    }
                    item = back;
                }
            }
        }
    }

    /// Queue an `RX_OVERFLOW` report for drops not yet reported, if there
    /// is room; a full queue keeps them for the next chance.
    pub fn report_drops(&mut self) {
        if self.unreported_drops > 0 {
            let report = Outbound::RxOverflow { port: self.port, dropped: self.unreported_drops };
            if self.outbox.try_send(report).is_ok() {
                self.unreported_drops = 0;
            }
        }
    }

    fn drop_one(&mut self) -> bool {
        self.unreported_drops = self.unreported_drops.saturating_add(1);
        self.rx_dropped += 1;
        false
    }
}

/// One bus.
pub struct Channel {
    pub id: u16,
    pub name: String,
    pub protocol: Protocol,
    /// Sequence number of the last frame; the first frame gets 1.
    last_seq: u64,
    last_timestamp_ns: u64,
    pub members: Vec<Member>,
}

impl Channel {
    pub fn new(id: u16, name: String, protocol: Protocol) -> Self {
        Self { id, name, protocol, last_seq: 0, last_timestamp_ns: 0, members: Vec::new() }
    }

    /// Put `frame` from port `sender` on the bus at time `now_ns` and fan it
    /// out. Returns the metadata it was given.
    pub fn transmit(&mut self, sender: u32, frame: Frame, now_ns: u64, stopping: &AtomicBool) -> FrameMeta {
        self.last_seq += 1;
        // Receivers rely on timestamps that never go backwards within a
        // channel, even if the wall clock does.
        self.last_timestamp_ns = now_ns.max(self.last_timestamp_ns);
        let meta = FrameMeta { channel: self.id, sender, seq: self.last_seq, timestamp_ns: self.last_timestamp_ns };
        for member in &mut self.members {
            if member.port_id == sender {
                if member.options.contains(PortOptions::RECEIVE_OWN) {
                    member.deliver(frame.with_echo(true), meta, stopping);
                }
            } else {
                member.deliver(frame, meta, stopping);
            }
        }
        meta
    }

    /// The member with hub-wide port id `port_id`.
    pub fn member_mut(&mut self, port_id: u32) -> Option<&mut Member> {
        self.members.iter_mut().find(|m| m.port_id == port_id)
    }

    /// Remove the member with hub-wide port id `port_id`, if present.
    pub fn detach(&mut self, port_id: u32) -> Option<Member> {
        let at = self.members.iter().position(|m| m.port_id == port_id)?;
        Some(self.members.remove(at))
    }
}
