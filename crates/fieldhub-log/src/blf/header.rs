//! The BLF file header (144 bytes) and its SYSTEMTIME dates.

use chrono::{DateTime, Datelike, NaiveDate, Timelike};

use super::BlfError;

/// Bytes of the file header fieldhub writes (python-can's and CANoe's size).
pub(super) const FILE_HEADER: usize = 144;
/// Bytes of the header's fields; the rest is reserved.
pub(super) const HEADER_FIELDS: usize = 72;
/// python-can's application id; 0 would be "unknown".
const APPLICATION_ID: u8 = 5;
/// Unix times before 1990 are taken for bus times, not dates: their
/// SYSTEMTIME is all zero, as python-can writes it (and so is one past
/// what chrono's nanosecond times reach, in 2262).
const FIRST_DATE_NS: u64 = 631_152_000 * 1_000_000_000;
const LAST_DATE_NS: u64 = i64::MAX as u64;

fn is_date(ns: u64) -> bool {
    (FIRST_DATE_NS..=LAST_DATE_NS).contains(&ns)
}

/// The header's statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct FileHeader {
    pub file_size: u64,
    pub uncompressed_size: u64,
    pub objects: u32,
    /// Unix ns of the start and end, to the millisecond; 0 when the
    /// SYSTEMTIME is zero (or not a date).
    pub start_ns: u64,
    pub end_ns: u64,
}

impl FileHeader {
    /// The 144 header bytes.
    pub fn encode(&self) -> [u8; FILE_HEADER] {
        let mut bytes = [0; FILE_HEADER];
        bytes[..4].copy_from_slice(b"LOGG");
        bytes[4..8].copy_from_slice(&(FILE_HEADER as u32).to_le_bytes());
        bytes[8] = APPLICATION_ID;
        // BLF version 2.6.8.1, as python-can writes.
        bytes[12..16].copy_from_slice(&[2, 6, 8, 1]);
        bytes[16..24].copy_from_slice(&self.file_size.to_le_bytes());
        bytes[24..32].copy_from_slice(&self.uncompressed_size.to_le_bytes());
        bytes[32..36].copy_from_slice(&self.objects.to_le_bytes());
        bytes[40..56].copy_from_slice(&system_time(self.start_ns));
        bytes[56..72].copy_from_slice(&system_time(self.end_ns));
        bytes
    }

    /// Parse the first [`HEADER_FIELDS`] bytes; returns the header and the
    /// header size the file gives (where its objects start).
    pub fn decode(bytes: &[u8; HEADER_FIELDS]) -> Result<(Self, u32), BlfError> {
        if &bytes[..4] != b"LOGG" {
            return Err(BlfError::NotBlf);
        }
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let size = u32_at(4);
        if (size as usize) < HEADER_FIELDS {
            return Err(BlfError::ShortHeader(size));
        }
        if size > super::MAX_OBJECT {
            return Err(BlfError::Oversize { size: size.into(), max: super::MAX_OBJECT });
        }
        let header = Self {
            file_size: u64_at(16),
            uncompressed_size: u64_at(24),
            objects: u32_at(32),
            start_ns: unix_ns(&bytes[40..56]),
            end_ns: unix_ns(&bytes[56..72]),
        };
        Ok((header, size))
    }
}

/// The SYSTEMTIME (UTC) of a Unix time in ns, to the millisecond; zero
/// for times that are not dates.
fn system_time(ns: u64) -> [u8; 16] {
    let mut bytes = [0; 16];
    let Some(time) = is_date(ns).then(|| DateTime::from_timestamp_nanos(ns as i64)) else {
        return bytes;
    };
    let fields = [
        time.year() as u16,
        time.month() as u16,
        time.weekday().num_days_from_sunday() as u16,
        time.day() as u16,
        time.hour() as u16,
        time.minute() as u16,
        time.second() as u16,
        (time.nanosecond() / 1_000_000).min(999) as u16,
    ];
    for (i, field) in fields.iter().enumerate() {
        bytes[i * 2..i * 2 + 2].copy_from_slice(&field.to_le_bytes());
    }
    bytes
}

/// A SYSTEMTIME (UTC) as Unix ns; 0 when it is not a date (python-can
/// reads those as 0 too).
fn unix_ns(bytes: &[u8]) -> u64 {
    let field = |i: usize| u16::from_le_bytes([bytes[i * 2], bytes[i * 2 + 1]]);
    NaiveDate::from_ymd_opt(field(0).into(), field(1).into(), field(3).into())
        .and_then(|date| date.and_hms_milli_opt(field(4).into(), field(5).into(), field(6).into(), field(7).into()))
        .and_then(|time| time.and_utc().timestamp_nanos_opt())
        .and_then(|ns| u64::try_from(ns).ok())
        .unwrap_or(0)
}

/// A Unix time in ns cut to what a SYSTEMTIME holds.
pub(super) fn to_millisecond(ns: u64) -> u64 {
    if !is_date(ns) {
        0
    } else {
        ns - ns % 1_000_000
    }
}
