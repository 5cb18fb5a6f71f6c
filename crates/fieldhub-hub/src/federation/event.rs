//! What federated hubs send each other, as bytes: a relay's transmit
//! request, an owner's committed event, and the answer to a history query
//! (any hub that applied or sequenced a channel's events answers it). Little-
//! endian, fixed layout, checked on decoding (a frame is rebuilt through
//! `Frame::from_parts`). Normative: `spec/federation.md`, pinned by
//! `spec/vectors/federation/messages.json`.
//!
//! Layouts:
//! - origin: `len u8`, the relay's Zenoh session id (UTF-8), `port_id u32`,
//!   `arrival u64` (the relay bus's arrival number of the frame).
//! - frame: `kind u8`, `flags u8`, `id u32`, `len u8`, `len8_dlc u8`,
//!   `data_len u8`, `data`.
//! - request: origin, frame.
//! - event: `epoch u64`, `incarnation u64`, `seq u64`, `start_ns u64`,
//!   `end_ns u64`, `has_origin u8` (0 or 1), origin when 1, then `body u8`:
//!   0 and a frame (on the bus), or 1 and `reason u16` (the owner's bus
//!   dropped the relay port's frame, `spec/protocol.md` 3.8a).
//! - history reply: `last u64`, `done u8` (0 or 1), then events, each
//!   `len u32` and the event's bytes.
//! - batch, the payload of every publication on `fieldhub/C/tx` and
//!   `fieldhub/C/events`: one or more requests (or events), in order, each
//!   `len u16` and its bytes ([`Batch`]). A sender puts what waits for it
//!   into one batch, so a busy channel costs one Zenoh message per batch,
//!   not per frame; one alone goes at once, as a batch of one.
//!
//! A history query's selector parameters: `epoch`, `incarnation`, `from`,
//! `to` ([`HistoryQuery`]).

use fieldhub_proto::fate::DropReason;
use fieldhub_proto::{Frame, FrameError, FrameFlags, FrameKind};

/// Why bytes from another hub were refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    #[error("message ends early")]
    Truncated,
    #[error("empty batch")]
    EmptyBatch,
    #[error("{0} bytes left over after the message")]
    TrailingBytes(usize),
    #[error("unknown frame kind {0}")]
    Kind(u8),
    #[error("undefined frame flags {0:#04x}")]
    Flags(u8),
    #[error("origin is not UTF-8")]
    Origin,
    #[error("unknown event body {0}")]
    Body(u8),
    #[error("unknown drop reason {0}")]
    Reason(u16),
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

/// Who sequenced an event: the owner's epoch (configured, or one above the
/// highest a standby applied) and its incarnation (the wall-clock time in
/// nanoseconds its owner bridge started), so an owner restarted with the
/// same epoch numbers a sequence of its own, newer than the one before.
/// Ordered by epoch, then incarnation: relays and owners rank terms alike.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Term {
    pub epoch: u64,
    pub incarnation: u64,
}

impl std::fmt::Display for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "epoch {} (incarnation {})", self.epoch, self.incarnation)
    }
}

/// What an event says happened to its frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// On the owner's bus, in this place of the channel's order.
    Frame(Frame),
    /// The owner's bus took a relay port's frame off the bus (its bridge
    /// port was told `TX_DROPPED`): the relay tells the sender why.
    Dropped(DropReason),
}

/// One thing the owner did with the channel, in its total order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub term: Term,
    /// Per channel and term, strictly +1 from 1.
    pub seq: u64,
    /// The owner's bus time when the frame went on the bus, and when it
    /// ended (start plus its exact bit time at the channel's rates); 0 for
    /// a drop.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The relay port that sent it; `None` for the owner's own ports.
    pub origin: Option<Origin>,
    pub body: Body,
}

/// A history query: the events `from..=to` of `term`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryQuery {
    pub term: Term,
    pub from: u64,
    pub to: u64,
}

