//! Section 8's table of the federation's floods side by side: the CPU a
//! frame cost relayed, through two hubs chained without Zenoh and on one
//! hub ([`crate::thread_cpu`]: every thread of the hubs by name, the
//! clients' process), the cores the run kept busy and those the machine
//! left idle — whether the relayed flood waited with the cores free or
//! filled them, and which of its threads spent the most a frame.

use super::document::{Cell, Table};
use crate::federation::FederationFigures;

/// Hub threads a flood's row names, the busiest first.
const BUSIEST: usize = 6;

/// The floods' rows: relayed, chained, one hub.
pub fn table(x: &FederationFigures) -> Table {
    let mut table = Table::new(
        "The federation flood's CPU a frame (the kernel's time on a CPU of every thread of the hubs and of the \
         clients' process), relayed against two hubs chained and one hub",
        &[
            "flood",
            "frames/s",
            "CPU a frame",
            "hubs",
            "clients' process",
            "cores busy",
            "cores idle",
            "busiest hub threads",
        ],
    );
    for (flood, rate, cpu) in [
        ("sender on relay → receiver on owner", &x.relay_to_owner_rate, &x.relayed_flood_cpu),
        ("two hubs chained by a forwarding client", &x.chained_rate, &x.chained_flood_cpu),
        ("one hub", &x.one_hub_rate, &x.one_hub_flood_cpu),
    ] {
        let mut threads: Vec<(&String, &u64)> = cpu.by_thread.iter().collect();
        threads.sort_by(|a, b| b.1.cmp(a.1));
        let busiest: Vec<String> =
            threads.iter().take(BUSIEST).map(|(name, &ns)| format!("{name} {:.0} ns", cpu.per_event_ns(ns))).collect();
        table.rows.push(vec![
            Cell::text(flood),
            Cell::of(rate.frames_per_s, "frames/s"),
            Cell::of(cpu.per_event_ns(cpu.total_ns()), "ns"),
            Cell::of(cpu.per_event_ns(cpu.hubs_ns()), "ns"),
            Cell::of(cpu.per_event_ns(cpu.clients_ns), "ns"),
            Cell::of(cpu.busy_cores(rate.seconds), "cores"),
            cpu.idle_cores.map_or_else(|| Cell::text("—"), |c| Cell::of(c, "cores")),
            Cell::text(busiest.join(", ")),
        ]);
    }
    table
}
