//! The web monitor's trace stream, coalesced for a browser: frames taken
//! from a monitor's feed become one JSON batch per tick.
//!
//! A bus can carry far more frames than a page can draw. Each batch carries
//! at most [`FRAMES_PER_BATCH`] frames — the newest of the tick — and says
//! how many were left out (`skipped`) and how many the bus dropped for the
//! monitor (`dropped`); together they are the page's "not drawn". Every
//! frame taken, drawn or not, updates the per-identifier overwrite rows
//! (count, first/previous/last time, last data), so the overwrite view
//! counts every frame the monitor saw.
//!
//! Frames name their sender by port id. The batcher collects the client
//! ports it has not named yet ([`TraceBatcher::unnamed`]); the WebSocket
//! task asks the bus for their names — it keeps those of ports that have
//! left, `fieldhub_bus::departed` — and the next batch carries them
//! (`names`), so the page names a port that sent and left between two of
//! its polls.
//!
//! Invariants: memory is bounded (at most [`FRAMES_PER_BATCH`] frames and
//! [`MAX_IDS`] rows per monitor; identifiers beyond that are counted, not
//! tracked; at most [`MAX_NAMED`] ports remembered as named, then named
//! afresh); timestamps go to the page in microseconds, exact in a
//! JavaScript number.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Write;
use std::sync::Arc;

use fieldhub_dbc::Database;
use fieldhub_proto::{text, Frame, FrameFlags, FrameKind};
use serde_json::{json, Value};

use fieldhub_bus::monitor::Tapped;
use fieldhub_bus::port_id::{PortId, PortKind};

/// Most frames one batch carries.
pub const FRAMES_PER_BATCH: usize = 250;
/// Most identifiers one monitor's overwrite rows track.
pub const MAX_IDS: usize = 8192;
/// Most ports whose names one tick asks the bus for; others are asked
/// for at their next frame.
pub const NAMES_PER_TICK: usize = 256;
/// Most ports a monitor remembers having named; past it, it forgets them
/// all and names ports again as their frames come.
pub const MAX_NAMED: usize = 65_536;

/// Flag bits of a frame as the page reads them.
pub mod flags {
    pub const EXTENDED: u32 = 1;
    pub const REMOTE: u32 = 2;
    pub const BRS: u32 = 4;
    pub const ESI: u32 = 8;
    pub const FD: u32 = 16;
    pub const ERROR: u32 = 32;
    /// A LIN frame; with it, the LIN flags below (never the CAN bits, which
    /// LIN's flags share on the wire).
    pub const LIN: u32 = 64;
    /// A header nobody answered (the hub's).
    pub const LIN_NO_RESPONSE: u32 = 128;
    /// What the bus read when responses collided (the hub's: their wired-AND).
    pub const LIN_COLLISION: u32 = 256;
    /// A response whose checksum byte is wrong.
    pub const LIN_CHECKSUM_ERROR: u32 = 512;
    /// A wake-up pulse.
    pub const LIN_WAKE_UP: u32 = 1024;
    /// The go-to-sleep command (0x3C, first byte 0), known by its content
    /// as a slave knows it.
    pub const LIN_GO_TO_SLEEP: u32 = 2048;
    /// A CAN XL frame (its id: the priority, the VCID from bit 16); with
    /// it, XL's own flags below.
    pub const XL: u32 = 4096;
    /// CAN XL: simple extended content.
    pub const XL_SEC: u32 = 8192;
    /// CAN XL: remote request substitution.
    pub const XL_RRS: u32 = 16384;
    /// A raw frame (its id: the channel's access rule's).
    pub const RAW: u32 = 32768;
}

/// Most payload bytes a frame or row shows on the page: a CAN XL or raw
/// frame carries up to 2,048, and a batch of them whole would be megabytes
/// a tick. The frame's `len` still says how many it has.
pub const MAX_SHOWN_BYTES: usize = 64;

