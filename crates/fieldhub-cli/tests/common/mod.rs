//! Test support: a real hub process and sequence-numbered traffic.
#![allow(dead_code)]

pub mod federation;
pub mod netns;
pub mod silkit;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions, Frame, Port, PortConfig, Received};

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
        Self::start_with_env(config, extra, &[])
    }

    /// A hub that requires `token`, given as operators should: in the
    /// environment, not on the command line.
    pub fn start_with_token(token: &str) -> Self {
        Self::start_with_env(None, &[], &[("FIELDHUB_TOKEN", token)])
    }

    /// [`HubProcess::start_with`], with variables set in the hub's environment.
    pub fn start_with_env(config: Option<&str>, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = Command::new(env!("CARGO_BIN_EXE_fieldhub"));
        command.args(["hub", "--listen", "127.0.0.1:0"]);
        Self::spawn(command, config, extra, env)
    }

    /// A hub run through `launcher` (e.g. `ip netns exec NS`), listening for
    /// clients on the unix socket `socket` only: a filesystem socket is
    /// reachable from any network namespace, so the test's clients reach a
    /// hub whose federation links live in a namespace of its own.
    pub fn start_via(launcher: &[&str], socket: &std::path::Path, config: &str) -> Self {
        let mut command = Command::new(launcher[0]);
        command.args(&launcher[1..]).arg(env!("CARGO_BIN_EXE_fieldhub")).arg("hub").arg("--listen");
        command.arg(format!("unix:{}", socket.display()));
        Self::spawn(command, Some(config), &[], &[])
    }

    fn spawn(mut command: Command, config: Option<&str>, extra: &[&str], env: &[(&str, &str)]) -> Self {
        command.args(extra).envs(env.iter().copied());
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
        let url = match (ready["tcp"][0].as_str(), ready["unix"][0].as_str()) {
            (Some(tcp), _) => format!("tcp://{tcp}"),
            (None, Some(unix)) => format!("unix:{unix}"),
            (None, None) => panic!("the ready line names no TCP or unix address: {ready}"),
        };
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

pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A port config that holds its channel rather than drop when this receiver lags,
/// so order tests can demand every frame — CAN FD frames included.
pub fn lossless() -> PortConfig {
    PortConfig { block_on_overflow: true, fd: true, ..Default::default() }
}

/// Keep `channel` of a slow timed hub busy: `blocker` sends three 8-byte
/// frames of identifier `id` and this returns, with them, once the first is
/// on the bus and two wait (at 500 bit/s each holds the bus ~220 ms, long
/// enough for frames sent meanwhile to contend together when it ends). The
/// blocker must stay connected: its waiting frames leave with it.
pub fn occupy_bus(blocker: &Client, channel: &str, id: u32) -> Vec<Frame> {
    let port = blocker.open_port(channel).unwrap();
    let blocks: Vec<Frame> = (0..3).map(|k| Frame::can(id, false, &[k; 8]).unwrap()).collect();
    blocks.iter().for_each(|f| blocker.send(&port, f).unwrap());
    let deadline = Instant::now() + PATIENCE;
    let waiting =
        || blocker.stats().unwrap().ports.iter().find(|p| p.port_id == port.port_id).map_or(0, |p| p.tx_pending);
    while waiting() != 2 {
        assert!(Instant::now() < deadline, "the blocker never started");
        std::thread::sleep(Duration::from_millis(1));
    }
    blocks
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

/// Send `frames` numbered frames from `sender` on `tx` while `threads`
/// threads take them from `receiver` at once and one more asks `receiver`
/// for flushes meanwhile (their replies wait among the frames). Asserts that
/// every frame is taken exactly once and each thread took its frames in
/// order; returns how many flushes completed.
pub fn receive_on_threads_at_once(sender: &Client, tx: &Port, receiver: &Client, threads: usize, frames: u32) -> u32 {
    let taken = AtomicUsize::new(0);
    let (per_thread, flushes) = std::thread::scope(|s| {
        s.spawn(|| (0..frames).for_each(|n| sender.send(tx, &numbered(0x100, 1, n)).unwrap()));
        let receiving: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    let started = Instant::now();
                    while taken.load(Ordering::Relaxed) < frames as usize {
                        assert!(started.elapsed() < PATIENCE, "stalled at {} frames", taken.load(Ordering::Relaxed));
                        if let Some(got) = receiver.recv(Some(Duration::from_millis(20))).unwrap() {
                            taken.fetch_add(1, Ordering::Relaxed);
                            mine.push(got);
                        }
                    }
                    mine
                })
            })
            .collect();
        let flushing = s.spawn(|| {
            let mut flushes = 0u32;
            while taken.load(Ordering::Relaxed) < frames as usize {
                receiver.flush().expect("a flush among receiving threads");
                flushes += 1;
            }
            flushes
        });
        let per_thread: Vec<Vec<Received>> = receiving.into_iter().map(|t| t.join().unwrap()).collect();
        (per_thread, flushing.join().unwrap())
    });
    let mut seen = HashSet::new();
    for (i, mine) in per_thread.iter().enumerate() {
        for pair in mine.windows(2) {
            assert!(pair[1].meta.seq > pair[0].meta.seq, "thread {i} took frames out of order");
        }
        for got in mine {
            assert!(seen.insert(number_of(&got.frame).1), "frame {:?} taken twice", number_of(&got.frame));
        }
    }
    assert_eq!(seen.len(), frames as usize, "every frame taken once");
    flushes
}

