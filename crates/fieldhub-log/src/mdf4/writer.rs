//! [`Mdf4Writer`]: frames in, an MDF4 bus logging file out.

use std::collections::HashMap;
use std::io::Write;

use fieldhub_proto::frame::FrameFlags;
use fieldhub_proto::Frame;

use super::block::{Layout, HEADER};
use super::{GroupKind, CG_BUS_EVENT, CHANNEL_KEY, CN_BUS_EVENT, STRUCT_OFFSET};
use crate::Direction;

/// `si_type`: the source is a bus; `si_bus_type`: CAN.
const SOURCE_BUS: u8 = 2;
const BUS_CAN: u8 = 2;
/// `cn_type` and `cn_sync_type` of the time channel: master, time.
const CN_MASTER: u8 = 2;
const SYNC_TIME: u8 = 1;
/// `cn_data_type`: unsigned little-endian, IEEE float little-endian, bytes.
const UINT_LE: u8 = 0;
const FLOAT_LE: u8 = 4;
const BYTE_ARRAY: u8 = 10;
/// Channels `BusChannel` (one byte) can number.
const MAX_CHANNELS: usize = 256;

/// Writes frames as an MDF4 file (layout in the module doc). The data
/// blocks come after every other block and their sizes must be known
/// first, so records are kept in memory (84 bytes a frame) until
/// [`Mdf4Writer::finish`] writes the file.
pub struct Mdf4Writer<W: Write> {
    out: W,
    names: Vec<String>,
    numbers: HashMap<String, u8>,
    /// Per group: the records, their time fields still zero.
    records: [Vec<u8>; 3],
    /// Per group: each record's Unix time in ns.
    times: [Vec<u64>; 3],
    /// When the file starts if it has no frame (Unix ns).
    fallback_start_ns: u64,
}

impl<W: Write> Mdf4Writer<W> {
    /// A file whose channels are numbered in the order of `channels`, then
    /// as their first frames come; `start_ns` is its start time if no frame
    /// is recorded (otherwise the first frame's time is).
    pub fn new(out: W, channels: &[String], start_ns: u64) -> Self {
        let mut writer = Self {
            out,
            names: Vec::new(),
            numbers: HashMap::new(),
            records: Default::default(),
            times: Default::default(),
            fallback_start_ns: start_ns,
        };
        for channel in channels {
            // Numbers past 255 are refused when a frame of that channel comes.
            let _ = writer.number(channel);
        }
        writer
    }

