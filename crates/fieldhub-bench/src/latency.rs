//! Round-trip latency through a hub process against a raw two-process
//! ping-pong over the matching primitive, measured in the same run.
//!
//! A probe client sends a request frame; an echo client on the same channel
//! answers with a frame of the same size; the probe takes the answer: four
//! one-way hops through the hub. Both clients live in the benchmark process
//! (each on its own thread), the hub in its own. The matching baseline:
//! shared memory with adaptive waits ↔ futex ping-pong, shared memory with
//! busy-poll ↔ spin ping-pong, TCP ↔ TCP_NODELAY ping-pong.
//!
//! Extra clients (`extra_clients`) connect over shared memory and open a port
//! on the channel, so the hub fans every frame out to them as well. Each
//! reads everything the channel carries — during the run, or (idle) only
//! after it — and checks that sequence numbers only grow.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fieldhub_client::{Client, ClientOptions};
use serde::Serialize;

use crate::hub_process::HubProcess;
use crate::raw::{self, PeerMode};
use crate::remote;
use crate::stats::{Distribution, Ratios};
use crate::{BenchError, FrameSize, Launcher, Progress, Transport, CHANNEL, WARM_UP};

/// What to measure.
#[derive(Clone, Debug)]
pub struct LatencyRun {
    pub transport: Transport,
    /// Hub and clients spin instead of sleeping (shared memory only).
    pub busy_poll: bool,
    pub samples: usize,
    pub sizes: Vec<FrameSize>,
    /// Extra shared-memory clients with a port on the channel.
    pub extra_clients: usize,
    /// The extra clients' applications only read what queued up once the
    /// measurement is over (the frames wait in their shared-memory rings:
    /// no client thread runs for them; beyond a ring's 5,888 frames the hub
    /// drops and counts); otherwise each has a thread waiting in `recv`.
    pub extra_idle: bool,
}

/// One scenario's figures, with the baseline of the same run.
#[derive(Debug, Serialize)]
pub struct LatencyScenario {
    pub scenario: String,
    pub transport: Transport,
    pub busy_poll: bool,
    pub payload_bytes: usize,
    /// Clients on the channel: probe, echo and the extra ones.
    pub clients: usize,
    pub baseline_kind: &'static str,
    pub hub: Distribution,
    pub baseline: Distribution,
    pub ratio: Ratios,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_clients: Option<ExtraClients>,
    /// With extra clients: the same hub with only the probe and the echo,
    /// measured in the same run just before the extra clients connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub two_clients: Option<TwoClients>,
    /// Round trips in ns, sorted (for plots).
    #[serde(skip)]
    pub hub_samples: Vec<u64>,
    #[serde(skip)]
    pub baseline_samples: Vec<u64>,
}

/// The round trip without the extra clients, and `hub / two_clients.hub`.
#[derive(Debug, Serialize)]
pub struct TwoClients {
    pub hub: Distribution,
    pub ratio: Ratios,
}

/// What the extra clients saw over the whole run.
#[derive(Clone, Debug, Serialize)]
pub struct ExtraClients {
    pub count: usize,
    /// They read only after the measurement.
    pub idle: bool,
    /// Frames the client that received the fewest received.
    pub min_frames_received: u64,
    /// Frames the hub dropped for them (full receive queues), summed.
    pub frames_dropped: u64,
    /// Every extra client saw sequence numbers only grow.
    pub order_kept: bool,
}

impl LatencyRun {
    fn baseline_mode(&self) -> PeerMode {
        match (self.transport, self.busy_poll) {
            (Transport::Tcp, _) => PeerMode::Tcp,
            (Transport::Shm, false) => PeerMode::Futex,
            (Transport::Shm, true) => PeerMode::Spin,
        }
    }

    fn name(&self, size: FrameSize) -> String {
        let waiting = match (self.transport, self.busy_poll) {
            (Transport::Tcp, _) => "",
            (Transport::Shm, false) => " adaptive",
            (Transport::Shm, true) => " busy-poll",
        };
        let extra = match (self.extra_clients, self.extra_idle) {
            (0, _) => String::new(),
            (k, false) => format!(", {} clients (extra ones reading)", 2 + k),
            (k, true) => format!(", {} clients (extra ones idle)", 2 + k),
        };
        format!("{}{waiting}, {}{extra}", self.transport.name(), size.label())
    }
}

