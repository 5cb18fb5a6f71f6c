//! Section 5: min/avg/max round trips of small and large frames, and the
//! memory of hub and client as the ring slots on the hub grow — as seed 002
//! reports min/avg/max for small and large messages against the memory
//! footprint of its buffers.
//!
//! The ring sizes are fixed by the shared-memory layout (`spec/shm.md`: a
//! to-hub ring of 4,096 and a to-client ring of 8,192 slots of 128 bytes per
//! client; no hub setting changes them), so the slots grow with idle shm
//! clients on the channel: each brings its segment, and the frames of the
//! measurement queue up in its to-client ring (up to its frame share, then
//! the hub drops and counts), so its pages are touched, as a slow reader's are.

use fieldhub_shm::layout::{SLOT_SIZE, TO_CLIENT_SLOTS, TO_HUB_SLOTS};
use serde::Serialize;

use super::document::{row, Cell, Figure, Section, Table};
use super::figure::{self, Chart, Curve};
use super::progress::Stages;
use super::{Plan, ReportError};
use crate::bystanders::Bystanders;
use crate::hub_process::HubProcess;
use crate::latency::measure_hub;
use crate::stats::Distribution;
use crate::{BenchError, FrameSize, Launcher, Transport, CHANNEL};

/// Memory of one process, from `/proc/PID/status`.
#[derive(Debug, Serialize)]
pub struct Memory {
    pub rss_kib: u64,
    /// The part of the RSS that is shared memory (the rings).
    pub rss_shmem_kib: u64,
}

impl Memory {
    fn of(pid: u32) -> Result<Self, BenchError> {
        let path = format!("/proc/{pid}/status");
        let status = std::fs::read_to_string(&path).map_err(|source| BenchError::Proc { path, source })?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap_or(0)
        };
        Ok(Self { rss_kib: field("VmRSS:"), rss_shmem_kib: field("RssShmem:") })
    }
}

/// One point of the series.
#[derive(Debug, Serialize)]
pub struct Point {
    pub idle_clients: usize,
    /// Ring slots the hub maps for them (to-hub and to-client rings).
    pub ring_slots: u64,
    pub ring_mib: f64,
    pub small: Distribution,
    pub large: Distribution,
    pub hub: Memory,
    pub client_process: Memory,
    /// Frames the hub dropped for the idle clients once their rings were full.
    pub frames_dropped: u64,
}

pub fn measure(launcher: &Launcher, plan: &Plan, stages: &mut Stages<'_>) -> Result<Vec<Point>, ReportError> {
    let mut points = Vec::new();
    for &idle_clients in &plan.footprint_clients {
        // A fresh hub per point, so one point's memory does not carry over.
        let hub = HubProcess::start(launcher, false)?;
        let url = hub.url(Transport::Shm, false);
        let bystanders = Bystanders::connect(&url, CHANNEL, idle_clients, true)?;
        let ((small, large, hub_memory, client_memory), seen) = bystanders.during(|| {
            let mut report = |line: &str| stages.report(&format!("{idle_clients} idle clients: {line}"));
            let mut small = measure_hub(&url, FrameSize::Can8, plan.footprint_samples, &mut report)?;
            let mut large = measure_hub(&url, FrameSize::Fd64, plan.footprint_samples, &mut report)?;
            let memory = (Memory::of(hub.pid())?, Memory::of(std::process::id())?);
            Ok((Distribution::of(&mut small), Distribution::of(&mut large), memory.0, memory.1))
        })?;
        let ring_slots = idle_clients as u64 * u64::from(TO_HUB_SLOTS + TO_CLIENT_SLOTS);
        points.push(Point {
            idle_clients,
            ring_slots,
            ring_mib: (ring_slots * SLOT_SIZE as u64) as f64 / 1_048_576.0,
            small,
            large,
            hub: hub_memory,
            client_process: client_memory,
            frames_dropped: seen.frames_dropped,
        });
    }
    Ok(points)
}

pub fn section(points: &[Point]) -> Result<Section, ReportError> {
    let mut latency = Table::new(
        "Round trips, min/avg/max, as idle clients (and their rings) are added",
        &["idle clients", "small min", "small avg", "small max", "large min", "large avg", "large max"],
    );
    let mut memory = Table::new(
        "Memory against ring slots on the hub",
        &[
            "idle clients",
            "ring slots",
            "ring memory",
            "hub RSS",
            "hub RSS shared",
            "client RSS",
            "client RSS shared",
            "frames dropped",
        ],
    );
    let mib = |kib: u64| Cell::of(kib as f64 / 1024.0, "MiB");
    for p in points {
        latency.rows.push(row(
            [Cell::of(p.idle_clients as f64, "clients")],
            [&p.small, &p.large].iter().flat_map(|d| [d.min_us, d.mean_us, d.max_us]),
        ));
        memory.rows.push(vec![
            Cell::of(p.idle_clients as f64, "clients"),
            Cell::of(p.ring_slots as f64, "slots"),
            Cell::of(p.ring_mib, "MiB"),
            mib(p.hub.rss_kib),
            mib(p.hub.rss_shmem_kib),
            mib(p.client_process.rss_kib),
            mib(p.client_process.rss_shmem_kib),
            Cell::of(p.frames_dropped as f64, "frames"),
        ]);
    }
    let series = |label: &str, pick: fn(&Point) -> u64| Curve {
        label: label.into(),
        points: points.iter().map(|p| (p.ring_slots as f64, pick(p) as f64 / 1024.0)).collect(),
        model: false,
    };
    let ring = Curve {
        label: "ring memory (slots × 128 B)".into(),
        points: points.iter().map(|p| (p.ring_slots as f64, p.ring_mib)).collect(),
        model: true,
    };
    let figure = Figure {
        caption: "Resident memory of hub and client process against the ring slots the hub maps".into(),
        file: "footprint-rss.svg".into(),
        svg: figure::line_chart(
            &Chart { title: "Memory against ring slots", x_desc: "ring slots on the hub", y_desc: "MiB", log_x: false },
            &[series("hub RSS", |p| p.hub.rss_kib), series("client process RSS", |p| p.client_process.rss_kib), ring],
        )?,
    };
    Ok(Section {
        id: "footprint",
        title: "5. Small and large frames, memory against ring size".into(),
        method: format!(
            "Round trips of 8-byte (small) and 64-byte (large) frames on a fresh hub with 0 or more idle shm clients on the \
             channel, then the resident memory (VmRSS, and its shared part RssShmem) of the hub and of the benchmark process \
             holding every client. Each shm client brings a to-hub ring of {TO_HUB_SLOTS} and a to-client ring of \
             {TO_CLIENT_SLOTS} slots of {SLOT_SIZE} bytes (fixed by spec/shm.md; no setting changes them), so the slots grow \
             with the clients, and the idle clients' rings fill with the measured frames. Reproduces seed 002's min/avg/max \
             for small and large messages against the memory footprint of the buffers."
        ),
        notes: Vec::new(),
        tables: vec![latency, memory],
        figures: vec![figure],
        data: serde_json::to_value(points)?,
    })
}
