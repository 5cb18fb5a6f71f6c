//! The stream wire format (TCP and unix sockets): see `spec/protocol.md`.
//!
//! Every message is a little-endian `u32` body length followed by the body;
//! the body starts with a one-byte message type. [`decode`] parses one body
//! borrowing from the caller's buffer; the `encode_*` functions append one
//! whole message (length prefix included) to a caller-owned `Vec<u8>`, so a
//! writer that reuses its buffer allocates nothing per message.
//!
//! Frame batches ([`FrameBatch`]) are validated completely when the message
//! is decoded: a batch either is accepted whole or rejected whole.

mod frames_read;

pub use crate::fate::{ChannelState, TxDropped};
use crate::frame::{Frame, FrameError, FrameFlags, FrameKind, FrameMeta};
use crate::limits::*;
pub use frames_read::{CheckedRecord, FramesReader};

/// Size of the length prefix in front of every message.
pub const LENGTH_PREFIX: usize = 4;
/// Fixed part of a frame record; the payload follows it.
pub const RECORD_HEADER: usize = 32;
/// Bytes of a `canxl` record's acceptance field, after its header.
pub const XL_AF_LEN: usize = 4;
/// Bytes of a `FRAMES` body before the first record (type, count, reserved).
pub const BATCH_HEADER: usize = 4;

/// Message type bytes.
pub mod msg {
    pub const HELLO: u8 = 0x01;
    pub const WELCOME: u8 = 0x02;
    pub const REFUSE: u8 = 0x03;
    pub const CHALLENGE: u8 = 0x04;
    pub const AUTH: u8 = 0x05;
    pub const OPEN_PORT: u8 = 0x10;
    pub const PORT_OPENED: u8 = 0x11;
    pub const CLOSE_PORT: u8 = 0x12;
    pub const PORT_CLOSED: u8 = 0x13;
    pub const FRAMES: u8 = 0x20;
    pub const RX_OVERFLOW: u8 = 0x21;
    pub const TX_DROPPED: u8 = 0x22;
    pub const CHANNEL_STATE: u8 = 0x23;
    pub const ERROR: u8 = 0x30;
    pub const PING: u8 = 0x40;
    pub const PONG: u8 = 0x41;
    pub const STATS_REQUEST: u8 = 0x60;
    pub const STATS: u8 = 0x61;
    pub const GOODBYE: u8 = 0x50;
    pub const STEP: u8 = 0x70;
    pub const GRANT: u8 = 0x71;
    pub const STEP_AHEAD: u8 = 0x72;
}

bitflags::bitflags! {
    /// Options a client sets when it opens a port (`OPEN_PORT.options`).
    /// Undefined bits must be zero (`from_bits` refuses them).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct PortOptions: u32 {
        /// Deliver the port's own frames back to it, flagged `ECHO`, once
        /// they are on the bus (SocketCAN `CAN_RAW_RECV_OWN_MSGS`).
        const RECEIVE_OWN = 0x1;
        /// When this port's receive queue is full, hold the channel until it
        /// has room instead of dropping (and counting) frames for this port.
        const BLOCK_ON_OVERFLOW = 0x2;
        /// The port takes CAN FD frames (SocketCAN `CAN_RAW_FD_FRAMES`):
        /// without it the hub delivers no CAN FD frame to the port and
        /// refuses CAN FD frames from it.
        const FD = 0x4;
        /// A controller in listen-only mode: the port receives but never
        /// transmits or acknowledges; frames sent from it are refused.
        const LISTEN_ONLY = 0x8;
        /// The port only sends: it receives no frame of other ports (with
        /// `RECEIVE_OWN`, still its own, as transmit confirmations) and
        /// does not acknowledge. Not together with `LISTEN_ONLY`.
        const TRANSMIT_ONLY = 0x10;
    }
}

bitflags::bitflags! {
    /// Options a client declares for its whole session (`HELLO.options`).
    /// Undefined bits must be zero (`from_bits` refuses them).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct SessionOptions: u32 {
        /// The client is a time-synchronised participant: on a hub in
        /// virtual time, bus time advances only once it has announced the end
        /// of its step (`STEP`), and it learns each advance from `GRANT`.
        const SYNCHRONIZED = 0x1;
        /// With `SYNCHRONIZED`: the participant may step ahead
        /// (`STEP_AHEAD`) and stamps its frames with the bus time they are
        /// for (`spec/protocol.md` 6.8).
        const AHEAD = 0x2;
    }
}

bitflags::bitflags! {
    /// What the port's channel is (`PORT_OPENED.channel_flags`). Bits a
    /// client does not know are ignored, so a hub may add capabilities.
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    pub struct ChannelFlags: u8 {
        /// The channel carries CAN FD frames (`protocol = "canfd"`).
        const CANFD = 0x1;
        /// The channel carries LIN frames (`protocol = "lin"`), 4.1.1.
        const LIN = 0x2;
        /// The channel carries CAN XL frames besides CAN FD and classic
        /// ones (`protocol = "canxl"`), 4.1.2.
        const CANXL = 0x4;
        /// The channel carries raw frames only (`protocol = "raw"`), 4.1.3.
        const RAW = 0x8;
    }
}

/// Error and refusal codes carried by `REFUSE` and `ERROR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum ErrorCode {
    /// The peer violated the wire format (details in the text).
    Malformed = 1,
    /// The first message did not start with the magic `FHUB`.
    BadMagic = 2,
    /// The client speaks a protocol version the hub does not.
    UnsupportedVersion = 3,
    /// The hub requires a token and none, or a wrong one, was given.
    Unauthorized = 4,
    /// A length prefix exceeded the protocol limit.
    Oversize = 5,
    /// The named channel does not exist on this hub.
    UnknownChannel = 6,
    /// A frame or request named a port the client has not opened.
    PortNotOpen = 7,
    /// The client already has the maximum number of ports open.
    TooManyPorts = 8,
    /// A frame record is not a valid frame.
    InvalidFrame = 9,
    /// A message that is not allowed in this direction or state.
    UnexpectedMessage = 10,
    /// A port of that name is already open on the hub.
    PortNameTaken = 11,
    /// The hub has no room for another client.
    HubFull = 12,
    /// The hub is shutting down.
    ShuttingDown = 13,
    /// The hub failed internally; the text says how.
    Internal = 14,
    /// The request needs the other time mode: a synchronised session or
    /// `STEP` on a hub in real time, `STEP` from a session that is not
    /// synchronised, or a step that does not move forward.
    TimeMode = 15,
    /// A synchronised participant did not finish its step within the hub's
    /// step timeout.
    StepTimeout = 16,
    /// More of a synchronised participant's frames wait in the hub than a
    /// real-time transmit queue holds: its channel carries less than it
    /// sends. Not fatal; the frames go on the bus in later steps.
    TxQueueFull = 17,
}

impl ErrorCode {
    /// The code for a wire value; unknown values map to `None`.
    pub fn from_wire(value: u16) -> Option<Self> {
        use ErrorCode::*;
        Some(match value {
            1 => Malformed,
            2 => BadMagic,
            3 => UnsupportedVersion,
            4 => Unauthorized,
            5 => Oversize,
            6 => UnknownChannel,
            7 => PortNotOpen,
            8 => TooManyPorts,
            9 => InvalidFrame,
            10 => UnexpectedMessage,
            11 => PortNameTaken,
            12 => HubFull,
            13 => ShuttingDown,
            14 => Internal,
            15 => TimeMode,
            16 => StepTimeout,
            17 => TxQueueFull,
            _ => return None,
        })
    }

