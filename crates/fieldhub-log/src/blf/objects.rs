//! BLF objects: the 16-byte base header every object starts with, and the
//! CAN objects' bodies (layouts in the module doc of `blf`), encoded and
//! decoded.

use fieldhub_proto::frame::{FrameFlags, MAX_EXTENDED_ID};
use fieldhub_proto::Frame;

use super::{BlfError, MAX_OBJECT};
use crate::Direction;

/// Object types.
const CAN_MESSAGE: u32 = 1;
pub(super) const LOG_CONTAINER: u32 = 10;
const APP_TEXT: u32 = 65;
const CAN_ERROR_EXT: u32 = 73;
const CAN_MESSAGE2: u32 = 86;
const CAN_FD_MESSAGE: u32 = 100;
const CAN_FD_MESSAGE_64: u32 = 101;

/// Bytes of the base header ("LOBJ", sizes, version, type).
pub(super) const BASE_HEADER: usize = 16;
/// Bytes of a version-1 object header (base included).
const HEADER_V1: usize = 32;
/// Bytes of a version-2 object header (base included).
const HEADER_V2: usize = 40;
/// Object header flags: the time counts 10 µs steps (else ns).
const TIME_TEN_MICS: u32 = 1;
const TIME_ONE_NANS: u32 = 2;

/// CAN_MESSAGE flags, the id's extended bit.
const FLAG_TX: u8 = 0x01;
const FLAG_REMOTE: u8 = 0x80;
const ID_EXTENDED: u32 = 0x8000_0000;
/// CAN_FD_MESSAGE FD flags.
const FD_EDL: u8 = 0x1;
const FD_BRS: u8 = 0x2;
const FD_ESI: u8 = 0x4;
/// CAN_FD_MESSAGE_64 flags.
const FD64_REMOTE: u32 = 0x0010;
const FD64_EDL: u32 = 0x1000;
const FD64_BRS: u32 = 0x2000;
const FD64_ESI: u32 = 0x4000;
/// Bytes of CAN_FD_MESSAGE_64's fixed part.
const FD64_FIXED: usize = 40;
/// The APP_TEXT comment that names a channel, before its number.
const CHANNEL_TEXT: &str = "fieldhub channel ";

/// An object's base header.
#[derive(Clone, Copy, Debug)]
pub(super) struct ObjectHeader {
    pub header_size: u16,
    pub version: u16,
    pub size: u32,
    pub kind: u32,
}

impl ObjectHeader {
    /// Parse and check a base header: the signature, and sizes that fit.
    pub fn parse(bytes: &[u8; BASE_HEADER]) -> Result<Self, BlfError> {
        let signature: [u8; 4] = bytes[..4].try_into().expect("4 bytes");
        if &signature != b"LOBJ" {
            return Err(BlfError::BadSignature(signature));
        }
        let header = Self {
            header_size: u16::from_le_bytes([bytes[4], bytes[5]]),
            version: u16::from_le_bytes([bytes[6], bytes[7]]),
            size: u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes")),
            kind: u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")),
        };
        if header.size > MAX_OBJECT {
            return Err(BlfError::Oversize { size: header.size.into(), max: MAX_OBJECT });
        }
        let problem = if usize::from(header.header_size) < BASE_HEADER {
            Some("shorter than the 16-byte base header")
        } else if u32::from(header.header_size) > header.size {
            Some("longer than the object")
        } else {
            None
        };
        match problem {
            Some(problem) => Err(BlfError::BadObjectHeader { header: header.header_size, size: header.size, problem }),
            None => Ok(header),
        }
    }

    /// Padding after the object.
    pub fn padding(&self) -> usize {
        self.size as usize % 4
    }
}

/// What an object means to a reader.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Object {
    Frame {
        time_ns: u64,
        channel: u16,
        frame: Frame,
        direction: Option<Direction>,
    },
    ChannelName {
        channel: u16,
        name: String,
    },
    /// An object of another type (or header version): skipped.
    Other,
}

