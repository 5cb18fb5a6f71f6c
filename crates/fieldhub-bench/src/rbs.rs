//! `fieldhub bench rbs`: a rest-bus simulation of a large database in real
//! time (docs/rest-bus.md) — by default 300 messages of 10 nodes at cycles
//! from 10 ms to 1 s, on a timed 1 Mbit/s channel, for 30 s — and how close
//! each message's frames come to its schedule.
//!
//! The hub runs the simulation (`POST /api/v1/rbs/sims`, as `fieldhub rbs`
//! starts one) on a channel the benchmark adds (`POST /api/v1/channels`); a
//! receiver on the channel takes every frame with its bus timestamp. Per
//! message: the period jitter (each interval between consecutive cycles
//! against the nominal cycle) and the lateness of each frame against the
//! message's schedule `first + k·period` — on a timed channel a frame waits
//! for the bus, so lateness up to a few frame times is arbitration, not the
//! scheduler. Each message starts after a delay that spreads its cycle
//! class over the cycle (`GenMsgStartDelayTime`, whole ms, as a network's
//! nodes start apart); the first second is warm-up (the simulation being
//! set up). The figures are in µs and in frame times (the baseline: one
//! 8-byte frame's time at the channel's bitrate, computed exactly), and the
//! cycles a message missed are counted, as are the periods more than one
//! frame time off their cycle; each class names its worst message (the
//! largest period error). The load achieved — the frames that came after
//! the warm-up, at the baseline frame's time each, over the time they took —
//! stands beside the load the database asks for.
//!
//! Then the same database runs for as long in virtual time (a hub of its
//! own, the receiver its one participant stepping 10 ms at a time): the
//! exact outcome, arbitration included. Each real-time frame is compared
//! with the same message's same cycle there ([`exact`]), per cycle class:
//! the deviation in µs and frame times, and the share within one frame time.
//! Both runs count from their simulation's origin (`origin_ns`, the bus time
//! every start delay counts from), which the hub reports when it starts one.
//! Beside them, the machine's floor in the same run ([`floor`]): how late a
//! thread scheduled as the bus thread, sleeping to deadlines 1 ms apart,
//! woke meanwhile; and, for the cycles more than a frame time off, the
//! deadlines the hub's bus thread served late ([`stalls`]: the machine's
//! scheduling or the hub's work).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions, Port, PortConfig, TimerStats};
use fieldhub_proto::Frame;
use serde::Serialize;
use serde_json::{json, Value};

use crate::hub_process::{HubExtras, HubProcess};
use crate::stats::Distribution;
use crate::{BenchError, Launcher, Progress, Transport, PATIENCE};
use exact::{Deviation, Received, Run, Schedule};
use floor::Floor;
use stalls::Stalls;

pub mod exact;
pub mod floor;
pub mod stalls;

/// The channel the simulation runs on.
const RBS_CHANNEL: &str = "bench-rbs";
/// Its bitrate: a classic CAN bus at its fastest.
const BITRATE: u32 = 1_000_000;
/// Cycle classes (ms) and how many of every 30 messages have each: the
/// faster the fewer, so 300 messages load 1 Mbit/s to about half.
const CYCLES: [(u64, usize); 7] = [(10, 1), (20, 2), (50, 4), (100, 8), (200, 6), (500, 5), (1000, 4)];
/// Simulated nodes.
const NODES: usize = 10;
/// What is not measured at the start: every message's first cycle is due
/// at once, and their frames queue for the bus for a while.
const WARM_UP_NS: u64 = 1_000_000_000;
/// The virtual-time receiver's step: a few dozen frames each, well inside
/// its ring.
const VIRTUAL_STEP_NS: u64 = 10 * MS;
const MS: u64 = 1_000_000;

/// What to run.
pub struct RbsRun {
    pub messages: usize,
    pub seconds: u64,
    /// The real-time hub's bus thread under `SCHED_FIFO` (`[hub] realtime`).
    pub realtime: bool,
}

