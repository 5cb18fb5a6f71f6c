//! BCM mode's receive side: `subscribe`, `filter` and `muxfilter` decide
//! which of the channel's frames a session sees, as the Linux broadcast
//! manager's `RX_SETUP` does, throttled on bus time (the frames' own
//! timestamps), so a throttle holds in virtual time too.
//!
//! Invariants:
//! - One entry per CAN identifier: a new `subscribe`/`filter` for an
//!   identifier replaces the old one (the BCM keeps one `RX_SETUP` per id);
//!   `unsubscribe` removes it.
//! - A filter passes a frame when its content under the mask differs from
//!   the last frame it passed (the first always passes), or its length
//!   changed; a subscription passes every frame. A throttle passes at most
//!   one frame per interval and drops the others (socketcand's BCM delivers
//!   the latest change after the interval; a hub session never holds a
//!   frame back).

use fieldhub_proto::Frame;

use super::protocol::CanId;

/// What an entry passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Every frame (`subscribe`).
    All,
    /// Frames whose masked bytes changed (`filter`).
    Changed(Vec<u8>),
    /// Frames whose masked bytes changed, the mask chosen by the
    /// multiplexer value under the first tuple (`muxfilter`).
    MuxChanged(Vec<[u8; 8]>),
}

struct Entry {
    id: CanId,
    content: Content,
    interval_ns: u64,
    /// Bus time of the frame passed last.
    last_passed_ns: Option<u64>,
    /// Content of the frame passed last.
    last: Option<(usize, [u8; 8])>,
}

/// One session's receive entries.
#[derive(Default)]
pub struct Subscriptions {
    entries: Vec<Entry>,
}

impl Subscriptions {
    /// Add or replace the entry for `id`.
    pub fn set(&mut self, id: CanId, content: Content, interval_us: u64) {
        self.remove(id);
        let interval_ns = interval_us.saturating_mul(1_000);
        self.entries.push(Entry { id, content, interval_ns, last_passed_ns: None, last: None });
    }

    /// Remove the entry for `id`; `false` when there was none.
    pub fn remove(&mut self, id: CanId) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.id != id);
        self.entries.len() != before
    }

    /// Whether the session is sent `frame`, put on the bus at `timestamp_ns`.
    pub fn pass(&mut self, frame: &Frame, timestamp_ns: u64) -> bool {
        let Some(entry) = self.entries.iter_mut().find(|e| e.id.matches(frame)) else { return false };
        if let Some(last) = entry.last_passed_ns {
            if timestamp_ns.saturating_sub(last) < entry.interval_ns {
                return false;
            }
        }
        let mut data = [0u8; 8];
        let len = frame.len().min(8);
        data[..len].copy_from_slice(&frame.data()[..len]);
        let changed = match &entry.content {
            Content::All => true,
            Content::Changed(mask) => changed(entry.last, len, &data, mask),
            Content::MuxChanged(tuples) => {
                let mux = &tuples[0];
                let value: Vec<u8> = data.iter().zip(mux).map(|(d, m)| d & m).collect();
                // The tuple whose multiplexer bytes match; its other bytes
                // are the content mask.
                match tuples[1..].iter().find(|t| t.iter().zip(mux).map(|(t, m)| t & m).eq(value.iter().copied())) {
                    Some(tuple) => {
                        let mask: Vec<u8> = tuple.iter().zip(mux).map(|(t, m)| t & !m).collect();
                        // A different multiplexer value is a change in itself.
                        let same_mux = entry.last.is_some_and(|(_, last)| {
                            last.iter().zip(mux).map(|(l, m)| l & m).eq(value.iter().copied())
                        });
                        !same_mux || changed(entry.last, len, &data, &mask)
                    }
                    None => false,
                }
            }
        };
        if changed {
            entry.last_passed_ns = Some(timestamp_ns);
            entry.last = Some((len, data));
        }
        changed
    }
}

fn changed(last: Option<(usize, [u8; 8])>, len: usize, data: &[u8; 8], mask: &[u8]) -> bool {
    let Some((last_len, last)) = last else { return true };
    last_len != len || mask.iter().zip(data.iter().zip(&last)).any(|(m, (d, l))| (d ^ l) & m != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: CanId = CanId { id: 0x123, extended: false };

    fn frame(data: &[u8]) -> Frame {
        Frame::can(0x123, false, data).unwrap()
    }

    #[test]
    fn a_subscription_passes_its_identifier_only() {
        let mut subs = Subscriptions::default();
        assert!(!subs.pass(&frame(&[1]), 0), "nothing subscribed");
        subs.set(ID, Content::All, 0);
        assert!(subs.pass(&frame(&[1]), 0));
        assert!(subs.pass(&frame(&[1]), 1), "unchanged content passes a subscription");
        assert!(!subs.pass(&Frame::can(0x124, false, &[1]).unwrap(), 2));
        assert!(!subs.pass(&Frame::can(0x123, true, &[1]).unwrap(), 2), "extended 0x123 is another identifier");
        assert!(subs.remove(ID));
        assert!(!subs.pass(&frame(&[1]), 3));
    }

    #[test]
    fn a_filter_passes_changes_under_its_mask() {
        let mut subs = Subscriptions::default();
        subs.set(ID, Content::Changed(vec![0xFF]), 0);
        assert!(subs.pass(&frame(&[1, 9]), 0), "the first frame passes");
        assert!(!subs.pass(&frame(&[1, 8]), 1), "byte 1 is not under the mask");
        assert!(subs.pass(&frame(&[2, 8]), 2));
        assert!(subs.pass(&frame(&[2]), 3), "a new length is a change");
    }

    #[test]
    fn a_throttle_passes_one_frame_per_interval_of_bus_time() {
        let mut subs = Subscriptions::default();
        subs.set(ID, Content::All, 1_000);
        assert!(subs.pass(&frame(&[]), 10_000_000));
        assert!(!subs.pass(&frame(&[]), 10_999_999));
        assert!(subs.pass(&frame(&[]), 11_000_000));
    }

    #[test]
    fn a_muxfilter_masks_by_multiplexer_value() {
        let mut subs = Subscriptions::default();
        let tuples = vec![[0xFF, 0, 0, 0, 0, 0, 0, 0], [0x33, 0xFF, 0, 0, 0, 0, 0, 0]];
        subs.set(ID, Content::MuxChanged(tuples), 0);
        assert!(!subs.pass(&frame(&[0x56, 1]), 0), "no tuple for multiplexer 0x56");
        assert!(subs.pass(&frame(&[0x33, 1, 0]), 1));
        assert!(!subs.pass(&frame(&[0x33, 1, 7]), 2), "byte 2 is not under 0x33's mask");
        assert!(subs.pass(&frame(&[0x33, 2, 7]), 3));
    }
}
