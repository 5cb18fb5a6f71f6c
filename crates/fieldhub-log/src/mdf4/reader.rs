//! [`read`]: an MDF4 file's CAN bus events as [`Record`]s.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use chrono::{DateTime, Local, Offset, TimeZone};
use fieldhub_proto::frame::{FrameFlags, FD_LENGTHS};
use fieldhub_proto::Frame;

use super::block::{self, bad, Fields};
use super::{GroupKind, CG_VLSD, CHANNEL_KEY};
use crate::{DateZone, Direction, LogError, Record};

/// `cn_data_type` of a byte array.
const BYTE_ARRAY: u8 = 10;
/// `hd_time_flags`: the start time is local time, not UTC.
const LOCAL_TIME: u8 = 0x01;
/// Deflate expands data at most about 1032 times; a `DZ` block claiming
/// more is refused before anything is allocated for it.
const MAX_INFLATE_RATIO: u64 = 1032;

/// A channel of a group: where its value lies in a record.
#[derive(Clone, Copy)]
struct Field {
    byte_offset: usize,
    bit_offset: u8,
    bit_count: u32,
    data_type: u8,
}

impl Field {
    fn end(&self) -> usize {
        self.byte_offset + (usize::from(self.bit_offset) + self.bit_count as usize).div_ceil(8)
    }

    /// An unsigned little-endian value of up to 64 bits.
    fn uint(&self, record: &[u8]) -> u64 {
        let bytes = &record[self.byte_offset..self.end().min(self.byte_offset + 8)];
        let mut value = [0; 8];
        value[..bytes.len()].copy_from_slice(bytes);
        let value = u64::from_le_bytes(value) >> self.bit_offset;
        if self.bit_count >= 64 {
            value
        } else {
            value & ((1 << self.bit_count) - 1)
        }
    }
}

/// A CAN bus event channel group: its kind, time and named fields.
struct Group {
    kind: GroupKind,
    time: Field,
    fields: HashMap<String, Field>,
}

/// One channel group of a data group.
struct ChannelGroup {
    record_id: u64,
    cycles: u64,
    record_bytes: usize,
    vlsd: bool,
    /// `None`: not CAN bus events, its records are skipped.
    group: Option<Group>,
}

/// Read every CAN frame of an MDF4 file (the whole file in `file`), in
/// time order. `zone` turns a start time written as local time into UTC.
pub fn read(file: &[u8], zone: DateZone) -> Result<Vec<Record>, LogError> {
    if file.len() < 64 || &file[..8] != b"MDF     " {
        return Err(bad(0, "not an MDF file: it does not start with the 'MDF     ' identification block"));
    }
    let version = u16::from_le_bytes([file[28], file[29]]);
    if version < 400 {
        return Err(bad(0, format!("MDF version {version}: only MDF 4 (version 400 and later) is read")));
    }
    let hd = block::read(file, 64, &[b"HD"])?;
    let hd_fields = Fields { offset: 64, data: hd.data };
    let start_ns = start_time(hd_fields.u64(0)?, hd_fields.u8(12)?, zone);
    let names = channel_names(&block::text(file, hd.link(5))?);

    let mut visited = HashSet::new();
    let mut timed: Vec<(i128, Record)> = Vec::new();
    let mut dg_offset = hd.link(0);
    while dg_offset != 0 {
        follow_once(&mut visited, dg_offset)?;
        let dg = block::read(file, dg_offset, &[b"DG"])?;
        let record_id_bytes = usize::from(Fields { offset: dg_offset, data: dg.data }.u8(0)?);
        if ![0, 1, 2, 4, 8].contains(&record_id_bytes) {
            return Err(bad(dg_offset, format!("record ids of {record_id_bytes} bytes: MDF4 allows 0, 1, 2, 4 or 8")));
        }
        let groups = channel_groups(file, dg.link(1), &mut visited)?;
        if groups.iter().any(|g| g.group.is_some()) {
            let mut data = Vec::new();
            data_of(file, dg.link(2), &mut data, &mut visited)?;
            let mut context = Decode { dg_offset, start_ns, names: &names, out: &mut timed };
            if record_id_bytes == 0 {
                let [group] = groups.as_slice() else {
                    return Err(bad(dg_offset, format!("{} channel groups without record ids", groups.len())));
                };
                context.sorted(group, &data)?;
            } else {
                context.unsorted(&groups, record_id_bytes, &data)?;
            }
        }
        dg_offset = dg.link(0);
    }
    timed.sort_by_key(|(time, _)| *time);
    Ok(timed.into_iter().map(|(_, record)| record).collect())
}

