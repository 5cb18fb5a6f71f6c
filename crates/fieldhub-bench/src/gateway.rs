//! What the gateway benchmarks share (`fieldhub bench socketcand`, `bench
//! cannelloni`): a third-party protocol's paths into a hub measured next to
//! a native TCP client in the same run on the same hub, each figure with its
//! ratio to the native one.

use serde::Serialize;

use crate::stats::Distribution;

/// What to measure.
#[derive(Clone, Debug)]
pub struct GatewayRun {
    /// Round trips per path.
    pub samples: usize,
    /// Frames per throughput run.
    pub frames: usize,
}

/// One path's round trips, with the ratio to the native client's.
#[derive(Debug, Serialize)]
pub struct RoundTrip {
    pub path: &'static str,
    pub round_trip: Distribution,
    /// p50 over the native TCP client's p50.
    pub p50_ratio: f64,
}

/// One path's throughput, with the ratio to the native client's.
#[derive(Debug, Serialize)]
pub struct Throughput {
    pub path: &'static str,
    pub sent: usize,
    /// Fewer than `sent` only on a path that may lose frames (UDP).
    pub received: usize,
    pub frames_per_s: f64,
    /// Frames per second over the native TCP client's.
    pub ratio: f64,
}

/// Every path's figures, the native client's first.
#[derive(Debug, Serialize)]
pub struct GatewayReport {
    pub round_trips: Vec<RoundTrip>,
    pub throughput: Vec<Throughput>,
}

impl std::fmt::Display for GatewayReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "round trip (8-byte frames, to a native echo on the same channel)")?;
        for t in &self.round_trips {
            let d = &t.round_trip;
            writeln!(
                f,
                "  {:<15} p50 {:>8.1} µs  p99 {:>8.1} µs  ({} samples)  p50 / native tcp {:.2}",
                t.path, d.p50_us, d.p99_us, d.samples, t.p50_ratio
            )?;
        }
        writeln!(f, "one-way to a native receiver")?;
        for t in &self.throughput {
            writeln!(
                f,
                "  {:<15} {:>10.0} frames/s  {} of {} frames  / native tcp {:.2}",
                t.path, t.frames_per_s, t.received, t.sent, t.ratio
            )?;
        }
        Ok(())
    }
}
