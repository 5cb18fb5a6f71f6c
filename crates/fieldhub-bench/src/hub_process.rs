//! The hub under test: a `fieldhub hub` process of its own, serving the
//! benchmark channel (and, for the channel scaling series, more channels:
//! [`channel_name`]; for the report, a [`TIMED_CHANNEL`] with bit timing)
//! over shared memory, a unix socket and loopback TCP at once.
//!
//! A separate process, not a thread of the benchmark, so the hub pays for
//! its own wake-ups and its CPU time can be read from `/proc`. It listens on
//! a free port (`127.0.0.1:0`) and a shm name unique to this benchmark; its
//! ready line (`--ready-fd`, on a pipe) says it is ready and where. Its log
//! is kept only to explain a hub that did not start. Dropping the handle
//! stops the hub with SIGTERM (so it removes its session socket), or SIGKILL
//! if it does not go.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::{BenchError, Launcher, Transport, CHANNEL};

/// How long a hub may take to start, or to stop before it is killed.
const START_STOP: Duration = Duration::from_secs(10);

/// The channel with real bit timing (`timing = "timed"`) that
/// [`HubProcess::start_with_timed_channel`] adds: each frame occupies it
/// for its exact on-wire time at these rates.
pub const TIMED_CHANNEL: &str = "bench-timed";
/// Nominal bitrate of [`TIMED_CHANNEL`] (bit/s).
pub const TIMED_BITRATE: u32 = 500_000;
/// CAN FD data-phase bitrate of [`TIMED_CHANNEL`] (bit/s).
pub const TIMED_DATA_BITRATE: u32 = 2_000_000;

/// A running hub process; stopped on drop.
pub struct HubProcess {
    child: Child,
    /// `shm://NAME`, from the ready line.
    shm: String,
    tcp: SocketAddr,
    unix: PathBuf,
    config: PathBuf,
    /// cannelloni endpoints (`udp/ADDR`, `tcp/ADDR`), from the ready line.
    cannelloni: Vec<String>,
    /// The socketcand server, from the ready line.
    socketcand: Option<SocketAddr>,
}

/// The part of the hub's ready line the benchmarks use; serde skips the rest.
#[derive(Deserialize)]
struct Ready {
    tcp: Vec<SocketAddr>,
    unix: Vec<PathBuf>,
    shm: Option<String>,
    #[serde(default)]
    cannelloni: Vec<String>,
    #[serde(default)]
    socketcand: Option<SocketAddr>,
}

/// The endpoints for other tools a hub serves besides its own protocol,
/// and what else a benchmark adds to its configuration.
#[derive(Clone, Debug)]
struct Endpoints {
    /// A `[[cannelloni]]` endpoint over TCP and one over UDP.
    cannelloni: bool,
    /// A socketcand server (`[hub] socketcand`).
    socketcand: bool,
    /// More of the configuration: [`HubExtras`].
    extras: HubExtras,
}

impl Endpoints {
    const NONE: Self = Self { cannelloni: false, socketcand: false, extras: HubExtras::NONE };
}

/// What a benchmark adds to the generated configuration of its hub.
#[derive(Clone, Debug, Default)]
pub struct HubExtras {
    /// Keys of the `[hub]` table (`name = "owner"`, ...).
    pub hub_keys: String,
    /// Keys of the benchmark channel's table (`federated = true`, ...).
    pub channel_keys: String,
    /// Tables after the channels (`[federation]`, `[[silkit]]`, ...).
    pub tables: String,
    /// Environment of the hub process (`FIELDHUB_SILKIT_LIB`, ...).
    pub env: Vec<(String, String)>,
}

impl HubExtras {
    const NONE: Self =
        Self { hub_keys: String::new(), channel_keys: String::new(), tables: String::new(), env: Vec::new() };
}

/// Hubs started by this process so far, to keep their shm names apart.
static STARTED: AtomicU32 = AtomicU32::new(0);

impl HubProcess {
    /// Start a hub with the benchmark channel only; with `busy_poll` its
    /// bus thread never sleeps.
    pub fn start(launcher: &Launcher, busy_poll: bool) -> Result<Self, BenchError> {
        Self::spawn(launcher, busy_poll, 1, false, None, false, Endpoints::NONE)
    }

    /// Start a hub with the benchmark channel and a cannelloni endpoint on
    /// it over TCP and over UDP (loopback, learning its UDP peers).
    pub fn start_with_cannelloni(launcher: &Launcher) -> Result<Self, BenchError> {
        Self::spawn(launcher, false, 1, false, None, false, Endpoints { cannelloni: true, ..Endpoints::NONE })
    }

