//! Virtual time: how fast a hub in virtual time runs a whole bus. N
//! synchronised participants on [`TIMED_CHANNEL`] (exact bit times at
//! 500 kbit/s) each send their share of the offered load every step of
//! their own period, for a given span of bus time; the figure is the
//! real-time factor — bus time per wall-clock time — against real time,
//! where the same traffic takes exactly its bus time, and against SIL Kit's
//! own synchronised time with the same participants and steps, measured in
//! the same run ([`silkit`]). Also the wall time each advance of bus time
//! costs, and a check that every frame arrived.
//!
//! With `ahead` (`--ahead N`) each participant declares N steps at once:
//! it sends their frames stamped for their steps (`Client::send_at`) and
//! steps N periods in one `STEP_AHEAD` (`Client::step_ahead`) with a wake
//! filter nothing matches, since its frames do not depend on what it
//! receives — one round trip per N steps instead of one per step. The
//! figure stays per step, as SIL Kit's participants step one period at a
//! time: it says what a participant that can declare its steps gains.
//!
//! The offered load may exceed the channel (`--load 125`): then frames
//! queue, arbitration decides and the lowest priorities wait, as on a real
//! bus, and the run still ends; the observer receives what the channel
//! carried, and the frames still queued at the end are counted as such, as
//! are frames the hub refused past what it holds of a participant
//! (`TX_DROPPED queue_full`, told before each grant).

pub mod silkit;

use std::path::PathBuf;
use std::time::Instant;

use fieldhub_client::{Client, ClientOptions, Frame, Port};
use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::wire::WakeFilter;
use serde::Serialize;

use crate::hub_process::{HubProcess, TIMED_CHANNEL};
use crate::{BenchError, Launcher, Transport};
use silkit::SilKitBaseline;

/// The timed channel's bit rate.
const BITRATE: u32 = 500_000;

/// What to run.
#[derive(Clone, Debug)]
pub struct VirtualTimeRun {
    pub transport: Transport,
    /// Synchronised participants, each a sender.
    pub participants: usize,
    /// Bus time to run.
    pub bus_seconds: f64,
    /// Each participant's period and step, in milliseconds of bus time.
    pub period_ms: u64,
    /// The channel's offered load in percent of its capacity, shared by the
    /// participants; `None`: one frame per participant per step.
    pub load_percent: Option<f64>,
    /// SIL Kit's folder for the baseline; `None`: no comparison.
    pub silkit: Option<PathBuf>,
    /// Steps each participant declares at once (`STEP_AHEAD`); `None`:
    /// one `STEP` per step.
    pub ahead: Option<u64>,
}

/// What it gave.
#[derive(Clone, Debug, Serialize)]
pub struct VirtualTimeResult {
    pub transport: &'static str,
    pub participants: usize,
    pub bus_seconds: f64,
    pub wall_seconds: f64,
    /// Bus time per wall-clock time (real time: 1.0).
    pub real_time_factor: f64,
    /// Steps of bus time (one per period: every participant steps together).
    pub advances: u64,
    /// Wall time per step of one period.
    pub wall_us_per_advance: f64,
    /// Steps each participant declared at once (`--ahead`), if it did.
    pub ahead: Option<u64>,
    /// The load offered to the channel, in percent of its capacity.
    pub offered_load_percent: f64,
    /// Frames the observer received, and how many were sent.
    pub frames_received: u64,
    pub frames_sent: u64,
    /// Frames the hub refused because a participant already had the most
    /// frames waiting that it holds of one (`queue_full`).
    pub frames_refused: u64,
    /// SIL Kit's synchronised time, same participants and steps, same run.
    pub silkit: Option<SilKitBaseline>,
    /// Wall time per step of SIL Kit over fieldhub's: at 1 ms steps the
    /// ratio of the real-time factors.
    pub times_silkit: Option<f64>,
}

const NS_PER_MS: u64 = 1_000_000;

/// The frame participant `i` sends as its `n`th of step `k`.
fn frame(i: usize, k: u64, n: u64) -> Result<Frame, BenchError> {
    let data = (k << 16 | n).to_le_bytes();
    Frame::can(0x100 + i as u32, false, &data).map_err(|e| BenchError::Invalid(e.to_string()))
}

/// Frames each participant sends per step for the offered load.
fn frames_per_step(spec: &VirtualTimeRun, period_ns: u64) -> Result<Vec<u64>, BenchError> {
    let Some(load) = spec.load_percent else { return Ok(vec![1; spec.participants]) };
    if !(load > 0.0 && load <= 10_000.0) {
        return Err(BenchError::Invalid(format!("--load {load}: give the offered load in percent, above 0")));
    }
    let frame_ns = FrameBits::of(&frame(0, 0, 0)?).duration_ns(BITRATE, BITRATE);
    let total = (load / 100.0 * period_ns as f64 / frame_ns as f64).round() as u64;
    let p = spec.participants as u64;
    Ok((0..p).map(|i| total / p + u64::from(i < total % p)).collect())
}

