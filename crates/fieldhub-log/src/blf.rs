//! Vector BLF (binary logging format, `.blf`): the binary log of CANoe and
//! CANalyzer, as python-can's `can.BLFWriter`/`can.BLFReader` (after Toby
//! Lorenz' `vector_blf`) write and read it. Vector publishes no
//! specification; the layouts below are those two implementations'.
//!
//! # The file
//!
//! Little-endian throughout.
//!
//! ```text
//! 0    file header, 144 bytes: "LOGG", header size (144), application and
//!      BLF version bytes, file size (u64), uncompressed size (u64), object
//!      count (u32), objects read (u32), start and end time (SYSTEMTIME: 8 x
//!      u16 year, month, weekday, day, hour, minute, second, millisecond; UTC,
//!      as python-can writes them; all zero when the times are not Unix times)
//! 144  objects, each "LOBJ", header size (u16), header version (u16), object
//!      size (u32, header included), object type (u32), then for version 1:
//!      flags (u32: 1 = time in 10 µs, 2 = in ns), client index (u16), object
//!      version (u16), time (u64, since the header's start time); version 2
//!      adds 8 bytes; then the object's body and object size % 4 bytes of
//!      padding.
//! ```
//!
//! The top-level objects are `LOG_CONTAINER`s (type 10): method (u16: 0
//! stored, 2 zlib), 6 reserved, uncompressed size (u32), 4 reserved, then
//! the data — the bytes of further objects, which may continue in the next
//! container. Objects outside containers are read as well.
//!
//! | type | object | body |
//! |---|---|---|
//! | 1, 86 | CAN_MESSAGE, CAN_MESSAGE2 | channel u16, flags u8 (0x01 Tx, 0x80 remote), DLC u8, id u32 (0x80000000 extended), 8 data bytes (MESSAGE2: 8 more) |
//! | 100 | CAN_FD_MESSAGE | as CAN_MESSAGE, frame length u32, bit count u8, FD flags u8 (0x1 EDL, 0x2 BRS, 0x4 ESI), valid bytes u8, 5 reserved, 64 data bytes |
//! | 101 | CAN_FD_MESSAGE_64 | channel u8, DLC u8, valid bytes u8, tx count u8, id u32, frame length u32, flags u32 (0x10 remote, 0x1000 EDL, 0x2000 BRS, 0x4000 ESI), 4 x u32 bit timing, bit count u16, direction u8, extended data offset u8, CRC u32, then the data |
//! | 73 | CAN_ERROR_EXT | channel u16, length u16, flags u32, ECC u8, position u8, DLC u8, reserved, frame length u32, id u32, extended flags u16, 2 reserved, 8 data bytes |
//! | 65 | APP_TEXT | source u32, reserved u32, text length u32, reserved u32, text |
//!
//! Channels are numbered from 1. fieldhub writes an `APP_TEXT` (source 0, a
//! comment) `fieldhub channel N = NAME` before a channel's first frame;
//! files without one read channel N as `can{N-1}` (python-can's numbering).
//! An error frame's id holds SocketCAN's error class bits and its data the
//! eight detail bytes, as python-can's error messages carry them; it has no
//! direction.
//!
//! # What fieldhub writes
//!
//! Classic frames as `CAN_MESSAGE2`, CAN FD frames as `CAN_FD_MESSAGE_64`,
//! error frames as `CAN_ERROR_EXT`, every object with a version-1 header and
//! nanosecond times, in zlib containers of about 128 KiB (and one whenever
//! the recording is flushed). The header's start time is the first frame's
//! millisecond (SYSTEMTIME holds no finer), so each object's offset from it
//! keeps the frame's time to the nanosecond.
//!
//! # Invariants
//!
//! - What [`BlfWriter`] writes, [`BlfReader`] reads back as the same
//!   records, timestamps to the nanosecond (a frame stamped before the
//!   file's first frame is written at the file's start).
//! - No input makes the reader panic or hold more than one container's and
//!   one object's bytes (each bounded by [`MAX_OBJECT`]); every size is
//!   checked before it is used. Bad input is a [`BlfError`] with the byte
//!   offset of the top-level object it was found in.
//! - Writing a frame allocates nothing once its channel has been seen: the
//!   container and compression buffers are reused.

mod header;
mod objects;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

pub use reader::BlfReader;
pub use writer::BlfWriter;

/// The largest object (or container's uncompressed data) read: CAN objects
/// are under 200 bytes and writers fill containers to 128 KiB.
pub const MAX_OBJECT: u32 = 16 << 20;

/// Why a BLF file cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum BlfError {
    #[error("not a BLF file: it does not start with 'LOGG'")]
    NotBlf,
    #[error("the file header is {0} bytes; BLF headers have at least 72")]
    ShortHeader(u32),
    #[error("expected an object ('LOBJ'), found {0:02x?}")]
    BadSignature([u8; 4]),
    #[error("the file ends inside an object: {0}")]
    Truncated(String),
    #[error("an object of {size} bytes: more than the {max} bytes read (a damaged size?)")]
    Oversize { size: u64, max: u32 },
    #[error("object header of {header} bytes in an object of {size}: {problem}")]
    BadObjectHeader { header: u16, size: u32, problem: &'static str },
    #[error("{object} object of {size} bytes is too short: it needs {needs}")]
    ShortObject { object: &'static str, size: usize, needs: usize },
    #[error("log container compressed with method {0}: only 0 (stored) and 2 (zlib) are read")]
    UnknownCompression(u16),
    #[error("log container's zlib data is damaged: {0}")]
    BadZlib(String),
    #[error("log container holds {actual} bytes but its header says {declared}")]
    ContainerSize { declared: u32, actual: u64 },
    #[error("{object} on channel 0: BLF numbers channels from 1")]
    ChannelZero { object: &'static str },
    #[error("{object} is not a valid frame: {problem}")]
    BadFrame { object: &'static str, problem: String },
    #[error("object time {0} is past what a Unix time in ns holds")]
    TimeOverflow(u64),
}
