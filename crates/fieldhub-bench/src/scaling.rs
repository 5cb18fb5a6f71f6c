//! How the round trip grows with the number of clients on a channel and
//! with the number of busy channels on a hub: two series of points, each
//! point on a hub process of its own, each row's ratio taken to the first
//! row of its series (2 clients on 1 channel by default), measured in the
//! same run.
//!
//! - clients: a probe and an echo (as in [`latency`]) plus `N - 2`
//!   [`Bystanders`] on the one channel, each reading every frame; the hub
//!   fans every request and answer out to all `N` clients.
//! - channels: the hub carries `K` channels; the probe and the echo on the
//!   first, [`Background`] traffic at a fixed rate on each of the other
//!   `K - 1` (two more clients, whatever `K`).
//!
//! Only shared memory with adaptive waits, the hub's local default. There is
//! no raw baseline per point: the reference row is the baseline, and
//! `bench latency` relates that one to the raw primitives. Each point also
//! counts the sleeps the hub and the clients took over its round trips
//! ([`crate::sleeps`]): how many wake-ups a round trip really cost.
//!
//! [`latency`]: crate::latency

use serde::Serialize;

use crate::background::{Background, BackgroundTraffic};
use crate::bystanders::{Bystanders, ExtraClients};
use crate::hub_process::{channel_name, HubProcess};
use crate::latency::measure_hub;
use crate::sleeps::{SleepWindow, Sleeps};
use crate::stats::{Distribution, Ratios};
use crate::{BenchError, FrameSize, Launcher, Progress, Transport, CHANNEL, WARM_UP};

/// What to measure.
#[derive(Clone, Debug)]
pub struct ScalingRun {
    /// Clients on the one channel, probe and echo included, one point each.
    pub clients: Vec<usize>,
    /// Channels on the hub, one point each.
    pub channels: Vec<usize>,
    /// Round trips per point (after the warm-up).
    pub samples: usize,
    pub size: FrameSize,
    /// Background frames a second on each channel but the measured one.
    pub background_rate: f64,
}

/// Which parameter a series varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Series {
    Clients,
    Channels,
}

/// One point of a series.
#[derive(Debug, Serialize)]
pub struct ScalingPoint {
    pub series: Series,
    pub scenario: String,
    /// Clients on the measured channel (probe and echo included).
    pub clients: usize,
    /// Channels the hub carries.
    pub channels: usize,
    pub payload_bytes: usize,
    pub hub: Distribution,
    /// `hub / hub of the series' first point`, key by key.
    pub ratio: Ratios,
    /// The sleeps of the hub's and the clients' threads over the point's
    /// round trips (warm-up included: `events` counts them too).
    pub sleeps: Sleeps,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_clients: Option<ExtraClients>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub background: Option<BackgroundTraffic>,
}

/// Measure the clients series, then the channels series.
pub fn run(launcher: &Launcher, spec: &ScalingRun, progress: Progress<'_>) -> Result<Vec<ScalingPoint>, BenchError> {
    if spec.samples == 0 {
        return Err(BenchError::Invalid("at least one sample is needed".into()));
    }
    if let Some(n) = spec.clients.iter().find(|&&n| n < 2) {
        return Err(BenchError::Invalid(format!("{n} clients: a point needs at least the probe and the echo (2)")));
    }
    if spec.channels.contains(&0) {
        return Err(BenchError::Invalid("a hub needs at least one channel".into()));
    }
    let rate = spec.background_rate;
    if spec.channels.iter().any(|&k| k > 1) && !(rate > 0.0 && rate.is_finite()) {
        return Err(BenchError::Invalid(format!(
            "the background rate must be a positive number of frames/s, not {rate}"
        )));
    }
    if spec.clients.is_empty() && spec.channels.is_empty() {
        return Err(BenchError::Invalid("no point to measure: give client counts, channel counts or both".into()));
    }
    raise_open_file_limit();
    let mut points = Vec::new();
    for (series, values) in [(Series::Clients, &spec.clients), (Series::Channels, &spec.channels)] {
        let mut first: Option<Distribution> = None;
        for &value in values {
            let (clients, channels) = match series {
                Series::Clients => (value, 1),
                Series::Channels => (2, value),
            };
            let measured = measure_point(launcher, spec, clients, channels, &mut *progress)?;
            let reference = first.get_or_insert_with(|| measured.hub.clone());
            points.push(ScalingPoint {
                series,
                scenario: name(spec, clients, channels),
                clients,
                channels,
                payload_bytes: spec.size.payload(),
                ratio: Ratios::of(&measured.hub, reference),
                hub: measured.hub,
                sleeps: measured.sleeps,
                extra_clients: measured.extra_clients,
                background: measured.background,
            });
        }
    }
    Ok(points)
}

/// A point's figures before its ratio is known.
struct Measured {
    hub: Distribution,
    sleeps: Sleeps,
    extra_clients: Option<ExtraClients>,
    background: Option<BackgroundTraffic>,
}

/// Round trips on a fresh hub with `channels` channels and `clients`
/// clients on the measured one, background traffic on the others.
fn measure_point(
    launcher: &Launcher,
    spec: &ScalingRun,
    clients: usize,
    channels: usize,
    progress: Progress<'_>,
) -> Result<Measured, BenchError> {
    let point = format!("{clients} clients, {}", plural(channels, "channel"));
    progress(&format!("{point}: connecting"));
    let hub = HubProcess::start_with_channels(launcher, channels)?;
    let url = hub.url(Transport::Shm, false);
    let bystanders = Bystanders::connect(&url, CHANNEL, clients - 2, false)?;
    let others: Vec<String> = (1..channels).map(channel_name).collect();
    let background = if others.is_empty() {
        None
    } else {
        Some(Background::connect(&url, &others, spec.background_rate, spec.size)?)
    };
    let mut measure = || {
        let mut label = |line: &str| progress(&format!("{point}: {line}"));
        measure_hub(&url, spec.size, spec.samples, &mut label)
    };
    let window = SleepWindow::open(&[("hub", hub.pid())])?;
    let ((mut samples, background), extra_clients) = bystanders.during(|| match &background {
        Some(background) => background.during(measure).map(|(samples, traffic)| (samples, Some(traffic))),
        None => measure().map(|samples| (samples, None)),
    })?;
    let sleeps = window.close((WARM_UP + spec.samples) as u64)?;
    Ok(Measured {
        hub: Distribution::of(&mut samples),
        sleeps,
        extra_clients: (clients > 2).then_some(extra_clients),
        background,
    })
}

fn name(spec: &ScalingRun, clients: usize, channels: usize) -> String {
    let traffic = match channels {
        1 => String::new(),
        2 => format!(" ({} frames/s on the other)", spec.background_rate),
        k => format!(" ({} frames/s on each of the {} others)", spec.background_rate, k - 1),
    };
    format!("shm adaptive, {}, {clients} clients, {}{traffic}", spec.size.label(), plural(channels, "channel"))
}

fn plural(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// Let the benchmark process hold as many descriptors as the hard limit
/// allows, as the hub does for itself: every shared-memory client keeps its
/// session socket open, so a series past about 1,000 clients would run into
/// the usual soft limit of 1,024.
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current < limit.maximum {
        // If it cannot be raised, a client that cannot connect says why.
        let _ = setrlimit(Resource::Nofile, Rlimit { current: limit.maximum, maximum: limit.maximum });
    }
}
