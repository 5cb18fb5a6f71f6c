//! Arbitration: which port's frame a channel carries next (ISO 11898
//! precedence over each port's oldest frame, oldest first on ties).

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::Frame;

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
pub fn arbitration_key(frame: &Frame) -> u32 {
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
    /// frame becomes eligible.
    pub(super) fn arbitrate(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        let mut winner: Option<(u32, u64, usize)> = None;
        let mut wake_at: Option<u64> = None;
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
            match member.tx.offer(at) {
                Ok(Some(pending)) if pending.arrived_ns > at => wake_at = earliest(wake_at, Some(pending.arrived_ns)),
                Ok(Some(pending)) => {
                    let rank = (arbitration_key(&pending.frame), pending.arrival, index);
                    if winner.is_none_or(|best| rank < best) {
                        winner = Some(rank);
                    }
                }
                Ok(None) => {}
                Err(ready_at) => wake_at = earliest(wake_at, Some(ready_at)),
            }
        }
        // Recovery is rare; the Vec above does not allocate until it happens.
        for index in recovered {
            self.report_state_change(index, ErrorState::BusOff, at);
        }
        (winner.map(|(_, _, index)| index), wake_at)
    }
}
