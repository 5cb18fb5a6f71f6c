//! Section 1: round trips of 8-byte frames (probe → hub → echo → hub →
//! probe) over shared memory, a unix socket and loopback TCP — each on a
//! fresh hub, each next to the raw two-process ping-pong over the same
//! primitive measured in the same run — and over a remote path when one is
//! given. Percentiles, mean and standard deviation, and the shape: the
//! bimodality coefficient and the modes of a log-binned histogram, so a
//! second population (a sleeping wake-up next to a spinning one) shows.

use serde::Serialize;

use super::document::{row, Cell, Figure, Section, Table};
use super::figure::{self, Chart, Curve};
use super::progress::Stages;
use super::{Plan, RemotePath, ReportError};
use crate::latency::{self, LatencyRun};
use crate::remote::{CallTime, HubChannel};
use crate::stats::{bimodality_coefficient, modes, Distribution, Mode, BIMODAL_ABOVE};
use crate::{FrameSize, Launcher, Transport, CHANNEL};

/// One measured path.
#[derive(Debug, Serialize)]
pub struct PathSeries {
    pub path: String,
    /// `hub` (through a hub process) or `raw` (the bare primitive).
    pub kind: &'static str,
    pub round_trip: Distribution,
    pub bimodality_coefficient: f64,
    pub modes: Vec<Mode>,
    /// Ascending round trips in ns (for plots and models).
    #[serde(skip)]
    pub sorted_ns: Vec<u64>,
}

impl PathSeries {
    fn of(path: String, kind: &'static str, mut samples: Vec<u64>) -> Self {
        let round_trip = Distribution::of(&mut samples);
        let values: Vec<f64> = samples.iter().map(|&s| s as f64).collect();
        Self {
            path,
            kind,
            round_trip,
            bimodality_coefficient: bimodality_coefficient(&values),
            modes: modes(&samples),
            sorted_ns: samples,
        }
    }
}

/// Every path, hub and raw.
pub fn measure(
    launcher: &Launcher,
    plan: &Plan,
    remote: Option<&RemotePath>,
    stages: &mut Stages<'_>,
) -> Result<Vec<PathSeries>, ReportError> {
    let mut series = Vec::new();
    for transport in [Transport::Shm, Transport::Unix, Transport::Tcp] {
        let spec = LatencyRun {
            transport,
            busy_poll: false,
            samples: plan.round_trip_samples,
            sizes: vec![FrameSize::Can8],
            extra_clients: 0,
            extra_idle: false,
        };
        let mut report = |line: &str| stages.report(&format!("{}: {line}", transport.name()));
        for scenario in latency::run(launcher, &spec, &mut report)? {
            series.push(PathSeries::of(format!("hub {}", transport.name()), "hub", scenario.hub_samples));
            series.push(PathSeries::of(scenario.baseline_kind.to_owned(), "raw", scenario.baseline_samples));
        }
    }
    if let Some(remote) = remote {
        let mut report = |line: &str| stages.report(&format!("{}: {line}", remote.url));
        let at = HubChannel { url: &remote.url, token: remote.token.as_deref(), channel: &remote.channel };
        let calls = latency::measure_calls_on(at, FrameSize::Can8, plan.round_trip_samples, &mut report)
            .map_err(|source| ReportError::Remote { url: remote.url.clone(), source })?;
        let samples = CallTime::round_trips(&calls);
        series.push(PathSeries::of(format!("remote {} {}", remote.url, remote.channel), "hub", samples));
    }
    Ok(series)
}

/// What the shape of `s` says, when it is more than one plain hill.
fn shape_note(s: &PathSeries) -> Option<String> {
    let d = &s.round_trip;
    match s.modes.as_slice() {
        [first, second, ..] => Some(format!(
            "{}: two populations — {:.0} % of round trips near {:.1} µs, {:.0} % near {:.1} µs (bimodality coefficient \
             {:.2}); the mean of {:.1} µs lies between them and describes neither.",
            s.path,
            first.share * 100.0,
            first.at_us,
            second.share * 100.0,
            second.at_us,
            s.bimodality_coefficient,
            d.mean_us
        )),
        _ if s.bimodality_coefficient > BIMODAL_ABOVE => Some(format!(
            "{}: one mode, but a bimodality coefficient of {:.2}: a long tail (p99.9 {:.1} µs against p50 {:.1} µs) \
             rather than a second population of 5 % or more.",
            s.path, s.bimodality_coefficient, d.p999_us, d.p50_us
        )),
        _ => None,
    }
}