    /// Start a hub with the benchmark channel and a socketcand server
    /// (loopback, a port of the kernel's choice).
    pub fn start_with_socketcand(launcher: &Launcher) -> Result<Self, BenchError> {
        Self::spawn(launcher, false, 1, false, None, false, Endpoints { socketcand: true, ..Endpoints::NONE })
    }

    /// Start a hub with the benchmark channel and `extras` in its
    /// configuration (a federation, a SIL Kit network it simulates, ...).
    pub fn start_with_extras(launcher: &Launcher, extras: HubExtras) -> Result<Self, BenchError> {
        Self::spawn(launcher, false, 1, false, None, false, Endpoints { extras, ..Endpoints::NONE })
    }

    /// Start a hub with `channels` channels, named by [`channel_name`].
    pub fn start_with_channels(launcher: &Launcher, channels: usize) -> Result<Self, BenchError> {
        Self::spawn(launcher, false, channels, false, None, false, Endpoints::NONE)
    }

    /// Start a hub with the benchmark channel and [`TIMED_CHANNEL`].
    pub fn start_with_timed_channel(launcher: &Launcher) -> Result<Self, BenchError> {
        Self::spawn(launcher, false, 1, true, None, false, Endpoints::NONE)
    }

    /// Start a hub whose shm clients get to-client rings of `slots` slots
    /// (`[hub] shm_ring_slots`).
    pub fn start_with_ring_slots(launcher: &Launcher, slots: u32) -> Result<Self, BenchError> {
        Self::spawn(launcher, false, 1, false, Some(slots), false, Endpoints::NONE)
    }

    /// Start a hub in virtual time (`--time virtual`) with the benchmark
    /// channel and [`TIMED_CHANNEL`].
    pub fn start_in_virtual_time(launcher: &Launcher) -> Result<Self, BenchError> {
        Self::spawn(launcher, false, 1, true, None, true, Endpoints::NONE)
    }

    fn spawn(
        launcher: &Launcher,
        busy_poll: bool,
        channels: usize,
        timed: bool,
        ring_slots: Option<u32>,
        virtual_time: bool,
        endpoints: Endpoints,
    ) -> Result<Self, BenchError> {
        let Endpoints { cannelloni, socketcand, extras } = endpoints;
        let shm_name = format!("bench-{}-{}", std::process::id(), STARTED.fetch_add(1, Ordering::Relaxed));
        let config = std::env::temp_dir().join(format!("fieldhub-{shm_name}.toml"));
        // Next to the hub's session socket: a private directory with a short
        // path (a unix socket path must fit 108 bytes; $TMPDIR need not).
        let socket_dir = fieldhub_shm::socket::socket_dir();
        fieldhub_shm::socket::ensure_private_dir(&socket_dir)?;
        let unix = socket_dir.join(format!("{shm_name}.unix.sock"));
        let mut text = format!(
            "[hub]\nlisten = [\"127.0.0.1:0\", \"unix:{}\"]\nshm = \"{shm_name}\"\nbusy_poll = {busy_poll}\n",
            unix.display()
        );
        text += &extras.hub_keys;
        if let Some(slots) = ring_slots {
            text += &format!("shm_ring_slots = {slots}\n");
        }
        if socketcand {
            text += "socketcand = \"127.0.0.1:0\"\n";
        }
        for i in 0..channels {
            text += &format!("[[channel]]\nname = \"{}\"\nprotocol = \"canfd\"\n", channel_name(i));
            if i == 0 {
                text += &extras.channel_keys;
            }
        }
        if timed {
            text += &format!(
                "[[channel]]\nname = \"{TIMED_CHANNEL}\"\nprotocol = \"canfd\"\ntiming = \"timed\"\n\
                 bitrate = {TIMED_BITRATE}\ndata_bitrate = {TIMED_DATA_BITRATE}\n"
            );
        }
        if cannelloni {
            let endpoint = |listen: &str| format!("[[cannelloni]]\nchannel = \"{CHANNEL}\"\nlisten = \"{listen}\"\n");
            text += &endpoint("tcp/127.0.0.1:0");
            text += &(endpoint("udp/127.0.0.1:0") + "learn_peers = true\n");
        }
        text += &extras.tables;
        std::fs::write(&config, text)?;
        let mut command = launcher.command();
        command.envs(extras.env.iter().map(|(k, v)| (k, v)));
        command
            .arg("hub")
            .arg("--config")
            .arg(&config)
            .args(if virtual_time { &["--time", "virtual"][..] } else { &[] })
            .env("FIELDHUB_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let (mut child, ready) = match spawn_with_ready_pipe(&mut command) {
            Ok(spawned) => spawned,
            Err(e) => {
                let _ = std::fs::remove_file(&config);
                return Err(BenchError::Hub(format!("cannot run {}: {e}", launcher.exe.display())));
            }
        };
        let log = drain_log(child.stderr.take().expect("stderr is piped"));
        // Whatever happens next, the hub is now the handle's to stop.
        let mut hub = Self {
            child,
            shm: String::new(),
            tcp: SocketAddr::from(([127, 0, 0, 1], 0)),
            unix: PathBuf::new(),
            config,
            cannelloni: Vec::new(),
            socketcand: None,
        };
        let line = match ready.recv_timeout(START_STOP) {
            Ok(line) if !line.is_empty() => line,
            Ok(_) => return Err(hub.not_ready("exited before it was ready", log)),
            Err(_) => return Err(hub.not_ready(&format!("did not report ready within {START_STOP:?}"), log)),
        };
        let ready: Ready = serde_json::from_str(&line)
            .map_err(|e| BenchError::Hub(format!("the hub's ready line {line:?} is not what it should be: {e}")))?;
        hub.tcp = *ready.tcp.first().ok_or_else(|| BenchError::Hub("the hub reports no TCP address".into()))?;
        hub.shm = ready.shm.ok_or_else(|| BenchError::Hub("the hub reports no shared memory".into()))?;
        hub.cannelloni = ready.cannelloni;
        hub.socketcand = ready.socketcand;
        hub.unix =
            ready.unix.into_iter().next().ok_or_else(|| BenchError::Hub("the hub reports no unix socket".into()))?;
        Ok(hub)
    }

