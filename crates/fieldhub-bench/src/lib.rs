//! Benchmarks: what a frame costs through the hub, next to what the same
//! transport costs without it, measured in the same run on the same machine.
//! Absolute times on a shared machine are noise; the ratio is the figure.
//!
//! - [`latency`]: round trips — a measuring client sends, an echo client on
//!   the same channel answers, the measuring client receives (four one-way
//!   hops through the hub) — against a raw ping-pong over the same primitive
//!   (two one-way hops).
//! - [`throughput`]: one sender as fast as it can, one or more receivers —
//!   against a raw stream of the same records over the same primitive.
//!
//! Benchmarks are not tests: they print figures and assert nothing.

pub mod latency;
pub mod stats;
pub mod throughput;

use fieldhub_hub::{Hub, HubConfig, ListenAddr};

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot start the benchmark hub: {0}")]
    Hub(String),
    #[error(transparent)]
    Client(#[from] fieldhub_client::ClientError),
    #[error("baseline: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Stalled(String),
}

/// A hub in this process on a free loopback port, for a benchmark that was
/// not given one.
pub fn private_hub() -> Result<(Hub, String), BenchError> {
    let config = HubConfig::parse(
        "[hub]\nlisten = [\"127.0.0.1:0\"]\n[[channel]]\nname = \"bench\"\nprotocol = \"canfd\"\n",
        "benchmark hub",
    )
    .map_err(|e| BenchError::Hub(e.to_string()))?;
    let hub = Hub::start(config).map_err(|e| BenchError::Hub(e.to_string()))?;
    let url = match hub.listen_addrs().first() {
        Some(ListenAddr::Tcp(addr)) => format!("tcp://{addr}"),
        _ => return Err(BenchError::Hub("the benchmark hub has no TCP address".into())),
    };
    Ok((hub, url))
}
