//! The frame model: CAN classic, CAN FD, error, LIN, CAN XL and raw frames,
//! plus the metadata a hub assigns when it puts a frame on a channel.
//!
//! A [`Frame`] is a `Clone` value of at most 80 bytes. CAN, CAN FD, error and
//! LIN frames carry their payload inline (64 bytes), so the data path moves
//! them without allocating; CAN XL and raw frames (up to 2,048 bytes) carry
//! theirs in one shared buffer made when the frame is built, which a clone
//! shares by reference (`payload.rs`). Every constructor validates; a
//! `Frame` value is always one that a real controller could put on the wire.
//! The CAN XL and raw constructors and accessors are in [`crate::canxl`].

use std::sync::Arc;

use crate::limits::{MAX_CANFD_DATA, MAX_CAN_DATA};
use crate::lin::{self, Checksum};
use crate::payload::{Inline, Payload};

/// Largest 11-bit (base) identifier.
pub const MAX_STANDARD_ID: u32 = 0x7FF;
/// Largest 29-bit (extended) identifier.
pub const MAX_EXTENDED_ID: u32 = 0x1FFF_FFFF;
/// SocketCAN `CAN_EFF_FLAG`: the identifier is 29 bits.
pub const CAN_EFF_FLAG: u32 = 0x8000_0000;
/// SocketCAN `CAN_RTR_FLAG`: remote transmission request.
pub const CAN_RTR_FLAG: u32 = 0x4000_0000;
/// SocketCAN `CAN_ERR_FLAG`: error frame.
pub const CAN_ERR_FLAG: u32 = 0x2000_0000;
/// Payload length of every error frame (SocketCAN `CAN_ERR_DLC`).
pub const ERROR_FRAME_LEN: usize = 8;

/// What kind of frame a record carries. The wire value is stable; the
/// reserved 6..=255 are refused as `unknown_frame_kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// CAN 2.0 data or remote frame, 0..=8 bytes.
    Can = 0,
    /// CAN FD frame, one of the FD lengths up to 64 bytes.
    CanFd = 1,
    /// Error frame in SocketCAN layout: the id carries the error class bits
    /// (`CAN_ERR_*` without `CAN_ERR_FLAG`), the 8 data bytes the details.
    Error = 2,
    /// LIN 2.x frame: a 6-bit identifier, 1..=8 data bytes and the checksum
    /// byte, or a header no slave answered ([`crate::lin`]).
    Lin = 3,
    /// CAN XL data frame (ISO 11898-1:2024): an 11-bit priority, a VCID, SDT,
    /// SEC, RRS, the acceptance field and 1..=2048 data bytes
    /// ([`crate::canxl`], spec/protocol.md 4.1.2).
    CanXl = 4,
    /// Generic frame of a bus the hub has no model of: a u32 id the
    /// channel's access rule reads and 0..=2048 opaque bytes (4.1.3).
    Raw = 5,
}

impl FrameKind {
    /// The kind for a wire value, if this revision knows it.
    pub fn from_wire(value: u8) -> Option<Self> {
        match value {
            0 => Some(Self::Can),
            1 => Some(Self::CanFd),
            2 => Some(Self::Error),
            3 => Some(Self::Lin),
            4 => Some(Self::CanXl),
            5 => Some(Self::Raw),
            _ => None,
        }
    }
}

bitflags::bitflags! {
    /// Frame flags as they appear on the wire (one byte). Bits this revision
    /// does not define must be zero (`from_bits` refuses them).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct FrameFlags: u8 {
        /// 29-bit identifier (CAN and CAN FD).
        const EXTENDED = 0x01;
        /// Remote transmission request (CAN classic only).
        const REMOTE = 0x02;
        /// Bit rate switch for the data phase (CAN FD only).
        const BRS = 0x04;
        /// Error state indicator (CAN FD only).
        const ESI = 0x08;
        /// Hub to client only: this is the receiving port's own frame,
        /// confirmed as transmitted (SocketCAN `MSG_CONFIRM` / `recv_own_msgs`).
        const ECHO = 0x10;
        /// LIN, client to hub only: a standing response (spec 4.1.1) — it
        /// answers every header of its identifier until replaced or
        /// withdrawn. Reserved on every other kind (the decoder refuses it
        /// there as `reserved_flags`).
        const LIN_STANDING = 0x20;
        /// LIN: a wake-up pulse (spec 4.1.1) — from a client, a request to
        /// wake the sleeping bus; from the hub, the pulse on the bus.
        /// Reserved on every other kind, as `LIN_STANDING` is.
        const LIN_WAKE_UP = 0x40;
    }
}