    /// The URL a client of `transport` connects with.
    pub fn url(&self, transport: Transport, busy_poll: bool) -> String {
        match transport {
            Transport::Shm if busy_poll => format!("{}?busy_poll=1", self.shm),
            Transport::Shm => self.shm.clone(),
            Transport::Unix => format!("unix:{}", self.unix.display()),
            Transport::Tcp => format!("tcp://{}", self.tcp),
        }
    }

    /// The cannelloni endpoint of `kind` (`tcp` or `udp`), when the hub has one.
    pub fn cannelloni(&self, kind: &str) -> Option<SocketAddr> {
        self.cannelloni.iter().find_map(|a| a.strip_prefix(kind)?.strip_prefix('/')?.parse().ok())
    }

    /// The socketcand server's address, when the hub serves one.
    pub fn socketcand(&self) -> Option<SocketAddr> {
        self.socketcand
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The error for a hub that did not get ready, with everything it logged.
    fn not_ready(mut self, why: &str, log: JoinHandle<Vec<String>>) -> BenchError {
        // Killed and reaped, the hub has closed its stderr: the log is complete.
        let _ = self.child.kill();
        let _ = self.child.wait();
        let log = log.join().unwrap_or_default().join("\n");
        BenchError::Hub(format!("the hub {why}; its log:\n{log}"))
    }
}

/// The name of the hub's channel `i`: the benchmark channel first, then
/// `bench1`, `bench2`, ...
pub fn channel_name(i: usize) -> String {
    match i {
        0 => CHANNEL.to_owned(),
        i => format!("{CHANNEL}{i}"),
    }
}

/// Spawn `command` (a `fieldhub hub`) with `--ready-fd` on the write end of a
/// pipe; the receiver gets everything read from the pipe up to end of file:
/// the ready line, or nothing if the hub exited first — which a pipe, unlike
/// a polled file, reports at once.
fn spawn_with_ready_pipe(command: &mut Command) -> std::io::Result<(Child, mpsc::Receiver<String>)> {
    let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let fd = write_end.as_raw_fd();
    command.arg("--ready-fd").arg(fd.to_string());
    // SAFETY: runs in the child between fork and exec, where `fd` is still
    // open, and only calls fcntl(2), which is async-signal-safe: the write
    // end, close-on-exec everywhere else, survives this one exec.
    unsafe {
        command
            .pre_exec(move || Ok(rustix::io::fcntl_setfd(BorrowedFd::borrow_raw(fd), rustix::io::FdFlags::empty())?));
    }
    let child = command.spawn()?;
    // Only the hub holds the write end now, so its close (or death) is our end of file.
    drop(write_end);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::fs::File::from(read_end).read_to_string(&mut line);
        let _ = tx.send(line);
    });
    Ok((child, rx))
}

/// Read the hub's log for its whole life, so it never blocks on a full
/// pipe; the lines come back when the hub closes its stderr.
fn drain_log(stderr: ChildStderr) -> JoinHandle<Vec<String>> {
    std::thread::spawn(move || BufReader::new(stderr).lines().map_while(Result::ok).collect())
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ =
            rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), rustix::process::Signal::TERM);
        let deadline = Instant::now() + START_STOP;
        while Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.config);
        let _ = std::fs::remove_file(&self.unix);
    }
}