    /// Stable snake-case name, as used in the spec and the test vectors.
    pub fn name(self) -> &'static str {
        use ErrorCode::*;
        match self {
            Malformed => "malformed",
            BadMagic => "bad_magic",
            UnsupportedVersion => "unsupported_version",
            Unauthorized => "unauthorized",
            Oversize => "oversize",
            UnknownChannel => "unknown_channel",
            PortNotOpen => "port_not_open",
            TooManyPorts => "too_many_ports",
            InvalidFrame => "invalid_frame",
            UnexpectedMessage => "unexpected_message",
            PortNameTaken => "port_name_taken",
            HubFull => "hub_full",
            ShuttingDown => "shutting_down",
            Internal => "internal",
            TimeMode => "time_mode",
            StepTimeout => "step_timeout",
            TxQueueFull => "tx_queue_full",
        }
    }
}

/// Why bytes could not be decoded. [`DecodeError::code`] gives the wire code
/// a hub reports back; [`DecodeError::kind`] the stable name in the vectors.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("message length {len} exceeds the limit of {max} bytes")]
    Oversize { len: u32, max: u32 },
    #[error("empty message (length prefix 0)")]
    Empty,
    #[error("unknown message type 0x{0:02X}")]
    UnknownType(u8),
    #[error("{what}: message ends after {have} bytes, needs {need}")]
    Truncated { what: &'static str, need: usize, have: usize },
    #[error("{what}: {extra} unexpected bytes after the end of the message")]
    TrailingBytes { what: &'static str, extra: usize },
    #[error("bad magic {0:02X?}: not a fieldhub client (expected \"FHUB\")")]
    BadMagic([u8; 4]),
    /// A `HELLO` of another protocol version: its fields after the version
    /// are laid out as that version says, which this codec does not read.
    #[error("protocol version {version} is not supported; this revision speaks version {PROTOCOL_VERSION}")]
    UnsupportedVersion { version: u16 },
    #[error("{what} is {len} bytes, the limit is {max}")]
    TooLong { what: &'static str, len: usize, max: usize },
    #[error("{what} is not valid UTF-8")]
    NotUtf8 { what: &'static str },
    #[error("batch of {count} frames exceeds the limit of {max}")]
    TooManyFrames { count: usize, max: usize },
    #[error("STEP_AHEAD with {count} wake filters exceeds the limit of {max}")]
    TooManyFilters { count: usize, max: usize },
    #[error("frame {index}: unknown frame kind {kind}")]
    UnknownFrameKind { index: usize, kind: u8 },
    #[error("frame {index}: reserved flag bits 0x{bits:02X} set")]
    ReservedFlags { index: usize, bits: u8 },
    #[error("frame {index}: data length {len} exceeds the record limit of 2048")]
    RecordTooLong { index: usize, len: usize },
    #[error("frame {index}: {source}")]
    InvalidFrame { index: usize, source: FrameError },
    #[error("{what}: reserved field is 0x{value:X}, must be 0")]
    ReservedNotZero { what: &'static str, value: u32 },
    #[error("{what} 0x{bits:X} set reserved bits")]
    ReservedOptions { what: &'static str, bits: u32 },
}

impl DecodeError {
    /// The wire error code a hub reports for this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Oversize { .. } => ErrorCode::Oversize,
            Self::BadMagic(_) => ErrorCode::BadMagic,
            Self::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            Self::UnknownFrameKind { .. }
            | Self::ReservedFlags { .. }
            | Self::RecordTooLong { .. }
            | Self::InvalidFrame { .. } => ErrorCode::InvalidFrame,
            _ => ErrorCode::Malformed,
        }
    }

    /// Stable snake-case name, as used in the test vectors.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Oversize { .. } => "oversize",
            Self::Empty => "empty",
            Self::UnknownType(_) => "unknown_type",
            Self::Truncated { .. } => "truncated",
            Self::TrailingBytes { .. } => "trailing_bytes",
            Self::BadMagic(_) => "bad_magic",
            Self::UnsupportedVersion { .. } => "unsupported_version",
            Self::TooLong { .. } => "too_long",
            Self::NotUtf8 { .. } => "not_utf8",
            Self::TooManyFrames { .. } => "too_many_frames",
            Self::TooManyFilters { .. } => "too_many_filters",
            Self::UnknownFrameKind { .. } => "unknown_frame_kind",
            Self::ReservedFlags { .. } => "reserved_flags",
            Self::RecordTooLong { .. } => "record_too_long",
            Self::InvalidFrame { .. } => "invalid_frame",
            Self::ReservedNotZero { .. } => "reserved_not_zero",
            Self::ReservedOptions { .. } => "reserved_options",
        }
    }
}

/// Check a length prefix before reading the body. `max` is
/// [`MAX_HELLO_LEN`] for the first message of a connection and
/// [`MAX_MESSAGE_LEN`] afterwards.
pub fn check_length(len: u32, max: u32) -> Result<usize, DecodeError> {
    if len == 0 {
        return Err(DecodeError::Empty);
    }
    if len > max {
        return Err(DecodeError::Oversize { len, max });
    }
    Ok(len as usize)
}

/// `HELLO`: the first message of every connection, client to hub. It
/// carries no token: a hub with one answers [`Challenge`], and the client
/// proves it holds the token with [`Auth`] (`crate::auth`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello<'a> {
    /// Always [`PROTOCOL_VERSION`] once decoded (another version is
    /// [`DecodeError::UnsupportedVersion`]).
    pub version: u16,
    pub name: &'a str,
    /// Session options; on the wire only when not empty.
    pub options: SessionOptions,
}

/// `CHALLENGE`: a hub with a token answers `HELLO` with a fresh nonce; the
/// client's [`Auth`] is a MAC over it under the token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Challenge<'a> {
    /// Random, never used twice by a hub.
    pub nonce: [u8; NONCE_LEN],
    /// The hub's name, as its `WELCOME` will carry it; part of the MAC.
    pub hub_name: &'a str,
}

/// `AUTH`: the client's answer to [`Challenge`]: HMAC-SHA256 under its
/// token (`crate::auth::auth_mac`), or [`Auth::NO_TOKEN`] from a client
/// that has none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Auth {
    pub mac: [u8; MAC_LEN],
}

impl Auth {
    /// What a client without a token answers: it has nothing to prove,
    /// and the hub decides as for any client without a token.
    pub const NO_TOKEN: Auth = Auth { mac: [0; MAC_LEN] };

    /// Whether this is [`Auth::NO_TOKEN`].
    pub fn is_no_token(&self) -> bool {
        self.mac == [0; MAC_LEN]
    }
}

/// `WELCOME`: the hub accepted the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Welcome<'a> {
    pub version: u16,
    pub client_id: u32,
    pub hub_name: &'a str,
}

/// `REFUSE`, `ERROR` and `GOODBYE` share a code and a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorReport<'a> {
    /// Wire code; see [`ErrorCode::from_wire`] (unknown codes are kept).
    pub code: u16,
    /// Request the error answers (`OPEN_PORT.request`), 0 if none.
    pub request: u32,
    /// Whether the sender closes the connection after this message.
    pub fatal: bool,
    pub text: &'a str,
}