/// One cycle class's figures, over every message of that cycle.
#[derive(Clone, Debug, Serialize)]
pub struct CycleClass {
    pub cycle_ms: u64,
    pub messages: usize,
    pub frames: usize,
    /// Cycles no frame came for.
    pub missed: u64,
    /// |interval − cycle| between consecutive cycles, over every message of the class.
    pub period_error: Distribution,
    /// Periods more than one frame time off the cycle.
    pub periods_off_by_more_than_a_frame: usize,
    /// The message with the largest period error: its identifier, and its
    /// own p99 and max in µs.
    pub worst_message: Option<WorstMessage>,
    /// How late each frame was against its message's schedule.
    pub lateness: Distribution,
    /// The largest lateness in frame times.
    pub max_lateness_frames: f64,
    /// Frames late by at most one frame time, of all.
    pub within_one_frame: f64,
}

/// One message's period error, the worst of its class.
#[derive(Clone, Debug, Serialize)]
pub struct WorstMessage {
    pub id: u32,
    pub p99_us: f64,
    pub max_us: f64,
}

/// The whole run.
#[derive(Clone, Debug, Serialize)]
pub struct RbsReport {
    pub messages: usize,
    pub seconds: u64,
    /// The bus thread ran under `SCHED_FIFO` (`[hub] realtime`).
    pub realtime: bool,
    pub bitrate: u32,
    /// The bus load the database asks for (frames' bits per second / bitrate).
    pub nominal_load: f64,
    /// The load the frames measured make: their count at the baseline
    /// frame's time, over the time from the warm-up's end to the last.
    pub achieved_load: f64,
    /// One 8-byte classic frame's time on the bus (the baseline), µs.
    pub frame_time_us: f64,
    pub classes: Vec<CycleClass>,
    /// Per cycle class, each real-time frame against the same cycle in
    /// virtual time: the deviation from the exact arbitration outcome.
    pub against_exact: Vec<Deviation>,
    /// How late a thread of the benchmark, scheduled as the bus thread,
    /// woke for deadlines 1 ms apart during the real-time run, after the
    /// warm-up: the machine's floor ([`floor`]).
    pub floor: Distribution,
    /// The cycles more than one frame time off, beside the bus thread's
    /// late deadlines ([`stalls`]).
    pub stalls: Stalls,
}

impl std::fmt::Display for RbsReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "rest-bus simulation: {} messages for {} s on {} kbit/s, load {:.1} % achieved of {:.1} % nominal, \
             one frame time {:.1} µs; bus thread {}",
            self.messages,
            self.seconds,
            self.bitrate / 1000,
            self.achieved_load * 100.0,
            self.nominal_load * 100.0,
            self.frame_time_us,
            if self.realtime { "SCHED_FIFO ([hub] realtime)" } else { "normal priority" }
        )?;
        writeln!(
            f,
            "cycle  msgs  frames  missed  |period error| p50/p99/max µs  >1 frame   late p50/p99/max µs   max late  \
             ≤1 frame   worst message p99/max µs"
        )?;
        for c in &self.classes {
            writeln!(
                f,
                "{:>4}ms {:>4} {:>7} {:>7}  {:>7.1} {:>7.1} {:>7.1}  {:>8}   {:>6.1} {:>6.1} {:>7.1}   {:>5.2} fr  \
                 {:>6.2} %   {}",
                c.cycle_ms,
                c.messages,
                c.frames,
                c.missed,
                c.period_error.p50_us,
                c.period_error.p99_us,
                c.period_error.max_us,
                c.periods_off_by_more_than_a_frame,
                c.lateness.p50_us,
                c.lateness.p99_us,
                c.lateness.max_us,
                c.max_lateness_frames,
                c.within_one_frame * 100.0,
                c.worst_message
                    .as_ref()
                    .map_or("-".into(), |w| format!("0x{:X} {:.1}/{:.1}", w.id, w.p99_us, w.max_us))
            )?;
        }
        writeln!(f, "against the exact outcome (the same database in virtual time, same message and cycle):")?;
        writeln!(f, "cycle  matched  unmatched  |deviation| p50/p99/max µs     in frame times        ≤1 frame")?;
        for d in &self.against_exact {
            writeln!(
                f,
                "{:>4}ms {:>8} {:>10}  {:>7.1} {:>7.1} {:>8.1}   {:>5.2} {:>5.2} {:>6.2}   {:>6.2} %",
                d.cycle_ms,
                d.matched,
                d.unmatched,
                d.deviation.p50_us,
                d.deviation.p99_us,
                d.deviation.max_us,
                d.p50_frames,
                d.p99_frames,
                d.max_frames,
                d.within_one_frame * 100.0
            )?;
        }
        let d = &self.floor;
        writeln!(
            f,
            "the machine's floor: a thread scheduled as the bus thread, sleeping to deadlines 1 ms apart, woke late by \
             p50 {:.1} / p99 {:.1} / max {:.1} µs ({} wake-ups)",
            d.p50_us, d.p99_us, d.max_us, d.samples
        )?;
        write!(f, "{}", self.stalls)
    }
}

