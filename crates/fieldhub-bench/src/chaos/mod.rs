//! The chaos run of the local path (`fieldhub bench soak --chaos`; a few
//! seeds run in the system tests): numbered senders and lossless receivers
//! on one channel of a real hub, while a seeded schedule injects what a
//! bench does to a bus — fault rules that drop, corrupt and delay frames,
//! a shorted channel, a controller forced bus-off, a pulled cable, clients
//! SIGKILLed mid-traffic.
//!
//! Afterwards it checks the frame-fate contract (`docs/frame-fate.md`) for
//! every numbered frame: on every receiver, in one order, or reported to its
//! sender (`TX_DROPPED`, through `flush`) and counted by the hub — and that
//! each sender's frames kept their order. A seed reproduces its schedule.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientError, ClientOptions, DropTally, Frame, PortConfig};
use serde::Serialize;

mod schedule;

use schedule::{Ctl, Injection, Noise, Rng};

use crate::hub_process::{HubProcess, TIMED_CHANNEL};
use crate::{BenchError, Launcher, Progress, Transport, CHANNEL, PATIENCE};

/// Numbered senders per run, each on its own transport and identifier.
const SENDERS: usize = 3;
/// Lossless receivers per run.
const RECEIVERS: usize = 2;
/// First identifier of the numbered senders (sender k sends `BASE_ID + k`).
const BASE_ID: u32 = 0x100;
/// The identifier of the end marker: every receiver has everything before it.
const END_ID: u32 = 0x7FF;
/// How often a sender flushes (and hears of drops) while it sends.
const FLUSH_EVERY: u64 = 64;

/// What to run.
#[derive(Clone, Debug)]
pub struct ChaosRun {
    /// The first seed; seeds `seed .. seed + runs` run one after another.
    pub seed: u64,
    pub runs: u64,
    /// Numbered frames each sender hands over per run.
    pub frames: u64,
}

/// What one seed's run saw.
#[derive(Debug, Serialize)]
pub struct SeedReport {
    pub seed: u64,
    /// `ideal` or `timed`.
    pub channel: String,
    /// What the schedule did, in order.
    pub injected: Vec<String>,
    /// Numbered frames handed over, all senders.
    pub sent: u64,
    /// Of them, on every receiver.
    pub on_bus: u64,
    /// Of them, reported to their sender as off the bus, by reason.
    pub dropped: BTreeMap<String, u64>,
    pub problems: Vec<String>,
}

/// What the whole run saw.
#[derive(Debug, Serialize)]
pub struct ChaosReport {
    pub seeds: Vec<SeedReport>,
    pub seconds: f64,
}

impl ChaosReport {
    /// Every problem of every seed, named by its seed.
    pub fn problems(&self) -> Vec<String> {
        self.seeds.iter().flat_map(|s| s.problems.iter().map(move |p| format!("seed {}: {p}", s.seed))).collect()
    }
}

/// Run every seed of `spec`.
pub fn run(launcher: &Launcher, spec: &ChaosRun, progress: Progress<'_>) -> Result<ChaosReport, BenchError> {
    if spec.frames < FLUSH_EVERY {
        return Err(BenchError::Invalid(format!("--frames {}: a chaos run needs at least {FLUSH_EVERY}", spec.frames)));
    }
    let started = Instant::now();
    let mut seeds = Vec::new();
    for seed in spec.seed..spec.seed + spec.runs {
        let report = run_seed(launcher, seed, spec.frames)?;
        progress(&format!(
            "chaos seed {seed} ({}): {} sent, {} on the bus, {} dropped, {} problem(s)",
            report.channel,
            report.sent,
            report.on_bus,
            report.dropped.values().sum::<u64>(),
            report.problems.len()
        ));
        seeds.push(report);
    }
    Ok(ChaosReport { seeds, seconds: started.elapsed().as_secs_f64() })
}

/// Print a report for people.
pub fn print(report: &ChaosReport) {
    for s in &report.seeds {
        let dropped: Vec<String> = s.dropped.iter().map(|(reason, n)| format!("{reason} {n}")).collect();
        println!(
            "seed {:>4} {:<5}: {:>6} sent, {:>6} on every receiver, dropped and told: [{}]; {}",
            s.seed,
            s.channel,
            s.sent,
            s.on_bus,
            dropped.join(", "),
            s.injected.join(", ")
        );
        for problem in &s.problems {
            println!("    PROBLEM: {problem}");
        }
    }
    let problems = report.problems().len();
    println!("{} seed(s) in {:.1} s, {problems} problem(s)", report.seeds.len(), report.seconds);
}