/// Whether `fd` is readable within `timeout_ms` (0: now).
pub fn readable(fd: i32, timeout_ms: i32) -> bool {
    let mut pollfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: `pollfd` is a valid, exclusively borrowed array of one entry
    // for the duration of the call.
    let n = unsafe { libc::poll(&mut pollfd, 1, timeout_ms) };
    n == 1 && pollfd.revents & libc::POLLIN != 0
}

/// 200 bursts of 1 to 5 numbered frames from `sender` on `tx` to
/// `receiver`, whose ready fd must be readable exactly while frames wait:
/// readable once a burst is sent (nobody waiting in `recv`), readable before
/// each `recv` of it, quiet once it is all taken.
pub fn assert_ready_fd_follows_the_receive_queue(sender: &Client, tx: &Port, receiver: &Client) {
    let fd = receiver.fileno().unwrap();
    assert_eq!(receiver.fileno().unwrap(), fd, "one fd for the client's life");
    assert!(!readable(fd, 0), "nothing sent yet");
    for round in 0..200u32 {
        let burst = 1 + round % 5;
        for i in 0..burst {
            sender.send(tx, &numbered(0x1, 1, i)).unwrap();
        }
        assert!(readable(fd, 60_000), "round {round}: frames sent, fd quiet");
        // Once both flushes return, the whole burst is in the receive queue.
        sender.flush().unwrap();
        receiver.flush().unwrap();
        for i in 0..burst {
            // Readable means recv will not block.
            assert!(readable(fd, 0));
            let got = receiver.recv(Some(PATIENCE)).unwrap().expect("a frame");
            assert_eq!(number_of(&got.frame), (1, i));
        }
        assert!(!readable(fd, 0), "round {round}: queue empty, fd still readable");
    }
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

// ---------------------------------------------------------------------------
// Added for the session-layer tests (scale, hostile shm, lossless stalls,
// back-pressure, slot recycling).

/// An HTTP agent for the control API that reuses its connection and never
/// waits longer than [`PATIENCE`] for an answer.
pub fn patient_agent() -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(PATIENCE).build()
}

/// One control API call through `agent`: (status, JSON body). A transport
/// failure (a timeout included) is reported as status 0 with the error text.
pub fn api_via(
    agent: &ureq::Agent,
    hub: &HubProcess,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let request = agent.request(method, &format!("{}{path}", base(hub)));
    let result = match body {
        Some(b) => request.send_json(b),
        None => request.call(),
    };
    match result {
        Ok(r) => (r.status(), r.into_json().unwrap_or(serde_json::Value::Null)),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(serde_json::Value::Null)),
        Err(e) => (0, serde_json::Value::String(format!("{method} {path}: {e}"))),
    }
}

