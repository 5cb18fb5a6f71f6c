//! The simulator's way out: the bus's outbox for the controllers' ports,
//! turned into the events SIL Kit's controllers see — from SIL Kit's own
//! thread when it can, else from the delivery thread.
//!
//! SIL Kit writes an event produced on its I/O thread at once, but one
//! produced on another thread is handed to that I/O thread, which wakes
//! for it (one hand-off per event, two or three events per frame). So when
//! SIL Kit's thread has just forwarded a controller's frame to an ideal
//! channel (`forward.rs`), it waits a moment for the bus's answer
//! ([`Delivery::answer_inline`], at most [`INLINE_WAIT`]) and produces
//! what the bus queued itself; it announces that wait before the frame
//! goes ([`Delivery::expect_answer`]), as the bus may answer at once. The delivery thread takes what comes
//! otherwise: answers to frames the bridge thread forwarded, frames of
//! other ports, anything the bus queues later than that wait.
//!
//! The bus never calls SIL Kit and never waits for it: it queues into the
//! client's [`QueueOutbox`] and, once per round, rings [`DeliveryWake`],
//! which unparks the delivery thread, or rings the bell SIL Kit's threads
//! sleep on when one is waiting for those very items — lock-free, so the
//! bus thread shares no lock with a SIL Kit thread.
//!
//! Invariants:
//! - One consumer at a time ([`Delivery`]'s lock, held from taking items
//!   to producing them), so events go out in the order the bus queued
//!   them; the one that holds it drains the outbox until it is empty.
//! - No items are left behind: a ring while SIL Kit's thread waits is seen
//!   by that thread (both sides store, then load, sequentially consistent;
//!   the answer bell's own arm/ring fences, `fieldhub_shm::bell`, for its
//!   sleep), and SIL Kit's thread never blocks on the lock — when the delivery
//!   thread holds it, it rings the delivery thread again instead, so no
//!   lock SIL Kit holds around its callback can meet one the delivery
//!   thread waits for in SIL Kit.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, TryLockError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use fieldhub_shm::bell::LocalBell;
use fieldhub_shm::WaitPolicy;

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::frame::Frame;
use fieldhub_proto::wire::ChannelFlags;
use fieldhub_proto::FrameMeta;
use fieldhub_silkit::netsim_ffi::ControllerDescriptor;
use fieldhub_silkit::{Direction, ErrorState, EventProducer, TransmitStatus};
use tracing::{error, warn};

use super::node::Request;
use super::shared::Shared;
use crate::session::bridge_port::OpenedPort;
use fieldhub_bus::confinement::can_err;
use fieldhub_bus::outbox::{Notify, Outbound, QueueOutbox};

/// How long SIL Kit's thread waits for the bus's answer to a frame it
/// forwarded to an ideal channel: a round of an idle bus thread's wake-up
/// on a busy machine; the bus answers such a frame within microseconds.
/// On a timed channel the frame takes its bit time: SIL Kit's thread does
/// not wait, and the delivery thread answers.
pub(super) const INLINE_WAIT: Duration = Duration::from_micros(50);

/// How SIL Kit's thread waits within [`INLINE_WAIT`]: it spins 10 µs (a bus
/// thread awake on the other core answers within it), then sleeps until the
/// bus rings. A sleeper woken takes the core from a bus thread that spins on
/// the same one; a thread that only yielded would wait out that spin.
const INLINE_POLICY: WaitPolicy = WaitPolicy { spin: Duration::from_micros(10), busy_poll: false };

/// Outbox items taken under one lock.
const TAKE_BATCH: usize = 256;

/// How often the delivery thread looks whether the bridge is stopping.
const LOOK: Duration = Duration::from_millis(100);