/// The cycle of message `i`.
fn cycle_of(i: usize) -> u64 {
    let mut slot = i % 30;
    for (cycle, share) in CYCLES {
        if slot < share {
            return cycle;
        }
        slot -= share;
    }
    CYCLES[CYCLES.len() - 1].0
}

/// The start delay of message `i` (ms): the messages of a cycle class
/// spread evenly over their cycle, as a network's nodes start apart —
/// without it every message would be due at once each second, a queue of
/// the whole database on the bus (300 frames, 38 ms at 1 Mbit/s).
fn start_delay_of(i: usize, messages: usize) -> u64 {
    let cycle = cycle_of(i);
    let class: Vec<usize> = (0..messages).filter(|&m| cycle_of(m) == cycle).collect();
    let place = class.iter().position(|&m| m == i).unwrap_or(0) as u64;
    place * cycle / class.len().max(1) as u64
}

/// A DBC of `messages` 8-byte messages, identifiers 0x100 up, sent by
/// `NODES` nodes in turn, each with its cycle, its start delay and one
/// 16-bit signal.
fn database(messages: usize) -> String {
    let nodes: Vec<String> = (0..NODES).map(|n| format!("NODE{n}")).collect();
    let mut text = format!("VERSION \"\"\n\nNS_ :\n\nBS_:\n\nBU_: {} DUT\n\n", nodes.join(" "));
    for i in 0..messages {
        let id = 0x100 + i;
        text += &format!("BO_ {id} M{i}: 8 {}\n SG_ S{i} : 0|16@1+ (1,0) [0|65535] \"\" DUT\n\n", nodes[i % NODES]);
    }
    text += "BA_DEF_ BO_ \"GenMsgCycleTime\" INT 0 65535;\nBA_DEF_DEF_ \"GenMsgCycleTime\" 0;\n";
    text += "BA_DEF_ BO_ \"GenMsgStartDelayTime\" INT 0 65535;\nBA_DEF_DEF_ \"GenMsgStartDelayTime\" 0;\n";
    for i in 0..messages {
        text += &format!("BA_ \"GenMsgCycleTime\" BO_ {} {};\n", 0x100 + i, cycle_of(i));
        text += &format!("BA_ \"GenMsgStartDelayTime\" BO_ {} {};\n", 0x100 + i, start_delay_of(i, messages));
    }
    text
}

/// One control API call over plain HTTP/1.1; the JSON answer of a 2xx.
fn call(hub: SocketAddr, method: &str, path: &str, body: &Value) -> Result<Value, BenchError> {
    let body = body.to_string();
    let mut stream = TcpStream::connect(hub)?;
    stream.set_read_timeout(Some(PATIENCE))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {hub}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer.split(' ').nth(1).unwrap_or("");
    let content = answer.split_once("\r\n\r\n").map_or("", |(_, content)| content);
    if !status.starts_with('2') {
        return Err(BenchError::Hub(format!("{method} {path}: {status}: {content}")));
    }
    serde_json::from_str(content).map_err(|e| BenchError::Hub(format!("{method} {path}: not JSON ({e}): {content}")))
}

