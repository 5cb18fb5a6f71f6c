//! `fieldhub bench cannelloni`: what a cannelloni peer costs through a hub's
//! `[[cannelloni]]` endpoint (docs/cannelloni.md), next to a native TCP
//! client in the same run on the same hub.
//!
//! Round trip: a probe sends a request, a native echo client on the channel
//! answers, the probe takes the answer — the probe a native TCP client, a
//! cannelloni TCP peer (stream mode) or a cannelloni UDP peer (format 2, one
//! frame a packet). Throughput: one sender as fast as it can to a native
//! receiver — native TCP, cannelloni TCP (64 records a write), cannelloni UDP
//! (packets of 64 frames, paced by nothing: what is lost is reported).
//! Each cannelloni figure is reported with its ratio to the native one.
//!
//! The peers here speak cannelloni from its format documents, as a
//! third-party tool does: this crate never depends on the hub's codec.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::time::{Duration, Instant};

use fieldhub_client::Client;

use crate::gateway::{GatewayReport, GatewayRun, RoundTrip, Throughput};
use crate::hub_process::HubProcess;
use crate::remote::{self, ANSWER_ID, REQUEST_ID};
use crate::stats::Distribution;
use crate::{BenchError, FrameSize, Launcher, Progress, Transport, CHANNEL, PATIENCE, WARM_UP};

/// cannelloni's TCP banner.
const BANNER: &[u8; 12] = b"CANNELLONIv1";
/// Frames a cannelloni UDP sender packs in one packet.
const FRAMES_PER_PACKET: usize = 64;
/// How long a throughput receiver waits for a frame before it counts the
/// rest as lost (UDP) or the run as stalled.
const QUIET: Duration = Duration::from_millis(500);

/// Run every path against one hub process.
pub fn run(launcher: &Launcher, spec: &GatewayRun, progress: Progress<'_>) -> Result<GatewayReport, BenchError> {
    let hub = HubProcess::start_with_cannelloni(launcher)?;
    let url = hub.url(Transport::Tcp, false);
    let missing = |kind| BenchError::Hub(format!("the hub reports no cannelloni {kind} endpoint"));
    let tcp = hub.cannelloni("tcp").ok_or_else(|| missing("tcp"))?;
    let udp = hub.cannelloni("udp").ok_or_else(|| missing("udp"))?;

    let (echo, echo_port) = remote::join(&url, "echo", None, CHANNEL, REQUEST_ID)?;
    let echo = std::sync::Arc::new(echo);
    let answering = {
        let echo = std::sync::Arc::clone(&echo);
        std::thread::spawn(move || remote::answer(&echo, &echo_port, None))
    };
    let mut round_trips = Vec::new();
    progress("round trips: native tcp");
    let (probe, port) = remote::join(&url, "probe", None, CHANNEL, ANSWER_ID)?;
    let native = remote::probe_calls(&probe, &port, FrameSize::Can8, spec.samples, progress)?;
    drop(probe);
    let mut native = remote::CallTime::round_trips(&native);
    let native = Distribution::of(&mut native);
    progress("round trips: cannelloni tcp");
    let mut over_tcp = TcpPeer::connect(tcp)?.round_trips(spec.samples)?;
    progress("round trips: cannelloni udp");
    let mut over_udp = UdpPeer::bind(udp)?.round_trips(spec.samples)?;
    for (path, samples) in [("cannelloni tcp", &mut over_tcp), ("cannelloni udp", &mut over_udp)] {
        let round_trip = Distribution::of(samples);
        let p50_ratio = round_trip.p50_us / native.p50_us;
        round_trips.push(RoundTrip { path, round_trip, p50_ratio });
    }
    round_trips.insert(0, RoundTrip { path: "native tcp", round_trip: native, p50_ratio: 1.0 });
    echo.close();
    let _ = answering.join();

    let mut throughput: Vec<Throughput> = Vec::new();
    for path in ["native tcp", "cannelloni tcp", "cannelloni udp"] {
        progress(&format!("throughput: {path}"));
        let (receiver, _port) = remote::join(&url, "receiver", None, CHANNEL, REQUEST_ID)?;
        let started = Instant::now();
        let sender = match path {
            "native tcp" => {
                let url = url.clone();
                let frames = spec.frames;
                std::thread::spawn(move || -> Result<(), BenchError> {
                    let (client, port) = remote::join(&url, "sender", None, CHANNEL, ANSWER_ID)?;
                    for i in 0..frames {
                        client.send(&port, &FrameSize::Can8.frame(REQUEST_ID, i as u32))?;
                    }
                    client.flush()?;
                    Ok(())
                })
            }
            "cannelloni tcp" => {
                let mut peer = TcpPeer::connect(tcp)?;
                let frames = spec.frames;
                std::thread::spawn(move || peer.stream(frames))
            }
            _ => {
                let peer = UdpPeer::bind(udp)?;
                let frames = spec.frames;
                std::thread::spawn(move || peer.stream(frames))
            }
        };
        let (received, last) = count(&receiver, spec.frames, path != "cannelloni udp")?;
        let elapsed = (last - started).as_secs_f64();
        sender.join().map_err(|_| BenchError::Stalled(format!("the {path} sender panicked")))??;
        let frames_per_s = received as f64 / elapsed;
        let ratio = throughput.first().map_or(1.0, |native| frames_per_s / native.frames_per_s);
        throughput.push(Throughput { path, sent: spec.frames, received, frames_per_s, ratio });
    }
    Ok(GatewayReport { round_trips, throughput })
}

