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
//! - Every cycle writes every present signal from its current raw value,
//!   then the alive counter, then the checksum over the finished payload
//!   (`protect.rs`), so a receiver's checks pass unless a fault is set.
//! - In a multiplexed message only the multiplexor and the signals its
//!   current value selects are written; the other bits stay 0.
//! - A value set by name is checked against the signal's size and its DBC
//!   range before it is stored; a refused value changes nothing.
//! - A message without a cycle ([`crate::plan::PlannedMessage::cycle_ms`]
//!   `None`) sends once per change: its job runs when the runtime triggers
//!   it and sends only if a change is pending.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use can_dbc::{ByteOrder, Dbc, MultiplexIndicator, NumericValue, ValueType};
use fieldhub_bus::cyclic::FrameProducer;
use fieldhub_proto::frame::FrameFlags;
use fieldhub_proto::Frame;

use crate::bits::insert;
use crate::plan::{plan, NodeSelection, PlanError, PlannedMessage};
use crate::protect::{Algorithm, AliveCounter, Checksum, ChecksumRule, CounterRule, Place, RuleError};

/// An alive counter the user names: the signal, and its range (default:
/// every value the signal holds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterSpec {
    pub message: String,
    pub signal: String,
    pub min: Option<u64>,
    pub max: Option<u64>,
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
    #[error("message {message}, signal {signal}: {value} is outside its range {min}..={max}")]
    OutOfRange { message: String, signal: String, value: f64, min: f64, max: f64 },
    #[error("message {message}, signal {signal}: {value} is not a number")]
    NotANumber { message: String, signal: String, value: f64 },
}

/// One signal of a running message.
#[derive(Debug)]
pub struct SignalState {
    pub name: String,
    place: Place,
    signed: bool,
    pub factor: f64,
    pub offset: f64,
    /// The DBC's range; `min == max` (both 0 in most files) means none.
    pub min: f64,
    pub max: f64,
    /// The multiplexor value that selects it; `None`: always present.
    mux: Option<u64>,
    /// Its raw value, as sent.
    raw: AtomicU64,
}

impl SignalState {
    /// Its physical value now.
    pub fn value(&self) -> f64 {
        let raw = self.raw.load(Ordering::Relaxed);
        let raw = match self.signed {
            true => fieldhub_dbc::bits::sign_extend(raw, self.place.size) as f64,
            false => raw as f64,
        };
        raw * self.factor + self.offset
    }

    /// The raw value of physical `value`, or why it does not fit.
    fn raw_of(&self, message: &str, value: f64) -> Result<u64, EngineError> {
        let fail = |min: f64, max: f64| EngineError::OutOfRange {
            message: message.to_owned(),
            signal: self.name.clone(),
            value,
            min,
            max,
        };
        if !value.is_finite() {
            return Err(EngineError::NotANumber { message: message.to_owned(), signal: self.name.clone(), value });
        }
        if self.min < self.max && !(self.min..=self.max).contains(&value) {
            return Err(fail(self.min, self.max));
        }
        let factor = if self.factor == 0.0 { 1.0 } else { self.factor };
        let raw = ((value - self.offset) / factor).round_ties_even();
        let size = self.place.size.min(64);
        let (lo, hi) = match self.signed {
            true => (-(2f64.powi(size as i32 - 1)), 2f64.powi(size as i32 - 1) - 1.0),
            false => (0.0, 2f64.powi(size as i32) - 1.0),
        };
        if !(lo..=hi).contains(&raw) {
            let ends = [lo * factor + self.offset, hi * factor + self.offset];
            return Err(fail(ends[0].min(ends[1]), ends[0].max(ends[1])));
        }
        Ok(if self.signed { raw as i64 as u64 } else { raw as u64 })
    }
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
}

