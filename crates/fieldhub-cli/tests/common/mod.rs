//! Test support: a real hub process and sequence-numbered traffic.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions, Frame, PortConfig, Received};

/// Long enough for any step on a loaded CI machine; only guards against hangs.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A `fieldhub hub` child process on a free loopback port.
pub struct HubProcess {
    child: Child,
    pub url: String,
    /// `shm://NAME` when the hub also serves shared memory.
    pub shm_url: Option<String>,
    log: Arc<Mutex<Vec<String>>>,
    config_file: Option<std::path::PathBuf>,
}

impl HubProcess {
    /// Start a hub with the built-in configuration.
    pub fn start() -> Self {
        Self::start_with(None, &[])
    }

    /// Start a hub with config text (written to a temp file) and extra args.
    /// It serves no shared memory unless `extra` names it (`--shm NAME`):
    /// hubs of parallel tests must not compete for `shm://default`.
    /// Its addresses come from its ready line (`--ready-fd`), not its log.
    pub fn start_with(config: Option<&str>, extra: &[&str]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fieldhub"));
        command.args(["hub", "--listen", "127.0.0.1:0"]).args(extra);
        if !extra.contains(&"--shm") {
            command.arg("--no-shm");
        }
        let config_file = config.map(|text| {
            let path = std::env::temp_dir().join(format!("fieldhub-test-{}-{}.toml", std::process::id(), unique()));
            std::fs::write(&path, text).expect("write config");
            path
        });
        if let Some(path) = &config_file {
            command.arg("--config").arg(path);
        }
        // Tests wait for log lines (`wait_for_log`), so the hub logs at info.
        command.env("FIELDHUB_LOG", "info").stdout(Stdio::null()).stderr(Stdio::piped());
        let (mut child, ready) = spawn_with_ready_pipe(&mut command);
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    log.lock().unwrap().push(line);
                }
            })
        };
        let ready = match ready.recv_timeout(PATIENCE) {
            Ok(line) if !line.is_empty() => line,
            outcome => {
                // Killed and reaped, the hub has closed its stderr: the log is complete.
                let _ = child.kill();
                let status = child.wait().expect("wait for hub");
                let _ = reader.join();
                let why = if outcome.is_err() { "sent no ready line in time" } else { "closed its ready pipe" };
                panic!("hub {why} ({status}); log: {:#?}", log.lock().unwrap());
            }
        };
        let ready: serde_json::Value = serde_json::from_str(&ready).expect("ready line is JSON");
        let url = format!("tcp://{}", ready["tcp"][0].as_str().expect("ready line names a TCP address"));
        let shm_url = ready["shm"].as_str().map(str::to_owned);
        Self { child, url, shm_url, log, config_file }
    }

    /// Start a hub with the built-in configuration that also serves shared
    /// memory, under a name private to this test.
    pub fn start_shm() -> Self {
        Self::start_shm_with(None, &[])
    }

    /// [`HubProcess::start_with`], also serving shared memory under a
    /// private name.
    pub fn start_shm_with(config: Option<&str>, extra: &[&str]) -> Self {
        let name = format!("test-{}-{}", std::process::id(), unique());
        let mut args = vec!["--shm", name.as_str()];
        args.extend_from_slice(extra);
        Self::start_with(config, &args)
    }

    /// Connect a client named `name` over shared memory.
    pub fn shm_client(&self, name: &str) -> Client {
        let url = self.shm_url.as_deref().expect("this hub serves no shared memory; start it with start_shm");
        let options = ClientOptions { name: name.into(), ..Default::default() };
        Client::connect_with(url, &options).expect("connect to hub over shared memory")
    }

    /// Connect a client named `name`.
    pub fn client(&self, name: &str) -> Client {
        let options = ClientOptions { name: name.into(), ..Default::default() };
        Client::connect_with(&self.url, &options).expect("connect to hub")
    }

    /// The hub's log lines so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Wait until a log line contains `needle`; returns that line.
    pub fn wait_for_log(&self, needle: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(line) = self.log().into_iter().find(|l| l.contains(needle)) {
                return line;
            }
            assert!(Instant::now() < deadline, "hub never logged '{needle}'; log: {:#?}", self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The hub's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    /// Send SIGTERM and wait for a clean exit.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: kill(2) takes plain integers; signalling our own child
        // cannot affect this process's memory.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        self.child.wait().expect("wait for hub")
    }
}

