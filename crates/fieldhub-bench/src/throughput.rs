//! One-way throughput through a hub process against a raw two-process
//! stream over the matching primitive, measured in the same run.
//!
//! One sender pushes frames as fast as the hub takes them for the given
//! time; every receiver's port holds the bus when its queue is full
//! (`block_on_overflow`), so nothing is dropped and every receiver must get
//! every frame. The rate is frames sent over the time until the last
//! receiver had the last frame. The matching baseline: shared memory ↔ an
//! SPSC ring stream between two processes, TCP ↔ a TCP stream of 64 frames
//! a write. Sender and receivers live in the benchmark process, the hub in
//! its own.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions};
use serde::Serialize;

use crate::hub_process::{HubExtras, HubProcess};
use crate::raw::{self, PeerMode};
use crate::stats::ratio;
use crate::{BenchError, FrameSize, Launcher, Progress, Transport, PATIENCE};

/// Quiet time after the sender stopped that ends a receiver's count.
const DRAINED: Duration = Duration::from_millis(300);

/// A receiver reads the clock every this many frames while the sender
/// sends, and at every frame after: a read a frame was a tenth of the
/// benchmark's receiving CPU, which the baseline's consumer (it only
/// counts) does not spend. The last frame's time is then at most this many
/// frames early, a few microseconds of a run of seconds.
const CLOCK_EVERY: u64 = 64;

/// What to measure.
#[derive(Clone, Debug)]
pub struct ThroughputRun {
    pub transport: Transport,
    pub seconds: f64,
    pub sizes: Vec<FrameSize>,
    /// Receiver counts to measure, each in its own scenario.
    pub receivers: Vec<usize>,
}

/// What went through the hub.
#[derive(Debug, Serialize)]
pub struct HubRate {
    pub frames_per_s: f64,
    pub payload_mbit_per_s: f64,
    pub frames: u64,
    pub seconds: f64,
    /// Frames the first receiver got in each second of the run.
    pub per_second: Vec<u64>,
}

/// What the raw stream moved.
#[derive(Debug, Serialize)]
pub struct BaselineRate {
    pub kind: &'static str,
    pub frames_per_s: f64,
    pub payload_mbit_per_s: f64,
    pub frames: u64,
    pub seconds: f64,
}

#[derive(Debug, Serialize)]
pub struct ThroughputScenario {
    pub scenario: String,
    pub transport: Transport,
    pub payload_bytes: usize,
    pub receivers: usize,
    pub hub: HubRate,
    pub baseline: BaselineRate,
    /// `hub.frames_per_s / baseline.frames_per_s`.
    pub ratio: f64,
}

fn mbit(frames: u64, seconds: f64, payload: usize) -> f64 {
    frames as f64 * payload as f64 * 8.0 / seconds.max(1e-9) / 1e6
}

/// Measure every size with every receiver count.
pub fn run(
    launcher: &Launcher,
    spec: &ThroughputRun,
    progress: Progress<'_>,
) -> Result<Vec<ThroughputScenario>, BenchError> {
    if spec.seconds <= 0.0 || spec.receivers.contains(&0) {
        return Err(BenchError::Invalid("seconds and receiver counts must be positive".into()));
    }
    let hub = match spec.sizes.contains(&FrameSize::Xl2048) {
        true => {
            let xl_channel = format!("[[channel]]\nname = \"{}\"\nprotocol = \"canxl\"\n", crate::XL_CHANNEL);
            HubProcess::start_with_extras(launcher, HubExtras { tables: xl_channel, ..Default::default() })?
        }
        false => HubProcess::start(launcher, false)?,
    };
    let url = hub.url(spec.transport, false);
    let mode = match spec.transport {
        Transport::Shm => PeerMode::RingStream,
        Transport::Unix => PeerMode::UnixStream,
        Transport::Tcp => PeerMode::TcpStream,
    };
    let mut scenarios = Vec::new();
    for &size in &spec.sizes {
        progress(&format!("{}, {}", mode.baseline(), size.label()));
        let (frames, elapsed) = raw::stream(launcher, mode, size, spec.seconds.min(2.0))?;
        for &receivers in &spec.receivers {
            let hub_rate = measure_hub(&url, size, receivers, spec.seconds, &mut *progress)?;
            let seconds = elapsed.as_secs_f64();
            let baseline = BaselineRate {
                kind: mode.baseline(),
                frames_per_s: frames as f64 / seconds.max(1e-9),
                payload_mbit_per_s: mbit(frames, seconds, size.payload()),
                frames,
                seconds,
            };
            scenarios.push(ThroughputScenario {
                scenario: format!("{}, {}, {receivers} receiver(s)", spec.transport.name(), size.label()),
                transport: spec.transport,
                payload_bytes: size.payload(),
                receivers,
                ratio: ratio(hub_rate.frames_per_s, baseline.frames_per_s),
                hub: hub_rate,
                baseline,
            });
        }
    }
    Ok(scenarios)
}

/// What one receiver counted.
struct Counted {
    frames: u64,
    /// When the clock was last read at a frame.
    last: Instant,
    /// Frames since then, not yet in `per_second`.
    unstamped: u64,
    per_second: Vec<u64>,
}

