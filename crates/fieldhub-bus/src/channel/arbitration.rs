//! Arbitration: which port's frame a channel carries next. This finds each
//! port's eligible frame (its oldest, arrived, not waiting out a failed
//! attempt, bus-off or its rate limit) and lets the channel's access rule
//! ([`super::arbiter`]) choose; `can`, the default, is ISO 11898 precedence
//! ([`arbitration_key`]), oldest first on ties.

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::Frame;

use super::arbiter::{Arbiter, Candidate};
use super::{earliest, Channel};
use crate::confinement::ErrorState;

/// The arbitration field of `frame` as a number: lower wins. Bit order is the
/// order on the wire — base identifier, then SRR/RTR, IDE, the 18 identifier
/// extension bits and RTR — with dominant = 0, so a base-format frame beats
/// an extended one with the same base bits (its IDE is dominant) and a data
/// frame beats a remote frame with the same identifier (RTR dominant). CAN FD
/// frames send RRS (dominant) where classic frames send RTR, so a classic and
/// an FD frame with the same identifier tie: they first differ at FDF/r0,
/// after arbitration — the older one goes first.
///
/// A CAN XL frame's arbitration field is a base-format one: SOF, its 11-bit
/// priority, then RRS (dominant unless the frame has `XL_RRS`), IDE
/// dominant, FDF and XLF recessive (Kvaser's CAN XL course, the sources in
/// `fieldhub_proto::bits`' `xl` module). So its priority ranks as a base
/// identifier and its RRS as RTR: an XL frame beats an extended frame with
/// the same base bits, and ties a classic data frame or an FD frame with the
/// same identifier — they first differ at FDF or XLF, in the control field
/// after arbitration, where a real bus signals a bit error (one identifier,
/// one sender); the older one goes first.
///
/// A raw frame's key is its id: under `arbitration = "can"` the lower id
/// goes first. A `raw` channel carries raw frames only, so the two key
/// spaces never meet.
#[inline]
pub fn arbitration_key(frame: &Frame) -> u32 {
    if frame.is_xl() {
        return u32::from(frame.priority()) << 21 | u32::from(frame.is_rrs()) << 20;
    }
    if frame.is_raw() {
        return frame.id();
    }
    let rtr = u32::from(frame.is_remote());
    if frame.is_extended() {
        let base = frame.id() >> 18;
        let extension = frame.id() & 0x3_FFFF;
        (base << 21) | (1 << 20) | (1 << 19) | (extension << 1) | rtr
    } else {
        (frame.id() << 21) | (rtr << 20)
    }
}

impl Channel {
    /// The port whose oldest frame wins arbitration at bus time `at` among
    /// frames that had arrived by then, and otherwise the earliest time a
    /// frame becomes eligible or the channel's rule lets one go.
    pub(super) fn arbitrate(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        let mut wake_at: Option<u64> = None;
        let rates = self.config.rates();
        self.arbiter.open(at, rates);
        let mut recovered: Vec<usize> = Vec::new();
        for (index, member) in self.members.indexed_mut() {
            if !member.plugged {
                // A node without a cable cannot send: its frames are lost.
                member.discard_pending(DropReason::Unplugged);
                continue;
            }
            if let Some(until) = member.errors.bus_off_until {
                if at < until {
                    wake_at = earliest(wake_at, Some(until).filter(|&u| u != u64::MAX));
                    continue;
                }
                member.errors.recover();
                recovered.push(index);
            }
            if at < member.retry_at {
                wake_at = earliest(wake_at, Some(member.retry_at));
                continue;
            }
            self.arbiter.eligible(index, member.port_id);
            match member.tx.offer(at) {
                Ok(Some(pending)) if pending.arrived_ns > at => wake_at = earliest(wake_at, Some(pending.arrived_ns)),
                Ok(Some(pending)) => self.arbiter.consider(Candidate { index, port: member.port_id, pending }),
                Ok(None) => {}
                Err(ready_at) => wake_at = earliest(wake_at, Some(ready_at)),
            }
        }
        // Recovery is rare; the Vec above does not allocate until it happens.
        for index in recovered {
            self.report_state_change(index, ErrorState::BusOff, at);
        }
        let (winner, rule_wake) = self.arbiter.decide(at);
        (winner, earliest(wake_at, rule_wake))
    }
}