pub(crate) fn page_flags(frame: &Frame) -> u32 {
    let f = frame.flags();
    if frame.kind() == FrameKind::Lin {
        // A LIN frame's low flag bits mean other things (checksum model, no
        // response, collision): the page gets LIN's own.
        let lin = [
            (FrameFlags::LIN_NO_RESPONSE, flags::LIN_NO_RESPONSE),
            (FrameFlags::LIN_COLLISION, flags::LIN_COLLISION),
            (FrameFlags::LIN_CHECKSUM_ERROR, flags::LIN_CHECKSUM_ERROR),
            (FrameFlags::LIN_WAKE_UP, flags::LIN_WAKE_UP),
        ];
        let sleep = if frame.is_lin_go_to_sleep() { flags::LIN_GO_TO_SLEEP } else { 0 };
        return lin.iter().filter(|(flag, _)| f.contains(*flag)).fold(flags::LIN | sleep, |bits, (_, bit)| bits | bit);
    }
    let mut bits = 0;
    for (flag, bit) in [
        (FrameFlags::EXTENDED, flags::EXTENDED),
        (FrameFlags::REMOTE, flags::REMOTE),
        (FrameFlags::BRS, flags::BRS),
        (FrameFlags::ESI, flags::ESI),
    ] {
        if f.contains(flag) {
            bits |= bit;
        }
    }
    match frame.kind() {
        FrameKind::CanFd => bits | flags::FD,
        FrameKind::Error => bits | flags::ERROR,
        FrameKind::Can | FrameKind::Lin => bits,
        // XL's flag bits (SEC, RRS) share CAN's EXTENDED and REMOTE.
        FrameKind::CanXl => {
            let sec = if f.contains(FrameFlags::XL_SEC) { flags::XL_SEC } else { 0 };
            let rrs = if f.contains(FrameFlags::XL_RRS) { flags::XL_RRS } else { 0 };
            flags::XL | sec | rrs
        }
        FrameKind::Raw => flags::RAW,
    }
}

/// The hex of the bytes of `data` the page shows ([`MAX_SHOWN_BYTES`]).
fn shown(data: &[u8]) -> String {
    hex(&data[..data.len().min(MAX_SHOWN_BYTES)])
}

pub(crate) fn hex(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len() * 2);
    for b in data {
        let _ = write!(out, "{b:02X}");
    }
    out
}

/// One identifier's overwrite row.
struct Row {
    frame: Frame,
    /// The identifier's frame before `frame`: the page highlights the bytes
    /// that differ, however many frames one batch covers.
    previous: Option<Frame>,
    count: u64,
    first_us: u64,
    previous_us: Option<u64>,
    last_us: u64,
    /// Sum of the squared gaps between the identifier's frames (µs²): with
    /// the mean period it gives the jitter, the gaps' standard deviation.
    gap_squares: f64,
    /// Changed since the last batch.
    fresh: bool,
}

/// Turns a monitor's frames into batches for the page.
#[derive(Default)]
pub struct TraceBatcher {
    frames: VecDeque<Tapped>,
    rows: HashMap<(u16, u32), Row>,
    /// Frames taken but not drawn, since the monitor opened.
    skipped: u64,
    /// Frames of identifiers beyond [`MAX_IDS`], since the monitor opened.
    untracked: u64,
    /// Frames taken since the monitor opened.
    taken: u64,
    /// Client ports already asked for (named, or unknown to the bus).
    named: HashSet<PortId>,
    /// Client ports seen since the last [`Self::unnamed`] and not named yet.
    unnamed: Vec<PortId>,
    /// Names the bus gave since the last batch, for the next one.
    names: serde_json::Map<String, Value>,
}

impl TraceBatcher {
    /// Take one frame from the feed.
    pub fn take(&mut self, tapped: Tapped) {
        self.taken += 1;
        if let Some(sender) = tapped.sender.filter(|s| s.kind() == PortKind::Client) {
            if self.unnamed.len() < NAMES_PER_TICK && !self.named.contains(&sender) {
                if self.named.len() == MAX_NAMED {
                    self.named.clear();
                }
                self.named.insert(sender);
                self.unnamed.push(sender);
            }
        }
        let us = tapped.timestamp_ns / 1_000;
        let key = (tapped.channel, tapped.frame.socketcan_id());
        let tracked = self.rows.len() < MAX_IDS || self.rows.contains_key(&key);
        if tracked {
            let row = self.rows.entry(key).or_insert_with(|| Row {
                frame: tapped.frame.clone(),
                previous: None,
                count: 0,
                first_us: us,
                previous_us: None,
                last_us: us,
                gap_squares: 0.0,
                fresh: true,
            });
            if row.count > 0 {
                let gap = us.saturating_sub(row.last_us) as f64;
                row.gap_squares += gap * gap;
                row.previous_us = Some(row.last_us);
                row.previous = Some(row.frame.clone());
            }
            row.count += 1;
            row.last_us = us;
            row.frame = tapped.frame.clone();
            row.fresh = true;
        } else {
            self.untracked += 1;
        }
        if self.frames.len() == FRAMES_PER_BATCH {
            self.frames.pop_front();
            self.skipped += 1;
        }
        self.frames.push_back(tapped);
    }

