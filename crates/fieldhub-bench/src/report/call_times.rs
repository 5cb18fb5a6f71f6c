//! Section 4: the time an application spends inside the client's calls.
//! In each round trip the probe times its `send` (handing the request to
//! the client library) and its `recv` (waiting for the answer and taking
//! it) — small (8-byte) and large (64-byte) frames, over every local
//! transport; mean and standard deviation of each, as seed 003 reports
//! read, write and round-trip call times.

use serde::Serialize;

use super::document::{row, Cell, Figure, Section, Table};
use super::figure::{self, Chart, Curve};
use super::progress::Stages;
use super::{Plan, ReportError};
use crate::hub_process::HubProcess;
use crate::latency::measure_calls_on;
use crate::remote::{CallTime, HubChannel};
use crate::stats::{mean_std, percentile};
use crate::{FrameSize, Launcher, Transport, CHANNEL};

/// Mean, spread and tail of one call's time.
#[derive(Debug, Serialize)]
pub struct CallSummary {
    pub mean_us: f64,
    pub std_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl CallSummary {
    fn of(sorted_ns: &[u64]) -> Self {
        let (mean, std) = mean_std(sorted_ns.iter().map(|&s| s as f64));
        Self {
            mean_us: mean / 1e3,
            std_us: std / 1e3,
            p50_us: percentile(sorted_ns, 0.5) / 1e3,
            p99_us: percentile(sorted_ns, 0.99) / 1e3,
            max_us: percentile(sorted_ns, 1.0) / 1e3,
        }
    }
}

/// One transport and frame size.
#[derive(Debug, Serialize)]
pub struct CallTimes {
    pub transport: Transport,
    pub payload_bytes: usize,
    pub samples: usize,
    pub send: CallSummary,
    pub recv: CallSummary,
    pub round_trip: CallSummary,
    #[serde(skip)]
    pub send_sorted_ns: Vec<u64>,
    #[serde(skip)]
    pub recv_sorted_ns: Vec<u64>,
}

pub fn measure(launcher: &Launcher, plan: &Plan, stages: &mut Stages<'_>) -> Result<Vec<CallTimes>, ReportError> {
    let hub = HubProcess::start(launcher, false)?;
    let mut all = Vec::new();
    for transport in [Transport::Shm, Transport::Unix, Transport::Tcp] {
        for size in [FrameSize::Can8, FrameSize::Fd64] {
            let mut report = |line: &str| stages.report(&format!("{}: {line}", transport.name()));
            let url = hub.url(transport, false);
            let at = HubChannel { url: &url, token: None, channel: CHANNEL };
            let calls = measure_calls_on(at, size, plan.call_samples, &mut report)?;
            let sorted = |f: fn(&CallTime) -> u64| {
                let mut v: Vec<u64> = calls.iter().map(f).collect();
                v.sort_unstable();
                v
            };
            let (send, recv, round_trip) =
                (sorted(|c| c.send_ns), sorted(|c| c.recv_ns), sorted(|c| c.round_trip_ns()));
            all.push(CallTimes {
                transport,
                payload_bytes: size.payload(),
                samples: calls.len(),
                send: CallSummary::of(&send),
                recv: CallSummary::of(&recv),
                round_trip: CallSummary::of(&round_trip),
                send_sorted_ns: send,
                recv_sorted_ns: recv,
            });
        }
    }
    Ok(all)
}

pub fn section(all: &[CallTimes]) -> Result<Section, ReportError> {
    let mut table = Table::new(
        "Time inside the probe's calls, per round trip",
        &[
            "transport",
            "payload",
            "send mean",
            "send std",
            "send p99",
            "recv mean",
            "recv std",
            "recv p99",
            "round trip mean",
            "round trip std",
        ],
    );
    for c in all {
        table.rows.push(row(
            [Cell::text(c.transport.name()), Cell::of(c.payload_bytes as f64, "bytes")],
            [&c.send, &c.recv]
                .iter()
                .flat_map(|call| [call.mean_us, call.std_us, call.p99_us])
                .chain([c.round_trip.mean_us, c.round_trip.std_us]),
        ));
    }
    let curves: Vec<Curve> = all
        .iter()
        .flat_map(|c| {
            let name = format!("{} {} B", c.transport.name(), c.payload_bytes);
            [
                Curve { label: format!("send, {name}"), points: figure::cdf_points(&c.send_sorted_ns), model: true },
                Curve { label: format!("recv, {name}"), points: figure::cdf_points(&c.recv_sorted_ns), model: false },
            ]
        })
        .collect();
    let figure = Figure {
        caption: "Cumulative distribution of the time inside send (thin) and recv (thick) calls".into(),
        file: "call-times-cdf.svg".into(),
        svg: figure::line_chart(
            &Chart {
                title: "Time inside client calls",
                x_desc: "time in the call (µs, log scale)",
                y_desc: "fraction ≤ x",
                log_x: true,
            },
            &curves,
        )?,
    };
    Ok(Section {
        id: "call_times",
        title: "4. Call times".into(),
        method: "Each round trip of a probe and an echo on one hub, split at the calls: the time inside send (the client \
                 library queues or writes the request) and inside recv (waiting for the answer, then taking it). Small \
                 (8-byte CAN) and large (64-byte CAN FD) frames over shm, unix and tcp; mean and standard deviation of each \
                 call, as seed 003 reports read, write and round-trip times with their standard deviations (its \
                 closed-form models are section 7)."
            .into(),
        notes: vec![
            "send returns once the frame is in the to-hub ring (shm) or the client's send queue (unix, tcp): its time is \
             what a control loop pays per frame written; recv's time is the rest of the round trip."
                .into(),
        ],
        tables: vec![table],
        figures: vec![figure],
        data: serde_json::to_value(all)?,
    })
}
