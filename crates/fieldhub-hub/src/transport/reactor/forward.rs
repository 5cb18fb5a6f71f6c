//! Stream forwarding: a stream client's session after its `WELCOME` — its
//! messages to the bus as transmit credit allows, and the bus's items
//! packed for it.
//!
//! - **To the bus.** Complete messages are decoded in the connection's
//!   input buffer and forwarded in order. A `FRAMES` batch takes transmit
//!   credit record by record and goes to the bus as one queue item (an
//!   [`Inbound::Frames`] run, as far as credit went). Without credit the
//!   rest of the batch stays in the buffer, its cursor at the next record,
//!   and the reactor reads on only up to [`INPUT_LIMIT`]; when the bus
//!   returns credit, the credit's waiter posts a notice and forwarding
//!   resumes at that record. That is how a stream sender is held to a bound
//!   like a shared-memory one.
//! - **To the client.** The bus queues the client's items in its
//!   [`QueueOutbox`]; [`refill`] packs what waits into as few messages as
//!   fit, [`TAKE_BATCH`] items per lock, up to [`WRITE_CHUNK`] bytes.
//!
//! Invariants: each record reaches the bus once, in the order sent, and a
//! client's requests after it; a batch is checked whole before any record
//! of it is forwarded; nothing is packed after an item that ends the
//! connection; a session's outbox refuses once the session is dropped, so
//! the bus never waits for it; per frame nothing is allocated, locked or
//! called into the kernel (run buffers come back through the inbox's pool,
//! the taken-items vector is reused). Imports from the reactor only the
//! input buffer and the notice.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_proto::wire::{self, ErrorCode, Packer};

use super::input::Input;
use super::notice::Notice;
use crate::session::{request_of, ClientSlot, FrameCursor, Request, Violation};
use fieldhub_bus::credit::{TxCredit, Waiter};
use fieldhub_bus::inbox::Inbound;
use fieldhub_bus::outbox::{Outbound, Outbox, QueueOutbox};

/// Bytes a stream client may have read but not yet forwarded (it waits for
/// transmit credit) before the reactor stops reading it, beyond the message
/// being forwarded. The reactor looks before each read, so the buffer ends
/// below this plus one read's [`READ_CHUNK`](super::input::READ_CHUNK).
pub(super) const INPUT_LIMIT: usize = 64 * 1024;
/// The writer stops packing and writes once this many bytes are pending.
pub(super) const WRITE_CHUNK: usize = 64 * 1024;
/// Items a stream session takes from its outbox per lock.
const TAKE_BATCH: usize = 64;

/// A stream client's session state.
pub(super) struct StreamSession {
    outbox: Arc<QueueOutbox>,
    /// Items taken from the outbox and not yet packed (reused).
    taken: Vec<Outbound>,
    credit: Arc<TxCredit>,
    cursor: FrameCursor,
    hung_up: Arc<AtomicBool>,
}

/// A session ends however its phase is left (closed, rejected, a last
/// message to write): its outbox refuses from then on, so the bus never
/// waits for it.
impl Drop for StreamSession {
    fn drop(&mut self) {
        self.outbox.close();
    }
}

impl StreamSession {
    /// Attach connection `index`'s client to the bus: its outbox, returned
    /// credit and hang-up post a notice for `index`. The caller queues the
    /// `WELCOME` next, so whatever the client sends after it finds the bus
    /// ready.
    pub(super) fn attach(slot: &mut ClientSlot, index: usize, notice: &Arc<Notice>) -> Result<Self, Violation> {
        let bus = Arc::clone(slot.sessions().inbox.bus_wake());
        let for_outbox = Arc::clone(notice);
        let outbox = QueueOutbox::new(Some(Box::new(move || for_outbox.post(index))), bus);
        let for_credit = Arc::clone(notice);
        let credit = Arc::new(TxCredit::new(Waiter::Notify(Box::new(move || for_credit.post(index)))));
        let hung_up = Arc::new(AtomicBool::new(false));
        let hang_up = {
            let (hung_up, notice) = (Arc::clone(&hung_up), Arc::clone(notice));
            Box::new(move || {
                // SYNC POINT with `hung_up`'s Acquire load.
                hung_up.store(true, Ordering::Release);
                notice.post(index);
            })
        };
        slot.attach(Outbox::new(outbox.clone()), hang_up, Arc::clone(&credit), None)
            .map_err(|_| Violation::new(ErrorCode::ShuttingDown, "the hub is shutting down"))?;
        let taken = Vec::with_capacity(TAKE_BATCH);
        let cursor = FrameCursor::new(slot.stamps_frames());
        Ok(Self { outbox, taken, credit, cursor, hung_up })
    }

    /// Whether the bus hung the client up (it does not read its replies).
    pub(super) fn hung_up(&self) -> bool {
        // SYNC POINT with the hang-up's Release store.
        self.hung_up.load(Ordering::Acquire)
    }
}

