//! A parsed DBC's multiplexing checked before anything is simulated: what
//! the parser takes but no message can be built from is refused naming
//! the line, so a hostile or broken file is an error, never a loop.
//!
//! Refused:
//! - a message with two plain multiplexors (`M`): which one selects?
//! - a multiplexed signal (`mN`) in a message without a multiplexor, or
//!   in one with several and no `SG_MUL_VAL_` naming the one that selects
//!   it (`fieldhub_dbc::mux`: which multiplexor selects what);
//! - an `SG_MUL_VAL_` (extended multiplexing) naming a message, signal or
//!   multiplexor that does not exist;
//! - multiplexors that select each other in a circle through
//!   `SG_MUL_VAL_` (`A` multiplexed by `B`, `B` by `A`), itself included.
//!
//! Invariant: the check walks each chain of multiplexors at most as many
//! steps as the message has signals, so it ends on every input.

use can_dbc::{Dbc, Message, MessageId, MultiplexIndicator};
use fieldhub_dbc::mux::{presences, MuxError};

use crate::load::LoadError;

/// Refuse what [the module doc](self) lists, naming the line of `text`.
pub fn check(dbc: &Dbc, text: &str) -> Result<(), LoadError> {
    for message in &dbc.messages {
        check_message(message, text)?;
    }
    for entry in &dbc.extended_multiplex {
        let at = |why: String| LoadError::Parse { line: mul_val_line(text, entry.message_id, &entry.signal_name), why };
        let Some(message) = dbc.messages.iter().find(|m| m.id == entry.message_id) else {
            return Err(at(format!(
                "SG_MUL_VAL_ names message {}, which the file does not define",
                raw(entry.message_id)
            )));
        };
        for name in [&entry.signal_name, &entry.multiplexor_signal_name] {
            if !message.signals.iter().any(|s| &s.name == name) {
                return Err(at(format!(
                    "SG_MUL_VAL_ names signal {name}, which message {} does not have",
                    message.name
                )));
            }
        }
        // Follow the multiplexors up from this signal: a chain longer than
        // the message's signals has come round again.
        let mut chain = vec![entry.signal_name.as_str()];
        let mut current = entry.multiplexor_signal_name.as_str();
        while chain.len() <= message.signals.len() {
            if let Some(start) = chain.iter().position(|&name| name == current) {
                let circle: Vec<String> = chain[start..]
                    .iter()
                    .zip(chain[start..].iter().skip(1).chain([&current]))
                    .map(|(signal, by)| format!("{signal} by {by}"))
                    .collect();
                return Err(at(format!(
                    "circular multiplexing in message {}: {}; a multiplexor cannot select itself",
                    message.name,
                    circle.join(", ")
                )));
            }
            chain.push(current);
            let up = dbc.extended_multiplex.iter().find(|e| e.message_id == message.id && e.signal_name == current);
            match up {
                Some(up) => current = up.multiplexor_signal_name.as_str(),
                None => break,
            }
        }
    }
    for message in &dbc.messages {
        if let Err(e) = presences(dbc, message) {
            let line = match &e {
                MuxError::NoMultiplexor { signal, .. } | MuxError::Ambiguous { signal, .. } => {
                    signal_line(text, message.id, signal)
                }
                MuxError::UnknownMultiplexor { signal, .. } => mul_val_line(text, message.id, signal),
            };
            return Err(LoadError::Parse { line, why: e.to_string() });
        }
    }
    Ok(())
}

fn check_message(message: &Message, text: &str) -> Result<(), LoadError> {
    let at = |signal: &str, why: String| LoadError::Parse { line: signal_line(text, message.id, signal), why };
    let mut multiplexors =
        message.signals.iter().filter(|s| s.multiplexer_indicator == MultiplexIndicator::Multiplexor);
    let first = multiplexors.next();
    if let (Some(first), Some(second)) = (first, multiplexors.next()) {
        let why = format!(
            "message {} has two multiplexors (M), {} and {}; one selects, others are mNM signals (SG_MUL_VAL_)",
            message.name, first.name, second.name
        );
        return Err(at(&second.name, why));
    }
    Ok(())
}

/// An identifier as the file writes it (bit 31 set for an extended one).
fn raw(id: MessageId) -> u64 {
    match id {
        MessageId::Standard(id) => u64::from(id),
        MessageId::Extended(id) => u64::from(id) | 1 << 31,
    }
}

/// The line (from 1) of `signal`'s `SG_` in message `id`'s `BO_`; 0 if not found.
fn signal_line(text: &str, id: MessageId, signal: &str) -> usize {
    let mut in_message = false;
    for (index, line) in text.lines().enumerate() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("BO_") => in_message = words.next().and_then(|w| w.parse::<u64>().ok()) == Some(raw(id)),
            Some("SG_") if in_message && words.next() == Some(signal) => return index + 1,
            _ => {}
        }
    }
    0
}