/// Run the simulation against a hub of its own in real time and measure it,
/// then run it again in virtual time for the exact outcome to compare with.
pub fn run(launcher: &Launcher, spec: &RbsRun, progress: Progress<'_>) -> Result<RbsReport, BenchError> {
    if spec.messages == 0 || spec.messages > 0x700 || spec.seconds < 2 {
        return Err(BenchError::Invalid(
            "give 1 to 1792 messages and at least 2 seconds (the first is warm-up)".into(),
        ));
    }
    progress(&format!("{} messages for {} s in real time", spec.messages, spec.seconds));
    let floor = Floor::start(spec.realtime)?;
    let real_run = in_real_time(launcher, spec);
    let floor = floor.stop(Duration::from_nanos(WARM_UP_NS));
    let (mut seen, real_origin, timer) = real_run?;
    progress(&format!(
        "{} messages for {} s of bus time in virtual time: the exact outcome",
        spec.messages, spec.seconds
    ));
    let (exact, exact_origin) = in_virtual_time(launcher, spec)?;
    let real = seen.clone();
    // The schedule is measured from WARM_UP_NS after the first frame, once
    // every message has started.
    let begin = seen.values().filter_map(|t| t.first()).min().copied().unwrap_or(0);
    for times in seen.values_mut() {
        times.retain(|&t| t >= begin + WARM_UP_NS);
    }
    let frame = Frame::can(0x100, false, &[0; 8]).map_err(|e| BenchError::Invalid(e.to_string()))?;
    let frame_ns = fieldhub_proto::bits::FrameBits::of(&frame).duration_ns(BITRATE, BITRATE) as f64;
    let nominal_load = (0..spec.messages).map(|i| 1000.0 / cycle_of(i) as f64).sum::<f64>() * frame_ns / 1e9;
    let measured = seen.values().map(Vec::len).sum::<usize>();
    let last = seen.values().filter_map(|t| t.last()).max().copied().unwrap_or(0);
    let window_ns = last.saturating_sub(begin + WARM_UP_NS);
    let achieved_load = if window_ns == 0 { 0.0 } else { measured as f64 * frame_ns / window_ns as f64 };
    let in_class = |cycle_ms: u64| (0..spec.messages).filter(move |&i| cycle_of(i) == cycle_ms);
    let present = CYCLES.iter().map(|&(cycle_ms, _)| cycle_ms).filter(|&c| in_class(c).next().is_some());
    let classes = present
        .clone()
        .map(|cycle_ms| {
            let ids: Vec<u32> = in_class(cycle_ms).map(|i| 0x100 + i as u32).collect();
            class(cycle_ms, &ids, &seen, frame_ns)
        })
        .collect();
    let real = Run { frames: &real, origin_ns: real_origin };
    let exact = Run { frames: &exact, origin_ns: exact_origin };
    let against_exact: Vec<Deviation> = present
        .map(|cycle_ms| {
            let schedules: Vec<Schedule> = in_class(cycle_ms)
                .map(|i| Schedule {
                    id: 0x100 + i as u32,
                    period_ns: cycle_ms * MS,
                    delay_ns: start_delay_of(i, spec.messages) * MS,
                })
                .collect();
            exact::compare(cycle_ms, &schedules, real, exact, WARM_UP_NS, frame_ns)
        })
        .collect();
    let off: Vec<_> = against_exact.iter().flat_map(|d| d.off.iter().copied()).collect();
    let stalls = stalls::explain(&off, &timer, real_origin);
    Ok(RbsReport {
        messages: spec.messages,
        seconds: spec.seconds,
        realtime: spec.realtime,
        bitrate: BITRATE,
        nominal_load,
        achieved_load,
        frame_time_us: frame_ns / 1e3,
        classes,
        against_exact,
        floor,
        stalls,
    })
}

/// Add the benchmark's channel and its simulation to `hub` with `receiver`
/// on the channel: its port there, and the simulation's origin (bus time).
fn start_simulation(hub: &HubProcess, receiver: &Client, messages: usize) -> Result<(Port, u64), BenchError> {
    let url = hub.url(Transport::Tcp, false);
    let control: SocketAddr = url
        .strip_prefix("tcp://")
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| BenchError::Hub(format!("the hub's TCP address {url} is not HOST:PORT")))?;
    let channel = json!({ "name": RBS_CHANNEL, "protocol": "can", "bitrate": BITRATE, "timing": "timed" });
    call(control, "POST", "/api/v1/channels", &channel)?;
    let port =
        receiver.open_port_with(RBS_CHANNEL, &PortConfig { name: Some("dut".into()), ..PortConfig::default() })?;
    let sim = json!({ "name": "bench.dbc", "dbc": database(messages), "channel": RBS_CHANNEL, "except": ["DUT"] });
    let started = call(control, "POST", "/api/v1/rbs/sims", &sim)?;
    let origin = started["origin_ns"]
        .as_u64()
        .ok_or_else(|| BenchError::Hub(format!("the started simulation names no origin_ns: {started}")))?;
    Ok((port, origin))
}