/// How forwarding a client's buffered messages went.
#[derive(Debug)]
pub(super) enum Forwarded {
    /// Every complete message went; the rest waits for more bytes.
    Done,
    /// No credit: the rest of a batch waits in the buffer until a notice.
    NoCredit,
    /// The client said goodbye (for the log: its reason).
    Goodbye(String),
    /// The client broke the protocol, or the bus is gone: reject it.
    Broke(Violation),
}

/// Forward the complete messages buffered in `input` to the bus.
pub(super) fn forward(input: &mut Input, slot: &mut ClientSlot, session: &mut StreamSession) -> Forwarded {
    loop {
        let range = match input.next_message(MAX_MESSAGE_LEN) {
            Ok(Some(range)) => range,
            Ok(None) => return Forwarded::Done,
            Err(e) => return Forwarded::Broke(Violation::from(e)),
        };
        let end = range.end;
        let client = slot.id();
        let message = match wire::decode(input.body(range)) {
            Ok(message) => message,
            Err(e) => return Forwarded::Broke(Violation::from(e)),
        };
        let outcome = match request_of(client, message) {
            Err(violation) => Err(violation),
            Ok(Request::Frames(batch)) => {
                // The batch goes to the bus as one item, as far as credit goes.
                let inbox = &slot.sessions().inbox;
                let credit = &session.credit;
                let mut frames = inbox.frame_run();
                let done = session.cursor.forward(
                    &batch,
                    || credit.acquire_or_wait(),
                    |port, frame, at_ns| {
                        frames.push((port, frame, at_ns));
                        true
                    },
                );
                let queued = if frames.is_empty() { Ok(()) } else { slot.forward(Inbound::Frames { client, frames }) };
                match queued {
                    Err(violation) => Err(violation),
                    // No credit: the rest of the batch waits in the buffer.
                    Ok(()) if !done => return Forwarded::NoCredit,
                    Ok(()) => Ok(None),
                }
            }
            Ok(Request::Bus(request)) => slot.forward(request).map(|()| None),
            Ok(Request::Nothing) => Ok(None),
            Ok(Request::Goodbye(reason)) => Ok(Some(reason)),
        };
        input.take_to(end);
        match outcome {
            Ok(None) => {}
            Ok(Some(goodbye)) => return Forwarded::Goodbye(goodbye),
            Err(violation) => return Forwarded::Broke(violation),
        }
    }
}

