//! The byte layout of the shared segments (`spec/shm.md`, layout version 1).
//!
//! A **client segment** belongs to one client: a 64-byte header, the control
//! words (two doorbells and the four ring indices, each on its own cache
//! line), then the data areas of the two rings. The **bell segment** is one
//! per hub and holds the hub's doorbell, which every client rings.
//!
//! The header is plain bytes so it can be checked against the test vectors;
//! [`SegmentHeader::parse`] accepts only headers whose rings lie inside the
//! segment, do not overlap and can carry the largest protocol message.

use fieldhub_proto::limits::MAX_MESSAGE_LEN;

/// `FHSM`: first bytes of a client segment.
pub const SEGMENT_MAGIC: [u8; 4] = *b"FHSM";
/// `FHIV`: first bytes of an ivshmem region (`crate::region`).
pub const REGION_MAGIC: [u8; 4] = *b"FHIV";
/// `FHDB`: first bytes of a hub's bell segment.
pub const BELL_MAGIC: [u8; 4] = *b"FHDB";
/// Layout version of this revision.
pub const LAYOUT_VERSION: u16 = 1;
/// Bytes of either header.
pub const HEADER_LEN: usize = 64;
/// Bytes per ring slot: one `FRAMES` message with a CAN FD record of 64 data
/// bytes (4 + 4 + 32 + 64 = 104 bytes) fits in one slot.
pub const SLOT_SIZE: usize = 128;
/// Page size the data areas are aligned to.
pub const PAGE: usize = 4096;

/// Offset of the client's doorbell (the hub rings it when it published into
/// the to-client ring).
pub const CLIENT_BELL: usize = 0x040;
/// Offset of the space doorbell (the hub rings it when it freed slots of the
/// to-hub ring).
pub const SPACE_BELL: usize = 0x080;
/// Offsets of the ring indices (free-running slot counters, u32).
pub const TO_HUB_HEAD: usize = 0x0C0;
pub const TO_HUB_TAIL: usize = 0x100;
pub const TO_CLIENT_HEAD: usize = 0x140;
pub const TO_CLIENT_TAIL: usize = 0x180;
/// Offset of the hub's doorbell in the bell segment.
pub const HUB_BELL: usize = 0x040;
/// Size of the bell segment.
pub const BELL_SEGMENT_LEN: usize = PAGE;
/// Within a doorbell: the futex word, then the "going to sleep" flag.
pub const BELL_WORD: usize = 0;
pub const BELL_ARMED: usize = 4;

/// Slots of the client-to-hub ring in segments this hub creates.
pub const TO_HUB_SLOTS: u32 = 4096;
/// Slots of the hub-to-client ring in segments this hub creates unless
/// configured otherwise (4 MiB): the receive buffer of a shared-memory
/// client, about 90,000 classic frames (batched, three to a slot) — more
/// than a stream client's receive queue holds, so a receiver that keeps up
/// on average survives the same bursts over either.
pub const TO_CLIENT_SLOTS: u32 = 32768;
/// Fewest slots a ring may have: it must hold the largest message
/// (`MAX_MESSAGE_LEN` plus its length prefix), rounded up to a power of two.
pub const MIN_SLOTS: u32 = ((MAX_MESSAGE_LEN as usize + 4).div_ceil(SLOT_SIZE)).next_power_of_two() as u32;
/// Most slots a ring may have (128 MiB of data).
pub const MAX_SLOTS: u32 = 1 << 20;

// A CAN FD frame message (length prefix, FRAMES header, record header, 64
// data bytes) fits one slot; the largest message fits the smallest ring,
// and this hub's rings are at least that large.
const _: () = assert!(4 + 4 + 32 + 64 <= SLOT_SIZE);
const _: () = assert!((MAX_MESSAGE_LEN as usize + 4).div_ceil(SLOT_SIZE) <= MIN_SLOTS as usize);
const _: () = assert!(MIN_SLOTS <= TO_HUB_SLOTS && MIN_SLOTS <= TO_CLIENT_SLOTS);

/// Whether `slots` may size a ring: a power of two from [`MIN_SLOTS`] to
/// [`MAX_SLOTS`] (section 2.1 of `spec/shm.md`).
pub fn check_ring_slots(slots: u32) -> Result<(), String> {
    if slots.is_power_of_two() && (MIN_SLOTS..=MAX_SLOTS).contains(&slots) {
        Ok(())
    } else {
        Err(format!("{slots} slots: a ring has a power of two from {MIN_SLOTS} to {MAX_SLOTS} slots"))
    }
}