pub fn run(launcher: &Launcher, spec: &VirtualTimeRun) -> Result<VirtualTimeResult, BenchError> {
    // Identifiers 0x100 and up, one per participant, stay 11-bit.
    if !(1..=0x6FF).contains(&spec.participants)
        || spec.period_ms == 0
        || spec.bus_seconds <= 0.0
        || spec.ahead == Some(0)
    {
        return Err(BenchError::Invalid(
            "virtual time needs 1 to 1791 participants, a period, some bus time and --ahead of at least 1 step".into(),
        ));
    }
    let end_ns = (spec.bus_seconds * 1e9) as u64;
    let period_ns = spec.period_ms * NS_PER_MS;
    let steps = end_ns.div_ceil(period_ns);
    let shares = frames_per_step(spec, period_ns)?;
    let hub = HubProcess::start_in_virtual_time(launcher)?;
    let url = hub.url(spec.transport, false);
    let observer = Client::connect_with(&url, &ClientOptions { name: "bench-observer".into(), ..Default::default() })?;
    observer.open_port_with(TIMED_CHANNEL, &crate::fd_port())?;
    let participants = (0..spec.participants)
        .map(|i| {
            let name = format!("bench-ecu{i}");
            let options = ClientOptions { name, synchronized: true, ahead: spec.ahead.is_some(), ..Default::default() };
            let client = Client::connect_with(&url, &options)?;
            let port = client.open_port_with(TIMED_CHANNEL, &crate::fd_port())?;
            Ok((client, port))
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    let started = Instant::now();
    let frames_refused = std::thread::scope(|s| {
        let senders: Vec<_> = participants
            .iter()
            .zip(&shares)
            .enumerate()
            .map(|(i, ((client, port), &share))| {
                s.spawn(move || -> Result<u64, BenchError> {
                    let sender = Sender { client, port, i, share, period_ns, steps };
                    match spec.ahead {
                        None => sender.every_step()?,
                        Some(ahead) => sender.ahead(ahead)?,
                    }
                    // Refusals are told before the grant that follows them.
                    Ok(client.tx_dropped(port))
                })
            })
            .collect();
        let panicked = || Err(BenchError::Stalled("a participant panicked".into()));
        senders.into_iter().map(|t| t.join().unwrap_or_else(|_| panicked())).sum::<Result<u64, BenchError>>()
    })?;
    let wall = started.elapsed().as_secs_f64();
    // The observer's deliveries were queued before the last grant; its
    // PONG after them (it sent nothing, so nothing of its own holds it).
    observer.flush()?;
    let mut received = 0u64;
    while observer.try_recv()?.is_some() {
        received += 1;
    }
    drop(participants);
    let bus_seconds = (steps * period_ns) as f64 / 1e9;
    let frames_sent = steps * shares.iter().sum::<u64>();
    let frame_ns = FrameBits::of(&frame(0, 0, 0)?).duration_ns(BITRATE, BITRATE);
    let offered_load_percent = (frames_sent * frame_ns) as f64 / (steps * period_ns) as f64 * 100.0;
    let wall_us_per_advance = wall * 1e6 / steps as f64;
    let silkit = spec.silkit.as_deref().map(|dir| silkit::run(dir, spec.participants, steps)).transpose()?;
    let times_silkit = silkit.as_ref().map(|s| s.wall_us_per_step / wall_us_per_advance);
    Ok(VirtualTimeResult {
        transport: spec.transport.name(),
        participants: spec.participants,
        bus_seconds,
        wall_seconds: wall,
        real_time_factor: bus_seconds / wall,
        advances: steps,
        wall_us_per_advance,
        ahead: spec.ahead,
        offered_load_percent,
        frames_received: received,
        frames_sent,
        frames_refused,
        silkit,
        times_silkit,
    })
}

/// One participant's part of the run.
struct Sender<'a> {
    client: &'a Client,
    port: &'a Port,
    i: usize,
    share: u64,
    period_ns: u64,
    steps: u64,
}

/// A wake filter no frame matches: the extended, remote and error flags
/// are never all set.
const NEVER: WakeFilter = WakeFilter { can_id: u32::MAX, mask: u32::MAX };

impl Sender<'_> {
    /// One step at a time: its frames, then `STEP` to the next period.
    fn every_step(&self) -> Result<(), BenchError> {
        for k in 0..self.steps {
            for n in 0..self.share {
                self.client.send(self.port, &frame(self.i, k, n)?)?;
            }
            self.client.step((k + 1) * self.period_ns)?;
            while self.client.try_recv()?.is_some() {}
        }
        Ok(())
    }

    /// `ahead` steps at a time: their frames stamped for their steps, then
    /// one `STEP_AHEAD` that nothing wakes early.
    fn ahead(&self, ahead: u64) -> Result<(), BenchError> {
        let mut k = 0;
        while k < self.steps {
            let chunk = ahead.min(self.steps - k);
            for step in k..k + chunk {
                for n in 0..self.share {
                    self.client.send_at(self.port, &frame(self.i, step, n)?, step * self.period_ns)?;
                }
            }
            k += chunk;
            let granted = self.client.step_ahead(k * self.period_ns, self.period_ns, &[NEVER])?;
            if granted != k * self.period_ns {
                return Err(BenchError::Stalled(format!("granted at {granted} ns, not {} ns", k * self.period_ns)));
            }
            while self.client.try_recv()?.is_some() {}
        }
        Ok(())
    }
}
