//! A port's transmit side: one FIFO, like a single-buffer CAN controller
//! that offers only its oldest frame to arbitration (so a high-priority frame
//! queued behind a low-priority one waits: priority inversion is reproduced),
//! and an optional token bucket that limits the port's transmit rate.

use std::collections::VecDeque;

use fieldhub_proto::Frame;

/// A frame waiting in a port's transmit FIFO.
#[derive(Clone, Debug)]
pub struct Pending {
    pub frame: Frame,
    /// Position in the bus thread's arrival order; breaks arbitration ties
    /// between identical arbitration fields, oldest first.
    pub arrival: u64,
    /// Gateway routes this frame has crossed.
    pub hops: u8,
    /// Bus time the frame reached the bus thread; a `timed` channel does not
    /// start a frame before it arrived.
    pub arrived_ns: u64,
}

impl Pending {
    /// The arrival number of a LIN standing response's answer, which never
    /// waited in a FIFO: it has no place in the arrival order, so it holds
    /// back no `PONG`, and it took no transmit credit to return.
    const STANDING: u64 = u64::MAX;

    /// The answer a LIN standing response gives to a header at bus time `at`
    /// (or a LIN waker's repeated wake-up pulse, which takes no credit either).
    pub fn standing(frame: Frame, at: u64) -> Self {
        Self { frame, arrival: Self::STANDING, hops: 0, arrived_ns: at }
    }

    /// Whether this is a standing response's answer ([`Pending::standing`]).
    pub fn is_standing(&self) -> bool {
        self.arrival == Self::STANDING
    }
}

/// Token bucket: `rate` frames per second after a burst of `burst`.
#[derive(Clone, Copy, Debug)]
pub struct RateLimit {
    ns_per_token: u64,
    burst: u32,
    tokens: u32,
    /// Bus time at which the next token accrues.
    next_token_ns: u64,
}

impl RateLimit {
    /// A bucket that starts full. The configuration keeps `rate` within
    /// [`crate::config::MIN_PORT_RATE`]..; below it (or for a rate that is
    /// not a positive number) the period saturates at "never", so a tiny rate
    /// sends its burst and then nothing, instead of wrapping bus time.
    pub fn new(rate: f64, burst: u32, now_ns: u64) -> Self {
        // `as` saturates: an infinite period (a denormal rate) becomes u64::MAX.
        let ns_per_token = if rate > 0.0 { (1e9 / rate).round().max(1.0) as u64 } else { u64::MAX };
        Self { ns_per_token, burst, tokens: burst, next_token_ns: now_ns.saturating_add(ns_per_token) }
    }

    fn refill(&mut self, now_ns: u64) {
        if self.tokens >= self.burst {
            self.next_token_ns = now_ns.saturating_add(self.ns_per_token);
            return;
        }
        if now_ns >= self.next_token_ns {
            let earned = 1 + (now_ns - self.next_token_ns) / self.ns_per_token;
            self.tokens = (u64::from(self.tokens).saturating_add(earned)).min(u64::from(self.burst)) as u32;
            self.next_token_ns = self.next_token_ns.saturating_add(earned.saturating_mul(self.ns_per_token));
        }
    }

    /// When a token will be available: `None` if one is available now.
    pub fn ready_at(&mut self, now_ns: u64) -> Option<u64> {
        self.refill(now_ns);
        (self.tokens == 0).then_some(self.next_token_ns)
    }

    /// Spend a token (call only when [`RateLimit::ready_at`] said none is missing).
    pub fn spend(&mut self, now_ns: u64) {
        self.refill(now_ns);
        self.tokens = self.tokens.saturating_sub(1);
    }
}

/// One port's transmit FIFO and rate limit.
#[derive(Debug, Default)]
pub struct TxQueue {
    fifo: VecDeque<Pending>,
    limit: Option<RateLimit>,
}

impl TxQueue {
    pub fn new(limit: Option<RateLimit>) -> Self {
        Self { fifo: VecDeque::new(), limit }
    }

    pub fn push(&mut self, pending: Pending) {
        self.fifo.push_back(pending);
    }

    /// The frame this port offers to arbitration at `now_ns`, if any; with a
    /// rate limit and no token, `Err(time the next token accrues)`.
    pub fn offer(&mut self, now_ns: u64) -> Result<Option<&Pending>, u64> {
        if self.fifo.is_empty() {
            return Ok(None);
        }
        if let Some(ready_at) = self.limit.as_mut().and_then(|l| l.ready_at(now_ns)) {
            return Err(ready_at);
        }
        Ok(self.fifo.front())
    }

    /// Take the offered frame: it won arbitration.
    pub fn take(&mut self, now_ns: u64) -> Option<Pending> {
        let pending = self.fifo.pop_front()?;
        if let Some(limit) = &mut self.limit {
            limit.spend(now_ns);
        }
        Some(pending)
    }

    /// Put a frame back at the head: it lost its transmission to an error
    /// and the controller retransmits it.
    pub fn push_front(&mut self, pending: Pending) {
        self.fifo.push_front(pending);
    }

    /// Remove every waiting frame (the port was closed or unplugged).
    pub fn drain(&mut self) -> impl Iterator<Item = Pending> + '_ {
        self.fifo.drain(..)
    }

    /// The waiting frames, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Pending> + '_ {
        self.fifo.iter()
    }

    pub fn len(&self) -> usize {
        self.fifo.len()
    }

    pub fn is_empty(&self) -> bool {
        self.fifo.is_empty()
    }

    /// Arrival number of the oldest waiting frame.
    pub fn oldest_arrival(&self) -> Option<u64> {
        self.fifo.front().map(|p| p.arrival)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(arrival: u64) -> Pending {
        Pending { frame: Frame::can(1, false, &[]).unwrap(), arrival, hops: 0, arrived_ns: 0 }
    }

    #[test]
    fn fifo_offers_only_its_oldest_frame() {
        let mut q = TxQueue::new(None);
        q.push(pending(1));
        q.push(pending(2));
        assert_eq!(q.offer(0).unwrap().unwrap().arrival, 1);
        assert_eq!(q.take(0).unwrap().arrival, 1);
        assert_eq!(q.offer(0).unwrap().unwrap().arrival, 2);
    }

    #[test]
    fn rate_limit_allows_the_burst_then_one_frame_per_period() {
        let mut q = TxQueue::new(Some(RateLimit::new(1000.0, 2, 0)));
        for a in 0..5 {
            q.push(pending(a));
        }
        let mut now = 0;
        let mut sent_at = Vec::new();
        while !q.is_empty() {
            match q.offer(now) {
                Ok(Some(_)) => {
                    q.take(now);
                    sent_at.push(now);
                }
                Ok(None) => unreachable!(),
                Err(ready) => now = ready,
            }
        }
        assert_eq!(sent_at, [0, 0, 1_000_000, 2_000_000, 3_000_000]);
    }

    #[test]
    fn a_rate_too_small_to_represent_sends_its_burst_and_then_nothing() {
        for rate in [1e-300, f64::MIN_POSITIVE, 0.0, f64::NAN] {
            let mut q = TxQueue::new(Some(RateLimit::new(rate, 1, 5)));
            for a in 0..3 {
                q.push(pending(a));
            }
            assert!(matches!(q.offer(5), Ok(Some(_))), "rate {rate}: the burst goes at once");
            q.take(5);
            for now in [6, 1_000_000_000, u64::MAX / 2, u64::MAX - 1] {
                assert!(q.offer(now).is_err(), "rate {rate}: no token by {now} ns");
            }
        }
    }
}
