//! A single-producer/single-consumer ring of fixed-size slots carrying
//! complete wire messages (`spec/shm.md` section 3).
//!
//! A message is the wire form of `spec/protocol.md`: a `u32` little-endian
//! length, then the body. It starts at a slot boundary and occupies
//! `ceil((4 + length) / SLOT_SIZE)` consecutive slots, wrapping from the last
//! slot to the first. `head` and `tail` are free-running slot counters: the
//! producer owns `head`, the consumer owns `tail`, and `head - tail` slots
//! hold published messages.
//!
//! Each side keeps its own index in private memory and only *stores* it to
//! the shared word, so a peer that scribbles over the shared words can make
//! the ring look corrupt ([`RingError`]) but can never move an index the
//! other side relies on. Messages are copied into private memory before
//! anyone decodes them.

use crate::layout::SLOT_SIZE;
use crate::sync::{AtomicU32, Ordering};

/// A peer broke the ring protocol (or a caller tried the impossible).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("ring indices are {distance} slots apart in a ring of {slots}: the peer corrupted the ring")]
    Indices { distance: u32, slots: u32 },
    #[error("message length {len} is not within 1..={max}: the peer corrupted the ring or broke the size limit")]
    Length { len: u32, max: usize },
    #[error("a message of {slots} slots is longer than the {published} slots published")]
    Unpublished { slots: u32, published: u32 },
    #[error("a message of {len} bytes cannot fit a ring of {slots} slots")]
    TooLarge { len: usize, slots: u32 },
}

/// Slots a message of `len` bytes (length prefix included) occupies.
pub fn slots_for(len: usize) -> u32 {
    len.div_ceil(SLOT_SIZE) as u32
}

/// The data area of a ring in shared memory.
#[cfg(not(loom))]
pub struct Slots<'a> {
    base: *mut u8,
    count: u32,
    _memory: std::marker::PhantomData<&'a [u8]>,
}

// SAFETY: `Slots` is a view of memory that is only touched through the ring
// protocol, which gives every slot a single writer at any moment and orders
// the writer before the reader with the index words' Release/Acquire pairs.
#[cfg(not(loom))]
unsafe impl Send for Slots<'_> {}
// SAFETY: as for `Send`: concurrent use is what the protocol arbitrates.
#[cfg(not(loom))]
unsafe impl Sync for Slots<'_> {}

#[cfg(not(loom))]
impl<'a> Slots<'a> {
    /// View `count` slots at `base`.
    ///
    /// # Safety
    ///
    /// `base` must point to `count * SLOT_SIZE` bytes that stay mapped,
    /// readable and writable for `'a`, and `count` must be a power of two.
    /// Other parties (threads or processes) may access the bytes only as the
    /// ring protocol allows; a party that does not gets garbage, not
    /// unsoundness in this process, because every access here is a plain
    /// byte copy within the bounds checked below.
    pub unsafe fn from_raw(base: *mut u8, count: u32) -> Self {
        debug_assert!(count.is_power_of_two());
        Self { base, count, _memory: std::marker::PhantomData }
    }

    fn write(&self, slot: u32, bytes: &[u8]) {
        assert!(slot < self.count && bytes.len() <= SLOT_SIZE);
        // SAFETY: the slot lies within the `count * SLOT_SIZE` bytes promised
        // to `from_raw`, and `bytes` is private memory, so the ranges cannot
        // overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.base.add(slot as usize * SLOT_SIZE), bytes.len()) }
    }

    fn read(&self, slot: u32, offset: usize, out: &mut [u8]) {
        assert!(slot < self.count && offset + out.len() <= SLOT_SIZE);
        // SAFETY: within the slot as above; `out` is private memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.add(slot as usize * SLOT_SIZE + offset),
                out.as_mut_ptr(),
                out.len(),
            )
        }
    }
}

/// The data area of a ring inside the loom model: one tracked cell per slot,
/// so the model reports any read that is not ordered after the write it
/// reads (a torn read) as a causality violation.
#[cfg(loom)]
pub struct Slots<'a> {
    cells: &'a [loom::cell::UnsafeCell<[u8; SLOT_SIZE]>],
    count: u32,
}

#[cfg(loom)]
impl<'a> Slots<'a> {
    pub fn from_cells(cells: &'a [loom::cell::UnsafeCell<[u8; SLOT_SIZE]>]) -> Self {
        Self { cells, count: cells.len() as u32 }
    }

    fn write(&self, slot: u32, bytes: &[u8]) {
        // SAFETY: loom checks that no other access to this cell is concurrent.
        self.cells[slot as usize].with_mut(|p| unsafe { (&mut *p)[..bytes.len()].copy_from_slice(bytes) });
    }