/// Measure every size in `spec`, each against its baseline.
pub fn run(launcher: &Launcher, spec: &LatencyRun, progress: Progress<'_>) -> Result<Vec<LatencyScenario>, BenchError> {
    if spec.busy_poll && spec.transport == Transport::Tcp {
        return Err(BenchError::Invalid("--busy-poll applies to the shm transport".into()));
    }
    if spec.samples == 0 {
        return Err(BenchError::Invalid("at least one sample is needed".into()));
    }
    let hub = HubProcess::start(launcher, spec.busy_poll)?;
    let url = hub.url(spec.transport, spec.busy_poll);
    // Bystanders wait adaptively even in a busy-poll run: 64 spinning
    // clients would only measure the scheduler.
    let extra_url = hub.url(Transport::Shm, false);
    // With extra clients the same hub first carries the probe and the echo
    // alone: the figure the extra clients' cost is judged against.
    let mut alone = Vec::new();
    if spec.extra_clients > 0 {
        for &size in &spec.sizes {
            alone.push(Distribution::of(&mut measure_hub(&url, size, spec.samples, &mut *progress)?));
        }
    }
    let extras = (0..spec.extra_clients)
        .map(|i| {
            let client = connect(&extra_url, &format!("bench-extra{i}"))?;
            client.open_port(CHANNEL)?;
            Ok(client)
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let listeners: Vec<_> =
            extras.iter().map(|client| s.spawn(|| listen(client, &stop, spec.extra_idle))).collect();
        let measured = (|| -> Result<Vec<LatencyScenario>, BenchError> {
            let mut scenarios = Vec::new();
            for (i, &size) in spec.sizes.iter().enumerate() {
                let mut hub_samples = measure_hub(&url, size, spec.samples, &mut *progress)?;
                let mode = spec.baseline_mode();
                let mut baseline_samples = raw::ping_pong(launcher, mode, size, spec.samples, &mut *progress)?;
                let hub = Distribution::of(&mut hub_samples);
                let baseline = Distribution::of(&mut baseline_samples);
                let two_clients =
                    alone.get(i).map(|alone| TwoClients { ratio: Ratios::of(&hub, alone), hub: alone.clone() });
                scenarios.push(LatencyScenario {
                    scenario: spec.name(size),
                    transport: spec.transport,
                    busy_poll: spec.busy_poll,
                    payload_bytes: size.payload(),
                    clients: 2 + spec.extra_clients,
                    baseline_kind: mode.baseline(),
                    ratio: Ratios::of(&hub, &baseline),
                    hub,
                    baseline,
                    extra_clients: None,
                    two_clients,
                    hub_samples,
                    baseline_samples,
                });
            }
            Ok(scenarios)
        })();
        stop.store(true, Ordering::Relaxed);
        let seen: Vec<(u64, bool)> = listeners.into_iter().map(|l| l.join().unwrap_or((0, false))).collect();
        let mut scenarios = measured?;
        if !extras.is_empty() {
            let summary = ExtraClients {
                count: extras.len(),
                idle: spec.extra_idle,
                min_frames_received: seen.iter().map(|&(n, _)| n).min().unwrap_or(0),
                frames_dropped: extras.iter().map(|c| c.ports().iter().map(|p| c.rx_dropped(p)).sum::<u64>()).sum(),
                order_kept: seen.iter().all(|&(_, ordered)| ordered),
            };
            for scenario in &mut scenarios {
                scenario.extra_clients = Some(summary.clone());
            }
        }
        Ok(scenarios)
    })
}

fn connect(url: &str, name: &str) -> Result<Client, BenchError> {
    Ok(Client::connect_with(url, &ClientOptions { name: name.into(), ..Default::default() })?)
}

/// An extra client's application: frames received, and whether their
/// sequence numbers only grew. An idle one reads only after `stop`.
fn listen(client: &Client, stop: &AtomicBool, idle: bool) -> (u64, bool) {
    let (mut frames, mut last_seq, mut ordered) = (0u64, 0u64, true);
    let mut take = |received: fieldhub_client::Received| {
        frames += 1;
        ordered &= received.meta.seq > last_seq;
        last_seq = received.meta.seq;
    };
    while !stop.load(Ordering::Relaxed) {
        if idle {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        match client.recv(Some(Duration::from_millis(20))) {
            Ok(Some(received)) => take(received),
            Ok(None) => {}
            Err(_) => return (frames, false),
        }
    }
    loop {
        match client.try_recv() {
            Ok(Some(received)) => take(received),
            Ok(None) => break,
            Err(_) => return (frames, false),
        }
    }
    (frames, ordered)
}

/// Round trips through the hub at `url`, in ns.
fn measure_hub(url: &str, size: FrameSize, samples: usize, progress: Progress<'_>) -> Result<Vec<u64>, BenchError> {
    let (echo, echo_port) = remote::join(url, "bench-echo", None, CHANNEL, remote::REQUEST_ID)?;
    let (probe, probe_port) = remote::join(url, "bench-probe", None, CHANNEL, remote::ANSWER_ID)?;
    std::thread::scope(|s| {
        let echoing = s.spawn(|| remote::answer(&echo, &echo_port, Some(WARM_UP + samples)));
        let measured = remote::probe(&probe, &probe_port, size, samples, progress);
        // After a failed probe the echo thread gives up within PATIENCE.
        let echoed = echoing.join().map_err(|_| BenchError::Stalled("the echo client panicked".into()))?;
        let times = measured?;
        echoed?;
        Ok(times)
    })
}