/// The low flag bits mean something else on a LIN frame (spec 4.2).
impl FrameFlags {
    /// LIN: the classic checksum (data bytes only); without it, enhanced.
    pub const LIN_CLASSIC: Self = Self::EXTENDED;
    /// LIN, hub to client only: the header went out and no slave answered.
    pub const LIN_NO_RESPONSE: Self = Self::REMOTE;
    /// LIN: the checksum byte is not the one its model gives.
    pub const LIN_CHECKSUM_ERROR: Self = Self::BRS;
    /// LIN, hub to client only: two or more slaves answered an
    /// event-triggered header at once; the data are what the bus read.
    pub const LIN_COLLISION: Self = Self::ESI;
    /// The bits only a LIN record may carry; reserved on every other kind.
    pub const LIN_ONLY: Self = Self::LIN_STANDING.union(Self::LIN_WAKE_UP);
    /// CAN XL: simple extended content (SocketCAN `CANXL_SEC`).
    pub const XL_SEC: Self = Self::EXTENDED;
    /// CAN XL: remote request substitution (SocketCAN `CANXL_RRS`).
    pub const XL_RRS: Self = Self::REMOTE;
}

/// Why a frame is not valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("identifier 0x{id:X} exceeds the 11-bit range (set the extended flag for 29-bit ids)")]
    StandardIdTooLarge { id: u32 },
    #[error("identifier 0x{id:X} exceeds the 29-bit range")]
    ExtendedIdTooLarge { id: u32 },
    #[error("classic CAN frames carry at most 8 data bytes, got {len}")]
    CanTooLong { len: usize },
    #[error("{len} is not a valid CAN FD length (0..=8, 12, 16, 20, 24, 32, 48, 64)")]
    InvalidFdLength { len: usize },
    #[error("DLC {dlc} does not match length {len} (DLC 9..=15 is only allowed with 8 data bytes)")]
    DlcMismatch { dlc: u8, len: usize },
    #[error("flag {flag} is not allowed on a {kind} frame")]
    FlagNotAllowed { flag: &'static str, kind: &'static str },
    #[error("error frames carry exactly 8 data bytes, got {len}")]
    ErrorFrameLength { len: usize },
    #[error(transparent)]
    Lin(#[from] crate::lin::LinError),
    #[error("a CAN XL frame carries 1..=2048 data bytes, got {len}")]
    XlLength { len: usize },
    #[error("CAN XL id 0x{id:X} sets bits outside the priority (0..=10) and the VCID (16..=23)")]
    XlIdBits { id: u32 },
    #[error("a raw frame carries at most 2048 data bytes, got {len}")]
    RawTooLong { len: usize },
    #[error("len8_dlc must be 0 on a raw frame, got {dlc}")]
    RawLen8Dlc { dlc: u8 },
}

/// One frame: fixed size (80 bytes), payload inline or shared by kind.
///
/// Laid out as an 8-byte-aligned header word (id, kind, flags, lengths)
/// followed by the payload: a frame is moved several times on its way
/// through the hub, and aligned halves copy as whole words instead of as
/// pieces the processor must stitch together from earlier narrow stores
/// (this layout took the hub from ~240 to ~200 ns of CPU a frame).
#[derive(Clone)]
#[repr(C, align(8))]
pub struct Frame {
    pub(crate) id: u32,
    pub(crate) kind: FrameKind,
    pub(crate) flags: FrameFlags,
    /// The inline payload's length; 0 for a shared payload, whose buffer
    /// holds its own length.
    pub(crate) len: u8,
    pub(crate) len8_dlc: u8,
    pub(crate) payload: Payload,
}

/// CAN, CAN FD and LIN frames stay as small as before XL: the shared form
/// fits beside the inline bytes, not on top of them.
const _: () = assert!(std::mem::size_of::<Frame>() <= 80);

/// Copy a payload of up to 64 bytes to the front of `to`. The common
/// lengths are copies of a known size (a register move or two) rather than
/// a call to `memcpy` for a few bytes: this runs for every frame the hub
/// reads.
#[inline(always)]
pub(crate) fn copy_payload(to: &mut [u8; MAX_CANFD_DATA], from: &[u8]) {
    match from.len() {
        0 => {}
        8 => to[..8].copy_from_slice(&from[..8]),
        64 => to.copy_from_slice(&from[..64]),
        n => {
            let n = n.min(MAX_CANFD_DATA);
            to[..n].copy_from_slice(&from[..n]);
        }
    }
}

/// Valid CAN FD payload lengths, indexed by DLC.
pub const FD_LENGTHS: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64];

/// The DLC code for a CAN FD length, if the length is valid.
pub fn fd_len_to_dlc(len: usize) -> Option<u8> {
    FD_LENGTHS.iter().position(|&l| l as usize == len).map(|d| d as u8)
}

/// The smallest valid CAN FD length that holds `len` bytes (as SocketCAN's
/// `can_fd_len2dlc` rounds up), or `None` above 64.
pub fn fd_round_up_len(len: usize) -> Option<usize> {
    FD_LENGTHS.iter().map(|&l| l as usize).find(|&l| l >= len)
}

