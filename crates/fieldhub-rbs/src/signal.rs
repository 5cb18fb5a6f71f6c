//! One signal of a running message: its place and scaling, the value the
//! control plane sets or ramps, and the value last sent — shared between
//! the control plane and the message's job through atomics only.
//!
//! Invariants:
//! - The job never waits and never allocates: it reads the signal's
//!   command with one atomic load per cycle (more only when a new command
//!   came), and a command half written is taken at the next cycle.
//! - A command is written under the message's writer lock (control plane
//!   only) as a seqlock: the sequence is odd while it is written, and the
//!   job takes a command only when it read the same even sequence before
//!   and after its fields.
//! - A value set stores the raw value before its command, so a job that
//!   sees the command sends the value; a ramp leaves the raw value alone
//!   and starts at the first cycle that sees it, from the value that cycle
//!   would have sent, reaching its target `ramp_ns` later:
//!   the ramp's values are a function of that cycle's bus time alone, so a
//!   run in virtual time repeats exactly.
//! - `SignalState::sent` is written by the job only: the raw value of the
//!   last frame, alive counters and checksums included.

use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::protect::Place;

/// What the engine does with a signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// A value the user sets or ramps.
    Value,
    /// The message's alive counter, counted by the engine.
    Counter,
    /// The message's checksum, computed by the engine.
    Checksum,
}

/// Why a value cannot be set on a signal.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ValueError {
    #[error("{value} is outside its range {min}..={max}")]
    OutOfRange { value: f64, min: f64, max: f64 },
    #[error("{value} is not a number")]
    NotANumber { value: f64 },
    #[error("it is the message's {0}, which the simulation computes; use counter_stuck or checksum_wrong to fault it")]
    Computed(&'static str),
}

/// The latest command for a signal: set (no ramp) or ramp.
#[derive(Debug, Default)]
struct Command {
    /// Even when complete; odd while written. Also the command's identity.
    seq: AtomicU64,
    /// The ramp's target, raw, as `f64` bits.
    to: AtomicU64,
    /// The ramp's duration on bus time; 0: no ramp (a value set).
    ramp_ns: AtomicU64,
}

/// One signal of a running message.
#[derive(Debug)]
pub struct SignalState {
    pub name: String,
    pub(crate) place: Place,
    signed: bool,
    pub factor: f64,
    pub offset: f64,
    /// The DBC's range; `min == max` (both 0 in most files) means none.
    pub min: f64,
    pub max: f64,
    pub role: Role,
    /// The value set (raw): what is sent while no ramp runs.
    raw: AtomicU64,
    /// The raw value in the last frame sent (the start value before one).
    sent: AtomicU64,
    command: Command,
}

/// A ramp as a job runs it: from the value last sent to `to` (raw), from
/// the bus time of the first cycle that saw it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Ramp {
    /// The command (sequence) it came from.
    seq: u64,
    from: f64,
    to: f64,
    start_ns: Option<u64>,
    ramp_ns: u64,
}

impl SignalState {
    pub(crate) fn new(
        name: String,
        place: Place,
        signed: bool,
        (factor, offset): (f64, f64),
        (min, max): (f64, f64),
        role: Role,
        start: u64,
    ) -> Self {
        Self {
            name,
            place,
            signed,
            factor,
            offset,
            min,
            max,
            role,
            raw: AtomicU64::new(start),
            sent: AtomicU64::new(start),
            command: Command::default(),
        }
    }

    fn physical(&self, raw: u64) -> f64 {
        self.signed_raw(raw) * self.factor + self.offset
    }

    fn signed_raw(&self, raw: u64) -> f64 {
        match self.signed {
            true => fieldhub_dbc::bits::sign_extend(raw, self.place.size) as f64,
            false => raw as f64,
        }
    }

    /// Its physical value now: the value set, or, for a counter, a
    /// checksum or a signal ramped, the value last sent.
    pub fn value(&self) -> f64 {
        match self.role == Role::Value && self.ramp().is_none() {
            true => self.physical(self.raw.load(Ordering::Relaxed)),
            false => self.sent_value(),
        }
    }

    /// Its physical value in the last frame sent.
    pub fn sent_value(&self) -> f64 {
        self.physical(self.sent.load(Ordering::Relaxed))
    }

    /// The latest ramp asked for: (target, duration in ns), physical.
    pub fn ramp(&self) -> Option<(f64, u64)> {
        match self.read_command()? {
            (_, _, 0) => None,
            (_, to, ramp_ns) => Some((to * self.factor + self.offset, ramp_ns)),
        }
    }

