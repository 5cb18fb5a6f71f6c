//! Virtual time: how fast a hub in virtual time runs a whole bus. N
//! synchronised participants on [`TIMED_CHANNEL`] (exact bit times at
//! 500 kbit/s) each send one frame per step of their own period for a given
//! span of bus time; the figure is the real-time factor — bus time per
//! wall-clock time — against real time, where the same traffic takes exactly
//! its bus time (the baseline, 1.0, needs no measuring). Also the wall time
//! each advance of bus time costs, and a check that every frame arrived.

use std::time::Instant;

use fieldhub_client::{Client, ClientOptions, Frame};
use serde::Serialize;

use crate::hub_process::{HubProcess, TIMED_CHANNEL};
use crate::{BenchError, Launcher, Transport};

/// What to run.
#[derive(Clone, Debug)]
pub struct VirtualTimeRun {
    pub transport: Transport,
    /// Synchronised participants, each a sender.
    pub participants: usize,
    /// Bus time to run.
    pub bus_seconds: f64,
    /// Each participant's period and step, in milliseconds of bus time.
    pub period_ms: u64,
}

/// What it gave.
#[derive(Clone, Debug, Serialize)]
pub struct VirtualTimeResult {
    pub transport: &'static str,
    pub participants: usize,
    pub bus_seconds: f64,
    pub wall_seconds: f64,
    /// Bus time per wall-clock time (real time: 1.0).
    pub real_time_factor: f64,
    /// Advances of bus time (one per period: every participant steps together).
    pub advances: u64,
    pub wall_us_per_advance: f64,
    /// Frames the observer received, and how many were sent.
    pub frames_received: u64,
    pub frames_sent: u64,
}

const NS_PER_MS: u64 = 1_000_000;

pub fn run(launcher: &Launcher, spec: &VirtualTimeRun) -> Result<VirtualTimeResult, BenchError> {
    // Identifiers 0x100 and up, one per participant, stay 11-bit.
    if !(1..=0x6FF).contains(&spec.participants) || spec.period_ms == 0 || spec.bus_seconds <= 0.0 {
        return Err(BenchError::Invalid(
            "virtual time needs 1 to 1791 participants, a period and some bus time".into(),
        ));
    }
    let hub = HubProcess::start_in_virtual_time(launcher)?;
    let url = hub.url(spec.transport, false);
    let observer = Client::connect_with(&url, &ClientOptions { name: "bench-observer".into(), ..Default::default() })?;
    observer.open_port_with(TIMED_CHANNEL, &crate::fd_port())?;
    let participants = (0..spec.participants)
        .map(|i| {
            let options = ClientOptions { name: format!("bench-ecu{i}"), synchronized: true, ..Default::default() };
            let client = Client::connect_with(&url, &options)?;
            let port = client.open_port_with(TIMED_CHANNEL, &crate::fd_port())?;
            Ok((client, port))
        })
        .collect::<Result<Vec<_>, BenchError>>()?;
    let end_ns = (spec.bus_seconds * 1e9) as u64;
    let period_ns = spec.period_ms * NS_PER_MS;
    let steps = end_ns.div_ceil(period_ns);
    let started = Instant::now();
    std::thread::scope(|s| {
        let senders: Vec<_> = participants
            .iter()
            .enumerate()
            .map(|(i, (client, port))| {
                s.spawn(move || -> Result<(), BenchError> {
                    for k in 0..steps {
                        let frame = Frame::can(0x100 + i as u32, false, &k.to_le_bytes())
                            .map_err(|e| BenchError::Invalid(e.to_string()))?;
                        client.send(port, &frame)?;
                        client.step((k + 1) * period_ns)?;
                        while client.try_recv()?.is_some() {}
                    }
                    Ok(())
                })
            })
            .collect();
        let panicked = || Err(BenchError::Stalled("a participant panicked".into()));
        senders.into_iter().try_for_each(|t| t.join().unwrap_or_else(|_| panicked()))
    })?;
    let wall = started.elapsed().as_secs_f64();
    // The observer's deliveries were queued before the last grant; its PONG after them.
    observer.flush()?;
    let mut received = 0u64;
    while observer.try_recv()?.is_some() {
        received += 1;
    }
    let bus_seconds = (steps * period_ns) as f64 / 1e9;
    Ok(VirtualTimeResult {
        transport: spec.transport.name(),
        participants: spec.participants,
        bus_seconds,
        wall_seconds: wall,
        real_time_factor: bus_seconds / wall,
        advances: steps,
        wall_us_per_advance: wall * 1e6 / steps as f64,
        frames_received: received,
        frames_sent: steps * spec.participants as u64,
    })
}