/// Refuse every one of the four low flags (EXTENDED, REMOTE, BRS, ESI) on a
/// `kind` whose records may carry `ECHO` alone (error and raw frames).
pub(crate) fn only_echo(flags: FrameFlags, kind: &'static str) -> Result<(), FrameError> {
    for (flag, name) in [
        (FrameFlags::EXTENDED, "extended"),
        (FrameFlags::REMOTE, "remote"),
        (FrameFlags::BRS, "brs"),
        (FrameFlags::ESI, "esi"),
    ] {
        if flags.contains(flag) {
            return Err(FrameError::FlagNotAllowed { flag: name, kind });
        }
    }
    Ok(())
}

fn check_id(id: u32, extended: bool) -> Result<(), FrameError> {
    if extended {
        if id > MAX_EXTENDED_ID {
            return Err(FrameError::ExtendedIdTooLarge { id });
        }
    } else if id > MAX_STANDARD_ID {
        return Err(FrameError::StandardIdTooLarge { id });
    }
    Ok(())
}

impl Frame {
    /// A classic CAN data frame. `extended` selects a 29-bit identifier.
    pub fn can(id: u32, extended: bool, data: &[u8]) -> Result<Self, FrameError> {
        check_id(id, extended)?;
        if data.len() > MAX_CAN_DATA {
            return Err(FrameError::CanTooLong { len: data.len() });
        }
        let mut frame = Self::inline(FrameKind::Can, id, data);
        if extended {
            frame.flags = FrameFlags::EXTENDED;
        }
        Ok(frame)
    }

    /// A classic CAN remote frame requesting `len` bytes (0..=8).
    pub fn remote(id: u32, extended: bool, len: usize) -> Result<Self, FrameError> {
        check_id(id, extended)?;
        if len > MAX_CAN_DATA {
            return Err(FrameError::CanTooLong { len });
        }
        let mut frame = Self::inline(FrameKind::Can, id, &[]);
        frame.len = len as u8;
        frame.flags = FrameFlags::REMOTE;
        if extended {
            frame.flags = frame.flags.union(FrameFlags::EXTENDED);
        }
        Ok(frame)
    }

    /// A CAN FD frame. `data.len()` must be a valid FD length; `flags` may
    /// hold `EXTENDED`, `BRS` and `ESI`.
    pub fn can_fd(id: u32, flags: FrameFlags, data: &[u8]) -> Result<Self, FrameError> {
        if flags.contains(FrameFlags::REMOTE) {
            return Err(FrameError::FlagNotAllowed { flag: "remote", kind: "CAN FD" });
        }
        if flags.contains(FrameFlags::ECHO) {
            return Err(FrameError::FlagNotAllowed { flag: "echo", kind: "CAN FD" });
        }
        check_id(id, flags.contains(FrameFlags::EXTENDED))?;
        if fd_len_to_dlc(data.len()).is_none() {
            return Err(FrameError::InvalidFdLength { len: data.len() });
        }
        let mut frame = Self::inline(FrameKind::CanFd, id, data);
        frame.flags = flags;
        Ok(frame)
    }

    /// An error frame: `class` holds SocketCAN's `CAN_ERR_*` class bits
    /// (without `CAN_ERR_FLAG`), `data` the eight detail bytes.
    pub fn error(class: u32, data: [u8; ERROR_FRAME_LEN]) -> Result<Self, FrameError> {
        if class > MAX_EXTENDED_ID {
            return Err(FrameError::ExtendedIdTooLarge { id: class });
        }
        Ok(Self::inline(FrameKind::Error, class, &data))
    }

    /// A LIN response for identifier `id` (0..=0x3F) with 1..=8 data bytes,
    /// its checksum byte computed under `model`.
    pub fn lin(id: u8, model: Checksum, data: &[u8]) -> Result<Self, FrameError> {
        let pid = lin::protected_id(id)?;
        Self::lin_with_checksum(id, model, data, model.of(pid, data))
    }

    /// A LIN response with the checksum byte `checksum` as given: flagged
    /// `LIN_CHECKSUM_ERROR` when it is not the one `model` gives (a slave
    /// that sends a wrong checksum).
    pub fn lin_with_checksum(id: u8, model: Checksum, data: &[u8], checksum: u8) -> Result<Self, FrameError> {
        let pid = lin::protected_id(id)?;
        let mut flags = match model {
            Checksum::Classic => FrameFlags::LIN_CLASSIC,
            Checksum::Enhanced => FrameFlags::empty(),
        };
        if checksum != model.of(pid, data) {
            flags |= FrameFlags::LIN_CHECKSUM_ERROR;
        }
        Self::from_parts(FrameKind::Lin, flags, u32::from(id), data.len(), checksum, 0, data)
    }

    /// A standing response for identifier `id` (spec 4.1.1): it answers
    /// every header of `id` with these bytes until replaced or withdrawn.
    pub fn lin_standing(id: u8, model: Checksum, data: &[u8]) -> Result<Self, FrameError> {
        let mut frame = Self::lin(id, model, data)?;
        frame.flags |= FrameFlags::LIN_STANDING;
        Ok(frame)
    }