/// Unix ns of the header's start time.
fn start_time(ns: u64, flags: u8, zone: DateZone) -> i128 {
    let ns = i128::from(ns);
    if flags & LOCAL_TIME == 0 {
        return ns;
    }
    let offset_seconds = match zone {
        DateZone::Fixed(seconds) => seconds,
        DateZone::Local => {
            let naive = DateTime::from_timestamp_nanos(ns as i64).naive_utc();
            match Local.from_local_datetime(&naive).earliest() {
                Some(local) => local.offset().fix().local_minus_utc(),
                None => Local.offset_from_utc_datetime(&naive).fix().local_minus_utc(),
            }
        }
    };
    ns - i128::from(offset_seconds) * 1_000_000_000
}

/// `fieldhub channel N` → name, from the header comment fieldhub writes.
fn channel_names(comment: &str) -> HashMap<u64, String> {
    let mut names = HashMap::new();
    let mut rest = comment;
    let opening = format!("<e name=\"{CHANNEL_KEY}");
    while let Some(at) = rest.find(&opening) {
        rest = &rest[at + opening.len()..];
        let Some((number, after)) = rest.split_once("\">") else { break };
        let Some((value, _)) = after.split_once("</e>") else { break };
        if let Ok(number) = number.parse() {
            names.insert(number, unescape(value));
        }
        rest = after;
    }
    names
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&amp;", "&")
}

/// Refuse a block seen before: a list that links back into itself.
fn follow_once(visited: &mut HashSet<u64>, offset: u64) -> Result<(), LogError> {
    if visited.insert(offset) {
        Ok(())
    } else {
        Err(bad(offset, "blocks link in a loop (this block is reached twice)"))
    }
}

/// The channel groups of a data group, from its first `CG`.
fn channel_groups(file: &[u8], first: u64, visited: &mut HashSet<u64>) -> Result<Vec<ChannelGroup>, LogError> {
    let mut groups = Vec::new();
    let mut offset = first;
    while offset != 0 {
        follow_once(visited, offset)?;
        let cg = block::read(file, offset, &[b"CG"])?;
        let fields = Fields { offset, data: cg.data };
        let flags = fields.u16(16)?;
        let record_bytes = fields.u32(24)? as usize + fields.u32(28)? as usize;
        let mut channels = Vec::new();
        collect_channels(file, cg.link(1), &mut channels, visited)?;
        let group = can_group(offset, &channels, record_bytes)?;
        groups.push(ChannelGroup {
            record_id: fields.u64(0)?,
            cycles: fields.u64(8)?,
            record_bytes,
            vlsd: flags & CG_VLSD != 0,
            group,
        });
        offset = cg.link(0);
    }
    Ok(groups)
}

/// A channel as read: its name, its block's offset and fields.
struct Channel {
    name: String,
    offset: u64,
    channel_type: u8,
    sync_type: u8,
    conversion: u64,
    field: Field,
}

