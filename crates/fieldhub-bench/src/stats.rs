//! Summaries of measured samples: percentiles, mean, standard deviation
//! (the jitter), and the ratios of a hub figure to its baseline.

use serde::Serialize;

/// Distribution of round-trip times, in microseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Distribution {
    pub samples: usize,
    pub p50_us: f64,
    pub p80_us: f64,
    pub p95_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    pub std_us: f64,
}

impl Distribution {
    /// Summarise samples given in nanoseconds.
    pub fn of(samples_ns: &mut [u64]) -> Self {
        samples_ns.sort_unstable();
        let n = samples_ns.len().max(1);
        let at = |q: f64| samples_ns.get(((n as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0) as f64 / 1e3;
        let mean = samples_ns.iter().map(|&s| s as f64).sum::<f64>() / n as f64;
        let var = samples_ns.iter().map(|&s| (s as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        Self {
            samples: samples_ns.len(),
            p50_us: at(0.50),
            p80_us: at(0.80),
            p95_us: at(0.95),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: at(1.0),
            mean_us: mean / 1e3,
            std_us: var.sqrt() / 1e3,
        }
    }
}

/// `hub / baseline`, key by key.
#[derive(Clone, Debug, Serialize)]
pub struct Ratios {
    pub p50: f64,
    pub p80: f64,
    pub p95: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
    pub std: f64,
}

impl Ratios {
    pub fn of(hub: &Distribution, baseline: &Distribution) -> Self {
        Self {
            p50: ratio(hub.p50_us, baseline.p50_us),
            p80: ratio(hub.p80_us, baseline.p80_us),
            p95: ratio(hub.p95_us, baseline.p95_us),
            p99: ratio(hub.p99_us, baseline.p99_us),
            p999: ratio(hub.p999_us, baseline.p999_us),
            max: ratio(hub.max_us, baseline.max_us),
            mean: ratio(hub.mean_us, baseline.mean_us),
            std: ratio(hub.std_us, baseline.std_us),
        }
    }
}

/// `hub / baseline`; 0 when the baseline measured nothing (JSON has no NaN).
pub fn ratio(hub: f64, baseline: f64) -> f64 {
    if baseline > 0.0 {
        hub / baseline
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_sample() {
        let mut samples: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let d = Distribution::of(&mut samples);
        assert_eq!((d.p50_us, d.p99_us, d.max_us), (501.0, 990.0, 1000.0));
        assert!((d.mean_us - 500.5).abs() < 1e-9);
    }
}
