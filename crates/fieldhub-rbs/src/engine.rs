//! The running simulation: every planned message as a
//! [`fieldhub_bus::cyclic::FrameProducer`] ([`MessageJob`]) that the bus
//! runs on bus time, and its [`MessageState`], which the control plane
//! changes while it runs (a signal's value, a message stopped, a counter
//! stuck, a checksum wrong).
//!
//! Invariants:
//! - The control plane and the bus share only atomics: a cycle takes no
//!   lock and allocates nothing (the payload is built in the job's own
//!   buffer).
//! - Every cycle writes every present signal at its value for the cycle's
//!   bus time (the value set, or its ramp's: `signal.rs`), then the alive
//!   counter, then the checksum over the finished payload (`protect.rs`),
//!   so a receiver's checks pass unless a fault is set; each signal's
//!   value as sent is kept for the control plane to show.
//! - In a multiplexed message only the signals every multiplexor on their
//!   chain selects this cycle are written, at any depth
//!   (`fieldhub_dbc::mux`); the other bits stay 0.
//! - A value set or ramped to by name is checked against the signal's size
//!   and its DBC range before it is stored; a refused value changes
//!   nothing. The counter's and the checksum's signals are the engine's
//!   and are refused.
//! - A message without a cycle ([`crate::plan::PlannedMessage::cycle_ms`]
//!   `None`) sends once per change: its job runs when the runtime triggers
//!   it and sends only if a change is pending.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use can_dbc::{ByteOrder, Dbc, NumericValue, ValueType};
use fieldhub_bus::cyclic::FrameProducer;
use fieldhub_dbc::mux::{deselected_by, presences, Presence};
use fieldhub_proto::frame::FrameFlags;
use fieldhub_proto::Frame;

use crate::bits::insert;
use crate::plan::{plan, NodeSelection, PlanError, PlannedMessage};
use crate::protect::{Algorithm, AliveCounter, Checksum, ChecksumRule, CounterRule, Place, RuleError};
use crate::signal::{Ramp, Role, SignalState, ValueError};

/// An alive counter the user names: the signal, and its range (default:
/// every value the signal holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterSpec {
    pub message: String,
    pub signal: String,
    pub min: Option<u64>,
    pub max: Option<u64>,
}

impl CounterSpec {
    /// The raw values the counter counts through on a signal of `size`
    /// bits: the rule's range, or the signal's every value where the rule
    /// leaves it open.
    pub fn range(&self, size: u64) -> (u64, u64) {
        let full = if size >= 64 { u64::MAX } else { (1 << size) - 1 };
        (self.min.unwrap_or(0), self.max.unwrap_or(full))
    }
}

/// A checksum the user names: a one-byte signal and its algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChecksumSpec {
    pub message: String,
    pub signal: String,
    pub algorithm: Algorithm,
    pub data_id: Option<u16>,
}

/// What to simulate of a DBC.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    pub nodes: NodeSelection,
    /// The cycle of messages the DBC gives none (`None`: they are sent on change).
    pub default_cycle_ms: Option<u64>,
    pub counters: Vec<CounterSpec>,
    pub checksums: Vec<ChecksumSpec>,
}

/// Why a simulation cannot be built or a value not set.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("no simulated message '{0}' (a message of a node not simulated, or not in the DBC)")]
    NoMessage(String),
    #[error("message {message} has no signal '{signal}'; its signals are: {known}")]
    NoSignal { message: String, signal: String, known: String },
    #[error("message {message}, signal {signal}: {source}")]
    Rule {
        message: String,
        signal: String,
        #[source]
        source: RuleError,
    },
    #[error("message {message}, signal {signal}: a checksum must be one whole byte (8 bits on a byte boundary)")]
    ChecksumNotAByte { message: String, signal: String },
    #[error("message {message}, signal {signal}: {source}")]
    Value {
        message: String,
        signal: String,
        #[source]
        source: ValueError,
    },
    #[error("message {0} is sent on change, not in cycles: set its signals instead of ramping them")]
    RampWithoutCycle(String),
    #[error("a ramp's duration must be more than 0 ms, not {0} ms (to jump to a value, set it)")]
    RampTooShort(f64),
}