/// Every channel of a list and, depth first, of their structures.
fn collect_channels(
    file: &[u8],
    first: u64,
    out: &mut Vec<Channel>,
    visited: &mut HashSet<u64>,
) -> Result<(), LogError> {
    let mut offset = first;
    while offset != 0 {
        follow_once(visited, offset)?;
        let cn = block::read(file, offset, &[b"CN"])?;
        let fields = Fields { offset, data: cn.data };
        out.push(Channel {
            name: block::text(file, cn.link(2))?,
            offset,
            channel_type: fields.u8(0)?,
            sync_type: fields.u8(1)?,
            conversion: cn.link(4),
            field: Field {
                data_type: fields.u8(2)?,
                bit_offset: fields.u8(3)?,
                byte_offset: fields.u32(4)? as usize,
                bit_count: fields.u32(8)?,
            },
        });
        // A composition is a channel list (a structure) or an array (`CA`), which carries no names.
        let composition = cn.link(1);
        if composition != 0 && block::read(file, composition, &[b"CN", b"CA"])?.id == *b"CN" {
            collect_channels(file, composition, out, visited)?;
        }
        offset = cn.link(0);
    }
    Ok(())
}

/// The CAN bus event group these channels describe, if they do.
fn can_group(cg_offset: u64, channels: &[Channel], record_bytes: usize) -> Result<Option<Group>, LogError> {
    let Some(kind) = channels.iter().find_map(|c| GroupKind::from_name(&c.name)) else {
        return Ok(None);
    };
    let time = channels.iter().find(|c| c.channel_type == 2 || c.channel_type == 3);
    let Some(time) = time.filter(|c| c.sync_type == 1) else {
        return Err(bad(cg_offset, format!("the {} group has no time master channel", kind.name())));
    };
    if time.conversion != 0 || time.field.data_type != 4 || !matches!(time.field.bit_count, 32 | 64) {
        return Err(bad(
            time.offset,
            "the time channel is not a plain little-endian float (a conversion or integer time is not read)",
        ));
    }
    let prefix = format!("{}.", kind.name());
    let mut fields = HashMap::new();
    for channel in channels {
        let Some(name) = channel.name.strip_prefix(&prefix) else { continue };
        if channel.channel_type != 0 {
            return Err(bad(
                channel.offset,
                format!("{} is variable-length signal data (SD), which is not read", channel.name),
            ));
        }
        fields.insert(name.to_owned(), channel.field);
    }
    for (name, field) in fields.iter().map(|(n, f)| (n.as_str(), f)).chain([("time", &time.field)]) {
        if field.bit_offset > 7 || (field.data_type != BYTE_ARRAY && field.bit_count > 64) {
            return Err(bad(
                cg_offset,
                format!(
                    "channel {name}: bit offset {} and {} bits do not describe a value",
                    field.bit_offset, field.bit_count
                ),
            ));
        }
        if field.end() > record_bytes {
            return Err(bad(cg_offset, format!("channel {name} reaches past the {record_bytes}-byte record")));
        }
    }
    if !fields.contains_key("ID") {
        return Err(bad(cg_offset, format!("the {} group has no {prefix}ID channel", kind.name())));
    }
    Ok(Some(Group { kind, time: time.field, fields }))
}

/// The records of a data group's data blocks, in order, into `out`.
fn data_of(file: &[u8], offset: u64, out: &mut Vec<u8>, visited: &mut HashSet<u64>) -> Result<(), LogError> {
    if offset == 0 {
        return Ok(());
    }
    follow_once(visited, offset)?;
    let data_block = block::read(file, offset, &[b"DT", b"DZ", b"DL", b"HL"])?;
    match &data_block.id {
        b"DT" => out.extend_from_slice(data_block.data),
        b"DZ" => inflate(offset, data_block.data, out)?,
        b"HL" => data_of(file, data_block.link(0), out, visited)?,
        _ => {
            for &part in &data_block.links[1..] {
                data_of(file, part, out, visited)?;
            }
            data_of(file, data_block.link(0), out, visited)?;
        }
    }
    Ok(())
}

