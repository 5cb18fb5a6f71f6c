//! The bus thread: the runtime of the `fieldhub-bus` state machine. It owns
//! the [`Bus`] and runs its loop — take a round of input, serve the channels,
//! then wait on the hub's one wake-up point ([`wake::BusWake`]) until input
//! arrives or the earliest deadline passes. The bus reads time through the
//! clocks given here ([`clock::MonotonicClock`] in real time), and wakes as
//! close to its deadlines as the OS allows ([`realtime`]: 1 ns of timer
//! slack, `SCHED_FIFO` with `[hub] realtime`).
//!
//! Invariants: the loop never waits on a client (every wait has a deadline
//! while shared-memory clients are attached: [`wake::MAX_BUS_WAIT`]), and
//! spins before sleeping only as long as input has lately come that soon.

pub mod clock;
pub mod realtime;
pub mod wake;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fieldhub_bus::clock::ManualClock;
use fieldhub_bus::config::TimeMode;
use fieldhub_bus::inbox::Inbox;
use fieldhub_bus::{Bus, Input};
use fieldhub_shm::AdaptiveSpin;

use crate::config::HubConfig;
use crate::recording::writer::FileRecorder;
use clock::MonotonicClock;
use wake::BusWake;

/// The bus for `config`, in its time mode, writing recordings as files.
pub fn bus_for(config: &HubConfig) -> Bus {
    let bus_config = config.bus_config();
    let bus = match config.hub.time {
        TimeMode::Real => Bus::new(&bus_config, Arc::new(MonotonicClock::start())),
        TimeMode::Virtual => {
            Bus::in_virtual_time(&bus_config, Arc::new(ManualClock::at(0)), Arc::new(MonotonicClock::start()))
        }
    };
    bus.with_recorder(Box::new(FileRecorder))
}

/// Serve until `Shutdown` arrives or every sender is gone.
///
/// Each round drains the inbound queue (up to a batch), reads every client
/// ring, serves the channels and flushes the outboxes of clients that got
/// messages. With nothing to do it waits for input or the earliest channel
/// deadline — but never on a client, and never longer than
/// [`wake::MAX_BUS_WAIT`] while clients ring from shared memory.
/// `busy_poll` spins instead of sleeping.
pub fn run(mut bus: Bus, inbox: Inbox, wake: Arc<BusWake>, busy_poll: bool) {
    realtime::tighten_timer_slack();
    let mut spin = AdaptiveSpin::default();
    let mut deadline: Option<u64> = None;
    // When the loop last woke from a sleep toward `deadline` (bus time): what
    // tells a deadline served late because the thread woke late (the OS)
    // from one served late because it was busy (`STATS` `timer`).
    let mut woke: Option<u64> = None;
    loop {
        let input = bus.take_input(&inbox);
        if input == Input::Stopped {
            return;
        }
        // The deadline, and the time it is served at, once it has come.
        let due = deadline.map(|at| (at, bus.now())).filter(|&(at, now)| at <= now);
        if input == Input::Worked || due.is_some() {
            if let Some((at, now)) = due {
                bus.note_deadline_served(at, now, woke);
            }
            woke = None;
            deadline = bus.serve();
            continue;
        }
        if bus.stall_deadline().is_some_and(|at| at <= Instant::now()) {
            bus.report_stalls();
            continue;
        }
        // In virtual time no deadline is in wall-clock time but a
        // participant's step timeout; bus time moves with the steps.
        let wait_until = match bus.in_virtual_time_mode() {
            true => bus.stall_deadline(),
            false => deadline.map(|at| Instant::now() + Duration::from_nanos(at.saturating_sub(bus.now()))),
        };
        let shared = bus.reads_rings();
        let input = || inbox.has_waiting() || bus.ring_ready();
        wake.wait(busy_poll, &mut spin, wait_until, shared, input);
        if deadline.is_some() && !bus.in_virtual_time_mode() {
            woke = Some(bus.now());
        }
    }
}
