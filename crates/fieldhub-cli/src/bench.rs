//! `fieldhub bench`: latency, throughput and CPU cost through a hub process
//! this command starts itself, each hub figure next to a raw two-process
//! baseline of the same run and its ratio; `scaling`, the round trip as
//! clients and channels grow, each point next to the series' first. `echo` and `ping` measure round
//! trips through a hub that is already running, with the echo at the far end
//! of the path under test (a VM guest: `bench/vm.sh`). `report` runs the
//! whole methodology and writes it as HTML, JSON and Markdown.
//!
//! Results go to stdout (a table, or JSON with `--json`); progress goes to
//! stderr as one updating line. `raw-peer` is the hidden second process of
//! the raw baselines, started by the benchmark from this same executable.

use std::path::PathBuf;

use anyhow::Context;
use fieldhub_bench::raw::PeerMode;
pub use fieldhub_bench::Launcher;
use fieldhub_bench::{
    cannelloni, chaos, cpu, latency, plot, raw, rbs, report, scaling, soak, socketcand, throughput, virtual_time,
    FrameSize, Transport,
};

use crate::bench_remote::{self, clear_progress, progress};

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: Kind,
}

/// Which frame sizes to measure: both unless one is picked.
#[derive(clap::Args)]
struct Sizes {
    /// Only 64-byte CAN FD frames.
    #[arg(long, conflicts_with = "can")]
    fd: bool,
    /// Only 8-byte classic CAN frames.
    #[arg(long)]
    can: bool,
}

impl Sizes {
    fn list(&self) -> Vec<FrameSize> {
        match (self.can, self.fd) {
            (true, _) => vec![FrameSize::Can8],
            (_, true) => vec![FrameSize::Fd64],
            _ => vec![FrameSize::Can8, FrameSize::Fd64],
        }
    }
}

