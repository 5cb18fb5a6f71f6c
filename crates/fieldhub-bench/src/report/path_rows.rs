//! Section 8's rows: one per line of issue 35's table — the hub's figure,
//! the baseline of the same run, their ratio, the target, whether it is met,
//! and the bound measured in the same run from the path's primitives
//! ([`crate::floors`]): a floor for times and CPU (what the path cannot go
//! below), a ceiling for rates (what it cannot go above).
//!
//! How each bound counts its primitives:
//! - federation round trip: the raw TCP round trip across the veth pair, one
//!   hub's local round trip, and the six thread hand-offs the relayed path
//!   has beyond it: the relay's uplink and the owner's event writer publish
//!   themselves (Zenoh's low-latency transport has no transmit task), a
//!   Zenoh receive thread takes each message on the other hub, and the
//!   owner's writer and the relay's receive thread each pass the frame on
//!   once more (the request, then the echo's answer);
//! - federation throughput: the same flood through two hubs chained without
//!   Zenoh ([`crate::federation`]: a client of the benchmark forwards every
//!   frame from the first hub's channel to the second's), measured right
//!   after: the two bus passes a relayed frame takes at the least, with a
//!   socket hop each way between the hubs where the federation has its
//!   threads and Zenoh's link; the text adds the CPU a frame of the
//!   relayed, chained and one-hub floods and the cores the machine left
//!   idle, from [`crate::thread_cpu`];
//! - SIL Kit through the hub: two plain SIL Kit round trips (every frame
//!   crosses SIL Kit twice: to the simulator, from it) and four thread
//!   hand-offs (SIL Kit's thread to the bus and back, each way);
//! - many clients (p50, p99 and mean): the same round trips on a bus of
//!   nothing but its wake-ups ([`crate::bare_fan_out`]: a bus thread and as
//!   many client threads, waiting as the hub and its clients do, threads of
//!   one process, which switch cheaper than the hub's processes do),
//!   measured right after the hub's; the text adds the sleeps the kernel
//!   counted per round trip in the hub's run ([`crate::sleeps`]) and the
//!   least CPU they cost;
//! - CPU: the same paced load on a bare bus ([`crate::bare_fan_out::paced`]):
//!   its bus thread's CPU for the hub alone, every thread's for hub and
//!   clients; the text adds the sleeps counted per frame in the hub's run;
//! - shm throughput: every frame crosses a ring into the hub and one out to
//!   each receiver, each ring hop costing what the raw two-process stream
//!   spends per frame on both cores: at most raw / (1 + receivers) frames/s.

use serde::Serialize;

use super::document::{Cell, Section, Table};
use super::paths::{Outcome, PathFigures};
use super::ReportError;
use crate::floors::{wake_cpu_percent, wake_time_floor_us};
use crate::sleeps::Sleeps;

/// One line of issue 35's table.
#[derive(Debug, Serialize)]
pub struct PathRow {
    pub path: String,
    pub unit: &'static str,
    pub hub: Option<f64>,
    pub baseline: Option<f64>,
    /// What the baseline is.
    pub baseline_is: String,
    /// `hub / baseline`.
    pub ratio: Option<f64>,
    pub target: Option<f64>,
    /// The target in words, as the issue states it.
    pub target_is: &'static str,
    /// Higher is better (a rate), else lower (a time, CPU).
    pub higher_is_better: bool,
    pub met: Option<bool>,
    pub bound: Option<f64>,
    /// How the bound was measured, or why there is none.
    pub bound_is: String,
    /// Why the row has no figures, when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_measured: Option<String>,
}

impl PathRow {
    fn new(path: String, unit: &'static str, target_is: &'static str, higher_is_better: bool) -> Self {
        Self {
            path,
            unit,
            hub: None,
            baseline: None,
            baseline_is: String::new(),
            ratio: None,
            target: None,
            target_is,
            higher_is_better,
            met: None,
            bound: None,
            bound_is: String::new(),
            not_measured: None,
        }
    }

    /// Fill in the figures; `met` and `ratio` follow from them.
    fn measured(mut self, hub: f64, baseline: f64, baseline_is: String, target: f64) -> Self {
        self.hub = Some(hub);
        self.baseline = Some(baseline);
        self.baseline_is = baseline_is;
        self.ratio = Some(crate::stats::ratio(hub, baseline));
        self.target = Some(target);
        self.met = Some(if self.higher_is_better { hub >= target } else { hub <= target });
        self
    }

