//! Virtual time for a synchronised participant (`spec/protocol.md` 6.8):
//! [`Client::now`] is the bus time it stands at, [`Client::step`] ends its
//! step and waits until bus time has reached the step's boundary.
//!
//! ```no_run
//! use fieldhub_client::{Client, ClientOptions, Frame};
//! let options = ClientOptions { name: "ecu1".into(), synchronized: true, ..Default::default() };
//! let client = Client::connect_with("tcp://127.0.0.1:29536", &options)?;
//! let port = client.open_port("can0")?;
//! for _ in 0..1000 {
//!     // One step of 1 ms: send what this step sends, then let time move.
//!     client.send(&port, &Frame::can(0x100, false, &[1])?)?;
//!     let now = client.step(client.now().unwrap() + 1_000_000)?;
//!     while let Some(rx) = client.try_recv()? {
//!         assert!(rx.meta.timestamp_ns <= now);
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use fieldhub_proto::limits::MAX_WAKE_FILTERS;
use fieldhub_proto::wire::{self, ErrorCode, Message, StepAhead, WakeFilter, WakeFilters};
use fieldhub_proto::Frame;

use crate::dispatch::NOT_GRANTED;
use crate::link::SendFail;
use crate::receive::{self, Waited};
use crate::{lock, Client, ClientError, Port};

impl Client {
    /// The bus time this participant stands at (the hub's last `GRANT`), in
    /// nanoseconds; `None` for a client that is not a synchronised participant.
    pub fn now(&self) -> Option<u64> {
        // SYNC POINT with the consumer's Release store in `dispatch`.
        let granted = self.shared.granted_ns.load(Ordering::Acquire);
        (granted != NOT_GRANTED).then_some(granted)
    }

    /// End this participant's step: it is done up to bus time `until_ns`.
    /// Blocks until every participant is done and bus time has reached
    /// `until_ns`; the frames of the window are in the receive queue by
    /// then. Returns the new bus time. No timeout: the hub's step timeout
    /// reports a participant that holds time back, and closing the client
    /// ends the wait.
    pub fn step(&self, until_ns: u64) -> Result<u64, ClientError> {
        self.begin_step(until_ns)?;
        loop {
            if let Some(now_ns) = self.await_time(until_ns, None)? {
                return Ok(now_ns);
            }
        }
    }

    /// [`Client::step`] in two halves, for callers that wait in slices (to
    /// run signal handlers between them): announce the end of the step ...
    pub fn begin_step(&self, until_ns: u64) -> Result<(), ClientError> {
        self.refuse_while_running(&mut lock(&self.step_ahead))?;
        self.announce(until_ns, Message::Step { until_ns })
    }

    /// Send a frame for bus time `at_ns` of a later step of this
    /// participant (connected with [`crate::ClientOptions::ahead`]): the hub
    /// holds it and queues it when bus time reaches `at_ns` (at or before
    /// the current bus time: now, as [`Client::send`]). It must fall within
    /// the step that the next [`Client::step`] or [`Client::step_ahead`]
    /// ends; a later one is refused then (`invalid_frame`). Never waits
    /// for the hub, as a participant's send does not.
    pub fn send_at(&self, port: &Port, frame: &Frame, at_ns: u64) -> Result<(), ClientError> {
        if !self.ahead {
            return Err(ClientError::NotAhead);
        }
        self.send_stamped(port, frame, at_ns, None)
    }

    /// End this participant's step as done up to `until_ns` in steps of
    /// `period_ns`, none of which needs input unless a frame matching
    /// `filters` (SocketCAN form; none: any frame) is delivered to one of
    /// its ports: then bus time stops at the first of its step boundaries
    /// at or after that frame. Blocks until then; returns the bus time
    /// granted — `until_ns`, or the boundary a frame woke it at, with the
    /// frames up to it in the receive queue. One round trip for many steps
    /// (`spec/protocol.md` 3.11a). [`Client::begin_step_ahead`] and
    /// [`Client::await_step_ahead`] are its halves, for a caller that must
    /// stop waiting (on a signal) without losing the step.
    pub fn step_ahead(&self, until_ns: u64, period_ns: u64, filters: &[WakeFilter]) -> Result<u64, ClientError> {
        self.begin_step_ahead(until_ns, period_ns, filters)?;
        loop {
            if let Some(granted) = self.await_step_ahead(None)? {
                return Ok(granted);
            }
        }
    }

    /// Announce a step ahead ([`Client::step_ahead`]) without waiting for
    /// its grant. The hub runs it whether or not anyone waits: there is no
    /// cancelling a step, so the participant's next step waits for this
    /// one's grant ([`Client::await_step_ahead`]; until then a step is
    /// refused with [`ClientError::StepAheadRunning`]).
    pub fn begin_step_ahead(&self, until_ns: u64, period_ns: u64, filters: &[WakeFilter]) -> Result<(), ClientError> {
        if !self.ahead {
            return Err(ClientError::NotAhead);
        }
        if filters.len() > MAX_WAKE_FILTERS {
            return Err(ClientError::TooManyWakeFilters { given: filters.len(), max: MAX_WAKE_FILTERS });
        }
        let mut pending = lock(&self.step_ahead);
        self.refuse_while_running(&mut pending)?;
        // Read before the step is announced: its grant may come at once.
        let granted_before = self.now().unwrap_or(0);
        let step = StepAhead { until_ns, period_ns, filters: WakeFilters::from_slice(filters) };
        self.announce(until_ns, Message::StepAhead(step))?;
        *pending = Some(PendingAhead { until_ns, granted_before });
        Ok(())
    }