    /// The raw value of physical `value`, or why it does not fit.
    pub(crate) fn raw_of(&self, value: f64) -> Result<u64, ValueError> {
        match self.role {
            Role::Value => {}
            Role::Counter => return Err(ValueError::Computed("alive counter")),
            Role::Checksum => return Err(ValueError::Computed("checksum")),
        }
        if !value.is_finite() {
            return Err(ValueError::NotANumber { value });
        }
        if self.min < self.max && !(self.min..=self.max).contains(&value) {
            return Err(ValueError::OutOfRange { value, min: self.min, max: self.max });
        }
        let factor = if self.factor == 0.0 { 1.0 } else { self.factor };
        let raw = ((value - self.offset) / factor).round_ties_even();
        let (lo, hi) = self.raw_range();
        if !(lo..=hi).contains(&raw) {
            let ends = [lo * factor + self.offset, hi * factor + self.offset];
            return Err(ValueError::OutOfRange { value, min: ends[0].min(ends[1]), max: ends[0].max(ends[1]) });
        }
        Ok(self.bits_of(raw))
    }

    /// The raw values its bits hold.
    fn raw_range(&self) -> (f64, f64) {
        let size = self.place.size.min(64);
        match self.signed {
            true => (-(2f64.powi(size as i32 - 1)), 2f64.powi(size as i32 - 1) - 1.0),
            false => (0.0, 2f64.powi(size as i32) - 1.0),
        }
    }

    /// A whole raw value (inside [`Self::raw_range`]) as the bits sent.
    fn bits_of(&self, raw: f64) -> u64 {
        if self.signed {
            raw as i64 as u64
        } else {
            raw as u64
        }
    }

    /// Store a checked raw value and cancel any ramp. The caller holds the
    /// message's writer lock.
    pub(crate) fn store(&self, raw: u64) {
        self.raw.store(raw, Ordering::Relaxed);
        self.write_command(0.0, 0);
    }

    /// Ask for a ramp to checked raw value `to` over `ramp_ns` (> 0). The
    /// caller holds the message's writer lock.
    pub(crate) fn start_ramp(&self, to: u64, ramp_ns: u64) {
        self.write_command(self.signed_raw(to), ramp_ns);
    }

    fn write_command(&self, to: f64, ramp_ns: u64) {
        let seq = self.command.seq.load(Ordering::Relaxed);
        self.command.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        // SYNC POINT with the fence in `read_command`: the odd sequence is
        // seen before any field written here.
        fence(Ordering::Release);
        self.command.to.store(to.to_bits(), Ordering::Relaxed);
        self.command.ramp_ns.store(ramp_ns, Ordering::Relaxed);
        // SYNC POINT with the first Acquire load in `read_command`; the raw
        // value `store` wrote before is seen with it.
        self.command.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The latest complete command: (sequence, target raw, ramp duration).
    fn read_command(&self) -> Option<(u64, f64, u64)> {
        let seq = self.command.seq.load(Ordering::Acquire);
        if seq % 2 == 1 {
            return None;
        }
        let to = f64::from_bits(self.command.to.load(Ordering::Relaxed));
        let ramp_ns = self.command.ramp_ns.load(Ordering::Relaxed);
        // SYNC POINT with the fence in `write_command`: a field read above
        // that a newer command wrote makes the sequence read below differ.
        fence(Ordering::Acquire);
        (self.command.seq.load(Ordering::Relaxed) == seq).then_some((seq, to, ramp_ns))
    }

    /// The raw value to send in the cycle due at `due_ns`; `ramp` is the
    /// job's own state of this signal's ramp. A new ramp starts from the
    /// value this cycle would have sent without it.
    pub(crate) fn due(&self, ramp: &mut Ramp, due_ns: u64) -> u64 {
        if self.command.seq.load(Ordering::Relaxed) != ramp.seq {
            if let Some((seq, to, ramp_ns)) = self.read_command() {
                let from = self.signed_raw(self.value_at(ramp, due_ns));
                *ramp = Ramp { seq, from, to, start_ns: None, ramp_ns };
            }
        }
        self.value_at(ramp, due_ns)
    }

    /// The raw value at `due_ns`: the ramp's, else the value set.
    fn value_at(&self, ramp: &mut Ramp, due_ns: u64) -> u64 {
        if ramp.ramp_ns == 0 {
            return self.raw.load(Ordering::Relaxed);
        }
        let start_ns = *ramp.start_ns.get_or_insert(due_ns);
        let done = (due_ns.saturating_sub(start_ns) as f64 / ramp.ramp_ns as f64).min(1.0);
        let raw = (ramp.from + (ramp.to - ramp.from) * done).round_ties_even();
        // Both ends are values of the signal's bits, and so is every value between.
        let (lo, hi) = self.raw_range();
        self.bits_of(raw.clamp(lo, hi))
    }

    /// Record the raw value a frame carried.
    pub(crate) fn record_sent(&self, raw: u64) {
        self.sent.store(raw, Ordering::Relaxed);
    }
}