    /// The client ports seen since the last call whose names the page has
    /// not been given: ask the bus ([`fieldhub_bus::request::ControlRequest::PortNames`])
    /// and hand its answer to [`Self::name`].
    pub fn unnamed(&mut self) -> Vec<PortId> {
        std::mem::take(&mut self.unnamed)
    }

    /// Names the bus gave (`{"7": "ecu"}`), carried by the next batch.
    pub fn name(&mut self, names: Value) {
        if let Value::Object(names) = names {
            self.names.extend(names);
        }
    }

    /// The batch of this tick, or `None` when nothing changed; `dropped` is
    /// the bus's count of frames lost for this monitor. With `rows`, it
    /// carries every overwrite row that changed since the last batch with
    /// rows (a busy bus with thousands of identifiers changes them all every
    /// tick, so the caller asks for them less often than for frames). Frames
    /// and rows of channels in `dbc` carry their decoding.
    pub fn batch(&mut self, dropped: u64, rows: bool, dbc: &HashMap<u16, Arc<Database>>) -> Option<Value> {
        let decode = |channel: u16, frame: &Frame| {
            if frame.is_error() || frame.is_remote() {
                return None;
            }
            dbc.get(&channel)?.decode(frame.id(), frame.is_extended(), frame.data())
        };
        let rows: Vec<Value> = self
            .rows
            .iter_mut()
            .filter(|(_, row)| rows && row.fresh)
            .map(|(&(channel, _), row)| {
                row.fresh = false;
                let period = (row.count > 1).then(|| (row.last_us - row.first_us) / (row.count - 1));
                let delta = row.previous_us.map(|p| row.last_us - p);
                let jitter = period.map(|mean| {
                    let gaps = (row.count - 1) as f64;
                    (row.gap_squares / gaps - (mean as f64).powi(2)).max(0.0).sqrt().round() as u64
                });
                json!([
                    channel,
                    row.frame.id(),
                    page_flags(&row.frame),
                    row.count,
                    period,
                    delta,
                    row.last_us,
                    shown(row.frame.data()),
                    row.frame.len(),
                    decode(channel, &row.frame).map(|d| fieldhub_dbc::describe(&d)),
                    row.previous.as_ref().map(|p| shown(p.data())),
                    jitter,
                ])
            })
            .collect();
        if rows.is_empty() && self.frames.is_empty() && self.names.is_empty() {
            return None;
        }
        let frames: Vec<Value> = self
            .frames
            .drain(..)
            .map(|t| {
                let decoded = decode(t.channel, &t.frame);
                // The physical values, for the page's plots.
                let values = decoded.as_ref().map(|d| {
                    let signals: Vec<Value> = d.signals.iter().map(|s| json!([s.name, s.value])).collect();
                    json!([d.message, signals])
                });
                json!([
                    t.channel,
                    t.timestamp_ns / 1_000,
                    t.frame.id(),
                    page_flags(&t.frame),
                    shown(t.frame.data()),
                    t.frame.len(),
                    text::format_cansend(&t.frame),
                    decoded.as_ref().map(fieldhub_dbc::describe),
                    t.sender.map_or(0, u32::from),
                    t.sender.map(PortId::kind),
                    values,
                ])
            })
            .collect();
        Some(json!({
            "frames": frames,
            "rows": rows,
            "taken": self.taken,
            "skipped": self.skipped,
            "dropped": dropped,
            "untracked": self.untracked,
            "names": std::mem::take(&mut self.names),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tapped(id: u32, us: u64, data: &[u8]) -> Tapped {
        Tapped {
            channel: 0,
            sender: PortId::client(1),
            timestamp_ns: us * 1_000,
            frame: Frame::can(id, false, data).unwrap(),
        }
    }

    #[test]
    fn every_frame_is_counted_though_only_the_newest_are_drawn() {
        let mut batcher = TraceBatcher::default();
        for i in 0..1_000u64 {
            batcher.take(tapped(0x123, i * 10, &[i as u8]));
        }
        let batch = batcher.batch(7, true, &HashMap::new()).unwrap();
        let frames = batch["frames"].as_array().unwrap();
        assert_eq!(frames.len(), FRAMES_PER_BATCH);
        assert_eq!(frames.last().unwrap()[1], 9_990, "the newest frame is drawn");
        assert_eq!(frames.last().unwrap()[9], "client", "the sender's kind");
        assert_eq!(batch["skipped"], 1_000 - FRAMES_PER_BATCH as u64);
        assert_eq!(batch["dropped"], 7);
        let row = &batch["rows"][0];
        assert_eq!(row[3], 1_000, "count");
        assert_eq!(row[4], 10, "period");
        assert_eq!(row[5], 10, "delta");
        assert_eq!(row[7], "E7", "last data");
        assert_eq!(row[10], "E6", "the frame before it, whose bytes the page compares");
        assert_eq!(row[11], 0, "evenly spaced frames have no jitter");
    }

    #[test]
    fn jitter_is_the_standard_deviation_of_an_identifiers_gaps() {
        let mut batcher = TraceBatcher::default();
        // Gaps of 8, 12, 8, 12 µs: mean 10, standard deviation 2.
        for us in [0, 8, 20, 28, 40] {
            batcher.take(tapped(0x7, us, &[]));
        }
        let row = &batcher.batch(0, true, &HashMap::new()).unwrap()["rows"][0];
        assert_eq!(row[4], 10, "period");
        assert_eq!(row[11], 2, "jitter");
    }

    #[test]
    fn an_idle_tick_sends_nothing_and_rows_are_sent_when_they_change() {
        let mut batcher = TraceBatcher::default();
        assert!(batcher.batch(0, true, &HashMap::new()).is_none());
        batcher.take(tapped(0x1, 5, &[]));
        batcher.take(tapped(0x2, 6, &[]));
        assert_eq!(batcher.batch(0, true, &HashMap::new()).unwrap()["rows"].as_array().unwrap().len(), 2);
        assert!(batcher.batch(0, true, &HashMap::new()).is_none());
        batcher.take(tapped(0x2, 9, &[1]));
        let batch = batcher.batch(0, true, &HashMap::new()).unwrap();
        assert_eq!(batch["rows"].as_array().unwrap().len(), 1);
        assert_eq!(batch["rows"][0][5], 3, "delta to the previous frame of the id");
        assert_eq!(batch["frames"][0][6], "002#01", "cansend text");
    }

    #[test]
    fn rows_wait_for_a_batch_that_asks_for_them() {
        let mut batcher = TraceBatcher::default();
        batcher.take(tapped(0x1, 5, &[1]));
        let frames_only = batcher.batch(0, false, &HashMap::new()).unwrap();
        assert_eq!(frames_only["frames"].as_array().unwrap().len(), 1);
        assert!(frames_only["rows"].as_array().unwrap().is_empty());
        assert!(batcher.batch(0, false, &HashMap::new()).is_none(), "nothing new to draw");
        batcher.take(tapped(0x1, 9, &[2]));
        batcher.batch(0, false, &HashMap::new()).unwrap();
        let rows = batcher.batch(0, true, &HashMap::new()).unwrap();
        assert_eq!(rows["rows"][0][3], 2, "both frames counted");
        assert!(rows["frames"].as_array().unwrap().is_empty());
    }

    #[test]
    fn identifiers_beyond_the_cap_are_counted_not_tracked() {
        let mut batcher = TraceBatcher::default();
        for id in 0..(MAX_IDS as u32 + 5) {
            batcher.take(Tapped {
                channel: 0,
                sender: PortId::client(1),
                timestamp_ns: 0,
                frame: Frame::can(id, true, &[]).unwrap(),
            });
        }
        let batch = batcher.batch(0, true, &HashMap::new()).unwrap();
        assert_eq!(batch["rows"].as_array().unwrap().len(), MAX_IDS);
        assert_eq!(batch["untracked"], 5);
    }

    #[test]
    fn frames_of_a_channel_with_a_dbc_carry_their_signals_physical_values() {
        let db = Database::parse(
            "VERSION \"\"\n\nNS_ :\n\nBS_:\n\nBU_: E\n\nBO_ 291 Engine: 2 E\n SG_ Speed : 0|16@1+ (0.5,1) [0|0] \"km/h\" E\n",
        )
        .unwrap();
        let dbc = HashMap::from([(0u16, Arc::new(db))]);
        let mut batcher = TraceBatcher::default();
        batcher.take(tapped(0x123, 5, &[10, 0]));
        let batch = batcher.batch(0, true, &dbc).unwrap();
        assert_eq!(batch["frames"][0][10], json!(["Engine", [["Speed", 6.0]]]), "10 * 0.5 + 1");
        assert_eq!(batch["frames"][0][7], "Engine: Speed=6.0 km/h");
        assert!(batch["rows"][0][9].is_string(), "rows carry the decoding as text");
        batcher.take(tapped(0x124, 6, &[1]));
        assert!(batcher.batch(0, true, &dbc).unwrap()["frames"][0][10].is_null(), "no message for the id");
    }

    #[test]
    fn each_client_port_is_asked_for_once_and_its_name_rides_the_next_batch() {
        let mut batcher = TraceBatcher::default();
        batcher.take(tapped(0x1, 5, &[]));
        batcher.take(tapped(0x2, 6, &[]));
        batcher.take(Tapped { sender: Some(PortId::send(0)), ..tapped(0x3, 7, &[]) });
        batcher.take(Tapped { sender: None, ..tapped(0x4, 8, &[]) });
        assert_eq!(batcher.unnamed(), [PortId::client(1).unwrap()], "the page's own and the bus's frames need no name");
        batcher.name(json!({ "1": "brief-visitor" }));
        let batch = batcher.batch(0, false, &HashMap::new()).unwrap();
        assert_eq!(batch["names"], json!({ "1": "brief-visitor" }));
        batcher.take(tapped(0x1, 9, &[]));
        assert!(batcher.unnamed().is_empty(), "asked once");
        assert_eq!(batcher.batch(0, false, &HashMap::new()).unwrap()["names"], json!({}));
    }

    #[test]
    fn flags_reach_the_page() {
        let fd = Frame::can_fd(0x10, FrameFlags::BRS | FrameFlags::EXTENDED, &[0; 12]).unwrap();
        assert_eq!(page_flags(&fd), flags::FD | flags::BRS | flags::EXTENDED);
        assert_eq!(page_flags(&Frame::remote(0x10, false, 2).unwrap()), flags::REMOTE);
        use fieldhub_proto::lin::Checksum;
        let classic = Frame::lin(0x3C, Checksum::Classic, &[1]).unwrap();
        assert_eq!(page_flags(&classic), flags::LIN, "LIN's classic-checksum flag is not CAN's EXT");
        assert_eq!(page_flags(&Frame::lin_no_response(0x10).unwrap()), flags::LIN | flags::LIN_NO_RESPONSE);
        let answers = [
            Frame::lin(0x30, Checksum::Enhanced, &[0x11, 1]).unwrap(),
            Frame::lin(0x30, Checksum::Enhanced, &[0x92, 2]).unwrap(),
        ];
        let collision = Frame::lin_collision(0x30, &answers).unwrap();
        assert_eq!(page_flags(&collision), flags::LIN | flags::LIN_COLLISION);
        let wrong = Frame::lin_with_checksum(0x10, Checksum::Enhanced, &[1], 0).unwrap();
        assert_eq!(page_flags(&wrong), flags::LIN | flags::LIN_CHECKSUM_ERROR);
        assert_eq!(page_flags(&Frame::lin_wake_up()), flags::LIN | flags::LIN_WAKE_UP);
        assert_eq!(page_flags(&Frame::lin_go_to_sleep()), flags::LIN | flags::LIN_GO_TO_SLEEP);
        let xl = Frame::can_xl(0x123, 0x42, 3, FrameFlags::XL_SEC, 7, &[0xA5; 2048]).unwrap();
        assert_eq!(page_flags(&xl), flags::XL | flags::XL_SEC, "XL's SEC is not CAN's EXT");
        let rrs = Frame::can_xl(0x123, 0, 0, FrameFlags::XL_RRS, 0, &[1]).unwrap();
        assert_eq!(page_flags(&rrs), flags::XL | flags::XL_RRS, "XL's RRS is not CAN's RTR");
        assert_eq!(page_flags(&Frame::raw(0xDEAD_BEEF, &[1, 2]).unwrap()), flags::RAW);
    }

    #[test]
    fn a_2048_byte_frame_shows_its_first_64_bytes_and_its_whole_length() {
        let xl = Frame::can_xl(0x123, 0x42, 3, FrameFlags::empty(), 7, &[0xA5; 2048]).unwrap();
        let mut batcher = TraceBatcher::default();
        let mut t = tapped(0x123, 10, &[]);
        t.frame = xl;
        batcher.take(t);
        let batch = batcher.batch(0, true, &HashMap::new()).unwrap();
        let frame = &batch["frames"][0];
        assert_eq!(frame[4].as_str().unwrap(), "A5".repeat(MAX_SHOWN_BYTES));
        assert_eq!(frame[5], 2048);
        assert_eq!(frame[2], 0x42_0123, "the id as the page reads it: the VCID from bit 16, the priority");
        let row = &batch["rows"][0];
        assert_eq!((row[7].as_str().unwrap().len(), row[8].as_u64()), (2 * MAX_SHOWN_BYTES, Some(2048)));
    }
}
