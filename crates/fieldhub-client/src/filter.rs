//! Acceptance filters, as SocketCAN's `struct can_filter`: a frame passes a
//! filter when `frame_id & can_mask == can_id & can_mask`, where `frame_id`
//! is [`Frame::socketcan_id`] (the id with `CAN_EFF_FLAG` / `CAN_RTR_FLAG`).
//! A filter whose `can_id` carries [`CAN_INV_FILTER`] is inverted: it passes
//! the frames the same filter without that bit would not (the kernel's
//! `can_raw` does the same; the bit itself is never compared). A port with
//! filters receives a frame if any filter passes it. Error frames bypass
//! filters; whoever wants them decides for itself.

use fieldhub_proto::Frame;

/// Set in `can_id` to invert a filter (SocketCAN's `CAN_INV_FILTER`; the
/// same bit as `CAN_ERR_FLAG`, which a filter never needs to compare).
pub const CAN_INV_FILTER: u32 = 0x2000_0000;

/// One acceptance filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter {
    pub can_id: u32,
    pub can_mask: u32,
}

impl Filter {
    /// Whether `frame` passes this filter.
    pub fn accepts(&self, frame: &Frame) -> bool {
        let mask = self.can_mask & !CAN_INV_FILTER;
        let matches = frame.socketcan_id() & mask == self.can_id & mask;
        matches != self.is_inverted()
    }

    /// Whether this filter passes what it does not match.
    pub fn is_inverted(&self) -> bool {
        self.can_id & CAN_INV_FILTER != 0
    }
}

/// Whether `frame` passes a port's filter set (`None`: no filtering).
pub fn passes(filters: Option<&[Filter]>, frame: &Frame) -> bool {
    match filters {
        None => true,
        Some(_) if frame.is_error() => true,
        Some(filters) => filters.iter().any(|f| f.accepts(frame)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_proto::frame::{CAN_EFF_FLAG, CAN_RTR_FLAG};

    #[test]
    fn mask_selects_the_compared_bits() {
        let f = Filter { can_id: 0x120, can_mask: 0x7F0 };
        assert!(f.accepts(&Frame::can(0x123, false, &[]).unwrap()));
        assert!(!f.accepts(&Frame::can(0x133, false, &[]).unwrap()));
    }

    #[test]
    fn eff_flag_in_the_mask_separates_standard_from_extended() {
        let standard_only = Filter { can_id: 0x123, can_mask: 0x7FF | CAN_EFF_FLAG };
        assert!(standard_only.accepts(&Frame::can(0x123, false, &[]).unwrap()));
        assert!(!standard_only.accepts(&Frame::can(0x123, true, &[]).unwrap()));
        let remote_only = Filter { can_id: CAN_RTR_FLAG, can_mask: CAN_RTR_FLAG };
        assert!(remote_only.accepts(&Frame::remote(1, false, 0).unwrap()));
        assert!(!remote_only.accepts(&Frame::can(1, false, &[]).unwrap()));
    }

    #[test]
    fn an_inverted_filter_passes_what_it_does_not_match() {
        let all_but_0x123 = Filter { can_id: 0x123 | CAN_INV_FILTER, can_mask: 0x7FF | CAN_EFF_FLAG };
        assert!(!all_but_0x123.accepts(&Frame::can(0x123, false, &[]).unwrap()));
        assert!(all_but_0x123.accepts(&Frame::can(0x124, false, &[]).unwrap()));
        assert!(all_but_0x123.accepts(&Frame::can(0x123, true, &[]).unwrap()), "extended 0x123 differs in EFF");
        // The inversion bit in the mask is not compared (as in can_raw).
        let masked = Filter { can_id: 0x100 | CAN_INV_FILTER, can_mask: 0x700 | CAN_INV_FILTER };
        assert!(!masked.accepts(&Frame::can(0x1AB, false, &[]).unwrap()));
        assert!(masked.accepts(&Frame::can(0x2AB, false, &[]).unwrap()));
        // Any filter of a set passes: an inverted one next to a plain one.
        let set = [all_but_0x123, Filter { can_id: 0x123, can_mask: 0x7FF }];
        assert!(passes(Some(&set), &Frame::can(0x123, false, &[]).unwrap()));
    }

    #[test]
    fn empty_set_rejects_all_but_error_frames() {
        assert!(!passes(Some(&[]), &Frame::can(1, false, &[]).unwrap()));
        assert!(passes(Some(&[]), &Frame::error(4, [0; 8]).unwrap()));
        assert!(passes(None, &Frame::can(1, false, &[]).unwrap()));
    }
}