/// The line (from 1) of the `SG_MUL_VAL_` of `signal` in message `id`; 0 if not found.
fn mul_val_line(text: &str, id: MessageId, signal: &str) -> usize {
    let found = text.lines().position(|line| {
        let words: Vec<&str> = line.split_whitespace().take(3).collect();
        words.len() == 3
            && words[0] == "SG_MUL_VAL_"
            && words[1].parse::<u64>().ok() == Some(raw(id))
            && words[2] == signal
    });
    found.map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use crate::load::{load, LoadError};

    const HEAD: &str = "VERSION \"\"\n\nBU_: A B\n\n";

    fn refused(text: &str) -> (usize, String) {
        match load(text.as_bytes()).unwrap_err() {
            LoadError::Parse { line, why } => (line, why),
            other => panic!("not placed: {other}"),
        }
    }

    #[test]
    fn multiplexors_that_select_each_other_are_refused_at_their_line() {
        let text = format!(
            "{HEAD}BO_ 256 M1: 8 A\n SG_ Top M : 0|8@1+ (1,0) [0|0] \"\" B\n SG_ X m1M : 8|8@1+ (1,0) [0|0] \"\" B\n \
             SG_ Y m2M : 16|8@1+ (1,0) [0|0] \"\" B\n\nSG_MUL_VAL_ 256 X Y 1-1;\nSG_MUL_VAL_ 256 Y X 2-2;\n"
        );
        let (line, why) = refused(&text);
        assert_eq!(line, 10, "{why}");
        assert_eq!(why, "circular multiplexing in message M1: X by Y, Y by X; a multiplexor cannot select itself");
        let selfish = text.replace("SG_MUL_VAL_ 256 Y X 2-2;\n", "").replace("256 X Y 1-1", "256 X X 1-1");
        assert_eq!(
            refused(&selfish),
            (10, "circular multiplexing in message M1: X by X; a multiplexor cannot select itself".into())
        );
    }

    #[test]
    fn a_multiplexing_no_message_can_carry_is_refused_at_its_line() {
        let two = format!(
            "{HEAD}BO_ 256 M1: 8 A\n SG_ P M : 0|8@1+ (1,0) [0|0] \"\" B\n SG_ Q M : 8|8@1+ (1,0) [0|0] \"\" B\n"
        );
        let (line, why) = refused(&two);
        assert_eq!((line, why.starts_with("message M1 has two multiplexors (M), P and Q")), (7, true), "{why}");
        let orphan = format!("{HEAD}BO_ 256 M1: 8 A\n SG_ P m3 : 0|8@1+ (1,0) [0|0] \"\" B\n");
        assert_eq!(refused(&orphan), (6, "signal P is multiplexed (m), but message M1 has no multiplexor (M)".into()));
        let stranger =
            format!("{HEAD}BO_ 256 M1: 8 A\n SG_ P M : 0|8@1+ (1,0) [0|0] \"\" B\n\nSG_MUL_VAL_ 256 P Nobody 1-1;\n");
        assert_eq!(refused(&stranger), (8, "SG_MUL_VAL_ names signal Nobody, which message M1 does not have".into()));
        let ambiguous = format!(
            "{HEAD}BO_ 256 M1: 8 A\n SG_ P M : 0|8@1+ (1,0) [0|0] \"\" B\n SG_ Q m1M : 8|8@1+ (1,0) [0|0] \"\" B\n \
             SG_ R m2 : 16|8@1+ (1,0) [0|0] \"\" B\n\nSG_MUL_VAL_ 256 Q P 1-1;\n"
        );
        assert_eq!(
            refused(&ambiguous),
            (
                8,
                "signal R is multiplexed (m), but message M1 has several multiplexors (P, Q); \
                 an SG_MUL_VAL_ line must name the one that selects it"
                    .into()
            )
        );
    }

    #[test]
    fn nested_multiplexing_without_a_circle_loads() {
        let text = format!(
            "{HEAD}BO_ 256 M1: 8 A\n SG_ Top M : 0|8@1+ (1,0) [0|0] \"\" B\n SG_ X m1M : 8|8@1+ (1,0) [0|0] \"\" B\n \
             SG_ Y m2 : 16|8@1+ (1,0) [0|0] \"\" B\n\nSG_MUL_VAL_ 256 X Top 1-1;\nSG_MUL_VAL_ 256 Y X 2-2;\n"
        );
        assert!(load(text.as_bytes()).is_ok());
    }
}
