//! Round-trip latency through the hub against a raw TCP ping-pong.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions, Filter, Frame, FrameFlags};
use serde::Serialize;

use crate::stats::{ratios, Distribution};
use crate::BenchError;

const REQUEST_ID: u32 = 0x100;
const ANSWER_ID: u32 = 0x101;
const PATIENCE: Duration = Duration::from_secs(10);

/// What to measure.
#[derive(Clone, Debug)]
pub struct LatencyRun {
    pub url: String,
    pub samples: usize,
    /// 64-byte CAN FD frames instead of 8-byte classic ones.
    pub fd: bool,
}

/// The figures, with the baseline of the same run.
#[derive(Debug, Serialize)]
pub struct LatencyReport {
    pub transport: String,
    pub payload_bytes: usize,
    pub hub: Distribution,
    pub baseline: Distribution,
    pub ratio: serde_json::Value,
}

fn frame(id: u32, fd: bool, counter: u32) -> Frame {
    let mut data = [0u8; 64];
    data[..4].copy_from_slice(&counter.to_le_bytes());
    if fd {
        Frame::can_fd(id, FrameFlags::BRS, &data).expect("valid frame")
    } else {
        Frame::can(id, false, &data[..8]).expect("valid frame")
    }
}

/// Measure, calling `progress(done, total)` now and then.
pub fn run(spec: &LatencyRun, progress: &mut dyn FnMut(usize, usize)) -> Result<LatencyReport, BenchError> {
    let payload = if spec.fd { 64 } else { 8 };
    let hub = measure_hub(spec, progress)?;
    let baseline = measure_tcp_ping_pong(spec.samples, payload + 32)?;
    Ok(LatencyReport {
        transport: spec.url.split("://").next().unwrap_or("tcp").to_owned(),
        payload_bytes: payload,
        ratio: ratios(&hub, &baseline),
        hub,
        baseline,
    })
}

fn measure_hub(spec: &LatencyRun, progress: &mut dyn FnMut(usize, usize)) -> Result<Distribution, BenchError> {
    let options = |name: &str| ClientOptions { name: name.into(), ..Default::default() };
    let echo = Client::connect_with(&spec.url, &options("bench-echo"))?;
    let probe = Client::connect_with(&spec.url, &options("bench-probe"))?;
    let echo_port = echo.open_port("bench")?;
    let probe_port = probe.open_port("bench")?;
    echo.set_filters(&echo_port, Some(&[Filter { can_id: REQUEST_ID, can_mask: 0x7FF }]))?;
    probe.set_filters(&probe_port, Some(&[Filter { can_id: ANSWER_ID, can_mask: 0x7FF }]))?;
    let samples = spec.samples;
    let fd = spec.fd;
    let echo_thread = std::thread::spawn(move || -> Result<(), BenchError> {
        for _ in 0..samples + 100 {
            let Some(request) = echo.recv(Some(PATIENCE))? else {
                return Err(BenchError::Stalled("the echo client heard nothing".into()));
            };
            let counter = u32::from_le_bytes(request.frame.data()[..4].try_into().unwrap_or_default());
            echo.send(&echo_port, &frame(ANSWER_ID, fd, counter))?;
        }
        Ok(())
    });
    let mut times = Vec::with_capacity(samples);
    // The first hundred round trips warm caches and threads up; they do not count.
    for i in 0..samples + 100 {
        let started = Instant::now();
        probe.send(&probe_port, &frame(REQUEST_ID, fd, i as u32))?;
        match probe.recv(Some(PATIENCE))? {
            Some(_) => {}
            None => return Err(BenchError::Stalled(format!("no answer to round trip {i}"))),
        }
        if i >= 100 {
            times.push(started.elapsed().as_nanos() as u64);
            if times.len() % 1000 == 0 {
                progress(times.len(), samples);
            }
        }
    }
    echo_thread.join().map_err(|_| BenchError::Stalled("the echo client panicked".into()))??;
    Ok(Distribution::of(&mut times))
}

/// Two threads bouncing a `record`-byte message over loopback TCP with
/// TCP_NODELAY: the cost of the primitive itself.
fn measure_tcp_ping_pong(samples: usize, record: usize) -> Result<Distribution, BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> std::io::Result<()> {
        let (mut stream, _) = listener.accept()?;
        stream.set_nodelay(true)?;
        let mut buf = vec![0u8; record];
        loop {
            if stream.read_exact(&mut buf).is_err() {
                return Ok(());
            }
            stream.write_all(&buf)?;
        }
    });
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    let mut buf = vec![0u8; record];
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples + 100 {
        let started = Instant::now();
        stream.write_all(&buf)?;
        stream.read_exact(&mut buf)?;
        if i >= 100 {
            times.push(started.elapsed().as_nanos() as u64);
        }
    }
    drop(stream);
    let _ = echo.join();
    Ok(Distribution::of(&mut times))
}
