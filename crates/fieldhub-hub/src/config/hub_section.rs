//! `[hub]`: the hub's identity, listeners, access, TLS files, shared
//! memory, recordings directory and time mode, with their defaults.

use std::path::PathBuf;

use fieldhub_bus::config::{StallPolicy, TimeMode, DEFAULT_STEP_TIMEOUT_MS};
use fieldhub_proto::limits::DEFAULT_TCP_PORT;
use serde::Deserialize;

/// `[hub] recordings_dir` when the configuration does not set it: relative
/// to the hub's working directory, created on the first recording.
pub const DEFAULT_RECORDINGS_DIR: &str = "recordings";

/// `[hub]`: identity, listeners and access.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HubSection {
    /// Name the hub reports to clients in `WELCOME`.
    #[serde(default = "default_hub_name")]
    pub name: String,
    /// TCP listen addresses (`HOST:PORT`). Loopback unless a token is set.
    #[serde(default = "default_listen")]
    pub listen: Vec<String>,
    /// Token clients must present; required when listening beyond loopback.
    /// Processes of the hub's own user may come without it.
    #[serde(default)]
    pub token: Option<String>,
    /// Admit every local user without a token, as if each were the hub's
    /// own (`docs/security.md`). Only without a token.
    #[serde(default)]
    pub insecure_local: bool,
    /// A second, read-only token: its clients receive frames and read the
    /// control API, never transmit or change anything. Needs `token`.
    #[serde(default)]
    pub monitor_token: Option<String>,
    /// PEM certificate chain (own certificate first): with it (and
    /// `tls_key`) every TCP listener speaks TLS, the protocol and the HTTP
    /// control API alike (`docs/security.md`, "TLS and mutual TLS").
    #[serde(default)]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    #[serde(default)]
    pub tls_key: Option<PathBuf>,
    /// PEM CA bundle: TCP clients must present a certificate one of these
    /// CAs signed (mutual TLS); such a certificate admits like the token.
    #[serde(default)]
    pub tls_client_ca: Option<PathBuf>,
    /// Also serve local clients over shared memory as `shm://NAME`.
    #[serde(default)]
    pub shm: Option<String>,
    /// Busy-poll instead of sleeping when idle: lowest latency, one core.
    #[serde(default)]
    pub busy_poll: bool,
    /// Run the bus thread under `SCHED_FIFO` (Linux), so it wakes for its
    /// deadlines even while other processes keep the cores busy; needs
    /// CAP_SYS_NICE or an `RLIMIT_RTPRIO` of at least 10, or the hub does
    /// not start (`docs/performance.md`). Not with `busy_poll`.
    #[serde(default)]
    pub realtime: bool,
    /// ivshmem region files to serve QEMU guests through (absolute paths,
    /// e.g. `/dev/shm/fieldhub-vm0`); the hub creates them.
    #[serde(default)]
    pub ivshmem: Vec<PathBuf>,
    /// The only directory hub-side recordings (`POST /api/v1/recordings`)
    /// are written in; their paths are relative to it. Relative to the hub's
    /// working directory; default `recordings`, created on first use.
    #[serde(default = "default_recordings_dir")]
    pub recordings_dir: PathBuf,
    /// Slots of each shared-memory client's receive ring (128 bytes each,
    /// about three classic frames or one 64-byte CAN FD frame a slot): how
    /// large a burst a client that is not reading survives before its ports'
    /// overflow policy applies. A power of two from 4096 to 1048576.
    #[serde(default = "default_shm_ring_slots")]
    pub shm_ring_slots: u32,
    /// `real` (the wall clock) or `virtual`: bus time starts at 0 and
    /// advances only when every synchronised participant has finished its
    /// step (`docs/virtual-time.md`).
    #[serde(default)]
    pub time: TimeMode,
    /// Virtual time: client names (`HELLO`) that must have joined as
    /// synchronised participants before bus time first moves, so a run does
    /// not start without one of them.
    #[serde(default)]
    pub time_participants: Vec<String>,
    /// Virtual time: wall-clock milliseconds a participant has to finish its
    /// step before it is reported.
    #[serde(default = "default_step_timeout_ms")]
    pub step_timeout_ms: u64,
    /// Virtual time: what a stalled participant costs — `report` (time keeps
    /// waiting for it) or `drop` (it becomes an observer, time goes on).
    #[serde(default)]
    pub on_stall: StallPolicy,
    /// Serve socketcand's protocol on this `HOST:PORT` (`docs/socketcand.md`):
    /// python-can's `socketcand` interface, SavvyCAN and Kayak open a
    /// channel as a bus.
    #[serde(default)]
    pub socketcand: Option<String>,
    /// Let a socketcand listener beyond loopback admit clients without a
    /// token (socketcand has none); the hub warns at start.
    #[serde(default)]
    pub socketcand_allow_unauthenticated: bool,
    /// Send socketcand's discovery beacon (`<CANBeacon>`, every 2.5 s) to
    /// this broadcast address, `IP` or `IP:PORT` (default port 42000): the
    /// broadcast address of the one network that should find the hub.
    #[serde(default)]
    pub socketcand_beacon: Option<String>,
}

impl Default for HubSection {
    fn default() -> Self {
        Self {
            name: default_hub_name(),
            listen: default_listen(),
            token: None,
            insecure_local: false,
            monitor_token: None,
            tls_cert: None,
            tls_key: None,
            tls_client_ca: None,
            shm: None,
            busy_poll: false,
            realtime: false,
            ivshmem: Vec::new(),
            recordings_dir: default_recordings_dir(),
            shm_ring_slots: default_shm_ring_slots(),
            time: TimeMode::Real,
            time_participants: Vec::new(),
            step_timeout_ms: DEFAULT_STEP_TIMEOUT_MS,
            on_stall: StallPolicy::Report,
            socketcand: None,
            socketcand_allow_unauthenticated: false,
            socketcand_beacon: None,
        }
    }
}

fn default_step_timeout_ms() -> u64 {
    DEFAULT_STEP_TIMEOUT_MS
}

fn default_shm_ring_slots() -> u32 {
    fieldhub_shm::layout::TO_CLIENT_SLOTS
}

fn default_recordings_dir() -> PathBuf {
    PathBuf::from(DEFAULT_RECORDINGS_DIR)
}

fn default_hub_name() -> String {
    "fieldhub".to_owned()
}

fn default_listen() -> Vec<String> {
    vec![format!("127.0.0.1:{DEFAULT_TCP_PORT}")]
}

/// The files of `[hub] tls_*`, as the configuration names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The server's certificate chain, its own certificate first.
    pub cert: PathBuf,
    /// The private key of that certificate.
    pub key: PathBuf,
    /// When set, clients must present a certificate signed by one of these CAs.
    pub client_ca: Option<PathBuf>,
}
