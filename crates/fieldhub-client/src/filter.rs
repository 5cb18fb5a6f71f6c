//! Acceptance filters, as SocketCAN's `struct can_filter`: a frame passes a
//! filter when `frame_id & can_mask == can_id & can_mask`, where `frame_id`
//! is [`Frame::socketcan_id`] (the id with `CAN_EFF_FLAG` / `CAN_RTR_FLAG`).
//! A port with filters receives a frame if any filter passes it. Error frames
//! bypass filters; whoever wants them decides for itself.

use fieldhub_proto::Frame;

/// One acceptance filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Filter {
    pub can_id: u32,
    pub can_mask: u32,
}

impl Filter {
    /// Whether `frame` passes this filter.
    pub fn accepts(&self, frame: &Frame) -> bool {
        frame.socketcan_id() & self.can_mask == self.can_id & self.can_mask
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
    fn empty_set_rejects_all_but_error_frames() {
        assert!(!passes(Some(&[]), &Frame::can(1, false, &[]).unwrap()));
        assert!(passes(Some(&[]), &Frame::error(4, [0; 8]).unwrap()));
        assert!(passes(None, &Frame::can(1, false, &[]).unwrap()));
    }
}
