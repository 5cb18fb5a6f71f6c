//! Section 6: periodic senders and the control-loop classes this machine
//! and transport can serve. A sender client sends one 8-byte frame each
//! period (100 µs, 1 ms, 10 ms) on an absolute schedule, sleeping between
//! frames as an application would; a receiver client on the same channel
//! notes each arrival. The period jitter is measured at the receiver; the
//! sender's own release times are kept beside it, so the share of the
//! sender's sleep is visible.
//!
//! A class (fast I/O 100 µs, motion 1 ms, process 10 ms) counts as served
//! when no frame was lost and 99.9 % of the receive intervals lie within
//! [`TOLERANCE`] of the period; the margin is how much of that tolerance
//! was left.

use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions};
use serde::Serialize;

use super::document::{Cell, Figure, Section, Table};
use super::figure::{self, Chart, Curve};
use super::progress::Stages;
use super::{Plan, ReportError};
use crate::hub_process::HubProcess;
use crate::stats::Jitter;
use crate::{BenchError, FrameSize, Launcher, Transport, CHANNEL, PATIENCE};

/// Share of the period the p99.9 interval deviation may take.
pub const TOLERANCE: f64 = 0.10;
/// The control-loop classes: name and cycle time.
pub const CLASSES: [(&str, Duration); 3] = [
    ("fast I/O", Duration::from_micros(100)),
    ("motion", Duration::from_millis(1)),
    ("process", Duration::from_millis(10)),
];
/// Fewest frames a series sends, however short the window.
const MIN_FRAMES: u64 = 50;

/// One periodic sender over one transport.
#[derive(Debug, Serialize)]
pub struct PeriodicSeries {
    pub class: &'static str,
    pub transport: Transport,
    pub sent: u64,
    pub received: u64,
    /// Intervals between arrivals at the receiver.
    pub at_receiver: Jitter,
    /// Intervals between the sender's `send` calls.
    pub at_sender: Jitter,
    /// Ascending |interval − period| at the receiver, ns.
    #[serde(skip)]
    pub deviations_ns: Vec<u64>,
}

impl PeriodicSeries {
    /// No loss, and the p99.9 deviation within the tolerance.
    pub fn serves(&self) -> bool {
        self.received == self.sent && self.at_receiver.p999_abs_us <= self.budget_us()
    }

    /// The tolerated deviation, µs.
    pub fn budget_us(&self) -> f64 {
        self.at_receiver.period_us * TOLERANCE
    }

    /// Tolerance left over the p99.9 deviation (negative: exceeded by), µs.
    pub fn margin_us(&self) -> f64 {
        self.budget_us() - self.at_receiver.p999_abs_us
    }
}

pub fn measure(launcher: &Launcher, plan: &Plan, stages: &mut Stages<'_>) -> Result<Vec<PeriodicSeries>, ReportError> {
    let hub = HubProcess::start(launcher, false)?;
    let mut all = Vec::new();
    for transport in [Transport::Shm, Transport::Tcp] {
        for (class, period) in CLASSES {
            stages.report(&format!("{}, {class} ({period:?})", transport.name()));
            let frames = (plan.jitter_window.as_nanos() / period.as_nanos()).max(u128::from(MIN_FRAMES)) as u64;
            all.push(periodic(&hub.url(transport, false), transport, class, period, frames)?);
        }
    }
    Ok(all)
}

fn periodic(
    url: &str,
    transport: Transport,
    class: &'static str,
    period: Duration,
    frames: u64,
) -> Result<PeriodicSeries, BenchError> {
    let connect = |name: &str| -> Result<_, BenchError> {
        let client = Client::connect_with(url, &ClientOptions { name: name.into(), ..Default::default() })?;
        let port = client.open_port_with(CHANNEL, &crate::fd_port())?;
        Ok((client, port))
    };
    let (sender, port) = connect("bench-periodic")?;
    let (receiver, _) = connect("bench-periodic-rx")?;
    let origin = Instant::now();
    let ns = move |at: Instant| (at - origin).as_nanos() as u64;
    let (sends, arrivals) = std::thread::scope(|s| {
        let receiving = s.spawn(|| {
            let mut arrivals = Vec::with_capacity(frames as usize);
            while (arrivals.len() as u64) < frames {
                match receiver.recv(Some(PATIENCE)) {
                    Ok(Some(_)) => arrivals.push(ns(Instant::now())),
                    _ => break,
                }
            }
            arrivals
        });
        let mut sends = Vec::with_capacity(frames as usize);
        let frame = FrameSize::Can8.frame(0x200, 0);
        let start = Instant::now() + Duration::from_millis(20);
        let sent = (0..frames).try_for_each(|i| {
            let due = start + period * i as u32;
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            sends.push(ns(Instant::now()));
            sender.send(&port, &frame)
        });
        let arrivals = receiving.join().unwrap_or_default();
        sent.map(|()| (sends, arrivals))
    })?;
    let period_ns = period.as_nanos() as u64;
    let mut deviations_ns: Vec<u64> = arrivals.windows(2).map(|w| (w[1] - w[0]).abs_diff(period_ns)).collect();
    deviations_ns.sort_unstable();
    Ok(PeriodicSeries {
        class,
        transport,
        sent: sends.len() as u64,
        received: arrivals.len() as u64,
        at_receiver: Jitter::of(&arrivals, period_ns),
        at_sender: Jitter::of(&sends, period_ns),
        deviations_ns,
    })
}

