//! Fault rules: deliberate, reproducible misbehaviour of a channel.
//!
//! A rule sits at one position — at a sender (the frame leaving its port),
//! on the bus (the frame on the wire, seen by everyone), or at a receiver (the
//! copy one port gets) — and matches frames by sender/receiver port, id/mask
//! and a data pattern. A matching frame is acted on with the rule's
//! probability, drawn from the rule's own seeded generator, so the same seed
//! on the same traffic makes the same decisions. Rules are evaluated in
//! order; each keeps `matched` and `applied` counters, and may be limited to a
//! number of applications and to a time window. Evaluation allocates nothing.

use fieldhub_proto::frame::MAX_EXTENDED_ID;
use fieldhub_proto::Frame;
use serde::{Deserialize, Serialize};

use crate::port_id::PortId;

/// SocketCAN `CAN_ERR_PROT`: protocol violation.
pub const CAN_ERR_PROT: u32 = 0x0000_0008;
/// SocketCAN `CAN_ERR_PROT_LOC_CRC_SEQ`: error in the CRC sequence.
pub const CAN_ERR_PROT_LOC_CRC_SEQ: u8 = 0x08;

/// SocketCAN `CAN_ERR_ACK`: received no ACK on transmission.
pub const CAN_ERR_ACK: u32 = 0x0000_0020;

/// The error frame a transmitter sees when nobody acknowledged its frame.
pub fn ack_error_frame() -> Frame {
    Frame::error(CAN_ERR_ACK, [0; 8]).expect("a valid error class")
}

/// The error frame receivers see when a frame is destroyed on the wire:
/// a protocol error located in the CRC sequence.
pub fn corruption_error_frame() -> Frame {
    let mut data = [0u8; 8];
    data[3] = CAN_ERR_PROT_LOC_CRC_SEQ;
    Frame::error(CAN_ERR_PROT, data).expect("a valid error class")
}

/// Where a rule acts.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Position {
    /// As the frame leaves the sending port, before arbitration's winner is sent.
    Sender,
    /// On the wire: every receiver (and the sender's echo) is affected alike.
    Bus,
    /// For one receiving port only.
    Receiver,
}

/// Bitwise operation of a `modify` action, as in Linux can-gw.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    And,
    Or,
    Xor,
    Set,
}

impl Op {
    fn apply(self, value: u32, operand: u32) -> u32 {
        match self {
            Op::And => value & operand,
            Op::Or => value | operand,
            Op::Xor => value ^ operand,
            Op::Set => operand,
        }
    }
}

/// One field change of a `modify` action.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct FieldOp {
    pub op: Op,
    pub value: u32,
}

/// A checksum byte recomputed after a modification.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
pub struct Checksum {
    /// Index of the checksum byte in the payload.
    pub byte: u8,
    /// `xor` of all other payload bytes, or their 8-bit `sum`.
    pub kind: ChecksumKind,
}

#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ChecksumKind {
    Xor,
    Sum,
}

/// What a rule does to a matching frame.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// The frame disappears at this position.
    Drop,
    /// The frame is held back for `ms` milliseconds.
    Delay { ms: f64 },
    /// The frame is destroyed on the wire: receivers see an error frame, the
    /// sender's transmit error counter rises and it retransmits.
    Corrupt,
    /// Flip the bits of `mask` in payload byte `byte`, then deliver.
    Flip { byte: u8, mask: u8 },
    /// Change identifier, length and payload (can-gw style), then deliver.
    Modify {
        #[serde(default)]
        id: Option<FieldOp>,
        #[serde(default)]
        len: Option<FieldOp>,
        /// Applied to every payload byte, with the low 8 bits of `value`.
        #[serde(default)]
        data: Option<FieldOp>,
        #[serde(default)]
        checksum: Option<Checksum>,
    },
    /// Deliver `copies` extra copies right after the frame.
    Duplicate { copies: u8 },
}

