//! cannelloni's wire formats (mguentner/cannelloni `doc/udp_format.md` and
//! `doc/tcp_protocol.md`), both ways, without I/O.
//!
//! A frame record is `can_id` (Linux form with `CAN_EFF_FLAG`,
//! `CAN_RTR_FLAG`, `CAN_ERR_FLAG`; big-endian), one length byte whose top
//! bit (`0x80`) marks CAN FD, then for CAN FD the `canfd_frame` flags byte
//! (`CANFD_BRS`, `CANFD_ESI`), then the data — none for a remote frame,
//! whose length byte is the length it requests. A UDP packet is a 5-byte
//! header (version 2, op code 0 = DATA, a sequence number that wraps at 256,
//! a big-endian frame count) and that many records; the TCP stream is the
//! banner `CANNELLONIv1` each way, then records back to back.
//!
//! Invariants:
//! - The decoders never panic and never allocate: a packet decodes into
//!   the caller's reused buffer, all of it or none (a malformed packet adds
//!   no frame); the stream decoder hands out each complete record once.
//! - Every frame decoded is a valid [`Frame`]: a record the frame model
//!   refuses (an 11-bit id above 0x7FF, a classic length above 8, an FD
//!   length that is no FD length) is an error naming it, never truncated.
//! - Unknown `canfd_frame` flag bits (`CANFD_FDF`, which newer kernels set)
//!   are ignored, as a SocketCAN socket ignores them on write.

use fieldhub_proto::frame::{
    CAN_EFF_FLAG, CAN_ERR_FLAG, CAN_RTR_FLAG, ERROR_FRAME_LEN, MAX_EXTENDED_ID, MAX_STANDARD_ID,
};
use fieldhub_proto::{Frame, FrameError, FrameFlags};

/// The banner both sides of a TCP session send first, without a terminator.
pub const BANNER: &[u8; 12] = b"CANNELLONIv1";
/// The packet format version this codec speaks.
pub const VERSION: u8 = 2;
/// The op code of a packet that carries frames (cannelloni defines ACK and
/// NACK too but never sends them).
pub const OP_DATA: u8 = 0;
/// Bytes of a packet header.
pub const HEADER_LEN: usize = 5;
/// The length byte's CAN FD mark.
const FD_MARK: u8 = 0x80;
/// `canfd_frame` flags (`<linux/can.h>`).
const CANFD_BRS: u8 = 0x01;
const CANFD_ESI: u8 = 0x02;
/// `can_id` bits below the flags.
const ID_MASK: u32 = MAX_EXTENDED_ID;
/// The longest record: id, length, flags and 64 data bytes.
pub const MAX_RECORD_LEN: usize = 4 + 1 + 1 + 64;

/// Why bytes from a peer are not cannelloni.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    #[error("a packet of {len} bytes is shorter than cannelloni's 5-byte header")]
    ShortPacket { len: usize },
    #[error("packet format version {0}, but this endpoint speaks cannelloni's version 2")]
    Version(u8),
    #[error("op code {0}, but only DATA (0) packets carry frames")]
    OpCode(u8),
    #[error("the packet says {count} frames but ends inside frame {index}")]
    Truncated { count: u16, index: u16 },
    #[error("{extra} bytes follow the packet's {count} frames")]
    Trailing { count: u16, extra: usize },
    #[error("a length byte of {len} is longer than any CAN FD frame (64)")]
    Length { len: u8 },
    #[error("a remote frame cannot be CAN FD")]
    RemoteFd,
    #[error("can_id {can_id:#010x}: {source}")]
    Frame {
        can_id: u32,
        #[source]
        source: FrameError,
    },
}