/// The fields of a client segment's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    /// Bytes of the whole segment.
    pub segment_len: u32,
    /// Offset of the to-hub ring's data area.
    pub to_hub_offset: u32,
    /// Slots of the to-hub ring (a power of two).
    pub to_hub_slots: u32,
    /// Offset of the to-client ring's data area.
    pub to_client_offset: u32,
    /// Slots of the to-client ring (a power of two).
    pub to_client_slots: u32,
    /// The client id of `WELCOME`, for diagnostics.
    pub client_id: u32,
}

/// Why a header was refused. [`HeaderError::kind`] names it as the vectors do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    #[error("the segment is {0} bytes, shorter than its header")]
    Truncated(usize),
    #[error("bad magic {0:02x?}: not a fieldhub segment")]
    BadMagic([u8; 4]),
    #[error("layout version {0} is not supported; this side speaks version {LAYOUT_VERSION}")]
    UnsupportedVersion(u16),
    #[error("header length {0}, expected {HEADER_LEN}")]
    BadHeaderLen(u16),
    #[error("slot size {0}, expected {SLOT_SIZE}")]
    BadSlotSize(u32),
    #[error("{ring} ring has {slots} slots; it needs a power of two from {MIN_SLOTS} to {MAX_SLOTS}")]
    BadRingSize { ring: &'static str, slots: u32 },
    #[error("{ring} ring starts at {offset:#x}, which is not a page boundary after the control words")]
    BadRingOffset { ring: &'static str, offset: u32 },
    #[error("{ring} ring ends beyond the segment length {segment_len}")]
    RingOutOfBounds { ring: &'static str, segment_len: u32 },
    #[error("the two rings overlap")]
    RingsOverlap,
    #[error("reserved header byte {0} is not zero")]
    ReservedNotZero(usize),
    #[error("region length {0} is not a power of two from {MIN_REGION_LEN}")]
    BadRegionLen(u32),
    #[error("the segment starts at {offset:#x}, which is not a page boundary after the region page and before the region length {region_len}")]
    BadSegmentOffset { offset: u32, region_len: u32 },
}

impl HeaderError {
    /// The error's name in `spec/shm.md` and the vectors.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Truncated(_) => "truncated",
            Self::BadMagic(_) => "bad_magic",
            Self::UnsupportedVersion(_) => "unsupported_version",
            Self::BadHeaderLen(_) => "bad_header_len",
            Self::BadSlotSize(_) => "bad_slot_size",
            Self::BadRingSize { .. } => "bad_ring_size",
            Self::BadRingOffset { .. } => "bad_ring_offset",
            Self::RingOutOfBounds { .. } => "ring_out_of_bounds",
            Self::RingsOverlap => "rings_overlap",
            Self::ReservedNotZero(_) => "reserved_not_zero",
            Self::BadRegionLen(_) => "bad_region_len",
            Self::BadSegmentOffset { .. } => "bad_segment_offset",
        }
    }
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([bytes[at], bytes[at + 1]])
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

/// Check magic, version, header length and reserved bytes common to both headers.
fn check_common(bytes: &[u8], magic: [u8; 4], reserved_from: usize) -> Result<(), HeaderError> {
    if bytes.len() < HEADER_LEN {
        return Err(HeaderError::Truncated(bytes.len()));
    }
    let found = [bytes[0], bytes[1], bytes[2], bytes[3]];
    if found != magic {
        return Err(HeaderError::BadMagic(found));
    }
    let version = u16_at(bytes, 4);
    if version != LAYOUT_VERSION {
        return Err(HeaderError::UnsupportedVersion(version));
    }
    let header_len = u16_at(bytes, 6);
    if header_len as usize != HEADER_LEN {
        return Err(HeaderError::BadHeaderLen(header_len));
    }
    if let Some(at) = (reserved_from..HEADER_LEN).find(|&at| bytes[at] != 0) {
        return Err(HeaderError::ReservedNotZero(at));
    }
    Ok(())
}

impl SegmentHeader {
    /// The layout this hub creates for `client_id` by default.
    pub fn standard(client_id: u32) -> Self {
        Self::with_to_client_slots(client_id, TO_CLIENT_SLOTS)
    }

    /// The layout this hub creates for `client_id` with a to-client ring of
    /// `to_client_slots` (a power of two in `MIN_SLOTS..=MAX_SLOTS`, as
    /// [`check_ring_slots`] tells).
    pub fn with_to_client_slots(client_id: u32, to_client_slots: u32) -> Self {
        let to_hub_offset = PAGE as u32;
        let to_client_offset = to_hub_offset + TO_HUB_SLOTS * SLOT_SIZE as u32;
        Self {
            segment_len: to_client_offset + to_client_slots * SLOT_SIZE as u32,
            to_hub_offset,
            to_hub_slots: TO_HUB_SLOTS,
            to_client_offset,
            to_client_slots,
            client_id,
        }
    }

    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&SEGMENT_MAGIC);
        out[4..6].copy_from_slice(&LAYOUT_VERSION.to_le_bytes());
        out[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        let fields = [
            SLOT_SIZE as u32,
            self.segment_len,
            self.to_hub_offset,
            self.to_hub_slots,
            self.to_client_offset,
            self.to_client_slots,
            self.client_id,
        ];
        for (i, value) in fields.iter().enumerate() {
            out[8 + 4 * i..12 + 4 * i].copy_from_slice(&value.to_le_bytes());
        }
        out
    }

    /// Parse and check a header. Fields are checked in offset order, and the
    /// first fault found is reported (the vectors rely on it).
    pub fn parse(bytes: &[u8]) -> Result<Self, HeaderError> {
        check_common(bytes, SEGMENT_MAGIC, 36)?;
        let slot_size = u32_at(bytes, 8);
        if slot_size as usize != SLOT_SIZE {
            return Err(HeaderError::BadSlotSize(slot_size));
        }
        let header = Self {
            segment_len: u32_at(bytes, 12),
            to_hub_offset: u32_at(bytes, 16),
            to_hub_slots: u32_at(bytes, 20),
            to_client_offset: u32_at(bytes, 24),
            to_client_slots: u32_at(bytes, 28),
            client_id: u32_at(bytes, 32),
        };
        let hub = header.check_ring("to_hub", header.to_hub_offset, header.to_hub_slots)?;
        let client = header.check_ring("to_client", header.to_client_offset, header.to_client_slots)?;
        if hub.start < client.end && client.start < hub.end {
            return Err(HeaderError::RingsOverlap);
        }
        Ok(header)
    }

    /// Check one ring's size and place; returns its byte range.
    fn check_ring(&self, ring: &'static str, offset: u32, slots: u32) -> Result<std::ops::Range<u64>, HeaderError> {
        if !slots.is_power_of_two() || !(MIN_SLOTS..=MAX_SLOTS).contains(&slots) {
            return Err(HeaderError::BadRingSize { ring, slots });
        }
        if (offset as usize) < PAGE || offset as usize % PAGE != 0 {
            return Err(HeaderError::BadRingOffset { ring, offset });
        }
        let end = u64::from(offset) + u64::from(slots) * SLOT_SIZE as u64;
        if end > u64::from(self.segment_len) {
            return Err(HeaderError::RingOutOfBounds { ring, segment_len: self.segment_len });
        }
        Ok(u64::from(offset)..end)
    }
}