/// `OPEN_PORT`: client asks for a port on a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenPort<'a> {
    pub request: u32,
    pub options: PortOptions,
    pub channel: &'a str,
    /// Empty: the hub names the port `<client>.<n>`.
    pub port_name: &'a str,
}

/// `PORT_OPENED`: the hub's answer to `OPEN_PORT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortOpened {
    pub request: u32,
    /// Client-local port handle used in frame records.
    pub port: u16,
    /// Hub-wide channel id (as in [`FrameMeta::channel`]).
    pub channel_id: u16,
    /// Hub-wide port id (as in [`FrameMeta::sender`]).
    pub port_id: u32,
    /// What the channel carries, so a client refuses a frame the channel
    /// cannot take when it is sent, not later.
    pub channel_flags: ChannelFlags,
}

/// `RX_OVERFLOW`: frames for `port` were dropped because its receive queue
/// was full; `dropped` counts them since the previous report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxOverflow {
    pub port: u16,
    pub dropped: u32,
}

/// One decoded message body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message<'a> {
    Hello(Hello<'a>),
    Welcome(Welcome<'a>),
    Refuse(ErrorReport<'a>),
    Challenge(Challenge<'a>),
    Auth(Auth),
    OpenPort(OpenPort<'a>),
    PortOpened(PortOpened),
    ClosePort {
        port: u16,
    },
    PortClosed {
        port: u16,
    },
    Frames(FrameBatch<'a>),
    RxOverflow(RxOverflow),
    /// Frames a port sent that are off the bus, and why (`fate`).
    TxDropped(TxDropped),
    /// A change of a receiving port's channel (`fate`).
    ChannelState(ChannelState<'a>),
    Error(ErrorReport<'a>),
    Ping {
        nonce: u64,
    },
    Pong {
        nonce: u64,
    },
    Goodbye(ErrorReport<'a>),
    /// Client asks for the hub's statistics.
    StatsRequest {
        request: u32,
    },
    /// The hub's statistics as a JSON document (schema in `spec/protocol.md`).
    Stats {
        request: u32,
        json: &'a str,
    },
    /// A synchronised participant has finished its step: it is done up to
    /// bus time `until_ns` (virtual time, `spec/protocol.md` 6.8).
    Step {
        until_ns: u64,
    },
    /// Bus time has reached `now_ns` and the participant may compute its
    /// next step.
    Grant {
        now_ns: u64,
    },
    /// A participant with `AHEAD` is done up to `until_ns` in steps of
    /// `period_ns`, to be woken at a step boundary only by a frame that
    /// matches `filters` (`spec/protocol.md` 3.11a).
    StepAhead(StepAhead<'a>),
}

/// `STEP_AHEAD`'s fields; the filters are read from the message in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepAhead<'a> {
    pub until_ns: u64,
    pub period_ns: u64,
    pub filters: WakeFilters<'a>,
}

/// One wake filter of `STEP_AHEAD`, in SocketCAN form: a frame matches when
/// `socketcan_id & mask == can_id & mask`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct WakeFilter {
    pub can_id: u32,
    pub mask: u32,
}

impl WakeFilter {
    /// Whether a frame with SocketCAN identifier `socketcan_id` (flags
    /// included: `Frame::socketcan_id`) matches.
    pub fn matches(&self, socketcan_id: u32) -> bool {
        socketcan_id & self.mask == self.can_id & self.mask
    }
}

/// The wake filters of a decoded `STEP_AHEAD` (at most [`MAX_WAKE_FILTERS`]),
/// or filters to encode ([`WakeFilters::from_slice`]). Equal when they
/// hold the same filters in the same order, however held.
#[derive(Clone, Copy, Debug)]
pub enum WakeFilters<'a> {
    /// As they are on the wire: `n` × 8 bytes.
    Wire(&'a [u8]),
    /// A caller's filters.
    Slice(&'a [WakeFilter]),
}

impl PartialEq for WakeFilters<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for WakeFilters<'_> {}

impl<'a> WakeFilters<'a> {
    /// Filters to encode; at most [`MAX_WAKE_FILTERS`] are sent.
    pub fn from_slice(filters: &'a [WakeFilter]) -> Self {
        Self::Slice(&filters[..filters.len().min(MAX_WAKE_FILTERS)])
    }

    /// Number of filters (0: every frame wakes).
    pub fn len(&self) -> usize {
        match self {
            Self::Wire(bytes) => bytes.len() / 8,
            Self::Slice(filters) => filters.len(),
        }
    }

    /// Whether there are none (then every frame wakes).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The filters in order.
    pub fn iter(&self) -> impl Iterator<Item = WakeFilter> + 'a {
        let (bytes, slice): (&'a [u8], &'a [WakeFilter]) = match *self {
            Self::Wire(bytes) => (bytes, &[]),
            Self::Slice(filters) => (&[], filters),
        };
        let word = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        bytes
            .chunks_exact(8)
            .map(move |c| WakeFilter { can_id: word(&c[..4]), mask: word(&c[4..]) })
            .chain(slice.iter().copied())
    }
}

impl Message<'_> {
    /// The message type's name as the spec writes it (`OPEN_PORT`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Message::Hello(_) => "HELLO",
            Message::Welcome(_) => "WELCOME",
            Message::Refuse(_) => "REFUSE",
            Message::Challenge(_) => "CHALLENGE",
            Message::Auth(_) => "AUTH",
            Message::OpenPort(_) => "OPEN_PORT",
            Message::PortOpened(_) => "PORT_OPENED",
            Message::ClosePort { .. } => "CLOSE_PORT",
            Message::PortClosed { .. } => "PORT_CLOSED",
            Message::Frames(_) => "FRAMES",
            Message::RxOverflow(_) => "RX_OVERFLOW",
            Message::TxDropped(_) => "TX_DROPPED",
            Message::ChannelState(_) => "CHANNEL_STATE",
            Message::Error(_) => "ERROR",
            Message::Ping { .. } => "PING",
            Message::Pong { .. } => "PONG",
            Message::Goodbye(_) => "GOODBYE",
            Message::StatsRequest { .. } => "STATS_REQUEST",
            Message::Stats { .. } => "STATS",
            Message::Step { .. } => "STEP",
            Message::Grant { .. } => "GRANT",
            Message::StepAhead(_) => "STEP_AHEAD",
        }
    }
}

/// A validated batch of frame records, decoded lazily by [`FrameBatch::iter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameBatch<'a> {
    count: usize,
    records: &'a [u8],
    /// The first record with the `ECHO` flag, noted while the batch is
    /// validated: a hub refuses a client's batch that has one, and asking
    /// here spares it building every frame of the batch twice.
    first_echo: Option<usize>,
}

/// One record of a batch: the port it travels on, the frame, and the
/// hub-assigned metadata (zero in client-to-hub batches).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameRecord {
    pub port: u16,
    pub frame: Frame,
    pub meta: FrameMeta,
}

impl<'a> FrameBatch<'a> {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.count
    }
    /// Whether the batch has no records.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The index of the first record whose frame has the `ECHO` flag (a
    /// TX confirmation, which only a hub sends), read without building the
    /// frames.
    pub fn first_echo(&self) -> Option<usize> {
        self.first_echo
    }
    /// The records in order.
    pub fn iter(&self) -> FrameRecords<'a> {
        FrameRecords { rest: self.records, index: 0 }
    }

    /// The records from `at` (a [`FrameRecords::record_position`] of a reader of
    /// this batch) on: a batch read in parts costs one read per record, not
    /// a re-read of every record before the part.
    pub fn resume(&self, at: RecordPosition) -> FrameRecords<'a> {
        FrameRecords { rest: self.records.get(at.offset..).unwrap_or_default(), index: at.index }
    }
}

