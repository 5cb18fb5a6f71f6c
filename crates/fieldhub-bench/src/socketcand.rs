//! `fieldhub bench socketcand`: what a socketcand client costs through a
//! hub's socketcand server (`docs/socketcand.md`), next to a native TCP
//! client in the same run on the same hub.
//!
//! Round trip: a probe sends a request, a native echo client on the channel
//! answers, the probe takes the answer — the probe a native TCP client or a
//! socketcand client in RAW mode (`< send >` out, `< frame >` back).
//! Throughput: one sender as fast as it can to a native receiver — native
//! TCP, or a socketcand client writing `< send >` commands back to back.
//! Each socketcand figure is reported with its ratio to the native one.
//!
//! The client here speaks socketcand from its protocol document, as a
//! third-party tool does: this crate never depends on the hub's parser.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Instant;

use fieldhub_client::Client;

use crate::gateway::{GatewayReport, GatewayRun, RoundTrip, Throughput};
use crate::hub_process::HubProcess;
use crate::remote::{self, ANSWER_ID, REQUEST_ID};
use crate::stats::Distribution;
use crate::{BenchError, FrameSize, Launcher, Progress, Transport, CHANNEL, PATIENCE, WARM_UP};

/// Run both paths against one hub process.
pub fn run(launcher: &Launcher, spec: &GatewayRun, progress: Progress<'_>) -> Result<GatewayReport, BenchError> {
    let hub = HubProcess::start_with_socketcand(launcher)?;
    let url = hub.url(Transport::Tcp, false);
    let server = hub.socketcand().ok_or_else(|| BenchError::Hub("the hub reports no socketcand server".into()))?;

    let (echo, echo_port) = remote::join(&url, "echo", None, CHANNEL, REQUEST_ID)?;
    let echo = std::sync::Arc::new(echo);
    let answering = {
        let echo = std::sync::Arc::clone(&echo);
        std::thread::spawn(move || remote::answer(&echo, &echo_port, None))
    };
    progress("round trips: native tcp");
    let (probe, port) = remote::join(&url, "probe", None, CHANNEL, ANSWER_ID)?;
    let native = remote::probe_calls(&probe, &port, FrameSize::Can8, spec.samples, progress)?;
    drop(probe);
    let mut native = remote::CallTime::round_trips(&native);
    let native = Distribution::of(&mut native);
    progress("round trips: socketcand");
    let mut over_scd = ScdClient::open(server)?.round_trips(spec.samples)?;
    let round_trip = Distribution::of(&mut over_scd);
    let p50_ratio = round_trip.p50_us / native.p50_us;
    let round_trips = vec![
        RoundTrip { path: "native tcp", round_trip: native, p50_ratio: 1.0 },
        RoundTrip { path: "socketcand", round_trip, p50_ratio },
    ];
    echo.close();
    let _ = answering.join();

    let mut throughput: Vec<Throughput> = Vec::new();
    for path in ["native tcp", "socketcand"] {
        progress(&format!("throughput: {path}"));
        let (receiver, _port) = remote::join(&url, "receiver", None, CHANNEL, REQUEST_ID)?;
        let frames = spec.frames;
        let started = Instant::now();
        let sender = if path == "native tcp" {
            let url = url.clone();
            std::thread::spawn(move || -> Result<(), BenchError> {
                let (client, port) = remote::join(&url, "sender", None, CHANNEL, ANSWER_ID)?;
                for i in 0..frames {
                    client.send(&port, &FrameSize::Can8.frame(REQUEST_ID, i as u32))?;
                }
                client.flush()?;
                Ok(())
            })
        } else {
            let mut client = ScdClient::open(server)?;
            std::thread::spawn(move || client.stream(frames))
        };
        let last = count(&receiver, frames)?;
        sender.join().map_err(|_| BenchError::Stalled(format!("the {path} sender panicked")))??;
        let frames_per_s = frames as f64 / (last - started).as_secs_f64();
        let ratio = throughput.first().map_or(1.0, |native| frames_per_s / native.frames_per_s);
        throughput.push(Throughput { path, sent: frames, received: frames, frames_per_s, ratio });
    }
    Ok(GatewayReport { round_trips, throughput })
}

