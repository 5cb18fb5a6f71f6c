//! ASAM MDF 4.1 (`.mf4`) bus logging: the subset of the format that CAN
//! loggers, python-can (`can.io.MF4Writer`/`MF4Reader`) and asammdf write
//! and read for CAN traffic.
//!
//! # The file fieldhub writes
//!
//! Little-endian throughout; every block starts on an 8-byte boundary with
//! a 24-byte header — `##XX` id, 4 reserved bytes, the block's length
//! (u64, header included), its link count (u64) — then its links (u64 file
//! offsets, 0 for none), then its data:
//!
//! ```text
//! 0     ID  "MDF     " "4.10    " "fieldhub", version 410 (64 bytes, no header)
//! 64    HD  links: first DG, FH, -, -, -, MD comment; data: start time (ns, UTC)
//!       MD  <HDcomment>: the channel names, <e name="fieldhub channel N">NAME</e>
//!       FH  file history (one entry, its MD names the tool), SI (source: bus, CAN)
//!       DG ─► CG "CAN_DataFrame"   (flags: bus event) ─► CN time, CN CAN_DataFrame ─► children
//!       DG ─► CG "CAN_ErrorFrame"  (the same record layout)
//!       DG ─► CG "CAN_RemoteFrame" (17-byte records)
//!       DT  one per group holding records: the data blocks come last
//! ```
//!
//! One channel group per data group (a "sorted" file, no record ids), as
//! python-can writes it. A data or error record is 84 bytes: `time` f64
//! seconds since the header's start time at 0, then the `CAN_DataFrame`
//! structure (a byte array whose children are channels of their own, the
//! ASAM bus logging names): `BusChannel` u8 at 8, `ID` u32 at 9 (without the
//! IDE bit), `IDE` u8 at 13, `DLC` u8 at 14, `DataLength` u8 at 15,
//! `DataBytes` 64 bytes at 16, `Dir` u8 at 80 (0 Rx, 1 Tx), `EDL`, `BRS`,
//! `ESI` u8 at 81..84. A remote record: `BusChannel`, `ID`, `IDE`, `DLC`,
//! `DataLength`, `Dir` at 8, 9, 13, 14, 15, 16. An error frame's `ID` holds
//! SocketCAN's error class bits, its `DataBytes` the eight detail bytes.
//!
//! `BusChannel` numbers the channels from 0 in the order their first frames
//! came, as python-can numbers `can0`, `can1`, …; the header comment names
//! them, and a file without those names reads channel N as `can{N}`.
//!
//! # What the reader takes
//!
//! Files of other writers (asammdf, python-can, loggers) in the same
//! vocabulary: channels are found by name (`….ID`, `….DataBytes`, …) and
//! their byte and bit offsets, not by position; data in `DT` blocks, `DZ`
//! (deflate, and transposed deflate), `DL` lists and `HL` headers; sorted
//! or unsorted data groups (record ids of 1, 2, 4 or 8 bytes); a start time
//! in UTC or local time ([`crate::DateZone`]). Channel groups that are not CAN bus
//! events are skipped. Not read: signal data (`SD`, variable-length
//! `DataBytes`), conversions on the time channel — refused with the reason.
//!
//! # Invariants
//!
//! - What [`Mdf4Writer`] writes, [`read`] gives back as the same records,
//!   timestamps to the nanosecond, in time order (ties: the order written
//!   within a kind; data, error, then remote frames across kinds).
//! - No input makes the reader panic or allocate more than a bounded
//!   multiple of the input's size: every offset, length and count is
//!   checked, linked lists are followed at most once per block.

mod block;
mod reader;
mod writer;

pub use reader::read;
pub use writer::Mdf4Writer;

/// Bytes of a data or error frame record: the time and the structure.
const FRAME_RECORD: usize = 84;
/// Bytes of a remote frame record.
const REMOTE_RECORD: usize = 17;
/// Where the structure starts in a record (after the f64 time).
const STRUCT_OFFSET: usize = 8;

/// `cg_flags`: the group holds bus events.
const CG_BUS_EVENT: u16 = 0x0002;
/// `cg_flags`: a variable-length signal data group (records with a length prefix).
const CG_VLSD: u16 = 0x0001;
/// `cn_flags`: the channel describes a bus event.
const CN_BUS_EVENT: u32 = 0x0400;

/// The three kinds of group, in the order they are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GroupKind {
    Data,
    Error,
    Remote,
}

impl GroupKind {
    const ALL: [Self; 3] = [Self::Data, Self::Error, Self::Remote];

    fn name(self) -> &'static str {
        match self {
            Self::Data => "CAN_DataFrame",
            Self::Error => "CAN_ErrorFrame",
            Self::Remote => "CAN_RemoteFrame",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    fn record_len(self) -> usize {
        match self {
            Self::Remote => REMOTE_RECORD,
            _ => FRAME_RECORD,
        }
    }

    /// The structure's children: name, byte offset in the record, bytes.
    fn fields(self) -> &'static [(&'static str, usize, usize)] {
        const FRAME: &[(&str, usize, usize)] = &[
            ("BusChannel", 8, 1),
            ("ID", 9, 4),
            ("IDE", 13, 1),
            ("DLC", 14, 1),
            ("DataLength", 15, 1),
            ("DataBytes", 16, 64),
            ("Dir", 80, 1),
            ("EDL", 81, 1),
            ("BRS", 82, 1),
            ("ESI", 83, 1),
        ];
        const REMOTE: &[(&str, usize, usize)] = &[
            ("BusChannel", 8, 1),
            ("ID", 9, 4),
            ("IDE", 13, 1),
            ("DLC", 14, 1),
            ("DataLength", 15, 1),
            ("Dir", 16, 1),
        ];
        match self {
            Self::Remote => REMOTE,
            _ => FRAME,
        }
    }
}

/// The header comment's key for a channel's name, before its number.
const CHANNEL_KEY: &str = "fieldhub channel ";

#[cfg(test)]
mod tests;
