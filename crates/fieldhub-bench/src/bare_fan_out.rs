//! The hub's two wake-up-bound paths with nothing in them but their
//! wake-ups, floors measured on this machine: the many-client round trip
//! (`bench scaling`'s point, [`measure`]) and the CPU of a paced bus with
//! one sender and its receivers (`bench cpu`'s loaded phase, [`paced`]).
//!
//! One thread plays the hub's bus thread and `n` threads its clients, as
//! `bench scaling --clients n` has them: a probe, an echo and `n − 2`
//! readers, every one reading every frame. A "frame" is a sequence number
//! and nothing else; there is no ring, no decoding, no hub process. What is
//! left is what any bus that wakes its readers must do, waited for the way
//! the hub and its clients wait ([`fieldhub_shm`]'s bells):
//!
//! - the probe hands a frame to the bus (bumps the inbox, rings the bus's
//!   bell) and sleeps until the echo's frame is published;
//! - the bus, spinning then sleeping as the hub's bus thread does
//!   ([`AdaptiveSpin`]'s defaults), publishes each frame it takes and rings
//!   the bell of every reader but the frame's sender, once a round, as the
//!   hub's outboxes are flushed;
//! - every reader sleeps until a frame is published (client threads spin
//!   only on machines of more than two cores, as `fieldhub-client`'s
//!   consumers do: on two cores none spins); the echo answers each of the
//!   probe's frames with one of its own.
//!
//! [`paced`] has no probe and no echo: a sender hands the bus a frame when
//! each is due (sleeping until then, as `bench cpu`'s sender does) and the
//! bus rings the receivers; each thread's CPU time is read from the kernel.
//!
//! All are threads of one process, so a switch between them changes no
//! address space, where the hub's are switches between processes: the
//! figure is below what a hub process with the same wake-ups can reach.
//!
//! Invariant: each round trip waits for the echo's frame, which the echo
//! sends only after it read the probe's; a thread that misses a frame
//! fails the run as stalled rather than measuring less.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fieldhub_shm::bell::LocalBell;
use fieldhub_shm::AdaptiveSpin;
use serde::Serialize;

use crate::cpu::thread_cpu_ns;
use crate::stats::Distribution;
use crate::{BenchError, PATIENCE, WARM_UP};

/// The probe's and the echo's places among the readers.
const PROBE: usize = 0;
const ECHO: usize = 1;

/// The round trips of `clients` threads on a bus that is nothing but its
/// wake-ups.
#[derive(Clone, Debug, Serialize)]
pub struct BareFanOut {
    pub clients: usize,
    pub round_trip: Distribution,
}

/// What the bus and its clients share.
struct Bus {
    /// Frames handed to the bus, over the run.
    inbox: AtomicU64,
    /// Frames the bus has published; frame `s` (from 1) is the probe's
    /// when odd, the echo's when even.
    published: AtomicU64,
    bus_bell: LocalBell,
    reader_bells: Vec<LocalBell>,
    /// Reader [`ECHO`] answers the probe's frames ([`measure`]); without
    /// it every frame is the probe's, the paced sender's ([`paced`]).
    echo: bool,
    stop: AtomicBool,
}

impl Bus {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// The bus thread: take what came, publish it, ring every reader but
    /// the sender of the round's frames.
    fn serve(&self) -> u64 {
        let mut spin = AdaptiveSpin::default();
        let mut taken = 0;
        loop {
            let came = || self.inbox.load(Ordering::Acquire) > taken || self.stopped();
            self.bus_bell.bell().wait_adaptive(&mut spin, None, came);
            if self.stopped() {
                return thread_cpu_ns();
            }
            taken = self.inbox.load(Ordering::Acquire);
            self.published.store(taken, Ordering::Release);
            let sender = if self.echo && taken % 2 == 0 { ECHO } else { PROBE };
            for (reader, bell) in self.reader_bells.iter().enumerate() {
                if reader != sender {
                    bell.bell().ring();
                }
            }
        }
    }