    fn bound(mut self, bound: f64, how: String) -> Self {
        self.bound = Some(bound);
        self.bound_is = how;
        self
    }

    fn missing(mut self, why: &str) -> Self {
        self.not_measured = Some(why.to_owned());
        self
    }
}

/// A row from `outcome`, or one that says why it has no figures.
fn row_of<T>(outcome: &Outcome<T>, empty: PathRow, fill: impl FnOnce(PathRow, &T) -> PathRow) -> PathRow {
    match outcome {
        Ok(figures) => fill(empty, figures),
        Err(why) => empty.missing(why),
    }
}

/// The rows, in the order of the issue's table.
pub fn rows(f: &PathFigures) -> Vec<PathRow> {
    let hand_off = f.floors.thread_hand_off.p50_us;
    let mut rows = Vec::new();
    rows.push(row_of(
        &f.federation,
        PathRow::new(
            "federation round trip p50, client on relay → owner → relay".into(),
            "µs",
            "≤ 2× raw TCP + one hub's round trip",
            false,
        ),
        |row, x| {
            let (raw, one) = (x.raw_tcp.p50_us, x.one_hub.p50_us);
            row.measured(
                x.relay_owner_relay.p50_us,
                raw,
                format!("raw TCP across the veth pair (one hub's local round trip {one:.1} µs)"),
                2.0 * raw + one,
            )
            .bound(
                raw + one + 6.0 * hand_off,
                format!(
                    "raw TCP + one hub + 6 thread hand-offs of {hand_off:.1} µs (publishing threads and Zenoh's \
                     receive threads); the kernel counted {:.1} sleeps a \
                     relayed round trip in this run ({}; busiest threads: {})",
                    x.relayed_sleeps.per_event(x.relayed_sleeps.total()),
                    sleeps_of(&x.relayed_sleeps, "round trip"),
                    busiest(&x.relayed_sleeps, 6)
                ),
            )
        },
    ));
    rows.push(row_of(
        &f.federation,
        PathRow::new(
            "federation throughput, sender on relay → lossless receiver on owner".into(),
            "frames/s",
            "≥ 0.5× one hub",
            true,
        ),
        |row, x| {
            let one = x.one_hub_rate.frames_per_s;
            let (relayed, chained) = (&x.relayed_flood_cpu, &x.chained_flood_cpu);
            row.measured(x.relay_to_owner_rate.frames_per_s, one, "one hub's local channel".into(), 0.5 * one).bound(
                x.chained_rate.frames_per_s,
                format!(
                    "the same flood through two hubs chained without Zenoh, measured after: a client of the \
                     benchmark forwards every frame from the first hub's channel to the second's (two bus passes, \
                     as a relayed frame takes, and a socket hop each way between the hubs); CPU a frame in this \
                     run: relayed {:.0} ns (its hubs {:.0}), chained {:.0} ns (its hubs {:.0}), one hub {:.0} ns; \
                     cores the machine left idle over the relayed flood: {}",
                    relayed.per_event_ns(relayed.total_ns()),
                    relayed.per_event_ns(relayed.hubs_ns()),
                    chained.per_event_ns(chained.total_ns()),
                    chained.per_event_ns(chained.hubs_ns()),
                    x.one_hub_flood_cpu.per_event_ns(x.one_hub_flood_cpu.total_ns()),
                    relayed.idle_cores.map_or("unknown".into(), |c| format!("{c:.2} of {}", f.floors.cores)),
                ),
            )
        },
    ));
    rows.push(row_of(
        &f.simulator,
        PathRow::new(
            "SIL Kit participant → hub as network simulator → echo participant, p50".into(),
            "µs",
            "≤ 2× plain SIL Kit + the hub's own shm round trip",
            false,
        ),
        |row, x| {
            let plain = x.plain_silkit.p50_us;
            row.measured(
                x.via_hub.p50_us,
                plain,
                "plain SIL Kit, two participants".into(),
                2.0 * plain + x.hub_shm.p50_us,
            )
            .bound(
                2.0 * plain + 4.0 * hand_off,
                format!("2 plain SIL Kit round trips + 4 thread hand-offs of {hand_off:.1} µs"),
            )
        },
    ));
    let n = f.fan_out.clients;
    let (wake_cpu, cores) = (f.floors.wake.cpu_us, f.floors.cores);
    let trips = &f.fan_out.sleeps;
    let per_trip = trips.per_event(trips.total());
    // Every sleep the run took was a wake-up: its CPU is spent on the
    // machine's cores whatever the order of the wake-ups.
    let counted_floor = wake_time_floor_us(per_trip, wake_cpu, cores);
    let bare = &f.fan_out.bare;
    for (at, hub, bare, silkit) in [
        ("p50", f.fan_out.hub.p50_us, bare.p50_us, f.fan_out.silkit.as_ref().map(|s| s.p50_us)),
        ("p99", f.fan_out.hub.p99_us, bare.p99_us, f.fan_out.silkit.as_ref().map(|s| s.p99_us)),
        ("mean", f.fan_out.hub.mean_us, bare.mean_us, f.fan_out.silkit.as_ref().map(|s| s.mean_us)),
    ] {
        let empty = PathRow::new(
            format!("{n} clients on one channel, each reading every frame: round trip {at}"),
            "µs",
            "≤ 0.25× SIL Kit",
            false,
        );
        rows.push(match silkit {
            Ok(silkit) => {
                empty.measured(hub, silkit, format!("SIL Kit, {n} participants on one network"), 0.25 * silkit).bound(
                    bare,
                    format!(
                        "the same round trips with nothing in them but their wake-ups, measured after the hub's: a \
                         bus thread and {n} client threads of one process, each client reading every frame \
                         (bench's bare_fan_out; one process switches cheaper than the hub's processes do); the \
                         kernel counted {per_trip:.1} sleeps a round trip in the hub's run ({}), at least \
                         {counted_floor:.1} µs of the {cores} cores' time at {wake_cpu:.2} µs a wake-up",
                        sleeps_of(trips, "round trip")
                    ),
                )
            }
            Err(why) => empty.missing(why),
        });
    }
    let phase = &f.cpu.hub;
    let (frames, rate) = (&phase.sleeps, phase.frames_per_s);
    let hub_cpu = phase.hub.cpu_percent_precise.unwrap_or(phase.hub.cpu_percent);
    let clients_cpu = phase.client_process.cpu_percent_precise.unwrap_or(phase.client_process.cpu_percent);
    let (per_frame_all, per_frame_hub) = (frames.per_event(frames.total()), frames.per_event(frames.hub()));
    let bare = &f.cpu.bare;
    let bare_is = |whose: &str| {
        format!(
            "{whose} of the same load on a bus of nothing but wake-ups, measured after the hub's: a bus thread, a \
             sender at {:.0} frames/s and {} receivers, threads of one process (bench's bare_fan_out)",
            bare.frames_per_s, bare.receivers
        )
    };
    rows.push(row_of(
        &f.cpu.silkit,
        PathRow::new("CPU at 500 kbit/s, 1 sender and 2 receivers: hub + clients".into(), "%", "≤ 0.5× SIL Kit", false),
        |row, s| {
            row.measured(
                hub_cpu + clients_cpu,
                s.total_percent,
                "SIL Kit: registry + 3 participants".into(),
                0.5 * s.total_percent,
            )
            .bound(
                bare.all_cpu_percent,
                format!(
                    "{}; the kernel counted {per_frame_all:.2} sleeps a frame in the hub's run ({}), at least {:.1} % \
                     at {wake_cpu:.2} µs of CPU a wake-up",
                    bare_is("the CPU of every thread"),
                    sleeps_of(frames, "frame"),
                    wake_cpu_percent(per_frame_all, wake_cpu, rate),
                ),
            )
        },
    ));
    rows.push(row_of(
        &f.cpu.silkit,
        PathRow::new("CPU at 500 kbit/s, 1 sender and 2 receivers: hub alone".into(), "%", "≤ 4 % of a core", false),
        |row, s| {
            row.measured(hub_cpu, s.total_percent, "SIL Kit: registry + 3 participants".into(), 4.0).bound(
                bare.bus_cpu_percent,
                format!(
                    "{}; the kernel counted {per_frame_hub:.2} sleeps of the hub's threads a frame in the hub's run \
                     (bus thread {:.2}, others {:.2}), at least {:.1} % at {wake_cpu:.2} µs of CPU a wake-up",
                    bare_is("the bus thread's CPU"),
                    frames.per_event(frames.hub_bus),
                    frames.per_event(frames.hub_other),
                    wake_cpu_percent(per_frame_hub, wake_cpu, rate),
                ),
            )
        },
    ));
    for s in &f.throughput {
        let (target, target_is) = if s.receivers == 1 { (6e6, "≥ 6 M frames/s") } else { (3e6, "≥ 3 M frames/s") };
        let hops = 1.0 + s.receivers as f64;
        rows.push(
            PathRow::new(
                format!("shm throughput, 1 sender, {} receiver(s), 8-byte frames", s.receivers),
                "frames/s",
                target_is,
                true,
            )
            .measured(s.hub.frames_per_s, s.baseline.frames_per_s, s.baseline.kind.into(), target)
            .bound(s.baseline.frames_per_s / hops, format!("raw ring stream / {hops:.0} ring hops a frame")),
        );
    }
    rows
}

