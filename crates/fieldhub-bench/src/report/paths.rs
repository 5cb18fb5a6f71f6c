//! Section 8: every path of issue 35's table against its peer or raw
//! baseline of the same run, its target, and — where the target is not met —
//! the floor measured in the same run from the primitive the path is made
//! of ([`crate::floors`]), so a gap reads as "this machine cannot" or "the
//! hub does not yet".
//!
//! Each path reuses the benchmark that measures it: [`crate::federation`],
//! [`crate::silkit_peers`], [`crate::scaling`], [`crate::cpu`],
//! [`crate::throughput`]. A path whose baseline cannot run here (SIL Kit
//! not set up, no root for the network namespaces) is a row that says what
//! it needs, never a figure without its baseline. `path_rows` turns the
//! figures into rows.

use std::path::PathBuf;

use serde::Serialize;

use super::progress::Stages;
use super::{Plan, ReportError};
use crate::bare_fan_out;
use crate::cpu::{self, CpuPhase};
use crate::federation::{self, FederationFigures, FederationRun};
use crate::floors;
use crate::hub_process::HubProcess;
use crate::latency::measure_hub;
use crate::scaling::{self, ScalingRun};
use crate::silkit_peers::{self, SilKitCpu, SilKitDir, SilKitRtt};
use crate::sleeps::Sleeps;
use crate::stats::Distribution;
use crate::throughput::{self, ThroughputRun, ThroughputScenario};
use crate::{BenchError, FrameSize, Launcher, Transport};

pub use super::path_rows::section;

/// A measurement, or why it could not be taken here.
pub type Outcome<T> = Result<T, String>;

/// Everything the section measured.
#[derive(Debug, Serialize)]
pub struct PathFigures {
    pub federation: Outcome<FederationFigures>,
    pub simulator: Outcome<SimulatorFigures>,
    pub fan_out: FanOutFigures,
    pub cpu: CpuFigures,
    pub throughput: Vec<ThroughputScenario>,
    /// The primitives, alone.
    pub floors: Floors,
}

/// SIL Kit's participants through a hub as their network simulator.
#[derive(Debug, Serialize)]
pub struct SimulatorFigures {
    pub via_hub: SilKitRtt,
    /// Frames the hub's channel carried meanwhile.
    pub hub_frames: u64,
    pub plain_silkit: SilKitRtt,
    /// The hub's own shm round trip, same run.
    pub hub_shm: Distribution,
}

/// Many clients on one channel.
#[derive(Debug, Serialize)]
pub struct FanOutFigures {
    pub clients: usize,
    pub hub: Distribution,
    /// The sleeps the hub and the clients took over those round trips.
    pub sleeps: Sleeps,
    /// The same round trips with nothing in them but their wake-ups
    /// ([`bare_fan_out`]), measured right after the hub's.
    pub bare: Distribution,
    pub silkit: Outcome<SilKitRtt>,
}

/// CPU at a loaded 500 kbit/s bus with one sender and two receivers.
#[derive(Debug, Serialize)]
pub struct CpuFigures {
    pub hub: CpuPhase,
    /// The same load on a bus of nothing but wake-ups
    /// ([`bare_fan_out::paced`]), measured right after the hub's.
    pub bare: bare_fan_out::BarePaced,
    pub silkit: Outcome<SilKitCpu>,
}

/// The primitives' costs on this machine, same run.
#[derive(Debug, Serialize)]
pub struct Floors {
    /// Sleepers woken per fan-out: the readers of a frame but its sender.
    pub sleepers: usize,
    /// Cores the processes share.
    pub cores: usize,
    pub wake_fan_out: Distribution,
    /// The CPU of one wake-up, and the sleeps its peer took a round.
    pub wake: floors::WakeCost,
    pub thread_hand_off: Distribution,
}

/// Sample counts of the section.
struct PathPlan {
    round_trips: usize,
    fan_out_clients: usize,
    fan_out_samples: usize,
    seconds: f64,
    cpu_seconds: f64,
    floor_rounds: usize,
}

impl PathPlan {
    fn of(plan: &Plan) -> Self {
        let quick = plan.round_trip_samples < 10_000;
        Self {
            round_trips: if quick { 300 } else { 5_000 },
            // The 64; a quick run checks the section with 8.
            fan_out_clients: if quick { 8 } else { 64 },
            fan_out_samples: if quick { 300 } else { 2_000 },
            seconds: plan.throughput_seconds.min(3.0),
            cpu_seconds: plan.cpu_seconds,
            floor_rounds: if quick { 200 } else { 2_000 },
        }
    }
}