    /// The withdrawal of a port's standing response for identifier `id`:
    /// from the next header on it answers no more.
    pub fn lin_withdraw(id: u8) -> Result<Self, FrameError> {
        Self::from_parts(FrameKind::Lin, FrameFlags::LIN_STANDING, u32::from(id), 0, 0, 0, &[])
    }

    /// Whether this is a LIN standing response or its withdrawal (flag
    /// `LIN_STANDING`).
    pub fn is_lin_standing(&self) -> bool {
        self.kind == FrameKind::Lin && self.flags.contains(FrameFlags::LIN_STANDING)
    }

    /// A standing response as it answers a header: the same frame without
    /// `LIN_STANDING`, which only a client's request carries.
    #[must_use]
    pub fn without_standing(mut self) -> Self {
        self.flags = self.flags.difference(FrameFlags::LIN_STANDING);
        self
    }

    /// A wake-up pulse (spec 4.1.1): a node forces the sleeping bus
    /// dominant for [`lin::WAKE_UP_BITS`] bit times. No identifier, no data.
    pub fn lin_wake_up() -> Self {
        Self::from_accepted_parts(FrameKind::Lin, FrameFlags::LIN_WAKE_UP, 0, 0, 0, 0, &[])
    }

    /// Whether this is a LIN wake-up pulse (flag `LIN_WAKE_UP`).
    pub fn is_lin_wake_up(&self) -> bool {
        self.kind == FrameKind::Lin && self.flags.contains(FrameFlags::LIN_WAKE_UP)
    }

    /// The go-to-sleep command (spec 4.1.1, LIN 2.x): the master request
    /// frame 0x3C with data `00 FF FF FF FF FF FF FF`, classic checksum.
    pub fn lin_go_to_sleep() -> Self {
        let pid = lin::protected_id(lin::MASTER_REQUEST).unwrap_or(0);
        let data = &lin::GO_TO_SLEEP;
        let checksum = Checksum::Classic.of(pid, data);
        let (id, flags) = (u32::from(lin::MASTER_REQUEST), FrameFlags::LIN_CLASSIC);
        Self::from_accepted_parts(FrameKind::Lin, flags, id, data.len(), checksum, 0, data)
    }

    /// Whether this is the go-to-sleep command: a master request (0x3C)
    /// response whose first data byte is 0 (LIN 2.x: NAD 0), as a slave
    /// recognises it (the hub also wants the other bytes [`lin::GO_TO_SLEEP`]'s
    /// before it sends one).
    pub fn is_lin_go_to_sleep(&self) -> bool {
        self.kind == FrameKind::Lin
            && self.id == u32::from(lin::MASTER_REQUEST)
            && !self.flags.intersects(FrameFlags::LIN_NO_RESPONSE | FrameFlags::LIN_COLLISION | FrameFlags::LIN_ONLY)
            && self.data().first() == Some(&0)
    }

    /// The header of identifier `id` that no slave answered.
    pub fn lin_no_response(id: u8) -> Result<Self, FrameError> {
        Self::from_parts(FrameKind::Lin, FrameFlags::LIN_NO_RESPONSE, u32::from(id), 0, 0, 0, &[])
    }

    /// What the bus read when `responses` (two or more slaves' answers to
    /// the header of event-triggered frame `id`) collided: each response's
    /// data bytes and checksum byte, shorter ones padded with recessive
    /// 0xFF, ANDed bit by bit (dominant 0 wins), as long as the longest
    /// (spec 4.1.1).
    pub fn lin_collision(id: u8, responses: &[Frame]) -> Result<Self, FrameError> {
        let mut bytes = [0xFF_u8; lin::MAX_DATA + 1];
        let mut len = 0;
        for response in responses {
            let data = response.data();
            for (byte, sent) in bytes.iter_mut().zip(data.iter().chain([&response.len8_dlc()])) {
                *byte &= sent;
            }
            len = len.max(data.len());
        }
        let (data, checksum) = (&bytes[..len], bytes[len]);
        Self::from_parts(FrameKind::Lin, FrameFlags::LIN_COLLISION, u32::from(id), len, checksum, 0, data)
    }

    /// Build a frame from wire fields, checking every combination. `data`
    /// holds the payload; it is ignored (and may be empty) for remote frames.
    /// `af` is a CAN XL frame's acceptance field, ignored on other kinds.
    pub fn from_parts(
        kind: FrameKind,
        flags: FrameFlags,
        id: u32,
        len: usize,
        len8_dlc: u8,
        af: u32,
        data: &[u8],
    ) -> Result<Self, FrameError> {
        Self::check_parts(kind, flags, id, len, len8_dlc, data)?;
        Ok(Self::from_accepted_parts(kind, flags, id, len, len8_dlc, af, data))
    }