/// The bus's ring for the simulator's outbox, and who answers it.
#[derive(Default)]
pub(super) struct DeliveryWake {
    /// The bus queued items since the last consumer began to drain.
    ready: AtomicBool,
    /// SIL Kit threads waiting for the bus's answer (they take the items).
    inline: AtomicUsize,
    /// Where those threads sleep once their spin is over: rung instead of
    /// the delivery thread. A doorbell, not a thread handle behind a lock:
    /// ringing it is a fence and a load, and a system call only while one
    /// of them sleeps (every one then wakes).
    answer: LocalBell,
    thread: OnceLock<Thread>,
}

impl DeliveryWake {
    /// What the bus calls once per round in which it queued items.
    pub fn notify(wake: &Arc<Self>) -> Notify {
        let wake = Arc::clone(wake);
        Some(Box::new(move || wake.rung()))
    }

    /// The bus's ring: who takes the items is told. Takes no lock.
    fn rung(&self) {
        // SYNC POINT with `expect_answer`'s increment and `answer_inline`'s
        // decrement, each followed by a load of `ready`: store, then load,
        // on both sides, so a SIL Kit thread either is counted here or sees
        // the items there.
        self.ready.store(true, Ordering::SeqCst);
        if self.inline.load(Ordering::SeqCst) == 0 {
            self.unpark();
        } else {
            // SYNC POINT with the waiter's arm in `await_answer`: the ring's
            // SeqCst fence after the store of `ready` against the arm's
            // fence before its load — the waiter sees `ready` or is woken.
            self.answer.bell().ring();
        }
    }

    /// SIL Kit's thread, counted in `inline`: wait until the bus rings or
    /// `deadline` passes — spinning, then asleep on the answer bell.
    /// Whether the bus queued items.
    fn await_answer(&self, deadline: Instant) -> bool {
        self.answer.bell().wait(INLINE_POLICY, Some(deadline), || self.ready.load(Ordering::SeqCst))
    }

    fn ring(&self) {
        self.ready.store(true, Ordering::SeqCst);
        self.unpark();
    }

    fn unpark(&self) {
        if let Some(thread) = self.thread.get() {
            thread.unpark();
        }
    }
}

/// What a consumer keeps between two items.
struct State {
    items: Vec<Outbound>,
    fanout: Fanout,
    /// The latest bus time seen: when a PONG settles a request whose echo
    /// never came, its frame was on the bus by then.
    bus_ns: u64,
}

/// A frame on its way to several controllers: one SIL Kit event for all.
struct Fanout {
    seq: u64,
    frame: Option<Frame>,
    timestamp: u64,
    receivers: Vec<ControllerDescriptor>,
}

/// The consumer side of the simulator's outbox.
pub(super) struct Delivery {
    shared: Arc<Shared>,
    outbox: Arc<QueueOutbox>,
    wake: Arc<DeliveryWake>,
    state: Mutex<State>,
    /// The bus said goodbye (or a fatal error): nothing more comes.
    ended: AtomicBool,
    /// The channel is ideal, so the bus answers a frame as it takes it: SIL
    /// Kit's thread waits for the answer. On a timed channel it would wait
    /// out [`INLINE_WAIT`] for nothing, the frame taking its bit time.
    answers_at_once: bool,
    /// Outbox items produced from SIL Kit's threads and from the delivery
    /// thread: how often the way without a hand-off was taken.
    inline_items: AtomicU64,
    thread_items: AtomicU64,
}

impl Delivery {
    pub fn new(shared: Arc<Shared>, outbox: Arc<QueueOutbox>, wake: Arc<DeliveryWake>, answers_at_once: bool) -> Self {
        let fanout = Fanout { seq: 0, frame: None, timestamp: 0, receivers: Vec::new() };
        let state = State { items: Vec::with_capacity(TAKE_BATCH), fanout, bus_ns: 0 };
        Delivery {
            shared,
            outbox,
            wake,
            state: Mutex::new(state),
            ended: AtomicBool::new(false),
            answers_at_once,
            inline_items: AtomicU64::new(0),
            thread_items: AtomicU64::new(0),
        }
    }