/// One record at the front of `buf`: the frame and the bytes it took, or
/// `Ok(None)` when `buf` ends before the record does.
pub fn decode_record(buf: &[u8]) -> Result<Option<(Frame, usize)>, CodecError> {
    let Some(&[a, b, c, d, len_byte]) = buf.get(..5) else { return Ok(None) };
    let can_id = u32::from_be_bytes([a, b, c, d]);
    let fd = len_byte & FD_MARK != 0;
    let len = len_byte & !FD_MARK;
    if len > 64 {
        return Err(CodecError::Length { len: len_byte });
    }
    let mut at = 5;
    let mut fd_flags = 0;
    if fd {
        let Some(&flags) = buf.get(at) else { return Ok(None) };
        fd_flags = flags;
        at += 1;
    }
    let remote = can_id & CAN_RTR_FLAG != 0 && can_id & CAN_ERR_FLAG == 0;
    let data_len = if remote { 0 } else { usize::from(len) };
    let Some(data) = buf.get(at..at + data_len) else { return Ok(None) };
    let frame = frame_of(can_id, fd, fd_flags, usize::from(len), data)?;
    Ok(Some((frame, at + data_len)))
}

fn frame_of(can_id: u32, fd: bool, fd_flags: u8, len: usize, data: &[u8]) -> Result<Frame, CodecError> {
    let fail = |source| CodecError::Frame { can_id, source };
    let id = can_id & ID_MASK;
    if can_id & CAN_ERR_FLAG != 0 {
        if data.len() > ERROR_FRAME_LEN {
            return Err(fail(FrameError::ErrorFrameLength { len: data.len() }));
        }
        let mut details = [0u8; ERROR_FRAME_LEN];
        details[..data.len()].copy_from_slice(data);
        return Frame::error(id, details).map_err(fail);
    }
    let extended = can_id & CAN_EFF_FLAG != 0;
    if !extended && id > MAX_STANDARD_ID {
        return Err(fail(FrameError::StandardIdTooLarge { id }));
    }
    if can_id & CAN_RTR_FLAG != 0 {
        if fd {
            return Err(CodecError::RemoteFd);
        }
        return Frame::remote(id, extended, len).map_err(fail);
    }
    if fd {
        let mut flags = FrameFlags::empty();
        flags.set(FrameFlags::EXTENDED, extended);
        flags.set(FrameFlags::BRS, fd_flags & CANFD_BRS != 0);
        flags.set(FrameFlags::ESI, fd_flags & CANFD_ESI != 0);
        return Frame::can_fd(id, flags, data).map_err(fail);
    }
    Frame::can(id, extended, data).map_err(fail)
}

/// The bytes [`encode_record`] writes for `frame`.
pub fn record_len(frame: &Frame) -> usize {
    let data = if frame.is_remote() { 0 } else { frame.len() };
    5 + usize::from(frame.is_fd()) + data
}

/// Append `frame` as one record.
pub fn encode_record(frame: &Frame, out: &mut Vec<u8>) {
    out.extend_from_slice(&frame.socketcan_id().to_be_bytes());
    // A frame's length is at most 64, so it fits below the FD mark.
    let len = frame.len() as u8;
    if frame.is_fd() {
        let mut flags = 0;
        if frame.flags().contains(FrameFlags::BRS) {
            flags |= CANFD_BRS;
        }
        if frame.flags().contains(FrameFlags::ESI) {
            flags |= CANFD_ESI;
        }
        out.extend_from_slice(&[len | FD_MARK, flags]);
    } else {
        out.push(len);
    }
    if !frame.is_remote() {
        out.extend_from_slice(frame.data());
    }
}

/// Decode a whole UDP packet into `frames` (cleared first): its sequence
/// number, or the error that rejects all of it (`frames` then empty).
pub fn decode_packet(packet: &[u8], frames: &mut Vec<Frame>) -> Result<u8, CodecError> {
    frames.clear();
    let result = decode_packet_into(packet, frames);
    if result.is_err() {
        frames.clear();
    }
    result
}

fn decode_packet_into(packet: &[u8], frames: &mut Vec<Frame>) -> Result<u8, CodecError> {
    let Some(&[version, op, seq, c0, c1]) = packet.get(..HEADER_LEN) else {
        return Err(CodecError::ShortPacket { len: packet.len() });
    };
    if version != VERSION {
        return Err(CodecError::Version(version));
    }
    if op != OP_DATA {
        return Err(CodecError::OpCode(op));
    }
    let count = u16::from_be_bytes([c0, c1]);
    let mut rest = &packet[HEADER_LEN..];
    for index in 0..count {
        let Some((frame, used)) = decode_record(rest)? else {
            return Err(CodecError::Truncated { count, index });
        };
        frames.push(frame);
        rest = &rest[used..];
    }
    if !rest.is_empty() {
        return Err(CodecError::Trailing { count, extra: rest.len() });
    }
    Ok(seq)
}