    fn read(&self, slot: u32, offset: usize, out: &mut [u8]) {
        // SAFETY: as for `write`.
        self.cells[slot as usize].with(|p| unsafe { out.copy_from_slice(&(&*p)[offset..offset + out.len()]) });
    }
}

/// One ring: its two index words and its slots.
pub struct RingRef<'a> {
    head: &'a AtomicU32,
    tail: &'a AtomicU32,
    slots: Slots<'a>,
}

impl<'a> RingRef<'a> {
    pub fn new(head: &'a AtomicU32, tail: &'a AtomicU32, slots: Slots<'a>) -> Self {
        Self { head, tail, slots }
    }

    /// Number of slots.
    pub fn slots(&self) -> u32 {
        self.slots.count
    }

    /// Whether a published message waits, judged from the consumer's `tail`.
    fn published_since(&self, tail: u32) -> u32 {
        // SYNC POINT with `Producer::try_push`'s Release store of `head`:
        // Acquire makes the slots published up to the loaded head visible.
        self.head.load(Ordering::Acquire).wrapping_sub(tail)
    }

    /// The producer's counter as last stored: for a watcher that polls a
    /// ring for activity (the hub's ivshmem poller) and reads nothing.
    pub fn head(&self) -> u32 {
        // SYNC POINT with `Producer::try_push`'s Release store; a watcher
        // that sees a new head and rings the consumer's bell passes on
        // what this Acquire made visible.
        self.head.load(Ordering::Acquire)
    }

    /// Whether messages wait that the consumer has not taken yet, judged
    /// from the shared indices: for a thread that waits alongside the
    /// consumer and reads nothing itself.
    pub fn has_unread(&self) -> bool {
        // Relaxed on `tail`: only a hint for a waiter, which re-checks
        // through the consumer's own results; `published_since` explains
        // the Acquire on `head`.
        self.published_since(self.tail.load(Ordering::Relaxed)) != 0
    }
}

/// The producing side's state: its private copy of `head`, and the
/// consumer's `tail` as last loaded.
///
/// The cached `tail` spares a load of the consumer's cache line per message:
/// it is reloaded only when it no longer shows room. A stale value is only
/// ever too old, so it shows too little room, never room that is not free.
#[derive(Debug)]
pub struct Producer {
    head: u32,
    /// `tail` as last loaded (Acquire) and checked; `None` before the first load.
    seen_tail: Option<u32>,
}

impl Producer {
    /// Start producing into a ring whose `head` is `head` (0 for a new ring).
    pub fn starting_at(head: u32) -> Self {
        Self { head, seen_tail: None }
    }

    /// Slots in use (published and not yet consumed).
    pub fn used_slots(&self, ring: &RingRef<'_>) -> Result<u32, RingError> {
        // SYNC POINT with `Consumer::advance`'s Release store of `tail`:
        // slots below the loaded tail have been read and may be reused.
        let tail = ring.tail.load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        if used > ring.slots() {
            return Err(RingError::Indices { distance: used, slots: ring.slots() });
        }
        Ok(used)
    }

    /// Slots that may still be taken within `limit` by the tail last seen
    /// (0 before the first look): never more than the real number, which
    /// only grows as the consumer frees slots, so `fits_within` of up to
    /// this many answers yes without loading the tail.
    pub fn spare_as_seen(&self, limit: u32) -> u32 {
        self.seen_tail.map_or(0, |tail| limit.saturating_sub(self.head.wrapping_sub(tail)))
    }

    /// Whether `needed` more slots keep the slots in use within `limit`.
    /// The consumer's tail (a cache line it writes) is loaded only when the
    /// tail last seen says no: that tail is never ahead of the real one, so
    /// a yes from it holds, and a producer well within its limit reads no
    /// shared index per message.
    pub fn fits_within(&mut self, ring: &RingRef<'_>, needed: u32, limit: u32) -> Result<bool, RingError> {
        if let Some(tail) = self.seen_tail {
            if self.head.wrapping_sub(tail) + needed <= limit {
                return Ok(true);
            }
        }
        let used = self.used_slots(ring)?;
        self.seen_tail = Some(self.head.wrapping_sub(used));
        Ok(used + needed <= limit)
    }

    /// Slots free for new messages.
    pub fn free_slots(&self, ring: &RingRef<'_>) -> Result<u32, RingError> {
        Ok(ring.slots() - self.used_slots(ring)?)
    }

