//! Segments: owner-only memfds mapped shared into both processes.
//!
//! The hub creates a [`ClientSegment`] per client and one [`BellSegment`]
//! for itself, writes their headers and seals them against shrinking and
//! growing (so a peer cannot truncate the file under the other side's
//! mapping, which would fault it), then passes the descriptors to the client
//! ([`crate::socket`]). The client maps them and checks the headers with
//! [`ClientSegment::open`] / [`BellSegment::open`]. Each side keeps its own
//! copy of the layout: nothing a peer writes later changes where this side
//! reads or writes.

use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::{MemfdFlags, Mode, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

use crate::bell::Bell;
use crate::layout::{self, HeaderError, SegmentHeader, HEADER_LEN, SLOT_SIZE};
use crate::ring::{RingRef, Slots};
use crate::sync::AtomicU32;

/// Why a segment received from a peer cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot map the shared segment: {0}")]
    Map(#[from] std::io::Error),
    #[error("the shared segment is {actual} bytes but its header claims {claimed}")]
    TooSmall { actual: u64, claimed: u64 },
    #[error("the shared segment's header is invalid: {0}")]
    Header(#[from] HeaderError),
    #[error("the hub's bell segment is not one: {0}")]
    NotABell(String),
}

/// A shared, read-write mapping of a whole memfd; unmapped on drop.
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; this process touches it only
// through atomics and the ring's bounded copies, which are fine from any thread.
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Map `len` bytes of `fd` from `offset` (a multiple of the page size).
    pub(crate) fn map(fd: impl AsFd, offset: u64, len: usize) -> std::io::Result<Self> {
        // SAFETY: a fresh shared mapping chosen by the kernel (null hint)
        // aliases no Rust object; it is unmapped only in `drop`. The kernel
        // refuses an offset that is not page-aligned.
        let base = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                offset,
            )?
        };
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(|| std::io::Error::other("mmap returned null"))?;
        Ok(Self { base, len })
    }

    /// The `u32` word at `offset` (4-aligned, inside the mapping).
    pub(crate) fn word(&self, offset: usize) -> &AtomicU32 {
        assert!(offset % 4 == 0 && offset + 4 <= self.len);
        // SAFETY: in bounds and aligned (mappings are page-aligned); the
        // memory lives as long as `self`, and `AtomicU32` has the layout of
        // `u32`, so every access to the word goes through atomics.
        unsafe { &*self.base.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    fn bytes(&self, offset: usize, len: usize) -> *mut u8 {
        assert!(offset + len <= self.len);
        // SAFETY: in bounds, checked above.
        unsafe { self.base.as_ptr().add(offset) }
    }

    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) {
        let from = self.bytes(offset, out.len());
        // SAFETY: in bounds; `out` is private memory.
        unsafe { std::ptr::copy_nonoverlapping(from, out.as_mut_ptr(), out.len()) }
    }

    pub(crate) fn write(&self, offset: usize, bytes: &[u8]) {
        let to = self.bytes(offset, bytes.len());
        // SAFETY: in bounds; `bytes` is private memory.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), to, bytes.len()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned; every
        // reference handed out borrows `self`, so none outlives this.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// The seals of every segment: its size is fixed, so no side can truncate
/// it under the other's mapping (a fault), and no seal can be added. Hole
/// punching (`fallocate(PUNCH_HOLE)`, `madvise(MADV_REMOVE)`) stays
/// possible: only `F_SEAL_WRITE` / `F_SEAL_FUTURE_WRITE` forbid it, and they
/// forbid the writes both sides need. A punched page reads as zeros, which a
/// side holding the descriptor could write anyway, and the shared futex
/// keys (file and offset) survive it (`spec/shm.md` 2).
const SEALS: SealFlags = SealFlags::SHRINK.union(SealFlags::GROW).union(SealFlags::SEAL);

/// A new owner-only memfd of `len` bytes, sealed at that size.
fn create_memfd(name: &str, len: usize) -> std::io::Result<OwnedFd> {
    let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
    rustix::fs::fchmod(&fd, Mode::RUSR | Mode::WUSR)?;
    rustix::fs::ftruncate(&fd, len as u64)?;
    rustix::fs::fcntl_add_seals(&fd, SEALS)?;
    Ok(fd)
}

pub(crate) fn file_len(fd: impl AsFd) -> std::io::Result<u64> {
    Ok(rustix::fs::fstat(fd)?.st_size.max(0) as u64)
}

/// One client's segment: header, doorbells, and a ring each way.
pub struct ClientSegment {
    map: Mapping,
    header: SegmentHeader,
}

impl std::fmt::Debug for ClientSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientSegment").field("header", &self.header).finish_non_exhaustive()
    }
}

impl ClientSegment {
    /// Hub: create and initialise a segment with `header`'s layout; returns
    /// it and the descriptor to pass to the client.
    pub fn create(header: SegmentHeader) -> std::io::Result<(Self, OwnedFd)> {
        let fd = create_memfd("fieldhub-client", header.segment_len as usize)?;
        let map = Mapping::map(&fd, 0, header.segment_len as usize)?;
        // A fresh memfd reads as zeros: indices and bells start at 0.
        map.write(0, &header.encode());
        Ok((Self { map, header }, fd))
    }