pub fn section(all: &[PeriodicSeries]) -> Result<Section, ReportError> {
    let mut jitter = Table::new(
        "Period jitter of a periodic sender, measured at the receiver (sender's own release jitter beside it)",
        &[
            "class",
            "transport",
            "period",
            "frames sent",
            "frames received",
            "mean interval",
            "std at receiver",
            "p99 |deviation|",
            "p99.9 |deviation|",
            "max |deviation|",
            "std at sender",
        ],
    );
    let mut classes = Table::new(
        "Which control-loop classes this machine and transport can serve (no loss, p99.9 |deviation| ≤ 10 % of the cycle)",
        &["class", "cycle", "transport", "served", "tolerance", "p99.9 |deviation|", "margin (tolerance − p99.9)"],
    );
    for s in all {
        let (r, us) = (&s.at_receiver, |v: f64| Cell::of(v, "µs"));
        jitter.rows.push(vec![
            Cell::text(s.class),
            Cell::text(s.transport.name()),
            us(r.period_us),
            Cell::of(s.sent as f64, "frames"),
            Cell::of(s.received as f64, "frames"),
            us(r.mean_interval_us),
            us(r.std_us),
            us(r.p99_abs_us),
            us(r.p999_abs_us),
            us(r.max_abs_us),
            us(s.at_sender.std_us),
        ]);
        classes.rows.push(vec![
            Cell::text(s.class),
            us(r.period_us),
            Cell::text(s.transport.name()),
            Cell::text(if s.serves() { "yes" } else { "no" }),
            us(s.budget_us()),
            us(r.p999_abs_us),
            us(s.margin_us()),
        ]);
    }
    let curves: Vec<Curve> = all
        .iter()
        .map(|s| Curve {
            label: format!("{} {}, {}", s.class, s.at_receiver.period_us, s.transport.name()),
            points: figure::cdf_points(&s.deviations_ns),
            model: s.transport != Transport::Shm,
        })
        .collect();
    let figure = Figure {
        caption: "Cumulative distribution of |receive interval − period| for each class and transport (thin: tcp)"
            .into(),
        file: "jitter-cdf.svg".into(),
        svg: figure::line_chart(
            &Chart {
                title: "Period jitter at the receiver",
                x_desc: "|interval − period| (µs, log scale)",
                y_desc: "fraction ≤ x",
                log_x: true,
            },
            &curves,
        )?,
    };
    Ok(Section {
        id: "jitter",
        title: "6. Jitter and cycle-time classes".into(),
        method: "A sender client sends one 8-byte frame per cycle on an absolute schedule (sleeping until each due time, as \
                 an application's periodic task does); a receiver client on the same hub channel notes each arrival. The \
                 period jitter is the spread of the receive intervals. Reproduces seed 001's jitter by cycle-time class \
                 (fast I/O 100 µs, motion 1 ms, process 10 ms) and its applicability table."
            .into(),
        notes: vec![format!(
            "Served means: no frame lost and 99.9 % of receive intervals within ±{:.0} % of the cycle; margin is the part of \
             that tolerance left over (negative: the tolerance was exceeded by that much). The sender's sleep is part of what an application on this machine gets, so its release \
             jitter (std at sender) is shown next to the receiver's.",
            TOLERANCE * 100.0
        )],
        tables: vec![jitter, classes],
        figures: vec![figure],
        data: serde_json::to_value(all)?,
    })
}
