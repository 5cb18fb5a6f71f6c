//! What this hub holds of one federated channel's events, whatever its
//! role: the newest events it sequenced (the owner) or applied (a relay, a
//! standby), by term and sequence number, and how far it got in each term.
//! Every hub answers history queries from its ledger ([`Ledger::reply`]),
//! so the events an owner published before it died are still there to fetch
//! from the hubs that applied them, and a hub that lacks some learns who got
//! further.
//!
//! Invariants:
//! - Events are kept in the order pushed, which is (term, seq) order: a hub
//!   applies a term's events in `seq` order and never goes back to an older
//!   term. At most `keep` events, the newest.
//! - A reply never skips: it holds consecutive events from the one asked
//!   for, or none when that one is not kept.

use std::collections::{BTreeMap, VecDeque};

use super::event::{Batch, HistoryQuery, HistoryReply, Term};

/// Most events one history reply carries; the querier asks again for the rest.
pub const MAX_REPLY_EVENTS: u64 = 4096;

/// Most bytes of one history reply's events (each with its length): one
/// Zenoh batch, as a publication ([`Batch::MAX_BYTES`]); the first event
/// always goes.
const MAX_REPLY_BYTES: usize = Batch::MAX_BYTES;

/// Terms whose position a ledger remembers, the newest.
const TERMS_KEPT: usize = 8;

/// How far this hub got in one term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Position {
    /// The newest `seq` pushed; 0: none.
    last: u64,
    /// No more events of the term will be pushed (see [`HistoryReply::done`]).
    done: bool,
}

/// One channel's events and positions.
pub struct Ledger {
    events: VecDeque<(Term, u64, Vec<u8>)>,
    keep: usize,
    positions: BTreeMap<Term, Position>,
}

impl Ledger {
    /// A ledger keeping the newest `keep` events (`[federation] history`).
    pub fn new(keep: usize) -> Self {
        Self { events: VecDeque::new(), keep: keep.max(1), positions: BTreeMap::new() }
    }

    /// This hub takes (or sequences) events of `term` from now on: more may come.
    pub fn follow(&mut self, term: Term) {
        self.position(term).done = false;
    }

    /// This hub will push no more events of `term`.
    pub fn settle(&mut self, term: Term) {
        self.position(term).done = true;
    }

    /// Keep event `seq` of `term`, encoded as `bytes`: copied into the
    /// buffer of the oldest event once the ledger is full, so a flood's
    /// events cost no allocation here.
    pub fn push(&mut self, term: Term, seq: u64, bytes: &[u8]) {
        let mut kept = match self.events.len() == self.keep {
            true => self.events.pop_front().map(|(_, _, kept)| kept).unwrap_or_default(),
            false => Vec::new(),
        };
        kept.clear();
        kept.extend_from_slice(bytes);
        self.events.push_back((term, seq, kept));
        let position = self.position(term);
        position.last = position.last.max(seq);
    }

    /// The answer to `query`: this hub's position in the term and the
    /// consecutive events from `from` on it keeps (at most
    /// [`MAX_REPLY_EVENTS`] and [`MAX_REPLY_BYTES`], none past `to`). A term this hub does not
    /// follow is done for it: it will never push any of its events.
    pub fn reply(&self, query: &HistoryQuery) -> HistoryReply {
        let position = self.positions.get(&query.term).copied().unwrap_or(Position { last: 0, done: true });
        let start = self.events.partition_point(|(term, seq, _)| (*term, *seq) < (query.term, query.from));
        let last = query.to.min(query.from.saturating_add(MAX_REPLY_EVENTS - 1));
        let mut bytes_left = MAX_REPLY_BYTES;
        let events = self
            .events
            .iter()
            .skip(start)
            .zip(query.from..=last)
            .take_while(|((term, seq, _), wanted)| *term == query.term && seq == wanted)
            .enumerate()
            .take_while(|(i, ((_, _, bytes), _))| {
                let fits = *i == 0 || 4 + bytes.len() <= bytes_left;
                bytes_left = bytes_left.saturating_sub(4 + bytes.len());
                fits
            })
            .map(|(_, ((_, _, bytes), _))| bytes.clone())
            .collect();
        HistoryReply { last: position.last, done: position.done, events }
    }