/// Where a [`FrameRecords`] reader stands in its batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordPosition {
    /// Bytes of records read.
    offset: usize,
    /// Records read.
    index: usize,
}

impl RecordPosition {
    /// Records read before this position.
    pub fn records_read(&self) -> usize {
        self.index
    }
}

/// Iterator over a validated [`FrameBatch`].
pub struct FrameRecords<'a> {
    rest: &'a [u8],
    index: usize,
}

impl FrameRecords<'_> {
    /// Where the next record starts (resume there with [`FrameBatch::resume`]).
    pub fn record_position(&self, batch: &FrameBatch<'_>) -> RecordPosition {
        RecordPosition { offset: batch.records.len() - self.rest.len(), index: self.index }
    }
}

impl Iterator for FrameRecords<'_> {
    type Item = FrameRecord;
    fn next(&mut self) -> Option<FrameRecord> {
        if self.rest.is_empty() {
            return None;
        }
        // The batch's records were all checked when it was decoded, so
        // reading cannot fail and the frame is not checked a second time;
        // stopping on error keeps the iterator panic-free regardless.
        let (parts, used) = read_record(self.rest, self.index).ok()?;
        self.rest = &self.rest[used..];
        self.index += 1;
        Some(parts.accepted())
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8], what: &'static str) -> Self {
        Self { buf, pos: 0, what }
    }
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(DecodeError::Truncated {
            what: self.what,
            need: self.pos + n,
            have: self.buf.len(),
        })?;
        let slice = &self.buf[self.pos..end];
        self.pos = end;
        Ok(slice)
    }
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.bytes(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    fn str8(&mut self, what: &'static str, max: usize) -> Result<&'a str, DecodeError> {
        let len = self.u8()? as usize;
        self.string(len, what, max)
    }
    fn str16(&mut self, what: &'static str, max: usize) -> Result<&'a str, DecodeError> {
        let len = self.u16()? as usize;
        self.string(len, what, max)
    }
    fn string(&mut self, len: usize, what: &'static str, max: usize) -> Result<&'a str, DecodeError> {
        if len > max {
            return Err(DecodeError::TooLong { what, len, max });
        }
        std::str::from_utf8(self.bytes(len)?).map_err(|_| DecodeError::NotUtf8 { what })
    }
    fn finish(self) -> Result<(), DecodeError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes { what: self.what, extra: self.buf.len() - self.pos })
        }
    }
}

/// Decode one message body (the bytes after the length prefix).
pub fn decode(body: &[u8]) -> Result<Message<'_>, DecodeError> {
    let (&kind, payload) = body.split_first().ok_or(DecodeError::Empty)?;
    let message = match kind {
        msg::HELLO => {
            let mut r = Reader::new(payload, "HELLO");
            let magic = r.bytes(4)?;
            if magic != MAGIC {
                let mut m = [0u8; 4];
                m.copy_from_slice(magic);
                return Err(DecodeError::BadMagic(m));
            }
            let version = r.u16()?;
            // What follows the version is that version's layout (version 1
            // carried the token in clear): refused before it is read.
            if version != PROTOCOL_VERSION {
                return Err(DecodeError::UnsupportedVersion { version });
            }
            let name = r.str8("client name", MAX_NAME_LEN)?;
            // Fewer than 4 bytes after the name are no options field but
            // trailing bytes.
            let options = match r.remaining() < 4 {
                true => SessionOptions::empty(),
                // A HELLO without options omits the field: four zero bytes
                // are not a field but bytes after the message, so every
                // HELLO has one encoding.
                false => match r.u32()? {
                    0 => return Err(DecodeError::TrailingBytes { what: "HELLO", extra: 4 }),
                    bits => SessionOptions::from_bits(bits)
                        .ok_or(DecodeError::ReservedOptions { what: "session options", bits })?,
                },
            };
            let hello = Hello { version, name, options };
            r.finish()?;
            Message::Hello(hello)
        }
        msg::WELCOME => {
            let mut r = Reader::new(payload, "WELCOME");
            let welcome =
                Welcome { version: r.u16()?, client_id: r.u32()?, hub_name: r.str8("hub name", MAX_NAME_LEN)? };
            r.finish()?;
            Message::Welcome(welcome)
        }
        msg::REFUSE => Message::Refuse(decode_report(payload, "REFUSE")?),
        msg::CHALLENGE => {
            let mut r = Reader::new(payload, "CHALLENGE");
            let mut nonce = [0u8; NONCE_LEN];
            nonce.copy_from_slice(r.bytes(NONCE_LEN)?);
            let challenge = Challenge { nonce, hub_name: r.str8("hub name", MAX_NAME_LEN)? };
            r.finish()?;
            Message::Challenge(challenge)
        }
        msg::AUTH => {
            let mut r = Reader::new(payload, "AUTH");
            let mut mac = [0u8; MAC_LEN];
            mac.copy_from_slice(r.bytes(MAC_LEN)?);
            r.finish()?;
            Message::Auth(Auth { mac })
        }
        msg::ERROR => Message::Error(decode_report(payload, "ERROR")?),
        msg::GOODBYE => Message::Goodbye(decode_report(payload, "GOODBYE")?),
        msg::OPEN_PORT => {
            let mut r = Reader::new(payload, "OPEN_PORT");
            let request = r.u32()?;
            let bits = r.u32()?;
            let options =
                PortOptions::from_bits(bits).ok_or(DecodeError::ReservedOptions { what: "port options", bits })?;
            let open = OpenPort {
                request,
                options,
                channel: r.str8("channel name", MAX_NAME_LEN)?,
                port_name: r.str8("port name", MAX_NAME_LEN)?,
            };
            r.finish()?;
            Message::OpenPort(open)
        }
        msg::PORT_OPENED => {
            let mut r = Reader::new(payload, "PORT_OPENED");
            let opened = PortOpened {
                request: r.u32()?,
                port: r.u16()?,
                channel_id: r.u16()?,
                port_id: r.u32()?,
                // Kept as sent, unknown bits too: a client ignores them.
                channel_flags: ChannelFlags::from_bits_retain(r.u8()?),
            };
            r.finish()?;
            Message::PortOpened(opened)
        }
        msg::CLOSE_PORT | msg::PORT_CLOSED => {
            let mut r = Reader::new(payload, if kind == msg::CLOSE_PORT { "CLOSE_PORT" } else { "PORT_CLOSED" });
            let port = r.u16()?;
            r.finish()?;
            if kind == msg::CLOSE_PORT {
                Message::ClosePort { port }
            } else {
                Message::PortClosed { port }
            }
        }
        msg::FRAMES => Message::Frames(decode_batch(payload)?),
        msg::RX_OVERFLOW => {
            let mut r = Reader::new(payload, "RX_OVERFLOW");
            let overflow = RxOverflow { port: r.u16()?, dropped: r.u32()? };
            r.finish()?;
            Message::RxOverflow(overflow)
        }
        msg::TX_DROPPED => {
            let mut r = Reader::new(payload, "TX_DROPPED");
            let dropped = TxDropped { port: r.u16()?, reason: r.u16()?, dropped: r.u32()? };
            r.finish()?;
            Message::TxDropped(dropped)
        }
        msg::CHANNEL_STATE => {
            let mut r = Reader::new(payload, "CHANNEL_STATE");
            let (port, condition, missed) = (r.u16()?, r.u8()?, r.u32()?);
            let text = r.str16("text", MAX_TEXT_LEN)?;
            r.finish()?;
            Message::ChannelState(ChannelState { port, condition, missed, text })
        }
        msg::STEP | msg::GRANT => {
            let mut r = Reader::new(payload, if kind == msg::STEP { "STEP" } else { "GRANT" });
            let ns = r.u64()?;
            r.finish()?;
            if kind == msg::STEP {
                Message::Step { until_ns: ns }
            } else {
                Message::Grant { now_ns: ns }
            }
        }
        msg::STEP_AHEAD => {
            let mut r = Reader::new(payload, "STEP_AHEAD");
            let (until_ns, period_ns, count) = (r.u64()?, r.u64()?, usize::from(r.u8()?));
            if count > MAX_WAKE_FILTERS {
                return Err(DecodeError::TooManyFilters { count, max: MAX_WAKE_FILTERS });
            }
            let filters = WakeFilters::Wire(r.bytes(count * 8)?);
            r.finish()?;
            Message::StepAhead(StepAhead { until_ns, period_ns, filters })
        }
        msg::PING | msg::PONG => {
            let mut r = Reader::new(payload, if kind == msg::PING { "PING" } else { "PONG" });
            let nonce = r.u64()?;
            r.finish()?;
            if kind == msg::PING {
                Message::Ping { nonce }
            } else {
                Message::Pong { nonce }
            }
        }
        msg::STATS_REQUEST => {
            let mut r = Reader::new(payload, "STATS_REQUEST");
            let request = r.u32()?;
            r.finish()?;
            Message::StatsRequest { request }
        }
        msg::STATS => {
            let mut r = Reader::new(payload, "STATS");
            let request = r.u32()?;
            let len = r.u32()? as usize;
            let json = r.string(len, "statistics", MAX_STATS_LEN)?;
            r.finish()?;
            Message::Stats { request, json }
        }
        other => return Err(DecodeError::UnknownType(other)),
    };
    Ok(message)
}