    /// Whether [`Frame::from_parts`] accepts these fields, without building
    /// the frame: what a decoder checks of every record of a batch before it
    /// hands out any of them.
    pub fn check_parts(
        kind: FrameKind,
        flags: FrameFlags,
        id: u32,
        len: usize,
        len8_dlc: u8,
        data: &[u8],
    ) -> Result<(), FrameError> {
        if kind != FrameKind::Lin && flags.contains(FrameFlags::LIN_STANDING) {
            return Err(FrameError::FlagNotAllowed { flag: "standing", kind: "CAN" });
        }
        if kind != FrameKind::Lin && flags.contains(FrameFlags::LIN_WAKE_UP) {
            return Err(FrameError::FlagNotAllowed { flag: "wake_up", kind: "CAN" });
        }
        match kind {
            FrameKind::Can => {
                if flags.contains(FrameFlags::BRS) {
                    return Err(FrameError::FlagNotAllowed { flag: "brs", kind: "classic CAN" });
                }
                if flags.contains(FrameFlags::ESI) {
                    return Err(FrameError::FlagNotAllowed { flag: "esi", kind: "classic CAN" });
                }
                check_id(id, flags.contains(FrameFlags::EXTENDED))?;
                if flags.contains(FrameFlags::REMOTE) {
                    if len > MAX_CAN_DATA {
                        return Err(FrameError::CanTooLong { len });
                    }
                } else {
                    let given = len.min(data.len());
                    if given > MAX_CAN_DATA {
                        return Err(FrameError::CanTooLong { len: given });
                    }
                    if data.len() != len {
                        return Err(FrameError::CanTooLong { len });
                    }
                }
                if !(len8_dlc == 0 || (len == 8 && (9..=15).contains(&len8_dlc))) {
                    return Err(FrameError::DlcMismatch { dlc: len8_dlc, len });
                }
            }
            FrameKind::CanFd => {
                if len8_dlc != 0 {
                    return Err(FrameError::DlcMismatch { dlc: len8_dlc, len });
                }
                if data.len() != len {
                    return Err(FrameError::InvalidFdLength { len });
                }
                if flags.contains(FrameFlags::REMOTE) {
                    return Err(FrameError::FlagNotAllowed { flag: "remote", kind: "CAN FD" });
                }
                check_id(id, flags.contains(FrameFlags::EXTENDED))?;
                if fd_len_to_dlc(len).is_none() {
                    return Err(FrameError::InvalidFdLength { len });
                }
            }
            FrameKind::Error => {
                only_echo(flags, "error")?;
                if len != ERROR_FRAME_LEN || data.len() != ERROR_FRAME_LEN || len8_dlc != 0 {
                    return Err(FrameError::ErrorFrameLength { len });
                }
                if id > MAX_EXTENDED_ID {
                    return Err(FrameError::ExtendedIdTooLarge { id });
                }
            }
            FrameKind::Lin => lin::check_record(flags, id, len, len8_dlc, data)?,
            FrameKind::CanXl => crate::canxl::check_xl(flags, id, len, data)?,
            FrameKind::Raw => crate::canxl::check_raw(flags, len, len8_dlc, data)?,
        }
        Ok(())
    }

    /// The frame [`Frame::from_parts`] builds, for fields
    /// [`Frame::check_parts`] has accepted: a batch's records are checked
    /// when the batch is decoded and assembled without a second check when
    /// it is read.
    pub(crate) fn from_accepted_parts(
        kind: FrameKind,
        flags: FrameFlags,
        id: u32,
        len: usize,
        len8_dlc: u8,
        af: u32,
        data: &[u8],
    ) -> Self {
        if matches!(kind, FrameKind::CanXl | FrameKind::Raw) {
            let af = if kind == FrameKind::CanXl { af } else { 0 };
            return Self { kind, flags, id, len: 0, len8_dlc, payload: Payload::shared(af, &data[..len]) };
        }
        // The payload is copied into the frame where it is built, not into
        // a local first: copying that local on in wide pieces right after
        // writing it stalled the processor (its store-to-load forwarding
        // fails), most of this function's time in perf.
        let mut frame = Self { kind, flags, id, len: len as u8, len8_dlc, payload: Payload::Inline(Inline::EMPTY) };
        frame.fill_inline(data);
        frame
    }

    /// An empty classic CAN data frame with id 0: a valid frame, and a
    /// place to write a record into (`wire::CheckedRecord::write_into`). A
    /// constant, so that putting it where a frame goes stores it there
    /// rather than copying a value built just before (which stalls).
    pub const EMPTY: Self = Self {
        id: 0,
        kind: FrameKind::Can,
        flags: FrameFlags::empty(),
        len: 0,
        len8_dlc: 0,
        payload: Payload::Inline(Inline::EMPTY),
    };