/// A `DZ` block's records: deflate, or transposed then deflated.
fn inflate(offset: u64, data: &[u8], out: &mut Vec<u8>) -> Result<(), LogError> {
    let fields = Fields { offset, data };
    if fields.bytes(0, 2)? != b"DT" {
        return Err(bad(offset, "a compressed block of something other than records (DT) is not read"));
    }
    let zip_type = fields.u8(2)?;
    let columns = fields.u32(4)? as usize;
    let original = fields.u64(8)?;
    let compressed = fields.u64(16)?;
    let body = usize::try_from(compressed).ok().and_then(|n| data.get(24..24 + n));
    let Some(body) = body else {
        return Err(bad(offset, format!("compressed length {compressed} runs past the block")));
    };
    if original > compressed.saturating_mul(MAX_INFLATE_RATIO) + 1024 {
        return Err(bad(offset, format!("{compressed} compressed bytes cannot inflate to the {original} claimed")));
    }
    let start = out.len();
    let read = flate2::read::ZlibDecoder::new(body)
        .take(original + 1)
        .read_to_end(out)
        .map_err(|e| bad(offset, format!("cannot inflate: {e}")))?;
    if read as u64 != original {
        return Err(bad(offset, format!("inflates to {read} bytes, not the {original} claimed")));
    }
    match zip_type {
        0 => {}
        1 if columns > 0 => {
            let inflated = &mut out[start..];
            let rows = inflated.len() / columns;
            let transposed = inflated[..rows * columns].to_vec();
            for row in 0..rows {
                for column in 0..columns {
                    inflated[row * columns + column] = transposed[column * rows + row];
                }
            }
        }
        _ => {
            return Err(bad(
                offset,
                format!("compression {zip_type} (columns {columns}) is not deflate or transposed deflate"),
            ))
        }
    }
    Ok(())
}

/// Turning records into [`Record`]s.
struct Decode<'a> {
    dg_offset: u64,
    start_ns: i128,
    names: &'a HashMap<u64, String>,
    out: &'a mut Vec<(i128, Record)>,
}

impl Decode<'_> {
    /// One channel group's records back to back.
    fn sorted(&mut self, group: &ChannelGroup, data: &[u8]) -> Result<(), LogError> {
        let Some(can) = &group.group else { return Ok(()) };
        let needed = (group.cycles as u128) * (group.record_bytes as u128);
        if group.record_bytes == 0 || (data.len() as u128) < needed {
            return Err(bad(
                self.dg_offset,
                format!(
                    "{} bytes of data hold fewer than the {} records of {} bytes the group counts",
                    data.len(),
                    group.cycles,
                    group.record_bytes
                ),
            ));
        }
        for (index, record) in data.chunks_exact(group.record_bytes).take(group.cycles as usize).enumerate() {
            self.record(can, index, record)?;
        }
        Ok(())
    }

    /// Records of several groups, each after its group's record id.
    fn unsorted(&mut self, groups: &[ChannelGroup], id_bytes: usize, data: &[u8]) -> Result<(), LogError> {
        let mut at = 0;
        let mut counts = vec![0usize; groups.len()];
        while at < data.len() {
            let id = Field { byte_offset: at, bit_offset: 0, bit_count: id_bytes as u32 * 8, data_type: 0 };
            if id.end() > data.len() {
                return Err(bad(self.dg_offset, format!("the data ends inside a record id at byte {at}")));
            }
            let record_id = id.uint(data);
            let Some(index) = groups.iter().position(|g| g.record_id == record_id) else {
                return Err(bad(self.dg_offset, format!("record id {record_id} at byte {at} names no channel group")));
            };
            at += id_bytes;
            let length = if groups[index].vlsd {
                let prefix =
                    data.get(at..at + 4).ok_or_else(|| bad(self.dg_offset, "the data ends inside a length"))?;
                at += 4;
                u32::from_le_bytes(prefix.try_into().expect("4 bytes")) as usize
            } else {
                groups[index].record_bytes
            };
            let record = data
                .get(at..at.saturating_add(length))
                .ok_or_else(|| bad(self.dg_offset, format!("the data ends inside a record at byte {at}")))?;
            at += length;
            if let (Some(can), false) = (&groups[index].group, groups[index].vlsd) {
                self.record(can, counts[index], record)?;
            }
            counts[index] += 1;
        }
        Ok(())
    }

    fn record(&mut self, group: &Group, index: usize, record: &[u8]) -> Result<(), LogError> {
        let seconds = if group.time.bit_count == 64 {
            f64::from_le_bytes(record[group.time.byte_offset..group.time.byte_offset + 8].try_into().expect("8 bytes"))
        } else {
            f64::from(f32::from_le_bytes(
                record[group.time.byte_offset..group.time.byte_offset + 4].try_into().expect("4 bytes"),
            ))
        };
        // `as` saturates (NaN to 0): a damaged time gives a clamped timestamp, not a panic.
        let timestamp = self.start_ns.saturating_add((seconds * 1e9).round() as i128);
        let value = |name: &str| group.fields.get(name).map(|f| f.uint(record));
        let frame = frame(group, record, &value)
            .map_err(|message| bad(self.dg_offset, format!("record {index} of {}: {message}", group.kind.name())))?;
        let bus_channel = value("BusChannel").unwrap_or(0);
        let channel = self.names.get(&bus_channel).cloned().unwrap_or_else(|| format!("can{bus_channel}"));
        let direction = match group.fields.get("Dir") {
            Some(field) if field.data_type <= 1 => {
                Some(if field.uint(record) == 0 { Direction::Rx } else { Direction::Tx })
            }
            _ => None,
        };
        let timestamp_ns = u64::try_from(timestamp.max(0)).unwrap_or(u64::MAX);
        self.out.push((timestamp, Record { timestamp_ns, channel, frame, direction }));
        Ok(())
    }
}