    /// SIL Kit's thread, before it hands a frame to the bus: from now on
    /// the bus's rings are its to answer (announced before the frame goes,
    /// or the bus, which may run at once, would ring the delivery thread
    /// for the answer). End it with [`Delivery::answer_inline`].
    pub fn expect_answer(&self) {
        // SYNC POINT with the bus's ring (`DeliveryWake::rung`).
        self.wake.inline.fetch_add(1, Ordering::SeqCst);
    }

    /// SIL Kit's thread, after [`Delivery::expect_answer`]: when it handed
    /// the frame over (`forwarded`) to an ideal channel, wait up to
    /// [`INLINE_WAIT`] for the bus to queue its answer ([`INLINE_POLICY`])
    /// and produce what the bus queued from here.
    pub fn answer_inline(&self, producer: &EventProducer, forwarded: bool) {
        if forwarded && self.answers_at_once {
            self.wake.await_answer(Instant::now() + INLINE_WAIT);
        }
        // SYNC POINT with the notify's store and load (see `notify`).
        self.wake.inline.fetch_sub(1, Ordering::SeqCst);
        if !self.wake.ready.load(Ordering::SeqCst) {
            return;
        }
        match self.state.try_lock() {
            Ok(mut state) => self.drain(&mut state, producer, &self.inline_items),
            Err(TryLockError::Poisoned(poisoned)) => {
                self.drain(&mut poisoned.into_inner(), producer, &self.inline_items)
            }
            // The delivery thread is at it: it drains once more.
            Err(TryLockError::WouldBlock) => self.wake.ring(),
        }
    }

    /// The delivery thread: drain the outbox whenever the bus rings, until
    /// the bridge closes or the bus ends the client.
    pub fn run(&self, producer: &EventProducer) {
        let _ = self.wake.thread.set(std::thread::current());
        // SYNC POINT with the Release stores of the hang-up and the bridge's end.
        loop {
            self.drain(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()), producer, &self.thread_items);
            if self.shared.closed.load(Ordering::Acquire) || self.ended.load(Ordering::Acquire) {
                return;
            }
            // A ring that came before this thread parks is not lost: the
            // unpark makes the park return at once.
            std::thread::park_timeout(LOOK);
        }
    }

    /// Outbox items produced so far from SIL Kit's threads and from the
    /// delivery thread.
    pub fn produced(&self) -> (u64, u64) {
        (self.inline_items.load(Ordering::Relaxed), self.thread_items.load(Ordering::Relaxed))
    }

    /// The delivery thread is to stop: wake it.
    pub fn stop(&self) {
        self.wake.unpark();
    }

    /// Produce every item waiting, in order, then the frame collected for
    /// its receivers.
    fn drain(&self, state: &mut State, producer: &EventProducer, counted: &AtomicU64) {
        self.wake.ready.store(false, Ordering::SeqCst);
        loop {
            let State { items, fanout, bus_ns } = state;
            self.outbox.take_into(items, TAKE_BATCH);
            if items.is_empty() {
                flush(&self.shared, producer, fanout);
                return;
            }
            self.outbox.took();
            counted.fetch_add(items.len() as u64, Ordering::Relaxed);
            for item in items.drain(..) {
                if !self.on_item(item, fanout, bus_ns, producer) {
                    // SYNC POINT with the delivery thread's Acquire load.
                    self.ended.store(true, Ordering::Release);
                    self.wake.unpark();
                    return;
                }
            }
        }
    }

    /// One item of the outbox; `false` when the bus ended the client.
    fn on_item(&self, item: Outbound, fanout: &mut Fanout, bus_ns: &mut u64, producer: &EventProducer) -> bool {
        let shared = &*self.shared;
        match item {
            Outbound::Frame { port, frame, meta } => {
                *bus_ns = (*bus_ns).max(meta.timestamp_ns);
                if fanout.seq != meta.seq {
                    flush(shared, producer, fanout);
                }
                on_frame(shared, producer, fanout, port, frame, meta);
            }
            Outbound::PortOpened { request, port, port_id, channel_flags, .. } => {
                // The port is the controller's before the bridge thread
                // wakes and forwards to it.
                if let Some(controller) = shared.openings.waiting(request) {
                    let mut table = shared.table();
                    table.carries_fd = channel_flags.contains(ChannelFlags::CANFD);
                    table.by_port.insert(port, controller);
                    if let Some(node) = table.nodes.get_mut(&controller) {
                        node.port = Some(port);
                    }
                }
                shared.openings.answer(request, Ok(OpenedPort { port, port_id }));
            }
            Outbound::Error { request, text, fatal, .. } => {
                if let Some(controller) = shared.openings.waiting(request) {
                    // Without a port the controller is no node of the
                    // channel: all it asks is answered Canceled.
                    let refused = shared.table().nodes.remove(&controller);
                    shared.openings.answer(request, Err(text.clone()));
                    error!(participant = %shared.participant, controller,
                        "the bus refused a SIL Kit controller's port, its frames are canceled: {text}");
                    for request in refused.iter().flat_map(|node| &node.requests) {
                        shared.answer(producer, controller, request, TransmitStatus::Canceled);
                    }
                } else {
                    warn!(participant = %shared.participant, "the bus reports: {text}");
                }
                if fatal {
                    return false;
                }
            }
            Outbound::Goodbye { .. } => return false,
            // Answers follow the frames before them: a frame collected
            // for its receivers goes out first.
            Outbound::TxDropped { port, reason, dropped } => {
                flush(shared, producer, fanout);
                on_dropped(shared, producer, port, reason, dropped);
            }
            Outbound::Pong { nonce } => {
                flush(shared, producer, fanout);
                on_pong(shared, producer, nonce, *bus_ns);
            }
            Outbound::RxOverflow { .. }
            | Outbound::ChannelState { .. }
            | Outbound::PortClosed { .. }
            | Outbound::Grant { .. }
            | Outbound::Stats { .. } => {}
        }
        true
    }
}