/// The 64 header bytes of a bell segment.
pub fn encode_bell_header() -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[0..4].copy_from_slice(&BELL_MAGIC);
    out[4..6].copy_from_slice(&LAYOUT_VERSION.to_le_bytes());
    out[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
    out
}

/// Check a bell segment's header.
pub fn parse_bell_header(bytes: &[u8]) -> Result<(), HeaderError> {
    check_common(bytes, BELL_MAGIC, 8)
}

/// Offsets of an ivshmem region's control words (`spec/shm.md` section 8),
/// each `u32` on its own cache line of the region page.
pub const REGION_GENERATION: usize = 0x040;
pub const REGION_HUB_BEAT: usize = 0x080;
pub const REGION_CONNECT: usize = 0x0C0;
pub const REGION_GRANTED: usize = 0x100;
pub const REGION_CLIENT_BEAT: usize = 0x140;
/// Where this hub places the client segment inside a region: right after
/// the region page.
pub const REGION_SEGMENT_OFFSET: u32 = PAGE as u32;
/// Bytes of the regions this hub creates (QEMU wants a power of two): the
/// region page and a region's client segment fit in half of it.
pub const REGION_LEN: u32 = 4 << 20;
/// Slots of the to-client ring of a region's client segment (one guest's
/// receive buffer; a region is sized for it).
pub const REGION_TO_CLIENT_SLOTS: u32 = 8192;
/// Fewest bytes a region may have: the region page and one page.
pub const MIN_REGION_LEN: u32 = 2 * PAGE as u32;

