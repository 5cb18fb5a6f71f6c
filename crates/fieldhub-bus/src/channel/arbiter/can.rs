//! `can`: ISO 11898 priority arbitration. Every port's oldest eligible frame
//! competes and the lowest arbitration field wins ([`arbitration_key`]);
//! ties between identical fields go to the frame that arrived first, then to
//! the member slot. Stateless between decisions: the bus is free to the
//! winner as soon as it is idle.

use fieldhub_proto::Frame;

use super::{Arbiter, Candidate, Rates};
use crate::channel::arbitration_key;

/// The rule's running best of one decision: (key, arrival, member slot).
#[derive(Default)]
pub struct PriorityArbiter {
    best: Option<(u32, u64, usize)>,
}

impl Arbiter for PriorityArbiter {
    #[inline]
    fn open(&mut self, _at: u64, _rates: Rates) {
        self.best = None;
    }

    #[inline]
    fn consider(&mut self, candidate: Candidate<'_>) {
        let rank = (arbitration_key(&candidate.pending.frame), candidate.pending.arrival, candidate.index);
        if self.best.is_none_or(|best| rank < best) {
            self.best = Some(rank);
        }
    }

    #[inline]
    fn decide(&mut self, _at: u64) -> (Option<usize>, Option<u64>) {
        (self.best.take().map(|(_, _, index)| index), None)
    }

    #[inline]
    fn started(&mut self, _at: u64, _frame: &Frame) {}
}
