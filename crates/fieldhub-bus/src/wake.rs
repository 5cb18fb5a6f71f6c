//! Wake filters of a participant stepping ahead (`STEP_AHEAD`,
//! `spec/protocol.md` 3.11a, 6.8): set on each of its ports while it stands
//! ahead, offered every frame delivered to the port, and read by the bus
//! after each serve of the advance loop.
//!
//! A frame wakes when it is offered to the port — before the receive queue
//! takes it — so whether a participant wakes depends on bus time and names
//! only, never on how fast its client reads. Echoes of its own frames never
//! wake it: it knows what it sent.

use fieldhub_proto::wire::WakeFilter;
use fieldhub_proto::Frame;

/// A port's watch for frames that end its participant's step early.
#[derive(Clone, Debug, Default)]
pub struct WakeWatch {
    /// Empty: any frame wakes.
    filters: Vec<WakeFilter>,
    /// A matching frame was delivered since the bus last looked.
    woke: bool,
}

impl WakeWatch {
    /// A watch for frames matching `filters` (none: every frame).
    pub fn new(filters: Vec<WakeFilter>) -> Self {
        Self { filters, woke: false }
    }

    /// A frame is delivered to the port.
    pub fn offer(&mut self, frame: &Frame) {
        if self.woke || frame.is_echo() {
            return;
        }
        let id = frame.socketcan_id();
        self.woke = self.filters.is_empty() || self.filters.iter().any(|f| f.matches(id));
    }

    /// Whether a matching frame was delivered since the last call; clears it.
    pub fn take_woke(&mut self) -> bool {
        std::mem::take(&mut self.woke)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_in_socketcan_form_wakes_on_its_identifier_only_and_never_on_an_echo() {
        let mut watch = WakeWatch::new(vec![WakeFilter { can_id: 0x7E0, mask: 0x7FF }]);
        watch.offer(&Frame::can(0x7E8, false, &[1]).unwrap());
        assert!(!watch.take_woke());
        watch.offer(&Frame::can(0x7E0, false, &[1]).unwrap().with_echo(true));
        assert!(!watch.take_woke());
        watch.offer(&Frame::can(0x7E0, false, &[1]).unwrap());
        assert!(watch.take_woke());
        assert!(!watch.take_woke(), "taken once");
        let mut any = WakeWatch::new(Vec::new());
        any.offer(&Frame::can(0x1, true, &[]).unwrap());
        assert!(any.take_woke());
    }
}
