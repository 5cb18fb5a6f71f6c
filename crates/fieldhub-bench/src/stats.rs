//! Summaries of measured samples.

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

/// `hub / baseline` for each key both have.
pub fn ratios(hub: &Distribution, baseline: &Distribution) -> serde_json::Value {
    let r = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    serde_json::json!({
        "p50": r(hub.p50_us, baseline.p50_us),
        "p99": r(hub.p99_us, baseline.p99_us),
        "max": r(hub.max_us, baseline.max_us),
        "mean": r(hub.mean_us, baseline.mean_us),
    })
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
