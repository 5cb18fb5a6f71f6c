//! ivshmem regions: a client segment placed in a file that a QEMU guest sees
//! as the BAR2 of an `ivshmem-plain` device (`spec/shm.md` section 8).
//!
//! The hub owns the region's backing file (e.g. `/dev/shm/fieldhub-vm0`,
//! given to QEMU as a `memory-backend-file`); a client maps the same bytes
//! — in the guest through `/sys/bus/pci/devices/…/resource2`, on the host
//! through the file itself. The first page is the region page: a header
//! (`FHIV`, [`RegionHeader`]) and five control words; the client segment of
//! `spec/shm.md` section 2.1 follows at `segment_offset`, unchanged, so the
//! rings are the same code as for `shm://` clients.
//!
//! # Invariants
//!
//! - The hub uses only a file it creates itself (`O_CREAT|O_EXCL`,
//!   owner-only 0600) or one carrying a region header, and changes nothing,
//!   mode included, before it has decided.
//! - The hub never shrinks or replaces the file: a running QEMU maps it,
//!   and a shorter file would fault the guest's accesses. It grows a region
//!   file to a power of two if needed.
//! - Each control word has one writer: `generation`, `hub_beat` and
//!   `granted` the hub, `connect` and `client_beat` the client. A reader
//!   treats what it loads as a claim to check, never as a size or index.
//! - Nothing crosses the VM border but memory: no futex, no descriptor.
//!   Both sides poll ([`Backoff`]); liveness is the beat words.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::{FileType, Mode, OFlags};

use crate::layout::{self, HeaderError, RegionHeader, SegmentHeader, HEADER_LEN, PAGE, REGION_LEN};
use crate::segment::{file_len, ClientSegment, Mapping, OpenError};
use crate::sync::{AtomicU32, Ordering};

/// Why a hub cannot serve a region file.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("cannot open or create it: {0}")]
    Io(#[from] std::io::Error),
    #[error("it is not a regular file")]
    NotAFile,
    #[error("it belongs to another user")]
    NotOwned,
    #[error("it is {0} bytes, which is not a power of two (QEMU's ivshmem needs one) or too large")]
    BadSize(u64),
    #[error(
        "it exists and carries no fieldhub region header; --ivshmem uses only a file it creates itself or one \
         it served before, and changes nothing else: give a path that does not exist yet (the hub creates it)"
    )]
    NotARegion,
}

/// A mapped region page, and the file to map the client segment from.
pub struct Region {
    file: OwnedFd,
    page: Mapping,
    header: RegionHeader,
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region").field("header", &self.header).finish_non_exhaustive()
    }
}