/// Every frame of `frames` whose sender tag is `sender`, as counters.
pub fn counters_from(frames: &[Received], sender: u8) -> Vec<u32> {
    frames.iter().map(|r| number_of(&r.frame)).filter(|(s, _)| *s == sender).map(|(_, n)| n).collect()
}

/// `sender` sends `count` numbered frames (tag `tag`, id `id`) on `tx` while
/// `receiver` (a lossless port) takes them; asserts they all arrive, in
/// order, exactly once. Frames of other senders on the channel are skipped.
pub fn exchange_numbered(sender: &Client, tx: &fieldhub_client::Port, receiver: &Client, id: u32, tag: u8, count: u32) {
    std::thread::scope(|s| {
        s.spawn(|| {
            for n in 0..count {
                sender.send_timeout(tx, &numbered(id, tag, n), Some(PATIENCE)).expect("send");
            }
        });
        let mut next = 0u32;
        while next < count {
            let got = receiver
                .recv(Some(PATIENCE))
                .expect("recv")
                .unwrap_or_else(|| panic!("stalled after {next} of {count} frames"));
            let (sender_tag, counter) = number_of(&got.frame);
            if sender_tag != tag {
                continue;
            }
            assert_eq!(counter, next, "frame out of order or lost");
            next += 1;
        }
    });
}

/// A stream client spoken by hand: it says exactly what a test makes it say
/// and reads only when the test reads.
pub struct RawStream {
    pub stream: std::net::TcpStream,
}

impl RawStream {
    /// Connect to the hub's TCP address.
    pub fn connect(hub: &HubProcess) -> Self {
        let stream = std::net::TcpStream::connect(hub.url.strip_prefix("tcp://").unwrap()).expect("connect");
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Self { stream }
    }

    /// Connect with a receive buffer of about `bytes` set before the
    /// connection is made (so the advertised window stays small): a reader
    /// that stops reading backs the hub up after little data.
    pub fn connect_with_small_window(hub: &HubProcess, bytes: i32) -> Self {
        use std::os::fd::FromRawFd;
        let addr: std::net::SocketAddrV4 = hub.url.strip_prefix("tcp://").unwrap().parse().expect("IPv4 address");
        // SAFETY: plain system calls on a descriptor this function creates
        // and hands to `TcpStream`, which owns it from then on; the option
        // and address structures live on the stack for the calls.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let set = libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&bytes as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
            assert_eq!(set, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
            let sa = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: addr.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
                sin_zero: [0; 8],
            };
            let connected = libc::connect(
                fd,
                (&sa as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            );
            assert_eq!(connected, 0, "connect: {}", std::io::Error::last_os_error());
            let stream = std::net::TcpStream::from_raw_fd(fd);
            stream.set_read_timeout(Some(PATIENCE)).unwrap();
            Self { stream }
        }
    }

    pub fn send(&mut self, message: &fieldhub_proto::wire::Message<'_>) {
        use std::io::Write;
        let mut bytes = Vec::new();
        fieldhub_proto::wire::encode(&mut bytes, message);
        self.stream.write_all(&bytes).expect("write to the hub");
    }

    /// HELLO, then WELCOME (panics on anything else); returns the client id.
    pub fn hello(&mut self, name: &str) -> u32 {
        use fieldhub_proto::wire::{self, Hello, Message};
        self.send(&Message::Hello(Hello {
            version: fieldhub_proto::limits::PROTOCOL_VERSION,
            name,
            token: "",
            options: Default::default(),
        }));
        let body = self.read_message().expect("the hub closed the connection instead of answering HELLO");
        match wire::decode(&body) {
            Ok(Message::Welcome(w)) => w.client_id,
            Ok(Message::Refuse(r)) => panic!("the hub refused the connection: {}", r.text),
            other => panic!("expected WELCOME, got {other:?}"),
        }
    }