fn decode_report<'a>(payload: &'a [u8], what: &'static str) -> Result<ErrorReport<'a>, DecodeError> {
    let mut r = Reader::new(payload, what);
    let code = r.u16()?;
    let request = r.u32()?;
    let fatal = match r.u8()? {
        0 => false,
        1 => true,
        other => return Err(DecodeError::ReservedNotZero { what: "fatal flag", value: u32::from(other) }),
    };
    let text = r.str16("text", MAX_TEXT_LEN)?;
    r.finish()?;
    Ok(ErrorReport { code, request, fatal, text })
}

/// A `FRAMES` payload's record count and its records, the count and the
/// reserved byte checked.
#[inline]
fn batch_header(payload: &[u8]) -> Result<(usize, &[u8]), DecodeError> {
    let mut r = Reader::new(payload, "FRAMES");
    let count = r.u16()? as usize;
    let reserved = r.u8()?;
    if reserved != 0 {
        return Err(DecodeError::ReservedNotZero { what: "FRAMES reserved byte", value: u32::from(reserved) });
    }
    if count > MAX_FRAMES_PER_BATCH {
        return Err(DecodeError::TooManyFrames { count, max: MAX_FRAMES_PER_BATCH });
    }
    Ok((count, &payload[r.pos..]))
}

fn decode_batch(payload: &[u8]) -> Result<FrameBatch<'_>, DecodeError> {
    let (count, records) = batch_header(payload)?;
    let mut rest = records;
    let mut first_echo = None;
    for index in 0..count {
        let (parts, used) = read_record(rest, index)?;
        parts.check().map_err(|source| DecodeError::InvalidFrame { index, source })?;
        if first_echo.is_none() && parts.flags.contains(FrameFlags::ECHO) {
            first_echo = Some(index);
        }
        rest = &rest[used..];
    }
    if !rest.is_empty() {
        return Err(DecodeError::TrailingBytes { what: "FRAMES", extra: rest.len() });
    }
    Ok(FrameBatch { count, records, first_echo })
}

/// A frame record's fields, read but not yet checked as a frame.
struct RecordParts<'a> {
    port: u16,
    kind: FrameKind,
    flags: FrameFlags,
    id: u32,
    len: usize,
    len8_dlc: u8,
    af: u32,
    data: &'a [u8],
    meta: FrameMeta,
}

impl RecordParts<'_> {
    #[inline]
    fn check(&self) -> Result<(), crate::frame::FrameError> {
        Frame::check_parts(self.kind, self.flags, self.id, self.len, self.len8_dlc, self.data)
    }

    /// The record, for parts [`RecordParts::check`] accepted.
    fn accepted(&self) -> FrameRecord {
        let frame =
            Frame::from_accepted_parts(self.kind, self.flags, self.id, self.len, self.len8_dlc, self.af, self.data);
        FrameRecord { port: self.port, frame, meta: self.meta }
    }
}