impl Region {
    /// Hub: create the region file at `path` (`O_CREAT|O_EXCL`, owner-only),
    /// or open the one there (never through a symlink) only if it carries a
    /// region header — a file a hub served before. Nothing is changed, mode
    /// included, before that is decided: someone's document is refused as
    /// it was. A region file shorter than [`REGION_LEN`] is grown to it, and
    /// the region header is written. `generation` stays 0 — the region is
    /// not served — until the hub stores a new one through
    /// [`Region::generation`].
    pub fn create(path: &Path) -> Result<Self, CreateError> {
        let exclusive = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let (file, created) = match rustix::fs::open(path, exclusive, Mode::RUSR | Mode::WUSR) {
            Ok(file) => (file, true),
            Err(rustix::io::Errno::EXIST) => {
                // O_NONBLOCK: a FIFO or device put there is not waited on.
                let existing = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                (rustix::fs::open(path, existing, Mode::empty()).map_err(std::io::Error::from)?, false)
            }
            Err(e) => return Err(std::io::Error::from(e).into()),
        };
        let stat = rustix::fs::fstat(&file).map_err(std::io::Error::from)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(CreateError::NotAFile);
        }
        if stat.st_uid != rustix::process::geteuid().as_raw() {
            return Err(CreateError::NotOwned);
        }
        if !created && !carries_a_region_header(&file)? {
            return Err(CreateError::NotARegion);
        }
        let len = (stat.st_size.max(0) as u64).max(u64::from(REGION_LEN));
        if !len.is_power_of_two() || len > u64::from(u32::MAX / 2 + 1) {
            return Err(CreateError::BadSize(len));
        }
        if (stat.st_size as u64) < len {
            rustix::fs::ftruncate(&file, len).map_err(std::io::Error::from)?;
        }
        let page = Mapping::map(&file, 0, PAGE)?;
        let header = RegionHeader::standard(len as u32);
        // Not served until `publish`: a client that looks now waits.
        page.word(layout::REGION_GENERATION).store(0, Ordering::Release);
        page.write(0, &header.encode());
        page.word(layout::REGION_GRANTED).store(0, Ordering::Relaxed);
        Ok(Self { file, page, header })
    }

    /// Client: map the region page of `path` and check its header.
    pub fn open(path: &Path) -> Result<Self, OpenError> {
        let flags = OFlags::RDWR | OFlags::CLOEXEC;
        let file = rustix::fs::open(path, flags, Mode::empty()).map_err(std::io::Error::from)?;
        let actual = file_len(&file)?;
        if actual < PAGE as u64 {
            return Err(HeaderError::Truncated(actual as usize).into());
        }
        let page = Mapping::map(&file, 0, PAGE)?;
        let mut bytes = [0u8; HEADER_LEN];
        page.read(0, &mut bytes);
        let header = RegionHeader::parse(&bytes)?;
        if u64::from(header.region_len) > actual {
            return Err(OpenError::TooSmall { actual, claimed: header.region_len.into() });
        }
        Ok(Self { file, page, header })
    }

    pub fn header(&self) -> &RegionHeader {
        &self.header
    }

    /// Hub: (re)initialise the client segment for a new session — indices
    /// and bells back to 0 — and map it.
    pub fn reset_segment(&self, header: SegmentHeader) -> std::io::Result<ClientSegment> {
        let end = u64::from(self.header.segment_offset) + u64::from(header.segment_len);
        if end > u64::from(self.header.region_len) {
            return Err(std::io::Error::other("the client segment does not fit the region"));
        }
        ClientSegment::create_at(&self.file, self.header.segment_offset.into(), header)
    }

    /// Client: map the client segment and check its header; it must end
    /// inside the region.
    pub fn open_segment(&self) -> Result<ClientSegment, OpenError> {
        let segment = ClientSegment::open_at(self.file.as_fd(), self.header.segment_offset.into())?;
        let end = u64::from(self.header.segment_offset) + u64::from(segment.header().segment_len);
        if end > u64::from(self.header.region_len) {
            return Err(OpenError::TooSmall {
                actual: u64::from(self.header.region_len - self.header.segment_offset),
                claimed: segment.header().segment_len.into(),
            });
        }
        Ok(segment)
    }

    /// Nonzero while a hub serves the region; a new value per hub start
    /// (written by the hub, last, with Release).
    pub fn generation(&self) -> &AtomicU32 {
        self.page.word(layout::REGION_GENERATION)
    }

    /// Bumped by the hub at least every [`BEAT_INTERVAL`] while it serves.
    pub fn hub_beat(&self) -> &AtomicU32 {
        self.page.word(layout::REGION_HUB_BEAT)
    }

    /// A client's request for a fresh session: a nonzero nonce.
    pub fn connect(&self) -> &AtomicU32 {
        self.page.word(layout::REGION_CONNECT)
    }

    /// The nonce whose session the hub has prepared (segment reset); 0
    /// while no session is granted.
    pub fn granted(&self) -> &AtomicU32 {
        self.page.word(layout::REGION_GRANTED)
    }

    /// Bumped by the client in session at least every [`BEAT_INTERVAL`].
    pub fn client_beat(&self) -> &AtomicU32 {
        self.page.word(layout::REGION_CLIENT_BEAT)
    }
}

/// How often each side bumps its beat word.
pub const BEAT_INTERVAL: Duration = Duration::from_millis(100);
/// A side whose beat has not moved for this long is gone: the hub then
/// detaches the client (its ports close), the client reports the hub gone.
pub const BEAT_TIMEOUT: Duration = Duration::from_secs(3);

/// Adaptive polling for a side that cannot be woken across the VM border:
/// poll for [`Backoff::SPIN`] after the last activity, then sleep, each
/// sleep twice the last, from [`Backoff::FIRST_SLEEP`] up to `max_sleep`.
///
/// The polling phase yields the processor between checks instead of
/// spinning: in a one-vCPU guest the thread that will publish the awaited
/// message (the application, the client's reader) needs that CPU, and on a
/// small host the hub's poller competes with the bus thread. Measured under
/// TCG (`bench/vm.sh`): a 200 µs busy spin gave a guest round-trip median of
/// ≈ 420 µs, a 1 ms yielding poll ≈ 125 µs.
#[derive(Clone, Copy, Debug)]
pub struct Backoff {
    idle_since: Instant,
    sleep: Duration,
    max_sleep: Duration,
}

impl Backoff {
    pub const SPIN: Duration = Duration::from_millis(1);
    pub const FIRST_SLEEP: Duration = Duration::from_micros(10);
    /// The longest sleep while a session is under way.
    pub const MAX_SLEEP: Duration = Duration::from_millis(1);

    pub fn new(max_sleep: Duration) -> Self {
        Self { idle_since: Instant::now(), sleep: Self::FIRST_SLEEP, max_sleep }
    }

    /// Change the longest sleep (a side with nothing under way may poll
    /// more lazily).
    pub fn set_max_sleep(&mut self, max_sleep: Duration) {
        self.max_sleep = max_sleep;
        self.sleep = self.sleep.min(max_sleep);
    }

