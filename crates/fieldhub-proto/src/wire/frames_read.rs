//! A `FRAMES` batch read in one pass, for a reader that forwards its frames
//! at once (the hub's shared-memory intake). [`FramesReader`] checks each
//! record as [`decode`](super::decode) checks a batch, and the caller writes
//! the frame of a checked record straight into the place it goes
//! ([`CheckedRecord::write_into`]): no checking pass before a second one
//! that reads every record again, no frame returned through memory only to
//! be copied on at once.
//!
//! Its functions are `#[inline]`: called from the hub's intake, in another
//! crate, each call returned its result through memory and the caller read
//! it back at once in wider pieces than it was written, stalling the
//! processor (perf: a third of the intake's time).
//!
//! Invariants: a record is handed out only after it passed
//! [`Frame::check_parts`], so no frame is ever built invalid; but whether
//! the batch as a whole is sound is known only when the reader has read it
//! to the end (`next_record` returned `Ok(None)`). A caller keeps what it
//! took provisionally and drops it when the reader fails — a batch is taken
//! whole or refused whole.

use super::{batch_header, read_record, DecodeError, RecordParts, RecordPosition};
use crate::frame::{Frame, FrameFlags, FrameKind};

/// Reads a `FRAMES` message's records in order, checking each.
pub struct FramesReader<'a> {
    /// All the records.
    records: &'a [u8],
    /// The records not read yet.
    rest: &'a [u8],
    /// Records the header announced.
    count: usize,
    /// Records read.
    index: usize,
}

/// A record [`FramesReader::next_record`] read and checked.
pub struct CheckedRecord<'a> {
    parts: RecordParts<'a>,
    index: usize,
}

impl<'a> FramesReader<'a> {
    /// A reader of the `FRAMES` message `payload` (the body after its type
    /// byte), its header checked.
    #[inline]
    pub fn new(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let (count, records) = batch_header(payload)?;
        Ok(Self { records, rest: records, count, index: 0 })
    }

    /// The next record, checked; `Ok(None)` once every record is read and
    /// nothing follows them (the batch is sound).
    #[inline]
    pub fn next_record(&mut self) -> Result<Option<CheckedRecord<'a>>, DecodeError> {
        let index = self.index;
        if index == self.count {
            return match self.rest.len() {
                0 => Ok(None),
                extra => Err(DecodeError::TrailingBytes { what: "FRAMES", extra }),
            };
        }
        let (parts, used) = read_record(self.rest, index)?;
        parts.check().map_err(|source| DecodeError::InvalidFrame { index, source })?;
        self.rest = &self.rest[used..];
        self.index += 1;
        Ok(Some(CheckedRecord { parts, index }))
    }

    /// Where the next record starts: a position for
    /// [`FrameBatch::resume`](super::FrameBatch::resume), and what
    /// [`CheckedRecord::index`] counts against.
    #[inline]
    pub fn position(&self) -> RecordPosition {
        RecordPosition { offset: self.records.len() - self.rest.len(), index: self.index }
    }
}