/// One frame for one controller's port.
fn on_frame(shared: &Shared, producer: &EventProducer, fanout: &mut Fanout, port: u16, frame: Frame, meta: FrameMeta) {
    let mut table = shared.table();
    let Some(&controller) = table.by_port.get(&port) else { return };
    let Some(node) = table.nodes.get_mut(&controller) else { return };
    if frame.is_error() {
        // The bus's own error frames have no SIL Kit form; a change of the
        // controller's error state does.
        drop(table);
        if let Some(state) = error_state_of(&frame) {
            if let Err(e) = producer.error_state(controller, state, meta.timestamp_ns) {
                warn!(participant = %shared.participant, error = %e, "cannot report a SIL Kit controller's error state");
            }
        }
        return;
    }
    if frame.is_echo() {
        let sent = frame.with_echo(false);
        let confirmed = node.confirm(&sent, meta.seq);
        drop(table);
        if let Some(request) = confirmed {
            shared.transmitted(producer, controller, &request, &sent, meta.timestamp_ns);
        }
        return;
    }
    if node.started {
        fanout.seq = meta.seq;
        fanout.frame = Some(frame);
        fanout.timestamp = meta.timestamp_ns;
        fanout.receivers.push(controller);
    }
}

/// `TX_DROPPED`: `count` frames of `port` are off the bus for `reason`,
/// its controller's oldest requests in the bus's hands: answered
/// `Canceled` now.
fn on_dropped(shared: &Shared, producer: &EventProducer, port: u16, reason: DropReason, count: u32) {
    let (controller, canceled, missing) = {
        let mut table = shared.table();
        let Some(&controller) = table.by_port.get(&port) else { return };
        let Some(node) = table.nodes.get_mut(&controller) else { return };
        let (canceled, missing) = node.drop_oldest(count as usize);
        (controller, canceled, missing)
    };
    // DropReason's wire values are 1 to 4, in the order of DropReason::ALL.
    if shared.dropped[reason as usize - 1].fetch_add(u64::from(count), Ordering::Relaxed) == 0 {
        warn!(participant = %shared.participant, controller, count,
            "frames of a SIL Kit controller {}; their requests are answered Canceled", reason.describe());
    }
    for request in &canceled {
        shared.answer(producer, controller, request, TransmitStatus::Canceled);
    }
    if missing > 0 && shared.unmatched.fetch_add(missing as u64, Ordering::Relaxed) == 0 {
        error!(participant = %shared.participant, controller, missing,
            "the bus reports more frames of a SIL Kit controller dropped than it has requests of it; \
            a fieldhub bug: please report it with this log");
    }
}