    /// Something happened: poll quickly again.
    pub fn reset(&mut self) {
        self.idle_since = Instant::now();
        self.sleep = Self::FIRST_SLEEP;
    }

    /// Nothing happened: spin or sleep a little, never past `deadline`.
    pub fn pause(&mut self, deadline: Option<Instant>) {
        let now = Instant::now();
        if now.duration_since(self.idle_since) < Self::SPIN {
            std::thread::yield_now();
            return;
        }
        let mut sleep = self.sleep;
        if let Some(left) = deadline.map(|d| d.saturating_duration_since(now)) {
            sleep = sleep.min(left);
        }
        std::thread::sleep(sleep);
        self.sleep = (self.sleep * 2).min(self.max_sleep);
    }

    /// Poll `ready` until it holds (true) or `deadline` passes (false).
    pub fn wait(&mut self, deadline: Option<Instant>, mut ready: impl FnMut() -> bool) -> bool {
        self.reset();
        loop {
            if ready() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            self.pause(deadline);
        }
    }
}

/// Whether an existing file starts with a region header (a region a hub
/// served before): only such a file may be served again. Anything else —
/// zeros included — may be someone's data, which `--ivshmem` must not touch.
fn carries_a_region_header(file: &OwnedFd) -> Result<bool, CreateError> {
    let mut first = [0u8; 4];
    let mut read = 0;
    while read < first.len() {
        match rustix::io::pread(file, &mut first[read..], read as u64) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(CreateError::Io(e.into())),
        }
    }
    Ok(first[..read] == layout::REGION_MAGIC[..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_path(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("fieldhub-region-{}-{name}", std::process::id()))
    }

    #[test]
    fn a_created_region_opens_with_its_segment_and_shares_the_words() {
        let path = temp_path("roundtrip");
        let _ = std::fs::remove_file(&path);
        let hub = Region::create(&path).unwrap();
        let segment =
            hub.reset_segment(SegmentHeader::with_to_client_slots(5, layout::REGION_TO_CLIENT_SLOTS)).unwrap();
        hub.generation().store(42, Ordering::Release);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), u64::from(REGION_LEN));
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777, 0o600);

        let client = Region::open(&path).unwrap();
        assert_eq!(client.generation().load(Ordering::Acquire), 42);
        client.connect().store(7, Ordering::Release);
        assert_eq!(hub.connect().load(Ordering::Acquire), 7);
        assert_eq!(client.open_segment().unwrap().header(), segment.header());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_region_is_refused_with_the_header_fault() {
        let path = temp_path("garbage");
        std::fs::write(&path, vec![0x5au8; 2 * PAGE]).unwrap();
        let err = Region::open(&path).unwrap_err();
        assert!(matches!(err, OpenError::Header(HeaderError::BadMagic(_))), "{err}");
        std::fs::write(&path, b"tiny").unwrap();
        let err = Region::open(&path).unwrap_err();
        assert!(matches!(err, OpenError::Header(HeaderError::Truncated(4))), "{err}");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_file_holding_other_data_or_zeros_is_refused_and_left_exactly_as_it_was() {
        use std::os::unix::fs::PermissionsExt;
        let path = temp_path("someones-data");
        let data = b"root:x:0:0:root:/root:/bin/bash\n".repeat(100);
        // Zeros are someone's data too: a document whose first 4 KiB are zero.
        let zeros_then_text = [vec![0u8; PAGE], data.clone()].concat();
        for contents in [data, zeros_then_text] {
            std::fs::write(&path, &contents).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let refused = Region::create(&path).unwrap_err();
            assert!(matches!(refused, CreateError::NotARegion), "{refused}");
            assert!(refused.to_string().contains("does not exist yet"), "{refused}");
            assert_eq!(std::fs::read(&path).unwrap(), contents, "the file is left as it was");
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o644, "its mode too");
        }
        // A region the hub created, and served before, is taken again.
        std::fs::remove_file(&path).unwrap();
        drop(Region::create(&path).unwrap());
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        drop(Region::create(&path).unwrap());
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn the_hub_never_shrinks_a_region_file_and_refuses_odd_sizes() {
        let path = temp_path("sizes");
        drop(Region::create(&path).unwrap());
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(8 << 20).unwrap();
        let region = Region::create(&path).unwrap();
        assert_eq!(region.header().region_len, 8 << 20);
        drop(region);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(5 << 20).unwrap();
        assert!(matches!(Region::create(&path), Err(CreateError::BadSize(_))));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 5 << 20, "a refused file keeps its size");
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn backoff_gives_up_at_the_deadline_and_sees_a_late_condition() {
        let mut backoff = Backoff::new(Backoff::MAX_SLEEP);
        let deadline = Instant::now() + Duration::from_millis(5);
        assert!(!backoff.wait(Some(deadline), || false));
        assert!(Instant::now() >= deadline);
        let late = Instant::now() + Duration::from_millis(3);
        assert!(backoff.wait(None, || Instant::now() >= late));
    }
}