/// Percentiles, shape and ratios; CDF and log histograms.
pub fn section(series: &[PathSeries]) -> Result<Section, ReportError> {
    let mut table = Table::new(
        "Round trips, 8-byte frames",
        &["path", "samples", "min", "p50", "p80", "p95", "p99", "p99.9", "max", "mean", "std"],
    );
    let mut shape = Table::new(
        "Shape of each distribution: bimodality coefficient (above 0.555 suggests two populations) and modes",
        &["path", "bimodality coefficient", "modes found", "main mode", "its share", "second mode", "its share"],
    );
    let mut notes = Vec::new();
    for s in series {
        let d = &s.round_trip;
        let us = |v: f64| Cell::of(v, "µs");
        table.rows.push(row(
            [Cell::text(&s.path), Cell::of(d.samples as f64, "samples")],
            [d.min_us, d.p50_us, d.p80_us, d.p95_us, d.p99_us, d.p999_us, d.max_us, d.mean_us, d.std_us],
        ));
        let mode = |i: usize| match s.modes.get(i) {
            Some(m) => [us(m.at_us), Cell::of(m.share * 100.0, "%")],
            None => [Cell::text("—"), Cell::text("—")],
        };
        let [main, main_share] = mode(0);
        let [second, second_share] = mode(1);
        shape.rows.push(vec![
            Cell::text(&s.path),
            Cell::of(s.bimodality_coefficient, "(coefficient)"),
            Cell::of(s.modes.len() as f64, "modes"),
            main,
            main_share,
            second,
            second_share,
        ]);
        notes.extend(shape_note(s));
    }
    let mut ratios =
        Table::new("Hub against the raw primitive of the same run", &["transport", "p50 ratio", "p99 ratio"]);
    for pair in series.chunks(2).filter(|p| p.len() == 2 && p[0].kind == "hub" && p[1].kind == "raw") {
        let (hub, raw) = (&pair[0].round_trip, &pair[1].round_trip);
        ratios.rows.push(vec![
            Cell::text(&pair[0].path),
            Cell::of(crate::stats::ratio(hub.p50_us, raw.p50_us), "×"),
            Cell::of(crate::stats::ratio(hub.p99_us, raw.p99_us), "×"),
        ]);
    }
    let cdf: Vec<Curve> = series
        .iter()
        .map(|s| Curve { label: s.path.clone(), points: figure::cdf_points(&s.sorted_ns), model: s.kind == "raw" })
        .collect();
    let histogram = |kind: &str| -> Vec<Curve> {
        series
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| Curve { label: s.path.clone(), points: figure::log_histogram(&s.sorted_ns), model: false })
            .collect()
    };
    let figures = vec![
        Figure {
            caption: "Cumulative distribution of round trips (log time axis); thin lines: raw primitives".into(),
            file: "round-trips-cdf.svg".into(),
            svg: figure::line_chart(
                &Chart {
                    title: "Round trips, 8-byte frames",
                    x_desc: "round trip (µs, log scale)",
                    y_desc: "fraction ≤ x",
                    log_x: true,
                },
                &cdf,
            )?,
        },
        Figure {
            caption: "Histogram of round trips through the hub on a log time axis: each hill is one population".into(),
            file: "round-trips-histogram.svg".into(),
            svg: figure::line_chart(
                &Chart {
                    title: "Round trips through the hub",
                    x_desc: "round trip (µs, log scale)",
                    y_desc: "share of samples per bin",
                    log_x: true,
                },
                &histogram("hub"),
            )?,
        },
        Figure {
            caption: "Histogram of the raw primitives' round trips on a log time axis".into(),
            file: "round-trips-raw-histogram.svg".into(),
            svg: figure::line_chart(
                &Chart {
                    title: "Raw primitives' round trips",
                    x_desc: "round trip (µs, log scale)",
                    y_desc: "share of samples per bin",
                    log_x: true,
                },
                &histogram("raw"),
            )?,
        },
    ];
    Ok(Section {
        id: "round_trips",
        title: "1. Round trips".into(),
        method: format!(
            "A probe client sends an 8-byte frame on channel '{CHANNEL}', an echo client answers, the probe takes the answer: \
             four one-way hops through a hub process started for each transport. Each transport's raw primitive (futex ping-pong \
             over a fieldhub-shm ring, unix-socket ping-pong, TCP_NODELAY ping-pong) is two processes measured in the same run. \
             Reproduces the seed papers' round-trip distributions with percentiles (seed 001), with the distribution's shape \
             reported instead of a mean alone."
        ),
        notes,
        tables: vec![table, shape, ratios],
        figures,
        data: serde_json::to_value(series)?,
    })
}