    fn number(&mut self, channel: &str) -> std::io::Result<u8> {
        if let Some(&number) = self.numbers.get(channel) {
            return Ok(number);
        }
        if self.names.len() == MAX_CHANNELS {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("MDF4 BusChannel numbers at most {MAX_CHANNELS} channels; '{channel}' would be one more"),
            ));
        }
        let number = self.names.len() as u8;
        self.names.push(channel.to_owned());
        self.numbers.insert(channel.to_owned(), number);
        Ok(number)
    }

    /// Record one frame at `timestamp_ns` (Unix ns) on `channel`.
    pub fn record(
        &mut self,
        timestamp_ns: u64,
        channel: &str,
        frame: &Frame,
        direction: Direction,
    ) -> std::io::Result<()> {
        if frame.is_xl() || frame.is_raw() {
            // A CAN_DataFrame record holds 64 data bytes and CAN's fields only.
            let text = format!(
                "MF4 recordings carry CAN and CAN FD frames; channel '{channel}' has {frame:?} (convert it to candump)"
            );
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, text));
        }
        let bus_channel = self.number(channel)?;
        let kind = if frame.is_error() {
            GroupKind::Error
        } else if frame.is_remote() {
            GroupKind::Remote
        } else {
            GroupKind::Data
        };
        let records = &mut self.records[kind as usize];
        let at = records.len();
        records.resize(at + kind.record_len(), 0);
        let record = &mut records[at..];
        record[8] = bus_channel;
        record[9..13].copy_from_slice(&frame.id().to_le_bytes());
        record[13] = u8::from(frame.is_extended());
        record[14] = frame.dlc();
        record[15] = frame.len() as u8;
        match kind {
            GroupKind::Remote => record[16] = u8::from(direction == Direction::Tx),
            _ => {
                record[16..16 + frame.data().len()].copy_from_slice(frame.data());
                record[80] = u8::from(direction == Direction::Tx);
                record[81] = u8::from(frame.is_fd());
                record[82] = u8::from(frame.flags().contains(FrameFlags::BRS));
                record[83] = u8::from(frame.flags().contains(FrameFlags::ESI));
            }
        }
        self.times[kind as usize].push(timestamp_ns);
        Ok(())
    }

    /// Frames recorded so far.
    pub fn frames(&self) -> u64 {
        self.times.iter().map(|t| t.len() as u64).sum()
    }

    /// Write the file, flush, and hand back the writer.
    pub fn finish(mut self) -> std::io::Result<W> {
        let start_ns = self.times.iter().flatten().min().copied().unwrap_or(self.fallback_start_ns);
        for kind in GroupKind::ALL {
            let records = &mut self.records[kind as usize];
            for (record, &time) in records.chunks_mut(kind.record_len()).zip(&self.times[kind as usize]) {
                let seconds = (time - start_ns) as f64 / 1e9;
                record[..8].copy_from_slice(&seconds.to_le_bytes());
            }
        }
        let (layout, data_groups) = self.metadata(start_ns);
        let mut data_offset = layout.bytes.len() as u64;
        let mut layout = layout;
        for (kind, &dg) in GroupKind::ALL.iter().zip(&data_groups) {
            let records = &self.records[*kind as usize];
            if !records.is_empty() {
                layout.link(dg, 2, data_offset);
                data_offset += (HEADER + records.len()).next_multiple_of(8) as u64;
            }
        }
        self.out.write_all(&layout.bytes)?;
        for records in self.records.iter().filter(|r| !r.is_empty()) {
            let mut header = Layout::default();
            header.block(b"DT", &[], &[]);
            let length = HEADER + records.len();
            let padded = length.next_multiple_of(8);
            header.bytes[8..16].copy_from_slice(&(padded as u64).to_le_bytes());
            self.out.write_all(&header.bytes)?;
            self.out.write_all(records)?;
            self.out.write_all(&[0; 8][..padded - length])?;
        }
        self.out.flush()?;
        Ok(self.out)
    }

    /// Every block but the data blocks; returns the layout and the data
    /// groups' offsets (their data links still to be set).
    fn metadata(&self, start_ns: u64) -> (Layout, [u64; 3]) {
        let mut layout = Layout::default();
        layout.bytes.extend_from_slice(b"MDF     4.10    fieldhub");
        layout.bytes.extend_from_slice(&[0; 4]);
        layout.bytes.extend_from_slice(&410u16.to_le_bytes());
        layout.bytes.resize(64, 0);

        let mut hd_data = Vec::with_capacity(32);
        hd_data.extend_from_slice(&start_ns.to_le_bytes());
        // Time zone and DST offsets 0, time flags 0: the start time is UTC.
        hd_data.resize(32, 0);
        let hd = layout.block(b"HD", &[0; 6], &hd_data);
        let comment = layout.text(b"MD", &self.header_comment());
        layout.link(hd, 5, comment);

        let fh_comment = layout.text(
            b"MD",
            &format!(
                "<FHcomment><TX>written by fieldhub</TX><tool_id>fieldhub</tool_id>\
                 <tool_vendor>fieldhub</tool_vendor><tool_version>{}</tool_version></FHcomment>",
                env!("CARGO_PKG_VERSION")
            ),
        );
        let mut fh_data = start_ns.to_le_bytes().to_vec();
        fh_data.resize(16, 0);
        let fh = layout.block(b"FH", &[0, fh_comment], &fh_data);
        layout.link(hd, 1, fh);

        let source_name = layout.text(b"TX", "CAN");
        let source = layout.block(b"SI", &[source_name, source_name, 0], &[SOURCE_BUS, BUS_CAN, 0, 0, 0, 0, 0, 0]);

        let mut data_groups = [0; 3];
        let mut previous = 0;
        for (kind, dg_slot) in GroupKind::ALL.iter().zip(&mut data_groups) {
            let dg = layout.block(b"DG", &[0; 4], &[0; 8]);
            *dg_slot = dg;
            if previous == 0 {
                layout.link(hd, 0, dg);
            } else {
                layout.link(previous, 0, dg);
            }
            previous = dg;
            let cycles = self.times[*kind as usize].len() as u64;
            let acquisition_name = layout.text(b"TX", kind.name());
            let mut cg_data = Vec::with_capacity(32);
            cg_data.extend_from_slice(&0u64.to_le_bytes());
            cg_data.extend_from_slice(&cycles.to_le_bytes());
            cg_data.extend_from_slice(&CG_BUS_EVENT.to_le_bytes());
            cg_data.extend_from_slice(&u16::from(b'.').to_le_bytes());
            cg_data.extend_from_slice(&[0; 4]);
            cg_data.extend_from_slice(&(kind.record_len() as u32).to_le_bytes());
            cg_data.extend_from_slice(&0u32.to_le_bytes());
            let cg = layout.block(b"CG", &[0, 0, acquisition_name, source, 0, 0], &cg_data);
            layout.link(dg, 1, cg);

            let time = channel(&mut layout, "time", CN_MASTER, SYNC_TIME, FLOAT_LE, 0, 8, 0);
            layout.link(cg, 1, time);
            let structure_bytes = kind.record_len() - STRUCT_OFFSET;
            let structure =
                channel(&mut layout, kind.name(), 0, 0, BYTE_ARRAY, STRUCT_OFFSET, structure_bytes, CN_BUS_EVENT);
            layout.link(time, 0, structure);
            let mut previous_child = 0;
            for &(field, offset, bytes) in kind.fields() {
                let data_type = if field == "DataBytes" { BYTE_ARRAY } else { UINT_LE };
                let name = format!("{}.{field}", kind.name());
                let child = channel(&mut layout, &name, 0, 0, data_type, offset, bytes, CN_BUS_EVENT);
                if previous_child == 0 {
                    layout.link(structure, 1, child);
                } else {
                    layout.link(previous_child, 0, child);
                }
                previous_child = child;
            }
        }
        (layout, data_groups)
    }

    /// `<HDcomment>` naming each `BusChannel` number's channel.
    fn header_comment(&self) -> String {
        let mut xml = String::from("<HDcomment><TX>fieldhub recording</TX><common_properties>");
        for (number, name) in self.names.iter().enumerate() {
            xml.push_str(&format!("<e name=\"{CHANNEL_KEY}{number}\">{}</e>", escape(name)));
        }
        xml.push_str("</common_properties></HDcomment>");
        xml
    }
}

/// A `CN` block and its name; returns its offset.
#[allow(clippy::too_many_arguments)]
fn channel(
    layout: &mut Layout,
    name: &str,
    channel_type: u8,
    sync_type: u8,
    data_type: u8,
    byte_offset: usize,
    bytes: usize,
    flags: u32,
) -> u64 {
    let tx = layout.text(b"TX", name);
    let mut data = Vec::with_capacity(72);
    data.extend_from_slice(&[channel_type, sync_type, data_type, 0]);
    data.extend_from_slice(&(byte_offset as u32).to_le_bytes());
    data.extend_from_slice(&(bytes as u32 * 8).to_le_bytes());
    data.extend_from_slice(&flags.to_le_bytes());
    data.resize(72, 0);
    layout.block(b"CN", &[0, 0, tx, 0, 0, 0, 0, 0], &data)
}

/// A channel name as XML text.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
