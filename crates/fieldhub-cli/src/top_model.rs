//! The statistics of `fieldhub top`'s terminal view, without a terminal:
//! per identifier its count, rate, period and the period's jitter, and the
//! data with the bytes that changed since the last refresh (as cansniffer
//! marks them); per channel the error frames seen.
//!
//! Invariants: a frame is counted once, under its channel and its
//! identifier as SocketCAN writes it (flags included, so `123` and `123R`
//! are two rows); periods and jitter come from the hub's timestamps (bus
//! time), never from when top read the frame; rates and changed bytes change
//! only at [`Sniffer::refresh`], so a redraw between two refreshes (a key, a
//! resize) shows the same figures. Recording a frame allocates nothing once
//! its identifier has a row with room for its data.

use std::collections::BTreeMap;
use std::time::Duration;

use fieldhub_proto::Frame;

/// The order of the identifiers, chosen by a key in the terminal view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SortBy {
    /// Most frequent first.
    Rate,
    /// Channel, then identifier.
    Id,
    /// Most frames first.
    #[value(alias = "frames")]
    Count,
    /// Shortest period first; identifiers seen once last.
    Period,
}

impl SortBy {
    /// The key that chooses this order, and its name in the footer.
    pub const KEYS: [(char, SortBy, &'static str); 4] = [
        ('i', SortBy::Id, "id"),
        ('c', SortBy::Count, "count"),
        ('r', SortBy::Rate, "rate"),
        ('p', SortBy::Period, "period"),
    ];

    /// The order a key chooses (`None`: not a sort key).
    pub fn of_key(key: char) -> Option<SortBy> {
        Self::KEYS.iter().find(|(k, _, _)| *k == key).map(|&(_, sort, _)| sort)
    }
}

/// Running mean and variance of a row's intervals (Welford's method: no
/// history kept, exact for every count).
#[derive(Clone, Copy, Debug, Default)]
struct Intervals {
    n: u64,
    mean_ns: f64,
    m2: f64,
}

impl Intervals {
    fn add(&mut self, interval_ns: f64) {
        self.n += 1;
        let delta = interval_ns - self.mean_ns;
        self.mean_ns += delta / self.n as f64;
        self.m2 += delta * (interval_ns - self.mean_ns);
    }
}

/// One identifier on one channel.
#[derive(Debug)]
pub struct IdRow {
    /// The channel's index in the list top shows.
    pub channel: usize,
    /// The identifier as SocketCAN writes it (`crate::stats::identifier`).
    pub id: u32,
    /// Frames seen since top started.
    pub count: u64,
    count_at_refresh: u64,
    /// Frames per second between the last two refreshes.
    pub rate_hz: f64,
    last_ns: Option<u64>,
    intervals: Intervals,
    /// The latest frame's data.
    latest: Vec<u8>,
    /// The data as of the last refresh, and which of its bytes changed
    /// since the refresh before (a row's first refresh marks none).
    shown: Vec<u8>,
    changed: Vec<bool>,
    refreshed: bool,
}

impl IdRow {
    fn new(channel: usize, id: u32) -> Self {
        Self {
            channel,
            id,
            count: 0,
            count_at_refresh: 0,
            rate_hz: 0.0,
            last_ns: None,
            intervals: Intervals::default(),
            latest: Vec::with_capacity(8),
            shown: Vec::new(),
            changed: Vec::new(),
            refreshed: false,
        }
    }

    /// The mean time between two frames, in milliseconds (`None` before a
    /// second frame).
    pub fn period_ms(&self) -> Option<f64> {
        (self.intervals.n > 0).then(|| self.intervals.mean_ns / 1e6)
    }

    /// The standard deviation of the time between two frames, in
    /// milliseconds: 0 for a strictly cyclic identifier.
    pub fn jitter_ms(&self) -> Option<f64> {
        (self.intervals.n > 0).then(|| (self.intervals.m2 / self.intervals.n as f64).max(0.0).sqrt() / 1e6)
    }

    /// The data as of the last refresh, each byte with whether it changed
    /// since the refresh before.
    pub fn data(&self) -> impl Iterator<Item = (u8, bool)> + '_ {
        self.shown.iter().copied().zip(self.changed.iter().copied())
    }