/// Pack what waits in the session's outbox into `output`. Returns whether
/// an item that ends the connection was packed: it was the last.
pub(super) fn refill(session: &mut StreamSession, output: &mut Packer) -> bool {
    let outbox = &session.outbox;
    outbox.rearm();
    let mut ends = false;
    // A few dozen items per look at the queue: the bus, queueing, meets
    // the lock once per batch instead of once per frame.
    while !ends && output.len() < WRITE_CHUNK {
        outbox.take_into(&mut session.taken, TAKE_BATCH);
        if session.taken.is_empty() {
            break;
        }
        for item in session.taken.drain(..) {
            if ends {
                // Nothing goes after a connection's last message.
                continue;
            }
            ends = item.ends_connection();
            item.pack(output);
        }
    }
    outbox.took();
    ends
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use fieldhub_bus::credit::TX_CREDITS;
    use fieldhub_bus::inbox::Inbox;
    use fieldhub_bus::outbox::OutboxSink;
    use fieldhub_bus::testing::SteppedByHand;
    use fieldhub_proto::wire::{ErrorReport, Message};

    use super::*;
    use crate::transport::reactor::testing::{self, feed, frame_ids, frames_message};

    /// A session as attaching makes it, whose returned credit counts the
    /// notices it would post.
    fn session() -> (StreamSession, Arc<AtomicUsize>) {
        let notices = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&notices);
        let notify = Waiter::Notify(Box::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        }));
        let session = StreamSession {
            outbox: QueueOutbox::new(Some(Box::new(|| {})), Arc::new(SteppedByHand)),
            taken: Vec::new(),
            credit: Arc::new(TxCredit::new(notify)),
            cursor: FrameCursor::default(),
            hung_up: Arc::new(AtomicBool::new(false)),
        };
        (session, notices)
    }

    /// The frame ids of every `Frames` item in the inbox, one list per item.
    fn runs(inbox: &Inbox) -> Vec<Vec<u32>> {
        std::iter::from_fn(|| inbox.try_recv().ok())
            .map(|item| match item {
                Inbound::Frames { frames, .. } => frames.iter().map(|(_, frame, _)| frame.id()).collect(),
                other => panic!("expected frames, got {other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_frames_batch_reaches_the_inbox_as_one_item() {
        let (sessions, inbox) = testing::sessions();
        let mut slot = testing::slot(&sessions);
        let (mut session, _) = session();
        let mut input = Input::default();
        feed(&mut input, &frames_message(0..100));
        assert!(matches!(forward(&mut input, &mut slot, &mut session), Forwarded::Done));
        assert_eq!(runs(&inbox), [(0..100).collect::<Vec<_>>()]);
        assert!(input.is_empty());
        assert_eq!(session.credit.in_flight(), 100, "a credit per record");
    }

    #[test]
    fn without_credit_a_batch_waits_in_the_buffer_and_resumes_at_its_next_record_when_credit_returns() {
        let (sessions, inbox) = testing::sessions();
        let mut slot = testing::slot(&sessions);
        let (mut session, notices) = session();
        for _ in 0..TX_CREDITS - 3 {
            assert!(session.credit.try_acquire());
        }
        let mut input = Input::default();
        feed(&mut input, &frames_message(0..10));
        let buffered = input.len();

        assert!(matches!(forward(&mut input, &mut slot, &mut session), Forwarded::NoCredit));
        assert_eq!(runs(&inbox), [vec![0, 1, 2]], "as far as credit went, as one item");
        assert_eq!(input.len(), buffered, "the batch stays buffered");
        assert!(matches!(forward(&mut input, &mut slot, &mut session), Forwarded::NoCredit));
        assert!(runs(&inbox).is_empty(), "nothing without credit");

        // The bus transmits frames and returns their credit: the waiting
        // reactor hears of it once.
        for _ in 0..7 {
            session.credit.release();
        }
        assert_eq!(notices.load(Ordering::Relaxed), 1);
        assert!(matches!(forward(&mut input, &mut slot, &mut session), Forwarded::Done));
        assert_eq!(runs(&inbox), [(3..10).collect::<Vec<_>>()], "no record twice, none left out");
        assert!(input.is_empty());
    }

    #[test]
    fn messages_after_a_batch_wait_behind_it_while_credit_is_out() {
        let (sessions, inbox) = testing::sessions();
        let mut slot = testing::slot(&sessions);
        let (mut session, _) = session();
        for _ in 0..TX_CREDITS {
            assert!(session.credit.try_acquire());
        }
        let mut input = Input::default();
        feed(&mut input, &frames_message(0..2));
        feed(&mut input, &testing::encoded(&Message::Ping { nonce: 7 }));
        assert!(matches!(forward(&mut input, &mut slot, &mut session), Forwarded::NoCredit));
        assert!(inbox.try_recv().is_err(), "the ping does not overtake the frames");

        session.credit.release();
        session.credit.release();
        assert!(matches!(forward(&mut input, &mut slot, &mut session), Forwarded::Done));
        assert!(matches!(inbox.try_recv(), Ok(Inbound::Frames { .. })));
        assert!(matches!(inbox.try_recv(), Ok(Inbound::Ping { nonce: 7, .. })));
    }

    #[test]
    fn a_goodbye_ends_forwarding_with_its_reason_and_takes_nothing_after_it() {
        let (sessions, _inbox) = testing::sessions();
        let mut slot = testing::slot(&sessions);
        let (mut session, _) = session();
        let mut input = Input::default();
        let report = ErrorReport { code: 0, request: 0, fatal: true, text: "done" };
        feed(&mut input, &testing::encoded(&Message::Goodbye(report)));
        feed(&mut input, &frames_message(0..1));
        match forward(&mut input, &mut slot, &mut session) {
            Forwarded::Goodbye(reason) => assert_eq!(reason, "client said goodbye: done"),
            other => panic!("expected a goodbye, got {other:?}"),
        }
        assert_eq!(session.credit.in_flight(), 0);
    }

    #[test]
    fn an_oversize_length_prefix_breaks_the_protocol_before_its_body_arrives() {
        let (sessions, _inbox) = testing::sessions();
        let mut slot = testing::slot(&sessions);
        let (mut session, _) = session();
        let mut input = Input::default();
        feed(&mut input, &(MAX_MESSAGE_LEN + 1).to_le_bytes());
        match forward(&mut input, &mut slot, &mut session) {
            Forwarded::Broke(violation) => assert_eq!(violation.code, ErrorCode::Oversize),
            other => panic!("expected a violation, got {other:?}"),
        }
    }

    #[test]
    fn refill_packs_waiting_frames_into_one_message_and_nothing_after_a_last_message() {
        let (mut session, _) = session();
        let frame = fieldhub_proto::Frame::can(0x10, false, &[1]).expect("a frame");
        for seq in 1..=3 {
            let meta = fieldhub_proto::FrameMeta { seq, ..Default::default() };
            session.outbox.try_frame(1, &frame, &meta).expect("room");
        }
        let last = Outbound::Error { code: ErrorCode::Internal, request: 0, fatal: true, text: "bye".into() };
        session.outbox.try_control(last).expect("room");
        session.outbox.try_frame(1, &frame, &Default::default()).expect("room");

        let mut output = Packer::new();
        assert!(refill(&mut session, &mut output), "the fatal error ends the connection");
        let messages = testing::bodies(output.finish());
        assert_eq!(messages.len(), 2, "one batch, then the error: {messages:?}");
        assert_eq!(frame_ids(&messages[0]), [0x10, 0x10, 0x10]);
        assert!(matches!(wire::decode(&messages[1]), Ok(Message::Error(report)) if report.text == "bye"));
        assert!(session.outbox.take().is_none(), "the frame after it was taken and dropped");
    }

    #[test]
    fn a_dropped_session_closes_its_outbox_so_the_bus_never_waits_for_it() {
        let (session, _) = session();
        let outbox = Arc::clone(&session.outbox);
        drop(session);
        assert!(outbox.is_gone());
    }
}
