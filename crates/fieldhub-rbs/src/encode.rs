//! A message's frame from physical signal values: what a user types into
//! the web monitor's send-by-signals panel (and what a rest-bus simulation
//! sets by name) turned into an identifier and a payload.
//!
//! Each signal's physical value becomes its raw value — `(value - offset) /
//! factor`, rounded half to even as python `cantools` rounds, or an IEEE
//! float's bits (`SIG_VALTYPE_`) — and is placed by [`crate::bits::insert`],
//! the one encoder of DBC bit numbering. A signal not given keeps its start
//! value (`GenSigStartValue`, raw, as [`crate::plan`] reads it; else 0).
//!
//! Invariants:
//! - A value that does not fit its signal's bits is refused naming the
//!   signal and the physical range that fits, never cut to its low bits.
//! - Multiplexing, at any depth (`fieldhub_dbc::mux`): a multiplexed
//!   signal is written only when every multiplexor on its chain is written
//!   and its raw value (given, or its start value) selects the next; a
//!   value given for a signal the frame does not carry is refused naming
//!   the multiplexor that leaves it out and its value.
//! - An unknown message or signal is refused listing what the DBC has.

use can_dbc::{Dbc, Message, MessageId, Signal, SignalExtendedValueType, ValueType};
use fieldhub_dbc::mux::{deselected_by, presences, MuxError};

use crate::bits::{insert, OutOfPayload};

/// A message ready to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The CAN identifier, without the extended flag.
    pub id: u32,
    pub extended: bool,
    /// The message's length (its DBC size) in bytes.
    pub payload: Vec<u8>,
}

/// Why signal values do not make a frame.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum EncodeError {
    #[error("the DBC defines no message '{name}'")]
    UnknownMessage { name: String },
    #[error("message {message} has no signal '{signal}'; its signals are: {known}")]
    UnknownSignal { message: String, signal: String, known: String },
    #[error("message {message} is {size} bytes long; a CAN FD frame carries at most 64")]
    TooLong { message: String, size: u64 },
    #[error(
        "message {message}, signal {signal}: {value} does not fit its {size} bits \
         (physical values from {min} to {max} in steps of {factor} do)"
    )]
    OutOfRange { message: String, signal: String, value: f64, size: u64, min: f64, max: f64, factor: f64 },
    #[error("message {message}, signal {signal}: {value} is not a number")]
    NotANumber { message: String, signal: String, value: f64 },
    #[error(
        "message {message}, signal {signal} is not in the frame while {multiplexor} is {selector}; \
         set {multiplexor} to select it"
    )]
    NotSelected { message: String, signal: String, multiplexor: String, selector: u64 },
    #[error(transparent)]
    Multiplexing(#[from] MuxError),
    #[error("message {message}, signal {signal}: {source}")]
    Signal {
        message: String,
        signal: String,
        #[source]
        source: OutOfPayload,
    },
}