    /// Make this frame the one [`Frame::from_accepted_parts`] builds for
    /// fields of an inline kind, written where it is: for a reader that puts
    /// a record straight into the place the frame goes, so that it is not
    /// built in one place and copied on at once
    /// (`wire::CheckedRecord::write_into`).
    #[inline]
    pub(crate) fn assign_inline(
        &mut self,
        kind: FrameKind,
        flags: FrameFlags,
        id: u32,
        len: usize,
        len8_dlc: u8,
        data: &[u8],
    ) {
        debug_assert!(!matches!(kind, FrameKind::CanXl | FrameKind::Raw), "{kind:?} has a shared payload");
        (self.id, self.kind, self.flags, self.len, self.len8_dlc) = (id, kind, flags, len as u8, len8_dlc);
        // All zero first, as a frame built anew: bytes past `len` are zero.
        // Zeroed where they are: a new `Payload` value was built aside and
        // copied in, stalling on its own stores.
        match &mut self.payload {
            Payload::Inline(bytes) => *bytes = Inline::EMPTY,
            shared => *shared = Payload::Inline(Inline::EMPTY),
        }
        self.fill_inline(data);
    }

    /// Copy `data` into the inline payload, unless the frame is a remote
    /// frame, whose payload is never sent, whatever the caller passed.
    fn fill_inline(&mut self, data: &[u8]) {
        if let (false, Payload::Inline(bytes)) = (self.flags.contains(FrameFlags::REMOTE), &mut self.payload) {
            copy_payload(&mut bytes.0, data);
        }
    }

    /// A frame of an inline kind carrying `data` (at most 64 bytes, checked
    /// by the caller), flags empty.
    fn inline(kind: FrameKind, id: u32, data: &[u8]) -> Self {
        // Built in place, as in `from_accepted_parts`.
        let mut frame = Self {
            kind,
            flags: FrameFlags::empty(),
            id,
            len: data.len() as u8,
            len8_dlc: 0,
            payload: Payload::Inline(Inline::EMPTY),
        };
        if let Payload::Inline(bytes) = &mut frame.payload {
            bytes.0[..data.len()].copy_from_slice(data);
        }
        frame
    }

    /// Set the raw DLC 9..=15 of a classic 8-byte frame (SocketCAN
    /// `len8_dlc`); 0 clears it.
    pub fn set_len8_dlc(&mut self, dlc: u8) -> Result<(), FrameError> {
        let ok = dlc == 0 || (self.kind == FrameKind::Can && self.len == 8 && (9..=15).contains(&dlc));
        if !ok {
            return Err(FrameError::DlcMismatch { dlc, len: self.len as usize });
        }
        self.len8_dlc = dlc;
        Ok(())
    }

    /// The kind of frame.
    pub fn kind(&self) -> FrameKind {
        self.kind
    }
    /// Wire flags, including `ECHO` on TX confirmations.
    pub fn flags(&self) -> FrameFlags {
        self.flags
    }
    /// Identifier (11 or 29 bits), or the error class bits of an error frame.
    pub fn id(&self) -> u32 {
        self.id
    }
    /// The identifier as SocketCAN writes it in `can_id`: the id or error
    /// class, plus `CAN_EFF_FLAG`, `CAN_RTR_FLAG` or `CAN_ERR_FLAG`.
    pub fn socketcan_id(&self) -> u32 {
        let mut id = self.id;
        if self.is_extended() {
            id |= CAN_EFF_FLAG;
        }
        if self.is_remote() {
            id |= CAN_RTR_FLAG;
        }
        if self.is_error() {
            id |= CAN_ERR_FLAG;
        }
        id
    }