/// The frames of `spec.seconds` of the simulation in real time, its origin,
/// and how late the hub's bus thread served its deadlines meanwhile.
fn in_real_time(launcher: &Launcher, spec: &RbsRun) -> Result<(Received, u64, TimerStats), BenchError> {
    let hub = match spec.realtime {
        true => HubProcess::start_with_extras(
            launcher,
            HubExtras { hub_keys: "realtime = true\n".into(), ..Default::default() },
        )?,
        false => HubProcess::start(launcher, false)?,
    };
    let options = ClientOptions { name: "receiver".into(), timeout: PATIENCE, ..Default::default() };
    let receiver = Client::connect_with(&hub.url(Transport::Shm, false), &options)?;
    let (_port, origin) = start_simulation(&hub, &receiver, spec.messages)?;
    let mut seen = Received::new();
    let end = Instant::now() + Duration::from_secs(spec.seconds);
    while Instant::now() < end {
        if let Some(rx) = receiver.recv(Some(Duration::from_millis(100)))? {
            seen.entry(rx.frame.id()).or_default().push(rx.meta.timestamp_ns);
        }
    }
    let timer = receiver.stats()?.timer.ok_or_else(|| {
        BenchError::Hub("the real-time hub's statistics have no `timer`: is it a hub of this version?".into())
    })?;
    Ok((seen, origin, timer))
}

/// The frames of `spec.seconds` of bus time of the same simulation in
/// virtual time — the exact outcome — and its origin. The receiver is the
/// one participant: bus time moves in its steps of [`VIRTUAL_STEP_NS`].
fn in_virtual_time(launcher: &Launcher, spec: &RbsRun) -> Result<(Received, u64), BenchError> {
    let hub = HubProcess::start_in_virtual_time(launcher)?;
    let options =
        ClientOptions { name: "receiver".into(), timeout: PATIENCE, synchronized: true, ..Default::default() };
    let receiver = Client::connect_with(&hub.url(Transport::Shm, false), &options)?;
    let (port, origin) = start_simulation(&hub, &receiver, spec.messages)?;
    let mut seen = Received::new();
    let end = origin + spec.seconds * 1_000_000_000;
    let mut at = receiver.now().unwrap_or(origin);
    while at < end {
        at = receiver.step(at + VIRTUAL_STEP_NS)?;
        while let Some(rx) = receiver.recv(Some(Duration::ZERO))? {
            seen.entry(rx.frame.id()).or_default().push(rx.meta.timestamp_ns);
        }
    }
    let dropped = receiver.rx_dropped(&port);
    if dropped > 0 {
        return Err(BenchError::Hub(format!("the virtual-time receiver lost {dropped} frames: no exact outcome")));
    }
    Ok((seen, origin))
}

