//! Benchmarks: what a frame costs through a hub, next to what the same
//! primitive costs without it, measured in the same run on the same machine.
//! Absolute times on a shared machine are noise; the ratio is the figure.
//!
//! - [`latency`]: round trips — a probe client sends, an echo client on the
//!   same channel answers, the probe receives (four one-way hops through the
//!   hub) — against a raw two-process ping-pong over the same primitive
//!   (two one-way hops): futex doorbells, spinning, a unix socket or
//!   TCP_NODELAY.
//! - [`scaling`]: the round trip as clients on the channel (2 to 256) or
//!   busy channels on the hub (1 to 100) grow, against the first point of
//!   the series (2 clients, 1 channel), same run; [`bystanders`] are the extra clients, [`background`]
//!   the traffic on the other channels.
//! - [`throughput`]: one sender as fast as it can, one or more receivers —
//!   against a raw two-process stream: an SPSC ring of `fieldhub-shm`, or
//!   a unix socket or TCP with 64 records a write.
//! - [`cannelloni`]: a cannelloni peer (TCP, UDP) through the hub's
//!   `[[cannelloni]]` endpoint next to a native TCP client: round trips and
//!   one-way frames/s (`fieldhub bench cannelloni`).
//! - [`socketcand`]: a socketcand client in RAW mode through the hub's
//!   socketcand server next to a native TCP client: round trips and one-way
//!   frames/s (`fieldhub bench socketcand`).
//! - [`rbs`]: a rest-bus simulation of 300 messages at 10 ms to 1 s in real
//!   time: each message's period error and lateness against its schedule,
//!   in frame times (`fieldhub bench rbs`).
//! - [`cpu`]: CPU time of the hub process and of its clients at idle and at
//!   a fixed frame rate.
//! - [`virtual_time`]: the real-time factor of a hub in virtual time —
//!   synchronised senders stepping a timed channel — against real time.
//! - [`federation`]: a federated channel between a relay hub and an owner
//!   hub in another network namespace, against raw TCP across the same veth
//!   pair and one hub's local channel.
//! - [`floors`]: the primitives alone (waking N sleeping processes, the
//!   CPU of one wake-up, a hand-off between threads), from which the report
//!   derives what a path cannot go below on this machine; [`sleeps`]: the
//!   sleeps a run's threads actually took (the kernel's voluntary context
//!   switches), which those floors are priced by.
//! - [`wake_word`]: what waking `n` sleepers costs the waker, a futex word
//!   each against one word for all (`examples/wake_word.rs`).
//! - [`silkit_peers`]: Vector SIL Kit's own round trips and CPU, and its
//!   participants with a hub as their network simulator.
//! - [`raw`]: the baselines, the measuring side and the peer side (which
//!   runs in a second process: `fieldhub bench raw-peer`).
//! - [`remote`]: round trips through a hub someone else runs, with the
//!   answering side elsewhere (a VM guest): `fieldhub bench echo` / `ping`.
//! - [`hub_process`]: the hub under test is always a separate `fieldhub hub`
//!   process, as in real use, never a thread of the benchmark.
//! - [`plot`]: the latency distributions as an SVG CDF.
//! - [`report`]: the whole methodology in one run (`fieldhub bench report`),
//!   written as HTML with inline plots, JSON and Markdown.
//! - [`soak`]: not a measurement: clients killed at random under numbered
//!   traffic, then the order and the hub's resources checked (`bench soak`).
//!
//! On other platforms (Windows) only [`remote`] and [`stats`] are built:
//! the rest start hubs and use shared memory, futexes and /proc.
//!
//! Invariants: every hub figure is reported next to the baseline of the same
//! run and its ratio `hub / baseline` (in a scaling series, the baseline is
//! the series' first point); the first round trips of every series
//! warm caches and threads up and are not counted. Benchmarks are not tests:
//! they print figures and assert nothing about them.

#[cfg(target_os = "linux")]
pub mod background;
#[cfg(target_os = "linux")]
pub mod bare_fan_out;
#[cfg(target_os = "linux")]
pub mod bystanders;
#[cfg(target_os = "linux")]
pub mod cannelloni;
#[cfg(target_os = "linux")]
pub mod chaos;
#[cfg(target_os = "linux")]
pub mod cpu;
#[cfg(target_os = "linux")]
pub mod federation;
#[cfg(target_os = "linux")]
pub mod floors;
#[cfg(target_os = "linux")]
pub mod gateway;
#[cfg(target_os = "linux")]
pub mod hub_process;
#[cfg(target_os = "linux")]
pub mod latency;
#[cfg(target_os = "linux")]
pub mod plot;
#[cfg(target_os = "linux")]
pub mod raw;
#[cfg(target_os = "linux")]
pub mod rbs;
pub mod remote;
#[cfg(target_os = "linux")]
pub mod report;
#[cfg(target_os = "linux")]
pub mod scaling;
#[cfg(target_os = "linux")]
pub mod silkit_peers;
#[cfg(target_os = "linux")]
pub mod sleeps;
#[cfg(target_os = "linux")]
pub mod soak;
#[cfg(target_os = "linux")]
pub mod soak_hostile;
#[cfg(target_os = "linux")]
pub mod socketcand;
pub mod stats;
#[cfg(target_os = "linux")]
mod stream_socket;
#[cfg(target_os = "linux")]
pub mod thread_cpu;
#[cfg(target_os = "linux")]
pub mod throughput;
#[cfg(target_os = "linux")]
pub mod virtual_time;
#[cfg(target_os = "linux")]
pub mod wake_word;

use std::path::PathBuf;
use std::time::Duration;

use fieldhub_client::PortConfig;