/// Builds one UDP packet at a time in a reused buffer.
pub struct PacketWriter {
    buf: Vec<u8>,
    max_len: usize,
    count: u16,
}

impl PacketWriter {
    /// Packets of at most `max_len` bytes (at least a header and the
    /// longest record).
    pub fn new(max_len: usize) -> Self {
        let max_len = max_len.max(HEADER_LEN + MAX_RECORD_LEN);
        let mut writer = Self { buf: Vec::with_capacity(max_len), max_len, count: 0 };
        writer.start(0);
        writer
    }

    /// Start a packet with sequence number `seq`, dropping what was there.
    pub fn start(&mut self, seq: u8) {
        self.buf.clear();
        self.buf.extend_from_slice(&[VERSION, OP_DATA, seq, 0, 0]);
        self.count = 0;
    }

    /// Add `frame`; `false` (nothing added) when it does not fit.
    pub fn push(&mut self, frame: &Frame) -> bool {
        if self.count == u16::MAX || self.buf.len() + record_len(frame) > self.max_len {
            return false;
        }
        encode_record(frame, &mut self.buf);
        self.count += 1;
        self.buf[3..5].copy_from_slice(&self.count.to_be_bytes());
        true
    }

    /// Frames in the packet.
    pub fn count(&self) -> u16 {
        self.count
    }

    /// The packet as it stands.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// Records of a TCP stream as they arrive in pieces.
pub struct StreamDecoder {
    buf: Vec<u8>,
    /// Bytes at the front of `buf` already handed out.
    taken: usize,
}

impl Default for StreamDecoder {
    fn default() -> Self {
        Self { buf: Vec::with_capacity(4096), taken: 0 }
    }
}

impl StreamDecoder {
    /// Add bytes read from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.taken > 0 {
            self.buf.drain(..self.taken);
            self.taken = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete record, `Ok(None)` until more bytes come. After an
    /// error the stream has lost its framing: its session must end.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, CodecError> {
        match decode_record(&self.buf[self.taken..])? {
            Some((frame, used)) => {
                self.taken += used;
                Ok(Some(frame))
            }
            None => Ok(None),
        }
    }

