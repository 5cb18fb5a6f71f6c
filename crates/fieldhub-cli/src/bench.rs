//! `fieldhub bench`: latency and throughput through a hub, each with the
//! ratio to a raw baseline measured in the same run.

use std::io::Write;

use anyhow::Context;
use fieldhub_bench::{latency, private_hub, throughput};

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    kind: Kind,
}

#[derive(clap::Subcommand)]
enum Kind {
    /// Round-trip percentiles (p50/p80/p95/p99/p99.9/max, mean, std) against a raw ping-pong.
    Latency {
        /// Hub to measure; default: a private hub in this process.
        #[arg(long, value_name = "URL")]
        hub: Option<String>,
        #[arg(long, default_value = "10000")]
        samples: usize,
        /// 64-byte CAN FD frames instead of 8-byte classic ones.
        #[arg(long)]
        fd: bool,
        #[arg(long)]
        json: bool,
    },
    /// Frames per second one sender pushes through the hub, against a raw stream.
    Throughput {
        #[arg(long, value_name = "URL")]
        hub: Option<String>,
        #[arg(long, default_value = "3")]
        seconds: f64,
        #[arg(long)]
        fd: bool,
        #[arg(long, default_value = "1")]
        receivers: usize,
        #[arg(long)]
        json: bool,
    },
}

fn progress(done: usize, total: usize) {
    eprint!("\r{done}/{total}");
    let _ = std::io::stderr().flush();
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.kind {
        Kind::Latency { hub, samples, fd, json } => {
            let (_private, url) = match hub {
                Some(url) => (None, url),
                None => private_hub().map(|(h, u)| (Some(h), u))?,
            };
            let report =
                latency::run(&latency::LatencyRun { url, samples, fd }, &mut progress).context("latency benchmark")?;
            eprintln!();
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "round trip, {} transport, {}-byte frames, {} samples (µs)",
                    report.transport, report.payload_bytes, report.hub.samples
                );
                println!(
                    "{:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
                    "", "p50", "p80", "p95", "p99", "p99.9", "max", "mean", "std"
                );
                for (name, d) in [("hub", &report.hub), ("baseline", &report.baseline)] {
                    println!(
                        "{name:>10} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
                        d.p50_us, d.p80_us, d.p95_us, d.p99_us, d.p999_us, d.max_us, d.mean_us, d.std_us
                    );
                }
                println!(
                    "ratio hub/baseline: p50 {:.2}, p99 {:.2}",
                    report.ratio["p50"].as_f64().unwrap_or(f64::NAN),
                    report.ratio["p99"].as_f64().unwrap_or(f64::NAN)
                );
            }
        }
        Kind::Throughput { hub, seconds, fd, receivers, json } => {
            let (_private, url) = match hub {
                Some(url) => (None, url),
                None => private_hub().map(|(h, u)| (Some(h), u))?,
            };
            let report = throughput::run(&throughput::ThroughputRun { url, seconds, fd, receivers }, &mut progress)
                .context("throughput benchmark")?;
            eprintln!();
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "one-way, {} transport, {}-byte frames, {} receiver(s)",
                    report.transport, report.payload_bytes, report.receivers
                );
                for (second, rate) in report.per_second.iter().enumerate() {
                    println!("  second {second}: {rate:.0} frames/s");
                }
                println!(
                    "hub:      {:.0} frames/s ({:.1} Mbit/s payload)",
                    report.hub.frames_per_s, report.hub.payload_mbit_per_s
                );
                println!(
                    "baseline: {:.0} frames/s ({:.1} Mbit/s payload)",
                    report.baseline.frames_per_s, report.baseline.payload_mbit_per_s
                );
                println!("ratio hub/baseline: {:.3}", report.ratio);
            }
        }
    }
    Ok(())
}