/// A running message: what the control plane reads and changes.
#[derive(Debug)]
pub struct MessageState {
    pub name: String,
    pub node: String,
    pub id: u32,
    pub extended: bool,
    pub cycle_ms: Option<u64>,
    pub start_delay_ms: u64,
    pub signals: Vec<SignalState>,
    enabled: AtomicBool,
    counter_stuck: AtomicBool,
    checksum_wrong: AtomicBool,
    /// A change waits to be sent (messages sent on change).
    changed: AtomicBool,
    sent: AtomicU64,
    /// Held by the control plane while it writes a signal's value or
    /// command; the job never takes it.
    writer: Mutex<()>,
}

impl MessageState {
    fn signal(&self, name: &str) -> Result<&SignalState, EngineError> {
        self.signals.iter().find(|s| s.name == name).ok_or_else(|| EngineError::NoSignal {
            message: self.name.clone(),
            signal: name.to_owned(),
            known: self.signals.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// The raw value of physical `value` for `signal`, or why it cannot be set.
    fn raw_of(&self, signal: &SignalState, value: f64) -> Result<u64, EngineError> {
        signal.raw_of(value).map_err(|source| EngineError::Value {
            message: self.name.clone(),
            signal: signal.name.clone(),
            source,
        })
    }

    /// Set a signal's physical value, ending any ramp of it; from its next
    /// cycle on it is sent (a message sent on change is due to be sent:
    /// trigger its job).
    pub fn set(&self, signal: &str, value: f64) -> Result<(), EngineError> {
        let signal = self.signal(signal)?;
        let raw = self.raw_of(signal, value)?;
        let _writing = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        signal.store(raw);
        self.changed.store(true, Ordering::Release);
        Ok(())
    }

    /// Ramp a signal from the value it has at its message's next cycle to
    /// physical `value`, `ms` milliseconds of bus time later, linearly: each
    /// cycle sends the ramp's value at its bus time (raw, rounded half to
    /// even), and the target from the ramp's end on.
    pub fn ramp(&self, signal: &str, value: f64, ms: f64) -> Result<(), EngineError> {
        let (signal, raw, ramp_ns) = self.ramp_of(signal, value, ms)?;
        let _writing = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        signal.start_ramp(raw, ramp_ns);
        Ok(())
    }

    /// Whether a ramp of `signal` to `value` over `ms` can start (as
    /// [`MessageState::ramp`] checks it), changing nothing.
    pub fn check_ramp(&self, signal: &str, value: f64, ms: f64) -> Result<(), EngineError> {
        self.ramp_of(signal, value, ms).map(drop)
    }

    /// The signal, the raw target and the duration in ns of a ramp.
    fn ramp_of(&self, signal: &str, value: f64, ms: f64) -> Result<(&SignalState, u64, u64), EngineError> {
        if self.cycle_ms.is_none() {
            return Err(EngineError::RampWithoutCycle(self.name.clone()));
        }
        let signal = self.signal(signal)?;
        let raw = self.raw_of(signal, value)?;
        let ramp_ns = (ms * 1e6).round();
        if !(1.0..=u64::MAX as f64).contains(&ramp_ns) {
            return Err(EngineError::RampTooShort(ms));
        }
        Ok((signal, raw, ramp_ns as u64))
    }

    /// Whether `value` can be set on `signal` (as [`MessageState::set`]
    /// checks it), changing nothing.
    pub fn check(&self, signal: &str, value: f64) -> Result<(), EngineError> {
        let signal = self.signal(signal)?;
        self.raw_of(signal, value).map(drop)
    }

    /// A signal's physical value now ([`SignalState::value`]).
    pub fn get(&self, signal: &str) -> Result<f64, EngineError> {
        self.signal(signal).map(SignalState::value)
    }

    /// Send (`true`) or stop sending (`false`).
    pub fn enable(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Make the alive counter repeat its value (fault injection).
    pub fn stick_counter(&self, stuck: bool) {
        self.counter_stuck.store(stuck, Ordering::Relaxed);
    }

    pub fn counter_stuck(&self) -> bool {
        self.counter_stuck.load(Ordering::Relaxed)
    }

    /// Make the checksum wrong (fault injection).
    pub fn corrupt_checksum(&self, wrong: bool) {
        self.checksum_wrong.store(wrong, Ordering::Relaxed);
    }

    pub fn checksum_wrong(&self) -> bool {
        self.checksum_wrong.load(Ordering::Relaxed)
    }

    /// Frames made so far.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }
}

/// One message's cyclic job: builds its frame every cycle.
pub struct MessageJob {
    state: Arc<MessageState>,
    /// Each signal's ramp as this job runs it, by the signal's index.
    ramps: Vec<Ramp>,
    payload: [u8; 64],
    /// Bytes on the wire: the DBC's size, rounded up to a CAN FD length.
    len: usize,
    /// Each signal's multiplexors, by the signal's index.
    presences: Vec<Presence>,
    /// Each signal's raw value this cycle, by its index (kept, so that a
    /// cycle allocates nothing).
    raws: Vec<u64>,
    /// The alive counter and its signal's index.
    counter: Option<(AliveCounter, usize)>,
    /// The checksum and its signal's index.
    checksum: Option<(Checksum, usize)>,
}

impl MessageJob {
    pub fn state(&self) -> &Arc<MessageState> {
        &self.state
    }

    /// The frame of the cycle due at `due_ns`, from the current state.
    fn build(&mut self, due_ns: u64) -> Option<Frame> {
        let state = &*self.state;
        let data = &mut self.payload[..self.len];
        data.fill(0);
        // Every value first: the multiplexors' values this cycle select
        // the signals sent, wherever they are in the message.
        for ((signal, ramp), raw) in state.signals.iter().zip(self.ramps.iter_mut()).zip(self.raws.iter_mut()) {
            *raw = signal.due(ramp, due_ns);
        }
        let raws = &self.raws;
        for (index, signal) in state.signals.iter().enumerate() {
            if deselected_by(&self.presences, index, |i| raws.get(i).copied()).is_some() {
                continue;
            }
            let raw = raws[index];
            let Place { start, size, order } = signal.place;
            // Every place was checked against the payload when the job was built.
            insert(data, start, size, order, raw).ok()?;
            signal.record_sent(raw);
        }
        if let Some((counter, index)) = self.counter.as_mut() {
            counter.stick(state.counter_stuck.load(Ordering::Relaxed));
            state.signals[*index].record_sent(counter.stamp(data).ok()?);
        }
        if let Some((checksum, index)) = self.checksum.as_mut() {
            checksum.corrupt(state.checksum_wrong.load(Ordering::Relaxed));
            state.signals[*index].record_sent(u64::from(checksum.stamp(data).ok()?));
        }
        let frame = match self.len {
            0..=8 => Frame::can(state.id, state.extended, data),
            _ => {
                let flags = if state.extended { FrameFlags::EXTENDED } else { FrameFlags::empty() };
                Frame::can_fd(state.id, flags, data)
            }
        };
        frame.ok()
    }
}

impl FrameProducer for MessageJob {
    fn produce(&mut self, due_ns: u64) -> Option<Frame> {
        let changed = self.state.changed.swap(false, Ordering::Acquire);
        if !self.state.enabled.load(Ordering::Relaxed) || (self.state.cycle_ms.is_none() && !changed) {
            return None;
        }
        let frame = self.build(due_ns)?;
        self.state.sent.fetch_add(1, Ordering::Relaxed);
        Some(frame)
    }
}

/// A simulation built from a DBC: one job per message, by node.
pub struct Simulation {
    pub jobs: Vec<MessageJob>,
}

impl Simulation {
    /// The jobs of `setup`'s nodes' messages in `dbc`, in the file's order.
    pub fn build(dbc: &Dbc, setup: &Setup) -> Result<Self, EngineError> {
        let planned = plan(dbc, &setup.nodes, setup.default_cycle_ms)?;
        for name in setup.counters.iter().map(|c| &c.message).chain(setup.checksums.iter().map(|c| &c.message)) {
            if !planned.iter().any(|m| &m.name == name) {
                return Err(EngineError::NoMessage(name.clone()));
            }
        }
        let jobs = planned.iter().map(|p| job(dbc, p, setup)).collect::<Result<_, _>>()?;
        Ok(Self { jobs })
    }
}

fn job(dbc: &Dbc, planned: &PlannedMessage, setup: &Setup) -> Result<MessageJob, EngineError> {
    let message = dbc
        .messages
        .iter()
        .find(|m| m.name == planned.name)
        .ok_or_else(|| EngineError::NoMessage(planned.name.clone()))?;
    let counter = setup.counters.iter().find(|c| c.message == planned.name);
    let checksum = setup.checksums.iter().find(|c| c.message == planned.name);
    let signals: Vec<SignalState> = message
        .signals
        .iter()
        .map(|s| {
            // The plan placed every signal of the message in its payload.
            let place = Place { start: s.start_bit as u32, size: s.size as u32, order: s.byte_order };
            let raw = fieldhub_dbc::bits::extract(&planned.payload, place.start, place.size, place.order).unwrap_or(0);
            let role = match (counter, checksum) {
                (Some(c), _) if c.signal == s.name => Role::Counter,
                (_, Some(c)) if c.signal == s.name => Role::Checksum,
                _ => Role::Value,
            };
            let signed = s.value_type == ValueType::Signed;
            let range = (number(&s.min), number(&s.max));
            SignalState::new(s.name.clone(), place, signed, (s.factor, s.offset), range, role, raw)
        })
        .collect();
    // The plan built the message's first payload with them.
    let presences = presences(dbc, message).map_err(PlanError::from)?;
    let raws = vec![0; signals.len()];
    let len = fieldhub_proto::frame::fd_round_up_len(planned.payload.len()).unwrap_or(64);
    let ramps = vec![Ramp::default(); signals.len()];
    let state = MessageState {
        name: planned.name.clone(),
        node: planned.node.clone(),
        id: planned.id,
        extended: planned.extended,
        cycle_ms: planned.cycle_ms,
        start_delay_ms: planned.start_delay_ms,
        signals,
        enabled: AtomicBool::new(true),
        counter_stuck: AtomicBool::new(false),
        checksum_wrong: AtomicBool::new(false),
        // A message sent on change goes once at the start, with its start values.
        changed: AtomicBool::new(true),
        sent: AtomicU64::new(0),
        writer: Mutex::new(()),
    };
    let placed = |signal: &str| {
        let place = state.signal(signal)?.place;
        let index = state.signals.iter().position(|s| s.name == signal).unwrap_or(0);
        Ok::<_, EngineError>((place, index))
    };
    let counter = match counter {
        None => None,
        Some(spec) => {
            let (place, index) = placed(&spec.signal)?;
            let (min, max) = spec.range(u64::from(place.size));
            let rule = CounterRule { place, min, max };
            let fail =
                |source| EngineError::Rule { message: spec.message.clone(), signal: spec.signal.clone(), source };
            Some((AliveCounter::new(rule).map_err(fail)?, index))
        }
    };
    let checksum = match checksum {
        None => None,
        Some(spec) => {
            let (place, index) = placed(&spec.signal)?;
            let on_boundary = match place.order {
                ByteOrder::LittleEndian => place.start % 8 == 0,
                ByteOrder::BigEndian => place.start % 8 == 7,
            };
            if place.size != 8 || !on_boundary {
                return Err(EngineError::ChecksumNotAByte {
                    message: spec.message.clone(),
                    signal: spec.signal.clone(),
                });
            }
            let rule =
                ChecksumRule { byte: (place.start / 8) as usize, algorithm: spec.algorithm, data_id: spec.data_id };
            let fail =
                |source| EngineError::Rule { message: spec.message.clone(), signal: spec.signal.clone(), source };
            Some((Checksum::new(rule, planned.payload.len()).map_err(fail)?, index))
        }
    };
    Ok(MessageJob { state: Arc::new(state), ramps, payload: [0; 64], len, presences, raws, counter, checksum })
}

fn number(value: &NumericValue) -> f64 {
    match *value {
        NumericValue::Uint(n) => n as f64,
        NumericValue::Int(n) => n as f64,
        NumericValue::Double(d) => d,
    }
}
