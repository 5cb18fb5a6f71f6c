//! Summaries of measured samples: percentiles, mean, standard deviation
//! (the jitter), the ratios of a hub figure to its baseline, and the shape
//! of a distribution — its bimodality coefficient and its modes, so that
//! two populations of round trips are shown, not averaged away.

use serde::Serialize;

/// Distribution of round-trip times, in microseconds.
#[derive(Clone, Debug, Serialize)]
pub struct Distribution {
    pub samples: usize,
    pub min_us: f64,
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
        let at = |q: f64| percentile(samples_ns, q) / 1e3;
        let (mean, std) = mean_std(samples_ns.iter().map(|&s| s as f64));
        Self {
            samples: samples_ns.len(),
            min_us: at(0.0),
            p50_us: at(0.50),
            p80_us: at(0.80),
            p95_us: at(0.95),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: at(1.0),
            mean_us: mean / 1e3,
            std_us: std / 1e3,
        }
    }
}

/// The `q` quantile (0..=1) of ascending `sorted`, nearest rank; 0 when empty.
pub fn percentile(sorted: &[u64], q: f64) -> f64 {
    let n = sorted.len().max(1);
    sorted.get(((n as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0) as f64
}

/// Mean and population standard deviation; zeros when empty.
pub fn mean_std(values: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let n = values.clone().count();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = values.clone().sum::<f64>() / n as f64;
    let var = values.map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
    (mean, var.sqrt())
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

/// Bimodality coefficient (SAS): `(g² + 1) / (κ + 3(n−1)² / ((n−2)(n−3)))`
/// with sample skewness `g` and excess kurtosis `κ`. Above 5/9
/// ([`BIMODAL_ABOVE`], the value of a uniform distribution) the sample is
/// likely bi- or multimodal; 0 for fewer than four samples or no spread.
pub fn bimodality_coefficient(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let (mean, std) = mean_std(values.iter().copied());
    if values.len() < 4 || std == 0.0 {
        return 0.0;
    }
    let moment = |k: i32| values.iter().map(|v| ((v - mean) / std).powi(k)).sum::<f64>() / n;
    let skew = moment(3) * (n * (n - 1.0)).sqrt() / (n - 2.0);
    let excess = (n - 1.0) / ((n - 2.0) * (n - 3.0)) * ((n + 1.0) * (moment(4) - 3.0) + 6.0);
    (skew.powi(2) + 1.0) / (excess + 3.0 * (n - 1.0).powi(2) / ((n - 2.0) * (n - 3.0)))
}

/// The bimodality coefficient of a uniform distribution: the threshold.
pub const BIMODAL_ABOVE: f64 = 5.0 / 9.0;

/// A peak of a distribution.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mode {
    /// Centre of the peak's bin (µs).
    pub at_us: f64,
    /// Share of all samples in the peak's hill (between the valleys around it).
    pub share: f64,
}

/// Bins per decade of [`modes`]' log-spaced histogram.
const BINS_PER_DECADE: f64 = 20.0;
/// Bins on each side a histogram count is averaged over.
const SMOOTHING: usize = 2;
/// A hill smaller than this share of the samples is noise, not a mode.
const MIN_MODE_SHARE: f64 = 0.05;

/// The modes of ascending `sorted_ns` on a log time axis: the peaks of a
/// log-spaced histogram (20 bins a decade, averaged over five bins) that
/// stand out — their prominence (height above the higher of the two cols
/// between them and a higher peak, or the end) is at least half their
/// height — and whose hill (the bins out to the lowest ones between it and
/// the neighbouring peaks) holds at least 5 % of the samples; each placed
/// at its hill's fullest bin, the shares adding up to 1. Biggest first.
pub fn modes(sorted_ns: &[u64]) -> Vec<Mode> {
    let Some((&lo, &hi)) = sorted_ns.first().zip(sorted_ns.last()) else { return Vec::new() };
    let lo = (lo.max(1) as f64).log10();
    let bins = (((hi.max(1) as f64).log10() - lo) * BINS_PER_DECADE).floor() as usize + 1;
    let mut counts = vec![0.0; bins];
    for &s in sorted_ns {
        counts[(((s.max(1) as f64).log10() - lo) * BINS_PER_DECADE) as usize] += 1.0;
    }
    let smooth: Vec<f64> = (0..bins)
        .map(|i| {
            let window = i.saturating_sub(SMOOTHING)..(i + SMOOTHING + 1).min(bins);
            counts[window].iter().sum::<f64>() / (2 * SMOOTHING + 1) as f64
        })
        .collect();
    // The height of the col on the way from `peak` along `path` to a higher
    // bin — zero if the walk runs off the histogram, empty beyond its ends.
    let col = |path: &mut dyn Iterator<Item = usize>, higher: &dyn Fn(f64) -> bool| {
        let mut depth = f64::INFINITY;
        for j in path {
            if higher(smooth[j]) {
                return depth;
            }
            depth = depth.min(smooth[j]);
        }
        0.0
    };
    let mut peaks: Vec<usize> = (0..bins)
        .filter(|&i| {
            let height = smooth[i];
            let rising = i == 0 || smooth[i - 1] < height;
            if height == 0.0 || !rising || smooth.get(i + 1).is_some_and(|&r| r > height) {
                return false;
            }
            // Ties go to the leftmost of equal peaks.
            let cols = col(&mut (0..i).rev(), &|h| h >= height).max(col(&mut (i + 1..bins), &|h| h > height));
            height - cols >= height / 2.0
        })
        .collect();
    // Each peak's hill reaches to the lowest bins between it and its
    // neighbours; a hill with too small a share is dropped, and its samples
    // go to the hills around it.
    let total = sorted_ns.len() as f64;
    let mut found: Vec<Mode> = loop {
        let mut cuts = vec![0];
        for pair in peaks.windows(2) {
            let lowest = (pair[0]..=pair[1]).min_by(|&a, &b| smooth[a].total_cmp(&smooth[b])).unwrap_or(pair[0]);
            cuts.push(lowest);
        }
        cuts.push(bins);
        let hills: Vec<(f64, usize)> = cuts
            .windows(2)
            .map(|w| {
                let share = counts[w[0]..w[1]].iter().sum::<f64>() / total;
                // The fullest bin of the hill, before smoothing.
                let top = (w[0]..w[1]).max_by(|&a, &b| counts[a].total_cmp(&counts[b])).unwrap_or(w[0]);
                (share, top)
            })
            .collect();
        match hills.iter().position(|&(share, _)| share < MIN_MODE_SHARE) {
            Some(small) if peaks.len() > 1 => {
                peaks.remove(small);
            }
            _ => {
                break hills
                    .into_iter()
                    .filter(|&(share, _)| share >= MIN_MODE_SHARE)
                    .map(|(share, top)| Mode {
                        at_us: 10f64.powf(lo + (top as f64 + 0.5) / BINS_PER_DECADE) / 1e3,
                        share,
                    })
                    .collect();
            }
        }
    };
    found.sort_by(|x, y| y.share.total_cmp(&x.share));
    found
}

/// How evenly periodic events arrived: the intervals between consecutive
/// arrival times against the nominal period.
#[derive(Clone, Debug, Serialize)]
pub struct Jitter {
    pub period_us: f64,
    pub intervals: usize,
    pub mean_interval_us: f64,
    /// Standard deviation of the intervals: the period jitter.
    pub std_us: f64,
    /// Percentiles of |interval − period|.
    pub p99_abs_us: f64,
    pub p999_abs_us: f64,
    pub max_abs_us: f64,
}

impl Jitter {
    /// Jitter of `arrivals_ns` (ascending instants) against `period_ns`.
    pub fn of(arrivals_ns: &[u64], period_ns: u64) -> Self {
        let intervals: Vec<f64> = arrivals_ns.windows(2).map(|w| w[1].saturating_sub(w[0]) as f64).collect();
        let (mean, std) = mean_std(intervals.iter().copied());
        let mut deviations: Vec<u64> = intervals.iter().map(|&i| (i - period_ns as f64).abs().round() as u64).collect();
        deviations.sort_unstable();
        Self {
            period_us: period_ns as f64 / 1e3,
            intervals: intervals.len(),
            mean_interval_us: mean / 1e3,
            std_us: std / 1e3,
            p99_abs_us: percentile(&deviations, 0.99) / 1e3,
            p999_abs_us: percentile(&deviations, 0.999) / 1e3,
            max_abs_us: percentile(&deviations, 1.0) / 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_sample() {
        let mut samples: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let d = Distribution::of(&mut samples);
        assert_eq!((d.min_us, d.p50_us, d.p80_us, d.p99_us, d.max_us), (1.0, 501.0, 800.0, 990.0, 1000.0));
        assert_eq!((d.p95_us, d.p999_us), (950.0, 999.0));
        assert!((d.mean_us - 500.5).abs() < 1e-9);
    }

    #[test]
    fn standard_deviation_of_a_known_sample() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population std 2.
        let (mean, std) = mean_std([2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0].into_iter());
        assert_eq!((mean, std), (5.0, 2.0));
        let mut ns = vec![2000, 4000, 4000, 4000, 5000, 5000, 7000, 9000];
        let d = Distribution::of(&mut ns);
        assert!((d.std_us - 2.0).abs() < 1e-12 && (d.mean_us - 5.0).abs() < 1e-12);
        assert_eq!(mean_std(std::iter::empty()), (0.0, 0.0));
    }

    #[test]
    fn jitter_of_a_known_arrival_series() {
        // Period 1000 ns; intervals 1000, 1100, 900, 1000: deviations 0, 100, 100, 0.
        let j = Jitter::of(&[0, 1000, 2100, 3000, 4000], 1000);
        assert_eq!(j.intervals, 4);
        assert_eq!(j.mean_interval_us, 1.0);
        // Intervals' population std: sqrt((0 + 100² + 100² + 0) / 4) = 70.71 ns.
        assert!((j.std_us - 0.070_710_678).abs() < 1e-9, "{}", j.std_us);
        assert_eq!((j.p99_abs_us, j.max_abs_us), (0.1, 0.1));
        let steady = Jitter::of(&[5, 15, 25, 35], 10);
        assert_eq!((steady.std_us, steady.max_abs_us), (0.0, 0.0));
    }

    #[test]
    fn bimodality_coefficient_tells_one_hill_from_two() {
        // Two equal spikes: skewness 0, excess kurtosis -2 (population); the
        // coefficient is near 1 — far above a uniform's 5/9.
        let two: Vec<f64> = (0..1000).map(|i| if i % 2 == 0 { 10.0 } else { 50.0 }).collect();
        assert!(bimodality_coefficient(&two) > 0.9, "{}", bimodality_coefficient(&two));
        // A uniform sample sits at the threshold, a bell below it.
        let uniform: Vec<f64> = (0..10_000).map(f64::from).collect();
        assert!((bimodality_coefficient(&uniform) - BIMODAL_ABOVE).abs() < 0.01);
        let bell: Vec<f64> =
            (0..10_000).map(|i| (0..12).map(|k| ((i * 7919 + k * 104_729) % 1000) as f64).sum()).collect();
        assert!(bimodality_coefficient(&bell) < BIMODAL_ABOVE, "{}", bimodality_coefficient(&bell));
        assert_eq!(bimodality_coefficient(&[1.0, 1.0, 1.0, 1.0]), 0.0);
    }

    #[test]
    fn modes_finds_both_populations_of_a_two_hill_sample() {
        // 70 % around 20 µs, 30 % around 200 µs (a decade apart).
        let mut ns: Vec<u64> = (0..700).map(|i| 19_000 + i * 3).chain((0..300).map(|i| 190_000 + i * 70)).collect();
        ns.sort_unstable();
        let found = modes(&ns);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!((15.0..25.0).contains(&found[0].at_us) && (found[0].share - 0.7).abs() < 0.05, "{found:?}");
        assert!((150.0..250.0).contains(&found[1].at_us) && (found[1].share - 0.3).abs() < 0.05, "{found:?}");
        assert!((found.iter().map(|m| m.share).sum::<f64>() - 1.0).abs() < 1e-9, "every sample in one hill");
        // 90 % in one hill near 15 µs, 10 % spread thinly and unevenly over
        // 80..300 µs: the thin tail is one second mode, its bumps no more.
        let mut uniform = {
            let mut x = 0x2545_F491_4F6C_DD1Du64;
            move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 53) as f64
            }
        };
        let mut ns: Vec<u64> = (0..9000).map(|_| (14_000.0 + 2_000.0 * uniform()) as u64).collect();
        ns.extend((0..1000).map(|_| (80_000.0 * (300.0f64 / 80.0).powf(uniform())) as u64));
        ns.sort_unstable();
        let found = modes(&ns);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!((found[0].share - 0.9).abs() < 0.02 && (14.0..16.5).contains(&found[0].at_us), "{found:?}");
        assert!((found[1].share - 0.1).abs() < 0.02 && (80.0..300.0).contains(&found[1].at_us), "{found:?}");
        let one: Vec<u64> = (0..1000).map(|i| 50_000 + i).collect();
        assert_eq!(modes(&one).len(), 1);
        assert!(modes(&[]).is_empty());
    }
}
