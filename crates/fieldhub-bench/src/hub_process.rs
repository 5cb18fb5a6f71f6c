//! The hub under test: a `fieldhub hub` process of its own, serving the
//! benchmark channel over shared memory and loopback TCP at once.
//!
//! A separate process, not a thread of the benchmark, so the hub pays for
//! its own wake-ups and its CPU time can be read from `/proc`. It listens on
//! a free port (`127.0.0.1:0`) and a shm name unique to this benchmark; the
//! addresses come from its log, whose last start-up line (`channels: …`)
//! also says it is ready. Dropping the handle stops the hub with SIGTERM
//! (so it removes its session socket), or SIGKILL if it does not go.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::{BenchError, Launcher, Transport, CHANNEL};

/// How long a hub may take to start, or to stop before it is killed.
const START_STOP: Duration = Duration::from_secs(10);

/// A running hub process; stopped on drop.
pub struct HubProcess {
    child: Child,
    shm_name: String,
    tcp: SocketAddr,
    config: PathBuf,
}

/// Hubs started by this process so far, to keep their shm names apart.
static STARTED: AtomicU32 = AtomicU32::new(0);

impl HubProcess {
    /// Start a hub; with `busy_poll` its bus thread never sleeps.
    pub fn start(launcher: &Launcher, busy_poll: bool) -> Result<Self, BenchError> {
        let shm_name = format!("bench-{}-{}", std::process::id(), STARTED.fetch_add(1, Ordering::Relaxed));
        let config = std::env::temp_dir().join(format!("fieldhub-{shm_name}.toml"));
        std::fs::write(
            &config,
            format!(
                "[hub]\nlisten = [\"127.0.0.1:0\"]\nshm = \"{shm_name}\"\nbusy_poll = {busy_poll}\n\
                 [[channel]]\nname = \"{CHANNEL}\"\nprotocol = \"canfd\"\n"
            ),
        )?;
        let spawned = Command::new(&launcher.exe)
            .arg("hub")
            .arg("--config")
            .arg(&config)
            .env("FIELDHUB_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => {
                let _ = std::fs::remove_file(&config);
                return Err(BenchError::Hub(format!("cannot run {}: {e}", launcher.exe.display())));
            }
        };
        let stderr = child.stderr.take().expect("stderr is piped");
        let (lines, log) = mpsc::channel();
        // The reader keeps draining the log for the hub's whole life, so the
        // hub never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = lines.send(line);
            }
        });
        let mut hub = Self { child, shm_name, tcp: SocketAddr::from(([127, 0, 0, 1], 0)), config };
        let deadline = Instant::now() + START_STOP;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = log.recv_timeout(left).map_err(|_| {
                BenchError::Hub(format!(
                    "the hub did not report ready within {START_STOP:?}; its log:\n{}",
                    seen.join("\n")
                ))
            })?;
            if let Some(addr) = line.split("listening on ").nth(1) {
                if let Ok(addr) = addr.trim().trim_start_matches("tcp://").parse() {
                    hub.tcp = addr;
                }
            }
            let ready = line.contains("channels: ");
            seen.push(line);
            if ready {
                break;
            }
        }
        if hub.tcp.port() == 0 {
            return Err(BenchError::Hub(format!("the hub did not log its TCP address; its log:\n{}", seen.join("\n"))));
        }
        Ok(hub)
    }

    /// The URL a client of `transport` connects with.
    pub fn url(&self, transport: Transport, busy_poll: bool) -> String {
        match transport {
            Transport::Shm if busy_poll => format!("shm://{}?busy_poll=1", self.shm_name),
            Transport::Shm => format!("shm://{}", self.shm_name),
            Transport::Tcp => format!("tcp://{}", self.tcp),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
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
    }
}
