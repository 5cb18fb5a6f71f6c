//! BCM mode's transmit side: `< add >`, `< update >` and `< delete >` as
//! cyclic jobs the bus runs on bus time (`fieldhub_bus::cyclic`), so a job
//! keeps its period in virtual time too and no thread of the session keeps
//! a timer.
//!
//! socketcand turns `< add SECS USECS ID DLC DATA… >` into the broadcast
//! manager's `TX_SETUP` with `SETTIMER | STARTTIMER`, `count` 0 and `ival2`
//! = SECS.USECS; `< update ID DLC DATA… >` into `TX_SETUP` without flags
//! (new content, the timer untouched); `< delete ID >` into `TX_DELETE`.
//! The BCM's `count` frames at `ival1` are not reachable through
//! socketcand, so a job here is one period, forever:
//!
//! - `add` with an interval: the frame goes on the bus at once (the BCM
//!   sends when `STARTTIMER` starts the timer) and then every interval,
//!   `start + k·interval` exactly in bus time. An `add` for an identifier
//!   that has a job replaces its frame and restarts it with the new
//!   interval, at once.
//! - `add` with interval 0: the frame goes once (the caller sends it as a
//!   `send`), and a job of that identifier ends — a zero interval stops the
//!   BCM's timer.
//! - `update`: the job's next cycle carries the new frame; its phase stays.
//! - `delete`: the job ends.
//!
//! Invariants:
//! - One job per CAN identifier, as the BCM keeps one `TX_SETUP` per id.
//! - The jobs are the bus's, sent from the session's port: a job's frame
//!   takes the session's transmit credit and has the fate of a frame the
//!   session sent (a drop is told to it as `< error … >`), and the bus ends
//!   the jobs with the port, so a session that ends leaves none behind.
//! - The bus thread never waits for the session: a cycle copies the frame
//!   under a lock the session holds only to replace it (no I/O, no wait
//!   inside), shared with no other thread.

use fieldhub_bus::cyclic::{FrameProducer, JobId};
use fieldhub_bus::inbox::{ClientId, CyclicRequest, JobReply};
use fieldhub_proto::Frame;
use std::sync::{Arc, Mutex};

use super::protocol::CanId;
use crate::session::Sessions;
use crate::transport::internal_port::{self, JobNotRun};

/// Why a job command was not carried out; the text is what the client is told.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxJobError {
    #[error("no cyclic job for {}; start one with 'add'", shown(*.0))]
    NoJob(CanId),
    #[error(transparent)]
    NotRun(#[from] JobNotRun),
}

/// Where a session's job requests go: its client and port on the bus.
pub struct JobLink<'a> {
    pub sessions: &'a Sessions,
    pub client: ClientId,
    pub port: u16,
}

impl JobLink<'_> {
    /// Send the request `make` builds and wait for the bus's answer.
    fn ask(&self, make: impl FnOnce(JobReply) -> CyclicRequest) -> Result<JobId, TxJobError> {
        Ok(internal_port::ask_cyclic(self.sessions, self.client, make)?)
    }
}

/// The frame a job sends, replaced by `update`.
type Shared = Arc<Mutex<Frame>>;

/// A job's producer on the bus thread: the job's current frame, every cycle.
struct Cycle(Shared);

impl FrameProducer for Cycle {
    fn produce(&mut self, _due_ns: u64) -> Option<Frame> {
        Some(self.0.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

struct TxJob {
    id: CanId,
    job: JobId,
    frame: Shared,
}

/// One session's transmit jobs.
#[derive(Default)]
pub struct TxJobs {
    jobs: Vec<TxJob>,
}

/// `interval_us` in nanoseconds.
fn period_ns(interval_us: u64) -> u64 {
    interval_us.saturating_mul(1_000)
}

/// The identifier `frame` carries.
pub fn id_of(frame: &Frame) -> CanId {
    CanId { id: frame.id(), extended: frame.is_extended() }
}

/// An identifier as socketcand spells it.
fn shown(id: CanId) -> String {
    if id.extended {
        format!("{:08X}", id.id)
    } else {
        format!("{:03X}", id.id)
    }
}

impl TxJobs {
    /// `< add >` with a non-zero interval: start `frame`'s job now, or
    /// restart its identifier's job with this frame and interval.
    pub fn add(&mut self, link: &JobLink<'_>, interval_us: u64, frame: Frame) -> Result<(), TxJobError> {
        let (id, period_ns) = (id_of(&frame), period_ns(interval_us));
        if let Some(running) = self.jobs.iter().find(|j| j.id == id) {
            *running.frame.lock().unwrap_or_else(|e| e.into_inner()) = frame;
            let job = running.job;
            return link.ask(|reply| CyclicRequest::Update { id: job, period_ns, start_delay_ns: 0, reply }).map(drop);
        }
        let shared: Shared = Arc::new(Mutex::new(frame));
        let producer: Box<dyn FrameProducer> = Box::new(Cycle(Arc::clone(&shared)));
        let port = link.port;
        let job =
            link.ask(|reply| CyclicRequest::Add { port, producer, period_ns, start_delay_ns: 0, origin: None, reply })?;
        self.jobs.push(TxJob { id, job, frame: shared });
        Ok(())
    }

    /// `< update >`: the job's next cycle carries `frame`.
    pub fn update(&mut self, frame: Frame) -> Result<(), TxJobError> {
        let id = id_of(&frame);
        let running = self.jobs.iter().find(|j| j.id == id).ok_or(TxJobError::NoJob(id))?;
        *running.frame.lock().unwrap_or_else(|e| e.into_inner()) = frame;
        Ok(())
    }

    /// `< delete >`, and `< add >` with interval 0: end `id`'s job. `Ok(false)`
    /// when it had none; the only error is the hub stopping.
    pub fn delete(&mut self, link: &JobLink<'_>, id: CanId) -> Result<bool, TxJobError> {
        let Some(index) = self.jobs.iter().position(|j| j.id == id) else { return Ok(false) };
        let job = self.jobs.swap_remove(index).job;
        match link.ask(|reply| CyclicRequest::Remove { id: job, reply }) {
            // A job the bus no longer has (its port closed) is gone too.
            Ok(_) | Err(TxJobError::NotRun(JobNotRun::Refused(_))) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// End every job: the session left BCM mode (socketcand closes its BCM
    /// socket then, which ends its jobs).
    pub fn clear(&mut self, link: &JobLink<'_>) -> Result<(), TxJobError> {
        while let Some(id) = self.jobs.last().map(|j| j.id) {
            self.delete(link, id)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_sends_the_frame_an_update_put_in_place() {
        let shared: Shared = Arc::new(Mutex::new(Frame::can(0x123, false, &[1]).unwrap()));
        let mut cycle = Cycle(Arc::clone(&shared));
        assert_eq!(cycle.produce(0).map(|f| f.data().to_vec()), Some(vec![1]));
        *shared.lock().unwrap() = Frame::can(0x123, false, &[2, 3]).unwrap();
        assert_eq!(cycle.produce(10).map(|f| f.data().to_vec()), Some(vec![2, 3]));
    }

    #[test]
    fn an_update_without_a_job_names_the_identifier_as_socketcand_spells_it() {
        let mut jobs = TxJobs::default();
        let err = jobs.update(Frame::can(0x123, true, &[]).unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "no cyclic job for 00000123; start one with 'add'");
        let err = jobs.update(Frame::can(0x7, false, &[]).unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "no cyclic job for 007; start one with 'add'");
    }
}
