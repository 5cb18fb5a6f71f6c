//! A DBC file read for a simulation, from bytes nobody vouched for: too
//! large, not text, not DBC. Every refusal is one [`LoadError`] naming what
//! was wrong and, where the file has it, the line.
//!
//! Invariants:
//! - Nothing larger than [`MAX_DBC_BYTES`] is parsed, so a huge file costs
//!   no parse time and no memory beyond its bytes.
//! - UTF-8 is read as it is; anything else as Windows-1252 (what Vector's
//!   tools write), which decodes every byte.
//! - A parse error names its line: pest's position, or, for a value
//!   can-dbc refuses after parsing (a number out of range, an unknown
//!   multiplex indicator), the first line holding the refused text.
//! - Multiplexing no message can be built from (two multiplexors, circles
//!   through `SG_MUL_VAL_`) is refused at its line too (`multiplex.rs`).

use can_dbc::{Dbc, DbcError};

/// The largest DBC file a simulation reads: far above real databases
/// (a few MB for a whole vehicle).
pub const MAX_DBC_BYTES: usize = 32 << 20;

/// Why a DBC file cannot be simulated.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("the DBC file is {size} bytes; at most {MAX_DBC_BYTES} are read (is it a DBC file?)")]
    TooLarge { size: usize },
    #[error("line {line}: the DBC file does not parse: {why}")]
    Parse { line: usize, why: String },
    #[error("the DBC file does not parse: {why} (can-dbc names no line for it)")]
    Unplaced { why: String },
}

/// Parse a DBC file's bytes.
pub fn load(bytes: &[u8]) -> Result<Dbc, LoadError> {
    if bytes.len() > MAX_DBC_BYTES {
        return Err(LoadError::TooLarge { size: bytes.len() });
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => std::borrow::Cow::Borrowed(text),
        Err(_) => {
            let (text, _, _) = can_dbc::encodings::WINDOWS_1252.decode(bytes);
            text
        }
    };
    let dbc = Dbc::try_from(text.as_ref()).map_err(|e| placed(&text, e))?;
    crate::multiplex::check(&dbc, &text)?;
    Ok(dbc)
}

/// The error with its line.
fn placed(text: &str, error: DbcError) -> LoadError {
    let token = match &error {
        DbcError::Pest(pest) => {
            let line = match pest.line_col {
                pest::error::LineColLocation::Pos((line, _)) | pest::error::LineColLocation::Span((line, _), _) => line,
            };
            let why = pest.variant.message().into_owned();
            return LoadError::Parse { line, why };
        }
        DbcError::InvalidFloat(s)
        | DbcError::InvalidInt(s)
        | DbcError::InvalidUint(s)
        | DbcError::InvalidNumericValue(s)
        | DbcError::UnknownMultiplexIndicator(s) => Some(s.clone()),
        DbcError::MessageIdOutOfRange(id) => Some(id.to_string()),
        _ => None,
    };
    let why = error.to_string();
    match token.and_then(|token| line_holding(text, &token)) {
        Some(line) => LoadError::Parse { line, why },
        None => LoadError::Unplaced { why },
    }
}

/// The first line (from 1) holding `token` as a whole word.
fn line_holding(text: &str, token: &str) -> Option<usize> {
    if token.is_empty() {
        return None;
    }
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-';
    text.lines().position(|line| line.split(|c: char| !word(c)).any(|w| w == token)).map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "VERSION \"\"\n\nBU_: A B\n\nBO_ 256 M1: 8 A\n SG_ S : 0|8@1+ (1,0) [0|255] \"\" B\n";

    #[test]
    fn a_good_file_loads_as_utf8_or_windows_1252() {
        assert_eq!(load(GOOD.as_bytes()).unwrap().messages.len(), 1);
        let latin = GOOD.replace("\"\" B", "\"\u{b0}C\" B");
        let cp1252: Vec<u8> = latin.chars().map(|c| c as u32 as u8).collect();
        assert_eq!(load(&cp1252).unwrap().messages[0].signals[0].unit, "\u{b0}C");
    }

    #[test]
    fn a_syntax_error_names_its_line() {
        let broken = GOOD.replace(" SG_ S : 0|8@1+", " SG_ S : 0|8@9+");
        let err = load(broken.as_bytes()).unwrap_err();
        assert!(matches!(err, LoadError::Parse { line: 6, .. }), "{err}");
        assert!(err.to_string().starts_with("line 6: the DBC file does not parse"), "{err}");
    }

    #[test]
    fn a_value_out_of_range_names_the_line_holding_it() {
        let broken = GOOD.replace("BO_ 256 M1", "BO_ 99999999999 M1");
        let err = load(broken.as_bytes()).unwrap_err();
        assert!(matches!(err, LoadError::Parse { line: 5, .. }), "{err}");
    }

    #[test]
    fn a_huge_file_is_refused_before_parsing_with_its_size() {
        let huge = vec![b' '; MAX_DBC_BYTES + 1];
        let err = load(&huge).unwrap_err();
        assert_eq!(err, LoadError::TooLarge { size: MAX_DBC_BYTES + 1 });
    }

    #[test]
    fn random_bytes_never_panic() {
        const ALPHABET: &[u8] = b"BO_ SG_ BU_:|@+-()[]\"0123456789 M m\n";
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for len in 0..400 {
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    ALPHABET[(state % ALPHABET.len() as u64) as usize]
                })
                .collect();
            let _ = load(&bytes);
        }
    }
}