impl HistoryQuery {
    /// The selector's parameters, `epoch=…;incarnation=…;from=…;to=…`.
    pub fn parameters(&self) -> String {
        let Self { term, from, to } = self;
        format!("epoch={};incarnation={};from={from};to={to}", term.epoch, term.incarnation)
    }

    /// The query from its parameters (`get` looks one up); `None` when one
    /// is missing or not a number.
    pub fn parse<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<Self> {
        let number = |key: &str| get(key)?.parse::<u64>().ok();
        let term = Term { epoch: number("epoch")?, incarnation: number("incarnation")? };
        Some(Self { term, from: number("from")?, to: number("to")? })
    }
}

/// Requests or events encoded one after the other into one publication.
#[derive(Debug, Default)]
pub struct Batch {
    bytes: Vec<u8>,
    count: usize,
}

impl Batch {
    /// The most items a sender puts into one publication.
    pub const MAX_ITEMS: usize = 128;

    /// The most bytes of one publication (`spec/federation.md` 5.4): it
    /// fits one Zenoh transport batch (64 KiB, less Zenoh's own headers)
    /// whole, as Zenoh's low-latency transport, which the hubs use
    /// (`link.rs`), does not fragment — a larger message would close the link.
    pub const MAX_BYTES: usize = 48 * 1024;

    /// Bounds the largest item and its length: an event with a 255-byte
    /// origin (268 bytes) and a 2,048-byte CAN XL frame (2,063) is 2,373.
    const MAX_ITEM_BYTES: usize = 2 + 2_400;

    pub fn with_capacity(items: usize) -> Self {
        Self { bytes: Vec::with_capacity(items * 96), count: 0 }
    }

    /// Append one item that `encode` writes; its bytes, as encoded.
    pub fn push(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> &[u8] {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&[0, 0]);
        encode(&mut self.bytes);
        // An item is at most MAX_ITEM_BYTES (a 255-byte origin, 2,048 data bytes).
        let len = u16::try_from(self.bytes.len() - at - 2).unwrap_or(u16::MAX);
        self.bytes[at..at + 2].copy_from_slice(&len.to_le_bytes());
        self.count += 1;
        &self.bytes[at + 2..]
    }

    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether any item still fits: fewer than [`Self::MAX_ITEMS`], and room
    /// for the largest within [`Self::MAX_BYTES`]. A sender publishes a
    /// batch without room before it adds more.
    pub fn has_room(&self) -> bool {
        self.count < Self::MAX_ITEMS && self.bytes.len() + Self::MAX_ITEM_BYTES <= Self::MAX_BYTES
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.count = 0;
    }

    /// The items of a received batch, in order; an item cut short ends it
    /// with an error (what came before stands: each item is whole).
    pub fn items(bytes: &[u8]) -> impl Iterator<Item = Result<&[u8], DecodeError>> {
        let mut r = Reader(bytes);
        let mut first = true;
        std::iter::from_fn(move || {
            if r.0.is_empty() {
                return std::mem::take(&mut first).then_some(Err(DecodeError::EmptyBatch));
            }
            first = false;
            let item = r.u16().and_then(|len| r.take(len as usize));
            if item.is_err() {
                r.0 = &[];
            }
            Some(item)
        })
    }
}

/// A hub's answer to a [`HistoryQuery`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryReply {
    /// The newest `seq` of the term the hub applied (or sequenced); 0: none.
    pub last: u64,
    /// Whether the hub will apply no more events of the term: its owner left
    /// and it applied every event it had received, or it follows a newer
    /// term. An owner still sequencing the term, or a relay still taking its
    /// events, is not done: its `last` may grow.
    pub done: bool,
    /// The encoded events of the range the hub still keeps, in order.
    pub events: Vec<Vec<u8>>,
}

