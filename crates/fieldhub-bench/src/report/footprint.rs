//! Section 5: min/avg/max round trips of small and large frames, and the
//! memory of hub and client as the ring slots on the hub grow — as seed 002
//! reports min/avg/max for small and large messages against the memory
//! footprint of its buffers.
//!
//! Each point is a fresh hub whose shm clients get to-client rings of a
//! given size (`[hub] shm_ring_slots`; the to-hub ring is always 4,096
//! slots), with the same number of idle shm clients on the channel: the
//! frames of the measurement queue up in their to-client rings (up to the
//! frame share, then the hub drops and counts), so the pages are touched,
//! as a slow reader's are.

use fieldhub_shm::layout::{SLOT_SIZE, TO_HUB_SLOTS};
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
    /// Slots of each client's to-client ring.
    pub to_client_slots: u32,
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
    let idle_clients = plan.footprint_clients;
    for &to_client_slots in &plan.footprint_rings {
        // A fresh hub per point, so one point's memory does not carry over.
        let hub = HubProcess::start_with_ring_slots(launcher, to_client_slots)?;
        let url = hub.url(Transport::Shm, false);
        let bystanders = Bystanders::connect(&url, CHANNEL, idle_clients, true)?;
        let ((small, large, hub_memory, client_memory), seen) = bystanders.during(|| {
            let mut report = |line: &str| stages.report(&format!("rings of {to_client_slots} slots: {line}"));
            let mut small = measure_hub(&url, FrameSize::Can8, plan.footprint_samples, &mut report)?;
            let mut large = measure_hub(&url, FrameSize::Fd64, plan.footprint_samples, &mut report)?;
            let memory = (Memory::of(hub.pid())?, Memory::of(std::process::id())?);
            Ok((Distribution::of(&mut small), Distribution::of(&mut large), memory.0, memory.1))
        })?;
        let ring_slots = idle_clients as u64 * u64::from(TO_HUB_SLOTS + to_client_slots);
        points.push(Point {
            idle_clients,
            to_client_slots,
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
        "Round trips, min/avg/max, as the clients' rings grow",
        &["to-client ring", "small min", "small avg", "small max", "large min", "large avg", "large max"],
    );
    let mut memory = Table::new(
        "Memory against ring slots on the hub",
        &[
            "to-client ring",
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
            [Cell::of(f64::from(p.to_client_slots), "slots")],
            [&p.small, &p.large].iter().flat_map(|d| [d.min_us, d.mean_us, d.max_us]),
        ));
        memory.rows.push(vec![
            Cell::of(f64::from(p.to_client_slots), "slots"),
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
            "Round trips of 8-byte (small) and 64-byte (large) frames on a fresh hub per ring size ([hub] shm_ring_slots), \
             with idle shm clients on the channel, then the resident memory (VmRSS, and its shared part RssShmem) of the hub \
             and of the benchmark process holding every client. Each shm client brings a to-hub ring of {TO_HUB_SLOTS} slots \
             and a to-client ring of the point's size, slots of {SLOT_SIZE} bytes; the idle clients' to-client rings fill \
             with the measured frames. Reproduces seed 002's min/avg/max for small and large messages against the memory \
             footprint of the buffers."
        ),
        notes: Vec::new(),
        tables: vec![latency, memory],
        figures: vec![figure],
        data: serde_json::to_value(points)?,
    })
}