/// The sleeps per event by whom, as the bound's text gives them.
fn sleeps_of(sleeps: &Sleeps, event: &str) -> String {
    let [bus, other, clients] = sleeps.per_event_by_whom();
    format!("a {event}: hubs' bus threads {bus:.2}, hubs' other threads {other:.2}, clients' process {clients:.2}")
}

/// The `n` hub threads that slept most, with their sleeps per event.
fn busiest(sleeps: &Sleeps, n: usize) -> String {
    let mut threads: Vec<(&String, &u64)> = sleeps.by_thread.iter().collect();
    threads.sort_by(|a, b| b.1.cmp(a.1));
    let listed: Vec<String> =
        threads.iter().take(n).map(|(name, &count)| format!("{name} {:.2}", sleeps.per_event(count))).collect();
    listed.join(", ")
}

fn value(v: Option<f64>, unit: &'static str, row: &PathRow) -> Cell {
    match (v, &row.not_measured) {
        (Some(v), _) => Cell::of(v, unit),
        (None, Some(_)) => Cell::text("not measured"),
        (None, None) => Cell::text("—"),
    }
}

/// How far past its bound a hub's figure still reads as at it: a bound
/// measured as the same path with nothing but its wake-ups
/// ([`crate::bare_fan_out`]) and the hub's figure beside it each moved by
/// about a tenth between back-to-back runs on the 2-core machine.
const AT_BOUND: f64 = 0.85;