    /// Hand one frame to the bus.
    fn send(&self) {
        self.inbox.fetch_add(1, Ordering::AcqRel);
        self.bus_bell.bell().ring();
    }

    /// Wait until frame `seq` is published (false: stopped or out of patience).
    fn wait_for(&self, reader: usize, seq: u64, spin: &mut Option<AdaptiveSpin>) -> bool {
        let ready = || self.published.load(Ordering::Acquire) >= seq || self.stopped();
        let deadline = Some(Instant::now() + PATIENCE);
        let bell = self.reader_bells[reader].bell();
        let came = match spin {
            Some(spin) => bell.wait_adaptive(spin, deadline, ready),
            None => bell.sleep_until(deadline, ready),
        };
        came && !self.stopped()
    }

    /// A reader other than the probe: read every frame; the echo answers
    /// each of the probe's.
    fn read(&self, reader: usize, spins: bool) -> u64 {
        let mut spin = spins.then(|| AdaptiveSpin::bounded(Duration::ZERO, fieldhub_client::CONSUMER_MAX_SPIN));
        let mut seen = 0;
        while self.wait_for(reader, seen + 1, &mut spin) {
            let now = self.published.load(Ordering::Acquire);
            if self.echo && reader == ECHO {
                // Each probe frame (odd) gets its answer; the echo's own
                // frames are not rung to it.
                for seq in seen + 1..=now {
                    if seq % 2 == 1 {
                        self.send();
                    }
                }
            }
            seen = now;
        }
        thread_cpu_ns()
    }

    fn new(clients: usize, echo: bool) -> Self {
        Self {
            inbox: AtomicU64::new(0),
            published: AtomicU64::new(0),
            bus_bell: LocalBell::default(),
            reader_bells: (0..clients).map(|_| LocalBell::default()).collect(),
            echo,
            stop: AtomicBool::new(false),
        }
    }

    /// End the run: every thread wakes and returns.
    fn end(&self) {
        self.stop.store(true, Ordering::Release);
        self.bus_bell.bell().wake();
        for bell in &self.reader_bells {
            bell.bell().wake();
        }
    }
}

/// As `fieldhub-client` allows: a spinning client on two cores only keeps
/// the thread it waits for from running.
fn clients_spin() -> bool {
    std::thread::available_parallelism().map_or(1, usize::from) > 2
}

/// `rounds` round trips (after a warm-up) of a probe and an echo among
/// `clients` threads on a bus of nothing but wake-ups.
pub fn measure(clients: usize, rounds: usize) -> Result<BareFanOut, BenchError> {
    if clients < 2 || rounds == 0 {
        return Err(BenchError::Invalid("a round trip needs a probe, an echo and at least one round".into()));
    }
    let bus = Bus::new(clients, true);
    let spins = clients_spin();
    std::thread::scope(|s| {
        let bus = &bus;
        s.spawn(move || bus.serve());
        for reader in (0..clients).filter(|&r| r != PROBE) {
            s.spawn(move || bus.read(reader, spins));
        }
        let result = probe(bus, rounds, spins);
        bus.end();
        result.map(|round_trip| BareFanOut { clients, round_trip })
    })
}

/// A paced bare bus's CPU: percent of one core over the run.
#[derive(Clone, Debug, Serialize)]
pub struct BarePaced {
    pub receivers: usize,
    pub frames: u64,
    pub frames_per_s: f64,
    /// The bus thread's.
    pub bus_cpu_percent: f64,
    /// The bus's, the sender's and the receivers' together.
    pub all_cpu_percent: f64,
}

