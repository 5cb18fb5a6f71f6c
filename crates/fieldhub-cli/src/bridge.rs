//! `fieldhub bridge socketcan IFACE`: join a SocketCAN interface to a hub
//! channel (see `fieldhub-socketcan` for what the bridge guarantees).
//!
//! Runs until SIGINT or SIGTERM, then prints the frame counts to stderr.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Context;
use fieldhub_socketcan::{Bridge, BridgeConfig};
use signal_hook::consts::{SIGINT, SIGTERM};
use tracing_subscriber::EnvFilter;

use crate::HubSelect;

#[derive(clap::Args)]
pub struct BridgeArgs {
    #[command(subcommand)]
    kind: BridgeKind,
}

#[derive(clap::Subcommand)]
enum BridgeKind {
    /// Join a Linux SocketCAN interface (can0, vcan0, …) to a hub channel, both ways, CAN and CAN FD.
    Socketcan(SocketcanArgs),
}

#[derive(clap::Args)]
struct SocketcanArgs {
    #[command(flatten)]
    hub: HubSelect,
    /// Hub channel to join.
    #[arg(long, value_name = "NAME", default_value = "can0")]
    channel: String,
    /// Hub-wide port name (default: chosen by the hub).
    #[arg(long, value_name = "NAME")]
    port: Option<String>,
    /// SocketCAN interface, as listed by `ip link`.
    #[arg(value_name = "IFACE")]
    interface: String,
}

pub fn run(args: BridgeArgs) -> anyhow::Result<()> {
    let BridgeKind::Socketcan(args) = args.kind;
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_env("FIELDHUB_LOG").unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let hub = args.hub.url();
    let config = BridgeConfig {
        interface: args.interface.clone(),
        hub,
        channel: args.channel,
        port: args.port,
        token: crate::hub_token()?,
    };
    let bridge = Bridge::open(config).with_context(|| format!("fieldhub bridge socketcan {}", args.interface))?;
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("cannot install signal handlers")?;
    }
    bridge.run(&stop);
    let counters = bridge.counters();
    eprintln!(
        "bridge {}: {} frames to the hub, {} to SocketCAN, {} dropped, {} refused by the interface",
        args.interface,
        counters.to_hub.load(Ordering::Relaxed),
        counters.to_socketcan.load(Ordering::Relaxed),
        counters.dropped_to_hub.load(Ordering::Relaxed),
        counters.refused_by_socketcan.load(Ordering::Relaxed),
    );
    Ok(())
}