    /// Hub: (re)initialise a segment with `header`'s layout inside a file
    /// at `offset` (page-aligned; an ivshmem region, `crate::region`): the
    /// control page is zeroed (indices and bells back to 0), then the
    /// header written. The caller makes sure the file is large enough.
    pub fn create_at(fd: impl AsFd, offset: u64, header: SegmentHeader) -> std::io::Result<Self> {
        let map = Mapping::map(fd, offset, header.segment_len as usize)?;
        map.write(0, &[0u8; layout::PAGE]);
        map.write(0, &header.encode());
        Ok(Self { map, header })
    }

    /// Client: map a segment received from the hub and check its header.
    pub fn open(fd: OwnedFd) -> Result<Self, OpenError> {
        Self::open_at(fd, 0)
    }

    /// Client: map and check the segment that starts at `offset`
    /// (page-aligned) of a file; it must end within the file.
    pub fn open_at(fd: impl AsFd, offset: u64) -> Result<Self, OpenError> {
        let actual = file_len(&fd)?.saturating_sub(offset);
        if actual < HEADER_LEN as u64 {
            return Err(HeaderError::Truncated(actual as usize).into());
        }
        let probe = Mapping::map(&fd, offset, HEADER_LEN)?;
        let mut bytes = [0u8; HEADER_LEN];
        probe.read(0, &mut bytes);
        drop(probe);
        let header = SegmentHeader::parse(&bytes)?;
        if u64::from(header.segment_len) > actual {
            return Err(OpenError::TooSmall { actual, claimed: header.segment_len.into() });
        }
        Ok(Self { map: Mapping::map(&fd, offset, header.segment_len as usize)?, header })
    }

    pub fn header(&self) -> &SegmentHeader {
        &self.header
    }

    fn ring(&self, head: usize, tail: usize, offset: u32, slots: u32) -> RingRef<'_> {
        let base = self.map.bytes(offset as usize, slots as usize * SLOT_SIZE);
        // SAFETY: `header` passed `SegmentHeader::parse`'s bounds checks (or
        // was made by `standard`), so the area lies inside the mapping, which
        // lives as long as the returned borrow; `slots` is a power of two.
        let slots = unsafe { Slots::from_raw(base, slots) };
        RingRef::new(self.map.word(head), self.map.word(tail), slots)
    }

    /// The client-to-hub ring.
    pub fn to_hub(&self) -> RingRef<'_> {
        let h = &self.header;
        self.ring(layout::TO_HUB_HEAD, layout::TO_HUB_TAIL, h.to_hub_offset, h.to_hub_slots)
    }

    /// The hub-to-client ring.
    pub fn to_client(&self) -> RingRef<'_> {
        let h = &self.header;
        self.ring(layout::TO_CLIENT_HEAD, layout::TO_CLIENT_TAIL, h.to_client_offset, h.to_client_slots)
    }

    /// The client's doorbell: rung by the hub after publishing to the client.
    pub fn client_bell(&self) -> Bell<'_> {
        self.bell(layout::CLIENT_BELL)
    }

    /// The space doorbell: rung by the hub after freeing to-hub slots.
    pub fn space_bell(&self) -> Bell<'_> {
        self.bell(layout::SPACE_BELL)
    }

    fn bell(&self, at: usize) -> Bell<'_> {
        Bell::new(self.map.word(at + layout::BELL_WORD), self.map.word(at + layout::BELL_ARMED))
    }
}

/// The hub's doorbell segment, shared by all its clients.
pub struct BellSegment {
    map: Mapping,
}

impl BellSegment {
    /// Hub: create it; returns it and the descriptor to pass to clients.
    pub fn create() -> std::io::Result<(Self, OwnedFd)> {
        let fd = create_memfd("fieldhub-bell", layout::BELL_SEGMENT_LEN)?;
        let map = Mapping::map(&fd, 0, layout::BELL_SEGMENT_LEN)?;
        map.write(0, &layout::encode_bell_header());
        Ok((Self { map }, fd))
    }

    /// Client: map the hub's bell segment after checking what no client of
    /// the hub can change — its size and its seals. Its bytes, the header
    /// included, are not checked: every client maps this page and may have
    /// written anything into it (or punched a hole, reading as zeros), and
    /// one client's scribbling must not turn later clients away
    /// (`spec/shm.md` 2.2).
    pub fn open(fd: OwnedFd) -> Result<Self, OpenError> {
        let actual = file_len(&fd)?;
        if actual != layout::BELL_SEGMENT_LEN as u64 {
            return Err(OpenError::NotABell(format!("{actual} bytes, not {}", layout::BELL_SEGMENT_LEN)));
        }
        let seals = rustix::fs::fcntl_get_seals(&fd).map_err(std::io::Error::from)?;
        if !seals.contains(SEALS) {
            return Err(OpenError::NotABell(format!("sealed with {seals:?}, not at least {SEALS:?}")));
        }
        Ok(Self { map: Mapping::map(&fd, 0, layout::BELL_SEGMENT_LEN)? })
    }

