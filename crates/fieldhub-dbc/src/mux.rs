//! Which multiplexor selects each signal of a message, at any depth: the
//! one definition the decoder here and the rest-bus simulation's encoder
//! (`fieldhub-rbs`) share, so a frame built is a frame decoded alike.
//!
//! - Extended multiplexing: a signal's `SG_MUL_VAL_` names its multiplexor
//!   and the value ranges that select it; that multiplexor may itself be
//!   multiplexed (`mNM`), so selection is a chain up to a top multiplexor.
//! - Simple multiplexing (no `SG_MUL_VAL_` for the signal): `mN` is
//!   selected by value N of the message's one multiplexor (the one signal
//!   marked `M` or `mNM`), as python `cantools` reads it.
//!
//! Invariants:
//! - A signal is in a frame only when every multiplexor on its chain is in
//!   the frame and selects the next one down ([`deselected_by`]).
//! - Walking a chain takes at most as many steps as the message has
//!   signals: a file whose multiplexors select each other in a circle
//!   leaves the signals on it out, never loops (`fieldhub-rbs` refuses such
//!   a file naming its line before it gets here).
//! - A multiplexed signal whose multiplexor cannot be told is an error
//!   naming the signal: none in the message, or several and no
//!   `SG_MUL_VAL_` saying which.

use can_dbc::{Dbc, Message, MultiplexIndicator};

/// When a signal is in a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Presence {
    /// Always (a plain signal, or a top multiplexor).
    Always,
    /// When signal `multiplexor` (an index into the message's signals) is
    /// in the frame and its raw value is in one of `ranges` (inclusive).
    When { multiplexor: usize, ranges: Vec<(u64, u64)> },
}

/// Why a signal's multiplexor cannot be told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MuxError {
    #[error("signal {signal} is multiplexed (m), but message {message} has no multiplexor (M)")]
    NoMultiplexor { message: String, signal: String },
    #[error(
        "signal {signal} is multiplexed (m), but message {message} has several multiplexors ({multiplexors}); \
         an SG_MUL_VAL_ line must name the one that selects it"
    )]
    Ambiguous { message: String, signal: String, multiplexors: String },
    #[error(
        "signal {signal} of message {message} is selected by '{multiplexor}' (SG_MUL_VAL_), which it does not have"
    )]
    UnknownMultiplexor { message: String, signal: String, multiplexor: String },
}

/// Each signal's presence, in the order of `message.signals`.
pub fn presences(dbc: &Dbc, message: &Message) -> Result<Vec<Presence>, MuxError> {
    let index_of = |name: &str| message.signals.iter().position(|s| s.name == name);
    let multiplexors: Vec<&str> = message
        .signals
        .iter()
        .filter(|s| {
            matches!(
                s.multiplexer_indicator,
                MultiplexIndicator::Multiplexor | MultiplexIndicator::MultiplexorAndMultiplexedSignal(_)
            )
        })
        .map(|s| s.name.as_str())
        .collect();
    let mut presences = Vec::with_capacity(message.signals.len());
    for signal in &message.signals {
        let extended =
            dbc.extended_multiplex.iter().find(|x| x.message_id == message.id && x.signal_name == signal.name);
        let presence = match (extended, signal.multiplexer_indicator) {
            (Some(x), _) => Presence::When {
                multiplexor: index_of(&x.multiplexor_signal_name).ok_or_else(|| MuxError::UnknownMultiplexor {
                    message: message.name.clone(),
                    signal: signal.name.clone(),
                    multiplexor: x.multiplexor_signal_name.clone(),
                })?,
                ranges: x.mappings.iter().map(|m| (m.min_value, m.max_value)).collect(),
            },
            (
                None,
                MultiplexIndicator::MultiplexedSignal(value)
                | MultiplexIndicator::MultiplexorAndMultiplexedSignal(value),
            ) => {
                let others: Vec<&str> = multiplexors.iter().copied().filter(|&m| m != signal.name).collect();
                let multiplexor = match others[..] {
                    [one] => index_of(one).unwrap_or_default(),
                    [] => {
                        return Err(MuxError::NoMultiplexor {
                            message: message.name.clone(),
                            signal: signal.name.clone(),
                        })
                    }
                    _ => {
                        return Err(MuxError::Ambiguous {
                            message: message.name.clone(),
                            signal: signal.name.clone(),
                            multiplexors: multiplexors.join(", "),
                        })
                    }
                };
                Presence::When { multiplexor, ranges: vec![(value, value)] }
            }
            (None, _) => Presence::Always,
        };
        presences.push(presence);
    }
    Ok(presences)
}