    /// OPEN_PORT and its PORT_OPENED (frames that come first are skipped).
    pub fn open_port(
        &mut self,
        channel: &str,
        options: fieldhub_proto::wire::PortOptions,
    ) -> fieldhub_proto::wire::PortOpened {
        use fieldhub_proto::wire::{self, Message, OpenPort};
        self.send(&Message::OpenPort(OpenPort { request: 1, options, channel, port_name: "" }));
        loop {
            let body = self.read_message().expect("the hub closed the connection instead of answering OPEN_PORT");
            match wire::decode(&body) {
                Ok(Message::PortOpened(opened)) => return opened,
                Ok(Message::Frames(_)) => {}
                other => panic!("expected PORT_OPENED, got {other:?}"),
            }
        }
    }

    /// One `FRAMES` message of `frames` from port `port`, as a client that
    /// checks nothing itself would send it.
    pub fn send_frames(&mut self, port: u16, frames: &[Frame]) {
        use std::io::Write;
        let mut bytes = Vec::new();
        let mut batch = fieldhub_proto::wire::BatchEncoder::begin(&mut bytes);
        for frame in frames {
            batch.push(&mut bytes, port, frame, &fieldhub_proto::FrameMeta::default());
        }
        batch.finish(&mut bytes);
        self.stream.write_all(&bytes).expect("write to the hub");
    }

    /// The next message body, or `None` once the hub has closed the stream.
    pub fn read_message(&mut self) -> Option<Vec<u8>> {
        use std::io::Read;
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix).ok()?;
        let mut body = vec![0u8; u32::from_le_bytes(prefix) as usize];
        self.stream.read_exact(&mut body).ok()?;
        Some(body)
    }
}

/// A read-write shared mapping of a whole file, for writing words the
/// protocol reserves to the other side (what a hostile client can do).
pub struct RawMapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory, accessed only through atomics.
unsafe impl Send for RawMapping {}
// SAFETY: as above.
unsafe impl Sync for RawMapping {}

impl RawMapping {
    /// Map all of `fd` (shared, read-write).
    pub fn map(fd: &std::os::fd::OwnedFd) -> Self {
        use std::os::fd::AsRawFd;
        let len = std::fs::File::from(fd.try_clone().unwrap()).metadata().unwrap().len() as usize;
        // SAFETY: a fresh mapping of a file we hold; the kernel picks the
        // address; the result is checked before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        Self { ptr: ptr.cast(), len }
    }

    /// The `u32` word at `offset` (4-aligned, inside the mapping).
    pub fn word(&self, offset: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(offset % 4 == 0 && offset + 4 <= self.len);
        // SAFETY: in bounds and aligned (checked above; mappings are
        // page-aligned); the mapping lives as long as the borrow.
        unsafe { &*self.ptr.add(offset).cast::<std::sync::atomic::AtomicU32>() }
    }
}

impl Drop for RawMapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped; no borrow outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Offsets of the words in a client segment and the hub's bell segment
/// (`spec/shm.md` 2.1 and 2.2).
pub mod shm_words {
    pub const HUB_BELL_WORD: usize = 0x40;
    pub const HUB_BELL_ARMED: usize = 0x44;
    pub const TO_HUB_HEAD: usize = 0x0C0;
    pub const TO_HUB_TAIL: usize = 0x100;
    pub const TO_CLIENT_HEAD: usize = 0x140;
    pub const TO_CLIENT_TAIL: usize = 0x180;
}

/// A shared-memory client made by hand: the session handshake, then its
/// segment and the hub's bell both through the crate's types (to speak the
/// protocol) and as raw mappings (to break it).
pub struct RawShm {
    pub session: std::os::unix::net::UnixStream,
    pub segment: fieldhub_shm::ClientSegment,
    pub bell: fieldhub_shm::BellSegment,
    pub raw_segment: RawMapping,
    pub raw_bell: RawMapping,
    to_hub: fieldhub_shm::Producer,
    from_hub: fieldhub_shm::Consumer,
}

