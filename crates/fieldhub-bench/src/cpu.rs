//! CPU cost of the hub and its clients, idle and at a fixed frame rate.
//!
//! A hub process serves one, then three clients (in the benchmark process).
//! Each phase first lets things settle, then reads the CPU time of both
//! processes before and after a window of wall time:
//!
//! - idle: clients connected, a port open each, receivers waiting in `recv`;
//! - loaded: the first client sends 8-byte frames at the rate of a
//!   500 kbit/s CAN bus at full load (computed from the frame's exact bit
//!   length, [`fieldhub_proto::bits`]), the others receive them.
//!
//! CPU time is `utime + stime` of `/proc/PID/stat` (clock ticks, usually
//! 10 ms: over a 5 s window that is 0.2 % of a core). Where the kernel has
//! `/proc/PID/task/TID/sched`, the sum of its `se.sum_exec_runtime` over the
//! threads gives the same figure to the microsecond, reported beside it.
//! A phase also counts the sleeps both processes' threads took in the
//! window ([`crate::sleeps`]), so a frame's CPU can be set against the
//! wake-ups it really cost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions};
use fieldhub_proto::bits::FrameBits;
use serde::Serialize;

use crate::hub_process::HubProcess;
use crate::sleeps::{SleepWindow, Sleeps};
use crate::{BenchError, FrameSize, Launcher, Progress, Transport, CHANNEL};

/// The bus rate the loaded phases emulate.
pub const BUS_BITS_PER_S: u64 = 500_000;
/// Time to let connections and threads settle before a window starts.
const SETTLE: Duration = Duration::from_millis(500);
/// How often a waiting receiver checks whether the phase is over.
const RECV_SLICE: Duration = Duration::from_millis(500);

/// What to measure.
#[derive(Clone, Debug)]
pub struct CpuRun {
    pub transport: Transport,
    /// Length of each measuring window.
    pub seconds: f64,
}

/// CPU time of one process over a window.
#[derive(Clone, Debug, Serialize)]
pub struct CpuShare {
    /// Percent of one core, from `/proc/PID/stat` utime + stime.
    pub cpu_percent: f64,
    pub cpu_s: f64,
    /// The same from the threads' `se.sum_exec_runtime`, when the kernel
    /// exposes it (microsecond resolution).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_percent_precise: Option<f64>,
}

/// One phase.
#[derive(Debug, Serialize)]
pub struct CpuPhase {
    pub scenario: String,
    pub transport: Transport,
    /// `idle` or `500kbit/s`.
    pub load: &'static str,
    pub clients: usize,
    /// Frames per second asked for, and reached.
    pub target_frames_per_s: f64,
    pub frames_per_s: f64,
    pub seconds: f64,
    pub hub: CpuShare,
    /// The benchmark process, where the clients live.
    pub client_process: CpuShare,
    /// The sleeps of the hub's and the clients' threads in the window, over
    /// the frames sent in it (`events`).
    pub sleeps: Sleeps,
}

/// The kernel's clock ticks per second, the unit of `/proc/PID/stat` times.
pub fn clock_ticks_per_second() -> u64 {
    rustix::param::clock_ticks_per_second()
}

/// 8-byte frames per second that keep a `BUS_BITS_PER_S` bus fully loaded.
pub fn frame_rate() -> f64 {
    let bits = FrameBits::of(&FrameSize::Can8.frame(0x100, 0)).total;
    BUS_BITS_PER_S as f64 / f64::from(bits)
}

/// Idle and loaded phases with one and with three clients.
pub fn run(launcher: &Launcher, spec: &CpuRun, progress: Progress<'_>) -> Result<Vec<CpuPhase>, BenchError> {
    if spec.seconds <= 0.0 {
        return Err(BenchError::Invalid("seconds must be positive".into()));
    }
    let hub = HubProcess::start(launcher, false)?;
    let url = hub.url(spec.transport, false);
    let mut phases = Vec::new();
    for clients in [1, 3] {
        for rate in [0.0, frame_rate()] {
            let load = if rate > 0.0 { "500kbit/s" } else { "idle" };
            progress(&format!("{load}, {clients} client(s), {} s", spec.seconds));
            phases.push(measure(&hub, &url, spec, clients, rate, load)?);
        }
    }
    Ok(phases)
}

/// One loaded phase alone: `clients` clients (one sending at the rate of a
/// fully loaded 500 kbit/s bus, the others receiving) on a fresh hub.
pub fn loaded(launcher: &Launcher, transport: Transport, clients: usize, seconds: f64) -> Result<CpuPhase, BenchError> {
    if seconds <= 0.0 || clients == 0 {
        return Err(BenchError::Invalid("seconds and clients must be positive".into()));
    }
    let hub = HubProcess::start(launcher, false)?;
    let url = hub.url(transport, false);
    measure(&hub, &url, &CpuRun { transport, seconds }, clients, frame_rate(), "500kbit/s")
}