/// Frames `receiver` takes until `expected` came or it hears nothing for
/// [`QUIET`] (an error when the path is lossless), and when the last came.
fn count(receiver: &Client, expected: usize, lossless: bool) -> Result<(usize, Instant), BenchError> {
    let (mut received, mut last) = (0, Instant::now());
    while received < expected {
        match receiver.recv(Some(if lossless { PATIENCE } else { QUIET }))? {
            Some(_) => {
                received += 1;
                last = Instant::now();
            }
            None if lossless => {
                return Err(BenchError::Stalled(format!("the receiver got {received} of {expected} frames")))
            }
            None => break,
        }
    }
    Ok((received, last))
}

/// A classic 8-byte frame as a cannelloni record.
fn record(id: u32, counter: u32, out: &mut Vec<u8>) {
    out.extend_from_slice(&id.to_be_bytes());
    out.push(8);
    out.extend_from_slice(&counter.to_le_bytes());
    out.extend_from_slice(&[0x55; 4]);
}

/// The first record in `buf`: its id, its counter and its length; `None`
/// while it is incomplete.
fn parse(buf: &[u8]) -> Option<(u32, u32, usize)> {
    let head = buf.get(..5)?;
    let id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    let fd = head[4] & 0x80 != 0;
    let len = usize::from(head[4] & 0x7F);
    let data_at = 5 + usize::from(fd);
    let data_len = if id & 0x4000_0000 != 0 { 0 } else { len };
    let data = buf.get(data_at..data_at + data_len)?;
    let counter = data.get(..4).map_or(0, |c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    Some((id & 0x1FFF_FFFF, counter, data_at + data_len))
}

struct TcpPeer {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl TcpPeer {
    fn connect(addr: SocketAddr) -> Result<Self, BenchError> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(PATIENCE))?;
        stream.write_all(BANNER)?;
        let mut banner = [0u8; 12];
        stream.read_exact(&mut banner)?;
        if &banner != BANNER {
            return Err(BenchError::Stalled(format!("the endpoint's banner is {banner:?}")));
        }
        Ok(Self { stream, pending: Vec::new() })
    }

    /// The next frame's id and counter.
    fn next(&mut self) -> Result<(u32, u32), BenchError> {
        loop {
            if let Some((id, counter, used)) = parse(&self.pending) {
                self.pending.drain(..used);
                return Ok((id, counter));
            }
            let mut buf = [0u8; 4096];
            let n = self.stream.read(&mut buf)?;
            if n == 0 {
                return Err(BenchError::Stalled("the endpoint closed the connection".into()));
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    fn round_trips(&mut self, samples: usize) -> Result<Vec<u64>, BenchError> {
        let mut times = Vec::with_capacity(samples);
        let mut bytes = Vec::new();
        for i in 0..(WARM_UP + samples) as u32 {
            bytes.clear();
            record(REQUEST_ID, i, &mut bytes);
            let started = Instant::now();
            self.stream.write_all(&bytes)?;
            while self.next()? != (ANSWER_ID, i) {}
            if i as usize >= WARM_UP {
                times.push(started.elapsed().as_nanos() as u64);
            }
        }
        Ok(times)
    }

    fn stream(&mut self, frames: usize) -> Result<(), BenchError> {
        let mut bytes = Vec::new();
        for chunk in (0..frames as u32).collect::<Vec<_>>().chunks(64) {
            bytes.clear();
            chunk.iter().for_each(|&i| record(REQUEST_ID, i, &mut bytes));
            self.stream.write_all(&bytes)?;
        }
        Ok(())
    }
}

struct UdpPeer {
    socket: UdpSocket,
    to: SocketAddr,
    seq: u8,
}

impl UdpPeer {
    fn bind(to: SocketAddr) -> Result<Self, BenchError> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.set_read_timeout(Some(PATIENCE))?;
        Ok(Self { socket, to, seq: 0 })
    }

    fn send(&mut self, counters: impl ExactSizeIterator<Item = u32>, bytes: &mut Vec<u8>) -> Result<(), BenchError> {
        bytes.clear();
        bytes.extend_from_slice(&[2, 0, self.seq]);
        bytes.extend_from_slice(&(counters.len() as u16).to_be_bytes());
        counters.for_each(|i| record(REQUEST_ID, i, bytes));
        self.socket.send_to(bytes, self.to)?;
        self.seq = self.seq.wrapping_add(1);
        Ok(())
    }

    fn round_trips(&mut self, samples: usize) -> Result<Vec<u64>, BenchError> {
        let mut times = Vec::with_capacity(samples);
        let (mut bytes, mut packet) = (Vec::new(), vec![0u8; 65_536]);
        for i in 0..(WARM_UP + samples) as u32 {
            let started = Instant::now();
            self.send(std::iter::once(i), &mut bytes)?;
            'answer: loop {
                let n = self.socket.recv(&mut packet)?;
                let mut at = 5;
                while let Some((id, counter, used)) = packet.get(at..n).and_then(parse) {
                    at += used;
                    if (id, counter) == (ANSWER_ID, i) {
                        break 'answer;
                    }
                }
            }
            if i as usize >= WARM_UP {
                times.push(started.elapsed().as_nanos() as u64);
            }
        }
        Ok(times)
    }

    fn stream(mut self, frames: usize) -> Result<(), BenchError> {
        let mut bytes = Vec::new();
        let counters: Vec<u32> = (0..frames as u32).collect();
        for chunk in counters.chunks(FRAMES_PER_PACKET) {
            self.send(chunk.iter().copied(), &mut bytes)?;
        }
        Ok(())
    }
}
