//! Ports a bridge thread opens for its hub-internal client (the SIL Kit
//! simulator's controllers, the federation owner's relay ports): the bridge
//! thread sends `OPEN_PORT` and waits; the thread that reads the client's
//! outbox sees the bus's answer (`PORT_OPENED`, or an error naming the
//! request) and hands it over. [`PortOpenings`] is the table between the
//! two: the requests in flight by request id, each with what the outbox's
//! reader needs to know of it (`T`: the SIL Kit controller a port is for),
//! and the condvar the bridge thread waits on.
//!
//! Invariants:
//! - Request ids are handed out from the caller's first id up, wrapping
//!   back to it: the ids below it are the caller's own (the federation
//!   owner's main port is request 1), and 0 is what the bus's reports that
//!   answer no request carry.
//! - A request is answered once; a waiter looks every [`LOOK`] whether it
//!   must stop, so a hub that stops never leaves it waiting: it returns
//!   [`NotOpened::Stopped`].
//! - The outbox's reader never waits here: it takes the lock only to read a
//!   request's context and to store the answer.
//!
//! Imports std and `fieldhub_bus` only: no layer above the session's.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use fieldhub_bus::inbox::{Inbound, InboxSender};

/// How often a waiting bridge thread looks whether it must stop.
pub const LOOK: Duration = Duration::from_millis(100);

/// A port the bus opened: its handle on the client and its hub-wide id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenedPort {
    pub port: u16,
    pub port_id: u32,
}

/// Why a request got no port.
#[derive(Debug, PartialEq, Eq)]
pub enum NotOpened {
    /// The bus refused it, with its error's text.
    Refused(String),
    /// The bridge is stopping (the hub stops, the bus dropped the client,
    /// the caller's own reason) before the answer came, or the request
    /// could not reach the bus.
    Stopped,
}

/// What an answer is that comes after its waiter stopped waiting: the two
/// bridges differ, each keeps its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LateAnswer {
    /// Still the answer to a request of the bridge's: the outbox's reader
    /// gets the request's context and [`PortOpenings::answer`] says it was
    /// expected (the SIL Kit simulator: a refusal cancels the controller's
    /// frames, whoever waits).
    Ours,
    /// No request's answer any more: forgotten the moment its waiter
    /// stopped (the federation owner: the bus reports something no request
    /// waits for).
    Unknown,
}

/// `OPEN_PORT` requests of one client in flight, by request id.
pub struct PortOpenings<T = ()> {
    table: Mutex<Table<T>>,
    /// Signalled when a request is answered.
    answered: Condvar,
    first: u32,
    late: LateAnswer,
}

struct Table<T> {
    pending: HashMap<u32, Pending<T>>,
    /// The request id handed out last.
    last: u32,
}

struct Pending<T> {
    context: T,
    state: State,
}

enum State {
    Waiting,
    /// Its waiter stopped ([`LateAnswer::Ours`] keeps it for the answer).
    Abandoned,
    Answered(Result<OpenedPort, String>),
}

