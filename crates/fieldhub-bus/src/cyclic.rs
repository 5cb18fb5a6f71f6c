//! Cyclic jobs on bus time: a job is a port, a frame producer, a period and
//! a start delay; [`CyclicJobs::run_due`] hands every job whose cycle is due
//! by the bus time it is given to the caller, with the frame its producer
//! made. The rest-bus simulation's messages and the socketcand BCM's
//! transmit jobs are such jobs. Whoever drives it reads the bus's
//! [`crate::clock::Clock`]: real time makes it exact to the bus's wake-up,
//! virtual time deterministic.
//!
//! Invariants:
//! - A job's cycles are `start + k·period` exactly, never drifting with
//!   late runs: a run that comes late sends the due cycle once and skips
//!   the cycles that passed meanwhile (counted in [`JobStats::skipped`]),
//!   keeping the phase.
//! - Jobs due at the same bus time run in the order they were added, so a
//!   run is deterministic.
//! - Nothing allocates per cycle: a cycle pops one queue entry and pushes
//!   one into the room it left; a removed or rescheduled job's stale entry
//!   is recognised by its epoch and dropped when it comes up.
//! - The queue holds one live entry per job; stale entries are dropped as
//!   they come up, and all at once when they outnumber the jobs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, OnceLock};

use fieldhub_proto::Frame;

/// Makes a job's frame for one cycle.
pub trait FrameProducer: Send {
    /// The frame for the cycle due at `due_ns` (bus time), or `None` to
    /// send nothing this cycle (a message stopped, an event not fired).
    fn produce(&mut self, due_ns: u64) -> Option<Frame>;
}

impl<F: FnMut(u64) -> Option<Frame> + Send> FrameProducer for F {
    fn produce(&mut self, due_ns: u64) -> Option<Frame> {
        self(due_ns)
    }
}

/// The bus keeps its clients' producers boxed: each job makes its own kind.
impl FrameProducer for Box<dyn FrameProducer> {
    fn produce(&mut self, due_ns: u64) -> Option<Frame> {
        (**self).produce(due_ns)
    }
}

/// A job's handle, unique within its [`CyclicJobs`]: a handle of a removed
/// job never reaches the job that took its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct JobId {
    index: u32,
    incarnation: u32,
}

/// Why a job cannot be scheduled.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    #[error("a cyclic job's period must be at least 1 µs, not {0} ns")]
    PeriodTooShort(u64),
    #[error("no cyclic job {0:?}: it was removed, its port closed, or it was never added")]
    NoSuchJob(JobId),
    #[error("port {0} is not open: a cyclic job sends from an open port of its own client")]
    PortNotOpen(u16),
}

/// A time origin that several jobs share: the bus time the first of them
/// is added, from which each one's start delay counts. A rest-bus
/// simulation's nodes add their messages one request at a time, from
/// threads of their own; without a shared origin each message's phase
/// would count from when its request happened to be served, and the
/// offsets between messages that the DBC's start delays set would drift by
/// the time the requests took (up to milliseconds for 300 messages). A job
/// whose cycle the origin puts before its addition runs at once and then
/// keeps the origin's phase ([`CyclicJobs::run_due`] skips passed cycles).
#[derive(Clone, Debug, Default)]
pub struct JobOrigin(Arc<OnceLock<u64>>);

impl JobOrigin {
    pub fn new() -> Self {
        Self::default()
    }

    /// The origin: fixed at `now_ns` by the first job added with it.
    pub fn at(&self, now_ns: u64) -> u64 {
        *self.0.get_or_init(|| now_ns)
    }

    /// The origin, once a job fixed it.
    pub fn get(&self) -> Option<u64> {
        self.0.get().copied()
    }
}

/// The shortest period a job may have: shorter is no cycle a CAN channel
/// could carry, and would let one job hold the bus thread.
pub const MIN_PERIOD_NS: u64 = 1_000;