    fn refresh(&mut self, seconds: f64) {
        self.rate_hz = (self.count - self.count_at_refresh) as f64 / seconds;
        self.count_at_refresh = self.count;
        self.changed.clear();
        self.changed
            .extend(self.latest.iter().enumerate().map(|(i, b)| self.refreshed && self.shown.get(i) != Some(b)));
        self.shown.clear();
        self.shown.extend_from_slice(&self.latest);
        self.refreshed = true;
    }
}

/// Everything top counted from the frames it received.
#[derive(Debug)]
pub struct Sniffer {
    rows: BTreeMap<(usize, u32), IdRow>,
    error_frames: Vec<u64>,
}

impl Sniffer {
    /// Counters for `channels` channels, none seen yet.
    pub fn new(channels: usize) -> Self {
        Self { rows: BTreeMap::new(), error_frames: vec![0; channels] }
    }

    /// Count a frame received on channel `channel` that the hub put on the
    /// bus at `timestamp_ns`. Error frames count as the channel's, not as
    /// an identifier (as the hub's identifier list leaves them out).
    pub fn record(&mut self, channel: usize, frame: &Frame, timestamp_ns: u64) {
        if frame.is_error() {
            if let Some(n) = self.error_frames.get_mut(channel) {
                *n += 1;
            }
            return;
        }
        let id = frame.socketcan_id();
        let row = self.rows.entry((channel, id)).or_insert_with(|| IdRow::new(channel, id));
        row.count += 1;
        if let Some(last) = row.last_ns {
            row.intervals.add(timestamp_ns.saturating_sub(last) as f64);
        }
        row.last_ns = Some(timestamp_ns);
        row.latest.clear();
        row.latest.extend_from_slice(frame.data());
    }

    /// A refresh, `elapsed` after the one before (or after the start): the
    /// rates over that time, the data shown and its changed bytes.
    pub fn refresh(&mut self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64().max(1e-9);
        for row in self.rows.values_mut() {
            row.refresh(seconds);
        }
    }

    /// Error frames seen on channel `channel`.
    pub fn error_frames(&self, channel: usize) -> u64 {
        self.error_frames.get(channel).copied().unwrap_or(0)
    }

