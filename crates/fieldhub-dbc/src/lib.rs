//! DBC signal decoding for fieldhub's web monitor.
//!
//! [`can_dbc`] parses the file; this crate turns its messages into a
//! [`Database`] that decodes a frame's payload into physical signal values:
//! Intel (little-endian) and Motorola (big-endian, DBC's "sawtooth" bit
//! numbering) byte order, signed and unsigned integers, IEEE floats
//! (`SIG_VALTYPE_`), factor and offset, value descriptions (`VAL_`), and
//! multiplexing — simple (`M` / `mN`) and extended (`SG_MUL_VAL_`, with
//! multiplexors that are multiplexed themselves).
//!
//! Invariants: decoding never panics and never allocates beyond the result;
//! a signal is decoded only when all its bits lie within the payload given
//! and its multiplexor (if any) is itself decoded with a matching value.
//! The results agree with python `cantools` (`decode_choices=False`): the
//! vectors in `tests/vectors.json` are cantools' decoding of random frames
//! (`tests/make_vectors.py`), and `tests/cantools.rs` checks them.

pub mod bits;
mod format;
pub mod mux;

use std::collections::HashMap;

use can_dbc::{ByteOrder, Dbc, MessageId, SignalExtendedValueType, ValueType};
use mux::{deselected_by, presences, Presence};

/// The parser's own types: a parsed file ([`can_dbc::Dbc`]) is what the
/// hub keeps beside a [`Database`] to list and encode messages.
pub use can_dbc;
pub use format::describe;

/// Why a DBC file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DbcLoadError {
    #[error("the DBC file does not parse: {0}")]
    Parse(String),
    #[error("the DBC file is neither UTF-8 nor Windows-1252 text")]
    Encoding,
    #[error(transparent)]
    Multiplexing(#[from] mux::MuxError),
    #[error("signal {message}.{signal}: {why}")]
    Signal { message: String, signal: String, why: String },
}

/// How a signal's raw bits are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Integer { signed: bool },
    Float32,
    Float64,
}

/// One signal, ready to decode.
#[derive(Clone, Debug)]
struct SignalDef {
    name: String,
    start: u32,
    size: u32,
    order: ByteOrder,
    kind: Kind,
    factor: f64,
    offset: f64,
    unit: String,
    choices: Vec<(i64, String)>,
}

/// One message, ready to decode.
#[derive(Clone, Debug)]
struct MessageDef {
    name: String,
    signals: Vec<SignalDef>,
    /// Each signal's multiplexors, by the signal's index.
    presences: Vec<Presence>,
}

/// A signal's value in a decoded frame.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalValue<'a> {
    pub name: &'a str,
    /// The physical value: `raw * factor + offset`.
    pub value: f64,
    pub unit: &'a str,
    /// The `VAL_` description of the raw value, if the file gives one.
    pub label: Option<&'a str>,
    /// Digits after the decimal point the factor and offset call for.
    pub decimals: usize,
}

/// A frame decoded with its message's definition.
#[derive(Clone, Debug, PartialEq)]
pub struct Decoded<'a> {
    pub message: &'a str,
    pub signals: Vec<SignalValue<'a>>,
}

/// The messages of one DBC file, by identifier.
#[derive(Clone, Debug, Default)]
pub struct Database {
    messages: HashMap<(u32, bool), MessageDef>,
}

impl Database {
    /// Parse a DBC file's text.
    pub fn parse(text: &str) -> Result<Self, DbcLoadError> {
        Self::from_dbc(&read_text(text)?)
    }

    /// The decoder of a parsed file.
    pub fn from_dbc(dbc: &Dbc) -> Result<Self, DbcLoadError> {
        let mut messages = HashMap::new();
        for message in &dbc.messages {
            let key = match message.id {
                MessageId::Standard(id) => (u32::from(id), false),
                MessageId::Extended(id) => (id, true),
            };
            messages.insert(key, message_def(dbc, message)?);
        }
        Ok(Self { messages })
    }