fn run_seed(launcher: &Launcher, seed: u64, frames: u64) -> Result<SeedReport, BenchError> {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).max(1));
    let timed = rng.below(2) == 1;
    let channel = if timed { TIMED_CHANNEL } else { CHANNEL };
    let hub = HubProcess::start_with_timed_channel(launcher)?;
    let transports = [Transport::Shm, Transport::Tcp, Transport::Unix];
    let connect = |name: String, transport: Transport| {
        Client::connect_with(&hub.url(transport, false), &ClientOptions { name, ..ClientOptions::default() })
    };
    let lossless = crate::lossless_port();
    let receivers: Vec<Client> =
        (0..RECEIVERS).map(|i| connect(format!("chaos-rx{i}"), transports[i % 3])).collect::<Result<_, _>>()?;
    for r in &receivers {
        r.open_port_with(channel, &lossless)?;
    }
    let senders: Vec<Client> =
        (0..SENDERS).map(|k| connect(format!("chaos-tx{k}"), transports[k % 3])).collect::<Result<_, _>>()?;
    let mut ports = Vec::new();
    for (k, s) in senders.iter().enumerate() {
        ports.push(s.open_port_with(channel, &PortConfig { name: Some(port_name(seed, k)), ..crate::fd_port() })?);
    }
    let sender_ids: Vec<u32> = ports.iter().map(|p| p.port_id).collect();
    let plan: Vec<(u64, Injection)> = {
        let mut plan: Vec<(u64, Injection)> =
            (0..2 + rng.below(3)).map(|_| (rng.below(frames), Injection::pick(&mut rng))).collect();
        plan.sort_by_key(|(at, _)| *at);
        plan
    };
    let mut noise = Noise { launcher, hub: &hub, channel, children: Vec::new() };
    noise.spawn()?;
    let ctl = Ctl { launcher, url: hub.url(Transport::Tcp, false) };

    let mut injected = Vec::new();
    let mut problems = Vec::new();
    // The senders send up to `gate` frames each; the schedule opens it
    // injection by injection, so every injection meets traffic however fast
    // the channel is, and a seed's schedule lands at the same frames.
    let gate = AtomicU64::new(0);
    let progress: Vec<AtomicU64> = (0..SENDERS).map(|_| AtomicU64::new(0)).collect();
    let outcome = std::thread::scope(|s| -> Result<Vec<SenderOutcome>, BenchError> {
        let receiving: Vec<_> = receivers.iter().map(|r| s.spawn(|| receive(r, &sender_ids))).collect();
        let sending: Vec<_> = senders
            .iter()
            .zip(&ports)
            .zip(&progress)
            .enumerate()
            .map(|(k, ((client, port), sent))| {
                let gate = &gate;
                s.spawn(move || send_numbered(client, port, k, frames, gate, sent))
            })
            .collect();
        let mut undo: Vec<(Instant, Injection)> = Vec::new();
        for (at, injection) in &plan {
            gate.store(*at, Ordering::Release);
            let deadline = Instant::now() + PATIENCE * 6;
            while progress.iter().any(|p| p.load(Ordering::Acquire) < *at) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            // A schedule may repeat itself (a second short while the first
            // lasts): the hub refuses, and the refusal is part of the record.
            injected.push(match ctl.inject(injection, seed, channel, &mut noise) {
                Ok(done) => done,
                Err(BenchError::Invalid(refused)) => format!("refused: {refused}"),
                Err(e) => return Err(e),
            });
            undo.push((Instant::now() + Duration::from_millis(20 + rng.below(80)), injection.clone()));
            // Traffic meets the injection; earlier ones end when due.
            gate.store(frames, Ordering::Release);
            std::thread::sleep(Duration::from_millis(rng.below(30)));
            undo.retain(|(when, injection)| {
                let due = Instant::now() >= *when;
                if due {
                    ctl.undo(injection, seed, channel);
                }
                !due
            });
        }
        gate.store(frames, Ordering::Release);
        for (when, injection) in undo.drain(..) {
            std::thread::sleep(when.saturating_duration_since(Instant::now()));
            ctl.undo(&injection, seed, channel);
        }
        let outcomes: Vec<SenderOutcome> =
            sending.into_iter().map(|t| t.join().expect("sender thread")).collect::<Result<_, _>>()?;
        noise.stop_all();
        // Everything the senders handed over is on the bus or reported;
        // the marker follows it in the channel's one order.
        let marker = connect("chaos-end".into(), Transport::Tcp)?;
        let port = marker.open_port(channel)?;
        marker.send(&port, &Frame::can(END_ID, false, &[]).expect("a valid frame"))?;
        marker.flush()?;
        let views: Vec<Vec<(u32, u64)>> =
            receiving.into_iter().map(|t| t.join().expect("receiver thread")).collect::<Result<_, _>>()?;
        for (i, view) in views.iter().enumerate().skip(1) {
            if view != &views[0] {
                problems.push(format!("receiver {i} holds another sequence of numbered frames than receiver 0"));
            }
        }
        let mut outcomes = outcomes;
        for (k, outcome) in outcomes.iter_mut().enumerate() {
            let seen: Vec<u64> = views[0].iter().filter(|(id, _)| *id == sender_ids[k]).map(|(_, n)| *n).collect();
            // A delay rule lets later frames overtake the one it holds
            // (docs/control.md): then only the count is the sender's.
            let delayed = plan.iter().any(|(_, i)| matches!(i, Injection::Fault { sender, action, .. } if *sender == k && action.contains("delay")));
            let mut sorted = seen.clone();
            sorted.sort_unstable();
            if let Some(w) = sorted.windows(2).find(|w| w[1] == w[0]) {
                problems.push(format!("sender {k}: counter {} is on the bus twice", w[0]));
            } else if let Some(w) = seen.windows(2).find(|w| w[1] <= w[0] && !delayed) {
                problems.push(format!("sender {k}: counter {} came after {}: its order was not kept", w[1], w[0]));
            }
            outcome.on_bus = seen.len() as u64;
            let told: u64 = outcome.dropped.values().sum();
            if outcome.on_bus + told != frames {
                problems.push(format!(
                    "sender {k}: {} of {frames} frames on the bus and {told} reported dropped: {} unaccounted for",
                    outcome.on_bus,
                    frames as i64 - (outcome.on_bus + told) as i64
                ));
            }
        }
        // What the hub counted for each sender's port matches what it told.
        let stats = senders[0].stats()?;
        for (k, outcome) in outcomes.iter().enumerate() {
            let counted =
                stats.ports.iter().find(|p| p.port_id == sender_ids[k]).map(|p| p.tx_dropped_by_reason.clone());
            if counted.as_ref() != Some(&outcome.dropped) {
                problems.push(format!("sender {k}: told {:?}, the hub counted {counted:?}", outcome.dropped));
            }
        }
        Ok(outcomes)
    })?;
    let mut dropped = BTreeMap::new();
    for outcome in &outcome {
        for (reason, n) in &outcome.dropped {
            *dropped.entry(reason.clone()).or_insert(0) += n;
        }
    }
    Ok(SeedReport {
        seed,
        channel: if timed { "timed" } else { "ideal" }.into(),
        injected,
        sent: frames * SENDERS as u64,
        on_bus: outcome.iter().map(|o| o.on_bus).sum(),
        dropped,
        problems,
    })
}