    /// Hub: check the header every client may have written and write it
    /// again if it changed. Returns the fault found, if any. Called on
    /// every attach, so the header a new client finds is the hub's (it
    /// serves diagnostics — `fieldhub` tools name the page in errors — not
    /// trust: clients do not check it).
    pub fn repair_header(&self) -> Option<HeaderError> {
        let mut bytes = [0u8; HEADER_LEN];
        self.map.read(0, &mut bytes);
        let fault = layout::parse_bell_header(&bytes).err()?;
        self.map.write(0, &layout::encode_bell_header());
        Some(fault)
    }

    /// The hub's doorbell.
    pub fn bell(&self) -> Bell<'_> {
        Bell::new(
            self.map.word(layout::HUB_BELL + layout::BELL_WORD),
            self.map.word(layout::HUB_BELL + layout::BELL_ARMED),
        )
    }

    /// The hub's doorbell with its announcement in `armed`, private to the
    /// hub process: ringers in the hub look there, where no client can
    /// write, and wake the waiter through the shared word all the same. The
    /// waiter arms both this bell and [`BellSegment::bell`] around one sleep
    /// (`tests/loom.rs`: `a_waiter_announced_in_private_memory_is_woken_through_the_shared_word`).
    pub fn bell_announced_in<'a>(&'a self, armed: &'a AtomicU32) -> Bell<'a> {
        Bell::new(self.map.word(layout::HUB_BELL + layout::BELL_WORD), armed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{Consumer, Producer};

    #[test]
    fn a_segment_opened_from_the_passed_descriptor_shares_its_rings() {
        let (hub, fd) = ClientSegment::create(SegmentHeader::standard(3)).unwrap();
        let client = ClientSegment::open(fd).unwrap();
        assert_eq!(client.header(), hub.header());
        let mut producer = Producer::starting_at(0);
        assert!(producer.try_push(&client.to_hub(), &[3, 0, 0, 0, 1, 2, 3]).unwrap());
        let mut body = Vec::new();
        assert!(Consumer::starting_at(0).pop(&hub.to_hub(), 16, &mut body).unwrap());
        assert_eq!(body, [1, 2, 3]);
        assert!(!Consumer::starting_at(0).has_message(&hub.to_client()));
    }

    #[test]
    fn segments_are_sealed_against_truncation() {
        let (_hub, fd) = ClientSegment::create(SegmentHeader::standard(1)).unwrap();
        assert!(rustix::fs::ftruncate(&fd, 4096).is_err());
        let (_bell, fd) = BellSegment::create().unwrap();
        assert!(rustix::fs::ftruncate(&fd, 0).is_err());
    }

    /// What any client of the hub can do to the bell page it maps.
    fn vandalise(bell: &BellSegment) {
        bell.map.write(0, b"XXXX");
        bell.map.write(40, &[0xFF; 8]);
        // A hole punched in the page: it reads as zeros afterwards.
        // SAFETY: the whole page of the mapping `bell` owns; nothing holds a
        // reference into it across the call.
        unsafe { rustix::mm::madvise(bell.map.base.as_ptr().cast(), bell.map.len, rustix::mm::Advice::LinuxRemove) }
            .expect("MADV_REMOVE: the seals allow hole punching");
    }

    #[test]
    fn a_bell_page_a_client_scribbled_on_or_punched_still_opens_and_the_hub_repairs_its_header() {
        let (hub, fd) = BellSegment::create().unwrap();
        let vandal = BellSegment::open(fd.try_clone().unwrap()).unwrap();
        vandalise(&vandal);
        let later = BellSegment::open(fd.try_clone().unwrap()).expect("a later client is not turned away");
        assert_eq!(hub.repair_header(), Some(HeaderError::BadMagic(*b"\0\0\0\0")));
        let mut bytes = [0u8; HEADER_LEN];
        later.map.read(0, &mut bytes);
        assert_eq!(bytes, layout::encode_bell_header(), "the client sees the hub's header again");
        assert_eq!(hub.repair_header(), None, "an intact header is left alone");
        // The doorbell still works across the punched page.
        let armed = hub.bell().arm();
        assert!(later.bell().ring());
        hub.bell().sleep(armed, None);
    }

    #[test]
    fn a_file_that_is_not_a_sealed_bell_page_is_refused() {
        let fd = rustix::fs::memfd_create("unsealed", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&fd, layout::BELL_SEGMENT_LEN as u64).unwrap();
        let err = BellSegment::open(fd).err().expect("unsealed");
        assert!(matches!(err, OpenError::NotABell(_)), "{err}");
        let (_segment, fd) = ClientSegment::create(SegmentHeader::standard(1)).unwrap();
        let err = BellSegment::open(fd).err().expect("a client segment");
        assert!(matches!(err, OpenError::NotABell(_)), "{err}");
    }

    #[test]
    fn a_foreign_file_is_refused_with_the_header_fault() {
        let fd = create_memfd("not-fieldhub", 8192).unwrap();
        let err = ClientSegment::open(fd).unwrap_err();
        assert!(matches!(err, OpenError::Header(HeaderError::BadMagic(_))), "{err}");
    }
}
