//! Raw baselines: two processes and the bare primitive, no hub.
//!
//! The measuring side runs in the benchmark process; the peer is a second
//! process (`fieldhub bench raw-peer`, [`run_peer`]), so a baseline pays for
//! the same cross-process wake-ups and cache traffic as the hub does.
//!
//! - Ping-pong ([`ping_pong`]): one message out, the same message back. Over
//!   shared memory the message travels a `fieldhub-shm` ring and the other
//!   side waits on a `fieldhub-shm` [`Bell`](fieldhub_shm::Bell) — sleeping at once (`futex`) or
//!   never sleeping (`spin`); over TCP both sides use TCP_NODELAY; over a
//!   unix stream socket both sides block in read.
//! - Stream ([`stream`]): one side sends as fast as it can, the other counts.
//!   Over shared memory an SPSC ring with the hub's notification suppression
//!   and adaptive waits, ringing once per 64 messages; over TCP or a unix
//!   socket 64 records a write.
//!
//! Every message is the `FRAMES` wire message of one frame of the measured
//! size ([`FrameSize::wire_message`]): the bytes the hub's transports move.
//!
//! Shared memory: the measuring side creates a client segment and a bell
//! segment exactly as a hub does and passes them to the peer over a unix
//! socket (`SCM_RIGHTS`). Roles: measuring side → peer on the to-hub ring,
//! the peer waits on the client bell; peer → measuring side on the
//! to-client ring, the measuring side waits on the bell segment's bell; a
//! stream sender waits for room on the space bell.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fieldhub_proto::limits::MAX_MESSAGE_LEN;
use fieldhub_shm::ring::slots_for;
use fieldhub_shm::{socket, BellSegment, ClientSegment, Consumer, Producer, RingRef, SegmentHeader, WaitPolicy};

use crate::stream_socket::StreamSocket;
use crate::{BenchError, FrameSize, Launcher, Progress, PATIENCE, WARM_UP};

/// How long a peer waits for the measuring side before it gives up (the
/// measuring side may pause between phases, never this long).
const PEER_PATIENCE: Duration = Duration::from_secs(60);
/// Where the TCP baselines listen, unless told otherwise.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Records a TCP stream write carries.
const RECORDS_PER_WRITE: usize = 64;
/// A stream rings the other side's bell once per this many messages, not
/// per message: the ring at its best. It can never fill between two rings
/// (64 ≪ 4096 slots), so a sleeping consumer is always woken in time.
const BELL_BATCH: usize = 64;
/// Body of the message that ends a shared-memory exchange; no frame message
/// is one byte long.
pub(crate) const STOP: [u8; 5] = [1, 0, 0, 0, 0xFF];

/// What a raw peer process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerMode {
    /// Ping-pong over a ring, sleeping on the bell at once.
    Futex,
    /// Ping-pong over a ring, spinning without ever sleeping.
    Spin,
    /// Consume an SPSC ring stream.
    RingStream,
    /// Ping-pong over TCP_NODELAY.
    Tcp,
    /// Consume a TCP stream.
    TcpStream,
    /// Ping-pong over a unix stream socket.
    Unix,
    /// Consume a unix-socket stream.
    UnixStream,
}

impl PeerMode {
    pub fn name(self) -> &'static str {
        match self {
            PeerMode::Futex => "futex",
            PeerMode::Spin => "spin",
            PeerMode::RingStream => "ring-stream",
            PeerMode::Tcp => "tcp",
            PeerMode::TcpStream => "tcp-stream",
            PeerMode::Unix => "unix",
            PeerMode::UnixStream => "unix-stream",
        }
    }

    /// What the baseline is called in reports.
    pub fn baseline(self) -> &'static str {
        match self {
            PeerMode::Futex => "futex ping-pong (two processes)",
            PeerMode::Spin => "spin ping-pong (two processes)",
            PeerMode::RingStream => "SPSC ring stream (two processes)",
            PeerMode::Tcp => "TCP_NODELAY ping-pong (two processes)",
            PeerMode::TcpStream => "TCP stream, 64 frames a write (two processes)",
            PeerMode::Unix => "unix socket ping-pong (two processes)",
            PeerMode::UnixStream => "unix socket stream, 64 frames a write (two processes)",
        }
    }

    fn wait_policy(self) -> WaitPolicy {
        match self {
            PeerMode::Futex => WaitPolicy { spin: Duration::ZERO, busy_poll: false },
            PeerMode::Spin => WaitPolicy::BUSY_POLL,
            _ => WaitPolicy::ADAPTIVE,
        }
    }
}