    /// Whether the identifier is 29 bits.
    pub fn is_extended(&self) -> bool {
        self.flags.contains(FrameFlags::EXTENDED) && matches!(self.kind, FrameKind::Can | FrameKind::CanFd)
    }
    /// Whether this is a remote transmission request.
    pub fn is_remote(&self) -> bool {
        self.flags.contains(FrameFlags::REMOTE) && self.kind == FrameKind::Can
    }
    /// Whether this is a CAN FD frame.
    pub fn is_fd(&self) -> bool {
        self.kind == FrameKind::CanFd
    }
    /// Whether this is an error frame.
    pub fn is_error(&self) -> bool {
        self.kind == FrameKind::Error
    }
    /// Whether this frame is a TX confirmation of the receiving port's own frame.
    pub fn is_echo(&self) -> bool {
        self.flags.contains(FrameFlags::ECHO)
    }
    /// Payload length; for a remote frame the requested length.
    pub fn len(&self) -> usize {
        match &self.payload {
            Payload::Inline(_) => self.len as usize,
            Payload::Shared { bytes, .. } => bytes.len(),
        }
    }
    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Raw DLC 9..=15 of a classic 8-byte frame, a LIN frame's checksum
    /// byte, a CAN XL frame's SDT, 0 otherwise (the record's `len8_dlc` field).
    pub fn len8_dlc(&self) -> u8 {
        self.len8_dlc
    }
    /// Whether this is a LIN frame.
    pub fn is_lin(&self) -> bool {
        self.kind == FrameKind::Lin
    }
    /// The 4-bit DLC code as it would appear on the wire; 0 on CAN XL and
    /// raw frames (an XL frame's 11-bit DLC: [`Frame::xl_dlc`]).
    pub fn dlc(&self) -> u8 {
        match self.kind {
            FrameKind::Can if self.len8_dlc != 0 => self.len8_dlc,
            FrameKind::CanFd => fd_len_to_dlc(self.len as usize).unwrap_or(15),
            FrameKind::CanXl | FrameKind::Raw => 0,
            _ => self.len,
        }
    }
    /// Payload bytes (empty for remote frames).
    pub fn data(&self) -> &[u8] {
        match &self.payload {
            Payload::Inline(_) if self.is_remote() => &[],
            Payload::Inline(bytes) => &bytes.0[..self.len as usize],
            Payload::Shared { bytes, .. } => bytes,
        }
    }
    /// Payload bytes, mutable (empty for remote frames). A shared payload
    /// that another frame still holds is copied first.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let remote = self.is_remote();
        match &mut self.payload {
            Payload::Inline(_) if remote => &mut [],
            Payload::Inline(bytes) => &mut bytes.0[..self.len as usize],
            Payload::Shared { bytes, .. } => Arc::make_mut(bytes),
        }
    }
    /// This frame with another identifier (same format: 11 or 29 bits; a
    /// CAN XL frame's priority and VCID bits; any u32 on a raw frame).
    pub fn with_id(mut self, id: u32) -> Result<Self, FrameError> {
        if self.is_lin() {
            // The enhanced checksum covers the protected identifier.
            let id = u8::try_from(id).map_err(|_| lin::LinError::IdOutOfRange(id))?;
            return if self.flags.contains(FrameFlags::LIN_NO_RESPONSE) {
                Self::lin_no_response(id)
            } else {
                Self::lin(id, lin::model_of(self.flags), self.data())
            };
        }
        match self.kind {
            FrameKind::Error | FrameKind::Raw => {}
            FrameKind::CanXl => crate::canxl::check_xl_id(id)?,
            _ => check_id(id, self.is_extended())?,
        }
        self.id = id;
        Ok(self)
    }

    /// This frame with another payload length: bytes beyond the old length
    /// read as zero, bytes beyond the new one are cut. The length must suit
    /// the kind (0..=8 classic, an FD length for CAN FD, 8 for error frames,
    /// 1..=2048 CAN XL, 0..=2048 raw).
    pub fn with_len(mut self, len: usize) -> Result<Self, FrameError> {
        match self.kind {
            FrameKind::CanXl | FrameKind::Raw => return crate::canxl::with_shared_len(self, len),
            FrameKind::Can if len > MAX_CAN_DATA => return Err(FrameError::CanTooLong { len }),
            FrameKind::CanFd if fd_len_to_dlc(len).is_none() => return Err(FrameError::InvalidFdLength { len }),
            FrameKind::Error if len != ERROR_FRAME_LEN => return Err(FrameError::ErrorFrameLength { len }),
            FrameKind::Lin => {
                // The checksum covers the data: made anew over the new length.
                let id = self.id as u8;
                let mut data = [0; MAX_CANFD_DATA];
                data[..self.len as usize].copy_from_slice(self.data());
                return Self::lin(id, lin::model_of(self.flags), &data[..len.min(MAX_CANFD_DATA)]);
            }
            _ => {}
        }
        let old = self.len as usize;
        if let Payload::Inline(bytes) = &mut self.payload {
            bytes.0[old..].fill(0);
        }
        self.len = len as u8;
        if len != 8 {
            self.len8_dlc = 0;
        }
        Ok(self)
    }

    /// This frame marked (or unmarked) as a TX confirmation.
    #[must_use]
    pub fn with_echo(mut self, echo: bool) -> Self {
        self.flags = if echo { self.flags.union(FrameFlags::ECHO) } else { self.flags.difference(FrameFlags::ECHO) };
        self
    }
}

impl PartialEq for Frame {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && self.flags == other.flags
            && self.id == other.id
            && self.len == other.len
            && self.len8_dlc == other.len8_dlc
            && self.acceptance_field() == other.acceptance_field()
            && self.data() == other.data()
    }
}
impl Eq for Frame {}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Frame({})", crate::text::format_cansend(self))
    }
}