/// Decode a whole object (`bytes.len() == header.size`), not a container.
pub(super) fn decode(header: ObjectHeader, bytes: &[u8]) -> Result<Object, BlfError> {
    let needs = match header.version {
        1 => HEADER_V1,
        2 => HEADER_V2,
        _ => return Ok(Object::Other),
    };
    let name = object_name(header.kind);
    if usize::from(header.header_size) < needs {
        return Err(BlfError::BadObjectHeader {
            header: header.header_size,
            size: header.size,
            problem: "shorter than its version's header",
        });
    }
    let flags = u32_at(bytes, 16);
    let time = u64::from_le_bytes(bytes[24..32].try_into().expect("8 bytes"));
    let time_ns = if flags == TIME_TEN_MICS { time.checked_mul(10_000) } else { Some(time) };
    let time_ns = time_ns.ok_or(BlfError::TimeOverflow(time))?;
    let body = &bytes[usize::from(header.header_size)..];
    let short = |needs: usize| BlfError::ShortObject {
        object: name,
        size: bytes.len(),
        needs: needs + bytes.len() - body.len(),
    };
    let bad =
        |problem: fieldhub_proto::frame::FrameError| BlfError::BadFrame { object: name, problem: problem.to_string() };
    let (channel, frame, direction) = match header.kind {
        CAN_MESSAGE | CAN_MESSAGE2 => {
            let body = body.get(..16).ok_or_else(|| short(16))?;
            let (flags, dlc, raw_id) = (body[2], body[3], u32_at(body, 4));
            let (id, extended) = (raw_id & !ID_EXTENDED, raw_id & ID_EXTENDED != 0);
            let frame = classic(id, extended, flags & FLAG_REMOTE != 0, dlc, &body[8..16]).map_err(bad)?;
            (u16_at(body, 0), frame, Some(direction_of(flags & FLAG_TX != 0)))
        }
        CAN_FD_MESSAGE => {
            let body = body.get(..84).ok_or_else(|| short(84))?;
            let (flags, dlc, raw_id) = (body[2], body[3], u32_at(body, 4));
            let (id, extended) = (raw_id & !ID_EXTENDED, raw_id & ID_EXTENDED != 0);
            let (fd_flags, valid) = (body[13], usize::from(body[14]));
            let frame = if fd_flags & FD_EDL != 0 {
                let data = body[20..84].get(..valid).ok_or_else(|| fd_length(name, valid))?;
                fd(id, extended, fd_flags & FD_BRS != 0, fd_flags & FD_ESI != 0, data).map_err(bad)?
            } else {
                classic(id, extended, flags & FLAG_REMOTE != 0, dlc, &body[20..28]).map_err(bad)?
            };
            (u16_at(body, 0), frame, Some(direction_of(flags & FLAG_TX != 0)))
        }
        CAN_FD_MESSAGE_64 => {
            let fixed = body.get(..FD64_FIXED).ok_or_else(|| short(FD64_FIXED))?;
            let (dlc, valid, raw_id, flags) = (fixed[1], usize::from(fixed[2]), u32_at(fixed, 4), u32_at(fixed, 12));
            let (id, extended) = (raw_id & !ID_EXTENDED, raw_id & ID_EXTENDED != 0);
            // Data past the object (python-can issue 1905) reads as zeros, as CANoe does.
            let mut data = [0; 64];
            let mut present = &body[FD64_FIXED..];
            let ext_data = usize::from(fixed[35]);
            if ext_data > 0 {
                present = &present
                    [..ext_data.saturating_sub(usize::from(header.header_size) + FD64_FIXED).min(present.len())];
            }
            let valid = valid.min(64);
            let copied = valid.min(present.len());
            data[..copied].copy_from_slice(&present[..copied]);
            let frame = if flags & FD64_EDL != 0 {
                fd(id, extended, flags & FD64_BRS != 0, flags & FD64_ESI != 0, &data[..valid]).map_err(bad)?
            } else {
                classic(id, extended, flags & FD64_REMOTE != 0, dlc, &data[..valid.min(8)]).map_err(bad)?
            };
            (u16::from(fixed[0]), frame, Some(direction_of(fixed[34] != 0)))
        }
        CAN_ERROR_EXT => {
            let body = body.get(..32).ok_or_else(|| short(32))?;
            let dlc = usize::from(body[10]).min(8);
            let mut data = [0; 8];
            data[..dlc].copy_from_slice(&body[24..24 + dlc]);
            let frame = Frame::error(u32_at(body, 16) & MAX_EXTENDED_ID, data).map_err(bad)?;
            (u16_at(body, 0), frame, None)
        }
        APP_TEXT => return Ok(channel_name(body).unwrap_or(Object::Other)),
        _ => return Ok(Object::Other),
    };
    if channel == 0 {
        return Err(BlfError::ChannelZero { object: name });
    }
    Ok(Object::Frame { time_ns, channel, frame, direction })
}