impl Drop for HubProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(path) = &self.config_file {
            let _ = std::fs::remove_file(path);
        }
        // A killed hub cannot remove its shared-memory session socket.
        if let Some(name) = self.shm_url.as_deref().and_then(|url| url.strip_prefix("shm://")) {
            if let Ok(path) = fieldhub_shm::socket::socket_path(name) {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Spawn `command` (a `fieldhub hub`) with `--ready-fd` on the write end of a
/// pipe; the receiver gets everything read from the pipe up to end of file:
/// the ready line, or nothing if the hub exited first. A pipe, unlike a
/// polled file, also reports a hub that died.
fn spawn_with_ready_pipe(command: &mut Command) -> (Child, std::sync::mpsc::Receiver<String>) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;

    let mut fds = [0; 2];
    // SAFETY: pipe2(2) writes two new descriptors into the array it is given.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0, "pipe2");
    // SAFETY: both descriptors were just created and are owned by nothing else.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let fd = write_end.as_raw_fd();
    command.arg("--ready-fd").arg(fd.to_string());
    // SAFETY: runs in the child between fork and exec, and only calls
    // fcntl(2), which is async-signal-safe: the write end, close-on-exec
    // everywhere else (other tests' children included), survives the exec.
    unsafe {
        command.pre_exec(move || match libc::fcntl(fd, libc::F_SETFD, 0) {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    let child = command.spawn().expect("start fieldhub hub");
    // Only the hub holds the write end now, so its close (or death) is our end of file.
    drop(write_end);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::Read::read_to_string(&mut std::fs::File::from(read_end), &mut line);
        let _ = tx.send(line);
    });
    (child, rx)
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A port config that holds the bus rather than drop when this receiver lags,
/// so order tests can demand every frame.
pub fn lossless() -> PortConfig {
    PortConfig { block_on_overflow: true, ..Default::default() }
}

/// A classic frame carrying `(sender, counter)` as its payload.
pub fn numbered(id: u32, sender: u8, counter: u32) -> Frame {
    let c = counter.to_le_bytes();
    Frame::can(id, false, &[sender, c[0], c[1], c[2], c[3]]).expect("valid frame")
}

/// `(sender, counter)` from a [`numbered`] frame.
pub fn number_of(frame: &Frame) -> (u8, u32) {
    let d = frame.data();
    (d[0], u32::from_le_bytes([d[1], d[2], d[3], d[4]]))
}

/// Receive exactly `n` frames, failing on a stall.
pub fn recv_n(client: &Client, n: usize) -> Vec<Received> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match client.recv(Some(PATIENCE)).expect("recv") {
            Some(r) => out.push(r),
            None => panic!("stalled after {} of {n} frames", out.len()),
        }
    }
    out
}

/// Everything already delivered to a client that stopped reading: receive
/// while a flush is under way, then what is left in the queue. The flush's
/// pong waits behind every frame still buffered for the client, so once it
/// returns, everything the hub delivered is in the receive queue.
pub fn drain_delivered(client: &Client) -> Vec<Received> {
    std::thread::scope(|s| {
        let flushed = s.spawn(|| client.flush().unwrap());
        let mut got = Vec::new();
        while !flushed.is_finished() {
            got.extend(client.recv(Some(Duration::from_millis(50))).unwrap());
        }
        flushed.join().unwrap();
        while let Some(r) = client.try_recv().unwrap() {
            got.push(r);
        }
        got
    })
}

/// Assert that no frame arrives before a flush round trip completes.
pub fn assert_nothing_pending(client: &Client) {
    client.flush().expect("flush");
    assert!(client.try_recv().expect("try_recv").is_none(), "unexpected frame");
}

/// Base URL of a hub's HTTP control API.
pub fn base(hub: &HubProcess) -> String {
    hub.url.replace("tcp://", "http://")
}

/// One control API call: (status, JSON body).
pub fn api(hub: &HubProcess, method: &str, path: &str, body: Option<serde_json::Value>) -> (u16, serde_json::Value) {
    let request = ureq::request(method, &format!("{}{path}", base(hub)));
    let result = match body {
        Some(b) => request.send_json(b),
        None => request.call(),
    };
    match result {
        Ok(r) => (r.status(), r.into_json().unwrap()),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap()),
        Err(e) => panic!("{method} {path}: {e}"),
    }
}

/// A control API call that must succeed.
pub fn ok(hub: &HubProcess, method: &str, path: &str, body: Option<serde_json::Value>) -> serde_json::Value {
    let (status, answer) = api(hub, method, path, body);
    assert_eq!(status, 200, "{method} {path}: {answer}");
    answer
}