/// Read one record's fields; returns them and the bytes used. Checks what
/// keeps reading in bounds and the record's own reserved values — not yet
/// whether the fields make a valid frame ([`RecordParts::check`]).
#[inline]
fn read_record(buf: &[u8], index: usize) -> Result<(RecordParts<'_>, usize), DecodeError> {
    // The fixed header is checked for length once and read as an array:
    // this runs for every frame that enters the hub.
    let truncated = |need| DecodeError::Truncated { what: "frame record", need, have: buf.len() };
    let h: &[u8; RECORD_HEADER] = buf.first_chunk().ok_or(truncated(RECORD_HEADER))?;
    let u16_at = |at: usize| u16::from_le_bytes([h[at], h[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    let u64_at = |at: usize| u64::from(u32_at(at)) | u64::from(u32_at(at + 4)) << 32;
    let (port, kind_byte, flag_bits, id) = (u16_at(0), h[2], h[3], u32_at(4));
    let (seq, timestamp_ns, sender) = (u64_at(8), u64_at(16), u32_at(24));
    let (len, len8_dlc, reserved) = (usize::from(u16_at(28)), h[30], h[31]);
    if len > MAX_RECORD_DATA {
        return Err(DecodeError::RecordTooLong { index, len });
    }
    let kind = FrameKind::from_wire(kind_byte).ok_or(DecodeError::UnknownFrameKind { index, kind: kind_byte })?;
    // 0x20 and 0x40 are LIN's STANDING and WAKE_UP; on every other kind they are reserved.
    let known =
        FrameFlags::from_bits(flag_bits).filter(|f| kind == FrameKind::Lin || !f.intersects(FrameFlags::LIN_ONLY));
    let flags = known.ok_or(DecodeError::ReservedFlags { index, bits: flag_bits })?;
    if reserved != 0 {
        return Err(DecodeError::ReservedNotZero { what: "frame record reserved byte", value: u32::from(reserved) });
    }
    // A canxl record's acceptance field sits between the header and the
    // data; its RRS flag shares REMOTE's bit but the data are there.
    let (af, start) = if kind == FrameKind::CanXl {
        let at = RECORD_HEADER + XL_AF_LEN;
        let af: &[u8; XL_AF_LEN] = buf[RECORD_HEADER..].first_chunk().ok_or(truncated(at))?;
        (u32::from_le_bytes(*af), at)
    } else {
        (0, RECORD_HEADER)
    };
    let data_len = if flags.contains(FrameFlags::REMOTE) && kind != FrameKind::CanXl { 0 } else { len };
    let used = start + data_len;
    let data = buf.get(start..used).ok_or(truncated(used))?;
    // Frames carry no channel on the wire: the port implies it.
    let meta = FrameMeta { channel: 0, sender, seq, timestamp_ns };
    Ok((RecordParts { port, kind, flags, id, len, len8_dlc, af, data, meta }, used))
}

fn begin(out: &mut Vec<u8>, kind: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, kind]);
    start
}

fn end(out: &mut [u8], start: usize) {
    let body_len = (out.len() - start - LENGTH_PREFIX) as u32;
    out[start..start + LENGTH_PREFIX].copy_from_slice(&body_len.to_le_bytes());
}

fn put_str8(out: &mut Vec<u8>, s: &str, max: usize) {
    let bytes = truncate_utf8(s, max.min(u8::MAX as usize));
    out.push(bytes.len() as u8);
    out.extend_from_slice(bytes);
}

fn put_str16(out: &mut Vec<u8>, s: &str, max: usize) {
    let bytes = truncate_utf8(s, max);
    out.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// The longest prefix of `s` within `max` bytes that ends on a char boundary,
/// so an encoder never produces a string the decoder rejects.
pub(crate) fn truncate_utf8(s: &str, max: usize) -> &[u8] {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s.as_bytes()[..end]
}

/// Append any message. Strings longer than their limit are truncated at a
/// character boundary; frame batches must respect the limits (see
/// [`BatchEncoder`] for building them incrementally).
pub fn encode(out: &mut Vec<u8>, message: &Message<'_>) {
    match message {
        Message::Hello(h) => {
            let s = begin(out, msg::HELLO);
            out.extend_from_slice(&MAGIC);
            out.extend_from_slice(&h.version.to_le_bytes());
            put_str8(out, h.name, MAX_NAME_LEN);
            if !h.options.is_empty() {
                out.extend_from_slice(&h.options.bits().to_le_bytes());
            }
            end(out, s);
        }
        Message::Welcome(w) => {
            let s = begin(out, msg::WELCOME);
            out.extend_from_slice(&w.version.to_le_bytes());
            out.extend_from_slice(&w.client_id.to_le_bytes());
            put_str8(out, w.hub_name, MAX_NAME_LEN);
            end(out, s);
        }
        Message::Refuse(r) => encode_report(out, msg::REFUSE, r),
        Message::Challenge(c) => {
            let s = begin(out, msg::CHALLENGE);
            out.extend_from_slice(&c.nonce);
            put_str8(out, c.hub_name, MAX_NAME_LEN);
            end(out, s);
        }
        Message::Auth(a) => {
            let s = begin(out, msg::AUTH);
            out.extend_from_slice(&a.mac);
            end(out, s);
        }
        Message::Error(r) => encode_report(out, msg::ERROR, r),
        Message::Goodbye(r) => encode_report(out, msg::GOODBYE, r),
        Message::OpenPort(o) => {
            let s = begin(out, msg::OPEN_PORT);
            out.extend_from_slice(&o.request.to_le_bytes());
            out.extend_from_slice(&o.options.bits().to_le_bytes());
            put_str8(out, o.channel, MAX_NAME_LEN);
            put_str8(out, o.port_name, MAX_NAME_LEN);
            end(out, s);
        }
        Message::PortOpened(p) => {
            let s = begin(out, msg::PORT_OPENED);
            out.extend_from_slice(&p.request.to_le_bytes());
            out.extend_from_slice(&p.port.to_le_bytes());
            out.extend_from_slice(&p.channel_id.to_le_bytes());
            out.extend_from_slice(&p.port_id.to_le_bytes());
            out.push(p.channel_flags.bits());
            end(out, s);
        }
        Message::ClosePort { port } | Message::PortClosed { port } => {
            let kind = if matches!(message, Message::ClosePort { .. }) { msg::CLOSE_PORT } else { msg::PORT_CLOSED };
            let s = begin(out, kind);
            out.extend_from_slice(&port.to_le_bytes());
            end(out, s);
        }
        Message::Frames(batch) => {
            let mut encoder = BatchEncoder::begin(out);
            for record in batch.iter() {
                encoder.push(out, record.port, &record.frame, &record.meta);
            }
            if encoder.count == 0 {
                // `finish` drops an empty batch (the packing writer never
                // sends one), but a decoded empty batch must re-encode as
                // itself: write its header with count 0.
                end(out, encoder.start);
            } else {
                encoder.finish(out);
            }
        }
        Message::RxOverflow(o) => {
            let s = begin(out, msg::RX_OVERFLOW);
            out.extend_from_slice(&o.port.to_le_bytes());
            out.extend_from_slice(&o.dropped.to_le_bytes());
            end(out, s);
        }
        Message::TxDropped(d) => {
            let s = begin(out, msg::TX_DROPPED);
            out.extend_from_slice(&d.port.to_le_bytes());
            out.extend_from_slice(&d.reason.to_le_bytes());
            out.extend_from_slice(&d.dropped.to_le_bytes());
            end(out, s);
        }
        Message::ChannelState(c) => {
            let s = begin(out, msg::CHANNEL_STATE);
            out.extend_from_slice(&c.port.to_le_bytes());
            out.push(c.condition);
            out.extend_from_slice(&c.missed.to_le_bytes());
            put_str16(out, c.text, MAX_TEXT_LEN);
            end(out, s);
        }
        Message::StatsRequest { request } => {
            let s = begin(out, msg::STATS_REQUEST);
            out.extend_from_slice(&request.to_le_bytes());
            end(out, s);
        }
        Message::Stats { request, json } => {
            let s = begin(out, msg::STATS);
            out.extend_from_slice(&request.to_le_bytes());
            let bytes = truncate_utf8(json, MAX_STATS_LEN);
            out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
            out.extend_from_slice(bytes);
            end(out, s);
        }
        Message::Ping { nonce } | Message::Pong { nonce } => {
            let kind = if matches!(message, Message::Ping { .. }) { msg::PING } else { msg::PONG };
            let s = begin(out, kind);
            out.extend_from_slice(&nonce.to_le_bytes());
            end(out, s);
        }
        Message::Step { until_ns: ns } | Message::Grant { now_ns: ns } => {
            let kind = if matches!(message, Message::Step { .. }) { msg::STEP } else { msg::GRANT };
            let s = begin(out, kind);
            out.extend_from_slice(&ns.to_le_bytes());
            end(out, s);
        }
        Message::StepAhead(step) => {
            let s = begin(out, msg::STEP_AHEAD);
            out.extend_from_slice(&step.until_ns.to_le_bytes());
            out.extend_from_slice(&step.period_ns.to_le_bytes());
            let filters = step.filters.iter().take(MAX_WAKE_FILTERS);
            out.push(step.filters.len().min(MAX_WAKE_FILTERS) as u8);
            for filter in filters {
                out.extend_from_slice(&filter.can_id.to_le_bytes());
                out.extend_from_slice(&filter.mask.to_le_bytes());
            }
            end(out, s);
        }
    }
}

fn encode_report(out: &mut Vec<u8>, kind: u8, report: &ErrorReport<'_>) {
    let s = begin(out, kind);
    out.extend_from_slice(&report.code.to_le_bytes());
    out.extend_from_slice(&report.request.to_le_bytes());
    out.push(u8::from(report.fatal));
    put_str16(out, report.text, MAX_TEXT_LEN);
    end(out, s);
}

/// Encoded size of one frame record.
pub fn record_len(frame: &Frame) -> usize {
    let af = if frame.is_xl() { XL_AF_LEN } else { 0 };
    RECORD_HEADER + af + frame.data().len()
}

/// Builds one `FRAMES` message in place, record by record: the packing
/// writer of the hub and the client. The caller checks [`BatchEncoder::fits`]
/// before each push so the message stays within the limits.
pub struct BatchEncoder {
    start: usize,
    count: usize,
}

impl BatchEncoder {
    /// Start a `FRAMES` message at the end of `out`.
    pub fn begin(out: &mut Vec<u8>) -> Self {
        let start = begin(out, msg::FRAMES);
        out.extend_from_slice(&[0, 0, 0]);
        Self { start, count: 0 }
    }

    /// Whether another record for `frame` keeps the message within
    /// [`MAX_FRAMES_PER_BATCH`] and [`MAX_MESSAGE_LEN`].
    pub fn fits(&self, out: &[u8], frame: &Frame) -> bool {
        let body = out.len() - self.start - LENGTH_PREFIX;
        self.count < MAX_FRAMES_PER_BATCH && body + record_len(frame) <= MAX_MESSAGE_LEN as usize
    }

    /// Number of records pushed so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Append one record.
    pub fn push(&mut self, out: &mut Vec<u8>, port: u16, frame: &Frame, meta: &FrameMeta) {
        // The header is built in a register-sized array and appended once:
        // one capacity check per record instead of one per field.
        let mut header = [0u8; RECORD_HEADER];
        header[0..2].copy_from_slice(&port.to_le_bytes());
        header[2] = frame.kind() as u8;
        header[3] = frame.flags().bits();
        header[4..8].copy_from_slice(&frame.id().to_le_bytes());
        header[8..16].copy_from_slice(&meta.seq.to_le_bytes());
        header[16..24].copy_from_slice(&meta.timestamp_ns.to_le_bytes());
        header[24..28].copy_from_slice(&meta.sender.to_le_bytes());
        header[28..30].copy_from_slice(&(frame.len() as u16).to_le_bytes());
        header[30] = frame.len8_dlc();
        out.extend_from_slice(&header);
        if frame.is_xl() {
            out.extend_from_slice(&frame.acceptance_field().to_le_bytes());
        }
        // Known sizes for the common lengths: no `memcpy` call for 8 bytes.
        let data = frame.data();
        match data.len() {
            8 => out.extend_from_slice(&data[..8]),
            64 => out.extend_from_slice(&data[..64]),
            _ => out.extend_from_slice(data),
        }
        self.count += 1;
    }

    /// Patch the count and the length prefix. An empty batch is removed
    /// from `out` again.
    pub fn finish(self, out: &mut Vec<u8>) {
        if self.count == 0 {
            out.truncate(self.start);
            return;
        }
        let at = self.start + LENGTH_PREFIX + 1;
        out[at..at + 2].copy_from_slice(&(self.count as u16).to_le_bytes());
        end(out, self.start);
    }
}

/// An outgoing byte buffer that packs consecutive frames into one `FRAMES`
/// message and puts other messages between batches in order: the shared
/// writer half of the hub's and the client's stream transports. Reusing one
/// `Packer` allocates nothing once its buffer has grown.
#[derive(Default)]
pub struct Packer {
    buf: Vec<u8>,
    batch: Option<BatchEncoder>,
}

impl Packer {
    /// An empty packer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append a frame record, starting a new batch when the open one is full.
    pub fn push_frame(&mut self, port: u16, frame: &Frame, meta: &FrameMeta) {
        if let Some(batch) = &self.batch {
            if !batch.fits(&self.buf, frame) {
                self.close_batch();
            }
        }
        let batch = self.batch.get_or_insert_with(|| BatchEncoder::begin(&mut self.buf));
        batch.push(&mut self.buf, port, frame, meta);
    }

    /// Append a non-frame message after everything pushed so far.
    pub fn push_message(&mut self, message: &Message<'_>) {
        self.close_batch();
        encode(&mut self.buf, message);
    }

    /// Append a message already encoded with [`encode`], after everything
    /// pushed so far.
    pub fn push_encoded(&mut self, message: &[u8]) {
        self.close_batch();
        self.buf.extend_from_slice(message);
    }

    /// Bytes pending, including an open batch.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Close the open batch and return every pending byte; call
    /// [`Packer::clear`] once they are written.
    pub fn finish(&mut self) -> &[u8] {
        self.close_batch();
        &self.buf
    }

    /// Forget the pending bytes, keeping the buffer's capacity.
    pub fn clear(&mut self) {
        self.batch = None;
        self.buf.clear();
    }

    fn close_batch(&mut self) {
        if let Some(batch) = self.batch.take() {
            batch.finish(&mut self.buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(message: Message<'_>) {
        let mut out = Vec::new();
        encode(&mut out, &message);
        let len = u32::from_le_bytes([out[0], out[1], out[2], out[3]]);
        assert_eq!(len as usize, out.len() - 4);
        let decoded = decode(&out[4..]).unwrap();
        assert_eq!(decoded, message);
        let mut again = Vec::new();
        encode(&mut again, &decoded);
        assert_eq!(again, out);
    }

    #[test]
    fn control_messages_round_trip() {
        roundtrip(Message::Hello(Hello { version: PROTOCOL_VERSION, name: "ecu", options: SessionOptions::empty() }));
        roundtrip(Message::Hello(Hello {
            version: PROTOCOL_VERSION,
            name: "ecu",
            options: SessionOptions::SYNCHRONIZED,
        }));
        roundtrip(Message::Challenge(Challenge { nonce: [0xA5; NONCE_LEN], hub_name: "rack1" }));
        roundtrip(Message::Auth(Auth { mac: [7; MAC_LEN] }));
        roundtrip(Message::Auth(Auth::NO_TOKEN));
        roundtrip(Message::Step { until_ns: 1_000_000 });
        let filters = [WakeFilter { can_id: 0x7E0, mask: 0x7FF }, WakeFilter { can_id: 0x8000_0100, mask: u32::MAX }];
        roundtrip(Message::StepAhead(StepAhead {
            until_ns: 100_000_000,
            period_ns: 1_000_000,
            filters: WakeFilters::from_slice(&filters),
        }));
        roundtrip(Message::StepAhead(StepAhead { until_ns: 5, period_ns: 1, filters: WakeFilters::from_slice(&[]) }));
        roundtrip(Message::Grant { now_ns: u64::MAX });
        roundtrip(Message::Welcome(Welcome { version: 1, client_id: 7, hub_name: "hub" }));
        roundtrip(Message::OpenPort(OpenPort {
            request: 3,
            options: PortOptions::RECEIVE_OWN,
            channel: "can0",
            port_name: "ecu.a",
        }));
        roundtrip(Message::PortOpened(PortOpened {
            request: 3,
            port: 1,
            channel_id: 0,
            port_id: 9,
            channel_flags: ChannelFlags::CANFD,
        }));
        roundtrip(Message::ClosePort { port: 1 });
        roundtrip(Message::PortClosed { port: 1 });
        roundtrip(Message::RxOverflow(RxOverflow { port: 1, dropped: 12 }));
        roundtrip(Message::TxDropped(TxDropped { port: 1, reason: 1, dropped: 3 }));
        roundtrip(Message::ChannelState(ChannelState { port: 2, condition: 3, missed: 7, text: "gap" }));
        roundtrip(Message::Error(ErrorReport { code: 7, request: 0, fatal: true, text: "port 4 is not open" }));
        roundtrip(Message::Refuse(ErrorReport { code: 2, request: 0, fatal: true, text: "bad magic" }));
        roundtrip(Message::Goodbye(ErrorReport { code: 13, request: 0, fatal: true, text: "bye" }));
        roundtrip(Message::StatsRequest { request: 4 });
        roundtrip(Message::Stats { request: 4, json: "{\"channels\":[]}" });
        roundtrip(Message::Ping { nonce: u64::MAX });
        roundtrip(Message::Pong { nonce: 1 });
    }

    #[test]
    fn a_hello_of_another_version_is_refused_before_its_fields_are_read() {
        // Version 1's HELLO: name "ecu", then the token "ok" in clear.
        let v1 = [msg::HELLO, b'F', b'H', b'U', b'B', 1, 0, 3, b'e', b'c', b'u', 2, b'o', b'k'];
        let refused = decode(&v1).unwrap_err();
        assert_eq!(refused, DecodeError::UnsupportedVersion { version: 1 });
        assert_eq!(refused.code(), ErrorCode::UnsupportedVersion);
    }

    #[test]
    fn frame_batch_round_trips_every_kind() {
        let frames = [
            Frame::can(0x123, false, &[0xDE, 0xAD, 0xBE, 0xEF]).unwrap(),
            Frame::remote(0x1ABCDEF, true, 3).unwrap(),
            Frame::can_fd(0x7FF, FrameFlags::BRS.union(FrameFlags::ESI), &[0x55; 64]).unwrap(),
            Frame::error(0x4, [1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
        ];
        let mut out = Vec::new();
        let mut encoder = BatchEncoder::begin(&mut out);
        for (i, frame) in frames.iter().enumerate() {
            let meta = FrameMeta { channel: 0, sender: 5, seq: i as u64 + 1, timestamp_ns: 1_700_000_000_000_000_000 };
            assert!(encoder.fits(&out, frame));
            encoder.push(&mut out, 2, frame, &meta);
        }
        encoder.finish(&mut out);
        let Message::Frames(batch) = decode(&out[4..]).unwrap() else { panic!("not a batch") };
        let decoded: Vec<Frame> = batch.iter().map(|r| r.frame).collect();
        assert_eq!(decoded, frames);
        assert_eq!(batch.iter().map(|r| r.meta.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
    }

    #[test]
    fn a_batch_notes_its_first_echo_record_while_it_is_validated() {
        let batch_of = |echoes: &[bool]| {
            let mut out = Vec::new();
            let mut encoder = BatchEncoder::begin(&mut out);
            for (i, &echo) in echoes.iter().enumerate() {
                let frame = Frame::can(i as u32, false, &[i as u8; 8]).unwrap().with_echo(echo);
                encoder.push(&mut out, 1, &frame, &FrameMeta::default());
            }
            encoder.finish(&mut out);
            out
        };
        for (echoes, first) in
            [(&[false, false, false][..], None), (&[false, false, true, true][..], Some(2)), (&[true][..], Some(0))]
        {
            let out = batch_of(echoes);
            let Message::Frames(batch) = decode(&out[4..]).unwrap() else { panic!("not a batch") };
            assert_eq!(batch.first_echo(), first, "{echoes:?}");
            assert_eq!(batch.iter().position(|r| r.frame.is_echo()), first, "{echoes:?}");
        }
    }

    #[test]
    fn a_batch_read_in_parts_gives_every_record_once_in_order() {
        let mut out = Vec::new();
        let mut encoder = BatchEncoder::begin(&mut out);
        for i in 0..100u64 {
            let frame = Frame::can_fd(i as u32, FrameFlags::empty(), &[i as u8; 12][..(i % 2 * 12) as usize]).unwrap();
            encoder.push(&mut out, 1, &frame, &FrameMeta { channel: 0, sender: 1, seq: i, timestamp_ns: 0 });
        }
        encoder.finish(&mut out);
        let Message::Frames(batch) = decode(&out[4..]).unwrap() else { panic!("not a batch") };
        let mut seen = Vec::new();
        let mut at = RecordPosition::default();
        for part in [0, 1, 7, 30, 62, 100] {
            let mut records = batch.resume(at);
            while at.records_read() < part {
                seen.push(records.next().unwrap().meta.seq);
                at = records.record_position(&batch);
            }
        }
        assert_eq!(seen, (0..100).collect::<Vec<_>>());
        assert!(batch.resume(at).next().is_none());
    }

    #[test]
    fn packer_splits_batches_at_the_frame_limit_and_keeps_message_order() {
        let frame = Frame::can(1, false, &[1]).unwrap();
        let mut packer = Packer::new();
        for _ in 0..MAX_FRAMES_PER_BATCH + 1 {
            packer.push_frame(0, &frame, &FrameMeta::default());
        }
        packer.push_message(&Message::Pong { nonce: 9 });
        packer.push_frame(0, &frame, &FrameMeta::default());
        let bytes = packer.finish().to_vec();
        let mut kinds = Vec::new();
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            let len = check_length(u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]), MAX_MESSAGE_LEN).unwrap();
            match decode(&rest[4..4 + len]).unwrap() {
                Message::Frames(batch) => kinds.push(format!("frames{}", batch.len())),
                Message::Pong { nonce } => kinds.push(format!("pong{nonce}")),
                other => panic!("unexpected {other:?}"),
            }
            rest = &rest[4 + len..];
        }
        assert_eq!(kinds, ["frames1024", "frames1", "pong9", "frames1"]);
    }

    #[test]
    fn length_prefix_limits() {
        assert_eq!(check_length(0, MAX_MESSAGE_LEN), Err(DecodeError::Empty));
        assert!(matches!(check_length(MAX_MESSAGE_LEN + 1, MAX_MESSAGE_LEN), Err(DecodeError::Oversize { .. })));
        assert_eq!(check_length(MAX_MESSAGE_LEN, MAX_MESSAGE_LEN), Ok(MAX_MESSAGE_LEN as usize));
    }

    #[test]
    fn decoder_survives_every_truncation() {
        let mut out = Vec::new();
        encode(
            &mut out,
            &Message::Hello(Hello { version: PROTOCOL_VERSION, name: "n", options: SessionOptions::SYNCHRONIZED }),
        );
        let mut encoder = BatchEncoder::begin(&mut out);
        let frame = Frame::can_fd(1, FrameFlags::empty(), &[7; 12]).unwrap();
        encoder.push(&mut out, 0, &frame, &FrameMeta::default());
        encoder.finish(&mut out);
        // Every prefix of every body either decodes or errors; none panics.
        let first_len = u32::from_le_bytes([out[0], out[1], out[2], out[3]]) as usize;
        let bodies = [&out[4..4 + first_len], &out[8 + first_len..]];
        for body in bodies {
            for cut in 0..body.len() {
                // HELLO's options are optional: cut right after the name,
                // the body is a HELLO without them.
                let optional_end = body[0] == msg::HELLO && cut == body.len() - 4;
                assert_eq!(decode(&body[..cut]).is_err(), !optional_end, "cut at {cut}");
            }
        }
    }
}