fn fd_length(object: &'static str, valid: usize) -> BlfError {
    BlfError::BadFrame { object, problem: format!("{valid} valid data bytes: a CAN FD frame carries at most 64") }
}

/// A classic data or remote frame; DLC 9..=15 with 8 bytes is kept.
fn classic(
    id: u32,
    extended: bool,
    remote: bool,
    dlc: u8,
    data: &[u8],
) -> Result<Frame, fieldhub_proto::frame::FrameError> {
    let len = usize::from(dlc.min(8));
    if remote {
        return Frame::remote(id, extended, len);
    }
    let mut frame = Frame::can(id, extended, &data[..len.min(data.len())])?;
    if dlc > 8 {
        frame.set_len8_dlc(dlc.min(15))?;
    }
    Ok(frame)
}

fn fd(id: u32, extended: bool, brs: bool, esi: bool, data: &[u8]) -> Result<Frame, fieldhub_proto::frame::FrameError> {
    let mut flags = FrameFlags::empty();
    flags.set(FrameFlags::EXTENDED, extended);
    flags.set(FrameFlags::BRS, brs);
    flags.set(FrameFlags::ESI, esi);
    Frame::can_fd(id, flags, data)
}

fn direction_of(tx: bool) -> Direction {
    if tx {
        Direction::Tx
    } else {
        Direction::Rx
    }
}

/// An APP_TEXT comment `fieldhub channel N = NAME`.
fn channel_name(body: &[u8]) -> Option<Object> {
    let length = u32_at(body.get(..16)?, 8) as usize;
    let text = std::str::from_utf8(body.get(16..16usize.checked_add(length)?)?).ok()?;
    let (number, name) = text.trim_end_matches('\0').strip_prefix(CHANNEL_TEXT)?.split_once(" = ")?;
    let channel = number.parse().ok().filter(|&n| n > 0)?;
    Some(Object::ChannelName { channel, name: name.to_owned() })
}

fn object_name(kind: u32) -> &'static str {
    match kind {
        CAN_MESSAGE => "CAN_MESSAGE",
        CAN_MESSAGE2 => "CAN_MESSAGE2",
        CAN_FD_MESSAGE => "CAN_FD_MESSAGE",
        CAN_FD_MESSAGE_64 => "CAN_FD_MESSAGE_64",
        CAN_ERROR_EXT => "CAN_ERROR_EXT",
        APP_TEXT => "APP_TEXT",
        LOG_CONTAINER => "LOG_CONTAINER",
        _ => "object",
    }
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Append an object's header (version 1, time in ns) for a body of
/// `body` bytes; the caller appends the body, then [`end_object`].
fn begin_object(out: &mut Vec<u8>, kind: u32, time_ns: u64, body: usize) {
    let size = (HEADER_V1 + body) as u32;
    out.extend_from_slice(b"LOBJ");
    out.extend_from_slice(&(HEADER_V1 as u16).to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&TIME_ONE_NANS.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&time_ns.to_le_bytes());
}

fn end_object(out: &mut Vec<u8>, body: usize) {
    out.resize(out.len() + (HEADER_V1 + body) % 4, 0);
}