    /// Publish `message` (length prefix included) if it fits; `Ok(false)`
    /// when the ring has too few free slots right now.
    pub fn try_push(&mut self, ring: &RingRef<'_>, message: &[u8]) -> Result<bool, RingError> {
        debug_assert!(
            message.len() > 4 && message[..4] == ((message.len() - 4) as u32).to_le_bytes(),
            "a ring message starts with its body length"
        );
        let needed = slots_for(message.len());
        if needed > ring.slots() {
            return Err(RingError::TooLarge { len: message.len(), slots: ring.slots() });
        }
        let free_as_seen = self.seen_tail.map_or(0, |tail| ring.slots() - self.head.wrapping_sub(tail));
        if free_as_seen < needed {
            let used = self.used_slots(ring)?;
            self.seen_tail = Some(self.head.wrapping_sub(used));
            if ring.slots() - used < needed {
                return Ok(false);
            }
        }
        let mask = ring.slots() - 1;
        for (i, chunk) in message.chunks(SLOT_SIZE).enumerate() {
            ring.slots.write(self.head.wrapping_add(i as u32) & mask, chunk);
        }
        self.head = self.head.wrapping_add(needed);
        // SYNC POINT with `RingRef::published_since`'s Acquire load: the
        // bytes written above happen-before the consumer's copy of them.
        ring.head.store(self.head, Ordering::Release);
        Ok(true)
    }
}

/// The consuming side's state: its private copy of `tail`, and the
/// producer's `head` as last loaded.
///
/// The cached `head` spares a load of the producer's cache line per
/// message: it is reloaded only when the messages it showed are consumed.
/// A stale value is only ever too old, so it hides messages for a moment,
/// never shows slots that are not published.
#[derive(Debug)]
pub struct Consumer {
    tail: u32,
    /// `head` as last loaded (Acquire) and checked.
    seen_head: u32,
}

impl Consumer {
    /// Start consuming from a ring whose `tail` is `tail` (0 for a new ring).
    pub fn starting_at(tail: u32) -> Self {
        Self { tail, seen_head: tail }
    }

    /// Published slots not yet consumed: from the cached `head` while it
    /// shows at least `wanted`, else from a fresh load.
    fn published(&mut self, ring: &RingRef<'_>, wanted: u32) -> Result<u32, RingError> {
        let cached = self.seen_head.wrapping_sub(self.tail);
        if cached >= wanted {
            return Ok(cached);
        }
        let published = ring.published_since(self.tail);
        if published > ring.slots() {
            return Err(RingError::Indices { distance: published, slots: ring.slots() });
        }
        self.seen_head = self.tail.wrapping_add(published);
        Ok(published)
    }

    /// Whether a message is published and not yet consumed.
    pub fn has_message(&self, ring: &RingRef<'_>) -> bool {
        ring.published_since(self.tail) != 0
    }

    /// Copy the next message's body (without its length prefix) into `body`
    /// and return the slots it occupies, without consuming it; `None` when
    /// the ring is empty. `max_body` bounds the length a peer may claim.
    pub fn peek(&mut self, ring: &RingRef<'_>, max_body: usize, body: &mut Vec<u8>) -> Result<Option<u32>, RingError> {
        let mut published = self.published(ring, 1)?;
        if published == 0 {
            return Ok(None);
        }
        let mask = ring.slots() - 1;
        let first = self.tail & mask;
        let mut prefix = [0u8; 4];
        ring.slots.read(first, 0, &mut prefix);
        let len = u32::from_le_bytes(prefix);
        if len == 0 || len as usize > max_body {
            return Err(RingError::Length { len, max: max_body });
        }
        let slots = slots_for(4 + len as usize);
        if slots > published {
            // The cached head may be older than the message's last slot.
            published = self.published(ring, slots)?;
            if slots > published {
                return Err(RingError::Unpublished { slots, published });
            }
        }
        body.clear();
        body.resize(len as usize, 0);
        // Message byte `at` (prefix included) lives in slot `at / SLOT_SIZE`.
        let mut at = 4;
        while at < 4 + len as usize {
            let slot = self.tail.wrapping_add((at / SLOT_SIZE) as u32) & mask;
            let offset = at % SLOT_SIZE;
            let n = (SLOT_SIZE - offset).min(4 + len as usize - at);
            ring.slots.read(slot, offset, &mut body[at - 4..at - 4 + n]);
            at += n;
        }
        Ok(Some(slots))
    }

    /// Consume `slots` slots (the value [`Consumer::peek`] returned).
    pub fn advance(&mut self, ring: &RingRef<'_>, slots: u32) {
        self.tail = self.tail.wrapping_add(slots);
        // SYNC POINT with `Producer::used_slots`'s Acquire load: the copy
        // out of these slots happens-before the producer overwrites them.
        ring.tail.store(self.tail, Ordering::Release);
    }