#[derive(clap::Subcommand)]
enum Kind {
    /// Round-trip percentiles (p50/p80/p95/p99/p99.9/max, mean, std) against a raw two-process ping-pong.
    Latency {
        /// shm (against a futex or, with --busy-poll, a spin ping-pong), unix (against a unix-socket ping-pong) or tcp (against TCP_NODELAY).
        #[arg(long, default_value = "shm")]
        transport: Transport,
        /// Hub and clients spin instead of sleeping (shm only).
        #[arg(long)]
        busy_poll: bool,
        /// Round trips per series (after a warm-up that does not count).
        #[arg(long, default_value = "10000")]
        samples: usize,
        #[command(flatten)]
        sizes: Sizes,
        /// Extra shm clients with a port on the channel, each reading it and checking its order.
        #[arg(long, default_value = "0", value_name = "K")]
        clients: usize,
        /// The extra clients read only after the measurement (frames wait in their rings; beyond 5,888 the hub drops and counts).
        #[arg(long)]
        idle_clients: bool,
        /// Print the scenarios as JSON: hub, baseline and ratio for each.
        #[arg(long)]
        json: bool,
        /// Write the distributions (CDF, hub and baseline) to this SVG file.
        #[arg(long, value_name = "FILE.svg")]
        plot: Option<PathBuf>,
    },
    /// Round trip (shm) as clients on one channel and busy channels on the hub grow; each row against its series' first.
    ///
    /// Clients series: the probe and the echo plus N-2 clients reading every frame, on one channel.
    /// Channels series: the probe and the echo on the first of K channels, background traffic on each other one.
    /// Each point runs on a fresh hub. With neither list given both series run with their defaults;
    /// with one given, only that series runs.
    Scaling {
        /// Client counts on the one channel, probe and echo included (default 2,8,64,256).
        #[arg(long, value_delimiter = ',', value_name = "N,...")]
        clients: Option<Vec<usize>>,
        /// Channel counts on the hub (default 1,10,100).
        #[arg(long, value_delimiter = ',', value_name = "K,...")]
        channels: Option<Vec<usize>>,
        /// Round trips per point (after a warm-up that does not count).
        #[arg(long, default_value = "1000")]
        samples: usize,
        /// Background frames per second on each channel but the measured one.
        #[arg(long, default_value = "100", value_name = "FRAMES_PER_S")]
        background_rate: f64,
        /// 64-byte CAN FD frames instead of 8-byte CAN.
        #[arg(long)]
        fd: bool,
        /// Print the points as JSON: series, clients, channels, hub and ratio for each.
        #[arg(long)]
        json: bool,
    },
    /// One-way frames/s and payload Mbit/s from one sender, against a raw two-process stream.
    Throughput {
        /// shm (against an SPSC ring stream), unix or tcp (against a unix-socket or TCP stream, 64 frames a write).
        #[arg(long, default_value = "shm")]
        transport: Transport,
        /// Length of each hub run (the baseline runs at most 2 s).
        #[arg(long, default_value = "3")]
        seconds: f64,
        /// Receiver counts to measure, comma-separated.
        #[arg(long, default_value = "1,3", value_delimiter = ',')]
        receivers: Vec<usize>,
        #[command(flatten)]
        sizes: Sizes,
        /// Only 2,048-byte CAN XL frames, on a canxl channel (against a ring stream of the same messages).
        #[arg(long, conflicts_with_all = ["fd", "can"])]
        xl: bool,
        /// Print the scenarios as JSON: hub, baseline and ratio for each.
        #[arg(long)]
        json: bool,
    },
    /// A cannelloni peer through the hub's [[cannelloni]] endpoint (TCP and UDP) next to a native TCP client, same hub,
    /// same run: round trips to a native echo, and one-way frames/s to a native receiver.
    Cannelloni {
        /// Round trips per path (after a warm-up that does not count).
        #[arg(long, default_value = "2000")]
        samples: usize,
        /// Frames per throughput run.
        #[arg(long, default_value = "100000")]
        frames: usize,
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A rest-bus simulation of a large database in real time (300 messages at 10 ms to 1 s on a timed 1 Mbit/s
    /// channel): per cycle class, each message's period error and lateness against its schedule, in µs and in
    /// frame times, and missed cycles; then the same database in virtual time, and each real-time frame's
    /// deviation from that exact outcome; and the machine's floor (a plain thread's wake-up lateness).
    Rbs {
        /// Simulated messages.
        #[arg(long, default_value = "300")]
        messages: usize,
        /// How long to run, in seconds.
        #[arg(long, default_value = "30")]
        seconds: u64,
        /// Run the hub's bus thread under SCHED_FIFO (`[hub] realtime = true`; needs CAP_SYS_NICE or
        /// `ulimit -r 10`).
        #[arg(long)]
        realtime: bool,
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A socketcand client (RAW mode) through the hub's socketcand server next to a native TCP client, same hub,
    /// same run: round trips to a native echo, and one-way frames/s to a native receiver.
    Socketcand {
        /// Round trips per path (after a warm-up that does not count).
        #[arg(long, default_value = "2000")]
        samples: usize,
        /// Frames per throughput run.
        #[arg(long, default_value = "100000")]
        frames: usize,
        /// Print the figures as JSON.
        #[arg(long)]
        json: bool,
    },
    /// CPU time of the hub and its clients, idle and at a 500 kbit/s frame rate, with one and three clients.
    Cpu {
        #[arg(long, default_value = "shm")]
        transport: Transport,
        /// Length of each measuring window.
        #[arg(long, default_value = "5")]
        seconds: f64,
        /// Print the phases as JSON.
        #[arg(long)]
        json: bool,
    },
    /// A soak run, not a measurement: numbered traffic through many shm and TCP clients while some are
    /// killed (SIGKILL) and replaced; afterwards every receiver must have seen one gap-free order and
    /// the hub's descriptors and threads must be back. With --chaos: seeded fault rules, shorts,
    /// bus-off, pulled cables and kills, and every numbered frame must be on every receiver in one
    /// order or reported to its sender and counted (docs/frame-fate.md). Exits 1 if anything was wrong
    /// (bench/soak.sh).
    Soak {
        /// Numbered frames: in all, spread over the senders [default: 10000000]; with --chaos, per sender
        /// and seed [default: 2000].
        #[arg(long)]
        frames: Option<u64>,
        /// The chaos run of the frame-fate contract instead: seeds --seed .. --seed + --runs, each its
        /// own hub and schedule.
        #[arg(long)]
        chaos: bool,
        /// The soak with the attacks of issue 34 mixed in while clients come and go: a hostile client keeps
        /// attaching over shared memory and damaging the pages it is given (the bell page, its segment),
        /// silent connections hold handshake slots, keep-alive HTTP connections ask what the hub refuses,
        /// and connections send garbage; each counted in the report.
        #[arg(long, conflicts_with = "chaos")]
        hostile: bool,
        /// With --chaos: how many seeds.
        #[arg(long, default_value = "200")]
        runs: u64,
        /// Clients on the channel at any time: a quarter lossless receivers, a sixteenth numbered senders, the rest killable.
        #[arg(long, default_value = "64")]
        clients: usize,
        /// Killable clients killed and replaced during the run.
        #[arg(long, default_value = "1000")]
        kills: usize,
        /// Seed of the kill schedule (with --chaos: the first seed).
        #[arg(long, default_value = "1")]
        seed: u64,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Real-time factor of a hub in virtual time: synchronised senders on a 500 kbit/s timed channel.
    VirtualTime {
        #[arg(long, default_value = "shm")]
        transport: Transport,
        /// Synchronised participants, each sending one frame per period.
        #[arg(long, default_value = "10")]
        participants: usize,
        /// Bus time to run.
        #[arg(long, default_value = "60")]
        seconds: f64,
        /// Each participant's period and step (ms of bus time).
        #[arg(long, default_value = "10")]
        period_ms: u64,
        /// The channel's offered load in percent of its capacity (8-byte frames shared by the participants; over 100 overloads it, and the run still ends); default: one frame per participant per step.
        #[arg(long)]
        load: Option<f64>,
        /// SIL Kit's folder (silkit_sync_peer and wheel/SilKit_py/bin/, as `make target/silkit/silkit_sync_peer` leaves it) for its synchronised time with the same participants and steps in the same run; `none`: no comparison; `auto`: target/silkit when it is set up there, else none (with a line saying how to set it up).
        #[arg(long, env = "FIELDHUB_SILKIT_DIR", default_value = "auto")]
        silkit: String,
        /// Each participant declares N steps at once: it sends their frames stamped with their bus times and steps N periods in one STEP_AHEAD (its frames do not depend on what it receives); the figure stays per step.
        #[arg(long, value_name = "N")]
        ahead: Option<u64>,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    Echo(bench_remote::EchoArgs),
    Ping(bench_remote::PingArgs),
    /// The whole methodology in one run: round trips, throughput, CPU, call times, footprint, jitter, models, machine.
    ///
    /// Writes report.html (plots inline), report.json and report.md (the same figures) and the plots as SVG files
    /// into --out. A full run takes about ten minutes; --quick under a minute (for checking, not for figures).
    Report {
        /// Small samples and short windows.
        #[arg(long)]
        quick: bool,
        /// Directory to write the report into (created if missing).
        #[arg(long, value_name = "DIR", default_value = "fieldhub-report")]
        out: PathBuf,
        /// Also measure round trips through this running hub (probe and echo both connect to it).
        #[arg(long = "hub", value_name = "URL")]
        hub: Option<String>,
        /// The channel of --hub to measure on.
        #[arg(long, value_name = "NAME", default_value = "can0", requires = "hub")]
        hub_channel: String,
    },
    /// The peer process of a raw baseline (started by the benchmarks themselves).
    #[command(hide = true)]
    RawPeer {
        #[arg(long)]
        mode: PeerMode,
        #[arg(long)]
        connect: String,
        #[arg(long, default_value = "0")]
        bytes: usize,
    },
}

/// Print a benchmark's result: JSON for machines, else its table.
fn report<T: serde::Serialize + ?Sized>(result: &T, json: bool, table: impl FnOnce(&T)) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(result)?);
    } else {
        table(result);
    }
    Ok(())
}

pub fn run(args: BenchArgs, this_command: &Launcher) -> anyhow::Result<()> {
    match args.kind {
        Kind::RawPeer { mode, connect, bytes } => {
            raw::run_peer(mode, &connect, bytes).context("raw baseline peer")?;
        }
        Kind::Echo(args) => bench_remote::echo(args)?,
        Kind::Ping(args) => bench_remote::ping(args)?,
        Kind::Latency { transport, busy_poll, samples, sizes, clients, idle_clients, json, plot } => {
            let spec = latency::LatencyRun {
                transport,
                busy_poll,
                samples,
                sizes: sizes.list(),
                extra_clients: clients,
                extra_idle: idle_clients,
            };
            let scenarios = latency::run(this_command, &spec, &mut progress).context("latency benchmark");
            clear_progress();
            let scenarios = scenarios?;
            if let Some(path) = plot {
                let series: Vec<plot::Series<'_>> = scenarios
                    .iter()
                    .flat_map(|s| {
                        [
                            plot::Series { label: format!("hub, {}", s.scenario), sorted_ns: &s.hub_samples },
                            plot::Series {
                                label: format!("{}, {} B", s.baseline_kind, s.payload_bytes),
                                sorted_ns: &s.baseline_samples,
                            },
                        ]
                    })
                    .collect();
                let title = format!("fieldhub round trips through the hub vs raw baseline ({} samples)", samples);
                std::fs::write(&path, plot::latency_cdf(&title, &series))
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            report(&scenarios[..], json, print_latency)?;
        }
        Kind::Scaling { clients, channels, samples, background_rate, fd, json } => {
            let (clients, channels) = match (clients, channels) {
                (None, None) => (vec![2, 8, 64, 256], vec![1, 10, 100]),
                (clients, channels) => (clients.unwrap_or_default(), channels.unwrap_or_default()),
            };
            let size = if fd { FrameSize::Fd64 } else { FrameSize::Can8 };
            let spec = scaling::ScalingRun { clients, channels, samples, size, background_rate };
            let points = scaling::run(this_command, &spec, &mut progress).context("scaling benchmark");
            clear_progress();
            let points = points?;
            report(&points[..], json, print_scaling)?;
        }
        Kind::Throughput { transport, seconds, receivers, sizes, xl, json } => {
            let sizes = if xl { vec![FrameSize::Xl2048] } else { sizes.list() };
            let spec = throughput::ThroughputRun { transport, seconds, sizes, receivers };
            let scenarios = throughput::run(this_command, &spec, &mut progress).context("throughput benchmark");
            clear_progress();
            let scenarios = scenarios?;
            report(&scenarios[..], json, print_throughput)?;
        }
        Kind::Report { quick, out, hub, hub_channel } => {
            let token = crate::hub_token()?;
            let remote = hub.map(|url| report::RemotePath { url, channel: hub_channel, token });
            let made = report::run(this_command, &report::ReportRun { quick, remote }, &mut progress);
            clear_progress();
            let written = report::write(&made.context("measurement report")?, &out)?;
            for path in written.iter().take(3) {
                println!("{}", path.display());
            }
        }
        Kind::Soak { frames, chaos: true, runs, seed, json, .. } => {
            let spec = chaos::ChaosRun { seed, runs, frames: frames.unwrap_or(2000) };
            let made = chaos::run(this_command, &spec, &mut progress).context("chaos run");
            clear_progress();
            let made = made?;
            if json {
                println!("{}", serde_json::to_string_pretty(&made)?);
            } else {
                chaos::print(&made);
            }
            let problems = made.problems();
            if !problems.is_empty() {
                anyhow::bail!("the chaos run found {} problem(s): {}", problems.len(), problems.join("; "));
            }
        }
        Kind::Soak { frames, clients, kills, seed, hostile, json, .. } => {
            let spec = soak::SoakRun { frames: frames.unwrap_or(10_000_000), clients, kills, seed, hostile };
            let made = soak::run(this_command, &spec, &mut progress).context("soak run");
            clear_progress();
            let made = made?;
            if json {
                println!("{}", serde_json::to_string_pretty(&made)?);
            } else {
                soak::print(&made);
            }
            if !made.problems.is_empty() {
                anyhow::bail!("the soak run found {} problem(s)", made.problems.len());
            }
        }
        Kind::Cannelloni { samples, frames, json } => {
            let spec = fieldhub_bench::gateway::GatewayRun { samples, frames };
            let made = cannelloni::run(this_command, &spec, &mut progress).context("cannelloni benchmark");
            clear_progress();
            report(&made?, json, |r| print!("{r}"))?;
        }
        Kind::Socketcand { samples, frames, json } => {
            let spec = fieldhub_bench::gateway::GatewayRun { samples, frames };
            let made = socketcand::run(this_command, &spec, &mut progress).context("socketcand benchmark");
            clear_progress();
            report(&made?, json, |r| print!("{r}"))?;
        }
        Kind::Rbs { messages, seconds, realtime, json } => {
            let spec = rbs::RbsRun { messages, seconds, realtime };
            let made = rbs::run(this_command, &spec, &mut progress).context("rest-bus simulation benchmark");
            clear_progress();
            report(&made?, json, |r| print!("{r}"))?;
        }
        Kind::Cpu { transport, seconds, json } => {
            let phases =
                cpu::run(this_command, &cpu::CpuRun { transport, seconds }, &mut progress).context("CPU benchmark");
            clear_progress();
            let phases = phases?;
            report(&phases[..], json, print_cpu)?;
        }
        Kind::VirtualTime { transport, participants, seconds, period_ms, load, silkit, ahead, json } => {
            let silkit = silkit_dir(&silkit);
            let then = if silkit.is_some() { ", then SIL Kit's" } else { "" };
            progress(&format!("virtual time: {participants} participants, {seconds} s of bus time{then}"));
            let spec = virtual_time::VirtualTimeRun {
                transport,
                participants,
                bus_seconds: seconds,
                period_ms,
                load_percent: load,
                silkit,
                ahead,
            };
            let result = virtual_time::run(this_command, &spec).context("virtual-time benchmark");
            clear_progress();
            report(&result?, json, print_virtual_time)?;
        }
    }
    Ok(())
}

/// Where SIL Kit's synchronised-time baseline is: `none` leaves it out; `auto`
/// takes `target/silkit` when `make target/silkit/silkit_sync_peer` has set it
/// up, and otherwise says how to and leaves it out; anything else is the folder.
fn silkit_dir(choice: &str) -> Option<std::path::PathBuf> {
    const AUTO: &str = "target/silkit";
    match choice {
        "none" => None,
        "auto" => {
            let dir = std::path::Path::new(AUTO);
            let ready =
                dir.join("silkit_sync_peer").is_file() && dir.join("wheel/SilKit_py/bin/sil-kit-registry").is_file();
            if !ready {
                eprintln!(
                    "bench virtual-time: no SIL Kit comparison ({AUTO} is not set up: `make {AUTO}/silkit_sync_peer` \
                     sets it up, --silkit DIR names another folder, --silkit none says you know)"
                );
            }
            ready.then(|| dir.to_path_buf())
        }
        dir => Some(dir.into()),
    }
}

fn print_virtual_time(r: &virtual_time::VirtualTimeResult) {
    let queued = match r.frames_sent.saturating_sub(r.frames_received + r.frames_refused) {
        0 => String::new(),
        n => format!(", {n} still queued"),
    };
    let queued = match r.frames_refused {
        0 => queued,
        n => format!("{queued}, {n} refused: queue full"),
    };
    let per = match r.ahead {
        None => "advance".to_owned(),
        Some(n) => format!("step of 1 period, stepping {n} ahead"),
    };
    println!(
        "{} participants over {}, {:.0} % offered load: {:.1} s of bus time in {:.2} s: {:.1}x real time ({:.1} µs per \
         {per}; {} of {} frames on the bus{queued})",
        r.participants,
        r.transport,
        r.offered_load_percent,
        r.bus_seconds,
        r.wall_seconds,
        r.real_time_factor,
        r.wall_us_per_advance,
        r.frames_received,
        r.frames_sent
    );
    if let (Some(s), Some(times)) = (&r.silkit, r.times_silkit) {
        println!(
            "  = {times:.1}x SIL Kit 5.0.3 (its synchronised time, same run: {} participants, {} steps of 1 ms, one frame \
             each per step, in {:.2} s: {:.1}x real time, {:.0} µs per step)",
            s.participants, s.steps, s.wall_seconds, s.real_time_factor, s.wall_us_per_step
        );
    }
}

fn print_latency(scenarios: &[latency::LatencyScenario]) {
    for s in scenarios {
        println!("round trip, {} ({} samples, µs)", s.scenario, s.hub.samples);
        println!(
            "  {:<46} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8}",
            "", "p50", "p80", "p95", "p99", "p99.9", "max", "mean", "std"
        );
        for (name, d) in [("hub", &s.hub), (s.baseline_kind, &s.baseline)] {
            println!(
                "  {name:<46} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>8.2}",
                d.p50_us, d.p80_us, d.p95_us, d.p99_us, d.p999_us, d.max_us, d.mean_us, d.std_us
            );
        }
        let r = &s.ratio;
        println!(
            "  {:<46} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>8.2}",
            "ratio hub/baseline", r.p50, r.p80, r.p95, r.p99, r.p999, r.max, r.mean, r.std
        );
        if let Some(two) = &s.two_clients {
            let d = &two.hub;
            println!(
                "  {:<46} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>8.2}",
                "hub with the two measuring clients only",
                d.p50_us,
                d.p80_us,
                d.p95_us,
                d.p99_us,
                d.p999_us,
                d.max_us,
                d.mean_us,
                d.std_us
            );
            let r = &two.ratio;
            println!(
                "  {:<46} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>8.2}",
                "ratio hub/two clients only", r.p50, r.p80, r.p95, r.p99, r.p999, r.max, r.mean, r.std
            );
        }
        if let Some(extra) = &s.extra_clients {
            println!(
                "  {} extra clients{}: order kept {}, at least {} frames each, {} dropped",
                extra.count,
                if extra.idle { " (idle)" } else { "" },
                extra.order_kept,
                extra.min_frames_received,
                extra.frames_dropped
            );
        }
        println!();
    }
}

fn print_scaling(points: &[scaling::ScalingPoint]) {
    for series in [scaling::Series::Clients, scaling::Series::Channels] {
        let rows: Vec<_> = points.iter().filter(|p| p.series == series).collect();
        let Some(first) = rows.first() else { continue };
        match series {
            scaling::Series::Clients => {
                println!("round trip by clients on one channel, {} B (µs)", first.payload_bytes)
            }
            scaling::Series::Channels => {
                let rate = rows.iter().find_map(|p| p.background.as_ref()).map(|b| b.frames_per_s_per_channel);
                let traffic = rate.map_or_else(String::new, |r| format!("; {r} frames/s on each other channel"));
                println!(
                    "round trip by channels on the hub, {} B, 2 clients on the first{traffic} (µs)",
                    first.payload_bytes
                )
            }
        }
        println!(
            "  {:>8} {:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>12}  notes",
            "clients", "channels", "samples", "p50", "p99", "ratio p50", "ratio p99", "sleeps/trip"
        );
        for p in rows {
            let mut notes = Vec::new();
            if let Some(extra) = &p.extra_clients {
                notes.push(format!("order kept {}, {} dropped", extra.order_kept, extra.frames_dropped));
            }
            if let Some(b) = &p.background {
                notes.push(format!("background {}/{} frames received", b.frames_received, b.frames_sent));
            }
            let [bus, other, clients] = p.sleeps.per_event_by_whom();
            notes.push(format!("sleeps a round trip: hub bus {bus:.2}, hub other {other:.2}, clients {clients:.2}"));
            println!(
                "  {:>8} {:>9} {:>9} {:>9.2} {:>9.2} {:>10.2} {:>10.2} {:>12.1}  {}",
                p.clients,
                p.channels,
                p.hub.samples,
                p.hub.p50_us,
                p.hub.p99_us,
                p.ratio.p50,
                p.ratio.p99,
                p.sleeps.per_event(p.sleeps.total()),
                notes.join("; ")
            );
        }
        println!();
    }
}

fn print_throughput(scenarios: &[throughput::ThroughputScenario]) {
    for s in scenarios {
        println!("one-way, {}", s.scenario);
        let seconds: Vec<String> = s.hub.per_second.iter().map(|n| n.to_string()).collect();
        println!("  per second (first receiver): {}", seconds.join(", "));
        println!(
            "  hub:      {:>14.0} frames/s {:>9.1} Mbit/s payload ({} frames in {:.2} s)",
            s.hub.frames_per_s, s.hub.payload_mbit_per_s, s.hub.frames, s.hub.seconds
        );
        println!(
            "  baseline: {:>14.0} frames/s {:>9.1} Mbit/s payload ({})",
            s.baseline.frames_per_s, s.baseline.payload_mbit_per_s, s.baseline.kind
        );
        println!("  ratio hub/baseline: {:.4}", s.ratio);
        println!();
    }
}

fn print_cpu(phases: &[cpu::CpuPhase]) {
    println!("CPU time, % of one core ({} ticks/s; precise: threads' sum_exec_runtime)", cpu::clock_ticks_per_second());
    println!("  (sleeps a frame: the kernel's voluntary context switches of the hub's bus thread, its other threads and the clients' process)");
    println!(
        "  {:<30} {:>10} {:>10} {:>12} {:>12} {:>14}  sleeps/frame bus, other, clients",
        "", "frames/s", "hub %", "hub precise", "clients %", "clients precise"
    );
    let precise = |p: Option<f64>| p.map_or_else(|| "-".to_owned(), |p| format!("{p:.3}"));
    for p in phases {
        let s = &p.sleeps;
        let sleeps = if s.events == 0 {
            "-".to_owned()
        } else {
            let [bus, other, clients] = s.per_event_by_whom();
            format!("{bus:.2}, {other:.2}, {clients:.2}")
        };
        println!(
            "  {:<30} {:>10.0} {:>10.2} {:>12} {:>12.2} {:>14}  {sleeps}",
            p.scenario,
            p.frames_per_s,
            p.hub.cpu_percent,
            precise(p.hub.cpu_percent_precise),
            p.client_process.cpu_percent,
            precise(p.client_process.cpu_percent_precise)
        );
    }
}