/// The frame of `dbc`'s message `name` with `values` (signal name, physical
/// value); signals not given keep their start values.
pub fn encode(dbc: &Dbc, name: &str, values: &[(String, f64)]) -> Result<Encoded, EncodeError> {
    let message = dbc
        .messages
        .iter()
        .find(|m| m.name == name)
        .ok_or_else(|| EncodeError::UnknownMessage { name: name.to_owned() })?;
    if message.size > 64 {
        return Err(EncodeError::TooLong { message: message.name.clone(), size: message.size });
    }
    if let Some((unknown, _)) = values.iter().find(|(signal, _)| !message.signals.iter().any(|s| &s.name == signal)) {
        let known: Vec<&str> = message.signals.iter().map(|s| s.name.as_str()).collect();
        return Err(EncodeError::UnknownSignal {
            message: message.name.clone(),
            signal: unknown.clone(),
            known: known.join(", "),
        });
    }
    let mut raws = Vec::with_capacity(message.signals.len());
    for signal in &message.signals {
        let given = values.iter().rev().find(|(n, _)| *n == signal.name).map(|&(_, v)| v);
        let raw = match given {
            Some(value) => raw_of(dbc, message, signal, value)?,
            None => start_raw(dbc, message, signal),
        };
        raws.push((raw, given.is_some()));
    }
    let presences = presences(dbc, message)?;
    // The size was checked against 64 bytes.
    let mut payload = vec![0u8; message.size as usize];
    for (index, signal) in message.signals.iter().enumerate() {
        let (raw, given) = raws[index];
        if let Some(multiplexor) = deselected_by(&presences, index, |i| Some(raws[i].0)) {
            if given {
                return Err(EncodeError::NotSelected {
                    message: message.name.clone(),
                    signal: signal.name.clone(),
                    multiplexor: message.signals[multiplexor].name.clone(),
                    selector: raws[multiplexor].0,
                });
            }
            continue;
        }
        let fail = |source| EncodeError::Signal { message: message.name.clone(), signal: signal.name.clone(), source };
        // Beyond u32 is beyond any payload: `insert` refuses it like any misfit.
        let start = u32::try_from(signal.start_bit).unwrap_or(u32::MAX);
        let size = u32::try_from(signal.size).unwrap_or(u32::MAX);
        insert(&mut payload, start, size, signal.byte_order, raw).map_err(fail)?;
    }
    let (id, extended) = match message.id {
        MessageId::Standard(id) => (u32::from(id), false),
        MessageId::Extended(id) => (id, true),
    };
    Ok(Encoded { id, extended, payload })
}

/// A signal's start value as raw bits (two's complement for a negative one).
fn start_raw(dbc: &Dbc, message: &Message, signal: &Signal) -> u64 {
    dbc.resolved_signal_attribute(message.id, &signal.name, "GenSigStartValue").map_or(0, crate::plan::raw_of)
}

