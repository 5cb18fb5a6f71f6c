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
//! Extra clients (`extra_clients`) are [`Bystanders`] on the channel.

use serde::Serialize;

use crate::bystanders::{Bystanders, ExtraClients};
use crate::hub_process::HubProcess;
use crate::raw::{self, PeerMode};
use crate::remote::{self, CallTime, HubChannel};
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

impl LatencyRun {
    fn baseline_mode(&self) -> PeerMode {
        match (self.transport, self.busy_poll) {
            (Transport::Tcp, _) => PeerMode::Tcp,
            (Transport::Unix, _) => PeerMode::Unix,
            (Transport::Shm, false) => PeerMode::Futex,
            (Transport::Shm, true) => PeerMode::Spin,
        }
    }

    fn name(&self, size: FrameSize) -> String {
        let waiting = match (self.transport, self.busy_poll) {
            (Transport::Tcp | Transport::Unix, _) => "",
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
    if spec.busy_poll && spec.transport != Transport::Shm {
        return Err(BenchError::Invalid("--busy-poll applies to the shm transport".into()));
    }
    if spec.samples == 0 {
        return Err(BenchError::Invalid("at least one sample is needed".into()));
    }
    let hub = HubProcess::start(launcher, spec.busy_poll)?;
    let url = hub.url(spec.transport, spec.busy_poll);
    // With extra clients the same hub first carries the probe and the echo
    // alone: the figure the extra clients' cost is judged against.
    let mut alone = Vec::new();
    if spec.extra_clients > 0 {
        for &size in &spec.sizes {
            alone.push(Distribution::of(&mut measure_hub(&url, size, spec.samples, &mut *progress)?));
        }
    }
    // Bystanders wait adaptively even in a busy-poll run: 64 spinning
    // clients would only measure the scheduler.
    let extras = Bystanders::connect(&hub.url(Transport::Shm, false), CHANNEL, spec.extra_clients, spec.extra_idle)?;
    let (mut scenarios, seen) = extras.during(|| {
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
    })?;
    if spec.extra_clients > 0 {
        for scenario in &mut scenarios {
            scenario.extra_clients = Some(seen.clone());
        }
    }
    Ok(scenarios)
}

/// Round trips between a probe and an echo on the benchmark channel of the
/// hub at `url`, in ns.
pub(crate) fn measure_hub(
    url: &str,
    size: FrameSize,
    samples: usize,
    progress: Progress<'_>,
) -> Result<Vec<u64>, BenchError> {
    let at = HubChannel { url, token: None, channel: CHANNEL };
    Ok(CallTime::round_trips(&measure_calls_on(at, size, samples, progress)?))
}

/// Round trips between a probe and an echo on the channel `at`, each as the
/// time the probe spent inside `send` and `recv`.
pub fn measure_calls_on(
    at: HubChannel<'_>,
    size: FrameSize,
    samples: usize,
    progress: Progress<'_>,
) -> Result<Vec<CallTime>, BenchError> {
    measure_calls_between(at, at, size, samples, progress)
}

/// Round trips between a probe on the channel `probe_at` and an echo on the
/// channel `echo_at` (of another hub, across a federation, say).
pub fn measure_calls_between(
    probe_at: HubChannel<'_>,
    echo_at: HubChannel<'_>,
    size: FrameSize,
    samples: usize,
    progress: Progress<'_>,
) -> Result<Vec<CallTime>, BenchError> {
    let (echo, echo_port) =
        remote::join(echo_at.url, "bench-echo", echo_at.token, echo_at.channel, remote::REQUEST_ID)?;
    let (probe, probe_port) =
        remote::join(probe_at.url, "bench-probe", probe_at.token, probe_at.channel, remote::ANSWER_ID)?;
    std::thread::scope(|s| {
        let echoing = s.spawn(|| remote::answer(&echo, &echo_port, Some(WARM_UP + samples)));
        let measured = remote::probe_calls(&probe, &probe_port, size, samples, progress);
        // After a failed probe the echo thread gives up within PATIENCE.
        let echoed = echoing.join().map_err(|_| BenchError::Stalled("the echo client panicked".into()))?;
        let times = measured?;
        echoed?;
        Ok(times)
    })
}