    /// [`Consumer::peek`] and [`Consumer::advance`] in one.
    pub fn pop(&mut self, ring: &RingRef<'_>, max_body: usize, body: &mut Vec<u8>) -> Result<bool, RingError> {
        match self.peek(ring, max_body, body)? {
            Some(slots) => {
                self.advance(ring, slots);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// A ring in private memory, for tests and the loom model.
pub struct LocalRing {
    head: AtomicU32,
    tail: AtomicU32,
    #[cfg(not(loom))]
    data: Box<[std::cell::UnsafeCell<[u8; SLOT_SIZE]>]>,
    #[cfg(loom)]
    data: Box<[loom::cell::UnsafeCell<[u8; SLOT_SIZE]>]>,
}

// SAFETY: the slots are only accessed through `RingRef`, whose protocol
// gives each slot one writer at a time (see `Slots`).
unsafe impl Sync for LocalRing {}

impl LocalRing {
    /// A ring of `slots` slots (a power of two).
    pub fn new(slots: u32) -> Self {
        assert!(slots.is_power_of_two());
        Self {
            head: AtomicU32::new(0),
            tail: AtomicU32::new(0),
            #[cfg(not(loom))]
            data: (0..slots).map(|_| std::cell::UnsafeCell::new([0; SLOT_SIZE])).collect(),
            #[cfg(loom)]
            data: (0..slots).map(|_| loom::cell::UnsafeCell::new([0; SLOT_SIZE])).collect(),
        }
    }

    pub fn ring(&self) -> RingRef<'_> {
        #[cfg(not(loom))]
        // SAFETY: the boxed cells are `slots * SLOT_SIZE` contiguous bytes
        // (`UnsafeCell` is `repr(transparent)`) that live as long as `self`.
        let slots = unsafe { Slots::from_raw(self.data.as_ptr() as *mut u8, self.data.len() as u32) };
        #[cfg(loom)]
        let slots = Slots::from_cells(&self.data);
        RingRef::new(&self.head, &self.tail, slots)
    }

    /// The shared `head` word, for tests that play a corrupting peer.
    pub fn head_word(&self) -> &AtomicU32 {
        &self.head
    }

    /// The shared `tail` word, for tests that play a corrupting peer.
    pub fn tail_word(&self) -> &AtomicU32 {
        &self.tail
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn message(body: &[u8]) -> Vec<u8> {
        let mut m = (body.len() as u32).to_le_bytes().to_vec();
        m.extend_from_slice(body);
        m
    }

    #[test]
    fn messages_spanning_slots_and_the_wrap_come_out_whole_and_in_order() {
        let local = LocalRing::new(8);
        let ring = local.ring();
        let (mut producer, mut consumer) = (Producer::starting_at(0), Consumer::starting_at(0));
        let mut body = Vec::new();
        for round in 0..100u32 {
            let len = 1 + (round as usize * 37) % 500;
            let payload: Vec<u8> = (0..len).map(|i| (i as u32 ^ round) as u8).collect();
            assert!(producer.try_push(&ring, &message(&payload)).unwrap());
            assert!(consumer.pop(&ring, 4096, &mut body).unwrap());
            assert_eq!(body, payload);
        }
        assert!(!consumer.pop(&ring, 4096, &mut body).unwrap());
    }

    #[test]
    fn the_spare_as_seen_is_none_before_a_look_and_never_more_than_the_rings() {
        let local = LocalRing::new(16);
        let ring = local.ring();
        let (mut producer, mut consumer) = (Producer::starting_at(0), Consumer::starting_at(0));
        assert_eq!(producer.spare_as_seen(12), 0, "nothing seen yet");
        assert!(producer.fits_within(&ring, 1, 12).unwrap());
        assert_eq!(producer.spare_as_seen(12), 12);
        let one_slot = message(&[7; 8]);
        for taken in 1..=5 {
            assert!(producer.try_push(&ring, &one_slot).unwrap());
            assert_eq!(producer.spare_as_seen(12), 12 - taken);
        }
        // The consumer frees slots unseen: the spare stays as it was seen,
        // below the real one, until the producer looks again.
        let mut body = Vec::new();
        while consumer.pop(&ring, 4096, &mut body).unwrap() {}
        assert_eq!(producer.spare_as_seen(12), 7);
        assert!(!producer.fits_within(&ring, 13, 12).unwrap());
        assert_eq!(producer.spare_as_seen(12), 12);
    }

    /// The largest message a frame makes: a `FRAMES` message with one
    /// 2,048-byte CAN XL record (spec/shm.md 6), 17 slots, across the wrap.
    #[test]
    fn a_seventeen_slot_message_of_one_2048_byte_xl_record_wraps_whole() {
        let local = LocalRing::new(32);
        let ring = local.ring();
        let (mut producer, mut consumer) = (Producer::starting_at(0), Consumer::starting_at(0));
        let mut body = Vec::new();
        for _ in 0..25 {
            assert!(producer.try_push(&ring, &message(&[1; 100])).unwrap());
            assert!(consumer.pop(&ring, 4096, &mut body).unwrap());
        }
        let xl_batch: Vec<u8> = (0..4 + 36 + 2048).map(|i| (i % 251) as u8).collect();
        let whole = message(&xl_batch);
        assert_eq!((whole.len(), slots_for(whole.len())), (2092, 17));
        assert!(producer.try_push(&ring, &whole).unwrap(), "17 slots from slot 25 of 32: across the wrap");
        assert!(consumer.pop(&ring, 4096, &mut body).unwrap());
        assert_eq!(body, xl_batch);
    }

    #[test]
    fn full_ring_refuses_until_the_consumer_frees_slots() {
        let local = LocalRing::new(4);
        let ring = local.ring();
        let (mut producer, mut consumer) = (Producer::starting_at(0), Consumer::starting_at(0));
        let two_slots = message(&[7; 200]);
        assert!(producer.try_push(&ring, &two_slots).unwrap());
        assert!(producer.try_push(&ring, &two_slots).unwrap());
        assert!(!producer.try_push(&ring, &message(&[1])).unwrap());
        assert_eq!(producer.free_slots(&ring), Ok(0));
        let mut body = Vec::new();
        assert!(consumer.pop(&ring, 4096, &mut body).unwrap());
        assert!(producer.try_push(&ring, &message(&[1])).unwrap());
        assert_eq!(producer.free_slots(&ring), Ok(1));
        assert!(matches!(producer.try_push(&ring, &message(&[0; 600])), Err(RingError::TooLarge { .. })));
    }

    #[test]
    fn a_limit_check_from_the_tail_last_seen_never_overstates_the_room() {
        let local = LocalRing::new(8);
        let ring = local.ring();
        let (mut producer, mut consumer) = (Producer::starting_at(0), Consumer::starting_at(0));
        let one_slot = message(&[3; 10]);
        for _ in 0..4 {
            assert!(producer.try_push(&ring, &one_slot).unwrap());
        }
        assert_eq!(producer.fits_within(&ring, 1, 5), Ok(true));
        assert!(producer.try_push(&ring, &one_slot).unwrap());
        assert_eq!(producer.fits_within(&ring, 1, 5), Ok(false), "5 in use: a sixth exceeds the limit");
        let mut body = Vec::new();
        assert!(consumer.pop(&ring, 4096, &mut body).unwrap());
        assert_eq!(producer.fits_within(&ring, 1, 5), Ok(true), "a no from the old tail loads the new one");
        assert!(producer.try_push(&ring, &one_slot).unwrap());
        assert_eq!(producer.fits_within(&ring, 1, 5), Ok(false));
        // A tail the consumer could not have written is caught when loaded.
        local.tail_word().store(1000, Ordering::Release);
        assert!(matches!(producer.fits_within(&ring, 1, 5), Err(RingError::Indices { .. })));
    }

    #[test]
    fn corrupt_indices_and_lengths_are_errors_not_wild_reads() {
        let local = LocalRing::new(4);
        let ring = local.ring();
        let mut body = Vec::new();
        local.head_word().store(9, Ordering::Release);
        assert!(matches!(Consumer::starting_at(0).peek(&ring, 4096, &mut body), Err(RingError::Indices { .. })));
        local.tail_word().store(100, Ordering::Release);
        assert!(matches!(Producer::starting_at(0).used_slots(&ring), Err(RingError::Indices { .. })));

        let local = LocalRing::new(4);
        let ring = local.ring();
        let mut producer = Producer::starting_at(0);
        assert!(producer.try_push(&ring, &message(&[1; 10])).unwrap());
        assert!(matches!(Consumer::starting_at(0).peek(&ring, 5, &mut body), Err(RingError::Length { .. })));
        // A length claiming more slots than were published.
        let mut forged = 300u32.to_le_bytes().to_vec();
        forged.resize(SLOT_SIZE, 0);
        ring.slots.write(0, &forged);
        assert!(matches!(
            Consumer::starting_at(0).peek(&ring, 4096, &mut body),
            Err(RingError::Unpublished { slots: 3, published: 1 })
        ));
    }
}