/// Append a frame as CAN_MESSAGE2, CAN_FD_MESSAGE_64 or CAN_ERROR_EXT.
pub(super) fn encode_frame(out: &mut Vec<u8>, time_ns: u64, channel: u16, frame: &Frame, direction: Direction) {
    let raw_id = frame.id() | if frame.is_extended() { ID_EXTENDED } else { 0 };
    let tx = direction == Direction::Tx;
    if frame.is_error() {
        begin_object(out, CAN_ERROR_EXT, time_ns, 32);
        out.extend_from_slice(&channel.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&[8, 0, 0, 0, 0, 0]);
        out.extend_from_slice(&raw_id.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        let mut data = [0; 8];
        data.copy_from_slice(&frame.data()[..8]);
        out.extend_from_slice(&data);
        end_object(out, 32);
    } else if frame.is_fd() {
        let len = frame.len();
        let body = FD64_FIXED + len;
        begin_object(out, CAN_FD_MESSAGE_64, time_ns, body);
        let mut flags = FD64_EDL;
        if frame.flags().contains(FrameFlags::BRS) {
            flags |= FD64_BRS;
        }
        if frame.flags().contains(FrameFlags::ESI) {
            flags |= FD64_ESI;
        }
        out.extend_from_slice(&[channel.min(255) as u8, frame.dlc(), len as u8, 0]);
        out.extend_from_slice(&raw_id.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&[0; 18]);
        out.extend_from_slice(&[u8::from(tx), 0, 0, 0, 0, 0]);
        out.extend_from_slice(frame.data());
        end_object(out, body);
    } else {
        begin_object(out, CAN_MESSAGE2, time_ns, 24);
        let flags = if frame.is_remote() { FLAG_REMOTE } else { 0 } | if tx { FLAG_TX } else { 0 };
        out.extend_from_slice(&channel.to_le_bytes());
        out.extend_from_slice(&[flags, frame.dlc()]);
        out.extend_from_slice(&raw_id.to_le_bytes());
        let mut data = [0; 8];
        data[..frame.data().len()].copy_from_slice(frame.data());
        out.extend_from_slice(&data);
        out.extend_from_slice(&[0; 8]);
        end_object(out, 24);
    }
}

/// Append the APP_TEXT comment naming `channel`.
pub(super) fn encode_channel_name(out: &mut Vec<u8>, time_ns: u64, channel: u16, name: &str) {
    let text_len = CHANNEL_TEXT.len() + channel.to_string().len() + 3 + name.len();
    let body = 16 + text_len;
    begin_object(out, APP_TEXT, time_ns, body);
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&(text_len as u32).to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(format!("{CHANNEL_TEXT}{channel} = {name}").as_bytes());
    end_object(out, body);
}

/// Bytes of a LOG_CONTAINER's header (base and container fields).
pub(super) const CONTAINER_HEADER: usize = BASE_HEADER + 16;

/// A LOG_CONTAINER's header for `data` bytes (compressed with `method`)
/// holding `uncompressed` bytes; the data and its padding follow it.
pub(super) fn container_header(method: u16, data: usize, uncompressed: usize) -> [u8; CONTAINER_HEADER] {
    let mut head = [0; CONTAINER_HEADER];
    head[..4].copy_from_slice(b"LOBJ");
    head[4..6].copy_from_slice(&(BASE_HEADER as u16).to_le_bytes());
    head[6..8].copy_from_slice(&1u16.to_le_bytes());
    head[8..12].copy_from_slice(&((CONTAINER_HEADER + data) as u32).to_le_bytes());
    head[12..16].copy_from_slice(&LOG_CONTAINER.to_le_bytes());
    head[16..18].copy_from_slice(&method.to_le_bytes());
    head[24..28].copy_from_slice(&(uncompressed as u32).to_le_bytes());
    head
}

/// Bytes of a container's padding for `data` bytes of (compressed) data.
pub(super) fn container_padding(data: usize) -> usize {
    (CONTAINER_HEADER + data) % 4
}