    /// Every identifier in the order `sort`; ties in channel and identifier order.
    pub fn rows(&self, sort: SortBy) -> Vec<&IdRow> {
        let mut rows: Vec<&IdRow> = self.rows.values().collect();
        match sort {
            SortBy::Id => {}
            SortBy::Count => rows.sort_by_key(|row| std::cmp::Reverse(row.count)),
            SortBy::Rate => rows.sort_by(|a, b| b.rate_hz.total_cmp(&a.rate_hz)),
            SortBy::Period => rows.sort_by(|a, b| match (a.period_ms(), b.period_ms()) {
                (Some(a), Some(b)) => a.total_cmp(&b),
                (a, b) => a.is_none().cmp(&b.is_none()),
            }),
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn frame(id: u32, data: &[u8]) -> Frame {
        Frame::can(id, false, data).unwrap()
    }

    #[test]
    fn a_cyclic_identifier_has_its_period_and_no_jitter() {
        let mut sniffer = Sniffer::new(1);
        for k in 0..5 {
            sniffer.record(0, &frame(0x100, &[k]), 1_000 * MS + k as u64 * 10 * MS);
        }
        let rows = sniffer.rows(SortBy::Id);
        assert_eq!(rows[0].count, 5);
        assert!((rows[0].period_ms().unwrap() - 10.0).abs() < 1e-9);
        assert!(rows[0].jitter_ms().unwrap().abs() < 1e-9);
    }

    #[test]
    fn jitter_is_the_standard_deviation_of_the_intervals() {
        let mut sniffer = Sniffer::new(1);
        // Intervals 8, 12, 8, 12 ms: mean 10, deviation 2.
        for at in [0, 8, 20, 28, 40] {
            sniffer.record(0, &frame(0x100, &[]), at * MS);
        }
        let row = &sniffer.rows(SortBy::Id)[0];
        assert!((row.period_ms().unwrap() - 10.0).abs() < 1e-9);
        assert!((row.jitter_ms().unwrap() - 2.0).abs() < 1e-9);
    }

    #[test]
    fn an_identifier_seen_once_has_no_period_yet() {
        let mut sniffer = Sniffer::new(1);
        sniffer.record(0, &frame(0x100, &[1]), 5 * MS);
        let row = &sniffer.rows(SortBy::Id)[0];
        assert_eq!((row.period_ms(), row.jitter_ms()), (None, None));
    }

    #[test]
    fn changed_bytes_are_those_that_differ_from_the_last_refresh() {
        let mut sniffer = Sniffer::new(1);
        let shown = |s: &Sniffer| s.rows(SortBy::Id)[0].data().collect::<Vec<_>>();
        sniffer.record(0, &frame(0x100, &[1, 2, 3]), 0);
        sniffer.refresh(Duration::from_secs(1));
        // The first refresh marks nothing: there was nothing to compare with.
        assert_eq!(shown(&sniffer), [(1, false), (2, false), (3, false)]);
        // Changed and changed back between two refreshes: unchanged.
        sniffer.record(0, &frame(0x100, &[9, 2, 3]), MS);
        sniffer.record(0, &frame(0x100, &[1, 2, 4]), 2 * MS);
        assert_eq!(shown(&sniffer), [(1, false), (2, false), (3, false)], "only a refresh changes what is shown");
        sniffer.refresh(Duration::from_secs(1));
        assert_eq!(shown(&sniffer), [(1, false), (2, false), (4, true)]);
        // A longer frame: its new bytes are changes.
        sniffer.record(0, &frame(0x100, &[1, 2, 4, 7]), 3 * MS);
        sniffer.refresh(Duration::from_secs(1));
        assert_eq!(shown(&sniffer), [(1, false), (2, false), (4, false), (7, true)]);
    }

    #[test]
    fn the_rate_is_the_frames_since_the_last_refresh_per_second() {
        let mut sniffer = Sniffer::new(1);
        for k in 0..10 {
            sniffer.record(0, &frame(0x100, &[]), k * MS);
        }
        sniffer.refresh(Duration::from_millis(500));
        assert_eq!(sniffer.rows(SortBy::Id)[0].rate_hz, 20.0);
        sniffer.refresh(Duration::from_millis(500));
        assert_eq!(sniffer.rows(SortBy::Id)[0].rate_hz, 0.0);
        assert_eq!(sniffer.rows(SortBy::Id)[0].count, 10);
    }

    #[test]
    fn each_key_orders_the_rows_its_way() {
        let mut sniffer = Sniffer::new(2);
        // 0x300: 3 frames 30 ms apart; 0x100: 2 frames 5 ms apart; 0x200 on
        // channel 1: once; an extended 0x050: 4 frames 10 ms apart.
        for k in 0..3 {
            sniffer.record(0, &frame(0x300, &[]), k * 30 * MS);
        }
        for k in 0..2 {
            sniffer.record(0, &frame(0x100, &[]), k * 5 * MS);
        }
        sniffer.record(1, &frame(0x200, &[]), 0);
        for k in 0..4 {
            sniffer.record(0, &Frame::can(0x50, true, &[]).unwrap(), k * 10 * MS);
        }
        sniffer.refresh(Duration::from_secs(1));
        let order = |sort| sniffer.rows(sort).iter().map(|r| (r.channel, r.id & 0x1FFF_FFFF)).collect::<Vec<_>>();
        assert_eq!(order(SortBy::Id), [(0, 0x100), (0, 0x300), (0, 0x50), (1, 0x200)], "extended ids after standard");
        assert_eq!(order(SortBy::Count), [(0, 0x50), (0, 0x300), (0, 0x100), (1, 0x200)]);
        assert_eq!(order(SortBy::Rate), [(0, 0x50), (0, 0x300), (0, 0x100), (1, 0x200)]);
        assert_eq!(order(SortBy::Period), [(0, 0x100), (0, 0x50), (0, 0x300), (1, 0x200)]);
        assert_eq!(SortBy::of_key('p'), Some(SortBy::Period));
        assert_eq!(SortBy::of_key('x'), None);
    }

    #[test]
    fn error_frames_count_for_the_channel_not_as_an_identifier() {
        let mut sniffer = Sniffer::new(1);
        sniffer.record(0, &Frame::error(0x4, [0; 8]).unwrap(), 0);
        assert_eq!(sniffer.error_frames(0), 1);
        assert!(sniffer.rows(SortBy::Id).is_empty());
    }
}