impl std::str::FromStr for PeerMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [
            PeerMode::Futex,
            PeerMode::Spin,
            PeerMode::RingStream,
            PeerMode::Tcp,
            PeerMode::TcpStream,
            PeerMode::Unix,
            PeerMode::UnixStream,
        ]
        .into_iter()
        .find(|m| m.name() == s)
        .ok_or_else(|| format!("unknown raw peer mode '{s}'"))
    }
}

/// A peer process; killed on drop if it has not ended by then.
pub(crate) struct Peer {
    child: Child,
}

impl Peer {
    fn spawn(launcher: &Launcher, mode: PeerMode, connect: &str, bytes: usize) -> Result<Self, BenchError> {
        let child = launcher
            .command()
            .args(["bench", "raw-peer", "--mode", mode.name(), "--connect", connect, "--bytes"])
            .arg(bytes.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| BenchError::Peer(format!("cannot run {}: {e}", launcher.exe.display())))?;
        Ok(Self { child })
    }

    /// Wait for a connection from the peer, or its early end.
    fn accept<S>(&mut self, mut accept: impl FnMut() -> std::io::Result<S>) -> Result<S, BenchError> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            match accept() {
                Ok(stream) => return Ok(stream),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e.into()),
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(BenchError::Peer(format!("the peer ended before connecting ({status})")));
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Peer("the peer did not connect".into()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for the peer to end, successfully.
    pub(crate) fn finish(mut self) -> Result<(), BenchError> {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait()? {
                return if status.success() {
                    Ok(())
                } else {
                    Err(BenchError::Peer(format!("the peer failed ({status})")))
                };
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Peer("the peer did not end".into()));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Shared memory set up with a peer: the segment and the bell of a hub.
pub(crate) struct ShmPeer {
    pub(crate) peer: Peer,
    pub(crate) segment: ClientSegment,
    pub(crate) bell: BellSegment,
}

/// The peer's end of a stream baseline: connect to `connect` (HOST:PORT,
/// or a socket path) over loopback TCP (Nagle off) or a unix socket.
fn connect_stream(mode: PeerMode, connect: &str) -> std::io::Result<StreamSocket> {
    if matches!(mode, PeerMode::Unix | PeerMode::UnixStream) {
        return Ok(StreamSocket::Unix(UnixStream::connect(connect)?));
    }
    let stream = TcpStream::connect(connect)?;
    stream.set_nodelay(true)?;
    Ok(StreamSocket::Tcp(stream))
}

/// A peer connected over TCP (Nagle off; listening on `tcp_at`) or a unix socket, reads
/// and writes bounded by [`PATIENCE`] so a dead peer fails the run instead
/// of hanging it.
fn spawn_stream_peer(
    launcher: &Launcher,
    mode: PeerMode,
    message_len: usize,
    tcp_at: IpAddr,
) -> Result<(Peer, StreamSocket), BenchError> {
    let (peer, socket) = if matches!(mode, PeerMode::Unix | PeerMode::UnixStream) {
        let path = socket_path("stream")?;
        let listener = UnixListener::bind(&path)?;
        listener.set_nonblocking(true)?;
        let spawned = Peer::spawn(launcher, mode, &path.to_string_lossy(), message_len);
        let accepted = spawned.and_then(|mut peer| Ok((peer.accept(|| listener.accept().map(|(s, _)| s))?, peer)));
        let _ = std::fs::remove_file(&path);
        let (stream, peer) = accepted?;
        (peer, StreamSocket::Unix(stream))
    } else {
        let listener = TcpListener::bind((tcp_at, 0))?;
        listener.set_nonblocking(true)?;
        let mut peer = Peer::spawn(launcher, mode, &listener.local_addr()?.to_string(), message_len)?;
        let stream = peer.accept(|| listener.accept().map(|(s, _)| s))?;
        stream.set_nodelay(true)?;
        (peer, StreamSocket::Tcp(stream))
    };
    socket.bound(PATIENCE)?;
    Ok((peer, socket))
}

/// Unix sockets made by this process so far, to keep their paths apart.
static SOCKETS: AtomicU32 = AtomicU32::new(0);

/// A fresh socket path in the private session directory, nothing there yet.
fn socket_path(kind: &str) -> Result<PathBuf, BenchError> {
    let dir = socket::socket_dir();
    socket::ensure_private_dir(&dir)?;
    let path = dir.join(format!("raw-{kind}-{}-{}.sock", std::process::id(), SOCKETS.fetch_add(1, Ordering::Relaxed)));
    let _ = std::fs::remove_file(&path);
    Ok(path)
}

pub(crate) fn spawn_shm_peer(launcher: &Launcher, mode: PeerMode) -> Result<ShmPeer, BenchError> {
    let (segment, segment_fd) = ClientSegment::create(SegmentHeader::standard(0))?;
    let (bell, bell_fd) = BellSegment::create()?;
    let path = socket_path("shm")?;
    let listener = UnixListener::bind(&path)?;
    listener.set_nonblocking(true)?;
    let spawned = Peer::spawn(launcher, mode, &path.to_string_lossy(), 0);
    let accepted = spawned.and_then(|mut peer| {
        let stream = peer.accept(|| listener.accept().map(|(s, _)| s))?;
        Ok((peer, stream))
    });
    let _ = std::fs::remove_file(&path);
    let (peer, stream) = accepted?;
    stream.set_nonblocking(false)?;
    socket::send_with_fds(&stream, b"raw", &[segment_fd.as_fd(), bell_fd.as_fd()])?;
    Ok(ShmPeer { peer, segment, bell })
}

/// Push `message`, waiting for room on `space` as long as it takes.
pub(crate) fn push(
    producer: &mut Producer,
    ring: &RingRef<'_>,
    space: fieldhub_shm::Bell<'_>,
    message: &[u8],
    policy: WaitPolicy,
    patience: Duration,
) -> Result<(), BenchError> {
    let needed = slots_for(message.len());
    let deadline = Some(Instant::now() + patience);
    while !producer.try_push(ring, message)? {
        let room = || producer.free_slots(ring).map_or(true, |free| free >= needed);
        if !space.wait(policy, deadline, room) {
            return Err(BenchError::Stalled("the ring stayed full".into()));
        }
    }
    Ok(())
}

/// Wait for the next message on `ring` and copy its body into `body`.
pub(crate) fn pop(
    consumer: &mut Consumer,
    ring: &RingRef<'_>,
    bell: fieldhub_shm::Bell<'_>,
    body: &mut Vec<u8>,
    policy: WaitPolicy,
    patience: Duration,
) -> Result<(), BenchError> {
    let deadline = Some(Instant::now() + patience);
    loop {
        if consumer.pop(ring, MAX_MESSAGE_LEN as usize, body)? {
            return Ok(());
        }
        if !bell.wait(policy, deadline, || consumer.has_message(ring)) {
            return Err(BenchError::Stalled("no message came".into()));
        }
    }
}

/// Round trips of one frame message between two processes, in ns.
pub fn ping_pong(
    launcher: &Launcher,
    mode: PeerMode,
    size: FrameSize,
    samples: usize,
    progress: Progress<'_>,
) -> Result<Vec<u64>, BenchError> {
    let message = size.wire_message();
    let mut times = Vec::with_capacity(samples);
    let mut report = |done: usize| {
        if done % 1000 == 0 {
            progress(&format!("{}, {}: {done}/{samples}", mode.baseline(), size.label()));
        }
    };
    match mode {
        PeerMode::Futex | PeerMode::Spin => {
            let ShmPeer { peer, segment, bell } = spawn_shm_peer(launcher, mode)?;
            let (to_peer, from_peer) = (segment.to_hub(), segment.to_client());
            let (mut producer, mut consumer) = (Producer::starting_at(0), Consumer::starting_at(0));
            let policy = mode.wait_policy();
            let mut body = Vec::new();
            for i in 0..WARM_UP + samples {
                let started = Instant::now();
                push(&mut producer, &to_peer, segment.space_bell(), &message, policy, PATIENCE)?;
                segment.client_bell().ring();
                pop(&mut consumer, &from_peer, bell.bell(), &mut body, policy, PATIENCE)?;
                if i >= WARM_UP {
                    times.push(started.elapsed().as_nanos() as u64);
                    report(times.len());
                }
            }
            push(&mut producer, &to_peer, segment.space_bell(), &STOP, policy, PATIENCE)?;
            segment.client_bell().ring();
            peer.finish()?;
        }
        PeerMode::Tcp | PeerMode::Unix => {
            let (peer, stream) = spawn_stream_peer(launcher, mode, message.len(), LOOPBACK)?;
            stream_ping_pong(peer, stream, &message, samples, &mut times, &mut report)?;
        }
        PeerMode::RingStream | PeerMode::TcpStream | PeerMode::UnixStream => {
            return Err(BenchError::Invalid(format!("{} is a stream, not a ping-pong", mode.name())))
        }
    }
    Ok(times)
}

/// Round trips of one frame message over TCP_NODELAY between this process,
/// listening on `ip`, and a peer that `launcher` starts (in another network
/// namespace, say), in ns.
pub fn tcp_ping_pong_at(
    launcher: &Launcher,
    ip: IpAddr,
    size: FrameSize,
    samples: usize,
) -> Result<Vec<u64>, BenchError> {
    let message = size.wire_message();
    let (peer, stream) = spawn_stream_peer(launcher, PeerMode::Tcp, message.len(), ip)?;
    let mut times = Vec::with_capacity(samples);
    stream_ping_pong(peer, stream, &message, samples, &mut times, &mut |_| {})?;
    Ok(times)
}

/// Ping-pong `message` over `stream` `samples` times into `times` (after
/// the warm-up), then close it and wait for the peer to end.
fn stream_ping_pong(
    peer: Peer,
    mut stream: StreamSocket,
    message: &[u8],
    samples: usize,
    times: &mut Vec<u64>,
    report: &mut dyn FnMut(usize),
) -> Result<(), BenchError> {
    let mut buf = message.to_vec();
    for i in 0..WARM_UP + samples {
        let started = Instant::now();
        stream.write_all(message)?;
        stream.read_exact(&mut buf)?;
        if i >= WARM_UP {
            times.push(started.elapsed().as_nanos() as u64);
            report(times.len());
        }
    }
    drop(stream);
    peer.finish()
}

/// Frames one process streams to another in about `seconds`: the count the
/// receiver confirmed and the time until its confirmation.
pub fn stream(
    launcher: &Launcher,
    mode: PeerMode,
    size: FrameSize,
    seconds: f64,
) -> Result<(u64, Duration), BenchError> {
    let message = size.wire_message();
    let run_for = Duration::from_secs_f64(seconds);
    match mode {
        PeerMode::RingStream => {
            let ShmPeer { peer, segment, bell } = spawn_shm_peer(launcher, mode)?;
            let (to_peer, from_peer) = (segment.to_hub(), segment.to_client());
            let (mut producer, mut consumer) = (Producer::starting_at(0), Consumer::starting_at(0));
            let policy = mode.wait_policy();
            let started = Instant::now();
            while started.elapsed() < run_for {
                for _ in 0..1024 / BELL_BATCH {
                    for _ in 0..BELL_BATCH {
                        push(&mut producer, &to_peer, segment.space_bell(), &message, policy, PATIENCE)?;
                    }
                    segment.client_bell().ring();
                }
            }
            push(&mut producer, &to_peer, segment.space_bell(), &STOP, policy, PATIENCE)?;
            segment.client_bell().ring();
            let mut body = Vec::new();
            pop(&mut consumer, &from_peer, bell.bell(), &mut body, policy, PATIENCE)?;
            let elapsed = started.elapsed();
            peer.finish()?;
            let count = body.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
            Ok((count.ok_or_else(|| BenchError::Peer("the peer's count is malformed".into()))?, elapsed))
        }
        PeerMode::TcpStream | PeerMode::UnixStream => {
            let (peer, mut stream) = spawn_stream_peer(launcher, mode, message.len(), LOOPBACK)?;
            let chunk = message.repeat(RECORDS_PER_WRITE);
            let started = Instant::now();
            while started.elapsed() < run_for {
                stream.write_all(&chunk)?;
            }
            stream.shutdown_write()?;
            let mut count = [0u8; 8];
            stream.read_exact(&mut count)?;
            let elapsed = started.elapsed();
            peer.finish()?;
            Ok((u64::from_le_bytes(count), elapsed))
        }
        _ => Err(BenchError::Invalid(format!("{} is a ping-pong, not a stream", mode.name()))),
    }
}

/// The peer process: connect to `connect` (a unix socket path for shared
/// memory and unix-socket baselines, HOST:PORT for TCP) and serve `mode` until the measuring side
/// ends the exchange. `bytes` is the TCP record length.
pub fn run_peer(mode: PeerMode, connect: &str, bytes: usize) -> Result<(), BenchError> {
    match mode {
        PeerMode::Futex | PeerMode::Spin | PeerMode::RingStream => {
            let socket = UnixStream::connect(connect)?;
            socket.set_read_timeout(Some(PATIENCE))?;
            let mut fds = Vec::new();
            let mut buf = [0u8; 16];
            socket::recv_with_fds(&socket, &mut buf, &mut fds)?;
            let (Some(bell_fd), Some(segment_fd)) = (fds.pop(), fds.pop()) else {
                return Err(BenchError::Peer("the segments did not come".into()));
            };
            let segment = ClientSegment::open(segment_fd)?;
            let bell = BellSegment::open(bell_fd)?;
            let (from_parent, to_parent) = (segment.to_hub(), segment.to_client());
            let (mut producer, mut consumer) = (Producer::starting_at(0), Consumer::starting_at(0));
            let policy = mode.wait_policy();
            let mut body = Vec::new();
            let mut message = Vec::new();
            let mut frames = 0u64;
            loop {
                if mode == PeerMode::RingStream && !consumer.has_message(&from_parent) {
                    // About to wait: a sender waiting for room must hear of
                    // the slots taken since the last ring.
                    segment.space_bell().ring();
                }
                pop(&mut consumer, &from_parent, segment.client_bell(), &mut body, policy, PEER_PATIENCE)?;
                if body == STOP[4..] {
                    break;
                }
                if mode == PeerMode::RingStream {
                    frames += 1;
                    if frames % BELL_BATCH as u64 == 0 {
                        segment.space_bell().ring();
                    }
                } else {
                    message.clear();
                    message.extend_from_slice(&(body.len() as u32).to_le_bytes());
                    message.extend_from_slice(&body);
                    push(&mut producer, &to_parent, segment.space_bell(), &message, policy, PEER_PATIENCE)?;
                    bell.bell().ring();
                }
            }
            if mode == PeerMode::RingStream {
                message.clear();
                message.extend_from_slice(&8u32.to_le_bytes());
                message.extend_from_slice(&frames.to_le_bytes());
                push(&mut producer, &to_parent, segment.space_bell(), &message, policy, PEER_PATIENCE)?;
                bell.bell().ring();
            }
            Ok(())
        }
        PeerMode::Tcp | PeerMode::Unix => {
            let mut stream = connect_stream(mode, connect)?;
            stream.bound(PEER_PATIENCE)?;
            let mut buf = vec![0u8; bytes.max(1)];
            // The measuring side closes the connection when it is done.
            while stream.read_exact(&mut buf).is_ok() {
                stream.write_all(&buf)?;
            }
            Ok(())
        }
        PeerMode::TcpStream | PeerMode::UnixStream => {
            let mut stream = connect_stream(mode, connect)?;
            stream.bound(PEER_PATIENCE)?;
            let mut buf = vec![0u8; bytes.max(1) * RECORDS_PER_WRITE];
            let mut received = 0u64;
            loop {
                match stream.read(&mut buf)? {
                    0 => break,
                    n => received += n as u64,
                }
            }
            stream.write_all(&(received / bytes.max(1) as u64).to_le_bytes())?;
            Ok(())
        }
    }
}