/// What a job has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobStats {
    /// Frames its producer made.
    pub sent: u64,
    /// Cycles it ran that produced no frame.
    pub idle: u64,
    /// Cycles skipped because a run came later than the next cycle.
    pub skipped: u64,
}

struct Job<K, P> {
    port: K,
    producer: P,
    period_ns: u64,
    next_ns: u64,
    /// When it was added, across all jobs: ties at one due time go by it.
    order: u64,
    stats: JobStats,
}

struct Slot<K, P> {
    job: Option<Job<K, P>>,
    /// Counts the jobs the slot held: a [`JobId`] names one of them.
    incarnation: u32,
    /// Counts reschedules and removals: a queue entry of an older epoch is stale.
    epoch: u32,
}

/// A queue entry: `(due, order, slot index, epoch)`, earliest first.
type Entry = Reverse<(u64, u64, u32, u32)>;

/// The jobs of one driver, by the bus time their next cycle is due.
pub struct CyclicJobs<K, P> {
    slots: Vec<Slot<K, P>>,
    queue: BinaryHeap<Entry>,
    free: Vec<u32>,
    next_order: u64,
}

impl<K, P> Default for CyclicJobs<K, P> {
    fn default() -> Self {
        Self { slots: Vec::new(), queue: BinaryHeap::new(), free: Vec::new(), next_order: 0 }
    }
}

