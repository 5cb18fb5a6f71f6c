//! `fieldhub`: the hub and its can-utils-style tools in one binary.
//!
//! This crate only parses arguments and wires the library crates together;
//! every behaviour lives in `fieldhub-hub`, `fieldhub-client` and
//! `fieldhub-proto`. Errors are reported with context here, at the edge.

mod bench;
mod bridge;
mod ctl;
mod dump;
mod frame_bits;
mod gen;
mod hub;
mod ready;
mod record;
mod replay;
mod send;
mod stats;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "fieldhub", version, about = "A virtual CAN / CAN FD bus: the hub and its tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the hub (the bus). Without --config: two classic CAN channels, can0 and can1.
    Hub(hub::HubArgs),
    /// Print frames from channels, like candump.
    Dump(dump::DumpArgs),
    /// Send one frame in cansend syntax (123#DEADBEEF, 1ABCDEF0#00, 123#R, 123##1DEADBEEF).
    Send(send::SendArgs),
    /// Generate frames, like cangen.
    Gen(gen::GenArgs),
    /// Show channel, port and route statistics of a running hub.
    Stats(stats::StatsArgs),
    /// Record channels to a candump log (.log) or Vector ASC (.asc) file.
    Record(record::RecordArgs),
    /// Play a candump log or Vector ASC file back onto the hub, with its timing or --fast.
    Replay(replay::ReplayArgs),
    /// Control a running hub: wiring (plug, unplug, cut, repair), routes, listings.
    Ctl(ctl::CtlArgs),
    /// Exact on-wire length and duration of a frame (stuff bits, CRC, BRS).
    FrameBits(frame_bits::FrameBitsArgs),
    /// Benchmarks: latency, throughput and CPU of a hub (shm or tcp), with ratios to raw baselines of the same run; round trips as clients and channels grow.
    Bench(bench::BenchArgs),
    /// Bridge a real bus into the hub: `bridge socketcan IFACE` joins a Linux SocketCAN interface to a channel.
    Bridge(bridge::BridgeArgs),
}

/// `--hub URL`, shared by every tool that connects to a hub.
#[derive(clap::Args, Clone)]
pub struct HubSelect {
    /// Hub to connect to: tcp://HOST:PORT, unix:PATH, shm://NAME, ivshmem://PATH or serial:PATH [env: FIELDHUB_HUB; default: shm://default if the local hub serves it, else tcp://127.0.0.1:29536]
    #[arg(long = "hub", value_name = "URL")]
    url: Option<String>,
}

impl HubSelect {
    /// The hub's URL: `--hub`, else `$FIELDHUB_HUB`, else the local default.
    pub fn url(&self) -> String {
        self.url.clone().unwrap_or_else(fieldhub_client::default_hub_url)
    }

    /// The base URL of the hub's HTTP control API (same host and port).
    pub fn http_base(&self) -> anyhow::Result<String> {
        let url = self.url();
        match fieldhub_client::HubUrl::parse(&url) {
            Ok(fieldhub_client::HubUrl::Tcp { host, port }) if host.contains(':') => {
                Ok(format!("http://[{host}]:{port}"))
            }
            Ok(fieldhub_client::HubUrl::Tcp { host, port }) => Ok(format!("http://{host}:{port}")),
            Ok(_) => anyhow::bail!("the control API is served over TCP; give --hub tcp://HOST:PORT"),
            Err(why) => anyhow::bail!("invalid hub URL '{url}': {why}"),
        }
    }

    /// Connect, naming the client after the tool.
    pub fn connect(&self, tool: &str) -> anyhow::Result<fieldhub_client::Client> {
        use anyhow::Context;
        let url = self.url();
        let options =
            fieldhub_client::ClientOptions { name: tool.to_owned(), token: hub_token(), ..Default::default() };
        fieldhub_client::Client::connect_with(&url, &options).with_context(|| format!("fieldhub {tool}"))
    }
}

/// The token every tool presents to a hub that requires one.
pub fn hub_token() -> Option<String> {
    std::env::var("FIELDHUB_TOKEN").ok()
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Hub(args) => hub::run(args),
        Command::Dump(args) => dump::run(args),
        Command::Send(args) => send::run(args),
        Command::Gen(args) => gen::run(args),
        Command::Stats(args) => stats::run(args),
        Command::Record(args) => record::run(args),
        Command::Replay(args) => replay::run(args),
        Command::Ctl(args) => ctl::run(args),
        Command::FrameBits(args) => frame_bits::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Bridge(args) => bridge::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