impl HistoryReply {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.last.to_le_bytes());
        out.push(u8::from(self.done));
        for event in &self.events {
            out.extend_from_slice(&(event.len() as u32).to_le_bytes());
            out.extend_from_slice(event);
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(bytes);
        let (last, done) = (r.u64()?, r.u8()? != 0);
        let mut events = Vec::new();
        while !r.0.is_empty() {
            let len = r.u32()? as usize;
            events.push(r.take(len)?.to_vec());
        }
        Ok(Self { last, done, events })
    }
}

impl TxRequest {
    pub fn encode(&self, out: &mut Vec<u8>) {
        Self::encode_parts(out, &self.origin.relay, (self.origin.port_id, self.origin.arrival), &self.frame);
    }

    /// Encode a request from its parts: a relay's uplink names its own
    /// session id in every request without copying it into an [`Origin`].
    pub fn encode_parts(out: &mut Vec<u8>, relay: &str, (port_id, arrival): (u32, u64), frame: &Frame) {
        put_origin(out, relay, port_id, arrival);
        put_frame(out, frame);
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
        let Term { epoch, incarnation } = self.term;
        for value in [epoch, incarnation, self.seq, self.start_ns, self.end_ns] {
            out.extend_from_slice(&value.to_le_bytes());
        }
        match &self.origin {
            Some(origin) => {
                out.push(1);
                put_origin(out, &origin.relay, origin.port_id, origin.arrival);
            }
            None => out.push(0),
        }
        match &self.body {
            Body::Frame(frame) => {
                out.push(0);
                put_frame(out, frame);
            }
            Body::Dropped(reason) => {
                out.push(1);
                out.extend_from_slice(&(*reason as u16).to_le_bytes());
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(bytes);
        let term = Term { epoch: r.u64()?, incarnation: r.u64()? };
        let (seq, start_ns, end_ns) = (r.u64()?, r.u64()?, r.u64()?);
        let origin = match r.u8()? {
            0 => None,
            _ => Some(r.origin()?),
        };
        let body = match r.u8()? {
            0 => Body::Frame(r.frame()?),
            1 => {
                let reason = r.u16()?;
                Body::Dropped(DropReason::from_wire(reason).ok_or(DecodeError::Reason(reason))?)
            }
            other => return Err(DecodeError::Body(other)),
        };
        let event = Self { term, seq, start_ns, end_ns, origin, body };
        r.end()?;
        Ok(event)
    }
}

fn put_origin(out: &mut Vec<u8>, relay: &str, port_id: u32, arrival: u64) {
    // Zenoh session ids are 32 hex digits at most; longer is cut, never wraps.
    let relay = &relay.as_bytes()[..relay.len().min(u8::MAX as usize)];
    out.push(relay.len() as u8);
    out.extend_from_slice(relay);
    out.extend_from_slice(&port_id.to_le_bytes());
    out.extend_from_slice(&arrival.to_le_bytes());
}

fn put_frame(out: &mut Vec<u8>, frame: &Frame) {
    out.push(frame.kind() as u8);
    out.push(frame.flags().bits());
    out.extend_from_slice(&frame.id().to_le_bytes());
    // A valid frame has at most 2,048 data bytes: both lengths fit a u16.
    out.extend_from_slice(&(frame.len() as u16).to_le_bytes());
    out.push(frame.len8_dlc());
    if frame.is_xl() {
        out.extend_from_slice(&frame.acceptance_field().to_le_bytes());
    }
    let data = frame.data();
    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
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

    fn u16(&mut self) -> Result<u16, DecodeError> {
        let mut b = [0; 2];
        b.copy_from_slice(self.take(2)?);
        Ok(u16::from_le_bytes(b))
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
        let bits = self.u8()?;
        // 0x20 and 0x40 are LIN's STANDING and WAKE_UP; on every other kind
        // they are reserved, as on the wire (spec/protocol.md 4.2).
        let flags = FrameFlags::from_bits(bits)
            .filter(|f| kind == FrameKind::Lin || !f.intersects(FrameFlags::LIN_ONLY))
            .ok_or(DecodeError::Flags(bits))?;
        let id = self.u32()?;
        let (len, len8_dlc) = (self.u16()? as usize, self.u8()?);
        let af = if kind == FrameKind::CanXl { self.u32()? } else { 0 };
        let data_len = self.u16()? as usize;
        let data = self.take(data_len)?;
        Ok(Frame::from_parts(kind, flags, id, len, len8_dlc, af, data)?)
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
            Frame::can_xl(0x123, 0x42, 3, FrameFlags::XL_SEC, 0x1234_5678, &[0xA5; 2048]).unwrap(),
            Frame::raw(0xDEAD_BEEF, &[0x5A; 2048]).unwrap(),
        ]
    }

    #[test]
    fn requests_and_events_come_back_unchanged() {
        let origin = Origin { relay: "a1b2c3".into(), port_id: 7, arrival: u64::MAX };
        for frame in frames() {
            let request = TxRequest { origin: origin.clone(), frame: frame.clone() };
            let mut bytes = Vec::new();
            request.encode(&mut bytes);
            assert_eq!(TxRequest::decode(&bytes), Ok(request));
            let term = Term { epoch: 3, incarnation: u64::MAX - 1 };
            for origin in [None, Some(origin.clone())] {
                for body in [Body::Frame(frame.clone()), Body::Dropped(DropReason::FaultRule)] {
                    let event = Event { term, seq: 1 << 40, start_ns: 5, end_ns: 9, origin: origin.clone(), body };
                    let mut bytes = Vec::new();
                    event.encode(&mut bytes);
                    assert_eq!(Event::decode(&bytes), Ok(event));
                }
            }
        }
    }

    #[test]
    fn a_batch_gives_back_its_items_in_order() {
        let origin = Origin { relay: "a1b2c3".into(), port_id: 7, arrival: 9 };
        let requests: Vec<TxRequest> =
            frames().into_iter().map(|frame| TxRequest { origin: origin.clone(), frame }).collect();
        let mut batch = Batch::with_capacity(4);
        for request in &requests {
            let item = batch.push(|out| request.encode(out)).to_vec();
            assert_eq!(TxRequest::decode(&item).as_ref(), Ok(request), "push returns the item's bytes");
        }
        assert_eq!(batch.len(), requests.len());
        let back: Vec<TxRequest> =
            Batch::items(batch.bytes()).map(|item| TxRequest::decode(item.unwrap()).unwrap()).collect();
        assert_eq!(back, requests);
    }

    #[test]
    fn a_batch_filled_while_it_has_room_stays_within_its_bytes_and_items() {
        // The largest event there is: a 255-byte origin and a 2,048-byte frame.
        let origin = Some(Origin { relay: "z".repeat(255), port_id: u32::MAX, arrival: u64::MAX });
        let xl = frames().remove(4);
        let event = Event { term: Term::default(), seq: 1, start_ns: 1, end_ns: 2, origin, body: Body::Frame(xl) };
        let mut batch = Batch::with_capacity(4);
        while batch.has_room() {
            batch.push(|out| event.encode(out));
        }
        assert!(batch.bytes().len() <= Batch::MAX_BYTES, "{} bytes", batch.bytes().len());
        let item = batch.bytes().len() / batch.len();
        assert!(batch.bytes().len() + 2 * item > Batch::MAX_BYTES, "room for two more was left");
        let mut small = Batch::with_capacity(Batch::MAX_ITEMS);
        while small.has_room() {
            small.push(|out| out.push(1));
        }
        assert_eq!(small.len(), Batch::MAX_ITEMS);
    }

    #[test]
    fn a_cut_batch_keeps_its_whole_items_and_an_empty_one_is_refused() {
        let mut batch = Batch::with_capacity(2);
        batch.push(|out| out.extend_from_slice(&[1, 2, 3]));
        batch.push(|out| out.extend_from_slice(&[4, 5]));
        let bytes = batch.bytes();
        let cut: Vec<_> = Batch::items(&bytes[..bytes.len() - 1]).collect();
        assert_eq!(cut, vec![Ok(&[1u8, 2, 3][..]), Err(DecodeError::Truncated)]);
        let cut: Vec<_> = Batch::items(&bytes[..6]).collect();
        assert_eq!(cut, vec![Ok(&[1u8, 2, 3][..]), Err(DecodeError::Truncated)], "a length cut in half");
        assert_eq!(Batch::items(&[]).collect::<Vec<_>>(), vec![Err(DecodeError::EmptyBatch)]);
        batch.clear();
        assert!(batch.is_empty() && batch.bytes().is_empty());
    }

    #[test]
    fn terms_rank_by_epoch_then_incarnation() {
        let term = |epoch, incarnation| Term { epoch, incarnation };
        assert!(term(1, 9) < term(2, 1), "a standby's higher epoch beats an owner restarted later");
        assert!(term(1, 1) < term(1, 2), "the same owner restarted is newer");
    }

    #[test]
    fn history_queries_and_replies_come_back_unchanged() {
        let query = HistoryQuery { term: Term { epoch: 2, incarnation: 77 }, from: 5, to: u64::MAX };
        let parameters = query.parameters();
        let lookup = |key: &str| {
            parameters.split(';').find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == key).map(|(_, v)| v))
        };
        assert_eq!(HistoryQuery::parse(lookup), Some(query));
        assert_eq!(HistoryQuery::parse(|key| (key != "incarnation").then_some("1")), None, "a part missing");
        let reply = HistoryReply { last: 9, done: true, events: vec![vec![1, 2], vec![], vec![3]] };
        let mut bytes = Vec::new();
        reply.encode(&mut bytes);
        assert_eq!(HistoryReply::decode(&bytes), Ok(reply));
        assert_eq!(HistoryReply::decode(&bytes[..bytes.len() - 1]), Err(DecodeError::Truncated));
    }

    #[test]
    fn every_cut_and_extension_is_refused() {
        let event = Event {
            term: Term { epoch: 1, incarnation: 1 },
            seq: 2,
            start_ns: 3,
            end_ns: 4,
            origin: Some(Origin { relay: "r".into(), port_id: 1, arrival: 2 }),
            body: Body::Frame(frames()[2].clone()),
        };
        let mut bytes = Vec::new();
        event.encode(&mut bytes);
        for cut in 0..bytes.len() {
            assert_eq!(Event::decode(&bytes[..cut]), Err(DecodeError::Truncated), "cut at {cut}");
        }
        bytes.push(0);
        assert_eq!(Event::decode(&bytes), Err(DecodeError::TrailingBytes(1)));
        let drop = Event { body: Body::Dropped(DropReason::BusOff), ..event };
        let mut bytes = Vec::new();
        drop.encode(&mut bytes);
        let reason_at = bytes.len() - 2;
        bytes[reason_at] = 99;
        assert_eq!(Event::decode(&bytes), Err(DecodeError::Reason(99)));
        bytes[reason_at - 1] = 7;
        assert_eq!(Event::decode(&bytes), Err(DecodeError::Body(7)));
    }

    #[test]
    fn a_bad_frame_is_refused() {
        let mut bytes = Vec::new();
        let origin = Origin { relay: String::new(), port_id: 1, arrival: 1 };
        TxRequest { origin, frame: frames()[0].clone() }.encode(&mut bytes);
        let kind_at = 1 + 4 + 8;
        bytes[kind_at] = 9;
        assert_eq!(TxRequest::decode(&bytes), Err(DecodeError::Kind(9)));
        bytes[kind_at] = 0;
        // An 11-bit frame with a 29-bit identifier.
        bytes[kind_at + 2..kind_at + 6].copy_from_slice(&0x1000u32.to_le_bytes());
        assert!(matches!(TxRequest::decode(&bytes), Err(DecodeError::Frame(_))));
    }
}