impl<K: Copy, P: FrameProducer> CyclicJobs<K, P> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Schedule `producer` on `port` every `period_ns`, its first cycle at
    /// `from_ns + start_delay_ns` (`from_ns`: now, or a [`JobOrigin`]).
    pub fn add(
        &mut self,
        port: K,
        producer: P,
        period_ns: u64,
        start_delay_ns: u64,
        from_ns: u64,
    ) -> Result<JobId, JobError> {
        check_period(period_ns)?;
        let next_ns = from_ns.saturating_add(start_delay_ns);
        let order = self.next_order;
        self.next_order += 1;
        let job = Job { port, producer, period_ns, next_ns, order, stats: JobStats::default() };
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(Slot { job: None, incarnation: 0, epoch: 0 });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 jobs")
            }
        };
        let slot = &mut self.slots[index as usize];
        slot.job = Some(job);
        let id = JobId { index, incarnation: slot.incarnation };
        self.enqueue(index);
        Ok(id)
    }

    /// Change a job's period; its next cycle is `now_ns + start_delay_ns`
    /// (as the BCM's `TX_SETUP` with `SETTIMER|STARTTIMER` restarts it).
    pub fn update(&mut self, id: JobId, period_ns: u64, start_delay_ns: u64, now_ns: u64) -> Result<(), JobError> {
        check_period(period_ns)?;
        let job = self.job_mut(id)?;
        job.period_ns = period_ns;
        job.next_ns = now_ns.saturating_add(start_delay_ns);
        let slot = &mut self.slots[id.index as usize];
        slot.epoch = slot.epoch.wrapping_add(1);
        self.enqueue(id.index);
        if self.queue.len() > 2 * self.len() + 16 {
            self.compact();
        }
        Ok(())
    }

    /// Remove a job; its producer comes back.
    pub fn remove(&mut self, id: JobId) -> Result<P, JobError> {
        self.job_mut(id)?;
        let slot = &mut self.slots[id.index as usize];
        let job = slot.job.take().ok_or(JobError::NoSuchJob(id))?;
        slot.epoch = slot.epoch.wrapping_add(1);
        slot.incarnation = slot.incarnation.wrapping_add(1);
        self.free.push(id.index);
        Ok(job.producer)
    }

    /// Remove every job whose port `gone` says is gone (a port closed, a
    /// client left). Returns how many were removed.
    pub fn remove_where(&mut self, mut gone: impl FnMut(K) -> bool) -> usize {
        let mut removed = 0;
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if slot.job.as_ref().is_some_and(|job| gone(job.port)) {
                slot.job = None;
                slot.epoch = slot.epoch.wrapping_add(1);
                slot.incarnation = slot.incarnation.wrapping_add(1);
                self.free.push(u32::try_from(index).expect("fewer than 2^32 jobs"));
                removed += 1;
            }
        }
        if removed > 0 && self.queue.len() > 2 * self.len() + 16 {
            self.compact();
        }
        removed
    }

    /// The port a job sends from.
    pub fn port_of(&self, id: JobId) -> Result<K, JobError> {
        self.job(id).map(|job| job.port)
    }

    /// A job's producer, to change what it sends next.
    pub fn producer_mut(&mut self, id: JobId) -> Result<&mut P, JobError> {
        Ok(&mut self.job_mut(id)?.producer)
    }

    /// What a job has done.
    pub fn stats(&self, id: JobId) -> Result<JobStats, JobError> {
        self.job(id).map(|job| job.stats)
    }

    /// The bus time a job's next cycle is due.
    pub fn next_of(&self, id: JobId) -> Result<u64, JobError> {
        self.job(id).map(|job| job.next_ns)
    }

    /// The earliest bus time a job is due: the driver serves again then.
    pub fn next_due(&mut self) -> Option<u64> {
        self.drop_stale();
        self.queue.peek().map(|Reverse((due, ..))| *due)
    }

    /// How many jobs there are.
    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Run every job due by `now_ns`: `emit(port, frame, due_ns)` for each
    /// frame made, earliest cycle first. Returns how many frames it emitted.
    pub fn run_due(&mut self, now_ns: u64, mut emit: impl FnMut(K, Frame, u64)) -> usize {
        let mut emitted = 0;
        while let Some(&Reverse((due, order, index, epoch))) = self.queue.peek() {
            if due > now_ns {
                break;
            }
            self.queue.pop();
            let slot = &mut self.slots[index as usize];
            if slot.epoch != epoch {
                continue;
            }
            let Some(job) = slot.job.as_mut() else { continue };
            match job.producer.produce(due) {
                Some(frame) => {
                    job.stats.sent += 1;
                    emitted += 1;
                    emit(job.port, frame, due);
                }
                None => job.stats.idle += 1,
            }
            let mut next = due.saturating_add(job.period_ns);
            if next <= now_ns {
                // Late by more than a period: keep the phase, skip the passed cycles.
                let missed = (now_ns - next) / job.period_ns + 1;
                job.stats.skipped += missed;
                next = next.saturating_add(missed.saturating_mul(job.period_ns));
            }
            job.next_ns = next;
            self.queue.push(Reverse((next, order, index, epoch)));
        }
        emitted
    }

    fn enqueue(&mut self, index: u32) {
        let slot = &self.slots[index as usize];
        if let Some(job) = &slot.job {
            self.queue.push(Reverse((job.next_ns, job.order, index, slot.epoch)));
        }
    }

    /// Drop every stale entry: a storm of updates to jobs whose cycles are
    /// far off cannot grow the queue.
    fn compact(&mut self) {
        let slots = &self.slots;
        self.queue.retain(|&Reverse((_, _, index, epoch))| {
            let slot = &slots[index as usize];
            slot.job.is_some() && slot.epoch == epoch
        });
    }

    fn drop_stale(&mut self) {
        while let Some(&Reverse((_, _, index, epoch))) = self.queue.peek() {
            let slot = &self.slots[index as usize];
            if slot.job.is_some() && slot.epoch == epoch {
                break;
            }
            self.queue.pop();
        }
    }

    fn job(&self, id: JobId) -> Result<&Job<K, P>, JobError> {
        self.slots
            .get(id.index as usize)
            .filter(|slot| slot.incarnation == id.incarnation)
            .and_then(|slot| slot.job.as_ref())
            .ok_or(JobError::NoSuchJob(id))
    }

    fn job_mut(&mut self, id: JobId) -> Result<&mut Job<K, P>, JobError> {
        self.slots
            .get_mut(id.index as usize)
            .filter(|slot| slot.incarnation == id.incarnation)
            .and_then(|slot| slot.job.as_mut())
            .ok_or(JobError::NoSuchJob(id))
    }
}