    /// Bytes held that are not a whole record yet.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(seq: u8, count: u16, records: &[u8]) -> Vec<u8> {
        let mut p = vec![VERSION, OP_DATA, seq];
        p.extend_from_slice(&count.to_be_bytes());
        p.extend_from_slice(records);
        p
    }

    #[test]
    fn records_read_as_cannelloni_writes_them() {
        // A standard data frame, an extended remote frame asking for 4 bytes
        // (no data follows), an FD frame with BRS and FDF set.
        let mut records = vec![0x00, 0x00, 0x01, 0x23, 2, 0xAA, 0xBB];
        records.extend_from_slice(&[0xC0, 0x01, 0x23, 0x45, 4]);
        records.extend_from_slice(&[0x00, 0x00, 0x00, 0x10, 0x80 | 12, CANFD_BRS | 0x04]);
        records.extend_from_slice(&[7; 12]);
        let mut frames = Vec::new();
        assert_eq!(decode_packet(&packet(9, 3, &records), &mut frames), Ok(9));
        assert_eq!(frames[0], Frame::can(0x123, false, &[0xAA, 0xBB]).unwrap());
        assert_eq!(frames[1], Frame::remote(0x0001_2345, true, 4).unwrap());
        assert_eq!(frames[2], Frame::can_fd(0x10, FrameFlags::BRS, &[7; 12]).unwrap());
    }

    #[test]
    fn every_kind_of_frame_survives_a_round_trip() {
        let frames = [
            Frame::can(0x7FF, false, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
            Frame::can(0x1FFF_FFFF, true, &[]).unwrap(),
            Frame::remote(0x100, false, 8).unwrap(),
            Frame::can_fd(0x1234, FrameFlags::EXTENDED | FrameFlags::ESI, &[9; 64]).unwrap(),
            Frame::error(0x04, [0, 8, 0, 0, 0, 0, 0, 0]).unwrap(),
        ];
        let mut writer = PacketWriter::new(1400);
        writer.start(200);
        for frame in &frames {
            assert!(writer.push(frame));
        }
        let mut decoded = Vec::new();
        assert_eq!(decode_packet(writer.bytes(), &mut decoded), Ok(200));
        assert_eq!(decoded, frames);

        let mut stream = StreamDecoder::default();
        let mut bytes = Vec::new();
        frames.iter().for_each(|f| encode_record(f, &mut bytes));
        // Fed a byte at a time, each record comes out once, when whole.
        let mut out = Vec::new();
        for b in &bytes {
            stream.feed(std::slice::from_ref(b));
            while let Some(frame) = stream.next_frame().unwrap() {
                out.push(frame);
            }
        }
        assert_eq!(out, frames);
        assert_eq!(stream.pending(), 0);
    }

    #[test]
    fn a_full_packet_refuses_the_next_frame() {
        let frame = Frame::can_fd(1, FrameFlags::empty(), &[0; 64]).unwrap();
        let mut writer = PacketWriter::new(HEADER_LEN + 2 * record_len(&frame));
        assert!(writer.push(&frame) && writer.push(&frame));
        assert!(!writer.push(&frame));
        assert_eq!(writer.count(), 2);
        assert_eq!(writer.bytes().len(), HEADER_LEN + 2 * 70);
    }

    #[test]
    fn a_malformed_packet_is_rejected_whole_with_its_reason() {
        let good = [0, 0, 1, 0, 1, 0x11];
        let mut frames = vec![Frame::can(1, false, &[]).unwrap()];
        let cases: [(Vec<u8>, CodecError); 8] = [
            (vec![2, 0], CodecError::ShortPacket { len: 2 }),
            (vec![1, 0, 0, 0, 0], CodecError::Version(1)),
            (vec![2, 1, 0, 0, 0], CodecError::OpCode(1)),
            (packet(0, 2, &good), CodecError::Truncated { count: 2, index: 1 }),
            (packet(0, 1, &[good.as_slice(), &[0]].concat()), CodecError::Trailing { count: 1, extra: 1 }),
            (packet(0, 1, &[0, 0, 0, 1, 65]), CodecError::Length { len: 65 }),
            (packet(0, 1, &[0x40, 0, 0, 1, 0x80, 0]), CodecError::RemoteFd),
            (
                packet(0, 1, &[0, 0, 0x08, 0, 0]),
                CodecError::Frame { can_id: 0x800, source: FrameError::StandardIdTooLarge { id: 0x800 } },
            ),
        ];
        for (bytes, error) in cases {
            assert_eq!(decode_packet(&bytes, &mut frames), Err(error.clone()), "{bytes:?}");
            assert!(frames.is_empty(), "no frame of a rejected packet is kept: {error}");
        }
        let classic_nine = packet(0, 1, &[0, 0, 0, 1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(decode_packet(&classic_nine, &mut frames), Err(CodecError::Frame { .. })));
        let fd_thirteen = packet(0, 1, &[[0, 0, 0, 1, 0x80 | 13, 0].as_slice(), &[0; 13]].concat());
        assert!(matches!(decode_packet(&fd_thirteen, &mut frames), Err(CodecError::Frame { .. })));
    }

    #[test]
    fn an_empty_packet_is_valid_and_carries_its_sequence_number() {
        let mut frames = Vec::new();
        assert_eq!(decode_packet(&packet(77, 0, &[]), &mut frames), Ok(77));
        assert!(frames.is_empty());
    }

    #[test]
    fn the_decoders_take_any_bytes_without_panicking() {
        // A deterministic walk over short inputs of every first byte value
        // and lengths; the fuzz target covers the rest.
        let mut frames = Vec::new();
        let mut state: u32 = 0x1234_5678;
        for n in 0..20_000usize {
            let len = n % 90;
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    state as u8
                })
                .collect();
            let _ = decode_packet(&bytes, &mut frames);
            let mut stream = StreamDecoder::default();
            stream.feed(&bytes);
            while let Ok(Some(_)) = stream.next_frame() {}
        }
    }
}