fn measure(
    hub: &HubProcess,
    url: &str,
    spec: &CpuRun,
    clients: usize,
    rate: f64,
    load: &'static str,
) -> Result<CpuPhase, BenchError> {
    let connected = (0..clients)
        .map(|i| {
            let client =
                Client::connect_with(url, &ClientOptions { name: format!("bench-cpu{i}"), ..Default::default() })?;
            let port = client.open_port_with(CHANNEL, &crate::fd_port())?;
            Ok((client, port))
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    let stop = AtomicBool::new(false);
    let window = Duration::from_secs_f64(spec.seconds);
    let own_pid = std::process::id();
    std::thread::scope(|s| {
        for (client, _) in &connected[1..] {
            let stop = &stop;
            s.spawn(move || while !stop.load(Ordering::Relaxed) && client.recv(Some(RECV_SLICE)).is_ok() {});
        }
        let result = (|| {
            let (sender, port) = &connected[0];
            let frame = FrameSize::Can8.frame(0x100, 0);
            let interval = (rate > 0.0).then(|| Duration::from_secs_f64(1.0 / rate));
            let mut sent = 0u64;
            let run = |until: Instant, sent: &mut u64| -> Result<(), BenchError> {
                let Some(interval) = interval else {
                    std::thread::sleep(until.saturating_duration_since(Instant::now()));
                    return Ok(());
                };
                // An absolute schedule: a late frame is sent at once, so the
                // rate holds on average whatever the sleep granularity.
                let start = Instant::now();
                let mut n = 0u32;
                loop {
                    let next = start + interval * n;
                    if next >= until {
                        return Ok(());
                    }
                    if let Some(wait) = next.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    sender.send(port, &frame)?;
                    n += 1;
                    *sent += 1;
                }
            };
            run(Instant::now() + SETTLE, &mut sent)?;
            let before = (CpuSample::of(hub.pid())?, CpuSample::of(own_pid)?);
            let sleeps = SleepWindow::open(&[("hub", hub.pid())])?;
            let started = Instant::now();
            sent = 0;
            run(started + window, &mut sent)?;
            let seconds = started.elapsed().as_secs_f64();
            let sleeps = sleeps.close(sent)?;
            let after = (CpuSample::of(hub.pid())?, CpuSample::of(own_pid)?);
            Ok(CpuPhase {
                scenario: format!("{}, {load}, {clients} client(s)", spec.transport.name()),
                transport: spec.transport,
                load,
                clients,
                target_frames_per_s: rate,
                frames_per_s: sent as f64 / seconds,
                seconds,
                hub: after.0.share_since(&before.0, seconds),
                client_process: after.1.share_since(&before.1, seconds),
                sleeps,
            })
        })();
        stop.store(true, Ordering::Relaxed);
        result
    })
}

/// The calling thread's CPU time so far, ns (`CLOCK_THREAD_CPUTIME_ID`).
pub(crate) fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// CPU time a process has used so far.
struct CpuSample {
    ticks: u64,
    precise_ms: Option<f64>,
}

impl CpuSample {
    fn of(pid: u32) -> Result<Self, BenchError> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the parenthesised command name: state is field 3, so
        // utime (14) and stime (15) are the 12th and 13th after it.
        let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        let (Some(utime), Some(stime)) = (field(11), field(12)) else {
            return Err(BenchError::Invalid(format!("cannot read CPU times from /proc/{pid}/stat")));
        };
        Ok(Self { ticks: utime + stime, precise_ms: sum_exec_runtime_ms(pid) })
    }

    fn share_since(&self, before: &CpuSample, seconds: f64) -> CpuShare {
        let cpu_s = self.ticks.saturating_sub(before.ticks) as f64 / clock_ticks_per_second() as f64;
        let precise = match (self.precise_ms, before.precise_ms) {
            (Some(after), Some(before)) => Some((after - before).max(0.0) / 1e3 / seconds * 100.0),
            _ => None,
        };
        CpuShare { cpu_percent: cpu_s / seconds * 100.0, cpu_s, cpu_percent_precise: precise }
    }
}

/// Sum of the threads' `se.sum_exec_runtime` (ms), where the kernel has it.
/// Threads that ended are missing from the sum, so it is only compared
/// across a window in which no thread ends.
pub(crate) fn sum_exec_runtime_ms(pid: u32) -> Option<f64> {
    let mut total = 0.0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let sched = std::fs::read_to_string(task.ok()?.path().join("sched")).ok()?;
        let line = sched.lines().find(|l| l.starts_with("se.sum_exec_runtime"))?;
        total += line.rsplit(':').next()?.trim().parse::<f64>().ok()?;
    }
    Some(total)
}