impl CheckedRecord<'_> {
    /// The record's place in its batch, from 0.
    #[inline]
    pub fn index(&self) -> usize {
        self.index
    }

    /// The port the frame travels on.
    #[inline]
    pub fn port(&self) -> u16 {
        self.parts.port
    }

    /// The record's `timestamp_ns`.
    #[inline]
    pub fn timestamp_ns(&self) -> u64 {
        self.parts.meta.timestamp_ns
    }

    /// Whether the frame has the `ECHO` flag (a transmit confirmation,
    /// which only a hub sends).
    #[inline]
    pub fn is_echo(&self) -> bool {
        self.parts.flags.contains(FrameFlags::ECHO)
    }

    /// Make `frame` this record's frame, where it is (what
    /// [`FrameBatch::iter`](super::FrameBatch::iter) gives for the record).
    #[inline]
    pub fn write_into(&self, frame: &mut Frame) {
        let p = &self.parts;
        match p.kind {
            // The payload is allocated anyway: nothing to win in place.
            FrameKind::CanXl | FrameKind::Raw => *frame = p.accepted().frame,
            _ => frame.assign_inline(p.kind, p.flags, p.id, p.len, p.len8_dlc, p.data),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::FrameMeta;
    use crate::payload::Payload;
    use crate::wire::{decode, BatchEncoder, Message};

    /// Frames of every inline kind, remote ones included, and a shared one.
    fn frames() -> Vec<Frame> {
        vec![
            Frame::can(0x123, false, &[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
            Frame::can(0x1234_5678, true, &[9]).unwrap(),
            Frame::remote(0x55, false, 6).unwrap(),
            Frame::can_fd(0x7FF, FrameFlags::BRS, &[0xAB; 64]).unwrap(),
            Frame::can_fd(0x10, FrameFlags::empty(), &[3; 12]).unwrap(),
            Frame::error(0x4, [1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
            Frame::lin(0x21, crate::lin::Checksum::Enhanced, &[1, 2]).unwrap(),
            Frame::can_xl(0x100, 0xAB, 3, FrameFlags::empty(), 0x1234_5678, &[7; 300]).unwrap(),
            Frame::can(0x1, false, &[]).unwrap(),
        ]
    }

    fn batch_of(frames: &[Frame]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut encoder = BatchEncoder::begin(&mut out);
        for (i, frame) in frames.iter().enumerate() {
            let meta = FrameMeta { channel: 0, sender: 0, seq: 0, timestamp_ns: 1000 + i as u64 };
            encoder.push(&mut out, i as u16, frame, &meta);
        }
        encoder.finish(&mut out);
        out
    }

    fn inline_bytes(frame: &Frame) -> Option<[u8; 64]> {
        match &frame.payload {
            Payload::Inline(bytes) => Some(bytes.0),
            Payload::Shared { .. } => None,
        }
    }

    #[test]
    fn records_written_over_any_frame_are_the_decoded_ones_down_to_the_zero_bytes_past_their_length() {
        let frames = frames();
        let out = batch_of(&frames);
        let Message::Frames(batch) = decode(&out[4..]).unwrap() else { panic!("not a batch") };
        // Written over each earlier frame in turn: a full FD payload, a
        // shared XL payload, an empty one.
        for dirty in &frames {
            let mut reader = FramesReader::new(&out[5..]).unwrap();
            for (i, decoded) in batch.iter().enumerate() {
                let record = reader.next_record().unwrap().expect("as many records as decoded");
                let mut frame = dirty.clone();
                record.write_into(&mut frame);
                assert_eq!(frame, decoded.frame, "record {i} over {dirty:?}");
                assert_eq!(inline_bytes(&frame), inline_bytes(&decoded.frame), "record {i} over {dirty:?}");
                assert_eq!(frame.kind() == FrameKind::CanXl, inline_bytes(&frame).is_none());
                assert_eq!((record.index(), record.port()), (i, decoded.port));
                assert_eq!(record.timestamp_ns(), decoded.meta.timestamp_ns);
                assert_eq!(record.is_echo(), decoded.frame.is_echo());
            }
            assert!(reader.next_record().unwrap().is_none());
        }
    }

    #[test]
    fn a_bad_record_or_trailing_bytes_fail_the_read_where_decode_fails_the_batch() {
        let frames = frames();
        let sound = batch_of(&frames);
        // The fourth record's kind byte made unknown; then a byte after the
        // last record.
        let mut bad_kind = sound.clone();
        let fourth = 4 + 4 + frames[..3].iter().map(crate::wire::record_len).sum::<usize>();
        bad_kind[fourth + 2] = 0x7E;
        let mut trailing = sound.clone();
        trailing.push(0);
        for body in [&bad_kind[4..], &trailing[4..]] {
            let expected = decode(body).expect_err("decode refuses it");
            let mut reader = FramesReader::new(&body[1..]).unwrap();
            let error = loop {
                match reader.next_record() {
                    Ok(Some(_)) => {}
                    Ok(None) => panic!("read to the end: {expected}"),
                    Err(e) => break e,
                }
            };
            assert_eq!(error, expected);
        }
    }
}
