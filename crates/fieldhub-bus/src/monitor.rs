//! Monitors: a tap on channels for the web monitor's live trace.
//!
//! A monitor is a bus analyzer on the wire, not a node: it sees every frame
//! put on its channels (all segments of a cut channel, error frames
//! included) and never transmits, acknowledges or holds anything. The bus
//! thread offers each transmitted frame to the [`MonitorTap`] (as it does to
//! recordings); the control server's WebSocket task drains the
//! [`MonitorFeed`] at its own pace.
//!
//! Invariants:
//! - The bus never waits for a monitor: the queue is bounded and never
//!   lossless. A full queue drops the frame and counts it in
//!   [`MonitorFeed::dropped`], which the page shows as frames not drawn.
//! - Offering allocates nothing: frames are copied into a preallocated
//!   bounded queue.
//! - Dropping the feed (the WebSocket closed) closes the tap: the bus
//!   removes it at its next offer or control request.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use fieldhub_proto::Frame;

use crate::channel::Transmitted;
use crate::port_id::PortId;

/// Frames one monitor's queue holds before the bus drops for it: a few
/// batches' worth at 200,000 frames/s, well under a megabyte and a half.
pub const MONITOR_QUEUE: usize = 16 * 1024;

/// One frame as a monitor sees it.
#[derive(Clone, Debug)]
pub struct Tapped {
    pub channel: u16,
    /// The sending port; `None` for the bus's own error frames.
    pub sender: Option<PortId>,
    pub timestamp_ns: u64,
    pub frame: Frame,
}

/// What the tap and its feed share.
#[derive(Debug, Default)]
struct Shared {
    /// Frames the bus dropped because the queue was full.
    dropped: AtomicU64,
    /// Set when the feed is dropped.
    closed: AtomicBool,
}

/// The bus's end: offered every frame of its channels.
#[derive(Debug, Clone)]
pub struct MonitorTap {
    queue: Sender<Tapped>,
    shared: Arc<Shared>,
    /// Channel ids tapped; filled in by the bus when it accepts the tap.
    channels: Vec<u16>,
}

/// The consumer's end: what the WebSocket task drains.
#[derive(Debug)]
pub struct MonitorFeed {
    queue: Receiver<Tapped>,
    shared: Arc<Shared>,
}

/// A new tap and its feed.
pub fn monitor() -> (MonitorTap, MonitorFeed) {
    let (queue, incoming) = crossbeam_channel::bounded(MONITOR_QUEUE);
    let shared = Arc::new(Shared::default());
    (MonitorTap { queue, shared: Arc::clone(&shared), channels: Vec::new() }, MonitorFeed { queue: incoming, shared })
}

impl MonitorTap {
    /// Tap these channels (ids).
    pub fn set_channels(&mut self, channels: Vec<u16>) {
        self.channels = channels;
    }

    /// Whether the feed is gone: the bus should drop this tap.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// Hand over a frame put on a channel, if this tap covers it; a full
    /// queue drops and counts it.
    pub fn offer(&self, sent: &Transmitted) {
        if !self.channels.contains(&sent.channel) {
            return;
        }
        let tapped = Tapped {
            channel: sent.channel,
            sender: sent.sender,
            timestamp_ns: sent.timestamp_ns,
            frame: sent.frame.clone(),
        };
        if let Err(TrySendError::Full(_)) = self.queue.try_send(tapped) {
            self.shared.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl MonitorFeed {
    /// The next waiting frame, if any; never waits.
    pub fn try_take(&self) -> Option<Tapped> {
        self.queue.try_recv().ok()
    }

    /// Frames the bus dropped for this monitor so far.
    pub fn dropped(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for MonitorFeed {
    fn drop(&mut self) {
        // SYNC POINT with `is_closed`'s Acquire load.
        self.shared.closed.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(channel: u16, timestamp_ns: u64, frame: Frame) -> Transmitted {
        Transmitted { channel, sender: PortId::client(7), frame, hops: 0, timestamp_ns }
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_waiting() {
        let (mut tap, feed) = monitor();
        tap.set_channels(vec![0]);
        let frame = Frame::can(0x123, false, &[1, 2]).unwrap();
        for i in 0..MONITOR_QUEUE + 10 {
            tap.offer(&sent(0, i as u64, frame.clone()));
        }
        assert_eq!(feed.dropped(), 10);
        assert_eq!(feed.try_take().map(|t| t.timestamp_ns), Some(0), "the oldest frames are kept, in order");
    }

    #[test]
    fn only_tapped_channels_are_offered() {
        let (mut tap, feed) = monitor();
        tap.set_channels(vec![1]);
        let frame = Frame::can(0x1, false, &[]).unwrap();
        tap.offer(&sent(0, 5, frame.clone()));
        tap.offer(&sent(1, 6, frame));
        let got = feed.try_take().unwrap();
        assert_eq!((got.channel, got.timestamp_ns, got.sender), (1, 6, PortId::client(7)));
        assert!(feed.try_take().is_none());
    }

    #[test]
    fn dropping_the_feed_closes_the_tap() {
        let (tap, feed) = monitor();
        assert!(!tap.is_closed());
        drop(feed);
        assert!(tap.is_closed());
    }
}