/// The multiplexor (its index) that leaves signal `index` out of a frame
/// whose signals' raw values `raw` gives (`None`: not in the frame), or
/// `None` when every multiplexor on its chain selects it. The lowest
/// multiplexor on the chain that fails is named; on a circle, the signal
/// itself.
pub fn deselected_by(presences: &[Presence], index: usize, raw: impl Fn(usize) -> Option<u64>) -> Option<usize> {
    let mut current = index;
    for _ in 0..=presences.len() {
        match presences.get(current)? {
            Presence::Always => return None,
            Presence::When { multiplexor, ranges } => {
                let selects = raw(*multiplexor).is_some_and(|r| ranges.iter().any(|&(lo, hi)| (lo..=hi).contains(&r)));
                if !selects {
                    return Some(*multiplexor);
                }
                current = *multiplexor;
            }
        }
    }
    Some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DBC: &str = r#"VERSION ""

BU_: A B

BO_ 256 Nested: 8 A
 SG_ Top M : 0|8@1+ (1,0) [0|0] "" B
 SG_ Sub m1M : 8|8@1+ (1,0) [0|0] "" B
 SG_ Deep m2 : 16|8@1+ (1,0) [0|0] "" B
 SG_ Flat m3 : 16|8@1+ (1,0) [0|0] "" B

SG_MUL_VAL_ 256 Sub Top 1-1;
SG_MUL_VAL_ 256 Deep Sub 2-2, 4-5;
SG_MUL_VAL_ 256 Flat Top 3-3;
"#;

    fn nested() -> (Dbc, Vec<Presence>) {
        let dbc = Dbc::try_from(DBC).unwrap();
        let presences = presences(&dbc, &dbc.messages[0]).unwrap();
        (dbc, presences)
    }

    #[test]
    fn a_signal_is_present_only_when_every_multiplexor_on_its_chain_selects_it() {
        let (_, p) = nested();
        assert_eq!(p[2], Presence::When { multiplexor: 1, ranges: vec![(2, 2), (4, 5)] });
        let with = |top: u64, sub: u64| move |i: usize| [Some(top), Some(sub), Some(0), Some(0)][i];
        assert_eq!(deselected_by(&p, 2, with(1, 2)), None, "Top 1 selects Sub, Sub 2 selects Deep");
        assert_eq!(deselected_by(&p, 2, with(1, 5)), None, "a range");
        assert_eq!(deselected_by(&p, 2, with(1, 3)), Some(1), "Sub 3 leaves Deep out");
        assert_eq!(deselected_by(&p, 2, with(3, 2)), Some(0), "Top 3 leaves Sub out, and Deep with it");
        assert_eq!(deselected_by(&p, 3, with(3, 2)), None);
        assert_eq!(deselected_by(&p, 0, |_| None), None, "the top multiplexor is always there");
    }

    #[test]
    fn a_circle_leaves_its_signals_out_and_ends() {
        let circle = vec![
            Presence::When { multiplexor: 1, ranges: vec![(0, u64::MAX)] },
            Presence::When { multiplexor: 0, ranges: vec![(0, u64::MAX)] },
        ];
        assert_eq!(deselected_by(&circle, 0, |_| Some(1)), Some(0));
    }

    #[test]
    fn a_multiplexed_signal_without_a_multiplexor_it_can_name_is_an_error() {
        let (dbc, _) = nested();
        let ambiguous = DBC.replace("SG_MUL_VAL_ 256 Flat Top 3-3;\n", "");
        let dbc2 = Dbc::try_from(ambiguous.as_str()).unwrap();
        assert_eq!(
            presences(&dbc2, &dbc2.messages[0]).unwrap_err().to_string(),
            "signal Flat is multiplexed (m), but message Nested has several multiplexors (Top, Sub); \
             an SG_MUL_VAL_ line must name the one that selects it"
        );
        let mut alone = dbc.messages[0].clone();
        alone.signals.retain(|s| s.name == "Flat");
        let plain = Dbc::try_from("VERSION \"\"\n\nBU_: A\n").unwrap();
        assert!(matches!(presences(&plain, &alone), Err(MuxError::NoMultiplexor { .. })));
    }
}