    /// Parse a DBC file's bytes: UTF-8, or Windows-1252 (what Vector's
    /// tools write) when they are not UTF-8.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DbcLoadError> {
        Self::from_dbc(&read(bytes)?)
    }

    /// How many messages the file defines.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the file defines no message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Decode a frame's payload, if the file defines its identifier.
    pub fn decode(&self, id: u32, extended: bool, data: &[u8]) -> Option<Decoded<'_>> {
        let message = self.messages.get(&(id, extended))?;
        let raws: Vec<Option<u64>> =
            message.signals.iter().map(|s| bits::extract(data, s.start, s.size, s.order)).collect();
        let mut signals = Vec::with_capacity(message.signals.len());
        for (index, signal) in message.signals.iter().enumerate() {
            if deselected_by(&message.presences, index, |i| raws[i]).is_some() {
                continue;
            }
            let Some(raw) = raws[index] else { continue };
            let (number, integer) = match signal.kind {
                Kind::Integer { signed } => {
                    let value = if signed { i128::from(bits::sign_extend(raw, signal.size)) } else { i128::from(raw) };
                    (value as f64, Some(value))
                }
                Kind::Float32 => (f64::from(f32::from_bits(raw as u32)), None),
                Kind::Float64 => (f64::from_bits(raw), None),
            };
            let label = integer.and_then(|v| {
                signal.choices.iter().find(|(key, _)| i128::from(*key) == v).map(|(_, text)| text.as_str())
            });
            signals.push(SignalValue {
                name: &signal.name,
                value: number * signal.factor + signal.offset,
                unit: &signal.unit,
                label,
                decimals: format::decimals(signal.factor, signal.offset),
            });
        }
        Some(Decoded { message: &message.name, signals })
    }
}

/// Parse a DBC file's text into the parser's model.
pub fn read_text(text: &str) -> Result<Dbc, DbcLoadError> {
    Dbc::try_from(text).map_err(|e| DbcLoadError::Parse(format!("{e:?}")))
}

/// Parse a DBC file's bytes into the parser's model: UTF-8, or
/// Windows-1252 (what Vector's tools write) when they are not UTF-8.
pub fn read(bytes: &[u8]) -> Result<Dbc, DbcLoadError> {
    match std::str::from_utf8(bytes) {
        Ok(text) => read_text(text),
        Err(_) => read_text(&can_dbc::decode_cp1252(bytes).ok_or(DbcLoadError::Encoding)?),
    }
}

