//! One-way throughput through the hub against a raw TCP stream.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use fieldhub_client::{Client, ClientOptions, Frame, FrameFlags, PortConfig};
use serde::Serialize;

use crate::BenchError;

const PATIENCE: Duration = Duration::from_secs(10);

/// What to measure.
#[derive(Clone, Debug)]
pub struct ThroughputRun {
    pub url: String,
    pub seconds: f64,
    pub fd: bool,
    pub receivers: usize,
}

#[derive(Debug, Serialize)]
pub struct Rate {
    pub frames_per_s: f64,
    pub payload_mbit_per_s: f64,
}

#[derive(Debug, Serialize)]
pub struct ThroughputReport {
    pub transport: String,
    pub payload_bytes: usize,
    pub receivers: usize,
    /// Frames per second in each second of the hub run.
    pub per_second: Vec<f64>,
    pub hub: Rate,
    pub baseline: Rate,
    pub ratio: f64,
}

fn rate(frames: u64, elapsed: Duration, payload: usize) -> Rate {
    let secs = elapsed.as_secs_f64().max(1e-9);
    Rate { frames_per_s: frames as f64 / secs, payload_mbit_per_s: frames as f64 * payload as f64 * 8.0 / secs / 1e6 }
}

pub fn run(spec: &ThroughputRun, progress: &mut dyn FnMut(usize, usize)) -> Result<ThroughputReport, BenchError> {
    let payload = if spec.fd { 64 } else { 8 };
    let (frames, elapsed, per_second) = measure_hub(spec, payload, progress)?;
    let hub = rate(frames, elapsed, payload);
    let baseline = measure_tcp_stream(spec.seconds.min(2.0), 32 + payload)?;
    let baseline = rate(baseline.0, baseline.1, payload);
    Ok(ThroughputReport {
        transport: spec.url.split("://").next().unwrap_or("tcp").to_owned(),
        payload_bytes: payload,
        receivers: spec.receivers,
        per_second,
        ratio: hub.frames_per_s / baseline.frames_per_s,
        hub,
        baseline,
    })
}

fn measure_hub(
    spec: &ThroughputRun,
    payload: usize,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<(u64, Duration, Vec<f64>), BenchError> {
    let options = |name: &str| ClientOptions { name: name.into(), ..Default::default() };
    let sender = Client::connect_with(&spec.url, &options("bench-sender"))?;
    let port = sender.open_port("bench")?;
    let lossless = PortConfig { block_on_overflow: true, ..Default::default() };
    let receivers: Vec<Client> = (0..spec.receivers.max(1))
        .map(|i| {
            let c = Client::connect_with(&spec.url, &options(&format!("bench-rx{i}")))?;
            c.open_port_with("bench", &lossless)?;
            Ok(c)
        })
        .collect::<Result<_, BenchError>>()?;
    let data = [0x55u8; 64];
    let frame = if payload == 64 {
        Frame::can_fd(0x123, FrameFlags::BRS, &data).expect("valid frame")
    } else {
        Frame::can(0x123, false, &data[..8]).expect("valid frame")
    };
    let deadline = Duration::from_secs_f64(spec.seconds);
    let started = Instant::now();
    let counts = std::thread::scope(|s| {
        let readers: Vec<_> = receivers
            .iter()
            .map(|r| {
                s.spawn(move || {
                    let mut seconds = vec![0u64; spec.seconds.ceil() as usize + 2];
                    let mut total = 0u64;
                    while let Ok(Some(_)) = r.recv(Some(Duration::from_millis(500))) {
                        total += 1;
                        let second = started.elapsed().as_secs() as usize;
                        if let Some(slot) = seconds.get_mut(second) {
                            *slot += 1;
                        }
                    }
                    (total, seconds)
                })
            })
            .collect();
        let mut sent = 0u64;
        let mut last_report = 0;
        while started.elapsed() < deadline {
            for _ in 0..256 {
                if sender.send(&port, &frame).is_err() {
                    break;
                }
                sent += 1;
            }
            let second = started.elapsed().as_secs() as usize;
            if second != last_report {
                last_report = second;
                progress(second, spec.seconds as usize);
            }
        }
        let _ = sender.flush();
        let elapsed = started.elapsed();
        let results: Vec<(u64, Vec<u64>)> = readers.into_iter().map(|h| h.join().unwrap_or_default()).collect();
        (sent, elapsed, results)
    });
    let (sent, elapsed, results) = counts;
    let received = results.iter().map(|(t, _)| *t).min().unwrap_or(0);
    if received < sent {
        return Err(BenchError::Stalled(format!("{sent} frames sent but a receiver got only {received}")));
    }
    let per_second = results[0].1.iter().take(spec.seconds.ceil() as usize).map(|&n| n as f64).collect();
    Ok((sent, elapsed, per_second))
}

/// A raw loopback TCP stream of `record`-byte records, 64 per write: the
/// primitive without the hub.
fn measure_tcp_stream(seconds: f64, record: usize) -> Result<(u64, Duration), BenchError> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut stream, _) = listener.accept()?;
        let mut buf = vec![0u8; record * 64];
        let mut bytes = 0u64;
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return Ok(bytes / record as u64),
                Ok(n) => bytes += n as u64,
            }
        }
    });
    let mut stream = TcpStream::connect(addr)?;
    stream.set_nodelay(true)?;
    stream.set_write_timeout(Some(PATIENCE))?;
    let chunk = vec![0x55u8; record * 64];
    let started = Instant::now();
    while started.elapsed().as_secs_f64() < seconds {
        stream.write_all(&chunk)?;
    }
    drop(stream);
    let frames = reader.join().map_err(|_| BenchError::Stalled("baseline reader panicked".into()))??;
    Ok((frames, started.elapsed()))
}