fn check_period(period_ns: u64) -> Result<(), JobError> {
    if period_ns < MIN_PERIOD_NS {
        return Err(JobError::PeriodTooShort(period_ns));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    const MS: u64 = 1_000_000;

    fn frame(id: u32, byte: u8) -> Frame {
        Frame::can(id, false, &[byte]).expect("a valid frame")
    }

    type Producer = Box<dyn FnMut(u64) -> Option<Frame> + Send>;

    /// Run `jobs` on `clock` in steps of `step_ns` until `until_ns`, as a
    /// bus serving at every deadline would, recording `(port, due, now)`.
    fn drive(jobs: &mut CyclicJobs<u8, Producer>, clock: &ManualClock, until_ns: u64) -> Vec<(u8, u64, u64)> {
        let mut seen = Vec::new();
        while let Some(due) = jobs.next_due().filter(|&due| due <= until_ns) {
            clock.set(due);
            let now = clock.now();
            jobs.run_due(now, |port, _frame, due| seen.push((port, due, now)));
        }
        seen
    }

    #[test]
    fn every_cycle_is_sent_at_its_exact_bus_time_after_the_start_delay() {
        let clock = ManualClock::at(5 * MS);
        let mut jobs: CyclicJobs<u8, Producer> = CyclicJobs::new();
        jobs.add(1, Box::new(|_| Some(frame(0x100, 1))), 10 * MS, 3 * MS, clock.now()).unwrap();
        jobs.add(2, Box::new(|_| Some(frame(0x200, 2))), 25 * MS, 0, clock.now()).unwrap();
        let seen = drive(&mut jobs, &clock, 105 * MS);
        let of = |port| seen.iter().filter(|s| s.0 == port).map(|s| s.1).collect::<Vec<_>>();
        assert_eq!(of(1), (0..10).map(|k| 8 * MS + k * 10 * MS).collect::<Vec<_>>());
        assert_eq!(of(2), (0..5).map(|k| 5 * MS + k * 25 * MS).collect::<Vec<_>>());
        assert!(seen.iter().all(|&(_, due, now)| due == now), "each frame at its cycle's time");
    }

    #[test]
    fn jobs_due_together_run_in_the_order_they_were_added() {
        let clock = ManualClock::at(0);
        let mut jobs: CyclicJobs<u8, Producer> = CyclicJobs::new();
        for port in [7, 3, 5] {
            jobs.add(port, Box::new(move |_| Some(frame(u32::from(port), port))), 10 * MS, 0, 0).unwrap();
        }
        let seen = drive(&mut jobs, &clock, 20 * MS);
        assert_eq!(seen.iter().map(|s| s.0).collect::<Vec<_>>(), [7, 3, 5, 7, 3, 5, 7, 3, 5]);
    }

    #[test]
    fn a_late_run_sends_the_due_cycle_once_and_keeps_the_phase() {
        let mut jobs: CyclicJobs<u8, Producer> = CyclicJobs::new();
        let id = jobs.add(1, Box::new(|_| Some(frame(1, 0))), 10 * MS, 0, 0).unwrap();
        let mut dues = Vec::new();
        jobs.run_due(35 * MS, |_, _, due| dues.push(due));
        assert_eq!(dues, [0]);
        assert_eq!(jobs.next_of(id).unwrap(), 40 * MS);
        assert_eq!(jobs.stats(id).unwrap(), JobStats { sent: 1, idle: 0, skipped: 3 });
    }

    #[test]
    fn a_cycle_without_a_frame_is_counted_and_the_job_goes_on() {
        let mut jobs: CyclicJobs<u8, Producer> = CyclicJobs::new();
        let id = jobs.add(1, Box::new(|due| (due % (20 * MS) == 0).then(|| frame(1, 0))), 10 * MS, 0, 0).unwrap();
        let clock = ManualClock::at(0);
        let seen = drive(&mut jobs, &clock, 50 * MS);
        assert_eq!(seen.iter().map(|s| s.1).collect::<Vec<_>>(), [0, 20 * MS, 40 * MS]);
        assert_eq!(jobs.stats(id).unwrap(), JobStats { sent: 3, idle: 3, skipped: 0 });
    }

    #[test]
    fn update_restarts_a_job_and_remove_ends_it_without_touching_its_successor() {
        let clock = ManualClock::at(0);
        let mut jobs: CyclicJobs<u8, Producer> = CyclicJobs::new();
        let first = jobs.add(1, Box::new(|_| Some(frame(1, 0))), 10 * MS, 0, 0).unwrap();
        jobs.update(first, 4 * MS, MS, 0).unwrap();
        assert_eq!(drive(&mut jobs, &clock, 9 * MS).iter().map(|s| s.1).collect::<Vec<_>>(), [MS, 5 * MS, 9 * MS]);
        drop(jobs.remove(first).unwrap());
        assert_eq!(jobs.next_due(), None);
        let second = jobs.add(2, Box::new(|_| Some(frame(2, 0))), 10 * MS, 0, clock.now()).unwrap();
        assert_eq!(jobs.remove(first).err(), Some(JobError::NoSuchJob(first)));
        assert!(jobs.producer_mut(first).is_err());
        assert_eq!(jobs.len(), 1);
        assert_eq!(drive(&mut jobs, &clock, 30 * MS).iter().map(|s| s.0).collect::<Vec<_>>(), [2, 2, 2]);
        assert!(jobs.stats(second).is_ok());
    }

    #[test]
    fn a_storm_of_updates_does_not_grow_the_queue() {
        let mut jobs: CyclicJobs<u8, Producer> = CyclicJobs::new();
        let id = jobs.add(1, Box::new(|_| Some(frame(1, 0))), 10 * MS, 1_000 * MS, 0).unwrap();
        for k in 0..10_000 {
            jobs.update(id, 10 * MS, 1_000 * MS, k).unwrap();
        }
        assert!(jobs.queue.len() <= 2 * jobs.len() + 17);
        assert_eq!(jobs.next_due(), Some(1_000 * MS + 9_999));
    }

    #[test]
    fn removing_the_jobs_of_a_gone_port_leaves_the_others_running() {
        let clock = ManualClock::at(0);
        let mut jobs: CyclicJobs<u8, Producer> = CyclicJobs::new();
        let gone = jobs.add(1, Box::new(|_| Some(frame(1, 0))), 10 * MS, 0, 0).unwrap();
        jobs.add(1, Box::new(|_| Some(frame(1, 1))), 7 * MS, 0, 0).unwrap();
        let kept = jobs.add(2, Box::new(|_| Some(frame(2, 0))), 10 * MS, 0, 0).unwrap();
        assert_eq!(jobs.remove_where(|port| port == 1), 2);
        assert_eq!((jobs.len(), jobs.port_of(kept)), (1, Ok(2)));
        assert_eq!(jobs.port_of(gone), Err(JobError::NoSuchJob(gone)));
        assert_eq!(drive(&mut jobs, &clock, 20 * MS).iter().map(|s| s.0).collect::<Vec<_>>(), [2, 2, 2]);
    }

    #[test]
    fn a_period_shorter_than_a_microsecond_is_refused_with_its_value() {
        let mut jobs: CyclicJobs<u8, Producer> = CyclicJobs::new();
        let err = jobs.add(1, Box::new(|_| None), 999, 0, 0).unwrap_err();
        assert_eq!(err, JobError::PeriodTooShort(999));
        assert!(err.to_string().contains("999 ns"));
    }
}