impl Counted {
    fn new(started: Instant, seconds: f64) -> Self {
        Self { frames: 0, last: started, unstamped: 0, per_second: vec![0; seconds.ceil() as usize + 1] }
    }

    /// One more frame; `clock`: read the clock at it.
    fn frame(&mut self, started: Instant, clock: bool) {
        self.frames += 1;
        self.unstamped += 1;
        if clock {
            self.last = Instant::now();
            let second = (self.last - started).as_secs() as usize;
            let frames = std::mem::take(&mut self.unstamped);
            if let Some(slot) = self.per_second.get_mut(second) {
                *slot += frames;
            }
        }
    }
}

fn measure_hub(
    url: &str,
    size: FrameSize,
    receivers: usize,
    seconds: f64,
    progress: Progress<'_>,
) -> Result<HubRate, BenchError> {
    measure_between(url, url, size, receivers, seconds, progress)
}

/// One sender on the benchmark channel of the hub at `sender_url`,
/// `receivers` lossless receivers on that of the hub at `receiver_url` (the
/// same hub, or the owner of a federated channel).
pub(crate) fn measure_between(
    sender_url: &str,
    receiver_url: &str,
    size: FrameSize,
    receivers: usize,
    seconds: f64,
    progress: Progress<'_>,
) -> Result<HubRate, BenchError> {
    let options = |name: &str| ClientOptions { name: name.into(), ..Default::default() };
    let sender = Client::connect_with(sender_url, &options("bench-sender"))?;
    let port = sender.open_port_with(size.channel(), &crate::fd_port())?;
    let lossless = crate::lossless_port();
    let receivers: Vec<Client> = (0..receivers)
        .map(|i| {
            let client = Client::connect_with(receiver_url, &options(&format!("bench-rx{i}")))?;
            client.open_port_with(size.channel(), &lossless)?;
            Ok(client)
        })
        .collect::<Result<_, BenchError>>()?;
    let frame = size.frame(0x123, 0);
    let run_for = Duration::from_secs_f64(seconds);
    let sender_done = AtomicBool::new(false);
    let started = Instant::now();
    let (sent, mut counted) = std::thread::scope(|s| {
        let readers: Vec<_> = receivers
            .iter()
            .map(|r| {
                let sender_done = &sender_done;
                s.spawn(move || {
                    let mut counted = Counted::new(started, seconds);
                    loop {
                        match r.recv(Some(DRAINED)) {
                            Ok(Some(_)) => {
                                let clock =
                                    (counted.frames + 1) % CLOCK_EVERY == 0 || sender_done.load(Ordering::Relaxed);
                                counted.frame(started, clock);
                            }
                            Ok(None) if sender_done.load(Ordering::Acquire) => break,
                            Ok(None) if started.elapsed() > run_for + PATIENCE => break,
                            Ok(None) => {}
                            Err(_) => break,
                        }
                    }
                    counted
                })
            })
            .collect();
        let mut sent = 0u64;
        let mut reported = 0;
        let result = (|| {
            while started.elapsed() < run_for {
                for _ in 0..256 {
                    sender.send(&port, &frame)?;
                    sent += 1;
                }
                let second = started.elapsed().as_secs();
                if second != reported {
                    reported = second;
                    progress(&format!("hub, {}: {second}/{} s", size.label(), seconds.ceil()));
                }
            }
            sender.flush()?;
            Ok::<_, BenchError>(())
        })();
        sender_done.store(true, Ordering::Release);
        let counted: Vec<Counted> = readers.into_iter().filter_map(|h| h.join().ok()).collect();
        result.map(|()| (sent, counted))
    })?;
    let received = counted.iter().map(|c| c.frames).min().unwrap_or(0);
    if counted.len() < receivers.len() || received < sent {
        return Err(BenchError::Stalled(format!("{sent} frames sent but a receiver got only {received}")));
    }
    let last = counted.iter().map(|c| c.last).max().unwrap_or(started);
    let elapsed = (last - started).as_secs_f64();
    let mut per_second = counted.swap_remove(0).per_second;
    per_second.truncate(elapsed.ceil() as usize);
    Ok(HubRate {
        frames_per_s: sent as f64 / elapsed.max(1e-9),
        payload_mbit_per_s: mbit(sent, elapsed, size.payload()),
        frames: sent,
        seconds: elapsed,
        per_second,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_counts_every_frame_and_puts_each_in_its_second_at_the_next_clock_read() {
        let started = Instant::now();
        let mut counted = Counted::new(started, 2.0);
        for n in 1..=200u64 {
            counted.frame(started, n % CLOCK_EVERY == 0);
        }
        assert_eq!(counted.frames, 200);
        assert_eq!(counted.per_second.iter().sum::<u64>(), 3 * CLOCK_EVERY, "three clock reads so far");
        let before = counted.last;
        // Once the sender is done every frame reads the clock: the last
        // frame's time is its own, and every frame is in a second.
        counted.frame(started, true);
        assert!(counted.last > before);
        assert_eq!(counted.per_second.iter().sum::<u64>(), 201);
    }
}