/// What a row that misses its target says about the gap: out of reach by
/// its bound, the hub's, a bound the run did not hold to, or why there is no
/// bound. A met row, or one not measured, says nothing.
fn note(row: &PathRow) -> Option<String> {
    let (Some(false), Some(hub), Some(target)) = (row.met, row.hub, row.target) else {
        return None;
    };
    let unit = row.unit;
    let Some(bound) = row.bound else {
        return Some(format!(
            "{}: target {} not met ({hub:.1} {unit} against {target:.1} {unit}); no bound of its own: {}.",
            row.path, row.target_is, row.bound_is
        ));
    };
    let beyond = if row.higher_is_better { bound < target } else { bound > target };
    let past_bound = if row.higher_is_better { hub * AT_BOUND > bound } else { hub < bound * AT_BOUND };
    let reach = crate::stats::ratio(hub, bound);
    Some(if past_bound {
        format!(
            "{}: target {} not met ({hub:.1} {unit}), but the hub did better than the bound of {bound:.1} \
             {unit} ({}): in this run the bound does not hold (a wake-up in the run cost less than the \
             primitive's, a stream that leaves a core idle costs less), so it says nothing about the \
             target here.",
            row.path, row.target_is, row.bound_is
        )
    } else if beyond {
        format!(
            "{}: target {} not met ({hub:.1} {unit}), and out of reach on this machine: the bound measured in \
             the same run, {bound:.1} {unit} ({}), is past the target ({target:.1} {unit}). The hub is at {reach:.2}× \
             its bound.",
            row.path, row.target_is, row.bound_is
        )
    } else {
        format!(
            "{}: target {} not met ({hub:.1} {unit} against {target:.1} {unit}); the bound measured in the same \
             run, {bound:.1} {unit} ({}), is within the target: the gap is the hub's (at {reach:.2}× its bound).",
            row.path, row.target_is, row.bound_is
        )
    })
}

