//! What the simulator's threads share ([`Shared`]): the controllers
//! ([`Table`]), the `OPEN_PORT` requests in flight, the counters of what was
//! answered without the bus, and the two ways of answering a request.
//!
//! Invariants: the table is the bridge's own lock, never one the bus or the
//! control plane takes, and never held while SIL Kit is called (a frame's
//! hand-over to the bus's inbox is made under it: that waits only while the
//! inbox is full, which the bus drains without waiting on anyone);
//! `openings` is never locked while the table is.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::frame::Frame;
use fieldhub_silkit::netsim_ffi::ControllerDescriptor;
use fieldhub_silkit::{Direction, EventProducer, TransmitStatus};
use tracing::warn;

use super::node::{Node, Request};
use crate::session::bridge_port::{LateAnswer, PortOpenings};

#[derive(Default)]
pub(super) struct Table {
    pub nodes: HashMap<ControllerDescriptor, Node>,
    pub by_port: HashMap<u16, ControllerDescriptor>,
    pub carries_fd: bool,
    /// Frames forwarded to the bus: the last ticket handed out. A ticket is
    /// taken and its frame sent to the bus under this lock, so tickets reach
    /// the bus in order.
    pub tickets: u64,
    /// The `PING` in flight, if one is: its nonce is the last ticket
    /// forwarded before it.
    pub ping: Option<u64>,
}

/// What SIL Kit's threads, the bridge thread and the delivery thread share.
pub(super) struct Shared {
    pub table: Mutex<Table>,
    /// `OPEN_PORT` requests in flight, by request id, with the controller
    /// each is for; never locked while `table` is.
    pub openings: PortOpenings<ControllerDescriptor>,
    pub closed: Arc<AtomicBool>,
    /// Requests answered `Canceled` or `TransmitQueueFull`, and frames SIL
    /// Kit cannot be shown: counted, logged once each.
    pub canceled: AtomicU64,
    pub queue_full: AtomicU64,
    pub unshowable: AtomicU64,
    /// Frames the bus reported off the bus, by reason (as
    /// [`DropReason::ALL`]), each reason logged the first time.
    pub dropped: [AtomicU64; DropReason::ALL.len()],
    /// Requests settled by a `PONG` because their echo never came, and
    /// dropped frames the bus reported beyond the requests in its hands:
    /// logged the first time.
    pub unechoed: AtomicU64,
    pub unmatched: AtomicU64,
    pub participant: String,
    pub channel: String,
    pub bitrate: u32,
}

impl Shared {
    /// Nothing simulated yet, for `participant`'s network on `channel`.
    pub fn new(participant: String, channel: String, bitrate: u32, closed: Arc<AtomicBool>) -> Self {
        Shared {
            table: Mutex::new(Table::default()),
            // No port of the client's own: requests from 1. A refusal that
            // comes after the bridge stopped waiting still cancels the
            // controller's frames.
            openings: PortOpenings::new(1, LateAnswer::Ours),
            closed,
            canceled: AtomicU64::new(0),
            queue_full: AtomicU64::new(0),
            unshowable: AtomicU64::new(0),
            dropped: Default::default(),
            unechoed: AtomicU64::new(0),
            unmatched: AtomicU64::new(0),
            participant,
            channel,
            bitrate,
        }
    }

    pub fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answer a request that never reaches the bus.
    pub fn answer(
        &self,
        producer: &EventProducer,
        controller: ControllerDescriptor,
        request: &Request,
        status: TransmitStatus,
    ) {
        self.answer_raw(producer, controller, request.frame.id(), request.user_context, status);
    }

    pub fn answer_raw(
        &self,
        producer: &EventProducer,
        controller: ControllerDescriptor,
        can_id: u32,
        user_context: usize,
        status: TransmitStatus,
    ) {
        let counter = if status == TransmitStatus::QueueFull { &self.queue_full } else { &self.canceled };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Err(e) = producer.transmit_status(controller, can_id, status, wall_clock_ns(), user_context) {
            warn!(participant = %self.participant, error = %e, "cannot answer a SIL Kit transmit request");
        }
    }

    /// Show `controller` its frame `sent`, on the bus at `at`, and answer
    /// its request `Transmitted`.
    pub fn transmitted(
        &self,
        producer: &EventProducer,
        controller: ControllerDescriptor,
        request: &Request,
        sent: &Frame,
        at: u64,
    ) {
        let shown = producer.frame(sent, at, Direction::Send, request.user_context, &[controller]).and_then(|()| {
            let id = request.frame.id();
            producer.transmit_status(controller, id, TransmitStatus::Transmitted, at, request.user_context)
        });
        if let Err(e) = shown {
            warn!(participant = %self.participant, error = %e, "cannot show a SIL Kit controller its frame");
        }
    }
}

pub(super) fn wall_clock_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}
