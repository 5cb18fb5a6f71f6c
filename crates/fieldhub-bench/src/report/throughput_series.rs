//! Section 2: throughput second by second. One sender as fast as the hub
//! takes its frames, one or three lossless receivers, 8-byte CAN and
//! 64-byte CAN FD frames ([`crate::throughput`]); every second's count of
//! the first receiver, as frames/s, Mbit/s of payload and Mbit/s of bus
//! bits — each frame's exact on-wire length ([`fieldhub_proto::bits`]).

use fieldhub_proto::bits::FrameBits;
use serde::Serialize;

use super::document::{Cell, Figure, Section, Table};
use super::figure::{self, Chart, Curve};
use super::progress::Stages;
use super::{Plan, ReportError};
use crate::throughput::{self, ThroughputRun, ThroughputScenario};
use crate::{FrameSize, Launcher, Transport};

/// One scenario with its per-second series converted.
#[derive(Debug, Serialize)]
pub struct Series {
    #[serde(flatten)]
    pub scenario: ThroughputScenario,
    /// Bits one frame occupies on the bus, stuff bits included.
    pub bus_bits_per_frame: u32,
    pub payload_mbit_per_s_each_second: Vec<f64>,
    pub bus_mbit_per_s_each_second: Vec<f64>,
}

fn size_of(payload: usize) -> FrameSize {
    if payload > 8 {
        FrameSize::Fd64
    } else {
        FrameSize::Can8
    }
}

pub fn measure(launcher: &Launcher, plan: &Plan, stages: &mut Stages<'_>) -> Result<Vec<Series>, ReportError> {
    let spec = ThroughputRun {
        transport: Transport::Shm,
        seconds: plan.throughput_seconds,
        sizes: vec![FrameSize::Can8, FrameSize::Fd64],
        receivers: vec![1, 3],
    };
    let scenarios = throughput::run(launcher, &spec, &mut |line: &str| stages.report(line))?;
    Ok(scenarios
        .into_iter()
        .map(|scenario| {
            let size = size_of(scenario.payload_bytes);
            let bits = FrameBits::of(&size.frame(0x123, 0)).total;
            let mbit = |per_frame: f64| -> Vec<f64> {
                scenario.hub.per_second.iter().map(|&frames| frames as f64 * per_frame / 1e6).collect()
            };
            Series {
                payload_mbit_per_s_each_second: mbit(size.payload() as f64 * 8.0),
                bus_mbit_per_s_each_second: mbit(f64::from(bits)),
                bus_bits_per_frame: bits,
                scenario,
            }
        })
        .collect())
}

pub fn section(series: &[Series]) -> Result<Section, ReportError> {
    let mut table = Table::new(
        "Throughput through the hub (shm), one sender",
        &[
            "frames",
            "receivers",
            "frames/s (whole run)",
            "slowest second",
            "fastest second",
            "payload",
            "bus bits",
            "bus bits per frame",
            "raw ring stream",
            "hub / raw",
        ],
    );
    for s in series {
        let per_second = &s.scenario.hub.per_second;
        let whole: Vec<u64> = per_second.iter().copied().take(per_second.len().saturating_sub(1)).collect();
        let counted = if whole.is_empty() { per_second.clone() } else { whole };
        let slowest = counted.iter().copied().min().unwrap_or(0) as f64;
        let fastest = counted.iter().copied().max().unwrap_or(0) as f64;
        let rate = s.scenario.hub.frames_per_s;
        table.rows.push(vec![
            Cell::text(size_of(s.scenario.payload_bytes).label()),
            Cell::of(s.scenario.receivers as f64, "receivers"),
            Cell::of(rate, "frames/s"),
            Cell::of(slowest, "frames/s"),
            Cell::of(fastest, "frames/s"),
            Cell::of(s.scenario.hub.payload_mbit_per_s, "Mbit/s"),
            Cell::of(rate * f64::from(s.bus_bits_per_frame) / 1e6, "Mbit/s"),
            Cell::of(f64::from(s.bus_bits_per_frame), "bits"),
            Cell::of(s.scenario.baseline.frames_per_s, "frames/s"),
            Cell::of(s.scenario.ratio, "×"),
        ]);
    }
    let curves = |pick: fn(&Series) -> Vec<f64>| -> Vec<Curve> {
        series
            .iter()
            .map(|s| Curve {
                label: format!("{}, {} receiver(s)", size_of(s.scenario.payload_bytes).label(), s.scenario.receivers),
                points: pick(s).iter().enumerate().map(|(i, &v)| (i as f64 + 1.0, v)).collect(),
                model: false,
            })
            .collect()
    };
    let frames_per_second = |s: &Series| s.scenario.hub.per_second.iter().map(|&f| f as f64).collect();
    let figures = vec![
        Figure {
            caption: "Frames received in each second of the run (first receiver); the last second is partial".into(),
            file: "throughput-frames.svg".into(),
            svg: figure::line_chart(
                &Chart { title: "Frames per second", x_desc: "second of the run", y_desc: "frames/s", log_x: false },
                &curves(frames_per_second),
            )?,
        },
        Figure {
            caption: "Bus bits per second (each frame's exact length, stuff bits included)".into(),
            file: "throughput-bus-bits.svg".into(),
            svg: figure::line_chart(
                &Chart {
                    title: "Bus bit rate carried",
                    x_desc: "second of the run",
                    y_desc: "Mbit/s of bus bits",
                    log_x: false,
                },
                &curves(|s| s.bus_mbit_per_s_each_second.clone()),
            )?,
        },
    ];
    let best = series.iter().map(|s| s.scenario.hub.frames_per_s * f64::from(s.bus_bits_per_frame)).fold(0.0, f64::max);
    Ok(Section {
        id: "throughput",
        title: "2. Throughput over time".into(),
        method: "One sender pushes frames as fast as the hub takes them; every receiver's port is lossless (the bus waits \
                 for a full receiver), so every receiver gets every frame. Counted second by second at the first receiver, \
                 as the seed papers count throughput per second over 60 s (seed 001), per frame size and receiver count; \
                 the raw baseline is an SPSC ring stream between two processes."
            .into(),
        notes: vec![format!(
            "The best scenario carried {:.1} Mbit/s of bus bits: {:.0} times what one 500 kbit/s CAN bus can carry.",
            best / 1e6,
            best / 500_000.0
        )],
        tables: vec![table],
        figures,
        data: serde_json::to_value(series)?,
    })
}
