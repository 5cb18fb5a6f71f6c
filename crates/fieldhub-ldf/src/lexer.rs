//! The LDF's tokens (LIN 2.x specification, section 9: "LIN description
//! file"): identifiers, numbers, strings and the punctuation `{ } ; : , =`,
//! each with its position. `//` and `/* */` comments are skipped.
//!
//! Never panics on any input; the text has been bounded by the caller
//! (`MAX_LDF_BYTES`), so the token list is too.

use crate::error::{LdfError, Pos};

#[derive(Clone, Debug, PartialEq)]
pub enum Tok<'a> {
    /// A name or keyword: letters, digits and `_`, not starting with a digit.
    Ident(&'a str),
    /// A number as written: decimal, `0x` hexadecimal or with a fraction.
    Number(&'a str),
    /// A string's contents, without its quotes.
    Str(&'a str),
    /// One of `{ } ; : , =`.
    Punct(char),
}

impl Tok<'_> {
    /// The token in words, for messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(text) => format!("'{text}'"),
            Tok::Number(text) => format!("the number {text}"),
            Tok::Str(text) => format!("the string \"{text}\""),
            Tok::Punct(c) => format!("'{c}'"),
        }
    }
}

/// Split `text` into tokens.
pub fn tokens(text: &str) -> Result<Vec<(Tok<'_>, Pos)>, LdfError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line, mut line_start) = (0usize, 1u32, 0usize);
    let pos_of = |i: usize, line: u32, line_start: usize| Pos { line, column: (i - line_start) as u32 + 1 };
    while i < bytes.len() {
        let c = bytes[i];
        let here = pos_of(i, line, line_start);
        match c {
            b'\n' => {
                i += 1;
                line += 1;
                line_start = i;
            }
            c if c.is_ascii_whitespace() => i += 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2;
                loop {
                    match bytes.get(i) {
                        None => return Err(LdfError::at(here, "a /* comment is never closed; end it with */")),
                        Some(b'*') if bytes.get(i + 1) == Some(&b'/') => {
                            i += 2;
                            break;
                        }
                        Some(b'\n') => {
                            i += 1;
                            line += 1;
                            line_start = i;
                        }
                        Some(_) => i += 1,
                    }
                }
            }
            b'"' => {
                let start = i + 1;
                let Some(len) = bytes[start..].iter().position(|&b| b == b'"' || b == b'\n') else {
                    return Err(LdfError::at(here, "a string is never closed; end it with \" on the same line"));
                };
                if bytes[start + len] == b'\n' {
                    return Err(LdfError::at(here, "a string is never closed; end it with \" on the same line"));
                }
                out.push((Tok::Str(&text[start..start + len]), here));
                i = start + len + 1;
            }
            b'{' | b'}' | b';' | b':' | b',' | b'=' => {
                out.push((Tok::Punct(c as char), here));
                i += 1;
            }
            c if c.is_ascii_digit() || (c == b'-' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit)) => {
                let start = i;
                i += 1;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'.') {
                    i += 1;
                }
                out.push((Tok::Number(&text[start..i]), here));
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                out.push((Tok::Ident(&text[start..i]), here));
            }
            _ => {
                let shown = text[i..].chars().next().unwrap_or('?');
                return Err(LdfError::at(
                    here,
                    format!(
                        "unexpected character {shown:?}; an LDF has names, numbers, \"strings\" and {{ }} ; : , = only"
                    ),
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_carry_their_line_and_column_and_comments_are_skipped() {
        let toks = tokens("a = 0x3C; // note\n/* x\n y */ \"2.1\" 19.2 kbps").unwrap();
        let kinds: Vec<_> = toks.iter().map(|(t, _)| t.clone()).collect();
        assert_eq!(
            kinds,
            [
                Tok::Ident("a"),
                Tok::Punct('='),
                Tok::Number("0x3C"),
                Tok::Punct(';'),
                Tok::Str("2.1"),
                Tok::Number("19.2"),
                Tok::Ident("kbps")
            ]
        );
        assert_eq!(toks[4].1, Pos { line: 3, column: 7 });
    }

    #[test]
    fn an_open_comment_or_string_and_a_stray_character_are_errors_with_their_place() {
        assert_eq!(tokens("a /* b").unwrap_err().column, 3);
        assert_eq!(tokens("\n  \"abc").unwrap_err().line, 2);
        let err = tokens("a $").unwrap_err();
        assert!(err.message.contains("'$'"), "{err}");
    }
}