impl RawShm {
    /// Connect to the hub's session socket and complete the handshake.
    pub fn connect(hub: &HubProcess, name: &str) -> Self {
        use fieldhub_proto::wire::{self, Hello, Message};
        use std::io::Write;
        let shm_name = hub.shm_url.as_deref().expect("a hub serving shm").strip_prefix("shm://").unwrap();
        let path = fieldhub_shm::socket::socket_path(shm_name).unwrap();
        let mut session = std::os::unix::net::UnixStream::connect(path).expect("connect to the session socket");
        let mut hello = Vec::new();
        let version = fieldhub_proto::limits::PROTOCOL_VERSION;
        wire::encode(&mut hello, &Message::Hello(Hello { version, name, token: "", options: Default::default() }));
        session.write_all(&hello).unwrap();
        session.set_read_timeout(Some(PATIENCE)).unwrap();
        let (mut welcome, mut fds) = (vec![0u8; 256], Vec::new());
        let n = fieldhub_shm::socket::recv_with_fds(&session, &mut welcome, &mut fds).unwrap();
        assert!(n > 4, "the hub closed the session socket during the handshake");
        match wire::decode(&welcome[4..n]) {
            Ok(Message::Welcome(_)) => {}
            other => panic!("expected WELCOME, got {other:?}"),
        }
        assert_eq!(fds.len(), 2, "WELCOME carries the segment and the bell");
        let bell_fd = fds.pop().unwrap();
        let segment_fd = fds.pop().unwrap();
        let raw_segment = RawMapping::map(&segment_fd);
        let raw_bell = RawMapping::map(&bell_fd);
        Self {
            session,
            segment: fieldhub_shm::ClientSegment::open(segment_fd).unwrap(),
            bell: fieldhub_shm::BellSegment::open(bell_fd).unwrap(),
            raw_segment,
            raw_bell,
            to_hub: fieldhub_shm::Producer::starting_at(0),
            from_hub: fieldhub_shm::Consumer::starting_at(0),
        }
    }

    /// Publish one message in the to-hub ring and ring the hub's bell.
    pub fn send(&mut self, message: &fieldhub_proto::wire::Message<'_>) {
        let mut bytes = Vec::new();
        fieldhub_proto::wire::encode(&mut bytes, message);
        let deadline = Instant::now() + PATIENCE;
        while !self.to_hub.try_push(&self.segment.to_hub(), &bytes).expect("to-hub ring") {
            assert!(Instant::now() < deadline, "the hub never made room in the to-hub ring");
            std::thread::sleep(Duration::from_millis(1));
        }
        self.bell.bell().ring();
    }

    /// The next message from the hub (polling the to-client ring).
    pub fn read_message(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        let deadline = Instant::now() + PATIENCE;
        loop {
            let limit = fieldhub_proto::limits::MAX_MESSAGE_LEN as usize;
            if self.from_hub.pop(&self.segment.to_client(), limit, &mut body).expect("to-client ring") {
                return body;
            }
            assert!(Instant::now() < deadline, "no message from the hub");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// OPEN_PORT through the ring and its PORT_OPENED.
    pub fn open_port(
        &mut self,
        channel: &str,
        options: fieldhub_proto::wire::PortOptions,
    ) -> fieldhub_proto::wire::PortOpened {
        use fieldhub_proto::wire::{self, Message, OpenPort};
        self.send(&Message::OpenPort(OpenPort { request: 1, options, channel, port_name: "" }));
        loop {
            let body = self.read_message();
            match wire::decode(&body) {
                Ok(Message::PortOpened(opened)) => return opened,
                Ok(Message::Frames(_)) => {}
                other => panic!("expected PORT_OPENED, got {other:?}"),
            }
        }
    }
}
