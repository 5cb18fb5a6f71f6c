//! Section 3: CPU of the hub process and of the client process, idle and
//! with a sender at the frame rate of a fully loaded 500 kbit/s bus, with
//! one and with three clients, over shared memory and over TCP
//! ([`crate::cpu`]).

use super::document::{Cell, Figure, Section, Table};
use super::figure::{self, Chart, Curve};
use super::progress::Stages;
use super::{Plan, ReportError};
use crate::cpu::{self, CpuPhase, CpuRun, CpuShare};
use crate::{Launcher, Transport};

pub fn measure(launcher: &Launcher, plan: &Plan, stages: &mut Stages<'_>) -> Result<Vec<CpuPhase>, ReportError> {
    let mut phases = Vec::new();
    for transport in [Transport::Shm, Transport::Tcp] {
        let spec = CpuRun { transport, seconds: plan.cpu_seconds };
        let mut report = |line: &str| stages.report(&format!("{}: {line}", transport.name()));
        phases.extend(cpu::run(launcher, &spec, &mut report)?);
    }
    Ok(phases)
}

/// Percent of one core: the scheduler's figure where the kernel has it.
fn percent(share: &CpuShare) -> f64 {
    share.cpu_percent_precise.unwrap_or(share.cpu_percent)
}

pub fn section(phases: &[CpuPhase]) -> Result<Section, ReportError> {
    let mut table = Table::new(
        "CPU, percent of one core",
        &["transport", "load", "clients", "frames/s asked", "frames/s sent", "hub", "client process", "window"],
    );
    for p in phases {
        table.rows.push(vec![
            Cell::text(p.transport.name()),
            Cell::text(p.load),
            Cell::of(p.clients as f64, "clients"),
            Cell::of(p.target_frames_per_s, "frames/s"),
            Cell::of(p.frames_per_s, "frames/s"),
            Cell::of(percent(&p.hub), "%"),
            Cell::of(percent(&p.client_process), "%"),
            Cell::of(p.seconds, "s"),
        ]);
    }
    let loaded =
        |t: Transport| phases.iter().find(|p| p.transport == t && p.clients == 3 && p.target_frames_per_s > 0.0);
    let notes = match (loaded(Transport::Shm), loaded(Transport::Tcp)) {
        (Some(shm), Some(tcp)) => vec![format!(
            "At 500 kbit/s with 3 clients the hub used {:.1} % of a core over shm and {:.1} % over tcp; the clients {:.1} % and {:.1} %.",
            percent(&shm.hub),
            percent(&tcp.hub),
            percent(&shm.client_process),
            percent(&tcp.client_process)
        )],
        _ => Vec::new(),
    };
    let curve = |transport: Transport, process: &str, share: fn(&CpuPhase) -> &CpuShare| Curve {
        label: format!("{process}, {}", transport.name()),
        points: phases
            .iter()
            .filter(|p| p.transport == transport && p.target_frames_per_s > 0.0)
            .map(|p| (p.clients as f64, percent(share(p))))
            .collect(),
        model: transport != Transport::Shm,
    };
    let figure = Figure {
        caption: "CPU at 500 kbit/s against the clients on the channel (thin: tcp)".into(),
        file: "cpu-500kbit.svg".into(),
        svg: figure::line_chart(
            &Chart {
                title: "CPU at 500 kbit/s",
                x_desc: "clients on the channel",
                y_desc: "% of one core",
                log_x: false,
            },
            &[
                curve(Transport::Shm, "hub", |p| &p.hub),
                curve(Transport::Shm, "clients", |p| &p.client_process),
                curve(Transport::Tcp, "hub", |p| &p.hub),
                curve(Transport::Tcp, "clients", |p| &p.client_process),
            ],
        )?,
    };
    Ok(Section {
        id: "cpu",
        title: "3. CPU load".into(),
        method: "CPU time (the threads' sum_exec_runtime where the kernel has it, else utime + stime) of the hub process and \
                 of the benchmark process holding the clients, over a window of wall time: idle (ports open, receivers \
                 waiting) and with one client sending 8-byte frames at the rate of a fully loaded 500 kbit/s bus (from their \
                 exact bit length), the others receiving — with 1 and 3 clients, shm and tcp, as seed 001 measures CPU load \
                 at 500 kbit/s with one and three clients."
            .into(),
        notes,
        tables: vec![table],
        figures: vec![figure],
        data: serde_json::to_value(phases)?,
    })
}