/// The `PONG` of the bridge's `PING` (`nonce`: the last ticket forwarded
/// before it): every frame forwarded before it is on the bus or reported
/// dropped, so a request of those still unanswered was on the bus without
/// its echo reaching the controller's port (its queue overflowed). It is
/// answered `Transmitted`, at `bus_ns`, the latest bus time seen.
fn on_pong(shared: &Shared, producer: &EventProducer, nonce: u64, bus_ns: u64) {
    let unechoed: Vec<(ControllerDescriptor, Vec<Request>)> = {
        let mut table = shared.table();
        if table.ping != Some(nonce) {
            return;
        }
        table.ping = None;
        let settled = table.nodes.iter_mut().map(|(&controller, node)| (controller, node.unechoed(nonce)));
        settled.filter(|(_, requests)| !requests.is_empty()).collect()
    };
    for (controller, requests) in unechoed {
        if shared.unechoed.fetch_add(requests.len() as u64, Ordering::Relaxed) == 0 {
            warn!(participant = %shared.participant, controller, requests = requests.len(),
                "SIL Kit transmit requests whose echo the bus never delivered (the port's queue overflowed): \
                the bus carried their frames, so they are answered Transmitted");
        }
        for request in &requests {
            shared.transmitted(producer, controller, request, &request.frame, bus_ns);
        }
    }
}

/// Show the collected frame to its receivers, in one event.
fn flush(shared: &Shared, producer: &EventProducer, fanout: &mut Fanout) {
    let Some(frame) = fanout.frame.take() else { return };
    if fanout.receivers.is_empty() {
        return;
    }
    if let Err(e) = producer.frame(&frame, fanout.timestamp, Direction::Receive, 0, &fanout.receivers) {
        if shared.unshowable.fetch_add(1, Ordering::Relaxed) == 0 {
            warn!(participant = %shared.participant, error = %e, "a frame could not be shown to SIL Kit");
        }
    }
    fanout.receivers.clear();
}