    /// Wait at most `timeout` (`None`: until it comes) for the grant of the
    /// step ahead [`Client::begin_step_ahead`] announced: the bus time
    /// granted, or `None` when the timeout passed first (the step still
    /// runs; await it again). [`ClientError::NoStepAhead`] when none was
    /// begun since the last one was awaited.
    pub fn await_step_ahead(&self, timeout: Option<Duration>) -> Result<Option<u64>, ClientError> {
        let Some(PendingAhead { granted_before, .. }) = *lock(&self.step_ahead) else {
            return Err(ClientError::NoStepAhead);
        };
        let woken = || self.granted_past(granted_before);
        let ready = || woken() || self.refused_step().is_some();
        let deadline = timeout.map(|t| Instant::now() + t);
        let waited = receive::wait_until(&*self.link, &self.shared, deadline, &ready);
        let finished = |result| {
            *lock(&self.step_ahead) = None;
            result
        };
        if let Waited::Closed = waited {
            return finished(Err(self.shared.closed_error()));
        }
        if let Some(at) = self.refused_step() {
            let (code, text) = lock(&self.shared.errors).remove(at);
            return finished(Err(ClientError::Rejected { code, text }));
        }
        if woken() {
            return finished(Ok(Some(self.shared.granted_ns.load(Ordering::Acquire))));
        }
        Ok(None)
    }

    /// Whether a step ahead was begun and its grant not yet awaited.
    pub fn step_ahead_running(&self) -> bool {
        let mut pending = lock(&self.step_ahead);
        self.refuse_while_running(&mut pending).is_err()
    }

    /// [`ClientError::StepAheadRunning`] while the hub has not granted the
    /// pending step ahead; a grant nobody awaited ends it here.
    fn refuse_while_running(&self, pending: &mut Option<PendingAhead>) -> Result<(), ClientError> {
        match *pending {
            Some(step) if !self.granted_past(step.granted_before) => {
                Err(ClientError::StepAheadRunning { until_ns: step.until_ns })
            }
            _ => {
                *pending = None;
                Ok(())
            }
        }
    }

    /// Whether the hub granted a bus time later than `before`.
    fn granted_past(&self, before: u64) -> bool {
        // SYNC POINT with the consumer's Release store in `dispatch`.
        let granted = self.shared.granted_ns.load(Ordering::Acquire);
        granted != NOT_GRANTED && granted > before
    }

    /// Send the message that ends a step to `until_ns`.
    fn announce(&self, until_ns: u64, message: Message<'_>) -> Result<(), ClientError> {
        let now_ns = self.now().ok_or(ClientError::NotSynchronized)?;
        if until_ns <= now_ns {
            return Err(ClientError::StepNotForward { until_ns, now_ns });
        }
        let mut bytes = Vec::new();
        wire::encode(&mut bytes, &message);
        self.link.send_message(bytes, Some(self.timeout)).map_err(|fail| match fail {
            SendFail::Timeout => ClientError::RequestQueueFull(self.timeout),
            SendFail::Closed => self.shared.closed_error(),
        })
    }

    /// ... then wait, at most `timeout` (`None`: until it happens), for bus
    /// time to reach `until_ns`: the new bus time, or `None` on timeout.
    pub fn await_time(&self, until_ns: u64, timeout: Option<Duration>) -> Result<Option<u64>, ClientError> {
        let reached = || {
            let granted = self.shared.granted_ns.load(Ordering::Acquire);
            (granted != NOT_GRANTED && granted >= until_ns) || self.refused_step().is_some()
        };
        let deadline = timeout.map(|t| Instant::now() + t);
        match receive::wait_until(&*self.link, &self.shared, deadline, &reached) {
            Waited::Ready => {}
            Waited::TimedOut => return Ok(None),
            Waited::Closed => return Err(self.shared.closed_error()),
        }
        if let Some(at) = self.refused_step() {
            let (code, text) = lock(&self.shared.errors).remove(at);
            return Err(ClientError::Rejected { code, text });
        }
        Ok(Some(self.shared.granted_ns.load(Ordering::Acquire)))
    }

    /// Where the hub's refusal of a `STEP` waits among the reported errors.
    fn refused_step(&self) -> Option<usize> {
        lock(&self.shared.errors).iter().position(|(code, _)| *code == ErrorCode::TimeMode as u16)
    }

    /// Whether more of this participant's frames waited in the hub at its
    /// last `GRANT` than a real-time transmit queue holds (256): its
    /// channel carries less than it sends, and its lower-priority frames
    /// wait for later steps. Meanwhile a send with a zero timeout reports
    /// [`ClientError::SendQueueFull`]; a send that may wait still queues
    /// its frame, as waiting would hold bus time (`spec/protocol.md` 6.8).
    /// Always false outside virtual time.
    pub fn tx_queue_full(&self) -> bool {
        self.shared.queue_full.load(Ordering::Relaxed)
    }

    /// A participant's first `GRANT` follows `WELCOME`: wait for it, so
    /// [`Client::now`] has a value when `connect` returns.
    pub(crate) fn await_first_grant(&self) -> Result<(), ClientError> {
        let granted = || self.shared.granted_ns.load(Ordering::Acquire) != NOT_GRANTED;
        match receive::wait_until(&*self.link, &self.shared, Some(Instant::now() + self.timeout), &granted) {
            Waited::Ready => Ok(()),
            Waited::TimedOut => Err(ClientError::Timeout(self.timeout)),
            Waited::Closed => Err(self.shared.closed_error()),
        }
    }
}

/// A step ahead announced and not yet awaited: the grant it waits for is
/// the first one past `granted_before`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingAhead {
    until_ns: u64,
    granted_before: u64,
}