const _: () = assert!(
    REGION_SEGMENT_OFFSET as usize + PAGE + (TO_HUB_SLOTS + REGION_TO_CLIENT_SLOTS) as usize * SLOT_SIZE
        <= REGION_LEN as usize / 2
);

/// The fields of an ivshmem region's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionHeader {
    /// Bytes of the whole region (a power of two).
    pub region_len: u32,
    /// Offset of the client segment (a `FHSM` header of its own).
    pub segment_offset: u32,
}

impl RegionHeader {
    /// The layout this hub writes into a region of `region_len` bytes.
    pub fn standard(region_len: u32) -> Self {
        Self { region_len, segment_offset: REGION_SEGMENT_OFFSET }
    }

    /// The 64 header bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        out[0..4].copy_from_slice(&REGION_MAGIC);
        out[4..6].copy_from_slice(&LAYOUT_VERSION.to_le_bytes());
        out[6..8].copy_from_slice(&(HEADER_LEN as u16).to_le_bytes());
        out[8..12].copy_from_slice(&self.region_len.to_le_bytes());
        out[12..16].copy_from_slice(&self.segment_offset.to_le_bytes());
        out
    }

    /// Parse and check a region header, reporting the first fault in
    /// offset order (the vectors rely on it).
    pub fn parse(bytes: &[u8]) -> Result<Self, HeaderError> {
        check_common(bytes, REGION_MAGIC, 16)?;
        let header = Self { region_len: u32_at(bytes, 8), segment_offset: u32_at(bytes, 12) };
        if !header.region_len.is_power_of_two() || header.region_len < MIN_REGION_LEN {
            return Err(HeaderError::BadRegionLen(header.region_len));
        }
        let offset = header.segment_offset as usize;
        if offset < PAGE || offset % PAGE != 0 || header.segment_offset >= header.region_len {
            return Err(HeaderError::BadSegmentOffset { offset: header.segment_offset, region_len: header.region_len });
        }
        Ok(header)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_layout_passes_its_own_checks() {
        let header = SegmentHeader::standard(7);
        assert_eq!(SegmentHeader::parse(&header.encode()), Ok(header));
        assert_eq!(parse_bell_header(&encode_bell_header()), Ok(()));
    }

    #[test]
    fn control_words_stay_before_the_first_page_on_separate_cache_lines() {
        let words = [CLIENT_BELL, SPACE_BELL, TO_HUB_HEAD, TO_HUB_TAIL, TO_CLIENT_HEAD, TO_CLIENT_TAIL];
        for pair in words.windows(2) {
            assert!(pair[1] - pair[0] >= 64);
        }
        assert!(words[0] >= HEADER_LEN && words[5] + 8 <= PAGE);
        let region = [REGION_GENERATION, REGION_HUB_BEAT, REGION_CONNECT, REGION_GRANTED, REGION_CLIENT_BEAT];
        for pair in region.windows(2) {
            assert!(pair[1] - pair[0] >= 64);
        }
        assert!(region[0] >= HEADER_LEN && region[4] + 4 <= REGION_SEGMENT_OFFSET as usize);
    }

    #[test]
    fn standard_region_passes_its_own_checks_and_holds_a_region_segment() {
        let header = RegionHeader::standard(REGION_LEN);
        assert_eq!(RegionHeader::parse(&header.encode()), Ok(header));
        let segment = SegmentHeader::with_to_client_slots(1, REGION_TO_CLIENT_SLOTS);
        assert!(u64::from(header.segment_offset) + u64::from(segment.segment_len) <= u64::from(REGION_LEN));
    }

    #[test]
    fn region_headers_are_refused_for_the_first_fault() {
        let good = RegionHeader::standard(REGION_LEN).encode();
        let mut not_pow2 = good;
        not_pow2[8..12].copy_from_slice(&3_000_000u32.to_le_bytes());
        assert_eq!(RegionHeader::parse(&not_pow2).unwrap_err().kind(), "bad_region_len");
        let mut odd_offset = good;
        odd_offset[12..16].copy_from_slice(&0x1800u32.to_le_bytes());
        assert_eq!(RegionHeader::parse(&odd_offset).unwrap_err().kind(), "bad_segment_offset");
        let mut client_segment = good;
        client_segment[0..4].copy_from_slice(&SEGMENT_MAGIC);
        assert_eq!(RegionHeader::parse(&client_segment).unwrap_err().kind(), "bad_magic");
        assert_eq!(RegionHeader::parse(&good[..20]).unwrap_err().kind(), "truncated");
    }
}
