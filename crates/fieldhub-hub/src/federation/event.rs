//! What federated hubs send each other, as bytes: a relay's transmit
//! request and an owner's committed event. Little-endian, fixed layout,
//! checked on decoding (a frame is rebuilt through `Frame::from_parts`).
//!
//! Layouts:
//! - origin: `len u8`, the relay's Zenoh session id (UTF-8), `port_id u32`,
//!   `arrival u64` (the relay bus's arrival number of the frame).
//! - frame: `kind u8`, `flags u8`, `id u32`, `len u8`, `len8_dlc u8`,
//!   `data_len u8`, `data`.
//! - request: origin, frame.
//! - event: `epoch u64`, `seq u64`, `start_ns u64`, `end_ns u64`,
//!   `has_origin u8` (0 or 1), origin when 1, frame.

use fieldhub_proto::{Frame, FrameError, FrameFlags, FrameKind};

/// Why bytes from another hub were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("message ends early")]
    Truncated,
    #[error("{0} bytes left over after the message")]
    TrailingBytes(usize),
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("undefined frame flags {0:#04x}")]
    Flags(u8),
    #[error("origin is not UTF-8")]
    Origin,
    #[error("invalid frame: {0}")]
    Frame(#[from] FrameError),
}

/// Which relay's port sent a frame, and which of its frames it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The relay's Zenoh session id: a restarted relay has a new one, so a
    /// frame it sent before the restart is never matched to a new port.
    pub relay: String,
    pub port_id: u32,
    pub arrival: u64,
}

/// A relay's frame for the owner to put on the channel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxRequest {
    pub origin: Origin,
    pub frame: Frame,
}

/// One frame the owner put on the channel, in the channel's total order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The owner's epoch; a new owner starts a higher one.
    pub epoch: u64,
    /// Per channel and epoch, strictly +1 from 1.
    pub seq: u64,
    /// The owner's bus time when the frame went on the bus, and when it
    /// ended (start plus its exact bit time at the channel's rates).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The relay port that sent it; `None` for the owner's own ports.
    pub origin: Option<Origin>,
    pub frame: Frame,
}

impl TxRequest {
    pub fn encode(&self, out: &mut Vec<u8>) {
        put_origin(out, &self.origin);
        put_frame(out, &self.frame);
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(bytes);
        let request = Self { origin: r.origin()?, frame: r.frame()? };
        r.end()?;
        Ok(request)
    }
}

impl Event {
    pub fn encode(&self, out: &mut Vec<u8>) {
        for value in [self.epoch, self.seq, self.start_ns, self.end_ns] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        match &self.origin {
            Some(origin) => {
                out.push(1);
                put_origin(out, origin);
            }
            None => out.push(0),
        }
        put_frame(out, &self.frame);
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(bytes);
        let (epoch, seq, start_ns, end_ns) = (r.u64()?, r.u64()?, r.u64()?, r.u64()?);
        let origin = match r.u8()? {
            0 => None,
            _ => Some(r.origin()?),
        };
        let event = Self { epoch, seq, start_ns, end_ns, origin, frame: r.frame()? };
        r.end()?;
        Ok(event)
    }
}

fn put_origin(out: &mut Vec<u8>, origin: &Origin) {
    // Zenoh session ids are 32 hex digits at most; longer is cut, never wraps.
    let relay = &origin.relay.as_bytes()[..origin.relay.len().min(u8::MAX as usize)];
    out.push(relay.len() as u8);
    out.extend_from_slice(relay);
    out.extend_from_slice(&origin.port_id.to_le_bytes());
    out.extend_from_slice(&origin.arrival.to_le_bytes());
}

fn put_frame(out: &mut Vec<u8>, frame: &Frame) {
    out.push(frame.kind() as u8);
    out.push(frame.flags().bits());
    out.extend_from_slice(&frame.id().to_le_bytes());
    out.push(frame.len() as u8);
    out.push(frame.len8_dlc());
    let data = frame.data();
    out.push(data.len() as u8);
    out.extend_from_slice(data);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let mut b = [0; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut b = [0; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn origin(&mut self) -> Result<Origin, DecodeError> {
        let len = self.u8()? as usize;
        let relay = std::str::from_utf8(self.take(len)?).map_err(|_| DecodeError::Origin)?.to_owned();
        Ok(Origin { relay, port_id: self.u32()?, arrival: self.u64()? })
    }

    fn frame(&mut self) -> Result<Frame, DecodeError> {
        let kind = self.u8()?;
        let kind = FrameKind::from_wire(kind).ok_or(DecodeError::Kind(kind))?;
        let flags = self.u8()?;
        let flags = FrameFlags::from_bits(flags).ok_or(DecodeError::Flags(flags))?;
        let id = self.u32()?;
        let (len, len8_dlc) = (self.u8()? as usize, self.u8()?);
        let data_len = self.u8()? as usize;
        let data = self.take(data_len)?;
        Ok(Frame::from_parts(kind, flags, id, len, len8_dlc, data)?)
    }

    fn end(&self) -> Result<(), DecodeError> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Frame> {
        vec![
            Frame::can(0x123, false, &[1, 2, 3]).unwrap(),
            Frame::remote(0x1ABCDEF, true, 4).unwrap(),
            Frame::can_fd(0x7FF, FrameFlags::BRS, &[9; 64]).unwrap(),
            Frame::error(0x4, [0, 1, 2, 3, 4, 5, 6, 7]).unwrap(),
        ]
    }

    #[test]
    fn requests_and_events_come_back_unchanged() {
        let origin = Origin { relay: "a1b2c3".into(), port_id: 7, arrival: u64::MAX };
        for frame in frames() {
            let request = TxRequest { origin: origin.clone(), frame };
            let mut bytes = Vec::new();
            request.encode(&mut bytes);
            assert_eq!(TxRequest::decode(&bytes), Ok(request));
            for origin in [None, Some(origin.clone())] {
                let event = Event { epoch: 3, seq: 1 << 40, start_ns: 5, end_ns: 9, origin, frame };
                let mut bytes = Vec::new();
                event.encode(&mut bytes);
                assert_eq!(Event::decode(&bytes), Ok(event));
            }
        }
    }

    #[test]
    fn every_cut_and_extension_is_refused() {
        let event = Event {
            epoch: 1,
            seq: 2,
            start_ns: 3,
            end_ns: 4,
            origin: Some(Origin { relay: "r".into(), port_id: 1, arrival: 2 }),
            frame: frames()[2],
        };
        let mut bytes = Vec::new();
        event.encode(&mut bytes);
        for cut in 0..bytes.len() {
            assert_eq!(Event::decode(&bytes[..cut]), Err(DecodeError::Truncated), "cut at {cut}");
        }
        bytes.push(0);
        assert_eq!(Event::decode(&bytes), Err(DecodeError::TrailingBytes(1)));
    }

    #[test]
    fn a_bad_frame_is_refused() {
        let mut bytes = Vec::new();
        let origin = Origin { relay: String::new(), port_id: 1, arrival: 1 };
        TxRequest { origin, frame: frames()[0] }.encode(&mut bytes);
        let kind_at = 1 + 4 + 8;
        bytes[kind_at] = 9;
        assert_eq!(TxRequest::decode(&bytes), Err(DecodeError::Kind(9)));
        bytes[kind_at] = 0;
        // An 11-bit frame with a 29-bit identifier.
        bytes[kind_at + 2..kind_at + 6].copy_from_slice(&0x1000u32.to_le_bytes());
        assert!(matches!(TxRequest::decode(&bytes), Err(DecodeError::Frame(_))));
    }
}