/// A physical value as the signal's raw bits.
fn raw_of(dbc: &Dbc, message: &Message, signal: &Signal, value: f64) -> Result<u64, EncodeError> {
    let scaled = (value - signal.offset) / signal.factor;
    match dbc.extended_value_type_for_signal(message.id, &signal.name) {
        Some(SignalExtendedValueType::IEEEfloat32Bit) | Some(SignalExtendedValueType::IEEEdouble64bit)
            if scaled.is_nan() =>
        {
            Err(EncodeError::NotANumber { message: message.name.clone(), signal: signal.name.clone(), value })
        }
        Some(SignalExtendedValueType::IEEEfloat32Bit) => Ok(u64::from((scaled as f32).to_bits())),
        Some(SignalExtendedValueType::IEEEdouble64bit) => Ok(scaled.to_bits()),
        _ => {
            let size = signal.size.min(64) as i32;
            let (low, high) = if signal.value_type == ValueType::Signed {
                (-(2f64.powi(size - 1)), 2f64.powi(size - 1) - 1.0)
            } else {
                (0.0, 2f64.powi(size) - 1.0)
            };
            let raw = scaled.round_ties_even();
            // Written so that NaN (a factor of 0) fails it too.
            if !(raw >= low && raw <= high) {
                let (a, b) = (low * signal.factor + signal.offset, high * signal.factor + signal.offset);
                return Err(EncodeError::OutOfRange {
                    message: message.name.clone(),
                    signal: signal.name.clone(),
                    value,
                    size: signal.size,
                    min: a.min(b),
                    max: a.max(b),
                    factor: signal.factor,
                });
            }
            // In range: the i128 holds it exactly; `insert` keeps its low
            // `size` bits, the two's complement of a negative one.
            Ok(raw as i128 as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldhub_dbc::Database;

    const DBC: &str = r#"VERSION ""

BU_: ENGINE DUT

BO_ 256 Engine: 8 ENGINE
 SG_ Speed : 0|16@1+ (0.1,0) [0|6553.5] "km/h" DUT
 SG_ Temp : 16|8@1- (1,-40) [-168|87] "degC" DUT
 SG_ Rpm : 31|16@0+ (0.25,0) [0|16383.75] "rpm" DUT

BO_ 257 Gearbox: 4 ENGINE
 SG_ Ratio : 0|32@1- (1,0) [0|0] "" DUT

BO_ 2147484160 Muxed: 4 ENGINE
 SG_ Page M : 0|8@1+ (1,0) [0|255] "" DUT
 SG_ A m1 : 8|16@1+ (1,0) [0|65535] "" DUT
 SG_ B m2 : 8|16@1- (0.5,1) [0|0] "V" DUT

BA_DEF_ SG_ "GenSigStartValue" INT -2147483648 2147483647;
BA_DEF_DEF_ "GenSigStartValue" 0;
BA_ "GenSigStartValue" SG_ 256 Temp 50;
SIG_VALTYPE_ 257 Ratio : 1;
"#;

    fn dbc() -> Dbc {
        Dbc::try_from(DBC).expect("the test DBC parses")
    }

    fn values(pairs: &[(&str, f64)]) -> Vec<(String, f64)> {
        pairs.iter().map(|&(n, v)| (n.to_owned(), v)).collect()
    }

    fn decoded(encoded: &Encoded) -> Vec<(String, f64)> {
        let db = Database::parse(DBC).unwrap();
        let frame = db.decode(encoded.id, encoded.extended, &encoded.payload).unwrap();
        frame.signals.iter().map(|s| (s.name.to_owned(), s.value)).collect()
    }

    #[test]
    fn the_frame_decodes_to_the_values_given_and_the_start_values_of_the_others() {
        let encoded = encode(&dbc(), "Engine", &values(&[("Speed", 123.4), ("Rpm", 2000.0)])).unwrap();
        assert_eq!((encoded.id, encoded.extended, encoded.payload.len()), (256, false, 8));
        let got = decoded(&encoded);
        assert!((got[0].1 - 123.4).abs() < 1e-9, "{got:?}");
        assert_eq!(got[1], ("Temp".into(), 10.0), "raw start value 50, offset -40");
        assert_eq!(got[2], ("Rpm".into(), 2000.0));
        let float = encode(&dbc(), "Gearbox", &values(&[("Ratio", -1.5)])).unwrap();
        assert_eq!(decoded(&float), [("Ratio".to_owned(), -1.5)], "an IEEE float signal");
    }

    #[test]
    fn the_multiplexor_selects_which_signals_are_written() {
        let encoded = encode(&dbc(), "Muxed", &values(&[("Page", 2.0), ("B", -3.0)])).unwrap();
        assert_eq!((encoded.id, encoded.extended), (0x200, true));
        assert_eq!(decoded(&encoded), [("Page".to_owned(), 2.0), ("B".to_owned(), -3.0)]);
        let err = encode(&dbc(), "Muxed", &values(&[("Page", 2.0), ("A", 5.0)])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message Muxed, signal A is not in the frame while Page is 2; set Page to select it"
        );
    }

    #[test]
    fn a_value_outside_its_bits_is_refused_with_the_range_that_fits() {
        let err = encode(&dbc(), "Engine", &values(&[("Temp", 100.0)])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "message Engine, signal Temp: 100 does not fit its 8 bits (physical values from -168 to 87 in steps of 1 do)"
        );
        assert!(matches!(encode(&dbc(), "Engine", &values(&[("Speed", -0.1)])), Err(EncodeError::OutOfRange { .. })));
    }

    #[test]
    fn unknown_names_are_refused_listing_what_the_dbc_has() {
        assert_eq!(encode(&dbc(), "Brakes", &[]).unwrap_err().to_string(), "the DBC defines no message 'Brakes'");
        assert_eq!(
            encode(&dbc(), "Engine", &values(&[("Sped", 1.0)])).unwrap_err().to_string(),
            "message Engine has no signal 'Sped'; its signals are: Speed, Temp, Rpm"
        );
    }
}