/// When `receiver` took the last of `expected` frames.
fn count(receiver: &Client, expected: usize) -> Result<Instant, BenchError> {
    let mut last = Instant::now();
    for received in 0..expected {
        if receiver.recv(Some(PATIENCE))?.is_none() {
            return Err(BenchError::Stalled(format!("the receiver got {received} of {expected} frames")));
        }
        last = Instant::now();
    }
    Ok(last)
}

/// `< send ID 8 DATA… >` for a numbered 8-byte frame, as python-can writes it.
fn send_line(id: u32, counter: u32, out: &mut String) {
    use std::fmt::Write as _;
    let _ = write!(out, "< send {id:03X} 8");
    for byte in counter.to_le_bytes().iter().chain(&[0x55; 4]) {
        let _ = write!(out, " {byte:x}");
    }
    out.push_str(" >");
}

/// A socketcand client in RAW mode.
struct ScdClient {
    stream: TcpStream,
    pending: Vec<u8>,
}

impl ScdClient {
    fn open(addr: SocketAddr) -> Result<Self, BenchError> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(PATIENCE))?;
        let mut client = Self { stream, pending: Vec::new() };
        client.expect("< hi >")?;
        client.stream.write_all(format!("< open {CHANNEL} >").as_bytes())?;
        client.expect("< ok >")?;
        client.stream.write_all(b"< rawmode >")?;
        client.expect("< ok >")?;
        Ok(client)
    }

    fn expect(&mut self, what: &str) -> Result<(), BenchError> {
        let got = self.element()?;
        if got != what {
            return Err(BenchError::Hub(format!("the socketcand server said {got} instead of {what}")));
        }
        Ok(())
    }

    /// The next element, `<` to `>`.
    fn element(&mut self) -> Result<String, BenchError> {
        loop {
            if let Some(end) = self.pending.iter().position(|&b| b == b'>') {
                let element: Vec<u8> = self.pending.drain(..=end).collect();
                return Ok(String::from_utf8_lossy(&element).trim_start().to_owned());
            }
            let mut buf = [0u8; 4096];
            let n = self.stream.read(&mut buf)?;
            if n == 0 {
                return Err(BenchError::Stalled("the socketcand server closed the connection".into()));
            }
            self.pending.extend_from_slice(&buf[..n]);
        }
    }

    /// `< frame ID SEC.USEC DATA >`: its id and the counter in its first
    /// four bytes; `None` for any other element.
    fn next_frame(&mut self) -> Result<Option<(u32, u32)>, BenchError> {
        let element = self.element()?;
        let words: Vec<&str> = element.split(' ').collect();
        if words.get(1) != Some(&"frame") || words.len() < 6 {
            return Ok(None);
        }
        let id = u32::from_str_radix(words[2], 16).unwrap_or(u32::MAX);
        let counter =
            words[4].get(..8).and_then(|hex| u32::from_str_radix(hex, 16).ok()).map_or(u32::MAX, |be| be.swap_bytes());
        Ok(Some((id, counter)))
    }

    fn round_trips(&mut self, samples: usize) -> Result<Vec<u64>, BenchError> {
        let mut times = Vec::with_capacity(samples);
        let mut line = String::new();
        for i in 0..(WARM_UP + samples) as u32 {
            line.clear();
            send_line(REQUEST_ID, i, &mut line);
            let started = Instant::now();
            self.stream.write_all(line.as_bytes())?;
            while self.next_frame()? != Some((ANSWER_ID, i)) {}
            if i as usize >= WARM_UP {
                times.push(started.elapsed().as_nanos() as u64);
            }
        }
        Ok(times)
    }

    fn stream(&mut self, frames: usize) -> Result<(), BenchError> {
        let mut lines = String::new();
        for chunk in (0..frames as u32).collect::<Vec<_>>().chunks(64) {
            lines.clear();
            chunk.iter().for_each(|&i| send_line(REQUEST_ID, i, &mut lines));
            self.stream.write_all(lines.as_bytes())?;
        }
        Ok(())
    }
}