/// A rule as the control API takes it.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FaultSpec {
    pub channel: String,
    pub at: Position,
    #[serde(default)]
    pub sender: Option<String>,
    #[serde(default)]
    pub receiver: Option<String>,
    #[serde(default)]
    pub id: u32,
    #[serde(default)]
    pub mask: u32,
    #[serde(default)]
    pub extended: Option<bool>,
    /// Payload pattern (hex) compared under `data_mask` from byte 0.
    #[serde(default)]
    pub data: Option<String>,
    #[serde(default)]
    pub data_mask: Option<String>,
    pub action: Action,
    #[serde(default = "always")]
    pub probability: f64,
    #[serde(default)]
    pub seed: u64,
    /// Stop after this many applications.
    #[serde(default)]
    pub count: Option<u64>,
    /// Active from this many milliseconds after the rule is added…
    #[serde(default)]
    pub after_ms: Option<f64>,
    /// …for this many milliseconds.
    #[serde(default)]
    pub for_ms: Option<f64>,
}

fn always() -> f64 {
    1.0
}

/// SplitMix64: a tiny, fully specified generator, so a seed means the same
/// decisions in every build and every language that reimplements it.
#[derive(Clone, Copy, Debug)]
pub struct Dice(u64);

impl Dice {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// Uniform in [0, 1).
    pub fn roll(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// A compiled rule, owned by its channel.
#[derive(Clone, Debug)]
pub struct FaultRule {
    pub id: u32,
    pub at: Position,
    pub sender: Option<PortId>,
    pub receiver: Option<PortId>,
    pub id_value: u32,
    pub id_mask: u32,
    pub extended: Option<bool>,
    pattern: [u8; 64],
    pattern_mask: [u8; 64],
    pattern_len: usize,
    pub action: Action,
    pub probability: f64,
    pub seed: u64,
    dice: Dice,
    pub limit: Option<u64>,
    /// Active window in bus time.
    pub from_ns: u64,
    pub until_ns: Option<u64>,
    pub matched: u64,
    pub applied: u64,
    /// The spec as given, for listings.
    pub spec: serde_json::Value,
}

/// The longest time a rule may wait to start (`after_ms`) or stay active
/// (`for_ms`): one year. Longer values are almost certainly mistakes, and the
/// limit keeps every sum of bus time and a rule's times far from overflow.
pub const MAX_FAULT_TIME_MS: f64 = 365.0 * 24.0 * 3600.0 * 1000.0;

/// Why a fault rule was refused; the message names the field and says what
/// the API takes instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultSpecError {
    /// A field is not in the form the API takes (HTTP 400).
    #[error("{field}: {problem}")]
    Malformed { field: &'static str, problem: String },
    /// A field is well formed but out of range (HTTP 422).
    #[error("{field}: {problem}")]
    OutOfRange { field: &'static str, problem: String },
}

fn out_of_range(field: &'static str, problem: String) -> FaultSpecError {
    FaultSpecError::OutOfRange { field, problem }
}

/// Bytes from hex digit pairs; spaces and dots between digits are ignored.
/// Works on characters, never byte offsets, so any Unicode input is refused
/// cleanly instead of splitting a character.
fn hex_bytes(text: &str, field: &'static str) -> Result<Vec<u8>, FaultSpecError> {
    let malformed = |problem: String| FaultSpecError::Malformed { field, problem };
    let mut digits = text.chars().filter(|c| !c.is_whitespace() && *c != '.');
    let mut bytes = Vec::new();
    while let Some(high) = digits.next() {
        let low = digits.next().ok_or_else(|| {
            malformed(format!("'{text}' has an odd number of hex digits; give whole bytes as digit pairs"))
        })?;
        let value = |c: char| {
            c.to_digit(16).ok_or_else(|| malformed(format!("'{c}' in '{text}' is not a hex digit (0-9, a-f, A-F)")))
        };
        // Two hex digits are at most 0xFF.
        bytes.push((value(high)? * 16 + value(low)?) as u8);
        if bytes.len() > 64 {
            return Err(out_of_range(field, format!("'{text}' is longer than 64 bytes, the largest payload")));
        }
    }
    Ok(bytes)
}

/// A rule's time in milliseconds as nanoseconds, within [`MAX_FAULT_TIME_MS`].
fn time_ns(value: Option<f64>, field: &'static str) -> Result<Option<u64>, FaultSpecError> {
    value
        .map(|ms| {
            if ms.is_finite() && (0.0..=MAX_FAULT_TIME_MS).contains(&ms) {
                // At most ~3.2e16 ns: exact enough and far below u64::MAX.
                Ok((ms * 1e6) as u64)
            } else {
                Err(out_of_range(
                    field,
                    format!("{ms:?} is not a number of milliseconds within 0..={MAX_FAULT_TIME_MS} (one year)"),
                ))
            }
        })
        .transpose()
}

/// A spec's payload pattern and mask, of equal length.
type Pattern = (Vec<u8>, Vec<u8>);

impl FaultSpec {
    /// Check every value that does not depend on the bus's state (ports and
    /// channels are resolved by the bus thread), so a malformed rule is
    /// refused before it is queued.
    pub fn check(&self) -> Result<(), FaultSpecError> {
        self.pattern().map(|_| ())?;
        self.check_values()
    }

    fn pattern(&self) -> Result<Pattern, FaultSpecError> {
        let pattern = self.data.as_deref().map(|d| hex_bytes(d, "data")).transpose()?.unwrap_or_default();
        let mask = match &self.data_mask {
            Some(m) => hex_bytes(m, "data_mask")?,
            None => vec![0xFF; pattern.len()],
        };
        if mask.len() != pattern.len() {
            return Err(out_of_range(
                "data_mask",
                format!("has {} bytes but data has {}; give one mask byte per data byte", mask.len(), pattern.len()),
            ));
        }
        Ok((pattern, mask))
    }

    fn check_values(&self) -> Result<(), FaultSpecError> {
        if !(0.0..=1.0).contains(&self.probability) {
            return Err(out_of_range("probability", format!("{} is not within 0..=1", self.probability)));
        }
        for (key, value) in [("id", self.id), ("mask", self.mask)] {
            if value > MAX_EXTENDED_ID {
                return Err(out_of_range(key, format!("0x{value:X} exceeds the 29-bit identifier range")));
            }
        }
        let problem = match self.action {
            Action::Delay { ms } if !(0.0..=60_000.0).contains(&ms) => {
                Some(format!("delay {ms:?} ms is not within 0..=60000"))
            }
            Action::Flip { byte, .. } if byte >= 64 => Some(format!("flip byte {byte} is beyond 64 bytes")),
            Action::Duplicate { copies } if copies == 0 || copies > 16 => {
                Some(format!("duplicate copies {copies} is not within 1..=16"))
            }
            Action::Modify { checksum: Some(Checksum { byte, .. }), .. } if byte >= 64 => {
                Some(format!("checksum byte {byte} is beyond 64 bytes"))
            }
            _ => None,
        };
        if let Some(problem) = problem {
            return Err(out_of_range("action", problem));
        }
        time_ns(self.after_ms, "after_ms")?;
        time_ns(self.for_ms, "for_ms")?;
        Ok(())
    }
}

impl FaultRule {
    /// Check a spec and compile it; `ports` resolves port names to ids.
    pub fn compile(
        id: u32,
        spec: &FaultSpec,
        now_ns: u64,
        port: impl Fn(&str) -> Option<PortId>,
    ) -> Result<Self, String> {
        spec.check_values().map_err(|e| e.to_string())?;
        let (pattern_bytes, mask_bytes) = spec.pattern().map_err(|e| e.to_string())?;
        let resolve = |name: &Option<String>, what: &str| -> Result<Option<PortId>, String> {
            name.as_deref().map(|n| port(n).ok_or_else(|| format!("{what}: no open port named '{n}'"))).transpose()
        };
        let sender = resolve(&spec.sender, "sender")?;
        let receiver = resolve(&spec.receiver, "receiver")?;
        if receiver.is_some() && spec.at != Position::Receiver {
            return Err("a receiver port can only be matched with \"at\": \"receiver\"".into());
        }
        let mut pattern = [0u8; 64];
        let mut pattern_mask = [0u8; 64];
        pattern[..pattern_bytes.len()].copy_from_slice(&pattern_bytes);
        pattern_mask[..mask_bytes.len()].copy_from_slice(&mask_bytes);
        // Saturating: bus time is far below u64::MAX and the times are at
        // most a year, but a sum must never wrap into "active at once".
        let from_ns =
            now_ns.saturating_add(time_ns(spec.after_ms, "after_ms").map_err(|e| e.to_string())?.unwrap_or(0));
        let until_ns = time_ns(spec.for_ms, "for_ms").map_err(|e| e.to_string())?.map(|d| from_ns.saturating_add(d));
        Ok(Self {
            id,
            at: spec.at,
            sender,
            receiver,
            id_value: spec.id,
            id_mask: spec.mask,
            extended: spec.extended,
            pattern,
            pattern_mask,
            pattern_len: pattern_bytes.len(),
            action: spec.action,
            probability: spec.probability,
            seed: spec.seed,
            dice: Dice::new(spec.seed),
            limit: spec.count,
            from_ns,
            until_ns,
            matched: 0,
            applied: 0,
            spec: serde_json::Value::Null,
        })
    }

    fn matches(&self, frame: &Frame, sender: PortId, receiver: Option<PortId>, now_ns: u64) -> bool {
        if frame.is_error() || now_ns < self.from_ns || self.until_ns.is_some_and(|u| now_ns >= u) {
            return false;
        }
        if self.limit.is_some_and(|l| self.applied >= l) {
            return false;
        }
        if self.sender.is_some_and(|s| s != sender) || (self.receiver.is_some() && self.receiver != receiver) {
            return false;
        }
        if self.extended.is_some_and(|e| e != frame.is_extended())
            || frame.id() & self.id_mask != self.id_value & self.id_mask
        {
            return false;
        }
        let data = frame.data();
        data.len() >= self.pattern_len
            && (0..self.pattern_len).all(|i| data[i] & self.pattern_mask[i] == self.pattern[i] & self.pattern_mask[i])
    }

    /// The action to take on `frame` at this rule's position, if any:
    /// counts the match, rolls the dice, counts the application.
    pub fn decide(&mut self, frame: &Frame, sender: PortId, receiver: Option<PortId>, now_ns: u64) -> Option<Action> {
        if !self.matches(frame, sender, receiver, now_ns) {
            return None;
        }
        self.matched += 1;
        if self.dice.roll() >= self.probability {
            return None;
        }
        self.applied += 1;
        Some(self.action)
    }
}

/// The frame after a `flip` or `modify` action; `None` for other actions.
pub fn transform(action: &Action, frame: &Frame) -> Option<Frame> {
    match *action {
        Action::Flip { byte, mask } => {
            let mut out = frame.clone();
            if let Some(b) = out.data_mut().get_mut(byte as usize) {
                *b ^= mask;
            }
            Some(out)
        }
        Action::Modify { id, len, data, checksum } => {
            let mut out = frame.clone();
            if let Some(op) = id {
                let limit = if out.is_extended() { MAX_EXTENDED_ID } else { 0x7FF };
                if let Ok(changed) = out.clone().with_id(op.op.apply(out.id(), op.value) & limit) {
                    out = changed;
                }
            }
            if let Some(op) = len {
                let wanted = op.op.apply(out.len() as u32, op.value) as usize;
                if let Ok(changed) = out.clone().with_len(wanted) {
                    out = changed;
                }
            }
            if let Some(op) = data {
                for b in out.data_mut() {
                    *b = op.op.apply(u32::from(*b), op.value & 0xFF) as u8;
                }
            }
            if let Some(Checksum { byte, kind }) = checksum {
                let bytes = out.data_mut();
                if (byte as usize) < bytes.len() {
                    let others = bytes.iter().enumerate().filter(|(i, _)| *i != byte as usize).map(|(_, b)| *b);
                    bytes[byte as usize] = match kind {
                        ChecksumKind::Xor => others.fold(0, |a, b| a ^ b),
                        ChecksumKind::Sum => others.fold(0u8, |a, b| a.wrapping_add(b)),
                    };
                }
            }
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> FaultSpec {
        let mut rule = serde_json::json!({"channel": "can0", "at": "bus", "action": {"type": "drop"}});
        rule.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        serde_json::from_value(rule).unwrap()
    }

    fn field_of(error: FaultSpecError) -> &'static str {
        match error {
            FaultSpecError::Malformed { field, .. } | FaultSpecError::OutOfRange { field, .. } => field,
        }
    }

    #[test]
    fn non_ascii_data_patterns_are_refused_as_malformed_naming_the_field() {
        for (key, text) in [("data", "0é0"), ("data_mask", "0é0"), ("data", "é"), ("data", "00€1")] {
            let mut rule = serde_json::json!({"data": "00"});
            rule[key] = text.into();
            let error = spec(rule).check().unwrap_err();
            assert!(matches!(error, FaultSpecError::Malformed { .. }), "{key}={text}: {error}");
            assert_eq!(field_of(error), key);
        }
        let compiled = FaultRule::compile(1, &spec(serde_json::json!({"data": "0é0"})), 0, |_| None);
        assert!(compiled.unwrap_err().contains("not a hex digit"));
    }

    #[test]
    fn hex_patterns_take_digit_pairs_with_spaces_and_dots() {
        assert_eq!(hex_bytes("DE ad.0f", "data").unwrap(), [0xDE, 0xAD, 0x0F]);
        assert!(matches!(hex_bytes("ABC", "data"), Err(FaultSpecError::Malformed { .. })));
        assert!(matches!(hex_bytes("0x12", "data"), Err(FaultSpecError::Malformed { .. })));
        assert!(matches!(hex_bytes(&"00".repeat(65), "data"), Err(FaultSpecError::OutOfRange { .. })));
        assert_eq!(hex_bytes(&"ff".repeat(64), "data").unwrap().len(), 64);
    }

    #[test]
    fn rule_times_beyond_a_year_are_refused() {
        for key in ["after_ms", "for_ms"] {
            let error = spec(serde_json::json!({ key: 1e308 })).check().unwrap_err();
            assert_eq!(field_of(error.clone()), key, "{error}");
            assert_eq!(
                error.to_string(),
                format!("{key}: 1e308 is not a number of milliseconds within 0..=31536000000 (one year)")
            );
            assert!(spec(serde_json::json!({ key: MAX_FAULT_TIME_MS })).check().is_ok());
        }
    }

    #[test]
    fn a_rule_added_late_in_bus_time_with_the_longest_window_never_wraps() {
        let rule = spec(serde_json::json!({"after_ms": MAX_FAULT_TIME_MS, "for_ms": MAX_FAULT_TIME_MS}));
        let now = u64::MAX - 10;
        let compiled = FaultRule::compile(1, &rule, now, |_| None).unwrap();
        assert_eq!(compiled.from_ns, u64::MAX);
        let frame = Frame::can(1, false, &[]).unwrap();
        let mut compiled = compiled;
        let sender = PortId::client(1).unwrap();
        assert_eq!(compiled.decide(&frame, sender, None, now), None, "not active before its start");
    }
}