impl MessageState {
    fn signal(&self, name: &str) -> Result<&SignalState, EngineError> {
        self.signals.iter().find(|s| s.name == name).ok_or_else(|| EngineError::NoSignal {
            message: self.name.clone(),
            signal: name.to_owned(),
            known: self.signals.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// Set a signal's physical value; from its next cycle on it is sent (a
    /// message sent on change is due to be sent: trigger its job).
    pub fn set(&self, signal: &str, value: f64) -> Result<(), EngineError> {
        let signal = self.signal(signal)?;
        let raw = signal.raw_of(&self.name, value)?;
        signal.raw.store(raw, Ordering::Relaxed);
        self.changed.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether `value` can be set on `signal` (as [`MessageState::set`]
    /// checks it), changing nothing.
    pub fn check(&self, signal: &str, value: f64) -> Result<(), EngineError> {
        self.signal(signal)?.raw_of(&self.name, value).map(drop)
    }

    /// A signal's physical value now.
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
    payload: [u8; 64],
    /// Bytes on the wire: the DBC's size, rounded up to a CAN FD length.
    len: usize,
    multiplexor: Option<usize>,
    counter: Option<AliveCounter>,
    checksum: Option<Checksum>,
}

impl MessageJob {
    pub fn state(&self) -> &Arc<MessageState> {
        &self.state
    }

    /// The frame of the next cycle, from the current state.
    fn build(&mut self) -> Option<Frame> {
        let state = &*self.state;
        let data = &mut self.payload[..self.len];
        data.fill(0);
        let selector = self.multiplexor.map(|i| state.signals[i].raw.load(Ordering::Relaxed));
        for signal in state.signals.iter().filter(|s| s.mux.is_none() || s.mux == selector) {
            let Place { start, size, order } = signal.place;
            // Every place was checked against the payload when the job was built.
            insert(data, start, size, order, signal.raw.load(Ordering::Relaxed)).ok()?;
        }
        if let Some(counter) = self.counter.as_mut() {
            counter.stick(state.counter_stuck.load(Ordering::Relaxed));
            counter.stamp(data).ok()?;
        }
        if let Some(checksum) = self.checksum.as_mut() {
            checksum.corrupt(state.checksum_wrong.load(Ordering::Relaxed));
            checksum.stamp(data).ok()?;
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
    fn produce(&mut self, _due_ns: u64) -> Option<Frame> {
        let changed = self.state.changed.swap(false, Ordering::Acquire);
        if !self.state.enabled.load(Ordering::Relaxed) || (self.state.cycle_ms.is_none() && !changed) {
            return None;
        }
        let frame = self.build()?;
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
    let signals: Vec<SignalState> = message
        .signals
        .iter()
        .map(|s| {
            // The plan placed every signal of the message in its payload.
            let place = Place { start: s.start_bit as u32, size: s.size as u32, order: s.byte_order };
            let raw = fieldhub_dbc::bits::extract(&planned.payload, place.start, place.size, place.order).unwrap_or(0);
            SignalState {
                name: s.name.clone(),
                place,
                signed: s.value_type == ValueType::Signed,
                factor: s.factor,
                offset: s.offset,
                min: number(&s.min),
                max: number(&s.max),
                mux: match s.multiplexer_indicator {
                    MultiplexIndicator::MultiplexedSignal(v)
                    | MultiplexIndicator::MultiplexorAndMultiplexedSignal(v) => Some(v),
                    _ => None,
                },
                raw: AtomicU64::new(raw),
            }
        })
        .collect();
    let multiplexor = message.signals.iter().position(|s| s.multiplexer_indicator == MultiplexIndicator::Multiplexor);
    let len = fieldhub_proto::frame::fd_round_up_len(planned.payload.len()).unwrap_or(64);
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
    };
    let mut job =
        MessageJob { state: Arc::new(state), payload: [0; 64], len, multiplexor, counter: None, checksum: None };
    let placed = |signal: &str| {
        let state = &job.state;
        state.signal(signal).map(|s| s.place)
    };
    if let Some(spec) = setup.counters.iter().find(|c| c.message == planned.name) {
        let place = placed(&spec.signal)?;
        let full = if place.size >= 64 { u64::MAX } else { (1 << place.size) - 1 };
        let rule = CounterRule { place, min: spec.min.unwrap_or(0), max: spec.max.unwrap_or(full) };
        let fail = |source| EngineError::Rule { message: spec.message.clone(), signal: spec.signal.clone(), source };
        job.counter = Some(AliveCounter::new(rule).map_err(fail)?);
    }
    if let Some(spec) = setup.checksums.iter().find(|c| c.message == planned.name) {
        let place = placed(&spec.signal)?;
        let on_boundary = match place.order {
            ByteOrder::LittleEndian => place.start % 8 == 0,
            ByteOrder::BigEndian => place.start % 8 == 7,
        };
        if place.size != 8 || !on_boundary {
            return Err(EngineError::ChecksumNotAByte { message: spec.message.clone(), signal: spec.signal.clone() });
        }
        let rule = ChecksumRule { byte: (place.start / 8) as usize, algorithm: spec.algorithm, data_id: spec.data_id };
        let fail = |source| EngineError::Rule { message: spec.message.clone(), signal: spec.signal.clone(), source };
        job.checksum = Some(Checksum::new(rule, planned.payload.len()).map_err(fail)?);
    }
    Ok(job)
}

fn number(value: &NumericValue) -> f64 {
    match *value {
        NumericValue::Uint(n) => n as f64,
        NumericValue::Int(n) => n as f64,
        NumericValue::Double(d) => d,
    }
}