/// The error state a SocketCAN state-change error frame reports
/// (`confinement::state_change_frame`), if it is one.
fn error_state_of(frame: &Frame) -> Option<ErrorState> {
    let class = frame.id();
    if class & can_err::CNT == 0 {
        return None;
    }
    if class & can_err::BUSOFF != 0 {
        Some(ErrorState::BusOff)
    } else if class & can_err::RESTARTED != 0 {
        Some(ErrorState::Active)
    } else if class & can_err::CRTL != 0 {
        let detail = frame.data().get(1).copied().unwrap_or(0);
        if detail & (can_err::CRTL_TX_PASSIVE | can_err::CRTL_RX_PASSIVE) != 0 {
            Some(ErrorState::Passive)
        } else if detail & can_err::CRTL_ACTIVE != 0 {
            Some(ErrorState::Active)
        } else {
            None
        }
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_bus::confinement::{state_change_frame, ErrorCounters, ErrorState as Confined};
    use fieldhub_bus::fault::corruption_error_frame;

    #[test]
    fn state_change_frames_map_to_silkit_error_states() {
        let passive = ErrorCounters { tec: 128, ..Default::default() };
        let frame = state_change_frame(Confined::Active, &passive).unwrap();
        assert_eq!(error_state_of(&frame), Some(ErrorState::Passive));
        let bus_off = ErrorCounters { tec: 256, bus_off_until: Some(1), ..Default::default() };
        let frame = state_change_frame(Confined::Passive, &bus_off).unwrap();
        assert_eq!(error_state_of(&frame), Some(ErrorState::BusOff));
        let recovered = ErrorCounters::default();
        let frame = state_change_frame(Confined::BusOff, &recovered).unwrap();
        assert_eq!(error_state_of(&frame), Some(ErrorState::Active));
        let frame = state_change_frame(Confined::Passive, &recovered).unwrap();
        assert_eq!(error_state_of(&frame), Some(ErrorState::Active));
        assert_eq!(error_state_of(&corruption_error_frame()), None, "a bus error is no state change");
    }

    /// The bus's ring, as the bus calls it once a round.
    fn ring(wake: &Arc<DeliveryWake>) {
        (DeliveryWake::notify(wake).expect("the simulator's outbox has a notify"))();
    }

    /// A SIL Kit thread counted as waiting (`expect_answer`) that waits up
    /// to 10 s: how long it waited, and whether the bus rang.
    fn waiter(wake: &Arc<DeliveryWake>) -> std::thread::JoinHandle<(bool, Duration)> {
        wake.inline.fetch_add(1, Ordering::SeqCst);
        let wake = Arc::clone(wake);
        std::thread::spawn(move || {
            let started = Instant::now();
            let answered = wake.await_answer(started + Duration::from_secs(10));
            (answered, started.elapsed())
        })
    }

    #[test]
    fn the_bus_ring_wakes_the_silkit_thread_asleep_for_its_answer() {
        let wake = Arc::new(DeliveryWake::default());
        let waiting = waiter(&wake);
        // Long past its 10 µs spin: it sleeps on the answer bell.
        std::thread::sleep(Duration::from_millis(50));
        ring(&wake);
        let (answered, waited) = waiting.join().unwrap();
        assert!(answered, "the waiter saw no answer after the ring");
        assert!(waited < Duration::from_secs(5), "the ring did not wake the sleeper: it waited {waited:?}");
    }

    #[test]
    fn one_ring_wakes_every_silkit_thread_waiting_for_an_answer() {
        // With the waiter's handle in one slot only the last to announce
        // itself was woken; the bell wakes all that sleep.
        let wake = Arc::new(DeliveryWake::default());
        let waiting: Vec<_> = (0..3).map(|_| waiter(&wake)).collect();
        std::thread::sleep(Duration::from_millis(50));
        ring(&wake);
        for waiter in waiting {
            let (answered, waited) = waiter.join().unwrap();
            assert!(answered && waited < Duration::from_secs(5), "a waiter was left asleep: {waited:?}");
        }
    }

    #[test]
    fn a_ring_while_no_silkit_thread_waits_wakes_the_delivery_thread() {
        let wake = Arc::new(DeliveryWake::default());
        let (parked_tx, parked) = std::sync::mpsc::channel();
        let delivery = {
            let wake = Arc::clone(&wake);
            std::thread::spawn(move || {
                let _ = wake.thread.set(std::thread::current());
                parked_tx.send(()).unwrap();
                let started = Instant::now();
                while !wake.ready.load(Ordering::SeqCst) && started.elapsed() < Duration::from_secs(10) {
                    std::thread::park_timeout(Duration::from_secs(10));
                }
                started.elapsed()
            })
        };
        parked.recv().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        ring(&wake);
        let waited = delivery.join().unwrap();
        assert!(waited < Duration::from_secs(5), "the delivery thread was not unparked: it waited {waited:?}");
        // Nobody armed the answer bell: ringing it makes no system call.
        assert!(!wake.answer.bell().ring(), "the answer bell has a sleeper nobody counted");
    }

    #[test]
    fn a_silkit_thread_that_counts_itself_after_the_ring_sees_the_items_without_waiting() {
        let wake = Arc::new(DeliveryWake::default());
        ring(&wake);
        wake.inline.fetch_add(1, Ordering::SeqCst);
        let started = Instant::now();
        assert!(wake.await_answer(started + Duration::from_secs(10)));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
