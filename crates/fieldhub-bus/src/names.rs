//! Names clients and operators choose (channels, ports, clients): what a
//! valid one is, and how one is written into a log line safely.

use fieldhub_proto::limits::MAX_NAME_LEN;

/// Check a channel, port or hub name: 1 to `MAX_NAME_LEN` bytes of letters,
/// digits, `_`, `-` and `.`.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("'{}' must be 1 to {MAX_NAME_LEN} bytes", printable(name)));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b)) {
        return Err(format!("'{}' may only contain letters, digits, '_', '-' and '.'", printable(name)));
    }
    Ok(())
}

/// Text a client chose, made safe for one log line: control characters
/// (line breaks that would forge a log line, terminal escapes) are written
/// as escapes (`\n`, `\u{1b}`).
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}
