//! `fieldhub bench echo` and `fieldhub bench ping`: round trips through a
//! hub that is already running (`fieldhub_bench::remote`), the echo at the
//! far end of the path under test. Plain client work over any transport, so
//! unlike the other benchmarks (which start hubs and measure shared memory,
//! futexes and /proc) they are in every platform's build: the Linux
//! `bench.rs` and the Windows `windows/bench.rs` both take them from here,
//! with the progress line every benchmark reports on.

use std::io::Write;

use anyhow::Context;
use fieldhub_bench::{remote, FrameSize};

use crate::HubSelect;

/// Answer `bench ping` probes on a channel of a running hub (request 0x100, answer 0x101) until stopped; run it at the far end of the path to measure, e.g. in a VM guest.
#[derive(clap::Args)]
pub struct EchoArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Channel to answer on.
    #[arg(long, value_name = "NAME", default_value = "can0")]
    channel: String,
}

/// Round trips to a `bench echo` on a channel of a running hub: percentiles (µs).
#[derive(clap::Args)]
pub struct PingArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Channel the echo answers on.
    #[arg(long, value_name = "NAME", default_value = "can0")]
    channel: String,
    /// Round trips to measure (after a warm-up that does not count).
    #[arg(long, default_value = "2000")]
    samples: usize,
    /// 64-byte CAN FD frames instead of 8-byte CAN (needs a canfd channel).
    #[arg(long)]
    fd: bool,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// `fieldhub bench echo`: answers until the hub connection ends.
pub fn echo(args: EchoArgs) -> anyhow::Result<()> {
    let url = args.hub.url();
    let answered = remote::echo(&url, crate::hub_token()?.as_deref(), &args.channel)
        .with_context(|| format!("bench echo on {url} {}", args.channel))?;
    eprintln!("bench echo: answered {answered} round trips");
    Ok(())
}

/// `fieldhub bench ping`: the round trips' percentiles, as a table or JSON.
pub fn ping(args: PingArgs) -> anyhow::Result<()> {
    let url = args.hub.url();
    let size = if args.fd { FrameSize::Fd64 } else { FrameSize::Can8 };
    let result = remote::ping(&url, crate::hub_token()?.as_deref(), &args.channel, size, args.samples, &mut progress);
    clear_progress();
    let result = result.with_context(|| format!("bench ping on {url} {}", args.channel))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print_ping(&result);
    }
    Ok(())
}

/// One updating line on stderr.
pub fn progress(line: &str) {
    eprint!("\r{line:<100.100}");
    let _ = std::io::stderr().flush();
}

pub fn clear_progress() {
    eprint!("\r{:100}\r", "");
}

fn print_ping(result: &remote::PingResult) {
    let d = &result.round_trip;
    println!(
        "round trip to the echo on {} via {}, {} B ({} samples, µs)",
        result.channel, result.url, result.payload_bytes, d.samples
    );
    println!(
        "  {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>8} {:>8}",
        "p50", "p80", "p95", "p99", "p99.9", "max", "mean", "std"
    );
    println!(
        "  {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>8.2} {:>8.2}",
        d.p50_us, d.p80_us, d.p95_us, d.p99_us, d.p999_us, d.max_us, d.mean_us, d.std_us
    );
}