/// The frame a record holds.
fn frame(group: &Group, record: &[u8], value: &dyn Fn(&str) -> Option<u64>) -> Result<Frame, String> {
    let raw_id = value("ID").unwrap_or(0);
    let id = (raw_id & 0x1FFF_FFFF) as u32;
    // Some loggers mark a 29-bit id with bit 31 of ID instead of IDE.
    let extended = value("IDE").unwrap_or(0) != 0 || raw_id & 0x8000_0000 != 0;
    let dlc = value("DLC");
    let length = match (value("DataLength"), dlc) {
        (Some(length), _) => length as usize,
        (None, Some(dlc)) => FD_LENGTHS.get(dlc as usize).copied().unwrap_or(64) as usize,
        (None, None) => 0,
    };
    let bytes = |length: usize| -> Result<&[u8], String> {
        let Some(field) = group.fields.get("DataBytes") else {
            return if length == 0 { Ok(&[]) } else { Err("DataLength without a DataBytes channel".into()) };
        };
        let available = field.bit_count as usize / 8;
        if length > available {
            return Err(format!("DataLength {length} is more than the {available} DataBytes"));
        }
        Ok(&record[field.byte_offset..field.byte_offset + length])
    };
    let result = match group.kind {
        GroupKind::Remote => Frame::remote(id, extended, dlc.map_or(length, |d| d as usize)),
        GroupKind::Error => {
            let mut detail = [0; 8];
            let data = bytes(length)?;
            detail[..data.len().min(8)].copy_from_slice(&data[..data.len().min(8)]);
            Frame::error(id, detail)
        }
        GroupKind::Data if value("EDL").unwrap_or(0) != 0 => {
            let mut flags = FrameFlags::empty();
            flags.set(FrameFlags::EXTENDED, extended);
            flags.set(FrameFlags::BRS, value("BRS").unwrap_or(0) != 0);
            flags.set(FrameFlags::ESI, value("ESI").unwrap_or(0) != 0);
            Frame::can_fd(id, flags, bytes(length)?)
        }
        GroupKind::Data => Frame::can(id, extended, bytes(length)?).and_then(|mut frame| {
            match dlc {
                Some(dlc @ 9..=15) if length == 8 => frame.set_len8_dlc(dlc as u8)?,
                _ => {}
            }
            Ok(frame)
        }),
    };
    result.map_err(|e| e.to_string())
}