/// The name of sender `k`'s port: fault rules and `ctl` name it.
fn port_name(seed: u64, k: usize) -> String {
    format!("chaos{seed}-tx{k}")
}

/// What one sender was told.
struct SenderOutcome {
    dropped: BTreeMap<String, u64>,
    on_bus: u64,
}

/// Send `frames` numbered frames (identifier `BASE_ID + k`, counter in the
/// data), flushing now and then; collect every drop report until a flush
/// comes back clean.
fn send_numbered(
    client: &Client,
    port: &fieldhub_client::Port,
    k: usize,
    frames: u64,
    gate: &AtomicU64,
    sent: &AtomicU64,
) -> Result<SenderOutcome, BenchError> {
    let mut dropped = DropTally::default();
    // Whether every frame sent so far is on the bus or reported off it; a
    // confirmation that takes long (a channel held by a short) is asked for
    // again.
    let settled = |dropped: &mut DropTally| match client.flush_all(dropped) {
        Ok(_) => Ok(true),
        Err(ClientError::Timeout(_)) => Ok(false),
        Err(e) => Err(BenchError::from(e)),
    };
    for n in 0..frames {
        // `n` handed over before this one: what the schedule waits for.
        sent.store(n, Ordering::Release);
        while n >= gate.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_micros(200));
        }
        client.send(port, &Frame::can(BASE_ID + k as u32, false, &n.to_le_bytes()).expect("a valid frame"))?;
        if n % FLUSH_EVERY == FLUSH_EVERY - 1 {
            settled(&mut dropped)?;
        }
    }
    sent.store(frames, Ordering::Release);
    let deadline = Instant::now() + PATIENCE * 12;
    while !settled(&mut dropped)? {
        if Instant::now() > deadline {
            return Err(BenchError::Stalled(format!("sender {k}: frames neither on the bus nor reported")));
        }
    }
    Ok(SenderOutcome { dropped: dropped.by_reason().clone(), on_bus: 0 })
}

/// Until the end marker: `(sender port id, counter)` of the numbered frames.
fn receive(client: &Client, sender_ids: &[u32]) -> Result<Vec<(u32, u64)>, BenchError> {
    let mut numbered = Vec::new();
    loop {
        match client.recv(Some(PATIENCE * 12))? {
            Some(r) if r.frame.id() == END_ID && !r.frame.is_error() => return Ok(numbered),
            Some(r) if sender_ids.contains(&r.meta.sender) && !r.frame.is_error() => {
                let counter = r.frame.data().try_into().map(u64::from_le_bytes).unwrap_or(u64::MAX);
                numbered.push((r.meta.sender, counter));
            }
            Some(_) => {}
            None => return Err(BenchError::Stalled("a receiver never saw the end marker".into())),
        }
    }
}