/// One sender handing the bus a frame at `rate` frames a second for
/// `seconds`, `receivers` receivers: what the threads cost.
pub fn paced(receivers: usize, rate: f64, seconds: f64) -> Result<BarePaced, BenchError> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if receivers == 0 || !positive(rate) || !positive(seconds) {
        return Err(BenchError::Invalid("a paced bus needs a receiver, a rate and a time".into()));
    }
    let bus = Bus::new(1 + receivers, false);
    let spins = clients_spin();
    let interval = Duration::from_secs_f64(1.0 / rate);
    std::thread::scope(|s| {
        let bus = &bus;
        let serving = s.spawn(move || bus.serve());
        let reading: Vec<_> = (1..=receivers).map(|reader| s.spawn(move || bus.read(reader, spins))).collect();
        let sending = s.spawn(move || {
            // An absolute schedule, as `bench cpu`'s sender keeps.
            let started = Instant::now();
            let until = started + Duration::from_secs_f64(seconds);
            let mut sent = 0u32;
            loop {
                let next = started + interval * sent;
                if next >= until {
                    break;
                }
                if let Some(wait) = next.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                bus.send();
                sent += 1;
            }
            (sent, started.elapsed(), thread_cpu_ns())
        });
        let joined = |what: &str| BenchError::Stalled(format!("a bare bus's {what} thread panicked"));
        let (sent, took, sender_ns) = sending.join().map_err(|_| joined("sender"))?;
        // Let the bus and the receivers take the last frame before the end.
        let last = Instant::now() + PATIENCE;
        while bus.published.load(Ordering::Acquire) < u64::from(sent) && Instant::now() < last {
            std::thread::sleep(Duration::from_millis(1));
        }
        bus.end();
        let bus_ns = serving.join().map_err(|_| joined("bus"))?;
        let mut all_ns = bus_ns + sender_ns;
        for reader in reading {
            all_ns += reader.join().map_err(|_| joined("receiver"))?;
        }
        let percent = |ns: u64| ns as f64 / took.as_nanos() as f64 * 100.0;
        Ok(BarePaced {
            receivers,
            frames: u64::from(sent),
            frames_per_s: f64::from(sent) / took.as_secs_f64(),
            bus_cpu_percent: percent(bus_ns),
            all_cpu_percent: percent(all_ns),
        })
    })
}

/// The probe's side of [`measure`].
fn probe(bus: &Bus, rounds: usize, spins: bool) -> Result<Distribution, BenchError> {
    let mut spin = spins.then(|| AdaptiveSpin::bounded(Duration::ZERO, fieldhub_client::CONSUMER_MAX_SPIN));
    let warm_up = WARM_UP.min(rounds);
    let mut times = Vec::with_capacity(rounds);
    for round in 1..=(warm_up + rounds) as u64 {
        // Back to back, as `bench scaling`'s probe sends.
        let started = Instant::now();
        bus.send();
        if !bus.wait_for(PROBE, 2 * round, &mut spin) {
            return Err(BenchError::Stalled(format!(
                "round trip {round}: the echo's frame was not published within {PATIENCE:?}"
            )));
        }
        if round > warm_up as u64 {
            times.push(started.elapsed().as_nanos() as u64);
        }
    }
    Ok(Distribution::of(&mut times))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_round_trip_waits_for_the_echos_answer_among_every_reader() {
        let bare = measure(8, 40).unwrap();
        assert_eq!((bare.clients, bare.round_trip.samples), (8, 40));
        assert!(bare.round_trip.min_us > 0.0, "{bare:?}");
        assert!(measure(1, 10).is_err(), "no echo");
        assert!(measure(4, 0).is_err(), "no round");
    }

    #[test]
    fn a_paced_bus_keeps_its_rate_and_counts_every_threads_cpu() {
        let bare = paced(2, 2_000.0, 0.3).unwrap();
        // Every frame due in 0.3 s at 2,000 a second, on an absolute schedule.
        assert_eq!(bare.frames, 600, "{bare:?}");
        assert!(bare.bus_cpu_percent > 0.0 && bare.all_cpu_percent > bare.bus_cpu_percent, "{bare:?}");
        assert!(paced(0, 1.0, 1.0).is_err(), "no receiver");
    }
}