/// How the benchmarks open ports: taking CAN FD frames, as the 64-byte runs
/// send them.
pub fn fd_port() -> PortConfig {
    PortConfig { fd: true, ..PortConfig::default() }
}

/// A benchmark receiver's port: [`fd_port`], holding the bus while its
/// queue is full rather than losing a frame (`block_on_overflow`).
pub fn lossless_port() -> PortConfig {
    PortConfig { block_on_overflow: true, ..fd_port() }
}

/// The benchmark channel every hub under test carries (CAN FD, ideal timing).
pub const CHANNEL: &str = "bench";
/// The CAN XL channel (ideal timing) of a hub whose benchmark sends
/// [`FrameSize::Xl2048`] frames: `protocol = "canxl"`, which the endpoints
/// of other tools on [`CHANNEL`] (cannelloni) may not be.
pub const XL_CHANNEL: &str = "bench-xl";
/// Round trips (or frames) at the start of a series that are not counted.
pub const WARM_UP: usize = 200;
/// How long any single wait may take before the benchmark calls it stalled.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot start the hub under test: {0}")]
    Hub(String),
    #[error("raw baseline peer: {0}")]
    Peer(String),
    #[error(transparent)]
    Client(#[from] fieldhub_client::ClientError),
    #[error("extra client {index} of {count} cannot connect: {source}")]
    ExtraClient { index: usize, count: usize, source: fieldhub_client::ClientError },
    #[cfg(target_os = "linux")]
    #[error(transparent)]
    Ring(#[from] fieldhub_shm::RingError),
    #[cfg(target_os = "linux")]
    #[error("shared segment: {0}")]
    Segment(#[from] fieldhub_shm::OpenError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Stalled(String),
    #[error("{0}")]
    Invalid(String),
    #[error("cannot read {path}: {source}")]
    Proc { path: String, source: std::io::Error },
}

/// How the benchmark starts the `fieldhub` command for its hub and its
/// baseline peers: normally the running executable; the `fieldhub` script
/// of the Python package is the interpreter and its arguments.
#[derive(Clone, Debug)]
pub struct Launcher {
    pub exe: PathBuf,
    /// Arguments before the command's own (`-m fieldhub.cli`).
    pub prefix: Vec<std::ffi::OsString>,
}

impl Launcher {
    /// The running executable.
    pub fn current() -> Result<Self, BenchError> {
        Ok(Self { exe: std::env::current_exe()?, prefix: Vec::new() })
    }

    /// A `fieldhub` command, to which the caller adds its arguments.
    pub fn command(&self) -> std::process::Command {
        let mut command = std::process::Command::new(&self.exe);
        command.args(&self.prefix);
        command
    }
}

/// Where a benchmark reports how far it got (stderr in the CLI).
pub type Progress<'a> = &'a mut dyn FnMut(&str);

/// Payload sizes measured: 8-byte classic CAN, 64-byte CAN FD and
/// 2,048-byte CAN XL (the one payload the hub shares by reference rather
/// than copying, on [`XL_CHANNEL`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameSize {
    Can8,
    Fd64,
    Xl2048,
}

impl FrameSize {
    pub fn payload(self) -> usize {
        match self {
            FrameSize::Can8 => 8,
            FrameSize::Fd64 => 64,
            FrameSize::Xl2048 => fieldhub_proto::canxl::MAX_CANXL_DATA,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            FrameSize::Can8 => "8-byte CAN",
            FrameSize::Fd64 => "64-byte CAN FD",
            FrameSize::Xl2048 => "2048-byte CAN XL",
        }
    }

    /// A frame of this size whose first four payload bytes carry `counter`.
    pub fn frame(self, id: u32, counter: u32) -> fieldhub_proto::Frame {
        let mut data = [0x55u8; fieldhub_proto::canxl::MAX_CANXL_DATA];
        data[..4].copy_from_slice(&counter.to_le_bytes());
        let frame = match self {
            FrameSize::Can8 => fieldhub_proto::Frame::can(id, false, &data[..8]),
            FrameSize::Fd64 => fieldhub_proto::Frame::can_fd(id, fieldhub_proto::FrameFlags::BRS, &data[..64]),
            FrameSize::Xl2048 => {
                let flags = fieldhub_proto::FrameFlags::empty();
                fieldhub_proto::Frame::can_xl(id as u16 & 0x7FF, 0, 0, flags, 0, &data)
            }
        };
        frame.expect("an 11-bit id with 8, 64 or 2048 bytes is a valid frame")
    }

    /// The channel its frames go on.
    pub fn channel(self) -> &'static str {
        match self {
            FrameSize::Can8 | FrameSize::Fd64 => CHANNEL,
            FrameSize::Xl2048 => XL_CHANNEL,
        }
    }

    /// The wire message (`FRAMES` with one record, length prefix included)
    /// that carries one such frame: what the raw baselines move, so they
    /// copy exactly the bytes the hub's transports do.
    pub fn wire_message(self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut batch = fieldhub_proto::wire::BatchEncoder::begin(&mut out);
        batch.push(&mut out, 0, &self.frame(0x100, 0), &fieldhub_proto::FrameMeta::default());
        batch.finish(&mut out);
        out
    }
}

/// Transport between clients and the hub.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    Shm,
    Unix,
    Tcp,
}

impl Transport {
    pub fn name(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Unix => "unix",
            Transport::Tcp => "tcp",
        }
    }
}

impl std::str::FromStr for Transport {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "shm" => Ok(Transport::Shm),
            "unix" => Ok(Transport::Unix),
            "tcp" => Ok(Transport::Tcp),
            _ => Err(format!("unknown transport '{s}': shm, unix or tcp")),
        }
    }
}