/// Where SIL Kit is: `SILKIT_DIR` (as `bench/run.sh` reads it), else the
/// peers' `setup.sh` default.
fn silkit_dir() -> Outcome<SilKitDir> {
    let dir = std::env::var_os("SILKIT_DIR").map_or_else(|| PathBuf::from("/tmp/silkit"), PathBuf::from);
    SilKitDir::find(&dir)
}

fn outcome<T>(result: Result<T, BenchError>) -> Outcome<T> {
    result.map_err(|e| format!("failed: {e}"))
}

pub fn measure(launcher: &Launcher, plan: &Plan, stages: &mut Stages<'_>) -> Result<PathFigures, ReportError> {
    let p = PathPlan::of(plan);
    let silkit = silkit_dir();
    let mut report = |line: &str| stages.report(line);

    let federation = match federation::needs() {
        Some(missing) => Err(missing),
        None => outcome(federation::run(
            launcher,
            &FederationRun { samples: p.round_trips, seconds: p.seconds },
            &mut report,
        )),
    };

    let simulator = silkit.clone().and_then(|dir| {
        report("SIL Kit: two participants, then through a hub as network simulator");
        outcome((|| {
            let plain_silkit = silkit_peers::round_trip(&dir, 2, p.round_trips)?;
            let (via_hub, hub_frames) = silkit_peers::round_trip_via_hub(&dir, launcher, p.round_trips)?;
            let hub = HubProcess::start(launcher, false)?;
            let mut shm = measure_hub(&hub.url(Transport::Shm, false), FrameSize::Can8, p.round_trips, &mut report)?;
            Ok(SimulatorFigures { via_hub, hub_frames, plain_silkit, hub_shm: Distribution::of(&mut shm) })
        })())
    });

    let scaling = ScalingRun {
        clients: vec![p.fan_out_clients],
        channels: Vec::new(),
        samples: p.fan_out_samples,
        size: FrameSize::Can8,
        background_rate: 0.0,
    };
    let point = scaling::run(launcher, &scaling, &mut report)?
        .pop()
        .ok_or_else(|| BenchError::Stalled("the scaling benchmark measured no point".into()))?;
    report(&format!("floor: {} client threads on a bus of nothing but wake-ups", p.fan_out_clients));
    let bare = bare_fan_out::measure(p.fan_out_clients, p.fan_out_samples)?.round_trip;
    let fan_out = FanOutFigures {
        clients: p.fan_out_clients,
        hub: point.hub,
        sleeps: point.sleeps,
        bare,
        silkit: silkit.clone().and_then(|dir| {
            report(&format!("SIL Kit: {} participants", p.fan_out_clients));
            outcome(silkit_peers::round_trip(&dir, p.fan_out_clients, p.fan_out_samples))
        }),
    };

    report("CPU at 500 kbit/s, 3 clients");
    let hub_cpu = cpu::loaded(launcher, Transport::Shm, 3, p.cpu_seconds)?;
    report("floor: the same load on a bus of nothing but wake-ups");
    let cpu = CpuFigures {
        hub: hub_cpu,
        bare: bare_fan_out::paced(2, cpu::frame_rate(), p.cpu_seconds)?,
        silkit: silkit.and_then(|dir| {
            report("SIL Kit: CPU at 500 kbit/s, registry and 3 participants");
            outcome(silkit_peers::cpu(&dir, 2, cpu::frame_rate(), p.cpu_seconds))
        }),
    };

    let throughput = throughput::run(
        launcher,
        &ThroughputRun {
            transport: Transport::Shm,
            seconds: p.seconds,
            sizes: vec![FrameSize::Can8],
            receivers: vec![1, 3],
        },
        &mut report,
    )?;

    // Every reader but the frame's sender sleeps until the hub rings it.
    let sleepers = p.fan_out_clients - 1;
    let floors = Floors {
        sleepers,
        cores: std::thread::available_parallelism().map_or(1, usize::from),
        wake_fan_out: floors::wake_fan_out(launcher, sleepers, p.floor_rounds, &mut report)?,
        wake: floors::cpu_per_wake(launcher, p.floor_rounds)?,
        thread_hand_off: floors::thread_hand_off(p.floor_rounds)?,
    };
    Ok(PathFigures { federation, simulator, fan_out, cpu, throughput, floors })
}