/// What the hub attaches to a frame when it sequences it on a channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameMeta {
    /// Hub-wide id of the channel the frame was sequenced on.
    pub channel: u16,
    /// Hub-wide id of the port that sent the frame.
    pub sender: u32,
    /// Position in the channel's total order; starts at 1, no gaps.
    pub seq: u64,
    /// Time the hub put the frame on the channel, in nanoseconds since the
    /// Unix epoch; never decreases within a channel.
    pub timestamp_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_frame_rejects_nine_bytes() {
        assert_eq!(Frame::can(1, false, &[0; 9]), Err(FrameError::CanTooLong { len: 9 }));
    }

    #[test]
    fn standard_id_must_fit_eleven_bits() {
        assert!(Frame::can(0x7FF, false, &[]).is_ok());
        assert_eq!(Frame::can(0x800, false, &[]), Err(FrameError::StandardIdTooLarge { id: 0x800 }));
        assert!(Frame::can(0x800, true, &[]).is_ok());
        assert!(Frame::can(0x2000_0000, true, &[]).is_err());
    }

    #[test]
    fn fd_lengths_are_restricted_to_dlc_steps() {
        for len in 0..=64 {
            let ok = Frame::can_fd(1, FrameFlags::empty(), &vec![0; len]).is_ok();
            assert_eq!(ok, FD_LENGTHS.contains(&(len as u8)), "len {len}");
        }
    }

    #[test]
    fn raw_dlc_above_eight_only_with_eight_bytes() {
        let mut eight = Frame::can(1, false, &[0; 8]).unwrap();
        assert!(eight.set_len8_dlc(15).is_ok());
        assert_eq!(eight.dlc(), 15);
        let mut four = Frame::can(1, false, &[0; 4]).unwrap();
        assert!(four.set_len8_dlc(9).is_err());
    }

    #[test]
    fn remote_frame_has_no_payload_but_keeps_requested_length() {
        let frame = Frame::remote(0x123, false, 4).unwrap();
        assert_eq!(frame.len(), 4);
        assert!(frame.data().is_empty());
    }

    #[test]
    fn fd_rejects_remote_flag() {
        assert!(Frame::can_fd(1, FrameFlags::REMOTE, &[]).is_err());
    }
}

#[cfg(test)]
mod accepted_parts_tests {
    use super::*;

    fn parts_of(frame: &Frame) -> Frame {
        let data: &[u8] = if frame.is_remote() { &[] } else { frame.data() };
        Frame::from_accepted_parts(
            frame.kind(),
            frame.flags(),
            frame.id(),
            frame.len(),
            frame.len8_dlc(),
            frame.acceptance_field(),
            data,
        )
    }

    /// Fields taken apart and put back through the checked path give the
    /// frame the constructors built, for every kind and flag combination.
    #[test]
    fn frames_taken_apart_and_rebuilt_from_their_parts_are_unchanged() {
        let mut frames = Vec::new();
        for extended in [false, true] {
            let id = if extended { 0x1ABC_DEF0 } else { 0x5A5 };
            for len in 0..=8 {
                frames.push(Frame::can(id, extended, &[0xA5; 8][..len]).unwrap());
                frames.push(Frame::remote(id, extended, len).unwrap());
            }
            let mut dlc = Frame::can(id, extended, &[1; 8]).unwrap();
            dlc.set_len8_dlc(12).unwrap();
            frames.push(dlc);
            for &len in &FD_LENGTHS {
                for flags in [FrameFlags::empty(), FrameFlags::BRS, FrameFlags::ESI, FrameFlags::BRS | FrameFlags::ESI]
                {
                    let flags = if extended { flags | FrameFlags::EXTENDED } else { flags };
                    frames.push(Frame::can_fd(id, flags, &[0x3C; 64][..len as usize]).unwrap());
                }
            }
        }
        frames.push(Frame::error(0x4, [1, 2, 3, 4, 5, 6, 7, 8]).unwrap());
        for id in [0x00, 0x10, 0x3C, 0x3F] {
            for len in 1..=8 {
                frames.push(Frame::lin(id, Checksum::Enhanced, &[0x5A; 8][..len]).unwrap());
                frames.push(Frame::lin(id, Checksum::Classic, &[0x5A; 8][..len]).unwrap());
                frames.push(Frame::lin_with_checksum(id, Checksum::Enhanced, &[0x5A; 8][..len], 0x00).unwrap());
            }
            frames.push(Frame::lin_no_response(id).unwrap());
            let responses = [
                Frame::lin(id, Checksum::Enhanced, &[0x5A; 2]).unwrap(),
                Frame::lin(id, Checksum::Classic, &[0xA5]).unwrap(),
            ];
            frames.push(Frame::lin_collision(id, &responses).unwrap());
        }
        for len in [1, 8, 64, 65, 2048] {
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            for flags in [FrameFlags::empty(), FrameFlags::XL_SEC, FrameFlags::XL_RRS] {
                frames.push(Frame::can_xl(0x7FF, 0xAB, 0x03, flags, 0x1234_5678, &data).unwrap());
            }
            frames.push(Frame::raw(0xFFFF_FFFF, &data).unwrap());
        }
        frames.push(Frame::raw(0, &[]).unwrap());
        let echoed: Vec<Frame> = frames.iter().map(|f| f.clone().with_echo(true)).collect();
        for frame in frames.iter().chain(&echoed) {
            let data: &[u8] = if frame.is_remote() { &[] } else { frame.data() };
            let checked = Frame::from_parts(
                frame.kind(),
                frame.flags(),
                frame.id(),
                frame.len(),
                frame.len8_dlc(),
                frame.acceptance_field(),
                data,
            )
            .unwrap();
            assert_eq!(&checked, frame, "{frame:?}");
            assert_eq!(&parts_of(frame), frame, "{frame:?}");
        }
    }
}