/// The figures of one cycle class.
fn class(cycle_ms: u64, ids: &[u32], seen: &BTreeMap<u32, Vec<u64>>, frame_ns: f64) -> CycleClass {
    let period = cycle_ms * 1_000_000;
    let (mut lateness, mut period_error, mut missed) = (Vec::new(), Vec::new(), 0);
    let mut worst: Option<(u32, Vec<u64>)> = None;
    for id in ids {
        let Some(times) = seen.get(id).filter(|t| !t.is_empty()) else { continue };
        // Its schedule: every period from the earliest start its frames
        // imply (cycle numbers counted from its first frame); a frame's
        // lateness is how far after that schedule it came.
        let first = times[0];
        let cycles: Vec<u64> = times.iter().map(|t| (t - first + period / 2) / period).collect();
        let implied: Vec<i128> =
            times.iter().zip(&cycles).map(|(&t, &k)| i128::from(t) - i128::from(k * period)).collect();
        let start = implied.iter().copied().min().unwrap_or(0);
        lateness.extend(implied.iter().map(|&at| u64::try_from(at - start).unwrap_or(u64::MAX)));
        // Cycles no frame came for: two frames can fall in one cycle (one
        // late by over half a period, the next on time), so count cycles.
        let cycles_seen = cycles.windows(2).filter(|k| k[1] != k[0]).count() as u64 + 1;
        missed += cycles.last().map_or(0, |last| last + 1).saturating_sub(cycles_seen);
        // Consecutive cycles only: a missed one is counted above, not here.
        let own: Vec<u64> = times
            .windows(2)
            .zip(cycles.windows(2))
            .filter(|(_, k)| k[1] == k[0] + 1)
            .map(|(pair, _)| (pair[1] - pair[0]).abs_diff(period))
            .collect();
        period_error.extend_from_slice(&own);
        let max_of = |errors: &[u64]| errors.iter().copied().max().unwrap_or(0);
        if worst.as_ref().is_none_or(|(_, errors)| max_of(&own) > max_of(errors)) {
            worst = Some((*id, own));
        }
    }
    let off = period_error.iter().filter(|&&e| e as f64 > frame_ns).count();
    let worst_message = worst.map(|(id, mut errors)| {
        let d = Distribution::of(&mut errors);
        WorstMessage { id, p99_us: d.p99_us, max_us: d.max_us }
    });
    let within = lateness.iter().filter(|&&l| l as f64 <= frame_ns).count();
    let frames = lateness.len();
    let max_late = lateness.iter().copied().max().unwrap_or(0) as f64;
    CycleClass {
        cycle_ms,
        messages: ids.len(),
        frames,
        missed,
        period_error: Distribution::of(&mut period_error),
        periods_off_by_more_than_a_frame: off,
        worst_message,
        lateness: Distribution::of(&mut lateness),
        max_lateness_frames: max_late / frame_ns,
        within_one_frame: if frames == 0 { 0.0 } else { within as f64 / frames as f64 },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_hundred_messages_take_every_cycle_class_and_the_database_gives_each_its_cycle() {
        let counts: Vec<usize> = CYCLES.iter().map(|&(c, _)| (0..300).filter(|&i| cycle_of(i) == c).count()).collect();
        assert_eq!(counts, [10, 20, 40, 80, 60, 50, 40]);
        let text = database(300);
        assert_eq!(text.lines().filter(|l| l.starts_with("BO_ ")).count(), 300);
        assert_eq!(text.lines().filter(|l| l.starts_with("BA_ \"GenMsgCycleTime\" BO_ ")).count(), 300);
        assert!(text.contains("BA_ \"GenMsgCycleTime\" BO_ 256 10;") && text.contains("BU_: NODE0"));
        let delays: Vec<u64> = (0..300).filter(|&i| cycle_of(i) == 10).map(|i| start_delay_of(i, 300)).collect();
        assert_eq!(delays, (0..10).collect::<Vec<_>>(), "the 10 ms messages 1 ms apart");
        assert!((0..300).all(|i| start_delay_of(i, 300) < cycle_of(i)));
    }

    #[test]
    fn a_class_counts_periods_off_by_more_than_a_frame_and_names_its_worst_message() {
        const MS: u64 = 1_000_000;
        let frame_ns = 130_000.0;
        // 0x100 on time; 0x101 one period 200 µs long (and the next 200 µs
        // short), one 100 µs long, and one cycle missed (not a period).
        let on_time: Vec<u64> = (0..5).map(|k| k * 10 * MS).collect();
        let jittery = vec![0, 10 * MS + 200_000, 20 * MS, 30 * MS + 100_000, 50 * MS + 100_000];
        // 0x102: its second frame 6 ms late, in the third cycle with the next.
        let late = vec![0, 16 * MS, 20 * MS, 30 * MS];
        let seen = BTreeMap::from([(0x100, on_time.clone()), (0x101, jittery)]);
        let c = class(10, &[0x100, 0x101], &seen, frame_ns);
        assert_eq!((c.frames, c.missed), (10, 1));
        assert_eq!(c.period_error.samples, 7, "4 on time, 3 of 0x101's consecutive cycles");
        assert_eq!(c.periods_off_by_more_than_a_frame, 2, "200 µs twice; 100 µs is within a frame time");
        let seen = BTreeMap::from([(0x100, on_time), (0x102, late)]);
        assert_eq!(class(10, &[0x100, 0x102], &seen, frame_ns).missed, 1, "cycle 1 had no frame");
        let worst = c.worst_message.unwrap();
        assert_eq!((worst.id, worst.max_us), (0x101, 200.0));
    }
}