impl<T> PortOpenings<T> {
    /// A table whose request ids start at `first` (at least 1; the ids
    /// below are the caller's own) and wrap back to it.
    pub fn new(first: u32, late: LateAnswer) -> Self {
        let first = first.max(1);
        Self {
            table: Mutex::new(Table { pending: HashMap::new(), last: first - 1 }),
            answered: Condvar::new(),
            first,
            late,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table<T>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bridge thread: send the `OPEN_PORT` that `open` makes of a new
    /// request id to the bus and wait for the answer (see [`wait`](Self::wait)).
    pub fn open(
        &self,
        inbox: &InboxSender,
        context: T,
        open: impl FnOnce(u32) -> Inbound,
        stop: &dyn Fn() -> bool,
    ) -> Result<OpenedPort, NotOpened> {
        let request = self.request(context);
        if inbox.send(open(request)).is_err() {
            // The bus is gone: no answer comes.
            self.give_up(&mut self.table(), request);
            return Err(NotOpened::Stopped);
        }
        self.wait(request, stop)
    }

    /// The bridge thread, before it sends `OPEN_PORT`: a new request id,
    /// with `context` for the outbox's reader.
    pub fn request(&self, context: T) -> u32 {
        let mut table = self.table();
        let request = table.last.wrapping_add(1).max(self.first);
        table.last = request;
        table.pending.insert(request, Pending { context, state: State::Waiting });
        request
    }

    /// The bridge thread: wait until `request` is answered, or `stop` says
    /// the bridge is stopping (looked at every [`LOOK`]; an answer already
    /// there wins).
    pub fn wait(&self, request: u32, stop: &dyn Fn() -> bool) -> Result<OpenedPort, NotOpened> {
        let mut table = self.table();
        loop {
            match table.pending.get(&request).map(|p| &p.state) {
                Some(State::Waiting) => {}
                Some(State::Answered(_)) => break,
                // Not a request in flight: nothing will answer it.
                Some(State::Abandoned) | None => return Err(NotOpened::Stopped),
            }
            if stop() {
                self.give_up(&mut table, request);
                return Err(NotOpened::Stopped);
            }
            table = self.answered.wait_timeout(table, LOOK).unwrap_or_else(|e| e.into_inner()).0;
        }
        match table.pending.remove(&request).map(|p| p.state) {
            Some(State::Answered(Ok(port))) => Ok(port),
            Some(State::Answered(Err(text))) => Err(NotOpened::Refused(text)),
            Some(State::Waiting | State::Abandoned) | None => Err(NotOpened::Stopped),
        }
    }

    /// The waiter of `request` stops waiting.
    fn give_up(&self, table: &mut Table<T>, request: u32) {
        match self.late {
            LateAnswer::Ours => {
                if let Some(pending) = table.pending.get_mut(&request) {
                    pending.state = State::Abandoned;
                }
            }
            LateAnswer::Unknown => {
                table.pending.remove(&request);
            }
        }
    }

    /// The outbox's reader, before it answers: the context of `request` if
    /// it is a request of this table's still unanswered, so the reader can
    /// make ready for the port before the waiter wakes.
    pub fn waiting(&self, request: u32) -> Option<T>
    where
        T: Clone,
    {
        let table = self.table();
        let pending = table.pending.get(&request)?;
        match pending.state {
            State::Waiting | State::Abandoned => Some(pending.context.clone()),
            State::Answered(_) => None,
        }
    }

    /// The outbox's reader saw the bus's answer to `request` (`PORT_OPENED`
    /// or an error naming it): wake its waiter. `false` when no request of
    /// this table's waited for it.
    pub fn answer(&self, request: u32, answer: Result<OpenedPort, String>) -> bool {
        let mut table = self.table();
        let Some(pending) = table.pending.get_mut(&request) else { return false };
        match pending.state {
            State::Waiting => pending.state = State::Answered(answer),
            State::Abandoned => {
                table.pending.remove(&request);
            }
            State::Answered(_) => return false,
        }
        self.answered.notify_all();
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Instant;

    const PORT: OpenedPort = OpenedPort { port: 3, port_id: 42 };

    fn never() -> bool {
        false
    }

    #[test]
    fn an_answer_that_comes_before_the_wait_is_there_when_the_bridge_waits() {
        let openings: PortOpenings = PortOpenings::new(1, LateAnswer::Unknown);
        let request = openings.request(());
        assert!(openings.answer(request, Ok(PORT)));
        assert_eq!(openings.wait(request, &never), Ok(PORT));
        assert!(!openings.answer(request, Ok(PORT)), "taken: no request waits for a second answer");
    }

    #[test]
    fn an_answer_already_there_wins_over_stopping() {
        let openings: PortOpenings = PortOpenings::new(1, LateAnswer::Unknown);
        let request = openings.request(());
        openings.answer(request, Err("no such channel".into()));
        assert_eq!(openings.wait(request, &|| true), Err(NotOpened::Refused("no such channel".into())));
    }

    #[test]
    fn a_waiting_bridge_wakes_when_the_outbox_reader_answers_from_its_thread() {
        let openings: Arc<PortOpenings<u64>> = Arc::new(PortOpenings::new(1, LateAnswer::Ours));
        let opened = openings.request(7);
        let refused = openings.request(8);
        let waiter = {
            let openings = Arc::clone(&openings);
            std::thread::spawn(move || (openings.wait(opened, &never), openings.wait(refused, &never)))
        };
        // The reader learns which controller each answer is for first.
        assert_eq!(openings.waiting(opened), Some(7));
        assert!(openings.answer(opened, Ok(PORT)));
        assert_eq!(openings.waiting(refused), Some(8));
        assert!(openings.answer(refused, Err("the channel has no room".into())));
        let (opened, refused) = waiter.join().unwrap();
        assert_eq!(opened, Ok(PORT));
        assert_eq!(refused, Err(NotOpened::Refused("the channel has no room".into())));
    }

    #[test]
    fn a_hub_that_stops_wakes_the_waiter_with_stopped() {
        let openings: Arc<PortOpenings> = Arc::new(PortOpenings::new(1, LateAnswer::Unknown));
        let stopping = Arc::new(AtomicBool::new(false));
        let request = openings.request(());
        let waiter = {
            let (openings, stopping) = (Arc::clone(&openings), Arc::clone(&stopping));
            std::thread::spawn(move || {
                let started = Instant::now();
                (openings.wait(request, &|| stopping.load(Ordering::Acquire)), started.elapsed())
            })
        };
        std::thread::sleep(LOOK / 2);
        stopping.store(true, Ordering::Release);
        let (result, waited) = waiter.join().unwrap();
        assert_eq!(result, Err(NotOpened::Stopped));
        assert!(waited < LOOK * 10, "noticed within a look or so, waited {waited:?}");
    }

    #[test]
    fn a_late_answer_is_the_bridges_or_unknown_as_the_table_was_made() {
        let ours: PortOpenings<u64> = PortOpenings::new(1, LateAnswer::Ours);
        let request = ours.request(7);
        assert_eq!(ours.wait(request, &|| true), Err(NotOpened::Stopped));
        assert_eq!(ours.waiting(request), Some(7), "the reader still learns the controller");
        assert!(ours.answer(request, Err("refused".into())));
        assert_eq!(ours.waiting(request), None, "and then it is gone");

        let unknown: PortOpenings<u64> = PortOpenings::new(1, LateAnswer::Unknown);
        let request = unknown.request(7);
        assert_eq!(unknown.wait(request, &|| true), Err(NotOpened::Stopped));
        assert_eq!(unknown.waiting(request), None);
        assert!(!unknown.answer(request, Err("refused".into())), "the bus reports something nobody asked");
    }

    #[test]
    fn request_ids_start_at_the_first_and_wrap_back_to_it_never_to_zero() {
        let openings: PortOpenings = PortOpenings::new(2, LateAnswer::Unknown);
        assert_eq!((openings.request(()), openings.request(())), (2, 3));
        openings.table().last = u32::MAX - 1;
        assert_eq!(openings.request(()), u32::MAX);
        assert_eq!(openings.request(()), 2, "1 is the caller's own, 0 answers no request");
        let openings: PortOpenings = PortOpenings::new(1, LateAnswer::Ours);
        assert_eq!(openings.request(()), 1);
    }
}
