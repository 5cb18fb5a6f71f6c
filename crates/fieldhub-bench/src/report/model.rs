//! Closed-form models of a CAN bus, for section 7: the exact time a frame
//! occupies the bus at a channel's bit timing ([`fieldhub_proto::bits`]),
//! the time a frame waits for the bus under three access schemes, and the
//! round trip they predict on top of the hub's own (software) round trip.
//!
//! Waits ([`BusWait`]), for a frame that becomes ready at a random instant:
//! - none: an idle bus;
//! - [`BusWait::Fifo`]: M/D/1 — Poisson arrivals at load ρ, every frame the
//!   same service time D, first come first served; the waiting time has
//!   Erlang's closed form `P(W ≤ t) = (1−ρ) Σ_{k=0}^{⌊t/D⌋} (λ(kD−t))^k/k! ·
//!   e^{−λ(kD−t)}`, mean `ρD / (2(1−ρ))`;
//! - [`BusWait::TopPriority`]: CAN arbitration with the highest identifier
//!   on a bus loaded ρ by lower ones — non-preemptive, so the frame waits only
//!   for the frame already on the wire: with probability ρ a residual uniform
//!   over (0, D); mean `ρD/2`;
//! - [`BusWait::Tdma`]: a time-triggered schedule giving each node one slot
//!   per cycle C: a wait uniform over (0, C); mean `C/2`.
//!
//! A round trip is two frames (request, answer), each waiting once:
//! `overhead + 2D + W₁ + W₂`, where the overhead is the hub's measured
//! round trip on a channel without bit timing, so the model's distribution
//! is the measured software distribution convolved with the bus terms.

use fieldhub_proto::bits::FrameBits;
use fieldhub_proto::Frame;

/// The exact time `frame` occupies a bus at `nominal` and `data` bit/s, µs.
pub fn frame_time_us(frame: &Frame, nominal: u32, data: u32) -> f64 {
    FrameBits::of(frame).duration_ns(nominal, data) as f64 / 1e3
}

/// How long a frame that became ready waits for the bus.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BusWait {
    Idle,
    Fifo { load: f64, service_us: f64 },
    TopPriority { load: f64, service_us: f64 },
    Tdma { cycle_us: f64 },
}

/// Erlang's sum has alternating terms as large as `e^{2λt}`: beyond
/// `λt` = this it loses precision in doubles, and the distribution is taken
/// as complete (its tail there is below 1e-9 for loads up to 0.6).
const ERLANG_REACH: f64 = 12.0;

impl BusWait {
    /// `P(W ≤ t)`, t in µs.
    pub fn cdf(self, t_us: f64) -> f64 {
        if t_us < 0.0 {
            return 0.0;
        }
        match self {
            BusWait::Idle => 1.0,
            BusWait::Fifo { load, service_us } => {
                let rate = load / service_us;
                if rate * t_us > ERLANG_REACH {
                    return 1.0;
                }
                let k_max = (t_us / service_us).floor();
                let mut sum = 0.0;
                for k in 0..=k_max as u32 {
                    let x = rate * (f64::from(k) * service_us - t_us);
                    let factorial: f64 = (1..=k).map(f64::from).product();
                    sum += x.powi(k as i32) / factorial * (-x).exp();
                }
                ((1.0 - load) * sum).clamp(0.0, 1.0)
            }
            BusWait::TopPriority { load, service_us } => (1.0 - load) + load * (t_us / service_us).min(1.0),
            BusWait::Tdma { cycle_us } => (t_us / cycle_us).min(1.0),
        }
    }

    /// `E[W]`, µs.
    pub fn mean_us(self) -> f64 {
        match self {
            BusWait::Idle => 0.0,
            BusWait::Fifo { load, service_us } => load * service_us / (2.0 * (1.0 - load)),
            BusWait::TopPriority { load, service_us } => load * service_us / 2.0,
            BusWait::Tdma { cycle_us } => cycle_us / 2.0,
        }
    }

    /// Longest wait worth tabulating, µs.
    fn horizon_us(self) -> f64 {
        match self {
            BusWait::Idle => 0.0,
            BusWait::Fifo { load, service_us } => ERLANG_REACH * service_us / load,
            BusWait::TopPriority { service_us, .. } => service_us,
            BusWait::Tdma { cycle_us } => cycle_us,
        }
    }
}

/// The distribution of `W₁ + W₂` for two independent waits of one kind,
/// tabulated on a grid.
pub struct TwoWaits {
    step_us: f64,
    cdf: Vec<f64>,
}

/// Grid points per wait horizon.
const GRID: usize = 1000;

impl TwoWaits {
    pub fn of(wait: BusWait) -> Self {
        let horizon = wait.horizon_us();
        if horizon <= 0.0 {
            return Self { step_us: 1.0, cdf: vec![1.0] };
        }
        let step_us = horizon / GRID as f64;
        let pmf: Vec<f64> = (0..=GRID)
            .map(|i| wait.cdf(i as f64 * step_us) - if i == 0 { 0.0 } else { wait.cdf((i - 1) as f64 * step_us) })
            .collect();
        let mut sum = vec![0.0; 2 * GRID + 1];
        for (i, a) in pmf.iter().enumerate().filter(|(_, a)| **a > 0.0) {
            for (j, b) in pmf.iter().enumerate() {
                sum[i + j] += a * b;
            }
        }
        let mut total = 0.0;
        let cdf = sum
            .into_iter()
            .map(|p| {
                total += p;
                total.min(1.0)
            })
            .collect();
        Self { step_us, cdf }
    }