    fn position(&mut self, term: Term) -> &mut Position {
        if !self.positions.contains_key(&term) && self.positions.len() == TERMS_KEPT {
            self.positions.pop_first();
        }
        self.positions.entry(term).or_insert(Position { last: 0, done: false })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: Term = Term { epoch: 1, incarnation: 10 };
    const NEW: Term = Term { epoch: 1, incarnation: 20 };

    fn query(term: Term, from: u64, to: u64) -> Vec<u8> {
        Ledger::reply(&ledger(), &HistoryQuery { term, from, to }).events.iter().map(|e| e[0]).collect()
    }

    /// Old term 1..=5 with 4 missing (a gap this hub reported), new term 1..=3.
    fn ledger() -> Ledger {
        let mut ledger = Ledger::new(100);
        for seq in [1, 2, 3, 5] {
            ledger.push(OLD, seq, &[seq as u8]);
        }
        ledger.settle(OLD);
        ledger.follow(NEW);
        for seq in 1..=3 {
            ledger.push(NEW, seq, &[10 + seq as u8]);
        }
        ledger
    }

    #[test]
    fn a_reply_holds_consecutive_events_of_the_term_asked_for() {
        assert_eq!(query(OLD, 2, 100), [2, 3], "stops at the hole, never skips to 5");
        assert_eq!(query(OLD, 4, 100), [] as [u8; 0], "4 is not kept");
        assert_eq!(query(OLD, 5, 5), [5]);
        assert_eq!(query(NEW, 2, 2), [12]);
        assert_eq!(query(NEW, 1, 100), [11, 12, 13], "the new term's, not the old one's");
        assert_eq!(query(NEW, 4, 100), [] as [u8; 0]);
    }

    #[test]
    fn a_reply_says_how_far_the_hub_got_and_whether_more_will_come() {
        let ledger = ledger();
        let position = |term| {
            let reply = ledger.reply(&HistoryQuery { term, from: 1, to: 1 });
            (reply.last, reply.done)
        };
        assert_eq!(position(OLD), (5, true));
        assert_eq!(position(NEW), (3, false));
        assert_eq!(position(Term { epoch: 7, incarnation: 1 }), (0, true), "a term it never followed");
    }

    #[test]
    fn a_reply_of_large_events_fits_one_zenoh_batch_and_the_rest_comes_next() {
        let mut ledger = Ledger::new(100);
        for seq in 1..=100 {
            ledger.push(OLD, seq, &[seq as u8; 2_373]);
        }
        let first = ledger.reply(&HistoryQuery { term: OLD, from: 1, to: 100 });
        let mut encoded = Vec::new();
        first.encode(&mut encoded);
        assert!(encoded.len() <= Batch::MAX_BYTES + 9, "{} bytes in one reply", encoded.len());
        let got = first.events.len() as u64;
        assert_eq!(got, (MAX_REPLY_BYTES / (4 + 2_373)) as u64, "as many as fit, not fewer");
        let next = ledger.reply(&HistoryQuery { term: OLD, from: got + 1, to: 100 });
        assert_eq!(next.events[0][0], got as u8 + 1, "asked again, the reply goes on where the first stopped");
    }

    #[test]
    fn an_event_kept_in_the_oldest_events_buffer_holds_its_own_bytes_only() {
        let mut ledger = Ledger::new(2);
        ledger.push(OLD, 1, &[1; 64]);
        ledger.push(OLD, 2, &[2; 8]);
        // Full: event 3 goes into event 1's buffer, longer than it.
        ledger.push(OLD, 3, &[3]);
        let reply = ledger.reply(&HistoryQuery { term: OLD, from: 1, to: 3 });
        assert_eq!(reply.events, [] as [Vec<u8>; 0], "1 is not kept any more");
        let reply = ledger.reply(&HistoryQuery { term: OLD, from: 2, to: 3 });
        assert_eq!(reply.events, [vec![2; 8], vec![3]]);
    }

    #[test]
    fn only_the_newest_events_and_terms_are_kept() {
        let mut ledger = Ledger::new(3);
        for seq in 1..=5 {
            ledger.push(OLD, seq, &[seq as u8]);
        }
        let reply = |from| ledger.reply(&HistoryQuery { term: OLD, from, to: 9 }).events.len();
        assert_eq!((reply(2), reply(3)), (0, 3));
        for incarnation in 0..20 {
            ledger.follow(Term { epoch: 2, incarnation });
        }
        assert_eq!(ledger.positions.len(), TERMS_KEPT);
        let old = ledger.reply(&HistoryQuery { term: OLD, from: 9, to: 9 });
        assert_eq!((old.last, old.done), (0, true), "the oldest terms' positions are forgotten");
    }
}