fn message_def(dbc: &Dbc, message: &can_dbc::Message) -> Result<MessageDef, DbcLoadError> {
    let presences = presences(dbc, message)?;
    let mut signals = Vec::with_capacity(message.signals.len());
    for signal in &message.signals {
        let fail =
            |why: String| DbcLoadError::Signal { message: message.name.clone(), signal: signal.name.clone(), why };
        let kind = match dbc.extended_value_type_for_signal(message.id, &signal.name) {
            Some(SignalExtendedValueType::IEEEfloat32Bit) => Kind::Float32,
            Some(SignalExtendedValueType::IEEEdouble64bit) => Kind::Float64,
            _ => Kind::Integer { signed: signal.value_type == ValueType::Signed },
        };
        let wanted = match kind {
            Kind::Float32 => Some(32u64),
            Kind::Float64 => Some(64),
            Kind::Integer { .. } => None,
        };
        if wanted.is_some_and(|w| w != signal.size) || signal.size == 0 || signal.size > 64 {
            return Err(fail(format!("a {:?} signal cannot be {} bits long", kind, signal.size)));
        }
        if signal.start_bit >= 512 {
            return Err(fail(format!("start bit {} is beyond a 64-byte payload", signal.start_bit)));
        }
        let choices = dbc
            .value_descriptions_for_signal(message.id, &signal.name)
            .map(|list| list.iter().map(|v| (v.id, v.description.clone())).collect())
            .unwrap_or_default();
        signals.push(SignalDef {
            name: signal.name.clone(),
            start: signal.start_bit as u32,
            size: signal.size as u32,
            order: signal.byte_order,
            kind,
            factor: signal.factor,
            offset: signal.offset,
            unit: signal.unit.clone(),
            choices,
        });
    }
    Ok(MessageDef { name: message.name.clone(), signals, presences })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DBC: &str = r#"VERSION ""

NS_ :

BS_:

BU_: ECU

BO_ 256 Engine: 8 ECU
 SG_ Speed : 0|16@1+ (0.1,0) [0|6553.5] "km/h" Vector__XXX
 SG_ Temp : 16|8@1- (1,-40) [-168|87] "degC" Vector__XXX
 SG_ Rpm : 31|16@0+ (0.25,0) [0|16383.75] "rpm" Vector__XXX
 SG_ Gear : 48|4@1+ (1,0) [0|15] "" Vector__XXX

BO_ 2147484160 Muxed: 8 ECU
 SG_ Page M : 0|8@1+ (1,0) [0|255] "" Vector__XXX
 SG_ A m1 : 8|16@1+ (1,0) [0|65535] "" Vector__XXX
 SG_ B m2 : 8|16@1- (0.5,1) [0|0] "V" Vector__XXX

VAL_ 256 Gear 0 "Neutral" 1 "First" 2 "Second" ;
"#;

    fn value(decoded: &Decoded<'_>, name: &str) -> Option<f64> {
        decoded.signals.iter().find(|s| s.name == name).map(|s| s.value)
    }

    #[test]
    fn intel_motorola_sign_factor_and_offset() {
        let db = Database::parse(DBC).unwrap();
        // Speed 0x04D2 = 1234 -> 123.4; Temp 0xF6 = -10 -> -50;
        // Rpm big-endian from bit 31 (byte 3 MSB): 0x1F40 = 8000 -> 2000.
        let data = [0xD2, 0x04, 0xF6, 0x1F, 0x40, 0x00, 0x02, 0x00];
        let decoded = db.decode(256, false, &data).unwrap();
        assert_eq!(decoded.message, "Engine");
        assert!((value(&decoded, "Speed").unwrap() - 123.4).abs() < 1e-9);
        assert_eq!(value(&decoded, "Temp"), Some(-50.0));
        assert_eq!(value(&decoded, "Rpm"), Some(2000.0));
        let gear = decoded.signals.iter().find(|s| s.name == "Gear").unwrap();
        assert_eq!((gear.value, gear.label), (2.0, Some("Second")));
        assert_eq!(describe(&decoded), "Engine: Speed=123.4 km/h Temp=-50 degC Rpm=2000.00 rpm Gear=2 (Second)");
    }

    #[test]
    fn only_the_selected_multiplexed_signals_are_decoded() {
        let db = Database::parse(DBC).unwrap();
        let one = db.decode(0x200, true, &[1, 0x10, 0x00, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(one.signals.iter().map(|s| s.name).collect::<Vec<_>>(), ["Page", "A"]);
        let two = db.decode(0x200, true, &[2, 0xFF, 0xFF, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(value(&two, "B"), Some(0.5), "-1 * 0.5 + 1");
        assert!(db.decode(0x200, false, &[1; 8]).is_none(), "a standard id is another message");
    }

    #[test]
    fn a_short_payload_decodes_only_the_signals_it_holds() {
        let db = Database::parse(DBC).unwrap();
        let decoded = db.decode(256, false, &[0xD2, 0x04]).unwrap();
        assert_eq!(decoded.signals.iter().map(|s| s.name).collect::<Vec<_>>(), ["Speed"]);
    }

    #[test]
    fn a_windows_1252_file_is_read() {
        let text = DBC.replace("\"degC\"", "\"\u{B0}C\"");
        let bytes: Vec<u8> = text.chars().map(|c| u8::try_from(u32::from(c)).unwrap()).collect();
        assert!(std::str::from_utf8(&bytes).is_err(), "0xB0 alone is not UTF-8");
        let db = Database::from_bytes(&bytes).unwrap();
        let decoded = db.decode(256, false, &[0, 0, 0xF6, 0, 0, 0, 0, 0]).unwrap();
        assert_eq!(decoded.signals.iter().find(|s| s.name == "Temp").unwrap().unit, "\u{B0}C");
    }

    #[test]
    fn a_broken_file_is_an_error() {
        assert!(Database::parse("BO_ 1 X: 8 Y\n SG_ S : 0|0@1+ (1,0) [0|0] \"\" Z\n").is_err());
        assert!(matches!(Database::parse("this is not a DBC"), Err(DbcLoadError::Parse(_))));
    }
}