    /// `P(W₁ + W₂ ≤ t)`, t in µs.
    pub fn cdf(&self, t_us: f64) -> f64 {
        if t_us < 0.0 {
            return 0.0;
        }
        let i = (t_us / self.step_us).floor() as usize;
        self.cdf.get(i).copied().unwrap_or(1.0)
    }
}

/// The round trip `overhead + 2D + W₁ + W₂` with the overhead's measured
/// samples (ns): `P(RTT ≤ t)`, t in µs.
pub fn round_trip_cdf(overhead_ns: &[u64], frame_us: f64, waits: &TwoWaits, t_us: f64) -> f64 {
    if overhead_ns.is_empty() {
        return 0.0;
    }
    let sum: f64 = overhead_ns.iter().map(|&o| waits.cdf(t_us - o as f64 / 1e3 - 2.0 * frame_us)).sum();
    sum / overhead_ns.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FrameSize;

    #[test]
    fn an_eight_byte_standard_frame_without_stuffing_is_111_bits_or_222_us_at_500_kbit() {
        // SOF 1, id 11, RTR 1, IDE 1, r0 1, DLC 4, data 64, CRC 15, CRC
        // delimiter 1, ACK 1, ACK delimiter 1, EOF 7, intermission 3 = 111.
        let unstuffed = (0..=0x7FF)
            .map(|id| Frame::can(id, false, &[0x55; 8]).unwrap())
            .find(|f| FrameBits::of(f).stuff_bits == 0)
            .expect("some 8-byte frame stuffs nothing");
        assert_eq!(FrameBits::of(&unstuffed).total, 111);
        assert_eq!(frame_time_us(&unstuffed, 500_000, 500_000), 222.0);
        // The report's request frame: the same 111 bits plus its own stuff bits, 2 µs each.
        let request = FrameSize::Can8.frame(0x100, 0);
        let bits = FrameBits::of(&request);
        assert_eq!(bits.total, 111 + bits.stuff_bits);
        assert_eq!(frame_time_us(&request, 500_000, 2_000_000), f64::from(bits.total) * 2.0);
    }

    #[test]
    fn a_64_byte_fd_frame_with_brs_runs_its_data_phase_at_the_data_bitrate() {
        let frame = FrameSize::Fd64.frame(0x100, 0);
        let bits = FrameBits::of(&frame);
        // Data phase: ESI, DLC, 512 data bits, stuff count and CRC-21 with fixed stuff bits.
        assert!(bits.data_bits > 512 && bits.nominal_bits + bits.data_bits == bits.total);
        let expected = f64::from(bits.nominal_bits) * 2.0 + f64::from(bits.data_bits) * 0.5;
        assert_eq!(frame_time_us(&frame, 500_000, 2_000_000), expected);
    }

    #[test]
    fn the_fifo_wait_follows_erlangs_formula() {
        let wait = BusWait::Fifo { load: 0.5, service_us: 1.0 };
        assert_eq!(wait.cdf(0.0), 0.5, "P(no wait) = 1 − ρ");
        // At t = D: (1−ρ)(e^{λD} + 0) = 0.5 e^{0.5}, by hand.
        assert!((wait.cdf(1.0) - 0.5 * 0.5f64.exp()).abs() < 1e-12);
        assert!(wait.cdf(20.0) > 0.999_999 && wait.cdf(20.0) <= 1.0);
        // The tabulated distribution's mean is ρD / (2(1−ρ)) = 0.5.
        let mean: f64 = (0..30_000).map(|i| (1.0 - wait.cdf(f64::from(i) * 0.001)) * 0.001).sum();
        assert!((mean - wait.mean_us()).abs() < 0.005, "{mean}");
        assert_eq!(wait.mean_us(), 0.5);
    }

    #[test]
    fn priority_and_tdma_waits_are_uniform_pieces() {
        let top = BusWait::TopPriority { load: 0.4, service_us: 200.0 };
        assert!((top.cdf(0.0) - 0.6).abs() < 1e-12 && (top.cdf(100.0) - 0.8).abs() < 1e-12);
        assert_eq!((top.cdf(200.0), top.mean_us()), (1.0, 40.0));
        let tdma = BusWait::Tdma { cycle_us: 600.0 };
        assert_eq!((tdma.cdf(300.0), tdma.cdf(-1.0), tdma.mean_us()), (0.5, 0.0, 300.0));
    }

    #[test]
    fn two_waits_convolve_into_the_triangular_distribution() {
        // Two uniform (0, 1) waits: P(sum ≤ 0.5) = 0.125, P(sum ≤ 1) = 0.5.
        let two = TwoWaits::of(BusWait::Tdma { cycle_us: 1.0 });
        assert!((two.cdf(0.5) - 0.125).abs() < 0.003, "{}", two.cdf(0.5));
        assert!((two.cdf(1.0) - 0.5).abs() < 0.003, "{}", two.cdf(1.0));
        assert_eq!(two.cdf(2.5), 1.0);
        let idle = TwoWaits::of(BusWait::Idle);
        assert_eq!((idle.cdf(0.0), idle.cdf(-0.1)), (1.0, 0.0));
    }

    #[test]
    fn an_idle_bus_adds_two_frame_times_to_the_measured_overhead() {
        let idle = TwoWaits::of(BusWait::Idle);
        let overhead = [100_000, 300_000];
        assert_eq!(round_trip_cdf(&overhead, 250.0, &idle, 599.0), 0.0);
        assert_eq!(round_trip_cdf(&overhead, 250.0, &idle, 600.0), 0.5);
        assert_eq!(round_trip_cdf(&overhead, 250.0, &idle, 800.0), 1.0);
    }
}
