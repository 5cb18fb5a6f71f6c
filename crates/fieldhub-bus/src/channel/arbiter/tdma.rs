//! `tdma`: time division. A cycle of static slots, each owned by one named
//! port, repeats from bus time 0 (like a FlexRay static segment or a TTCAN
//! matrix of exclusive windows). A port sends at most one frame per slot
//! and cycle, its oldest, and only if the frame ends within the slot; a
//! frame waits for its owner's next slot. Slots without a frame, and the
//! rest of a cycle longer than its slots, are idle bus time.

use fieldhub_proto::Frame;

use super::roles::Roles;
use super::{check_port_name, Arbiter, Candidate, Rates, MAX_TURN_US};
use crate::config::TdmaConfig;
use crate::port_id::PortId;

/// One slot in bus time from its cycle's start.
struct Slot {
    start_ns: u64,
    end_ns: u64,
    /// The owner's role in [`TdmaArbiter::owners`].
    owner: usize,
}

pub struct TdmaArbiter {
    cycle_ns: u64,
    slots: Vec<Slot>,
    /// The port names that own slots, each once, and the open ports with them.
    owners: Roles,
    /// This decision's candidate of each owner: member slot and duration.
    candidates: Vec<Option<(usize, u64)>>,
    /// The slot the last decision granted: cycle number and slot.
    granted: Option<(u64, usize)>,
    /// The slot that carried the last frame: one frame per slot and cycle.
    used: Option<(u64, usize)>,
    rates: Rates,
}

impl TdmaArbiter {
    pub fn new(config: &TdmaConfig) -> Self {
        let mut owners: Vec<String> = Vec::new();
        let mut slots = Vec::with_capacity(config.slots.len());
        let mut start_ns = 0;
        for slot in &config.slots {
            let owner = match owners.iter().position(|o| *o == slot.port) {
                Some(owner) => owner,
                None => {
                    owners.push(slot.port.clone());
                    owners.len() - 1
                }
            };
            let end_ns = start_ns + slot.length_us * 1_000;
            slots.push(Slot { start_ns, end_ns, owner });
            start_ns = end_ns;
        }
        let cycle_ns = config.cycle_us.map_or(start_ns, |us| us * 1_000);
        let candidates = vec![None; owners.len()];
        Self {
            cycle_ns,
            slots,
            owners: Roles::new(owners),
            candidates,
            granted: None,
            used: None,
            rates: Rates::default(),
        }
    }

    pub fn roles(&mut self) -> &mut Roles {
        &mut self.owners
    }

    /// Why `port` may not send a frame lasting `duration_ns`, if it may not.
    pub fn refuses(&self, port: PortId, duration_ns: u64) -> Option<String> {
        let Some(owner) = self.owners.of(port) else {
            return Some(format!(
                "owns no slot of this channel's TDMA cycle (the slots belong to {})",
                self.owners.listed()
            ));
        };
        let longest = self.slots.iter().filter(|s| s.owner == owner).map(|s| s.end_ns - s.start_ns).max()?;
        (duration_ns > longest).then(|| {
            format!("sent a frame of {duration_ns} ns on the wire, longer than its longest TDMA slot ({longest} ns)")
        })
    }
}

impl Arbiter for TdmaArbiter {
    fn open(&mut self, _at: u64, rates: Rates) {
        self.rates = rates;
        self.candidates.fill(None);
        self.granted = None;
    }

    fn consider(&mut self, candidate: Candidate<'_>) {
        // Frames of ports without a slot were refused as they came.
        if let Some(owner) = self.owners.of(candidate.port) {
            self.candidates[owner] = Some((candidate.index, self.rates.duration_ns(&candidate.pending.frame)));
        }
    }

    fn decide(&mut self, at: u64) -> (Option<usize>, Option<u64>) {
        let (cycle, phase) = (at / self.cycle_ns, at % self.cycle_ns);
        let mut wake: Option<u64> = None;
        for (number, slot) in self.slots.iter().enumerate() {
            let Some((index, duration_ns)) = self.candidates[slot.owner] else { continue };
            let inside = slot.start_ns <= phase && phase < slot.end_ns;
            if inside && self.used != Some((cycle, number)) && phase + duration_ns <= slot.end_ns {
                self.granted = Some((cycle, number));
                return (Some(index), None);
            }
            // This slot's next start: later in this cycle, or in the next.
            let next_cycle = if slot.start_ns > phase { cycle } else { cycle + 1 };
            let next = next_cycle * self.cycle_ns + slot.start_ns;
            wake = Some(wake.map_or(next, |w: u64| w.min(next)));
        }
        (None, wake)
    }

    fn started(&mut self, _at: u64, _frame: &Frame) {
        self.used = self.granted.take();
    }
}

/// Check `[channel.tdma]`; the error names the key.
pub(super) fn check(config: &TdmaConfig) -> Result<(), (&'static str, String)> {
    if config.slots.is_empty() {
        return Err((
            "tdma.slots",
            "a TDMA cycle needs at least one slot: slots = [{ port = \"…\", length_us = … }]".into(),
        ));
    }
    let mut sum: u64 = 0;
    for (i, slot) in config.slots.iter().enumerate() {
        check_port_name(&slot.port).map_err(|m| ("tdma.slots", format!("slot {}: {m}", i + 1)))?;
        if slot.length_us == 0 || slot.length_us > MAX_TURN_US {
            let text =
                format!("slot {} ('{}'): length_us {} is not 1..={MAX_TURN_US}", i + 1, slot.port, slot.length_us);
            return Err(("tdma.slots", text));
        }
        sum += slot.length_us;
    }
    match config.cycle_us {
        Some(cycle) if cycle < sum => Err((
            "tdma.cycle_us",
            format!("{cycle} µs is shorter than its slots together ({sum} µs); make it at least {sum} or leave it out"),
        )),
        Some(cycle) if cycle > MAX_TURN_US => Err(("tdma.cycle_us", format!("{cycle} is more than {MAX_TURN_US} µs"))),
        _ if sum > MAX_TURN_US => Err(("tdma.slots", format!("the slots add up to {sum} µs, more than {MAX_TURN_US}"))),
        _ => Ok(()),
    }
}