pub fn section(figures: &PathFigures) -> Result<Section, ReportError> {
    let rows = rows(figures);
    let mut table = Table::new(
        "Issue 35's paths: the hub against the peer or raw baseline of the same run",
        &["path", "hub", "baseline", "ratio", "target", "met", "bound (same run)"],
    );
    let mut how = Table::new("What each baseline and bound is", &["path", "baseline", "bound", "not measured because"]);
    let mut notes = Vec::new();
    for row in &rows {
        let met = match row.met {
            Some(true) => "met",
            Some(false) => "not met",
            None => "—",
        };
        table.rows.push(vec![
            Cell::text(&row.path),
            value(row.hub, row.unit, row),
            value(row.baseline, row.unit, row),
            value(row.ratio, "×", row),
            value(row.target, row.unit, row),
            Cell::text(met),
            value(row.bound, row.unit, row),
        ]);
        how.rows.push(vec![
            Cell::text(&row.path),
            Cell::text(&row.baseline_is),
            Cell::text(&row.bound_is),
            Cell::text(row.not_measured.as_deref().unwrap_or("—")),
        ]);
        notes.extend(note(row));
    }
    let f = &figures.floors;
    let mut floors =
        Table::new("The primitives, measured alone in the same run", &["primitive", "min", "p50", "p99", "mean"]);
    floors.rows.push(vec![
        Cell::text(format!(
            "waking {} sleeping processes at once, until the last has answered (on {} cores)",
            f.sleepers, f.cores
        )),
        Cell::of(f.wake_fan_out.min_us, "µs"),
        Cell::of(f.wake_fan_out.p50_us, "µs"),
        Cell::of(f.wake_fan_out.p99_us, "µs"),
        Cell::of(f.wake_fan_out.mean_us, "µs"),
    ]);
    let bare = &figures.fan_out.bare;
    floors.rows.push(vec![
        Cell::text(format!(
            "the {}-client round trip on a bus of nothing but wake-ups (threads of one process)",
            figures.fan_out.clients
        )),
        Cell::of(bare.min_us, "µs"),
        Cell::of(bare.p50_us, "µs"),
        Cell::of(bare.p99_us, "µs"),
        Cell::of(bare.mean_us, "µs"),
    ]);
    floors.rows.push(vec![
        Cell::text("a hand-off between two threads (half a ping-pong)"),
        Cell::of(f.thread_hand_off.min_us, "µs"),
        Cell::of(f.thread_hand_off.p50_us, "µs"),
        Cell::of(f.thread_hand_off.p99_us, "µs"),
        Cell::of(f.thread_hand_off.mean_us, "µs"),
    ]);
    floors.rows.push(vec![
        Cell::text(format!(
            "CPU of one futex wake-up of a sleeping process, both sides (its peer slept {:.2} times a round; min: \
             the cheapest of 10 batches, the floors' price; p50: the median batch)",
            f.wake.sleeps_per_round
        )),
        Cell::of(f.wake.cpu_us, "µs"),
        Cell::of(f.wake.cpu_us_median, "µs"),
        Cell::text("—"),
        Cell::text("—"),
    ]);
    let mut counts = Table::new(
        "The sleeps the run's threads took (the kernel's voluntary context switches), which the floors count",
        &["window", "events", "hubs' bus threads", "hubs' other threads", "clients' process", "all"],
    );
    let relayed = figures.federation.as_ref().ok().map(|x| &x.relayed_sleeps);
    for (window, sleeps, unit, per) in relayed
        .map(|sleeps| {
            ("federation: relay → owner → relay round trips".to_owned(), sleeps, "round trips", "sleeps/round trip")
        })
        .into_iter()
        .chain([
            (
                format!("{} clients' round trips", figures.fan_out.clients),
                &figures.fan_out.sleeps,
                "round trips",
                "sleeps/round trip",
            ),
            ("500 kbit/s, 1 sender and 2 receivers".to_owned(), &figures.cpu.hub.sleeps, "frames", "sleeps/frame"),
        ])
    {
        let [bus, other, clients] = sleeps.per_event_by_whom();
        counts.rows.push(vec![
            Cell::text(window),
            Cell::of(sleeps.events as f64, unit),
            Cell::of(bus, per),
            Cell::of(other, per),
            Cell::of(clients, per),
            Cell::of(sleeps.per_event(sleeps.total()), per),
        ]);
    }
    let mut tables = vec![table, how, floors, counts];
    tables.extend(figures.federation.as_ref().ok().map(super::flood_cpu::table));
    Ok(Section {
        id: "paths",
        title: "8. Issue 35's paths against their peers, with measured floors".into(),
        method: "One row per line of issue 35's table, each through hub processes started for it next to its peer or raw \
                 baseline of the same run: a federated channel between a relay hub and an owner hub in another network \
                 namespace (a veth pair) against raw TCP across it and one hub's local channel; Vector SIL Kit's two \
                 participants through the hub as their network simulator against plain SIL Kit; many clients on one \
                 channel against SIL Kit with as many participants; CPU at a loaded 500 kbit/s bus against SIL Kit's \
                 registry and participants; shm throughput against the raw SPSC ring stream. Where a target is not met, \
                 the bound measured in the same run says whether this machine allows it: for many clients and CPU \
                 the same path on a bus of nothing but its wake-ups, for the others the path's primitives (a hand-off \
                 between threads, a ring hop); the sleeps the kernel counted for the run's threads are printed \
                 beside them."
            .into(),
        notes,
        tables,
        figures: Vec::new(),
        data: serde_json::to_value(serde_json::json!({ "rows": rows, "figures": figures }))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_is_met_at_or_under_its_target_and_a_rate_at_or_over_it() {
        let time = |hub| PathRow::new("t".into(), "µs", "≤", false).measured(hub, 100.0, String::new(), 50.0);
        assert_eq!((time(50.0).met, time(50.1).met), (Some(true), Some(false)));
        assert_eq!(time(25.0).ratio, Some(0.25));
        let rate = |hub| PathRow::new("r".into(), "frames/s", "≥", true).measured(hub, 10.0, String::new(), 6.0);
        assert_eq!((rate(6.0).met, rate(5.9).met), (Some(true), Some(false)));
    }

    #[test]
    fn a_missed_target_is_out_of_reach_past_its_floor_the_hubs_within_it_and_named_without_one() {
        let row = |hub, bound: Option<f64>| {
            let row = PathRow::new("p".into(), "µs", "≤ t", false).measured(hub, 400.0, String::new(), 240.0);
            match bound {
                Some(bound) => row.bound(bound, "sleeps × price".into()),
                None => PathRow { bound_is: "none below the target".into(), ..row },
            }
        };
        assert!(note(&row(527.0, Some(250.0))).unwrap().contains("out of reach on this machine"));
        assert!(note(&row(527.0, Some(210.0))).unwrap().contains("the gap is the hub's (at 2.51× its bound)"));
        assert!(note(&row(200.0, Some(250.0))).is_none(), "a met target says nothing");
        assert!(note(&row(290.0, Some(350.0))).unwrap().contains("the bound does not hold"));
        assert!(note(&row(310.0, Some(350.0))).unwrap().contains("out of reach"), "within the runs' spread");
        assert!(note(&row(508.0, None)).unwrap().ends_with("no bound of its own: none below the target."));
    }

    #[test]
    fn a_rate_under_its_target_is_out_of_reach_when_the_chained_hubs_are_too_and_the_hubs_gap_when_not() {
        // One hub 2.4 M frames/s: the target is 1.2 M.
        let flood = |relayed, chained| {
            PathRow::new("flood".into(), "frames/s", "≥ 0.5× one hub", true)
                .measured(relayed, 2.4e6, String::new(), 1.2e6)
                .bound(chained, "two hubs chained".into())
        };
        let short = note(&flood(8.0e5, 9.0e5)).unwrap();
        assert!(short.contains("out of reach on this machine") && short.contains("0.89× its bound"), "{short}");
        let hubs = note(&flood(8.0e5, 1.5e6)).unwrap();
        assert!(hubs.contains("the gap is the hub's (at 0.53× its bound)"), "{hubs}");
        assert!(note(&flood(1.3e6, 1.5e6)).is_none(), "a met target says nothing");
        assert!(note(&flood(1.1e6, 0.9e6)).unwrap().contains("the bound does not hold"), "relayed beat the chain");
    }

    #[test]
    fn a_row_without_its_peer_says_why_and_has_no_figures() {
        let outcome: Outcome<f64> = Err("needs root".into());
        let row = row_of(&outcome, PathRow::new("p".into(), "µs", "≤", false), |row, _| row);
        assert_eq!(row.not_measured.as_deref(), Some("needs root"));
        assert_eq!((row.hub, row.met), (None, None));
        assert!(matches!(value(row.hub, "µs", &row), Cell::Text(t) if t == "not measured"));
    }
}
